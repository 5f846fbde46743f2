"""`sqsafe check`, the one implementation of the template rules (crates/sqsafe-cli/src/check), run as a team runs it.

The binary: $SQSAFE_BIN (relative to the repository root), default target/debug/sqsafe. It is run from the
repository root, so the function crates it checks a template against are this workspace's functions/.

    cargo build -p sqsafe-cli --bin sqsafe
    SQSAFE_BIN=target/debug/sqsafe .venv/bin/python -m pytest tests/template/test_rules.py
"""

from __future__ import annotations

import json
import os
import re
import subprocess
from pathlib import Path
from typing import Any

import pytest

from sam_translate import ROOT

# "[rule] resource: message", as sqsafe check prints each violation.
VIOLATION = re.compile(r"^\[(?P<rule>[a-z0-9-]+)\] (?P<resource>\S+): (?P<message>.+)$")

Pairs = set[tuple[str, str]]


def sqsafe_bin() -> Path:
    path = Path(os.environ.get("SQSAFE_BIN") or ROOT / "target" / "debug" / "sqsafe")
    if not path.is_absolute():
        path = ROOT / path
    if not path.is_file():
        pytest.fail(
            f"no sqsafe binary at {path}: build it (cargo build -p sqsafe-cli --bin sqsafe) or set SQSAFE_BIN to it",
            pytrace=False,
        )
    return path


def run_sqsafe(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([str(sqsafe_bin()), *args], cwd=ROOT, capture_output=True, text=True, timeout=120)


def rules() -> set[str]:
    """Every rule sqsafe check knows (`--list-rules`)."""
    proc = run_sqsafe("check", "--list-rules")
    assert proc.returncode == 0, proc.stderr
    return {line.split()[0] for line in proc.stdout.splitlines() if line.strip()}


def check_path(path: Path, *extra: str) -> tuple[int, Pairs, str]:
    """`sqsafe check --template <path>`: its exit code (0 or 1; anything else fails the test), the (rule, resource)
    pairs it reports, and its output. Every line but the last is a violation; the last is the summary."""
    proc = run_sqsafe("check", "--template", str(path), *extra)
    assert proc.returncode in (0, 1), f"sqsafe check exited {proc.returncode}:\n{proc.stdout}{proc.stderr}"
    lines = proc.stdout.splitlines()
    pairs: Pairs = set()
    for line in lines[:-1]:
        m = VIOLATION.match(line)
        assert m, f"not a violation line: {line!r}"
        pairs.add((m["rule"], m["resource"]))
    assert lines and lines[-1].startswith("sqsafe check: "), f"no summary line:\n{proc.stdout}"
    assert (proc.returncode == 1) == bool(pairs), proc.stdout
    return proc.returncode, pairs, proc.stdout


def check_doc(doc: dict[str, Any], folder: Path, *extra: str) -> tuple[int, Pairs, str]:
    """[`check_path`] on `doc` written as folder/template.json."""
    path = folder / "template.json"
    path.write_text(json.dumps(doc), encoding="utf-8")
    return check_path(path, *extra)
