//! `scripts/bench-compare.sh BASE [HEAD]`: charge-payment built at two commits, its claim and keyed modes measured
//! side by side. One bench run on a shared machine says little; interleaved runs of the two builds say more, and
//! instruction counts say it exactly.
//!
//! - **One side's run** (`--compare --bins DIR`): a bed of its own (moto, the payments API, the proxy), and per mode
//!   `--cold-starts` cold starts (first answer: spawn to its first batch of 10 fresh payments answered) and then
//!   `--batches` fresh batches of 10 on the last, warm, process, under `--network`: wall per batch, CPU per message.
//!   With `--count`, instead: each mode under callgrind, instructions per message under `--network` and on the canned
//!   backend with no added latency (the steadiest count: no moto), and the dumps kept for a per-function comparison.
//! - **The comparison** (`--compare-base DIR --compare-head DIR`): this program run as one side's run per build,
//!   `--pairs` times (each run its own process and bed; base first in odd pairs, head first in even ones, so a load
//!   that drifts through the run weighs on both alike), then each build's count, then the summary:
//!   per pair and per side (median and min–max over the pairs), instructions per message, the functions whose
//!   instructions per message differ most, printed and appended to `--md` (bench/COMPARE.md).

use std::collections::HashMap;
use std::fmt::Write as _;
use std::path::{Path, PathBuf};

use serde::Serialize;
use serde_json::Value;
use tokio::process::Command;

use crate::bed::Peer;
use crate::bench::{Bench, CALLGRIND_BATCHES};
use crate::figures::Kind;
use crate::measure::Network;
use crate::proxy::Backend;
use crate::report::Process;

/// The modes compared: charge-payment as deployed (the claim mode) and with `SQSAFE_IDEMPOTENCY_MODE=keyed`.
pub(crate) const MODES: [Peer; 2] = [Peer::Sqsafe, Peer::SqsafeKeyed];

/// The `purpose` of a compared run in the report.
const PURPOSE: &str = "compare";

/// Functions listed per table of the per-function comparison.
const TOP_FUNCTIONS: usize = 15;

/// A network setting as written on the command line: `moto-5` (moto behind 5 ms per request), `canned-0`; a trailing
/// `ms` is allowed.
pub(crate) fn parse_network(text: &str) -> Result<Network, String> {
    let (backend, latency) = text
        .split_once('-')
        .ok_or_else(|| format!("{text:?}: expected BACKEND-MS, such as moto-5 or canned-0"))?;
    let backend = match backend {
        "moto" => Backend::Moto,
        "canned" => Backend::Canned,
        other => return Err(format!("{other:?}: the backend is moto or canned")),
    };
    let latency_ms = latency
        .trim_end_matches("ms")
        .parse()
        .map_err(|e| format!("{latency:?}: {e}"))?;
    Ok(Network {
        backend,
        latency_ms,
    })
}

fn network_label(network: Network) -> String {
    format!("{:?} + {} ms", network.backend, network.latency_ms).to_lowercase()
}

/// What one side's run measures.
#[derive(Debug, Clone, Copy)]
pub(crate) struct SideRun {
    pub(crate) batches: usize,
    pub(crate) cold_starts: usize,
    pub(crate) network: Network,
}

impl Bench<'_> {
    /// One side's timed run (`--compare`): per mode, the cold starts (first answer) and the fresh batches on the
    /// last process, their request counts and answers checked as in every run.
    pub(crate) async fn compare(&mut self, side: SideRun) -> Result<(), String> {
        for peer in MODES {
            eprintln!(
                "==> {}: {} cold starts, {} batches of 10 ({})",
                peer.name(),
                side.cold_starts,
                side.batches,
                network_label(side.network)
            );
            let (mut function, cold, init) = self
                .cold_starts(peer, side.cold_starts, side.network)
                .await?;
            let batches = self.fresh_batches(peer, PURPOSE, side.batches, 10);
            let run = function
                .run(
                    &self.bed.proxy,
                    side.network,
                    Kind::Fresh,
                    PURPOSE,
                    &batches,
                )
                .await?;
            self.record(run);
            let last = function.sample()?;
            self.report.processes.push(Process {
                peer,
                cold_start_ms: cold,
                init_ms: init,
                peak_rss_kib: last.peak_rss_kib,
                threads: last.threads,
            });
            function.shutdown().await;
        }
        Ok(())
    }

    /// One side's count (`--compare --count`): each mode under callgrind, under `network` and on the canned backend
    /// with no added latency; the dumps under `dir/<mode>`.
    pub(crate) async fn compare_count(
        &mut self,
        network: Network,
        dir: &Path,
    ) -> Result<(), String> {
        let steady = Network {
            backend: Backend::Canned,
            latency_ms: 0,
        };
        let mut networks = vec![network];
        if network.backend != steady.backend || network.latency_ms != steady.latency_ms {
            networks.push(steady);
        }
        for peer in MODES {
            self.count_instructions(peer, &networks, dir.join(peer.name()), CALLGRIND_BATCHES)
                .await?;
        }
        Ok(())
    }
}

/// One build compared.
#[derive(Debug, Clone)]
pub(crate) struct Side {
    /// `base` or `head`: the file names.
    pub(crate) role: &'static str,
    /// What the summary calls it (a commit, `"working tree on <commit>"`).
    pub(crate) label: String,
    /// The folder of its charge-payment.
    pub(crate) bins: PathBuf,
}

/// The comparison (`--compare-base`, `--compare-head`).
#[derive(Debug, Clone)]
pub(crate) struct Comparison {
    pub(crate) base: Side,
    pub(crate) head: Side,
    pub(crate) pairs: usize,
    pub(crate) side: SideRun,
    /// The text of `--network`, passed on to each run.
    pub(crate) network_arg: String,
    pub(crate) instructions: bool,
    /// Base then head in every pair (the default alternates which runs first).
    pub(crate) base_first: bool,
    /// Only the summary of the runs already in `dir` (none is made).
    pub(crate) summary_only: bool,
    /// Where each run's JSON (and the callgrind dumps) go.
    pub(crate) dir: PathBuf,
    /// The summary's figures as JSON (in `dir`).
    pub(crate) out: PathBuf,
    /// The results file the summary is appended to.
    pub(crate) md: Option<PathBuf>,
}

/// Runs the comparison; `Ok(false)` when a run's checks failed (the summary is written all the same).
pub(crate) async fn run(c: &Comparison) -> Result<bool, String> {
    let exe = std::env::current_exe().map_err(|e| format!("this program's path: {e}"))?;
    std::fs::create_dir_all(&c.dir).map_err(|e| format!("{}: {e}", c.dir.display()))?;
    let mut ok = true;
    let made = if c.summary_only { 0 } else { c.pairs };
    for pair in 1..=made {
        // Base first in odd pairs, head first in even ones (unless `base_first`): a load that rises or falls through
        // the run then weighs on both sides alike, where always running the head second hands it every rise.
        let order = if c.base_first || pair % 2 == 1 {
            [&c.base, &c.head]
        } else {
            [&c.head, &c.base]
        };
        for side in order {
            eprintln!(
                "\n=== pair {pair}/{}: {} ({})",
                c.pairs, side.role, side.label
            );
            let out = c.dir.join(format!("pair{pair}-{}.json", side.role));
            ok &= child(&exe, side, &out, c, false).await?;
        }
        // What this pair says, as it comes.
        let pairs = read_pairs(&c.dir, pair)?;
        if let Some(p) = pairs.last() {
            for (i, peer) in MODES.iter().enumerate() {
                let (b, h) = (&p.base[i], &p.head[i]);
                eprintln!(
                    "pair {pair} {}: CPU/msg {:.0} -> {:.0} us, wall/batch {:.1} -> {:.1} ms, first answer {:.0} -> {:.0} ms \
                     (load {:.1} / {:.1})",
                    mode_label(*peer),
                    b.cpu_us,
                    h.cpu_us,
                    b.wall_ms,
                    h.wall_ms,
                    b.first_ms,
                    h.first_ms,
                    b.load,
                    h.load
                );
            }
        }
    }
    if c.instructions && !c.summary_only {
        if crate::instructions::available() {
            for side in [&c.base, &c.head] {
                eprintln!("\n=== instructions: {} ({})", side.role, side.label);
                let out = c.dir.join(format!("count-{}.json", side.role));
                ok &= child(&exe, side, &out, c, true).await?;
            }
        } else {
            eprintln!(
                "valgrind is not installed: no instruction counts (apt-get install valgrind)"
            );
        }
    }
    let pairs = if c.summary_only {
        // As many as there are.
        let n = (1..)
            .take_while(|n| c.dir.join(format!("pair{n}-head.json")).exists())
            .count();
        read_pairs(&c.dir, n)?
    } else {
        read_pairs(&c.dir, c.pairs)?
    };
    let counts = if c.instructions {
        read_counts(&c.dir)
    } else {
        HashMap::new()
    };
    let diffs = function_diffs(&counts).await;
    let text = summary(c, &pairs, &counts, &diffs);
    println!("{text}");
    let figures = serde_json::json!({
        "base": c.base.label,
        "head": c.head.label,
        "modes": MODES.map(Peer::name),
        "network": network_label(c.side.network),
        "batches": c.side.batches,
        "cold_starts": c.side.cold_starts,
        "pairs": pairs,
        "instructions": counts
            .iter()
            .flat_map(|(role, by)| by.iter().map(move |(k, v)| serde_json::json!({
                "side": role, "mode": k.0, "backend": k.1, "latency_ms": k.2, "per_message": v.0,
            })))
            .collect::<Vec<_>>(),
        "function_diffs": diffs,
    });
    let json = serde_json::to_string_pretty(&figures).map_err(|e| format!("JSON: {e}"))?;
    std::fs::write(&c.out, json).map_err(|e| format!("{}: {e}", c.out.display()))?;
    if let Some(md) = &c.md {
        let mut file = String::new();
        if !md.exists() {
            file.push_str(MD_PREAMBLE);
        }
        file.push_str(&markdown(c, &pairs, &text, !counts.is_empty()));
        use std::io::Write as _;
        std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(md)
            .and_then(|mut f| f.write_all(file.as_bytes()))
            .map_err(|e| format!("{}: {e}", md.display()))?;
        eprintln!("appended to {}", md.display());
    }
    Ok(ok)
}

/// One side's run as a process of its own: `Ok(false)` when it ran and a check failed.
async fn child(
    exe: &Path,
    side: &Side,
    out: &Path,
    c: &Comparison,
    count: bool,
) -> Result<bool, String> {
    let mut command = Command::new(exe);
    command
        .arg("--compare")
        .arg("--bins")
        .arg(&side.bins)
        .arg("--out")
        .arg(out)
        .arg("--batches")
        .arg(c.side.batches.to_string())
        .arg("--cold-starts")
        .arg(c.side.cold_starts.to_string())
        .arg("--network")
        .arg(&c.network_arg);
    if count {
        command.arg("--count");
    }
    let status = command
        .status()
        .await
        .map_err(|e| format!("{}: {e}", exe.display()))?;
    if !out.exists() {
        return Err(format!(
            "{} run wrote no {} ({status})",
            side.role,
            out.display()
        ));
    }
    Ok(status.success())
}

/// One mode in one run.
#[derive(Debug, Clone, Default, Serialize)]
struct Figures {
    /// CPU per fresh message (user + system), µs, and each.
    cpu_us: f64,
    user_us: f64,
    system_us: f64,
    /// Median wall time of a batch of 10, ms.
    wall_ms: f64,
    /// Median first answer over the run's cold starts, ms.
    first_ms: f64,
    /// The machine's load average (1 min) when the run started, and when it ended.
    load: f64,
    load_end: f64,
    /// When the run started (Unix seconds) and how long it took.
    started: u64,
    seconds: f64,
    /// What the run measured: batches of 10, cold starts, the network.
    batches: u64,
    cold_starts: usize,
    network: String,
}

/// One pair: per side, per mode of [`MODES`].
#[derive(Debug, Clone, Serialize)]
struct Pair {
    base: Vec<Figures>,
    head: Vec<Figures>,
}

fn read_json(path: &Path) -> Result<Value, String> {
    let text = std::fs::read_to_string(path).map_err(|e| format!("{}: {e}", path.display()))?;
    serde_json::from_str(&text).map_err(|e| format!("{}: {e}", path.display()))
}

/// The figures of pairs 1 to `n` (their JSON in `dir`).
fn read_pairs(dir: &Path, n: usize) -> Result<Vec<Pair>, String> {
    (1..=n)
        .map(|pair| {
            let side = |role: &str| -> Result<Vec<Figures>, String> {
                let report = read_json(&dir.join(format!("pair{pair}-{role}.json")))?;
                Ok(MODES.iter().map(|peer| figures(&report, *peer)).collect())
            };
            Ok(Pair {
                base: side("base")?,
                head: side("head")?,
            })
        })
        .collect()
}

fn figures(report: &Value, peer: Peer) -> Figures {
    let name = Value::from(peer.name());
    let of = |list: &str| {
        report[list]
            .as_array()
            .into_iter()
            .flatten()
            .filter(|v| v["peer"] == name)
            .cloned()
            .collect::<Vec<_>>()
    };
    let run = of("runs")
        .into_iter()
        .find(|r| r["purpose"] == PURPOSE)
        .unwrap_or_default();
    let cold: Vec<f64> = of("processes")
        .first()
        .and_then(|p| p["cold_start_ms"].as_array().cloned())
        .unwrap_or_default()
        .iter()
        .filter_map(Value::as_f64)
        .collect();
    Figures {
        cpu_us: run["cpu_us_per_msg"].as_f64().unwrap_or(f64::NAN),
        user_us: run["user_us_per_msg"].as_f64().unwrap_or(f64::NAN),
        system_us: run["system_us_per_msg"].as_f64().unwrap_or(f64::NAN),
        wall_ms: run["duration"]["p50_ms"].as_f64().unwrap_or(f64::NAN),
        first_ms: median(&cold),
        load: report["meta"]["load_start"][0].as_f64().unwrap_or(f64::NAN),
        load_end: report["meta"]["load_end"][0].as_f64().unwrap_or(f64::NAN),
        started: report["meta"]["started_unix"].as_u64().unwrap_or(0),
        seconds: report["meta"]["seconds"].as_f64().unwrap_or(0.0),
        batches: run["batches"].as_u64().unwrap_or(0),
        cold_starts: cold.len(),
        network: format!(
            "{} + {} ms",
            run["backend"].as_str().unwrap_or("?"),
            run["latency_ms"].as_u64().unwrap_or(0)
        ),
    }
}

/// The median (the mean of the two middle values for an even count); NaN for none.
fn median(values: &[f64]) -> f64 {
    let mut v: Vec<f64> = values.iter().copied().filter(|x| !x.is_nan()).collect();
    if v.is_empty() {
        return f64::NAN;
    }
    v.sort_by(f64::total_cmp);
    let mid = v.len() / 2;
    if v.len().is_multiple_of(2) {
        (v[mid - 1] + v[mid]) / 2.0
    } else {
        v[mid]
    }
}

fn min_max(values: &[f64]) -> (f64, f64) {
    values
        .iter()
        .copied()
        .filter(|x| !x.is_nan())
        .fold((f64::NAN, f64::NAN), |(lo, hi), x| (lo.min(x), hi.max(x)))
}

/// One count: (mode, backend, latency) to (instructions per message, messages, dump).
type CountKey = (String, String, u64);
type Counts = HashMap<&'static str, HashMap<CountKey, (f64, usize, PathBuf)>>;

fn read_counts(dir: &Path) -> Counts {
    let mut counts = Counts::new();
    for role in ["base", "head"] {
        let Ok(report) = read_json(&dir.join(format!("count-{role}.json"))) else {
            continue;
        };
        let entry = counts.entry(role).or_default();
        for c in report["instructions"].as_array().into_iter().flatten() {
            let key = (
                c["peer"].as_str().unwrap_or_default().to_owned(),
                c["backend"].as_str().unwrap_or_default().to_owned(),
                c["latency_ms"].as_u64().unwrap_or_default(),
            );
            entry.insert(
                key,
                (
                    c["per_message"].as_f64().unwrap_or(f64::NAN),
                    usize::try_from(c["messages"].as_u64().unwrap_or(0)).unwrap_or(0),
                    PathBuf::from(c["file"].as_str().unwrap_or_default()),
                ),
            );
        }
    }
    counts
}

/// Per function, instructions per message, inclusive or exclusive, of a dump (`callgrind_annotate`).
async fn per_function(
    file: &Path,
    messages: usize,
    inclusive: bool,
) -> HashMap<String, (f64, String)> {
    let output = Command::new("callgrind_annotate")
        .arg(format!(
            "--inclusive={}",
            if inclusive { "yes" } else { "no" }
        ))
        .arg("--threshold=100")
        .arg(file)
        .output()
        .await;
    let Ok(output) = output else {
        return HashMap::new();
    };
    parse_annotated(&String::from_utf8_lossy(&output.stdout), messages)
}

/// The function lines of `callgrind_annotate`'s output (`1,234 (0.5%)  file:function [object]`), per message, under
/// [`moved_name`]: a function's lines are summed (one per source file, or per module it moved between). Lines of the
/// whole dump (the program's total, and the frames from `main` down that were on the stack when the counters were
/// zeroed, which callgrind charges the whole dump to) are left out.
fn parse_annotated(text: &str, messages: usize) -> HashMap<String, (f64, String)> {
    let mut total = f64::INFINITY;
    let mut out: HashMap<String, (f64, String)> = HashMap::new();
    for line in text.lines() {
        let line = line.trim_start();
        let Some((count, rest)) = line.split_once(' ') else {
            continue;
        };
        let Ok(count) = count.replace(',', "").parse::<f64>() else {
            continue;
        };
        // "(12.34%)  file:function [object]"; the percentage may be padded: "( 1.39%)".
        let Some((_, rest)) = rest.split_once(')') else {
            continue;
        };
        let rest = rest.trim();
        if rest.starts_with("PROGRAM TOTALS") {
            total = count;
            continue;
        }
        if count >= total * 0.99 {
            continue;
        }
        let rest = rest.rsplit_once(" [").map_or(rest, |(name, _)| name);
        let function = rest.split_once(':').map_or(rest, |(_, f)| f);
        let entry = out
            .entry(moved_name(function))
            .or_insert_with(|| (0.0, function.to_owned()));
        entry.0 += count / messages.max(1) as f64;
    }
    out
}

/// A function's name without the modules between its crate and its own name, so that one moved to another module
/// (`sqsafe_batch::processor::BatchProcessor::run_record` and
/// `sqsafe_batch::processor::run::<impl sqsafe_batch::processor::config::BatchProcessor>::run_record`) compares with
/// itself: `sqsafe_batch::…::run_record`. Functions of one crate sharing a name are summed under it (on both sides).
fn moved_name(name: &str) -> String {
    let mut base = name;
    let mut closures = 0;
    while let Some(rest) = base.strip_suffix("::{{closure}}") {
        base = rest;
        closures += 1;
    }
    // The last path segment outside angle brackets.
    let mut depth = 0i32;
    let mut last_start = 0;
    let bytes = base.as_bytes();
    let mut i = 0;
    while i < bytes.len() {
        match bytes[i] {
            b'<' => depth += 1,
            b'>' => depth -= 1,
            b':' if depth == 0 && bytes.get(i + 1) == Some(&b':') => {
                last_start = i + 2;
                i += 1;
            }
            _ => {}
        }
        i += 1;
    }
    if last_start == 0 {
        return name.to_owned();
    }
    // The first path's crate: `<&mut serde_json::de::Deserializer<R> as ...>` is serde_json's.
    let krate = base
        .split(|c: char| !(c.is_alphanumeric() || c == '_'))
        .find(|word| !word.is_empty() && !["mut", "dyn", "impl", "const"].contains(word))
        .unwrap_or_default();
    format!(
        "{krate}::…::{}{}",
        &base[last_start..],
        "::{{closure}}".repeat(closures)
    )
}

/// The functions whose instructions per message differ most between the two builds.
#[derive(Debug, Clone, Default, Serialize)]
struct FunctionDiff {
    mode: String,
    network: String,
    inclusive: bool,
    /// (function, base, head), largest |head − base| first.
    rows: Vec<(String, f64, f64)>,
}

async fn function_diffs(counts: &Counts) -> Vec<FunctionDiff> {
    let (Some(base), Some(head)) = (counts.get("base"), counts.get("head")) else {
        return Vec::new();
    };
    let mut keys: Vec<&CountKey> = base.keys().filter(|k| head.contains_key(*k)).collect();
    keys.sort();
    let mut out = Vec::new();
    for key in keys {
        let (_, bm, bf) = &base[key];
        let (_, hm, hf) = &head[key];
        for inclusive in [false, true] {
            let b = per_function(bf, *bm, inclusive).await;
            let h = per_function(hf, *hm, inclusive).await;
            out.push(FunctionDiff {
                mode: key.0.clone(),
                network: format!("{} + {} ms", key.1, key.2),
                inclusive,
                rows: largest_differences(&b, &h, TOP_FUNCTIONS),
            });
        }
    }
    out
}

fn largest_differences(
    base: &HashMap<String, (f64, String)>,
    head: &HashMap<String, (f64, String)>,
    n: usize,
) -> Vec<(String, f64, f64)> {
    let mut names: Vec<&String> = base.keys().chain(head.keys()).collect();
    names.sort();
    names.dedup();
    let mut rows: Vec<(String, f64, f64)> = names
        .into_iter()
        .map(|name| {
            (
                name.clone(),
                base.get(name).map_or(0.0, |f| f.0),
                head.get(name).map_or(0.0, |f| f.0),
            )
        })
        .collect();
    rows.sort_by(|a, b| (b.2 - b.1).abs().total_cmp(&(a.2 - a.1).abs()));
    rows.truncate(n);
    rows
}

fn mode_label(peer: Peer) -> &'static str {
    match peer {
        Peer::SqsafeKeyed => "keyed mode",
        _ => "claim mode",
    }
}

fn pct(base: f64, head: f64) -> String {
    if base.is_nan() || head.is_nan() || base == 0.0 {
        return "-".to_owned();
    }
    format!("{:+.1}%", (head - base) / base * 100.0)
}

/// The summary, as text for the terminal and the body of the results file's section.
fn summary(c: &Comparison, pairs: &[Pair], counts: &Counts, diffs: &[FunctionDiff]) -> String {
    let mut s = String::new();
    // What was run, from the runs themselves.
    let first = pairs.first().map(|p| p.base[0].clone()).unwrap_or_default();
    let base_first = pairs.iter().all(|p| p.base[0].started <= p.head[0].started);
    let _ = writeln!(
        s,
        "base: {}\nhead: {}\n{} pairs, {}, each run a process and bed of its own; per run and mode: {} cold \
         start(s), then {} fresh batches of 10 on the warm process; network: {}",
        c.base.label,
        c.head.label,
        pairs.len(),
        if base_first {
            "base then head"
        } else {
            "base first in odd pairs, head first in even ones"
        },
        first.cold_starts,
        first.batches,
        first.network
    );
    let _ = writeln!(
        s,
        "CPU: the function process's user + system per fresh message (us, /proc, clock ticks), then each; wall: median \
         batch of 10 (ms); first answer: spawn to its first batch answered (ms, median of the run's cold starts)"
    );
    type Metric = (&'static str, &'static str, fn(&Figures) -> f64, usize);
    let metrics: [Metric; 5] = [
        ("CPU/fresh msg", "us", |f| f.cpu_us, 0),
        ("wall/batch of 10", "ms", |f| f.wall_ms, 1),
        ("first answer", "ms", |f| f.first_ms, 0),
        ("of the CPU: user", "us", |f| f.user_us, 0),
        ("system", "us", |f| f.system_us, 0),
    ];
    for (i, peer) in MODES.iter().enumerate() {
        let _ = writeln!(s, "\n{} ({})", mode_label(*peer), peer.name());
        let _ = write!(s, "  {:<6}", "pair");
        for (name, unit, _, _) in metrics {
            let _ = write!(s, " | {:>24}", format!("{name} ({unit})"));
        }
        let _ = writeln!(s, " | load (1 min)");
        for (n, p) in pairs.iter().enumerate() {
            let _ = write!(s, "  {:<6}", n + 1);
            for (_, _, get, digits) in metrics {
                let cell = format!(
                    "{:.*} -> {:.*} ({})",
                    digits,
                    get(&p.base[i]),
                    digits,
                    get(&p.head[i]),
                    pct(get(&p.base[i]), get(&p.head[i]))
                );
                let _ = write!(s, " | {cell:>24}");
            }
            let _ = writeln!(s, " | {:.1} / {:.1}", p.base[i].load, p.head[i].load);
        }
        for (role, pick) in [("base", true), ("head", false)] {
            let _ = write!(s, "  {role:<6}");
            for (_, _, get, digits) in metrics {
                let values: Vec<f64> = pairs
                    .iter()
                    .map(|p| get(if pick { &p.base[i] } else { &p.head[i] }))
                    .collect();
                let (lo, hi) = min_max(&values);
                let cell = format!(
                    "{:.*} ({:.*}-{:.*})",
                    digits,
                    median(&values),
                    digits,
                    lo,
                    digits,
                    hi
                );
                let _ = write!(s, " | {cell:>24}");
            }
            let _ = writeln!(s);
        }
        let _ = write!(s, "  {:<6}", "verdict");
        for (_, _, get, _) in metrics {
            let base: Vec<f64> = pairs.iter().map(|p| get(&p.base[i])).collect();
            let head: Vec<f64> = pairs.iter().map(|p| get(&p.head[i])).collect();
            let (lo, hi) = min_max(&base);
            let m = median(&head);
            let verdict = if m.is_nan() || lo.is_nan() {
                "-".to_owned()
            } else if m < lo {
                format!("below base ({})", pct(median(&base), m))
            } else if m > hi {
                format!("ABOVE base ({})", pct(median(&base), m))
            } else {
                format!("within base ({})", pct(median(&base), m))
            };
            let _ = write!(s, " | {verdict:>24}");
        }
        let _ = writeln!(s);
    }
    let _ = writeln!(
        s,
        "  (per pair: base -> head, and the load average when each run started; per side: median (min-max) over the \
         pairs; verdict: head's median against base's min-max)"
    );
    if let (Some(base), Some(head)) = (counts.get("base"), counts.get("head")) {
        let _ = writeln!(
            s,
            "\ninstructions per fresh message (callgrind, {CALLGRIND_BATCHES} batches of 10 on one warm process per \
             mode and network)"
        );
        let mut keys: Vec<&CountKey> = base.keys().chain(head.keys()).collect();
        keys.sort();
        keys.dedup();
        for key in keys {
            let b = base.get(key).map_or(f64::NAN, |c| c.0);
            let h = head.get(key).map_or(f64::NAN, |c| c.0);
            let peer = if key.0 == Peer::SqsafeKeyed.name() {
                Peer::SqsafeKeyed
            } else {
                Peer::Sqsafe
            };
            let _ = writeln!(
                s,
                "  {:<10} {:<16} base {:>10.0}  head {:>10.0}  {:>+9.0} ({})",
                mode_label(peer),
                format!("{} + {} ms", key.1, key.2),
                b,
                h,
                h - b,
                pct(b, h)
            );
        }
    }
    // One network's: the canned backend with no latency when counted (the steadiest), the others in compare.json.
    let steady = "canned + 0 ms";
    let shown = if diffs.iter().any(|d| d.network == steady) {
        steady
    } else {
        diffs.first().map_or("", |d| d.network.as_str())
    };
    for d in diffs.iter().filter(|d| d.network == shown) {
        let _ = writeln!(
            s,
            "\n{} {}, {}: the {} functions whose instructions per message differ most (base -> head; modules between a \
             crate and a function's name left out, so a moved function meets itself)",
            d.mode,
            d.network,
            if d.inclusive {
                "inclusive (each with what it calls)"
            } else {
                "exclusive (each alone)"
            },
            d.rows.len()
        );
        for (name, b, h) in &d.rows {
            let name = if name.chars().count() > 150 {
                format!("{}...", name.chars().take(150).collect::<String>())
            } else {
                name.clone()
            };
            let _ = writeln!(s, "  {b:>10.0} -> {h:>10.0}  {:>+9.0}  {name}", h - b);
        }
    }
    s
}

const MD_PREAMBLE: &str = "# Base against head: charge-payment's claim and keyed modes\n\n\
Appended to by `scripts/bench-compare.sh BASE [HEAD]` (crates/sqsafe-bench, module `compare`), newest last: release \
charge-payment built alone at each commit, run under sqsafe-local's Runtime API behind the bench proxy, base and head \
interleaved, each run a process and bed of its own; instructions per message counted by callgrind. Timings on a shared \
machine move with its load: read the spread, and the instruction counts for the work itself.\n";

fn markdown(c: &Comparison, pairs: &[Pair], text: &str, counted: bool) -> String {
    let cpu = std::fs::read_to_string("/proc/cpuinfo")
        .ok()
        .and_then(|t| {
            t.lines()
                .find(|l| l.starts_with("model name"))
                .and_then(|l| l.split_once(':'))
                .map(|(_, v)| v.trim().to_owned())
        })
        .unwrap_or_default();
    let rustc = std::process::Command::new("rustc")
        .arg("--version")
        .output()
        .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_owned())
        .unwrap_or_default();
    // The runs' own times and loads, so a summary made again later (`--summary-only`) says the same.
    let runs: Vec<&Figures> = pairs
        .iter()
        .flat_map(|p| [&p.base[0], &p.head[0]])
        .collect();
    let first = runs.iter().min_by_key(|f| f.started);
    let last = runs.iter().max_by_key(|f| f.started);
    let date = std::process::Command::new("date")
        .arg("-u")
        .arg(format!("--date=@{}", first.map_or(0, |f| f.started)))
        .arg("+%Y-%m-%d %H:%M UTC")
        .output()
        .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_owned())
        .unwrap_or_default();
    let seconds = match (first, last) {
        (Some(a), Some(b)) => (b.started - a.started) as f64 + b.seconds,
        _ => 0.0,
    };
    let dir = std::env::current_dir()
        .ok()
        .and_then(|root| c.dir.strip_prefix(root).ok().map(Path::to_path_buf))
        .unwrap_or_else(|| c.dir.clone());
    format!(
        "\n## {date}: {} against {}\n\n\
         - machine: {} cores, {cpu}; load average (1 min) {:.1} when the first run started, {:.1} when the last \
         ended; {seconds:.0} s of runs{}\n\
         - {rustc}; runs and dumps in `{}`\n\n```text\n{}```\n",
        c.head.label,
        c.base.label,
        std::thread::available_parallelism().map_or(1, usize::from),
        first.map_or(f64::NAN, |f| f.load),
        last.map_or(f64::NAN, |f| f.load_end),
        if counted {
            ", the instruction counts after them"
        } else {
            ""
        },
        dir.display(),
        text
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn networks_are_read_as_backend_and_milliseconds() {
        let n = parse_network("moto-5").expect("moto-5");
        assert_eq!((n.backend, n.latency_ms), (Backend::Moto, 5));
        let n = parse_network("canned-0ms").expect("canned-0ms");
        assert_eq!((n.backend, n.latency_ms), (Backend::Canned, 0));
        assert!(parse_network("dynamodb-5").is_err());
        assert!(parse_network("moto").is_err());
    }

    #[test]
    fn the_median_of_an_even_count_is_the_mean_of_the_middle_two() {
        assert_eq!(median(&[4.0, 1.0, 3.0, 2.0]), 2.5);
        assert_eq!(median(&[3.0, 1.0, 2.0]), 2.0);
        assert!(median(&[]).is_nan());
        assert_eq!(min_max(&[3.0, f64::NAN, 1.0]), (1.0, 3.0));
    }

    #[test]
    fn annotated_lines_are_read_per_function_and_message() {
        let text = "\
--------------------------------------------------------------------------------
Ir
--------------------------------------------------------------------------------
2,000 (100.0%)  PROGRAM TOTALS
2,000 (100.0%)  ???:main [/bin/f]
  400 (20.00%)  src/a.rs:sqsafe::f [/bin/f]
  100 ( 5.00%)  src/b.rs:sqsafe::f [/bin/f]
   10 ( 0.50%)  ???:<T as core::clone::Clone>::clone [/bin/f]
";
        let per = parse_annotated(text, 10);
        let count = |name: &str| per.get(name).map(|f| f.0);
        assert_eq!(count("main"), None, "the whole dump");
        assert_eq!(count("sqsafe::…::f"), Some(50.0));
        assert_eq!(count("T::…::clone"), Some(1.0));
        assert!(!per.contains_key("PROGRAM TOTALS"));
        let base = HashMap::from([
            ("a".to_owned(), (10.0, String::new())),
            ("b".to_owned(), (5.0, String::new())),
        ]);
        let head = HashMap::from([
            ("a".to_owned(), (11.0, String::new())),
            ("c".to_owned(), (20.0, String::new())),
        ]);
        let rows = largest_differences(&base, &head, 2);
        assert_eq!(
            rows,
            vec![("c".to_owned(), 0.0, 20.0), ("b".to_owned(), 5.0, 0.0)]
        );
    }

    #[test]
    fn a_function_moved_between_modules_keeps_its_name() {
        for (old, new) in [
            (
                "sqsafe_idempotency::engine::Idempotency<S>::execute::{{closure}}",
                "sqsafe_idempotency::engine::claim::<impl sqsafe_idempotency::engine::types::Idempotency<S>>::execute::{{closure}}",
            ),
            (
                "<sqsafe_idempotency::store::dynamodb::DynamoDbStore as sqsafe_idempotency::store::IdempotencyStore>::complete::{{closure}}",
                "sqsafe_idempotency::store::dynamodb::ops::<impl sqsafe_idempotency::store::IdempotencyStore for sqsafe_idempotency::store::dynamodb::DynamoDbStore>::complete::{{closure}}",
            ),
        ] {
            assert_eq!(moved_name(old), moved_name(new), "{old}");
        }
        assert_eq!(
            moved_name("sqsafe_idempotency::engine::Idempotency<S>::execute::{{closure}}"),
            "sqsafe_idempotency::…::execute::{{closure}}"
        );
        assert_eq!(
            moved_name("core::ptr::drop_in_place<a::B<c::D>>"),
            "core::…::drop_in_place<a::B<c::D>>"
        );
        assert_eq!(moved_name("(below main)"), "(below main)");
        assert_eq!(
            moved_name(
                "<&mut serde_json::de::Deserializer<R> as serde::de::Deserializer>::deserialize_any"
            ),
            "serde_json::…::deserialize_any"
        );
    }
}
