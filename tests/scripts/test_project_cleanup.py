"""What the project check leaves in its target folders (scripts/project-check.py, discard_project_outputs): the
project's own crates, binaries and Lambda builds go, for every consumer and the API; third-party crates stay, so that
make test on a warm tree compiles only what changed; in the workspace's own folder its test binaries stay."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "scripts"))
SPEC = importlib.util.spec_from_file_location("project_check", ROOT / "scripts" / "project-check.py")
project_check = importlib.util.module_from_spec(SPEC)
SPEC.loader.exec_module(project_check)

NAMES = (project_check.NAME, project_check.NAME_TRANSACT, project_check.NAME_S3, project_check.API)


def touch(path: Path) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("x")
    return path


def a_run_left_behind(target: Path, release: Path) -> tuple[list[Path], list[Path]]:
    """The outputs of one run: (the project's, what the next run reuses)."""
    debug = target / "debug"
    project: list[Path] = [touch(debug / "deps" / "handler-0a1b"), touch(debug / "deps" / "api-0a1b")]
    for name in NAMES:
        under = name.replace("-", "_")
        project += [
            touch(debug / name),
            touch(debug / f"{name}.d"),
            touch(debug / "deps" / f"{under}-0a1b"),
            touch(debug / "deps" / f"lib{under}-0a1b.rlib"),
            touch(debug / ".fingerprint" / f"{name}-0a1b" / "bin-{name}"),
            touch(target / "lambda" / name / "bootstrap"),
            touch(release / "lambda" / name / "bootstrap"),
        ]
    kept = [
        touch(debug / "deps" / "libtokio-9f8e.rlib"),
        touch(debug / "deps" / "libsqsafe-9f8e.rlib"),
        touch(debug / ".fingerprint" / "tokio-9f8e" / "lib-tokio"),
        touch(release / "aarch64-unknown-linux-gnu" / "release" / "deps" / "libtokio-9f8e.rlib"),
    ]
    return project, kept


def test_a_folder_of_the_projects_own_keeps_only_what_the_next_run_reuses(tmp_path: Path) -> None:
    target, release = tmp_path / "project-check", tmp_path / "sam"
    project, kept = a_run_left_behind(target, release)
    project_check.discard_project_outputs(target, release, shared=False)
    assert [p for p in project if p.exists()] == []
    assert [p for p in kept if not p.exists()] == []


def test_in_the_workspaces_folder_its_test_binaries_stay(tmp_path: Path) -> None:
    target, release = tmp_path / "target", tmp_path / "sam"
    project, kept = a_run_left_behind(target, release)
    workspace_tests = [target / "debug" / "deps" / "handler-0a1b", target / "debug" / "deps" / "api-0a1b"]
    project_check.discard_project_outputs(target, release, shared=True)
    assert [p for p in project if p.exists()] == workspace_tests
    assert [p for p in kept if not p.exists()] == []
