"""The release profile `sam build` compiles the functions with.

`cargo lambda build --release` (what `sam build` runs for every function) fills in each of `strip`, `lto`,
`codegen-units` and `panic` that the workspace's `[profile.release]` leaves unset with its own choice: `panic =
"abort"`, one codegen unit and LTO. `panic = "abort"` breaks what sqsafe promises: a panicking handler fails its own
record only (sqsafe-batch catches the unwind), and a panic inside an effect releases the key first (sqsafe-idempotency);
under "abort" the process dies with the whole batch, and the key stays claimed until its lease runs out. So the
workspace, and every project made from templates/project, names all four: nothing is left for cargo-lambda to choose.
"""

from __future__ import annotations

import re
import tomllib
from pathlib import Path

import pytest

from sam_translate import ROOT

# What cargo-lambda substitutes when the manifest leaves it out (cargo-lambda 1.9: CargoProfileRelease).
CARGO_LAMBDA_FILLS = ("strip", "lto", "codegen-units", "panic")

MANIFESTS = [
    ROOT / "Cargo.toml",
    ROOT / "templates" / "project" / "{{cookiecutter.project_name}}" / "Cargo.toml.jinja",
]


def release_profile(manifest: Path) -> dict:
    """The manifest's [profile.release] table (parsed alone: the project template's manifest has Jinja elsewhere)."""
    match = re.search(r"^\[profile\.release\]\n(.*?)(?=^\[|\Z)", manifest.read_text(), re.MULTILINE | re.DOTALL)
    return tomllib.loads(match.group(1)) if match else {}


@pytest.mark.parametrize("manifest", MANIFESTS, ids=lambda p: str(p.relative_to(ROOT)))
def test_release_profile_leaves_cargo_lambda_nothing_to_fill_in(manifest: Path) -> None:
    profile = release_profile(manifest)
    missing = [key for key in CARGO_LAMBDA_FILLS if key not in profile]
    assert not missing, (
        f"{manifest.relative_to(ROOT)} [profile.release] lacks {missing}: `cargo lambda build --release` (sam build) "
        "would put its own there (panic = \"abort\", codegen-units = 1, LTO)"
    )


@pytest.mark.parametrize("manifest", MANIFESTS, ids=lambda p: str(p.relative_to(ROOT)))
def test_release_builds_unwind_so_a_panic_fails_one_record(manifest: Path) -> None:
    assert release_profile(manifest).get("panic") == "unwind", (
        f"{manifest.relative_to(ROOT)}: a deployed function must unwind on panic, or a panicking record takes its "
        "whole batch down and leaves its key claimed (sqsafe-batch and sqsafe-idempotency catch the unwind)"
    )
