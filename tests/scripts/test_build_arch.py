"""scripts/build_arch.py: make test's one build architecture (issue 39). Run by make test beside clippy."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "scripts"))
import build_arch  # noqa: E402


def rustup_on_path(monkeypatch, folder: Path, lists_std: bool, adds: bool) -> Path:
    """A rustup that lists the aarch64 std or not; `target add` succeeds (and then lists it) or fails. Its calls are
    appended to `calls`."""
    state = folder / "has-std"
    if lists_std:
        state.write_text("")
    calls = folder / "calls"
    script = folder / "rustup"
    script.write_text(f"""#!/bin/sh
echo "$*" >> {calls}
if [ "$1 $2" = "target list" ]; then
  echo x86_64-unknown-linux-gnu
  if [ -f {state} ]; then echo aarch64-unknown-linux-gnu; fi
  exit 0
fi
if [ "$1 $2" = "target add" ] && [ {int(adds)} = 1 ]; then touch {state}; exit 0; fi
exit 1
""")
    script.chmod(0o755)
    monkeypatch.setenv("PATH", f"{folder}{os.pathsep}{os.environ['PATH']}")
    monkeypatch.delenv("SQSAFE_BUILD_ARCH", raising=False)
    return calls


def test_the_std_installed_decides_arm64_without_adding_it(monkeypatch, tmp_path):
    calls = rustup_on_path(monkeypatch, tmp_path, lists_std=True, adds=False)
    assert build_arch.decide() == ("arm64", "the aarch64-unknown-linux-gnu Rust std is installed")
    assert "target add" not in calls.read_text()


def test_a_toolchain_without_the_std_gets_it_added_once_and_builds_arm64(monkeypatch, tmp_path):
    calls = rustup_on_path(monkeypatch, tmp_path, lists_std=False, adds=True)
    arch, reason = build_arch.decide()
    assert (arch, "added now" in reason) == ("arm64", True)
    assert calls.read_text().count("target add aarch64-unknown-linux-gnu") == 1


def test_without_the_std_and_no_way_to_add_it_the_build_is_x86_64_and_says_why(monkeypatch, tmp_path):
    rustup_on_path(monkeypatch, tmp_path, lists_std=False, adds=False)
    arch, reason = build_arch.decide()
    assert arch == "x86_64"
    assert "could not add it" in reason and "still deploys arm64" in reason


def test_the_decision_exported_wins_over_the_machine(monkeypatch, tmp_path):
    calls = rustup_on_path(monkeypatch, tmp_path, lists_std=True, adds=True)
    monkeypatch.setenv("SQSAFE_BUILD_ARCH", "x86_64")
    assert build_arch.current() == "x86_64"
    assert not calls.exists(), "a step given the decision asked rustup"
    monkeypatch.setenv("SQSAFE_BUILD_ARCH", "amd64")
    with pytest.raises(build_arch.ArchError, match="must be arm64 or x86_64"):
        build_arch.current()


def test_every_step_of_make_test_builds_for_the_decision():
    assert build_arch.check(build_arch.STEPS) == []


def test_the_check_fails_for_a_step_that_reads_the_machine_instead():
    # The project check as it was before issue 39: its own reading of rustup, at its own moment.
    reads_the_machine = [sys.executable, "-c", (
        "import subprocess; out = subprocess.run(['rustup', 'target', 'list', '--installed'], capture_output=True, "
        "text=True).stdout; print('arm64' if 'aarch64-unknown-linux-gnu' in out.split() else 'x86_64')")]
    problems = build_arch.check({**build_arch.STEPS, "a step of its own": reads_the_machine})
    assert len(problems) == 2, problems
    assert all(p.startswith("a step of its own") for p in problems)
    assert "builds for x86_64 where the decision is arm64" in problems[0]


def test_a_bootstraps_architecture_is_read_from_its_elf_header(tmp_path):
    assert build_arch.elf_arch(Path(sys.executable).resolve()) == build_arch.checked(
        {"x86_64": "x86_64", "aarch64": "arm64"}[os.uname().machine], "this machine")
    aarch64 = tmp_path / "bootstrap"
    aarch64.write_bytes(b"\x7fELF\x02\x01\x01" + bytes(11) + (0xB7).to_bytes(2, "little") + bytes(44))
    assert build_arch.elf_arch(aarch64) == "arm64"
    (tmp_path / "script").write_text("#!/bin/sh\n")
    with pytest.raises(build_arch.ArchError, match="not an ELF binary"):
        build_arch.elf_arch(tmp_path / "script")
