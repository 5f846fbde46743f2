"""The release binary of a consumer in a team's own project against charge-payment's built inside this workspace.

A crate outside this workspace that depends on sqsafe must get only what it uses (issue 17): its release binary within
10% of charge-payment's. Two ways to compare:

`--built` (make test): the two bootstraps make test has already built, as each is deployed: the project's
`sam build` of its first consumer (scripts/project-check.py leaves it in target/project-release, with the architecture
in build.json) against ChargePaymentFunction's from the workspace's own `sam build` (scripts/template-checks.sh:
.aws-sam/build, the architecture in .aws-sam/sqsafe-build.json). Both release, built by cargo lambda, for the same
architecture (arm64 where the aarch64 std is installed); nothing is built and nothing written.

Without it (`make size`, about ten minutes of two cores more):
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
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import build_arch  # scripts/build_arch.py: this script's folder is on sys.path

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


def verdict(name: str, a: int, b: int, what: str) -> tuple[float, bool]:
    """Prints the comparison; returns the ratio and whether it is within the limit."""
    ratio = a / b
    ok = ratio <= LIMIT
    print(f"{what}: {name} (outside project) {a:,} B, charge-payment (inside the workspace) {b:,} B: "
          f"{ratio:.3f}x, {'within' if ok else 'OVER'} the {LIMIT:.2f}x limit", flush=True)
    if not ok:
        print(f"size-check: {name}'s release binary is more than {LIMIT:.2f}x charge-payment's: something pulls in "
              "more than a consumer uses (scripts/dependents-check.py --project lists the tree)", file=sys.stderr)
    return ratio, ok


def built() -> int:
    """--built: the bootstraps make test's two sam builds left; see the module's docstring."""
    outside_dir = project_check().RELEASE_OUT
    aws_sam = ROOT / ".aws-sam"
    inside_build = aws_sam / "sqsafe-build.json"
    missing = [str(f) for f in (outside_dir / "bootstrap", outside_dir / "build.json",
                                aws_sam / "build" / "ChargePaymentFunction" / "bootstrap", inside_build)
               if not f.is_file()]
    if missing:
        raise SystemExit(f"size-check: --built needs both sam builds (scripts/project-check.py, "
                         f"scripts/template-checks.sh); missing: {', '.join(missing)}")
    outside = json.loads((outside_dir / "build.json").read_text())
    inside_arch = json.loads(inside_build.read_text())["architecture"]
    if outside["architecture"] != inside_arch:
        raise SystemExit(f"size-check: the project was built for {outside['architecture']} and the workspace for "
                         f"{inside_arch}: two architectures cannot be compared (SQSAFE_BUILD_ARCH sets both)")
    # make test's one decision (scripts/build_arch.py), and what each bootstrap really is (its ELF header).
    decided = build_arch.current()
    for label, bootstrap in (("the project's", outside_dir / "bootstrap"),
                             ("the workspace's", aws_sam / "build" / "ChargePaymentFunction" / "bootstrap")):
        if (found := build_arch.elf_arch(bootstrap)) != decided:
            raise SystemExit(f"size-check: {label} bootstrap ({bootstrap}) is {found}, the build architecture decided "
                             f"for make test is {decided} (SQSAFE_BUILD_ARCH)")
    a = (outside_dir / "bootstrap").stat().st_size
    b = (aws_sam / "build" / "ChargePaymentFunction" / "bootstrap").stat().st_size
    _, ok = verdict(outside["binary"], a, b, f"release bootstraps ({inside_arch}, sam build)")
    return 0 if ok else 1


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--clean", action="store_true", help="remove target/size-check at the end")
    parser.add_argument("--built", action="store_true",
                        help="compare the bootstraps make test's two sam builds left (no build, nothing written)")
    parser.add_argument("--print-arch", action="store_true",
                        help="the architecture --built expects both bootstraps in (scripts/build_arch.py --check)")
    args = parser.parse_args()
    if args.print_arch:
        print(build_arch.current())
        return 0
    if args.built:
        return built()
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
    ratio, ok = verdict(pc.NAME, a, b, "release binaries (cargo build --release)")
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
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
