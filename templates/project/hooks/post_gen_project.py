"""Removes the API's files when none was asked for, names the Cargo manifests `Cargo.toml`, then formats the Rust
files with rustfmt, as `sqsafe new consumer` and `sqsafe new api` do (they render the same templates/; a long name
moves line breaks).

In the template the manifests are `Cargo.toml.jinja`: cargo reads every `Cargo.toml` of a git dependency's repository,
and a team depending on sqsafe by git would see an error for each templated one."""

import pathlib
import shutil
import subprocess
import sys

# No API asked for (api_name empty): its files were rendered under a placeholder name; they go.
shutil.rmtree("functions/_no-api", ignore_errors=True)
pathlib.Path("events/_no-api.json").unlink(missing_ok=True)

for manifest in sorted(pathlib.Path(".").rglob("Cargo.toml.jinja")):
    manifest.rename(manifest.with_name("Cargo.toml"))

files = sorted(str(p) for p in pathlib.Path("functions").rglob("*.rs"))
rustfmt = shutil.which("rustfmt")
if rustfmt is None:
    print("note: rustfmt not found; run `cargo fmt` once the Rust toolchain is installed", file=sys.stderr)
elif subprocess.run([rustfmt, "--edition", "2024", *files]).returncode != 0:
    print("note: rustfmt failed on the generated files; run `cargo fmt` to see why", file=sys.stderr)
