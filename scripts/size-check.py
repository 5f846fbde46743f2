"""The release binary of a consumer in a team's own project against charge-payment's built inside this workspace.

A crate outside this workspace that depends on sqsafe must get only what it uses (issue 17): its release binary within
10% of charge-payment's. `make test` checks the dependency tree of such a project and its *debug* binary
(scripts/dependents-check.py, scripts/project-check.py); the release builds cost about ten minutes of two cores more,
so they run here, by `make size`, not in `make test`.

1. renders templates/project outside the workspace, as scripts/project-check.py does (`sam init --location`, sqsafe
   as a path dependency, the workspace's Cargo.lock);
2. builds its consumer (`ship-order`) with `cargo build --release`, in a target folder of its own, for this machine;
3. builds charge-payment with `cargo build --release` inside the workspace, in a target folder of its own (the
   bench's release build keeps its symbols: another profile);
4. prints both sizes and their ratio, appends them to bench/SIZE.md, and fails when the project's is more than 10%
   larger.

Both builds use the release profile their workspace names (the same in both: codegen-units 16, no LTO, unwind,
symbols stripped; see Cargo.toml). The target folders are kept under target/size-check (a second run only relinks);
`--clean` removes them at the end.
"""

from __future__ import annotations

import argparse
import datetime
import importlib.util
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
RESULTS = ROOT / "bench" / "SIZE.md"
LIMIT = 1.10


def project_check():
    """scripts/project-check.py as a module: its render() is the one way this repository makes a team's project."""
    spec = importlib.util.spec_from_file_location("project_check", ROOT / "scripts" / "project-check.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def build(cwd: Path, package: str, target: Path) -> Path:
    env = {
        **os.environ,
        "CARGO_TARGET_DIR": str(target),
        # The workspace's linker (its .cargo/config.toml), for both: the same linker, the same kind of binary.
        "CARGO_TARGET_X86_64_UNKNOWN_LINUX_GNU_LINKER": str(ROOT / "scripts" / "linker.sh"),
    }
    env.pop("CARGO_MANIFEST_DIR", None)
    args = ["cargo", "build", "--release", "-p", package]
    print("$ " + " ".join(args) + f"   (in {cwd}, target {target})", flush=True)
    started = time.monotonic()
    subprocess.run(args, cwd=cwd, env=env, check=True)
    print(f"built in {time.monotonic() - started:.0f} s", flush=True)
    return target / "release" / package


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--clean", action="store_true", help="remove target/size-check at the end")
    args = parser.parse_args()
    pc = project_check()
    folder = ROOT / "target" / "size-check"
    scratch = Path(tempfile.mkdtemp(prefix="sqsafe-size-"))
    if scratch.resolve().is_relative_to(ROOT):
        raise SystemExit(f"size-check: {scratch} is inside the workspace; set TMPDIR elsewhere")
    try:
        pc.step(f"sam init --location templates/project into {scratch} (outside the workspace)")
        project = pc.render(scratch)
        pc.step(f"{pc.NAME}, release, in the project")
        outside = build(project, pc.NAME, folder / "project")
        pc.step("charge-payment, release, in the workspace")
        inside = build(ROOT, "charge-payment", folder / "workspace")
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    a, b = outside.stat().st_size, inside.stat().st_size
    ratio = a / b
    verdict = "within" if ratio <= LIMIT else "OVER"
    line = (f"release binaries: {pc.NAME} (outside project) {a:,} B, charge-payment (inside the workspace) {b:,} B: "
            f"{ratio:.3f}x, {verdict} the {LIMIT:.2f}x limit")
    print(line, flush=True)
    commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=ROOT, capture_output=True, text=True,
                            check=False).stdout.strip() or "unknown"
    if not RESULTS.exists():
        RESULTS.write_text(
            "# Release binary size: a team's consumer against charge-payment\n\n"
            "Written by `make size` (scripts/size-check.py): the generated consumer of a project rendered from\n"
            "templates/project outside the workspace, and charge-payment inside it, both `cargo build --release`\n"
            "(x86_64, the workspace's release profile, symbols stripped). The limit is 1.10x.\n\n"
            "| date (UTC) | commit | outside project | charge-payment | ratio |\n|---|---|---|---|---|\n"
        )
    with RESULTS.open("a") as results:
        now = datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M")
        results.write(f"| {now} | {commit} | {a:,} B | {b:,} B | {ratio:.3f} |\n")
    print(f"appended to {RESULTS.relative_to(ROOT)}")
    if args.clean:
        shutil.rmtree(folder, ignore_errors=True)
    if ratio > LIMIT:
        print(f"size-check: {pc.NAME}'s release binary is more than {LIMIT:.2f}x charge-payment's: something pulls in "
              "more than a consumer uses (scripts/dependents-check.py --project lists the tree)", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
