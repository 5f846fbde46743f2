"""Fails when building one member would compile a third-party crate with other features than the whole workspace.

That is what crates/sqsafe-workspace-hack prevents (its Cargo.toml says why): each member depends on it, and it names
the union of the workspace's features. A member without that dependency, or a feature added somewhere without
`cargo hakari generate`, makes `cargo build -p <member>` (and sam build, cargo lambda watch) compile tokio, hyper or
the AWS SDK once more. For every member, `cargo tree` resolves the build (`-e normal,build`) and the test build
(`-e normal,build,dev`) alone; every third-party crate must come out with a feature set that the whole workspace's
resolution has. Prints each difference and how to fix it. Run by scripts/test.sh.

The libraries a team depends on (`final-excludes` in .config/hakari.toml) are the exception: they must *not* depend on
the workspace-hack, or every dependent compiles the workspace's union of features (scripts/dependents-check.py checks
what a dependent gets). Inside the workspace a command that selects only such libraries names the hack too
(`-p sqsafe-workspace-hack`), so for them the check resolves `-p <library> -p sqsafe-workspace-hack`.
"""

from __future__ import annotations

import json
import subprocess
import sys
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
HACK = "sqsafe-workspace-hack"


def cargo(*args: str) -> str:
    return subprocess.run(["cargo", *args], cwd=ROOT, check=True, capture_output=True, text=True).stdout


def resolved(selection: list[str], edges: str) -> set[str]:
    """Each third-party package as `name version [features]`, as cargo resolves `selection` with those edges."""
    out = cargo("tree", *selection, "-e", edges, "--prefix", "none", "--format", "{p} [{f}]")
    found = set()
    for line in out.splitlines():
        line = line.removesuffix(" (*)").strip()
        if not line or "(/" in line:  # workspace members are path packages: "name vX (/path) [..]"
            continue
        found.add(line.replace(" (proc-macro)", ""))
    return found


def main() -> int:
    metadata = json.loads(cargo("metadata", "--no-deps", "--format-version", "1"))
    members = sorted(p["name"] for p in metadata["packages"] if p["name"] != HACK)
    whole = resolved(["--workspace"], "normal,build,dev")
    hakari = tomllib.loads((ROOT / ".config" / "hakari.toml").read_text())
    libraries = set(hakari.get("final-excludes", {}).get("workspace-members", []))
    problems = []
    for member in members:
        deps = {d["name"] for p in metadata["packages"] if p["name"] == member for d in p["dependencies"]}
        if member in libraries:
            if HACK in deps:
                problems.append(
                    f"{member}: depends on {HACK}, so every crate outside the workspace that uses it compiles the "
                    f"workspace's features (remove the line; .config/hakari.toml final-excludes names it)"
                )
                continue
            for edges, what in (("normal,build", "cargo build"), ("normal,build,dev", "cargo test")):
                for extra in sorted(resolved(["-p", member, "-p", HACK], edges) - whole):
                    problems.append(f"{member} ({what} -p {member} -p {HACK}): {extra} is not how the workspace builds it")
            continue
        if HACK not in deps:
            problems.append(f"{member}: does not depend on {HACK} (add `{HACK}.workspace = true` to its [dependencies])")
            continue
        for edges, what in (("normal,build", "cargo build"), ("normal,build,dev", "cargo test")):
            for extra in sorted(resolved(["-p", member], edges) - whole):
                problems.append(f"{member} ({what} -p {member}): {extra} is not how the workspace builds it")
    if problems:
        print("features-check: members would compile third-party crates with other features:", file=sys.stderr)
        for problem in problems:
            print(f"  {problem}", file=sys.stderr)
        print(
            "fix: cargo install cargo-hakari --locked --version 0.9.39; cargo hakari generate && cargo hakari manage-deps",
            file=sys.stderr,
        )
        return 1
    print(
        f"features-check: {len(members)} members build every third-party crate with the workspace's features "
        f"({len(libraries)} libraries of them with -p {HACK}, which they do not depend on)"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
