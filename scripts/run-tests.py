#!/usr/bin/env python3
"""The tests of the packages named (or of the workspace), as make test and make check run them.

    python3 scripts/run-tests.py --workspace
    python3 scripts/run-tests.py -p sqsafe -p sqsafe-batch ...

With cargo-nextest (in the machine's image): every test but the skips below, four at a time whatever binary they are
in, each in a process of its own (the tests mostly wait on moto, queue timeouts and function processes, where cargo
test runs one binary after another); then the doc tests, which nextest does not run. (Not beside nextest's tests:
rustdoc reads the libraries' rlibs while it compiles them, and some of those tests run cargo in this target folder,
`cargo lambda watch` for one.) Without nextest: cargo test with the same skips, as before. The exit code is the first
failure's.

Skipped, because make test runs them on their own: the fault-injection suite (`_under_faults`, minutes of SIGKILLs
and lease expiries) and the cargo lambda watch test (minutes of queue timeouts and rebuilds).
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SKIPS = ["_under_faults", "sqs_deliveries_through_cargo_lambda_watch_follow_saved_edits"]


def main() -> int:
    selection = sys.argv[1:]
    if not selection:
        raise SystemExit("run-tests: name the packages (-p NAME ...) or --workspace")
    env = {**os.environ, "CARGO_INCREMENTAL": os.environ.get("CARGO_INCREMENTAL", "0")}
    has_nextest = subprocess.run(["cargo", "nextest", "--version"], cwd=ROOT, capture_output=True).returncode == 0
    if not has_nextest:
        print("run-tests: cargo-nextest is not installed: cargo test, one binary after another", flush=True)
        skips = [arg for skip in SKIPS for arg in ("--skip", skip)]
        return subprocess.run(["cargo", "test", *selection, "--", *skips], cwd=ROOT, env=env).returncode

    filterset = "not (" + " | ".join(f"test({skip})" for skip in SKIPS) + ")"
    nextest = ["cargo", "nextest", "run", *selection, "--no-fail-fast", "--test-threads", "4",
               "--status-level", "fail", "--final-status-level", "slow", "-E", filterset]
    doc = ["cargo", "test", *selection, "--doc"]
    print("$ " + " ".join(nextest), flush=True)
    rc = subprocess.run(nextest, cwd=ROOT, env=env).returncode
    print("\n$ " + " ".join(doc), flush=True)
    doc_rc = subprocess.run(doc, cwd=ROOT, env=env).returncode
    if rc != 0:
        print(f"run-tests: cargo nextest run failed (exit {rc})", file=sys.stderr)
        return rc
    if doc_rc != 0:
        print(f"run-tests: the doc tests failed (exit {doc_rc})", file=sys.stderr)
    return doc_rc


if __name__ == "__main__":
    sys.exit(main())
