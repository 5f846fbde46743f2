"""Proves `cargo xtask new-consumer` end to end, as `make test` runs it (scripts/test.sh):

1. copies the workspace (tracked and untracked, not ignored files) to a scratch folder;
2. generates a throwaway consumer there (`cargo xtask new-consumer scaffold-probe`);
3. checks that it is formatted and clippy-clean, builds it and runs its tests (against moto); then breaks its effect
   (a permanent error, as a real effect refusing every record would) and checks that its tests FAIL: a generated
   test that passes while every record is dead-lettered proves nothing;
4. runs the template checks (scripts/template-checks.sh) on the scratch template.yaml: sam validate, cfn-lint on the
   SAM and the translated template, the rules; not `sam build` and the smoke deploy (the checkout's own template
   checks run them; here they would compile every workspace crate again in release, at the copy's path);
5. runs the local pipeline on the scratch template (`sqsafe-local up --template ...`), sends one message to the new
   consumer's queue and waits until its intent is COMPLETED in the idempotency table, exactly once, and the queue is
   empty;
6. generates a FIFO transactional consumer with `sqsafe new consumer --fifo --transact`, run from a folder inside the
   copy (it finds the workspace and the template upward), and does 3 for it (after the template checks, so
   that `sam build` does not build it too: its template resources are checked by the template tests' own probe);
7. removes the scratch folder and the probes' binaries.

Cargo builds into the workspace's own target folder (CARGO_TARGET_DIR), so dependencies are not compiled again; only
the probe's binaries land there under their own name, and they are removed at the end. Expects what scripts/test.sh
sets up: the venv, moto server with AWS_ENDPOINT_URL exported, and the workspace's sqsafe-local and function binaries
built (target/debug).
"""

from __future__ import annotations

import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import boto3

ROOT = Path(__file__).resolve().parent.parent
NAME = "scaffold-probe"
NAME_TRANSACT = "scaffold-probe-ledger"
# What each generated handler returns on success, and a permanent error in its place: the effect broken on purpose.
BREAKS = {
    "Ok(Applied { id: p.id })": 'Err(RecordError::permanent("insufficient_stock", "broken on purpose"))',
    "Ok((vec![TransactWriteItem::builder().put(put).build()], applied))":
        'let _ = (put, applied);\n        Err(RecordError::permanent("insufficient_stock", "broken on purpose"))',
}
TARGET = Path(os.environ.get("CARGO_TARGET_DIR", ROOT / "target")).resolve()


def step(text: str) -> None:
    print(f"\n--> scaffold: {text}", flush=True)


def run(*args: str, cwd: Path, env: dict | None = None) -> None:
    print("$ " + " ".join(args), flush=True)
    subprocess.run(args, cwd=cwd, env=env, check=True)


def copy_workspace(scratch: Path) -> None:
    listed = subprocess.run(
        ["git", "ls-files", "-co", "--exclude-standard", "-z"], cwd=ROOT, check=True, capture_output=True
    ).stdout.split(b"\0")
    for raw in listed:
        if not raw:
            continue
        rel = Path(raw.decode())
        src = ROOT / rel
        if not src.is_file():
            continue  # deleted in the work tree but still tracked
        dst = scratch / rel
        dst.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(src, dst)
    # The venv is the project's own tool set (sam, cfn-lint, cargo-lambda): link it rather than copy 300 MB.
    (scratch / ".venv").symlink_to(ROOT / ".venv")


def pipeline(scratch: Path) -> None:
    """sqsafe-local up on the scratch template; one message to the probe; one COMPLETED intent."""
    cmd = [
        str(TARGET / "debug" / "sqsafe-local"), "up",
        "--template", str(scratch / "template.yaml"),
        "--bin-dir", str(TARGET / "debug"),
        "--visibility-timeout", "5",
    ]
    print("$ " + " ".join(cmd), flush=True)
    proc = subprocess.Popen(cmd, cwd=scratch, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    lines: list[str] = []
    try:
        endpoint = queue = table = None
        hints: dict[str, str] = {}
        deadline = time.monotonic() + 120
        assert proc.stdout is not None
        # Until sqsafe-local has printed the endpoint, the probe's queue, the table and one send command per consumer.
        while time.monotonic() < deadline and not (endpoint and queue and table and len(hints) >= 3):
            line = proc.stdout.readline()
            if not line:
                raise SystemExit("scaffold: sqsafe-local stopped before it was ready:\n" + "".join(lines))
            lines.append(line)
            if m := re.match(r"moto server\s+(\S+)", line):
                endpoint = m.group(1)
            elif m := re.match(r"table\s+(\S+)\s+\(IdempotencyTable\)", line):
                table = m.group(1)
            elif m := re.match(rf"{re.escape(NAME)}\s+queue\s+(\S+)", line):
                queue = m.group(1)
            elif m := re.match(r"  (\S+)\s+(\.venv/bin/python scripts/send-message\.py .*)$", line):
                hints[m.group(1)] = m.group(2)
        if not (endpoint and queue and table):
            raise SystemExit(f"scaffold: sqsafe-local did not print the endpoint, queue and table:\n{''.join(lines)}")
        session = dict(endpoint_url=endpoint, region_name="us-east-1", aws_access_key_id="x", aws_secret_access_key="x")
        sqs, dynamodb = boto3.client("sqs", **session), boto3.client("dynamodb", **session)
        # Send with the ready-made commands sqsafe-local prints, one per consumer (the FIFO one carries its group).
        for function in ("charge-payment", "apply-ledger", NAME):
            if function not in hints:
                raise SystemExit(f"scaffold: no send command printed for {function}:\n{''.join(lines)}")
            print(f"$ {hints[function]}", flush=True)
            subprocess.run(hints[function], shell=True, cwd=scratch, check=True)
        deadline = time.monotonic() + 60
        completed: list[dict] = []
        others: set[str] = set()
        while time.monotonic() < deadline:
            items = dynamodb.scan(TableName=table)["Items"]
            done = [i for i in items if i["status"]["S"] == "COMPLETED"]
            completed = [i for i in done if i["pk"]["S"].startswith(f"{NAME}#v1#")]
            others = {i["pk"]["S"].split("#")[0] for i in done} - {NAME}
            if completed and others >= {"charge-payment", "apply-ledger"}:
                break
            time.sleep(0.5)
        if others < {"charge-payment", "apply-ledger"}:
            raise SystemExit(f"scaffold: the printed sample messages were not all applied (completed: {sorted(others)})")
        if len(completed) != 1:
            raise SystemExit(f"scaffold: expected one COMPLETED intent of {NAME}, found {len(completed)}")
        left = sqs.get_queue_attributes(
            QueueUrl=queue, AttributeNames=["ApproximateNumberOfMessages", "ApproximateNumberOfMessagesNotVisible"]
        )["Attributes"]
        deadline = time.monotonic() + 30
        while any(v != "0" for v in left.values()) and time.monotonic() < deadline:
            time.sleep(0.5)
            left = sqs.get_queue_attributes(
                QueueUrl=queue, AttributeNames=["ApproximateNumberOfMessages", "ApproximateNumberOfMessagesNotVisible"]
            )["Attributes"]
        if any(v != "0" for v in left.values()):
            raise SystemExit(f"scaffold: the message was not deleted from {queue}: {left}")
        print(f"one effect: {completed[0]['pk']['S']} COMPLETED, the queue is empty", flush=True)
    finally:
        # SIGTERM, as a CI runner or `kill` sends it: sqsafe-local must stop everything it started, moto included.
        proc.send_signal(signal.SIGTERM)
        try:
            out, _ = proc.communicate(timeout=30)
        except subprocess.TimeoutExpired:
            proc.kill()
            out, _ = proc.communicate()
        print("".join(lines[-5:]) + (out or "")[-2000:], flush=True)
    if proc.returncode != 0:
        raise SystemExit(f"scaffold: sqsafe-local did not stop cleanly on SIGTERM (exit {proc.returncode})")
    try:
        boto3.client("sqs", **session).list_queues()
    except Exception:  # noqa: BLE001 - any failure to connect means the server is gone
        print("sqsafe-local stopped on SIGTERM, and its moto server with it", flush=True)
    else:
        raise SystemExit(f"scaffold: moto at {endpoint} still answers after sqsafe-local got SIGTERM")


def crate_checks(scratch: Path, env: dict, name: str) -> None:
    """The generated crate: formatted, clippy-clean, its tests pass; with its effect broken, its tests fail."""
    run("cargo", "fmt", "--check", "-p", name, cwd=scratch, env=env)
    run("cargo", "clippy", "-p", name, "--all-targets", "--", "-D", "warnings", cwd=scratch, env=env)
    run("cargo", "test", "-p", name, cwd=scratch, env=env)
    handler = scratch / "functions" / name / "src" / "handler.rs"
    original = handler.read_text()
    found = [ok for ok in BREAKS if ok in original]
    if len(found) != 1:
        raise SystemExit(f"scaffold: {handler} has no effect to break (looked for {list(BREAKS)})")
    handler.write_text(original.replace(found[0], BREAKS[found[0]]))
    try:
        print(f"$ cargo test -p {name}   (effect broken: every record dead-lettered; the tests must fail)", flush=True)
        broken = subprocess.run(
            ["cargo", "test", "-p", name, "--no-fail-fast"], cwd=scratch, env=env, capture_output=True, text=True
        )
    finally:
        handler.write_text(original)
        # `cargo test` built the function's binary from the broken source too: build it again from the restored one,
        # or the pipeline below would run the broken binary.
        run("cargo", "build", "-q", "-p", name, "--bins", cwd=scratch, env=env)
    out = broken.stdout + broken.stderr
    if broken.returncode == 0:
        raise SystemExit(f"scaffold: {name}'s tests passed with its effect broken:\n{out[-3000:]}")
    failed = sorted(set(re.findall(r"^test (\S+) \.\.\. FAILED$", out, re.MULTILINE)))
    if "the_sample_event_applies_once_and_its_redelivery_is_replayed" not in failed:
        raise SystemExit(f"scaffold: {name}: the sample-event test did not fail with the effect broken:\n{out[-3000:]}")
    print(f"with the effect broken, {name}'s tests fail as they must: {', '.join(failed)}", flush=True)


def main() -> int:
    scratch = Path(tempfile.mkdtemp(prefix="sqsafe-scaffold-"))
    env = {**os.environ, "CARGO_TARGET_DIR": str(TARGET)}
    try:
        step(f"copy the workspace to {scratch}")
        copy_workspace(scratch)
        step(f"cargo xtask new-consumer {NAME}")
        run("cargo", "xtask", "new-consumer", NAME, cwd=scratch, env=env)
        step("the generated crate: formatted, clippy-clean, built, tested; its tests fail when its effect breaks")
        crate_checks(scratch, env, NAME)
        step("every template check, on the template with the new consumer")
        # Without `sam build` (and the smoke deploy that needs its output): it would compile every workspace crate
        # again in release at the copy's path, for a function built like the checkout's, whose own template checks
        # ran sam build; the rules check the new function's build method.
        run("bash", "scripts/template-checks.sh", cwd=scratch, env={**env, "SQSAFE_TEMPLATE_CHECKS_NO_BUILD": "1"})
        step("one message through the local pipeline, one effect")
        pipeline(scratch)
        step(f"sqsafe new consumer {NAME_TRANSACT} --fifo --transact, from a folder inside the project; the same checks")
        # The installed command's way: `sqsafe` run from below the workspace root finds it, and the template, upward.
        run(
            "cargo", "run", "-q", "-p", "sqsafe-cli", "--bin", "sqsafe", "--",
            "new", "consumer", NAME_TRANSACT, "--fifo", "--transact",
            cwd=scratch / "functions", env=env,
        )
        crate_checks(scratch, env, NAME_TRANSACT)
        step("passed; discarding the scratch copy")
        return 0
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
        for name in (NAME, NAME_TRANSACT):
            for leftover in (TARGET / "debug").glob(f"{name}*"):
                if leftover.is_file():
                    leftover.unlink()
            shutil.rmtree(TARGET / "lambda" / name, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
