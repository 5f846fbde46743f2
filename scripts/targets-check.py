"""A target marked `test = false` in its Cargo.toml holds no test: `cargo test` does not build its test harness (a
bin's or a library's without unit tests costs a compile and a link of the whole AWS SDK for nothing), so a test
added there would never run, silently. This check fails with the file and line of any `#[test]`, `#[tokio::test]`
or `#[cfg(test)]` in such a target: remove `test = false` from that target, or move the test.

Scanned: a library target's `src/` (all but `main.rs` and `src/bin/`), a binary target's own file and its module
folder (`src/bin/NAME/` beside `src/bin/NAME.rs`, or the folder of `src/main.rs` without `lib.rs` and `bin/`).
Run by `make test` (scripts/test.sh) on the system Python; no argument.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

TEST_MARK = re.compile(r"#\[\s*(?:[\w:]*::)?test\b|#\[\s*cfg\(\s*test\s*\)\s*\]")


def files_of(target: dict) -> list[Path]:
    src = Path(target["src_path"])
    if "lib" in target["kind"] or "rlib" in target["kind"]:
        root = src.parent
        return [p for p in root.rglob("*.rs") if p.name != "main.rs" and "bin" not in p.relative_to(root).parts]
    files = [src]
    if src.name == "main.rs":
        root = src.parent
        files += [p for p in root.rglob("*.rs") if p != src and p.name != "lib.rs"
                  and "bin" not in p.relative_to(root).parts and not (root / "lib.rs").is_file()]
    else:
        folder = src.with_suffix("")
        if folder.is_dir():
            files += sorted(folder.rglob("*.rs"))
    return files


def main() -> int:
    metadata = json.loads(subprocess.run(
        ["cargo", "metadata", "--no-deps", "--format-version", "1"], check=True, capture_output=True, text=True,
    ).stdout)
    found: list[str] = []
    untested = 0
    for package in metadata["packages"]:
        for target in package["targets"]:
            if target.get("test", True) or not {"lib", "rlib", "bin"} & set(target["kind"]):
                continue
            untested += 1
            for path in files_of(target):
                for number, line in enumerate(path.read_text(errors="replace").splitlines(), start=1):
                    if TEST_MARK.search(line):
                        found.append(f"{path}:{number}: {line.strip()}  ({package['name']} {target['name']}, test = false)")
    if found:
        print("targets-check: tests in targets that `cargo test` does not build (test = false in Cargo.toml):",
              file=sys.stderr)
        print("\n".join(f"  {f}" for f in found), file=sys.stderr)
        return 1
    print(f"targets-check: the {untested} targets marked `test = false` hold no test")
    return 0


if __name__ == "__main__":
    sys.exit(main())
