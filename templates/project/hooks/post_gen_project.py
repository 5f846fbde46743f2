"""Formats the consumer's Rust files for its real name (the template was formatted for a placeholder name)."""

import pathlib
import shutil
import subprocess
import sys

files = sorted(str(p) for p in pathlib.Path("functions").rglob("*.rs"))
rustfmt = shutil.which("rustfmt")
if rustfmt is None:
    print("note: rustfmt not found; run `cargo fmt` once the Rust toolchain is installed", file=sys.stderr)
elif subprocess.run([rustfmt, "--edition", "2024", *files]).returncode != 0:
    print("note: rustfmt failed on the generated files; run `cargo fmt` to see why", file=sys.stderr)
