"""The architecture every step of `make test` builds the Lambda functions for, decided once (issue 39).

template.yaml deploys arm64, which needs the aarch64-unknown-linux-gnu Rust standard library. rust-toolchain.toml
lists it, but rustup adds a toolchain's listed targets only when it installs that toolchain: a machine whose image
came with 1.95.0 (this project's) has no aarch64 std. Two steps that read the machine at different moments once
disagreed (the project check built x86_64 before the template checks added the std and built arm64), and the size
check could not compare the two bootstraps. So:

- `--decide` (scripts/test.sh, its first step): SQSAFE_BUILD_ARCH when set (arm64 or x86_64); else arm64 when the
  std is installed, or once `rustup target add aarch64-unknown-linux-gnu` (bounded to 2 minutes) added it; else
  x86_64, with the reason. Prints `ARCH<TAB>REASON`; test.sh exports both (SQSAFE_BUILD_ARCH,
  SQSAFE_BUILD_ARCH_REASON) for every later step.
- `current()` (template-checks.sh, project-check.py, dependents-check.py, size-check.py): the exported decision;
  run by hand without one, the same rule as `--decide`.
- `--check` (scripts/test.sh, before any release build starts): runs each step's `--print-arch` with the decision
  exported and a `rustup` on PATH that says the opposite of it; fails unless every step prints the decision. A step
  that reads the machine instead of the decision fails here, in seconds, not after twenty minutes of release builds.
"""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
STD = "aarch64-unknown-linux-gnu"
TRIPLES = {"arm64": "aarch64-unknown-linux-gnu", "x86_64": "x86_64-unknown-linux-gnu"}
ADD_TIMEOUT = 120

# Every step that builds or compares the functions' release build, as `--check` asks it (argv, after ROOT).
STEPS = {
    "template checks": ["bash", "scripts/template-checks.sh", "--print-arch"],
    "project check": [sys.executable, "scripts/project-check.py", "--print-arch"],
    "dependents check": [sys.executable, "scripts/dependents-check.py", "--print-arch"],
    "size check": [sys.executable, "scripts/size-check.py", "--print-arch"],
}


class ArchError(SystemExit):
    pass


def std_installed() -> bool:
    try:
        listed = subprocess.run(["rustup", "target", "list", "--installed"], cwd=ROOT, capture_output=True,
                                text=True, timeout=60).stdout
    except (OSError, subprocess.TimeoutExpired):
        return False
    return STD in listed.split()


def checked(arch: str, where: str) -> str:
    if arch not in TRIPLES:
        raise ArchError(f"build-arch: {where} must be arm64 or x86_64, not {arch!r}")
    return arch


def decide() -> tuple[str, str]:
    """(arch, reason): see the module's docstring."""
    forced = os.environ.get("SQSAFE_BUILD_ARCH")
    if forced:
        return checked(forced, "SQSAFE_BUILD_ARCH"), f"forced by SQSAFE_BUILD_ARCH={forced}"
    if std_installed():
        return "arm64", f"the {STD} Rust std is installed"
    print(f"build-arch: adding the {STD} Rust std (rust-toolchain.toml lists it; this toolchain came without it)",
          file=sys.stderr, flush=True)
    try:
        added = subprocess.run(["rustup", "target", "add", STD], cwd=ROOT, timeout=ADD_TIMEOUT,
                               stdout=sys.stderr).returncode == 0
    except (OSError, subprocess.TimeoutExpired):
        added = False
    if added and std_installed():
        return "arm64", f"the {STD} Rust std was added now (rustup target add)"
    return "x86_64", (f"the {STD} Rust std is not installed and rustup could not add it, so the functions are built "
                      f"for x86_64 here; template.yaml still deploys arm64")


def current() -> str:
    """The decision a step builds for: SQSAFE_BUILD_ARCH (exported by scripts/test.sh), else decided now."""
    given = os.environ.get("SQSAFE_BUILD_ARCH")
    if given:
        return checked(given, "SQSAFE_BUILD_ARCH")
    return decide()[0]


def triple(arch: str) -> str:
    return TRIPLES[checked(arch, "the architecture")]


def elf_arch(binary: Path) -> str:
    """The architecture an ELF binary was built for (its header's e_machine), in template.yaml's words."""
    header = binary.read_bytes()[:20]
    if header[:4] != b"\x7fELF":
        raise ArchError(f"build-arch: {binary} is not an ELF binary")
    machine = int.from_bytes(header[18:20], "little" if header[5] == 1 else "big")
    return {0xB7: "arm64", 0x3E: "x86_64"}.get(machine, f"e_machine {machine:#x}")


def fake_rustup(folder: Path, lists_std: bool) -> None:
    """A `rustup` that answers the opposite of the decision: it lists the aarch64 std or not, and refuses to add it."""
    listed = f"x86_64-unknown-linux-gnu\\n{STD}\\n" if lists_std else "x86_64-unknown-linux-gnu\\n"
    script = folder / "rustup"
    script.write_text("#!/bin/sh\n"
                      f'if [ "$1 $2" = "target list" ]; then printf "{listed}"; exit 0; fi\n'
                      'echo "fake rustup (scripts/build_arch.py --check): refusing $*" >&2\nexit 1\n')
    script.chmod(0o755)


def check(steps: dict[str, list[str]]) -> list[str]:
    """Each step's `--print-arch` under each decision, the machine's rustup saying the opposite; the disagreements."""
    problems = []
    for arch, lists_std in (("arm64", False), ("x86_64", True)):
        with tempfile.TemporaryDirectory(prefix="sqsafe-build-arch-") as folder:
            fake_rustup(Path(folder), lists_std)
            env = {**os.environ, "SQSAFE_BUILD_ARCH": arch, "PATH": f"{folder}{os.pathsep}{os.environ['PATH']}"}
            for name, argv in steps.items():
                run = subprocess.run(argv, cwd=ROOT, env=env, capture_output=True, text=True, timeout=120)
                said = run.stdout.strip()
                if run.returncode != 0 or said != arch:
                    problems.append(f"{name} ({' '.join(argv[1:])}) builds for {said or '?'} where the decision is "
                                    f"{arch} (exit {run.returncode}{': ' + run.stderr.strip()[-300:] if run.stderr.strip() else ''})")
    return problems


def main(argv: list[str]) -> int:
    if argv == ["--decide"]:
        arch, reason = decide()
        print(f"{arch}\t{reason}")
        return 0
    if argv == ["--current"]:
        print(current())
        return 0
    if argv == ["--check"]:
        problems = check(STEPS)
        if problems:
            print("build-arch: steps of make test would build for different architectures:", file=sys.stderr)
            for problem in problems:
                print(f"  {problem}", file=sys.stderr)
            print("fix: a step takes its architecture from build_arch.current() (SQSAFE_BUILD_ARCH), never from the "
                  "machine", file=sys.stderr)
            return 1
        print(f"build-arch: {', '.join(STEPS)} each build for the decision (SQSAFE_BUILD_ARCH), whatever rustup says")
        return 0
    print("usage: build_arch.py --decide | --current | --check", file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
