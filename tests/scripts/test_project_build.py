"""The project template's `make build` on a machine whose toolchain lacks the aarch64 std (issue 39): it adds the
std before sam build, says so in one line, and stops with what to run when it cannot. Run with a rustup and a sam
that record their calls, in a folder holding the template's Makefile."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
MAKEFILE = ROOT / "templates" / "project" / "{{cookiecutter.project_name}}" / "Makefile"


def project(tmp_path: Path, has_std: bool, can_add: bool) -> tuple[Path, dict]:
    folder = tmp_path / "shop"
    (folder / ".venv" / "bin").mkdir(parents=True)
    shutil.copy(MAKEFILE, folder / "Makefile")
    calls = tmp_path / "calls"
    state = tmp_path / "has-std"
    if has_std:
        state.write_text("")
    tools = tmp_path / "bin"
    tools.mkdir()
    (tools / "rustup").write_text(f"""#!/bin/sh
echo "rustup $*" >> {calls}
if [ "$1 $2" = "target list" ]; then echo x86_64-unknown-linux-gnu; [ -f {state} ] && echo aarch64-unknown-linux-gnu; exit 0; fi
if [ "$1 $2" = "target add" ] && [ {int(can_add)} = 1 ]; then touch {state}; exit 0; fi
echo "error: could not download component" >&2; exit 1
""")
    (folder / ".venv" / "bin" / "sam").write_text(f"""#!/bin/sh
[ "$1" = build ] && [ ! -f {state} ] && ! echo "$*" | grep -q Architecture=x86_64 && {{ echo "sam build: no aarch64 std" >&2; exit 1; }}
echo "sam $*" >> {calls}
""")
    for tool in (tools / "rustup", folder / ".venv" / "bin" / "sam"):
        tool.chmod(0o755)
    return folder, {**os.environ, "PATH": f"{tools}{os.pathsep}{os.environ['PATH']}", "MAKEFLAGS": ""}


def make_build(folder: Path, env: dict, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run(["make", "--no-print-directory", "build", *args], cwd=folder, env=env,
                          capture_output=True, text=True, timeout=60)


def test_make_build_adds_the_missing_aarch64_std_before_sam_build(tmp_path):
    folder, env = project(tmp_path, has_std=False, can_add=True)
    run = make_build(folder, env)
    assert run.returncode == 0, run.stderr
    calls = (tmp_path / "calls").read_text().splitlines()
    assert calls[-2:] == ["rustup target add aarch64-unknown-linux-gnu", "sam build"]
    assert "make build: adding the aarch64-unknown-linux-gnu Rust std" in run.stdout


def test_make_build_with_the_std_installed_adds_nothing(tmp_path):
    folder, env = project(tmp_path, has_std=True, can_add=False)
    run = make_build(folder, env)
    assert run.returncode == 0, run.stderr
    assert "target add" not in (tmp_path / "calls").read_text()
    assert "adding" not in run.stdout


def test_make_build_says_what_to_run_when_the_std_cannot_be_added(tmp_path):
    folder, env = project(tmp_path, has_std=False, can_add=False)
    run = make_build(folder, env)
    assert run.returncode != 0
    assert "could not be added: run rustup target add aarch64-unknown-linux-gnu" in run.stderr
    assert "sam build" not in (tmp_path / "calls").read_text()


def test_an_x86_64_build_needs_no_aarch64_std(tmp_path):
    folder, env = project(tmp_path, has_std=False, can_add=False)
    run = make_build(folder, env, "ARGS=--parameter-overrides Architecture=x86_64")
    assert run.returncode == 0, run.stderr
    assert (tmp_path / "calls").read_text().splitlines() == ["sam build --parameter-overrides Architecture=x86_64"]
