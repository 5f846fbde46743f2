#!/usr/bin/env python3
"""Where a cargo build's time went: a summary of cargo's own report (`--timings`) and, when given, of the link times
scripts/linker.sh recorded (SQSAFE_LINK_TIMES). The method is in book/src/development.md ("Where make test's time
goes").

    SQSAFE_LINK_TIMES=target/link-times.log cargo test --workspace --no-run --timings
    python3 scripts/timings.py [--links target/link-times.log] [target/cargo-timings/cargo-timing.html]
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from collections import defaultdict
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def units(report: Path) -> list[dict]:
    text = report.read_text()
    found = re.search(r"const UNIT_DATA = (\[.*?\]);\n", text, re.S)
    if not found:
        raise SystemExit(f"timings: {report} holds no UNIT_DATA (is it cargo's --timings report?)")
    return json.loads(found.group(1))


def kind(unit: dict) -> str:
    target = unit.get("target", "")
    if "build-script" in target:
        return "build scripts"
    if '"test"' in target or '(test)' in target:
        return "test targets (integration tests, lib and bin unit tests)"
    if '"bin"' in target:
        return "binaries"
    return "libraries"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("report", nargs="?", default=str(ROOT / "target" / "cargo-timings" / "cargo-timing.html"))
    parser.add_argument("--links", help="the file SQSAFE_LINK_TIMES named")
    parser.add_argument("--top", type=int, default=15)
    args = parser.parse_args()
    data = [u for u in units(Path(args.report)) if u["duration"] > 0]
    members = {p.parent.name for p in ROOT.glob("*/*/Cargo.toml")} | {"xtask"}
    total = sum(u["duration"] for u in data)
    print(f"{len(data)} units compiled, {total:.0f} s summed (cargo's timings; on 2 cores the wall time is about half)")
    by_kind: dict[str, float] = defaultdict(float)
    by_owner: dict[str, float] = defaultdict(float)
    for u in data:
        by_kind[kind(u)] += u["duration"]
        by_owner["the workspace's crates" if u["name"] in members else "third-party crates"] += u["duration"]
    for name, seconds in sorted({**by_kind, **by_owner}.items(), key=lambda kv: -kv[1]):
        print(f"  {seconds:7.1f} s  {name}")
    print(f"the {args.top} longest units:")
    for u in sorted(data, key=lambda u: -u["duration"])[: args.top]:
        print(f"  {u['duration']:7.1f} s  {u['name']}{u.get('target', '')}")
    if args.links:
        lines = [line.split(" ", 2) for line in Path(args.links).read_text().splitlines() if line.strip()]
        ms = [int(line[0]) for line in lines]
        print(f"links: {len(ms)}, {sum(ms) / 1000:.1f} s in all, the longest {max(ms) / 1000:.1f} s" if ms else "links: none")
    return 0


if __name__ == "__main__":
    sys.exit(main())
