"""Installs `sqsafe` (the CLI: check, local up, new consumer, dlq) into .tools/bin, at the sqsafe this project depends
on: Cargo.toml's `[workspace.dependencies] sqsafe`, from the same git tag (or rev, or branch), or from the same checkout
when it is a path. `make sqsafe` runs it, and so do `make test` and `make local`: nothing has to be on PATH.

A git source is installed once, and again when Cargo.toml names another one (the source installed is kept in
.tools/sqsafe.source). A path source is installed on every run: the checkout may have changed, and cargo rebuilds only
what did (a few seconds when nothing did). Cargo builds a git source in the project's target folder (CARGO_TARGET_DIR,
else target/): a later version rebuilds only what changed, and what the project's own crates already compiled with the
same features is reused. A path source is built in a folder of its own in it (sqsafe-cli/): `cargo install --path`
reads the checkout's .cargo/config.toml (sqsafe's repository names a linker there) and the project's builds do not,
so in one folder each would compile the crates both use again, every time the other had (about 200 crates before
each `make test` and `make local`). A debug build: from a clean start about 220 s of CPU time against 580 s for a release one
(measured on 2 cores), and sqsafe's work (reading a template, starting moto and cargo lambda watch) needs no
optimising.
"""

import os
import subprocess
import sys
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
TOOLS = ROOT / ".tools"
BIN = TOOLS / "bin" / "sqsafe"
RECORD = TOOLS / "sqsafe.source"


def source() -> list[str]:
    """cargo install's arguments naming where sqsafe-cli comes from: beside Cargo.toml's sqsafe."""
    manifest = ROOT / "Cargo.toml"
    dep = tomllib.loads(manifest.read_text()).get("workspace", {}).get("dependencies", {}).get("sqsafe")
    if isinstance(dep, dict) and "git" in dep:
        pins = [(f"--{key}", dep[key]) for key in ("tag", "rev", "branch") if key in dep]
        return ["--git", dep["git"], *(arg for pin in pins for arg in pin)]
    if isinstance(dep, dict) and "path" in dep:
        # sqsafe's crates are siblings: <checkout>/crates/sqsafe and <checkout>/crates/sqsafe-cli.
        return ["--path", str((ROOT / dep["path"]).resolve().parent / "sqsafe-cli")]
    sys.exit(f"install-sqsafe.py: {manifest}'s [workspace.dependencies] sqsafe is {dep!r}: expected a git source "
             "(git and tag) or a path to sqsafe's crates/sqsafe")


def main() -> int:
    args = source()
    pin = " ".join(args)
    if args[0] == "--git" and BIN.is_file() and RECORD.is_file() and RECORD.read_text().strip() == pin:
        return 0
    target = os.environ.get("CARGO_TARGET_DIR") or str(ROOT / "target")
    if args[0] == "--path":
        target = str(Path(target) / "sqsafe-cli")
    first = "" if BIN.is_file() else " (the first time: a few minutes)"
    print(f"install-sqsafe.py: sqsafe-cli {pin} into .tools/bin{first}", flush=True)
    RECORD.unlink(missing_ok=True)
    cmd = ["cargo", "install", "--quiet", "--locked", "--debug", "--force", "--root", str(TOOLS),
           "--target-dir", target, *args, "sqsafe-cli"]
    # cargo's note that .tools/bin is not on PATH: it need not be, make runs .tools/bin/sqsafe.
    done = subprocess.run(cmd, stderr=subprocess.PIPE, text=True)
    sys.stderr.write("".join(line for line in done.stderr.splitlines(keepends=True)
                             if "to your PATH to be able to run the installed binaries" not in line))
    if done.returncode != 0:
        return done.returncode
    RECORD.write_text(pin + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
