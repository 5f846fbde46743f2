#!/usr/bin/env python3
"""What a change can break, checked in minutes: `make check` (run under `sqsafe local moto`, which gives it a moto).

The change: the files that differ from BASE (the merge-base of HEAD and origin/main when there is one, else HEAD:
the uncommitted edits), tracked or not. The workspace packages those files belong to, and every workspace package
that depends on one of them (normal, dev and build dependencies alike), are then
  1. formatted (cargo fmt --check, the whole workspace: it takes a second),
  2. clippy-checked with every target, warnings denied,
  3. tested against this moto: their unit, integration and doc tests, as make test runs them and with its skips
     (scripts/run-tests.py: cargo-nextest, in the machine's image, four at a time; else cargo test). The model
     checker's bounded check is sqsafe-model's test: it runs whenever the idempotency crate or the model changed.
Files outside the crates are listed with the step of `make test` that checks them.

Left to `make test`: the fault-injection suite and the cargo lambda watch test (minutes of queue timeouts and
SIGKILLs), rustdoc, the manifest checks, the template checks, the project check, the bench smoke, cargo package.

    make check                          # the change since origin/main (or the uncommitted one)
    make check ARGS="--base HEAD~3"     # since another commit
    make check ARGS="--dry-run"         # what it would run
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
# The workspace-hack: every command that selects packages adds it, so that third-party crates are built with the
# workspace's one feature set (the libraries do not depend on it: its Cargo.toml says why).
HACK = "sqsafe-workspace-hack"
# Files outside the crates, and the step of make test that checks them.
ELSEWHERE = [
    ("templates/", "make test's project check: a new project rendered, its make test"),
    ("template.yaml", "make test's template checks: sam validate, cfn-lint, sam build, the rules"),
    ("sqsafe/", "make test's template checks"),
    ("tests/template/", "make test's template rules' mutation corpus"),
    ("tests/moto/", "make test's moto launcher's tests"),
    ("tests/scripts/", "make test's moto launcher's tests"),
    ("book/", "make test's book step (mdBook build, link check) and crates/sqsafe's doc tests"),
    ("bench/", "make test's bench smoke"),
    ("scripts/", "the step of make test that runs the script"),
    ("requirements/", "every step of make test: the pinned Python tools"),
    ("events/", "the functions' tests that read the sample events"),
]


def git(*args: str) -> str:
    return subprocess.run(["git", *args], cwd=ROOT, check=True, capture_output=True, text=True).stdout


def base_of(asked: str | None) -> tuple[str, str]:
    if asked:
        return git("rev-parse", "--verify", asked).strip(), asked
    has_origin = subprocess.run(["git", "rev-parse", "--verify", "--quiet", "origin/main"], cwd=ROOT,
                                capture_output=True).returncode == 0
    if has_origin:
        return git("merge-base", "HEAD", "origin/main").strip(), "the merge-base of HEAD and origin/main"
    return git("rev-parse", "HEAD").strip(), "HEAD (the uncommitted change)"


def changed_files(base: str) -> list[str]:
    tracked = git("diff", "--name-only", base).split()
    untracked = git("ls-files", "--others", "--exclude-standard").split()
    return sorted(set(tracked) | set(untracked))


def workspace() -> tuple[dict[str, Path], dict[str, set[str]]]:
    """Each member's folder, and each member's workspace dependents (reverse edges, every kind)."""
    meta = json.loads(subprocess.run(["cargo", "metadata", "--format-version", "1", "--locked"], cwd=ROOT,
                                     check=True, capture_output=True, text=True).stdout)
    members = set(meta["workspace_members"])
    name_of = {p["id"]: p["name"] for p in meta["packages"] if p["id"] in members}
    folders = {p["name"]: Path(p["manifest_path"]).parent for p in meta["packages"] if p["id"] in members}
    dependents: dict[str, set[str]] = {name: set() for name in folders}
    for node in meta["resolve"]["nodes"]:
        if node["id"] not in members:
            continue
        for dep in node["deps"]:
            if dep["pkg"] in members:
                dependents[name_of[dep["pkg"]]].add(name_of[node["id"]])
    return folders, dependents


def owner(path: str, folders: dict[str, Path]) -> str | None:
    full = (ROOT / path).resolve()
    best = None
    for name, folder in folders.items():
        if full.is_relative_to(folder) and folder != ROOT and (best is None or len(folder.parts) > len(folders[best].parts)):
            best = name
    return best


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--base", help="compare with this commit instead (default: see above)")
    parser.add_argument("--dry-run", action="store_true", help="print what would run, run nothing")
    args = parser.parse_args()

    base, said = base_of(args.base)
    files = changed_files(base)
    folders, dependents = workspace()
    print(f"check-change: the change since {said} ({base[:10]}): {len(files)} file(s)")
    touched: set[str] = set()
    outside: dict[str, list[str]] = {}
    everything = False
    for path in files:
        if path in ("Cargo.toml", "Cargo.lock", "rust-toolchain.toml") or path.startswith(".cargo/"):
            everything = True
            continue
        name = owner(path, folders)
        if name is not None:
            touched.add(name)
            continue
        step = next((why for prefix, why in ELSEWHERE if path.startswith(prefix)), "make test")
        outside.setdefault(step, []).append(path)
    if everything:
        touched = set(folders)
        print("  the workspace's manifest, lock or toolchain changed: every package")
    affected = set(touched)
    todo = list(touched)
    while todo:
        for dependent in dependents[todo.pop()]:
            if dependent not in affected:
                affected.add(dependent)
                todo.append(dependent)
    affected.discard(HACK)
    for step, paths in sorted(outside.items()):
        print(f"  not checked here ({step}): {', '.join(paths)}")
    if not affected:
        print("check-change: no workspace package changed: nothing to build or test here")
        return 0
    print(f"  changed: {', '.join(sorted(touched - {HACK}))}")
    print(f"  checked (with their dependents): {', '.join(sorted(affected))}")

    selection = [arg for name in sorted(affected) for arg in ("-p", name)] + ["-p", HACK]
    label = "the tests (scripts/run-tests.py: cargo nextest run, four at a time, then the doc tests)"
    runs = [[sys.executable, str(ROOT / "scripts" / "run-tests.py"), *selection]]
    steps = [
        ("cargo fmt --check", [["cargo", "fmt", "--all", "--", "--check"]]),
        ("cargo clippy, warnings denied", [["cargo", "clippy", *selection, "--all-targets", "--", "-D", "warnings"]]),
        ("the test binaries built (cargo test --no-run)", [["cargo", "test", *selection, "--no-run"]]),
        (label, runs),
    ]
    env = {**os.environ, "CARGO_INCREMENTAL": os.environ.get("CARGO_INCREMENTAL", "0")}
    if not args.dry_run and not env.get("AWS_ENDPOINT_URL"):
        print("check-change: AWS_ENDPOINT_URL is not set: run it as `make check` (under sqsafe local moto)",
              file=sys.stderr)
        return 2
    times = []
    started = time.monotonic()
    rc = 0
    for label, commands in steps:
        print(f"\n==> {label}", flush=True)
        for command in commands:
            print(f"    {' '.join(command)}", flush=True)
        if args.dry_run:
            continue
        begun = time.monotonic()
        for command in commands:
            rc = subprocess.run(command, cwd=ROOT, env=env).returncode
            if rc != 0:
                break
        times.append((label, time.monotonic() - begun))
        if rc != 0:
            print(f"\ncheck-change: {label} failed (exit {rc})", file=sys.stderr)
            break
    if times:
        print("\ncheck-change, wall time per step:")
        for label, seconds in times:
            print(f"  {seconds:5.0f} s  {label}")
        print(f"  {time.monotonic() - started:5.0f} s  in all")
    return rc


if __name__ == "__main__":
    sys.exit(main())
