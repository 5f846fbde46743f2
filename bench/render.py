"""Turns the bench driver's JSON (crates/sqsafe-bench) and criterion's estimates into bench/RESULTS.md and the chart.

Usage: render.py RESULTS_JSON --md OUT.md --png OUT.png [--criterion target/criterion]
       render.py BILL_JSON --md bench/RESULTS.md --bill-only   (section 1b alone, from `sqsafe-bench --bill-only`)
       render.py API_JSON --md bench/RESULTS.md --api-only     (section 8 alone, from `sqsafe-bench --api-only`)
       render.py KINESIS_JSON --md bench/RESULTS.md --kinesis-only   (section 9 alone, from `sqsafe-bench --kinesis-only`)
Runs in the bench venv (.venv-bench: matplotlib, Powertools and awslambdaric, whose versions it reports).
"""

import argparse
import datetime
import importlib.metadata
import json
import os
import platform
import subprocess
from pathlib import Path

from chart import chart
from perf_report import crate_of, parse_perf, profile_groups

ROOT = Path(__file__).resolve().parent.parent
MAIN = ["naive", "sqsafe", "powertools"]
LABEL = {
    "naive": "naive Rust (floor)",
    "sqsafe": "sqsafe (charge-payment)",
    "sqsafe-keyed": "sqsafe, keyed mode",
    "sqsafe-cached": "sqsafe, local cache on",
    "sqsafe-quiet": "sqsafe, logs off",
    "sqsafe-multi-thread": "sqsafe, multi-threaded Tokio",
    "powertools": "Powertools (Python)",
    "powertools-cached": "Powertools, local cache on",
}
NETWORKS = [("moto", 0), ("moto", 5), ("canned", 0), ("canned", 5)]
# Issue #12's targets.
TARGET_CPU_US = 300
TARGET_TOOLKIT_US = 4
TARGET_TOOLKIT_LOGS_US = 8
TARGET_ROUND_TRIPS = 3
TARGET_BATCH_MS = 25
TARGET_INIT_MS = 10
TARGET_RSS_MIB = 16


def version(package):
    try:
        return importlib.metadata.version(package)
    except importlib.metadata.PackageNotFoundError:
        return "not installed"


def command(*args):
    try:
        return subprocess.run(args, capture_output=True, text=True, check=True, timeout=30).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        return "unknown"


def cpu_model():
    for line in Path("/proc/cpuinfo").read_text().splitlines():
        if line.startswith("model name"):
            return line.split(":", 1)[1].strip()
    return platform.processor() or "unknown"


def memory_gib():
    for line in Path("/proc/meminfo").read_text().splitlines():
        if line.startswith("MemTotal:"):
            return int(line.split()[1]) / 1024 / 1024
    return 0.0


def criterion_estimates(folder):
    """Mean time per iteration (ns) and its confidence interval, by criterion's full id."""
    found = {}
    for meta in Path(folder).glob("**/new/benchmark.json"):
        estimates = meta.parent / "estimates.json"
        if not estimates.exists():
            continue
        mean = json.loads(estimates.read_text())["mean"]
        interval = mean["confidence_interval"]
        found[json.loads(meta.read_text())["full_id"]] = (
            mean["point_estimate"],
            interval["lower_bound"],
            interval["upper_bound"],
        )
    return found


def ratio(value, base):
    if value is None or not base:
        return "–"
    return f"{value / base:.2f}×"


def num(value, digits=1):
    return "–" if value is None else f"{value:,.{digits}f}"


def met(ok):
    return "**met**" if ok else "**missed**"


class Results:
    def __init__(self, data):
        self.data = data
        self.runs = data["runs"]

    def run(self, peer, purpose="latency", kind="fresh", backend="moto", latency=0, size=10):
        for r in self.runs:
            if (r["peer"], r["purpose"], r["kind"], r["backend"], r["latency_ms"], r["batch_size"]) == (
                peer, purpose, kind, backend, latency, size,
            ):
                return r
        return None

    def process(self, peer):
        return next((p for p in self.data["processes"] if p["peer"] == peer), None)


def median(values):
    values = sorted(values)
    return values[(len(values) - 1) // 2] if values else None


def render(data, criterion, md_path, png_path):
    res = Results(data)
    meta = data["meta"]
    out = []
    w = out.append
    started = datetime.datetime.fromtimestamp(meta["started_unix"], datetime.timezone.utc)
    w("# sqsafe against its peers: benchmark results\n")
    w(
        "Written by `make bench` (scripts/bench.sh: crates/sqsafe-bench drives, bench/render.py writes this file); "
        "bench/README.md says what is measured and how. Every ratio compares figures of this same run; "
        "`× sqsafe` is the peer's figure divided by sqsafe's.\n"
    )
    if meta["mode"] != "full":
        w(f"**This is a `{meta['mode']}` run: a few batches per peer to check the harness. Its timings mean nothing.**\n")

    w("## Machine, versions, load\n")
    load_s, load_e = meta["load_start"], meta["load_end"]
    w(f"- date: {started:%Y-%m-%d %H:%M} UTC; the run took {meta['seconds']:.0f} s ({meta['mode']}, {meta['profile']} build)")
    w(f"- machine: {meta['cores']} cores, {cpu_model()}, {memory_gib():.0f} GiB; kernel clock tick {meta['clock_tick_ms']:.0f} ms")
    w(
        f"- load average (1/5/15 min): {load_s[0]:.2f} / {load_s[1]:.2f} / {load_s[2]:.2f} at the start, "
        f"{load_e[0]:.2f} / {load_e[1]:.2f} / {load_e[2]:.2f} at the end"
    )
    if max(load_s[0], load_e[0]) > 0.5:
        w(
            f"  - **the machine was busy** (load above 0.5 on {meta['cores']} cores, part of it this bench's own "
            "processes): latency and CPU figures are noisy and pessimistic; rerun on a quiet machine for figures to quote"
        )
    w(f"- {command('rustc', '--version')}; Python {platform.python_version()}")
    moto = command(str(ROOT / ".venv/bin/python"), "-c", "import moto; print(moto.__version__)")
    w(
        f"- moto server {moto}; aws-lambda-powertools {version('aws-lambda-powertools')}, awslambdaric "
        f"{version('awslambdaric')}, boto3 {version('boto3')}"
    )
    w("")

    w("## Peers\n")
    w("All run as processes under sqsafe-local's Lambda Runtime API emulator, get the same SQS events (batches of "
      "`PaymentRequested`, shaped as the local event source mapping shapes them), and have the same effect: one "
      "`POST /v1/charges` to the local payments API per payment, with an `Idempotency-Key`. DynamoDB (moto) and the "
      "payments API are reached through the bench proxy, which adds the latency and counts the requests.\n")
    w("| peer | what |\n|---|---|")
    w("| naive Rust (floor) | `bench/peers/naive-rust`: `lambda_runtime`, records concurrently, no idempotency record, no logs |")
    w("| sqsafe | `functions/charge-payment`, as deployed (`sqsafe::main`): batch processor, idempotency layer on DynamoDB, JSON logs, EMF |")
    w("| sqsafe, local cache on / logs off / multi-threaded Tokio | the same function with the idempotency layer's local cache (façade hook) / with `AWS_LAMBDA_LOG_LEVEL=ERROR` / with `SQSAFE_TOKIO_RUNTIME=multi-thread` (a worker per core instead of the one thread `sqsafe::main` runs on) |")
    w("| Powertools | `bench/peers/powertools`: `BatchProcessor` + `idempotent_function` on `DynamoDBPersistenceLayer`, Logger; awslambdaric as runtime client; `use_local_cache` off (on for the cached variant) |")
    w("")

    sqsafe_cpu = res.run("sqsafe")
    canned5 = {p: res.run(p, backend="canned", latency=5) for p in MAIN}
    moto5 = {p: res.run(p, backend="moto", latency=5) for p in MAIN}
    proc_ = {p: res.process(p) for p in LABEL}
    toolkit = {
        key: criterion.get(f"toolkit/{key}")
        for key in ("fresh/no-logs", "fresh/json-logs", "duplicate/no-logs", "duplicate/json-logs")
    }

    w("## Targets (issue #12)\n")
    w("| target | measured (sqsafe) | |\n|---|---|---|")
    cpu_runs = [(b, l, res.run("sqsafe", backend=b, latency=l)) for b, l in (("moto", 0), ("canned", 0), ("canned", 5))]
    cpu_runs = [(b, l, r) for b, l, r in cpu_runs if r]
    if cpu_runs:
        measured = "; ".join(f"{r['cpu_us_per_msg']:.0f} µs ({b}, {l} ms)" for b, l, r in cpu_runs)
        verdict = ", ".join(f"{met(r['cpu_us_per_msg'] <= TARGET_CPU_US)} ({b}, {l} ms)" for b, l, r in cpu_runs)
        w(f"| client CPU per fresh message ≤ {TARGET_CPU_US} µs | {measured} | {verdict} |")
    for key, target in (("fresh/no-logs", TARGET_TOOLKIT_US), ("fresh/json-logs", TARGET_TOOLKIT_LOGS_US)):
        est = toolkit[key]
        if est:
            v = est[0] / 10 / 1000
            w(f"| toolkit CPU per message, in-memory, {key.split('/')[1]} ≤ {target} µs | {v:.2f} µs | {met(v <= target)} |")
        else:
            w(f"| toolkit CPU per message, {key.split('/')[1]} ≤ {target} µs | not measured in this run | |")
    if canned5["sqsafe"]:
        paths = canned5["sqsafe"]["critical_path"]
        w(f"| critical-path round trips per batch of 10 ≤ {TARGET_ROUND_TRIPS} | {paths['median']} (canned, 5 ms; min {paths['min']}, max {paths['max']}) | {met(paths['median'] <= TARGET_ROUND_TRIPS)} |")
        p50 = canned5["sqsafe"]["duration"]["p50_ms"]
        w(f"| batch of 10 fresh, non-bottleneck backend, 5 ms: ≤ {TARGET_BATCH_MS} ms | p50 {p50:.1f} ms, p99 {canned5['sqsafe']['duration']['p99_ms']:.1f} ms | {met(p50 <= TARGET_BATCH_MS)} (p50) |")
    if proc_["sqsafe"]:
        init = median(proc_["sqsafe"]["init_ms"])
        if init is not None:
            w(f"| init ≤ {TARGET_INIT_MS} ms | {init:.1f} ms (median of {len(proc_['sqsafe']['init_ms'])}) | {met(init <= TARGET_INIT_MS)} |")
        rss = proc_["sqsafe"]["peak_rss_kib"] / 1024
        w(f"| peak RSS ≤ {TARGET_RSS_MIB} MiB | {rss:.1f} MiB | {met(rss <= TARGET_RSS_MIB)} |")
    w("")
    misses(w, res, toolkit, data.get("profiles", []), data.get("instructions", []))

    w("## 1. DynamoDB requests per message, by operation (counted at the proxy)\n")
    w("A batch of 10 payments, then the same batch again: a duplicate is replayed from the table (no local cache), "
      "a cache hit is answered by the process's local cache of what it completed. Payments API calls per message in "
      "the last column.\n")
    w("| peer | scenario | PutItem | UpdateItem | GetItem | BatchGetItem | other | DynamoDB total | × sqsafe | payments API |")
    w("|---|---|---|---|---|---|---|---|---|---|")
    base = {}
    for r in res.runs:
        if r["purpose"] == "requests" and r["peer"] == "sqsafe":
            base[r["kind"]] = r["dynamodb_total_per_msg"]
    base["cache_hit"] = base.get("duplicate")
    for r in res.runs:
        if r["purpose"] != "requests":
            continue
        ops = r["dynamodb_per_msg"]
        other = sum(v for k, v in ops.items() if k not in ("PutItem", "UpdateItem", "GetItem", "BatchGetItem"))
        scenario = {"fresh": "fresh", "duplicate": "duplicate", "cache_hit": "cache hit"}[r["kind"]]
        w(
            f"| {LABEL[r['peer']]} | {scenario} | {ops.get('PutItem', 0):g} | {ops.get('UpdateItem', 0):g} | "
            f"{ops.get('GetItem', 0):g} | {ops.get('BatchGetItem', 0):g} | {other:g} | {r['dynamodb_total_per_msg']:g} | "
            f"{ratio(r['dynamodb_total_per_msg'], base.get(r['kind'])) if r['peer'] != 'naive' else '–'} | {r['payments_per_msg']:g} |"
        )
    w("")

    bill(w, data)

    w("## 2. Critical-path round trips per batch of 10 fresh payments\n")
    w("Measured at the proxy: the longest chain of requests (DynamoDB and payments API) each of which arrived after "
      "the previous one was answered. Median over the batches, [min–max].\n")
    w("On moto, requests also queue inside moto (it serves them about one at a time), so requests of different "
      "records end up chained: the canned column is the design's figure.\n")
    w("| peer | moto, 5 ms | canned, 5 ms | × sqsafe |\n|---|---|---|---|")
    for p in MAIN:
        cells = []
        for run in (moto5[p], canned5[p]):
            cells.append("–" if not run else f"{run['critical_path']['median']} [{run['critical_path']['min']}–{run['critical_path']['max']}]")
        r = canned5[p]
        b = canned5["sqsafe"]
        w(f"| {LABEL[p]} | {cells[0]} | {cells[1]} | {ratio(r and r['critical_path']['median'], b and b['critical_path']['median'])} |")
    w("")

    w("## 3. Batch latency, 10 fresh payments per batch\n")
    w("Invoke to answer, at the emulator. moto: the real local backend (slow: Python, one request at a time in "
      "effect); canned: DynamoDB answered `{}` by the proxy after the delay alone, the network floor. The added "
      "latency applies to every DynamoDB and payments API request. Floor = round trips × latency (round trips are "
      "only counted with added latency: with none, answers come back before the next request of the same "
      "round is sent).\n")
    w("![batch latency per peer](batch-latency.png)\n")
    w("| peer | network | batches | p50 ms | p99 ms | × sqsafe (p50) | round trips | floor ms | client CPU µs/msg |")
    w("|---|---|---|---|---|---|---|---|---|")
    for backend, latency in NETWORKS:
        base_run = res.run("sqsafe", backend=backend, latency=latency)
        for p in MAIN:
            r = res.run(p, backend=backend, latency=latency)
            if not r:
                continue
            d = r["duration"]
            floor = r["critical_path"]["median"] * latency if latency else None
            w(
                f"| {LABEL[p]} | {backend}, {latency} ms | {r['batches']} | {d['p50_ms']:.1f} | {d['p99_ms']:.1f} | "
                f"{ratio(d['p50_ms'], base_run and base_run['duration']['p50_ms'])} | "
                f"{r['critical_path']['median'] if latency else '–'} | "
                f"{num(floor, 0)} | {r['cpu_us_per_msg']:.0f} |"
            )
    w("")
    for p in MAIN:
        r = canned5[p]
        if r:
            floor = r["critical_path"]["median"] * 5
            w(f"- {LABEL[p]} on the canned backend at 5 ms: p50 {r['duration']['p50_ms']:.1f} ms against a network floor of "
              f"{floor} ms ({r['critical_path']['median']} round trips): {r['duration']['p50_ms'] - floor:+.1f} ms of its own")
    w("")

    w("## 4. Client CPU per message, cold start, memory\n")
    w("CPU: `utime + stime` of the function's process (all threads) from `/proc/<pid>/stat` across a run, per "
      "message (moto, no added latency); its resolution is one clock tick per process, so short runs are coarse. "
      "Duplicate: the same payments again (replayed from the table, or from the local cache for the cached "
      "variants). Cold start: spawn to first batch of 10 answered, under the Runtime API emulator; init: spawn to "
      "the runtime's first `GET /next` (Lambda's Init Duration). Peak RSS: `VmHWM` after all of the peer's runs.\n")
    w("| peer | fresh CPU µs/msg (user + sys) | × sqsafe | duplicate CPU µs/msg | threads | cold start ms (median) | init ms (median) | peak RSS MiB | log lines/msg |")
    w("|---|---|---|---|---|---|---|---|---|")
    for p in LABEL:
        fresh = res.run(p)
        again = res.run(p, kind="cache_hit" if p.endswith("cached") else "duplicate")
        pr = proc_[p]
        if not fresh or not pr:
            continue
        w(
            f"| {LABEL[p]} | {fresh['cpu_us_per_msg']:.0f} ({fresh['user_us_per_msg']:.0f} + {fresh['system_us_per_msg']:.0f}) | "
            f"{ratio(fresh['cpu_us_per_msg'], sqsafe_cpu and sqsafe_cpu['cpu_us_per_msg'])} | "
            f"{num(again and again['cpu_us_per_msg'], 0)} | {pr['threads']} | {num(median(pr['cold_start_ms']))} | "
            f"{num(median(pr['init_ms']))} | {pr['peak_rss_kib'] / 1024:.1f} | {fresh['log_lines_per_msg']:.1f} |"
        )
    w("")
    where_cpu(w, res, toolkit, data.get("profiles", []), data.get("instructions", []))

    w("## 5. Toolkit CPU per message (criterion, in-memory store, no I/O)\n")
    if any(toolkit.values()):
        w("crates/sqsafe-bench/benches/toolkit.rs: batches of 10 through sqsafe's batch processor and idempotency "
          "layer as the façade runs charge-payment, effect without I/O; JSON logs formatted at `info` into a sink. "
          "Mean per message, [95% interval].\n")
        w("| path | no logs µs/msg | JSON logs µs/msg | logs cost |\n|---|---|---|---|")
        for path in ("fresh", "duplicate"):
            a, b = toolkit[f"{path}/no-logs"], toolkit[f"{path}/json-logs"]
            cell = lambda e: "–" if not e else f"{e[0] / 1e4:.2f} [{e[1] / 1e4:.2f}–{e[2] / 1e4:.2f}]"
            w(f"| {path} | {cell(a)} | {cell(b)} | {ratio(b and b[0], a and a[0])} |")
        claim = {k: v for k, v in criterion.items() if not k.startswith("toolkit/")}
        if claim:
            w("\nThe idempotency core alone (crates/sqsafe-idempotency/benches/claim.rs), per message:\n")
            w("| benchmark | µs |\n|---|---|")
            for name, (mean, _, _) in sorted(claim.items()):
                w(f"| {name} | {mean / 1000:.2f} |")
    else:
        w("Not run in this mode (criterion runs in `make bench` only).")
    w("")

    w("## 6. Local pipeline throughput\n")
    pipe = data["pipeline"]
    w("moto's own ceiling: conditional PutItem straight to moto, no proxy.\n")
    w("| clients | writes/s | moto CPU % of a core |\n|---|---|---|")
    for c in pipe["moto_ceiling"]:
        w(f"| {c['clients']} | {c['writes_per_s']:.0f} | {c['moto_cpu_pct']:.0f} |")
    w("\nThe pipeline: a queue in moto, sqsafe-local's event source mapping (batches of 10, delete what succeeded), "
      "one function process per poller, DynamoDB through the proxy with no added latency.\n")
    w("| peer | pollers | messages | msgs/s | × sqsafe | DynamoDB req/msg | DynamoDB req/s | moto CPU % | functions CPU % |")
    w("|---|---|---|---|---|---|---|---|---|")
    base_tp = {r["pollers"]: r["messages_per_s"] for r in pipe["runs"] if r["peer"] == "sqsafe"}
    for r in pipe["runs"]:
        w(
            f"| {LABEL[r['peer']]} | {r['pollers']} | {r['messages']} | {r['messages_per_s']:.0f} | "
            f"{ratio(r['messages_per_s'], base_tp.get(r['pollers']))} | {r['dynamodb_per_msg']:.1f} | "
            f"{r['dynamodb_per_s']:.0f} | {r['moto_cpu_pct']:.0f} | {r['functions_cpu_pct']:.0f} |"
        )
    w("")
    bottleneck(w, pipe)

    w("## 7. How cost grows\n")
    w("### Batch size 1 → 10 (canned backend, 5 ms)\n")
    w("| peer | batch size | p50 ms | p99 ms | × sqsafe (p50) | round trips | client CPU µs/msg |\n|---|---|---|---|---|---|---|")
    for p in MAIN:
        for r in res.runs:
            if r["peer"] == p and r["purpose"] == "batch_size":
                d = r["duration"]
                b = res.run("sqsafe", purpose="batch_size", backend="canned", latency=5, size=r["batch_size"])
                w(
                    f"| {LABEL[p]} | {r['batch_size']} | {d['p50_ms']:.1f} | {d['p99_ms']:.1f} | "
                    f"{ratio(d['p50_ms'], b and b['duration']['p50_ms'])} | {r['critical_path']['median']} | "
                    f"{r['cpu_us_per_msg']:.0f} |"
                )
    w("\n### Idempotency table size (moto, no added latency)\n")
    w("| peer | records in the table | fresh p50 ms | × sqsafe | duplicate p50 ms | × sqsafe | fresh CPU µs/msg |")
    w("|---|---|---|---|---|---|---|")
    for t in data["table_sizes"]:
        b = next((x for x in data["table_sizes"] if x["peer"] == "sqsafe" and x.get("prefilled") == t.get("prefilled")), None)
        w(
            f"| {LABEL[t['peer']]} | {t['records']:,} | {t['fresh']['p50_ms']:.1f} | "
            f"{ratio(t['fresh']['p50_ms'], b and b['fresh']['p50_ms'])} | {t['duplicate']['p50_ms']:.1f} | "
            f"{ratio(t['duplicate']['p50_ms'], b and b['duplicate']['p50_ms'])} | {t['fresh_cpu_us_per_msg']:.0f} |"
        )
    w("")
    for note in data["table_size_notes"]:
        w(f"- {note}")
    w("")

    api_section(w, data)

    kinesis_section(w, data)

    ahead(w, res, proc_, pipe)

    w("## Checks (facts, not timings)\n")
    failed = [c for c in data["checks"] if not c["ok"]]
    w(f"{len(data['checks']) - len(failed)} of {len(data['checks'])} passed: requests per message by operation for "
      "every run, every record answered without failure, every message of the pipeline deleted, one charge per "
      "payment at the payments API.")
    for c in failed:
        w(f"- FAILED: {c['what']}: {c['detail']}")
    w("")

    w("## Caveats\n")
    w("- moto answers every request with `Connection: close`; the proxy keeps the client's connection open (as AWS "
      "does), so client CPU and latency include no TCP setup per request. moto's own connection churn is moto's.")
    w("- The added latency is a `tokio::time::sleep` per request (millisecond timer: 5 ms means 5 to 6 ms).")
    w("- Every process (moto, the driver and its proxy and payments API, the function) shares the same cores, and "
      "the figures above were measured while the load average said what it says.")
    w("")

    Path(md_path).write_text("\n".join(out) + "\n")
    chart(res, png_path, MAIN, LABEL, NETWORKS)


def bill(w, data):
    """The bill per million messages (crates/sqsafe-bench/src/bill.rs), with the prices it used."""
    lines, prices = data.get("bill", []), data.get("prices")
    if not lines or not prices:
        return
    w("## 1b. The bill: capacity units and dollars per million messages\n")
    w("Capacity units per message counted at the proxy by DynamoDB's sizing rules, which on-demand mode bills: a "
      "write, 1 unit per started KB of the larger of the item before and after it; a conditional write refused, still "
      "1 unit when no item was there, else the larger of the item met and the item sent; a strongly consistent read, "
      "1 unit per started 4 KB of each item, a key with no item at the minimum (a `BatchGetItem` reads each key as a "
      "`GetItem`). Beside them, what moto 5.2 reports for `ReturnConsumedCapacity`, which the proxy asks for: flat "
      "figures (1 per `PutItem`, 0.5 per `UpdateItem` whatever the size, the number of keys per `BatchGetItem`) and "
      "none on a refused write (–). How and why: bench/README.md, *The bill*.\n")
    w("Dollars per million messages from the sizing-rule units, at on-demand prices in us-east-1 (their sources: "
      "bench/README.md): "
      f"DynamoDB ${prices['dynamodb_write_per_million']:g} per million write and "
      f"${prices['dynamodb_read_per_million']:g} per million read request units; Lambda "
      f"${prices['lambda_requests_per_million']:g} per million requests (a batch of 10 per invocation) and "
      f"${prices['lambda_gb_second']:.10f} per GB-s on arm64 at {prices['memory_mb']:g} MB, for the median batch of "
      "10 fresh messages on the canned backend with 5 ms per request (DynamoDB in-region, moto's slowness left out; "
      "this run's builds), rounded up to the millisecond; SQS "
      f"${prices['sqs_requests_per_million']:g} per million requests, {prices['sqs_requests_per_message']:g} per "
      "message (its `SendMessage`, a tenth of the mapping's `ReceiveMessage` and of its `DeleteMessageBatch`; the "
      "mapping's empty long polls and the free tiers left out). A duplicate arrives after its completion and is not "
      "in a local cache.\n")
    label = {"sqsafe": "sqsafe, claim mode (charge-payment as deployed)", "sqsafe-keyed": "sqsafe, keyed mode",
             "powertools": "Powertools (Python)"}
    rows = {}
    for l in lines:
        # Results written before the Lambda columns were split (the same arithmetic as bill.rs).
        l = dict(l)
        l.setdefault("lambda_requests_usd", prices["lambda_requests_per_million"] / max(l["batch_size"], 1))
        l.setdefault("lambda_duration_usd", l["lambda_usd"] - l["lambda_requests_usd"])
        l.setdefault("counted_usd", l["dynamodb_usd"] + l["lambda_requests_usd"] + l["sqs_usd"])
        rows.setdefault(l["peer"], {})[l["kind"]] = l
    w("**Dollars per million messages** (total; in brackets the counted part, without Lambda's GB-s):\n")
    w("| consumer | fresh messages | duplicates |")
    w("|---|---|---|")
    for peer, kinds in rows.items():
        cells = [f"**{k['total_usd']:.3f}** ({k['counted_usd']:.3f})" if k else "–"
                 for k in (kinds.get("fresh"), kinds.get("duplicate"))]
        w(f"| {label.get(peer, LABEL[peer])} | {cells[0]} | {cells[1]} |")
    w("")
    w("What each figure is made of, per message and per million messages:\n")
    w("| consumer | messages | write units | read units | moto write / read | DynamoDB requests | DynamoDB $ | "
      "Lambda requests $ | SQS $ | counted $ | batch ms | Lambda GB-s $ | total $ |")
    w("|---|---|---|---|---|---|---|---|---|---|---|---|---|")
    for peer, kinds in rows.items():
        for kind in ("fresh", "duplicate"):
            l = kinds.get(kind)
            if not l:
                continue
            moto = l.get("moto_units")
            moto = f"{moto['write']:.2f} / {moto['read']:.2f}" if moto else "–"
            u = l["units"]
            w(f"| {label.get(peer, LABEL[peer])} | {kind} | {u['write']:.2f} | {u['read']:.2f} | {moto} | "
              f"{l['dynamodb_requests']:.2f} | {l['dynamodb_usd']:.3f} | {l['lambda_requests_usd']:.3f} | "
              f"{l['sqs_usd']:.3f} | {l['counted_usd']:.3f} | {l['batch_ms']:.0f} | {l['lambda_duration_usd']:.3f} | "
              f"{l['total_usd']:.3f} |")
    w("")
    checks = [c for c in data.get("checks", []) if c["what"].startswith("bill:")]
    if checks:
        counted = any("duration aside" in c["what"] for c in checks)
        w("Checked by the run (and by `make bench-smoke`, a step of `make test`)"
          + (", the dollars on the counts only: *counted $* leaves out Lambda's duration, a timing, which the total "
             "adds." if counted else ".") + "\n")
        for c in checks:
            w(f"- {'ok' if c['ok'] else '**FAILED**'}: {c['what'][len('bill: '):]} ({c['detail']})")
        w("")


def instruction_rows(res, instructions):
    """Per network setting: the callgrind count and the timed run's CPU per message."""
    rows = []
    for count in instructions:
        run = res.run("sqsafe", backend=count["backend"], latency=count["latency_ms"])
        rows.append((count, run["cpu_us_per_msg"] if run else None))
    return rows


def where_instructions(w, res, instructions):
    if not instructions:
        return
    w("**Instructions per message** (valgrind's callgrind, sqsafe's function in a process of its own, "
      f"{instructions[0]['messages']} fresh messages per network setting; `make bench` writes the dumps to "
      "`target/bench/results.callgrind/`). Instructions do not depend on what else the machine does; CPU time per "
      "message is the timed run's (table above), so the last column is what one instruction cost there.\n")
    w("| network | instructions per message | CPU µs per message (timed) | ns per 1,000 instructions |")
    w("|---|---|---|---|")
    for count, cpu in instruction_rows(res, instructions):
        per_k = f"{1e6 * cpu / count['per_message']:.0f}" if cpu and count["per_message"] else "–"
        w(f"| {count['backend']}, {count['latency_ms']} ms | {count['per_message'] / 1e3:,.0f}k | "
          f"{'–' if cpu is None else f'{cpu:.0f}'} | {per_k} |")
    base = next((c for c in instructions if c["backend"] == "canned" and c["latency_ms"] == 0), instructions[0])
    w(f"\nWhere the instructions go ({base['backend']}, {base['latency_ms']} ms; inclusive: each part with what it "
      "calls, so parts overlap):\n")
    w("| part | instructions per message | share |\n|---|---|---|")
    for label, per in base["parts"]:
        share = 100 * per / base["per_message"] if base["per_message"] else 0
        w(f"| {label} | {per / 1e3:,.0f}k | {share:.0f}% |")
    w("\nvalgrind's CPU model has no SHA extensions, so SHA-256 runs the portable code under callgrind; natively "
      "(SHA-NI on this machine) request signing costs a smaller share than it does here.\n")


def where_cpu(w, res, toolkit, profiles, instructions):
    sq, quiet, multi = res.run("sqsafe"), res.run("sqsafe-quiet"), res.run("sqsafe-multi-thread")
    naive, hit = res.run("naive"), res.run("sqsafe-cached", kind="cache_hit")
    if not (sq and naive):
        return
    w("### Where sqsafe's client CPU goes\n")
    w("Client CPU per fresh message (user + system) by network, sqsafe and its variants beside the other peers. The "
      "work is the same in each column; on a busy machine the same work costs more CPU after each wait (other "
      "processes take the caches meanwhile), which the naive peer and Powertools show too.\n")
    nets = [("moto", 0), ("canned", 0), ("canned", 5)]
    w("| peer | " + " | ".join(f"{b}, {l} ms" for b, l in nets) + " |")
    w("|---|" + "---|" * len(nets))
    for p in ("naive", "sqsafe", "sqsafe-quiet", "sqsafe-multi-thread", "powertools"):
        cells = []
        for b, l in nets:
            r = res.run(p, backend=b, latency=l)
            cells.append("–" if not r else f"{r['cpu_us_per_msg']:.0f} ({r['user_us_per_msg']:.0f} + {r['system_us_per_msg']:.0f})")
        if any(c != "–" for c in cells):
            w(f"| {LABEL[p]} | " + " | ".join(cells) + " |")
    w("")
    total = sq["cpu_us_per_msg"]
    w(f"- user {sq['user_us_per_msg']:.0f} µs, system {sq['system_us_per_msg']:.0f} µs per message on moto "
      f"({100 * sq['system_us_per_msg'] / total if total else 0:.0f}% in the kernel: sockets, futexes, the log pipe)")
    if quiet:
        w(f"- JSON logs ({sq['log_lines_per_msg']:.1f} lines per message): {total - quiet['cpu_us_per_msg']:+.0f} µs "
          f"per message between logs on and off (within the noise when small)")
    if multi:
        w(f"- the multi-threaded runtime (a worker per core) instead of sqsafe's one thread: "
          f"{multi['cpu_us_per_msg'] - total:+.0f} µs per message on moto")
    if hit:
        w(f"- a cache hit (the batch processor, the idempotency layer and the logs, no I/O at all): "
          f"{cpu_text(hit)} per message")
    if toolkit.get("fresh/no-logs"):
        w(f"- the toolkit alone on the in-memory store (figure 5): {toolkit['fresh/no-logs'][0] / 1e4:.1f} µs per message")
    w(f"- the floor (naive: parse, one HTTP request with reqwest): {naive['cpu_us_per_msg']:.0f} µs per message. sqsafe "
      "makes three requests per fresh message (PutItem, the charge, UpdateItem), two of them through the AWS SDK; a "
      "duplicate makes one SDK request")
    w("")
    where_instructions(w, res, instructions)
    for prof in profiles:
        by_thread = parse_perf(prof["reports"]["by_thread"])
        by_symbol = parse_perf(prof["reports"]["by_symbol"])
        if not by_symbol:
            continue
        w(f"**perf profile of sqsafe** ({prof['backend']}, {prof['latency_ms']} ms added, {prof['batches']} batches of "
          f"10, an extra run not counted above; `perf report` files in `{Path(prof['reports']['by_symbol']).parent.name}/`)."
          " By thread and object:\n")
        w("| % of samples | thread | object |\n|---|---|---|")
        for pct, fields in by_thread[:8]:
            w(f"| {pct:.1f} | {fields[0]} | {fields[1] if len(fields) > 1 else ''} |")
        groups = profile_groups(prof)
        w("\nBy crate (every symbol, grouped by the first crate in its path):\n")
        w("| % of samples | crate |\n|---|---|")
        for key, pct in sorted(groups.items(), key=lambda kv: -kv[1])[:14]:
            w(f"| {pct:.1f} | {key} |")
        w("\nTop symbols:\n")
        w("| % | object | symbol |\n|---|---|---|")
        for pct, fields in by_symbol[:12]:
            sym = fields[1] if len(fields) > 1 else ""
            sym = sym[:110] + ("…" if len(sym) > 110 else "")
            w(f"| {pct:.1f} | {fields[0]} | `{sym.replace('|', '/')}` |")
        w("")


def cpu_text(run):
    """CPU per message, or its upper bound when the run used less than one clock tick."""
    if run["cpu_us_per_msg"] > 0:
        return f"{run['cpu_us_per_msg']:.0f} µs"
    messages = run["batches"] * run["batch_size"]
    return f"under {10_000 / max(messages, 1):.0f} µs (less than one clock tick over {messages} messages)"


def spent_on(count):
    """A sentence on the two largest parts of the instruction count (SDK requests, signing), when known."""
    parts = dict(count["parts"])
    sdk = next((v for k, v in parts.items() if k.startswith("AWS SDK requests")), 0)
    sign = next((v for k, v in parts.items() if k.startswith("SigV4")), 0)
    if not (sdk and count["per_message"]):
        return ""
    return (f" Of the instructions, {100 * sdk / count['per_message']:.0f}% are the AWS SDK's two requests, "
            f"{100 * sign / count['per_message']:.0f}% their SigV4 signing alone (figure 4).")


def misses(w, res, toolkit, profiles, instructions):
    """Why the CPU targets are missed, in this run's own figures."""
    sq, hit, multi = res.run("sqsafe"), res.run("sqsafe-cached", kind="cache_hit"), res.run("sqsafe-multi-thread")
    lines = []
    rows = {(c["backend"], c["latency_ms"]): (c, cpu) for c, cpu in instruction_rows(res, instructions)}
    moto, canned = rows.get(("moto", 0)), rows.get(("canned", 0))
    if sq and sq["cpu_us_per_msg"] > TARGET_CPU_US and moto and canned and moto[1] and canned[1]:
        (mc, mcpu), (cc, ccpu) = moto, canned
        diff = 100 * (mc["per_message"] - cc["per_message"]) / cc["per_message"]
        lines.append(
            f"client CPU on moto: {mcpu:.0f} µs per fresh message against {ccpu:.0f} µs on the canned backend, for the "
            f"same work: callgrind counts {mc['per_message'] / 1e3:,.0f}k instructions per message on moto and "
            f"{cc['per_message'] / 1e3:,.0f}k on the canned backend ({diff:+.1f}%). What differs is the time one "
            f"instruction takes: {1e6 * mcpu / mc['per_message']:.0f} against {1e6 * ccpu / cc['per_message']:.0f} ns per "
            "1,000. On moto the function sleeps after almost every request (moto answers one request at a time, in "
            "milliseconds) while moto's Python runs on the same two cores, so it resumes on cold caches each time; "
            "the canned backend answers at once and nothing runs in between. The figure that is sqsafe's own is the "
            f"canned one, which {'meets' if ccpu <= TARGET_CPU_US else 'misses'} the target; the moto figure measures "
            "the emulator beside it." + spent_on(cc)
        )
    elif sq and sq["cpu_us_per_msg"] > TARGET_CPU_US:
        parts = [f"client CPU: {sq['cpu_us_per_msg']:.0f} µs per fresh message on moto"]
        if hit:
            parts.append(f"of which the toolkit and the runtime, without I/O, are small (a cache hit costs {cpu_text(hit)})")
        parts.append("the rest is the three HTTP requests per message (two through the AWS SDK) and what waiting for them costs")
        if profiles:
            groups = profile_groups(profiles[0])
            kernel = [f for _, f in parse_perf(profiles[0]["reports"]["by_symbol"]) if f[0].startswith("[kernel")]
            if groups:
                top = f", its top symbol `{kernel[0][1]}`" if kernel and len(kernel[0]) > 1 else ""
                parts.append(
                    f"perf puts {groups.get('kernel', 0):.0f}% of its samples in the kernel{top}, and "
                    f"{groups.get('libc', 0):.0f}% in libc (allocation and copies)"
                )
        if multi:
            parts.append(f"the multi-threaded runtime would add {multi['cpu_us_per_msg'] - sq['cpu_us_per_msg']:+.0f} µs")
        lines.append("; ".join(parts) + ".")
    est, logs = toolkit.get("fresh/no-logs"), toolkit.get("fresh/json-logs")
    if est and est[0] / 1e4 > TARGET_TOOLKIT_US:
        text = f"toolkit: {est[0] / 1e4:.1f} µs per message without logs"
        if logs:
            text += f", {logs[0] / 1e4:.1f} µs with JSON logs ({logs[0] / est[0]:.1f}×: two `info` lines per record plus the batch's)"
        lines.append(text + "; the idempotency core alone (claim.rs) is in figure 5.")
    if lines:
        w("Why the misses:\n")
        for line in lines:
            w(f"- {line}")
        w("")


def bottleneck(w, pipe):
    if not pipe["moto_ceiling"] or not pipe["runs"]:
        return
    top = max(pipe["moto_ceiling"], key=lambda c: c["writes_per_s"])
    floor = {r["pollers"]: r["messages_per_s"] for r in pipe["runs"] if r["peer"] == "naive"}
    w(
        f"moto's write ceiling is about {top['writes_per_s']:.0f} conditional PutItem/s ({top['clients']} client(s), "
        f"moto at {top['moto_cpu_pct']:.0f}% of a core). The naive peer makes no DynamoDB request: its throughput is "
        "the ceiling of the rest of the path (moto's SQS receive and delete, the pollers, the emulator). A run is "
        "called moto-bound when moto is at 60% of a core or more (one Python process: the GIL keeps it to about "
        "one core) while the functions are not busy. moto's SQS scans the queue's messages on each receive and "
        "delete, so with hundreds of messages queued its SQS side costs more than its DynamoDB side.\n"
    )
    for r in pipe["runs"]:
        per_poller = r["functions_cpu_pct"] / max(r["pollers"], 1)
        if r["moto_cpu_pct"] >= 60 and per_poller < 50:
            verdict = "**moto is the bottleneck**"
        elif per_poller >= 80:
            verdict = "**the function is the bottleneck**"
        else:
            verdict = "neither is saturated: the pollers' round trips (receive, invoke, delete) set the pace"
        parts = [f"{r['messages_per_s']:.0f} msgs/s"]
        if r["peer"] != "naive" and floor.get(r["pollers"]):
            parts.append(f"{r['messages_per_s'] / floor[r['pollers']]:.0%} of the naive peer's")
        if r["dynamodb_per_msg"]:
            parts.append(f"DynamoDB {r['dynamodb_per_s']:.0f} req/s, {r['dynamodb_per_s'] / top['writes_per_s']:.0%} of the write ceiling")
        parts.append(f"moto {r['moto_cpu_pct']:.0f}% of a core, functions {r['functions_cpu_pct']:.0f}%")
        redelivered = r["deleted"] - r["messages"]
        if redelivered > 0:
            parts.append(f"{redelivered} delivered twice (at-least-once; charged once)")
        w(f"- {LABEL[r['peer']]}, {r['pollers']} poller(s): {'; '.join(parts)}: {verdict}")
    w("")


def ahead(w, res, proc_, pipe):
    """Every figure where Powertools beats sqsafe, said plainly."""
    found = []

    def compare(what, pt, sq, lower_is_better=True, unit=""):
        if pt is None or sq is None:
            return
        if (pt < sq) if lower_is_better else (pt > sq):
            tie = abs(pt - sq) <= 0.05 * max(abs(pt), abs(sq))
            found.append(f"{what}: Powertools {pt:.1f}{unit}, sqsafe {sq:.1f}{unit}" + (" (within 5%: a tie)" if tie else ""))

    for backend, latency in NETWORKS:
        a, b = res.run("powertools", backend=backend, latency=latency), res.run("sqsafe", backend=backend, latency=latency)
        if a and b:
            compare(f"batch p50 ({backend}, {latency} ms)", a["duration"]["p50_ms"], b["duration"]["p50_ms"], unit=" ms")
            compare(f"client CPU per fresh message ({backend}, {latency} ms)", a["cpu_us_per_msg"], b["cpu_us_per_msg"], unit=" µs")
    for kind in ("duplicate",):
        a, b = res.run("powertools", kind=kind), res.run("sqsafe", kind=kind)
        if a and b:
            compare("client CPU per duplicate", a["cpu_us_per_msg"], b["cpu_us_per_msg"], unit=" µs")
    if proc_.get("powertools") and proc_.get("sqsafe"):
        compare("cold start (median)", median(proc_["powertools"]["cold_start_ms"]), median(proc_["sqsafe"]["cold_start_ms"]), unit=" ms")
        compare("peak RSS", proc_["powertools"]["peak_rss_kib"] / 1024, proc_["sqsafe"]["peak_rss_kib"] / 1024, unit=" MiB")
    for pollers in (1, 4):
        a = next((r for r in pipe["runs"] if r["peer"] == "powertools" and r["pollers"] == pollers), None)
        b = next((r for r in pipe["runs"] if r["peer"] == "sqsafe" and r["pollers"] == pollers), None)
        if a and b:
            compare(f"pipeline msgs/s, {pollers} poller(s)", a["messages_per_s"], b["messages_per_s"], lower_is_better=False)
    level = []
    for kind in ("fresh", "duplicate"):
        a, b = res.run("powertools", purpose="requests", kind=kind), res.run("sqsafe", purpose="requests", kind=kind)
        if a and b and a["dynamodb_per_msg"] == b["dynamodb_per_msg"]:
            level.append(f"DynamoDB requests per {kind} message ({a['dynamodb_total_per_msg']:g}, the same operations)")
    a, b = res.run("powertools"), res.run("sqsafe")
    if a and b and a["log_lines_per_msg"] < b["log_lines_per_msg"]:
        level.append(
            f"Powertools writes fewer log lines per message ({a['log_lines_per_msg']:.1f} against sqsafe's "
            f"{b['log_lines_per_msg']:.1f}: this peer logs one line per payment, sqsafe its `record handled` line too)"
        )
    w("## Where Powertools is ahead\n")
    if found:
        for f in found:
            w(f"- {f}")
    else:
        w("Nowhere in this run on latency, CPU, cold start, memory or throughput: sqsafe is level with or ahead of "
          "Powertools on each.")
    if level:
        w("")
    for item in level:
        w(f"- Level, or Powertools lighter: {item}.")
    w("")


API_HEADING = "## 8. The idempotent HTTP layer (sqsafe::api), one request at a time"


def api_section(w, data):
    """Figure 8 (crates/sqsafe-bench/src/api.rs): the layer beside the same axum handler without it."""
    runs = data.get("api", [])
    if not runs:
        return
    plain = next((r for r in runs if r["handler"] == "plain"), None)
    w(API_HEADING + "\n")
    n = runs[0]["requests"]
    w(f"An axum handler (`POST /orders`: `201` with a small JSON body) called in the driver's process, {n} requests per row "
      "one after the other, alone (`plain`) and behind `sqsafe::api::IdempotencyLayer` over DynamoDB (`layer`), "
      f"{runs[0]['latency_ms']} ms added by the proxy to each DynamoDB request. `moto`: moto server answers; "
      "`canned`: every DynamoDB request answered `{}` after the added delay alone (the network floor, without moto's "
      "own time; a repeat cannot be measured there). *fresh*: a key never seen; *repeat*: the same key and body again "
      "(the stored answer replayed); *other content*: the same key with another body (`422`). Added: the row's "
      "figure minus the plain handler's.\n")
    w("| handler | request | backend | DynamoDB requests per request | handler runs per request | answers | "
      "p50 ms | p99 ms | added p50 ms | added p99 ms |")
    w("|---|---|---|---|---|---|---|---|---|---|")
    for r in runs:
        ops = ", ".join(f"{op} {v:g}" for op, v in r["dynamodb_per_request"].items()) or "none"
        answers = ", ".join(f"{code} × {count}" for code, count in r["statuses"].items())
        d = r["duration"]
        if r["handler"] == "plain" or plain is None:
            added = "", ""
        else:
            added = (f"{d['p50_ms'] - plain['duration']['p50_ms']:.1f}",
                     f"{d['p99_ms'] - plain['duration']['p99_ms']:.1f}")
        backend = "none" if r["handler"] == "plain" else r["backend"]
        w(f"| {r['handler']} | {r['kind'].replace('_', ' ')} | {backend} | {ops} | "
          f"{r['handler_runs_per_request']:g} | {answers} | {d['p50_ms']:.3f} | {d['p99_ms']:.3f} | "
          f"{added[0]} | {added[1]} |")
    w("")
    w("A fresh request makes two DynamoDB round trips one after the other (the claim, then the completion after the "
      "handler), a repeat or other content one (the refused claim, whose `ALL_OLD` record carries the stored answer "
      "or the fingerprint): the layer's added latency is about that many of the proxy's delays, plus moto's time on "
      "the moto rows. The counts are asserted (every run, the smoke too); the timings are not.")
    w("")


KINESIS_HEADING = "## 9. Kinesis batches beside Powertools' BatchProcessor"


def kinesis_section(w, data):
    """Figure 9 (crates/sqsafe-bench/src/stream.rs): Kinesis batches of one shard and one partition key."""
    runs = data.get("kinesis", [])
    orders = data.get("kinesis_order", [])
    if not runs and not orders:
        return
    w(KINESIS_HEADING + "\n")
    w("The same payments as Kinesis records (the data is the `PaymentRequested` body), batches of 10 of one shard and "
      "one partition key, handed to one warm process each: sqsafe's charge-payment (claim and keyed modes) and "
      "Powertools 3.37.0's `BatchProcessor(EventType.KinesisDataStreams)` with `idempotent_function` on DynamoDB "
      "(`bench/peers/powertools/handler.py`, `kinesis_handler`). The same moto, proxy and payments API as figures 1-4. "
      "*fresh*: payments never seen; *duplicate*: the same payments again as new records (a producer's retry). CPU: "
      "the function process's user + system time per record. × sqsafe: the row's figure over the claim mode's.\n")
    if runs:
        w("| peer | records | added per request | DynamoDB requests per record | payments calls per record | "
          "CPU µs/record | × sqsafe | p50 ms per batch | p99 ms per batch | × sqsafe (p50) |")
        w("|---|---|---|---|---|---|---|---|---|---|")
        timed = [r for r in runs if r["purpose"] == "kinesis"]
        for r in timed:
            base = next((b for b in timed if b["peer"] == "sqsafe" and b["kind"] == r["kind"]
                         and b["latency_ms"] == r["latency_ms"]), None)
            counted = next((c for c in runs if c["purpose"] == "kinesis_requests" and c["peer"] == r["peer"]
                            and c["kind"] == r["kind"]), r)
            ops = ", ".join(f"{op} {v:g}" for op, v in counted["dynamodb_per_msg"].items()) or "none"
            d = r["duration"]
            w(f"| {LABEL[r['peer']]} | {r['kind']} | {r['latency_ms']} ms | {ops} | {counted['payments_per_msg']:g} | "
              f"{r['cpu_us_per_msg']:.0f} | {ratio(r['cpu_us_per_msg'], base and base['cpu_us_per_msg'])} | "
              f"{d['p50_ms']:.1f} | {d['p99_ms']:.1f} | {ratio(d['p50_ms'], base and base['duration']['p50_ms'])} |")
        w("")
    if orders:
        w("### 9b. A batch whose 4th record fails once\n")
        w("10 records of one partition key; the payments API answers the 4th payment's first charge `503` before "
          "charging. Each answer's `batchItemFailures` is honoured as Lambda does: the next delivery starts at the "
          "lowest sequence number named, until an answer names none. *Charged in the order*: the records' positions "
          "in the order the payments API's ledger charged them; *ran ahead*: records after the 4th charged before "
          "it.\n")
        w("| peer | deliveries | the first answer named | charged in the order | ran ahead | payments calls | "
          "charged twice |")
        w("|---|---|---|---|---|---|---|")
        for o in orders:
            named = ", ".join(str(i) for i in o["first_answer_named"]) or "none"
            order = ", ".join(str(i) for i in o["charged_in_order"])
            w(f"| {LABEL[o['peer']]} | {o['deliveries']} | {named} | {order} | {o['ran_ahead']} | "
              f"{o['payments_calls']} | {o['charged_twice']} |")
        w("")
        w("sqsafe stops the shard at the failed record and names it alone: nothing after it runs in that invocation, "
          "so no later record of its partition key is applied before it. Powertools' BatchProcessor runs every "
          "record whatever fails before it and names the failed one: Lambda then hands over the failed record and "
          "every one after it again, so the records after the failure are applied before it (and, without its "
          "idempotency, twice). The counts and sqsafe's order are asserted (every run, the smoke too); the timings "
          "are not.")
        w("")


def run_stamp(meta):
    """When a run started (UTC) and the load average at its start, as the spliced sections say them."""
    when = datetime.datetime.fromtimestamp(meta.get("started_unix", 0), datetime.timezone.utc)
    load = meta.get("load_start") or []
    load = " / ".join(f"{x:.2f}" for x in load) if load else "unknown"
    return when, load


def replace_section(md_path, out, prefix, before):
    """The section of `md_path` whose heading starts with `prefix` replaced by the lines `out`, or, when there is
    none, `out` added before the first heading that `before` accepts; the rest of the file left as it was."""
    section = "\n".join(out).rstrip("\n") + "\n\n"
    lines = Path(md_path).read_text().splitlines(keepends=True)
    start = next((i for i, l in enumerate(lines) if l.startswith(prefix)), None)
    if start is None:
        start = end = next(i for i, l in enumerate(lines) if before(l))
    else:
        end = next((i for i in range(start + 1, len(lines)) if lines[i].startswith("## ")), len(lines))
    Path(md_path).write_text("".join(lines[:start]) + section + "".join(lines[end:]))


def before_the_end(line):
    return line.startswith("## Where Powertools is ahead") or line.startswith("## Checks")


def splice_kinesis(data, md_path):
    """Section 9 of an existing RESULTS.md replaced (or added, before "Where Powertools is ahead") by the figures of
    `data` (a `--kinesis-only` run); the rest of the file is left as it was."""
    out = []
    kinesis_section(out.append, data)
    if not out:
        raise SystemExit("render.py: the results hold no figure 9")
    meta = data.get("meta", {})
    when, load = run_stamp(meta)
    out.insert(1, f"Regenerated alone by `sqsafe-bench --kinesis-only` (`make bench-kinesis`; {meta.get('profile', '?')} "
                  f"builds, {when:%Y-%m-%d %H:%M} UTC, on a shared {meta.get('cores', '?')}-core machine, load average "
                  f"{load} at the start); the other sections are from the last full run. The counts do not depend on "
                  "the machine's load; the durations and CPU times do.\n")
    replace_section(md_path, out, "## 9.", before_the_end)


def splice_api(data, md_path):
    """Section 8 of an existing RESULTS.md replaced (or added, before "Where Powertools is ahead") by the figures of
    `data` (an `--api-only` run); the rest of the file is left as it was."""
    out = []
    api_section(out.append, data)
    if not out:
        raise SystemExit("render.py: the results hold no figure 8")
    meta = data.get("meta", {})
    when, load = run_stamp(meta)
    out.insert(1, f"Regenerated alone by `sqsafe-bench --api-only` (`make bench-api`; {meta.get('profile', '?')} build, "
                  f"{when:%Y-%m-%d %H:%M} UTC, on a shared {meta.get('cores', '?')}-core machine, load average {load} at the "
                  "start); "
                  "the other sections are from the last full run. The counts do not depend on the machine's load; "
                  "the durations do.\n")
    replace_section(md_path, out, "## 8.", before_the_end)


def splice_bill(data, md_path):
    """Section 1b of an existing RESULTS.md replaced by the bill of `data` (a `--bill-only` run); the rest of the file,
    from the last full run, is left as it was."""
    out = []
    bill(out.append, data)
    if not out:
        raise SystemExit("render.py: the results hold no bill")
    meta = data.get("meta", {})
    when, load = run_stamp(meta)
    # After the heading: where this section's figures come from (they are not the full run's around it).
    out.insert(1, f"Regenerated alone by `make bench-bill` ({meta.get('profile', '?')} builds, "
                  f"{when:%Y-%m-%d %H:%M} UTC, load average {load} at the start); the other sections are from the "
                  "last full run. The counts do not depend on the machine's load; the batch durations do.\n")
    replace_section(md_path, out, "## 1b.", lambda line: line.startswith("## 2."))


def main():
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("results")
    parser.add_argument("--md", required=True)
    parser.add_argument("--png", default=None,
                        help="the chart (required unless --bill-only, --api-only or --kinesis-only)")
    parser.add_argument("--criterion", default=None, help="criterion's output folder (target/criterion)")
    parser.add_argument("--bill-only", action="store_true",
                        help="replace section 1b of the existing --md with the bill of a --bill-only run")
    parser.add_argument("--api-only", action="store_true",
                        help="replace (or add) section 8 of the existing --md with the figures of an --api-only run")
    parser.add_argument("--kinesis-only", action="store_true",
                        help="replace (or add) section 9 of the existing --md with the figures of a --kinesis-only run")
    args = parser.parse_args()
    data = json.loads(Path(args.results).read_text())
    if args.kinesis_only:
        splice_kinesis(data, args.md)
        print(f"render.py: section 9 of {args.md} replaced")
        return
    if args.api_only:
        splice_api(data, args.md)
        print(f"render.py: section 8 of {args.md} replaced")
        return
    if args.bill_only:
        splice_bill(data, args.md)
        print(f"render.py: section 1b of {args.md} replaced")
        return
    if not args.png:
        parser.error("--png is required")
    criterion = criterion_estimates(args.criterion) if args.criterion and os.path.isdir(args.criterion) else {}
    render(data, criterion, args.md, args.png)
    print(f"render.py: wrote {args.md} and {args.png}")


if __name__ == "__main__":
    main()
