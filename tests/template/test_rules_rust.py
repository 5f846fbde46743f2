"""`sqsafe check` (the Rust checker in crates/sqsafe-cli) held to the Python rules of template_rules.py.

Every mutation of test_rules.py's table is applied to a copy of template.yaml, the copy is written as JSON, and both
checkers run on it: the rule the table names must fire on the resource it names in both, and the two must report
exactly the same (rule, resource) pairs. The unmutated template passes both, and so do the changes of test_rules.py's
PASSING table; both know the same 42 rule names.

The binary: $SQSAFE_BIN (relative to the repository root), default target/debug/sqsafe. It is run from the
repository root, so the function crates it checks the template against are this workspace's functions/.

    cargo build -p sqsafe-cli --bin sqsafe
    SQSAFE_BIN=target/debug/sqsafe .venv/bin/python -m pytest tests/template/test_rules_rust.py
"""

from __future__ import annotations

import copy
import json
import os
import re
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest

from template_rules import ROOT, RULES, check, function_crate_binaries
from nested import NestedTemplateError
from test_nested import (
    APP,
    NESTED_MUTATIONS,
    NOT_LOCAL,
    REFUSED,
    child_fixture,
    nested_template,
    python_pairs,
    renamed,
    write_project,
)
from test_rules import MUTATIONS, PASSING

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


def rust_violations(doc: dict[str, Any], tmp_path: Path, *extra: str) -> tuple[int, Pairs, str]:
    """Runs `sqsafe check --template <doc as JSON>`: its exit code, (rule, resource) pairs and output."""
    path = tmp_path / "template.json"
    path.write_text(json.dumps(doc), encoding="utf-8")
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


def python_violations(doc: dict[str, Any], **kw: Any) -> Pairs:
    return {(v.rule, v.resource) for v in check(doc, **kw)}


def agree(python: Pairs, rust: Pairs, output: str) -> None:
    assert python == rust, (
        f"only Python reports {sorted(python - rust)}; only Rust reports {sorted(rust - python)}\nRust said:\n{output}"
    )


@pytest.mark.parametrize(("mutate", "rule", "resource"), [m[1:] for m in MUTATIONS], ids=[m[0] for m in MUTATIONS])
def test_mutation_is_caught_by_both(sam_template, tmp_path, mutate, rule: str, resource: str) -> None:
    mutate(sam_template)
    python = python_violations(copy.deepcopy(sam_template))
    assert (rule, resource) in python, f"the Python rules miss [{rule}] {resource}: {sorted(python)}"
    code, rust, output = rust_violations(sam_template, tmp_path)
    assert code == 1
    assert (rule, resource) in rust, f"sqsafe check misses [{rule}] {resource}:\n{output}"
    agree(python, rust, output)


@pytest.mark.parametrize("mutate", [p[1] for p in PASSING], ids=[p[0] for p in PASSING])
def test_change_keeps_every_rule_in_both(sam_template, tmp_path, mutate) -> None:
    mutate(sam_template)
    python = python_violations(copy.deepcopy(sam_template))
    code, rust, output = rust_violations(sam_template, tmp_path)
    assert python == set() and code == 0 and rust == set(), f"Python: {sorted(python)}\nRust said:\n{output}"


def test_missing_function_crate_is_caught_by_both(sam_template, tmp_path) -> None:
    """A crate under functions/ without a function in the template: a copy of the workspace's crates plus one."""
    workspace = tmp_path / "workspace"
    (workspace / "functions").mkdir(parents=True)
    (workspace / "Cargo.toml").write_text('[workspace]\nmembers = ["functions/*"]\n', encoding="utf-8")
    for manifest in (ROOT / "functions").glob("*/Cargo.toml"):
        (workspace / "functions" / manifest.parent.name).mkdir()
        shutil.copy(manifest, workspace / "functions" / manifest.parent.name / "Cargo.toml")
    (workspace / "functions" / "send-receipt").mkdir()
    (workspace / "functions" / "send-receipt" / "Cargo.toml").write_text(
        '[package]\nname = "send-receipt"\nversion = "0.1.0"\n', encoding="utf-8"
    )
    python = python_violations(sam_template, crate_binaries=function_crate_binaries(workspace))
    assert ("function-crates", "functions/send-receipt") in python
    code, rust, output = rust_violations(sam_template, tmp_path, "--root", str(workspace))
    assert code == 1
    agree(python, rust, output)


def test_the_template_passes_both(sam_template, tmp_path) -> None:
    assert python_violations(sam_template) == set()
    code, rust, output = rust_violations(sam_template, tmp_path)
    assert code == 0 and rust == set(), output
    # template.yaml itself (YAML, short-form tags), found from the repository root as the project's template.
    functions = sum(1 for r in sam_template["Resources"].values() if r["Type"] == "AWS::Serverless::Function")
    for args in (("check",), ("check", "--template", "template.yaml")):
        proc = run_sqsafe(*args)
        assert proc.returncode == 0, proc.stdout + proc.stderr
        assert f"all {len(RULES)} rules hold for its {functions} function(s)" in proc.stdout, proc.stdout


def test_both_know_the_same_rules() -> None:
    proc = run_sqsafe("check", "--list-rules")
    assert proc.returncode == 0, proc.stderr
    rust = {line.split()[0] for line in proc.stdout.splitlines() if line.strip()}
    assert rust == set(RULES), f"only Python: {sorted(set(RULES) - rust)}; only Rust: {sorted(rust - set(RULES))}"


@pytest.mark.parametrize(
    ("name", "text"),
    [("not-yaml.yaml", "Resources: [unclosed\n"), ("not-json.json", '{"Resources": '), ("a-list.yaml", "- a\n- b\n")],
)
def test_an_unreadable_template_exits_2(tmp_path, name: str, text: str) -> None:
    path = tmp_path / name
    path.write_text(text, encoding="utf-8")
    for target in (path, tmp_path / "missing.yaml"):
        proc = run_sqsafe("check", "--template", str(target))
        assert proc.returncode == 2, proc.stdout + proc.stderr
        assert proc.stdout == "" and len(proc.stderr.splitlines()) == 1, proc.stderr
        assert proc.stderr.startswith("sqsafe: ") and str(target) in proc.stderr, proc.stderr
        assert "panicked" not in proc.stderr and "backtrace" not in proc.stderr.lower()


# ------------------------------------------------------------------------------------------------ nested applications


def rust_project(path: Path) -> tuple[int, Pairs, str]:
    """`sqsafe check --template <path>` on a parent written by test_nested.write_project."""
    proc = run_sqsafe("check", "--template", str(path))
    assert proc.returncode in (0, 1), f"sqsafe check exited {proc.returncode}:\n{proc.stdout}{proc.stderr}"
    pairs: Pairs = set()
    for line in proc.stdout.splitlines()[:-1]:
        m = VIOLATION.match(line)
        assert m, f"not a violation line: {line!r}"
        pairs.add((m["rule"], m["resource"]))
    return proc.returncode, pairs, proc.stdout


def test_the_nested_template_passes_both(sam_template, tmp_path) -> None:
    path = write_project(tmp_path, nested_template(sam_template))
    assert python_pairs(path) == set()
    code, rust, output = rust_project(path)
    assert code == 0 and rust == set(), output


@pytest.mark.parametrize(("mutate_child", "mutate_flat", "rule", "resource"), [m[1:] for m in NESTED_MUTATIONS],
                         ids=[m[0] for m in NESTED_MUTATIONS])
def test_a_mutation_in_the_child_is_caught_by_both(sam_template, tmp_path, mutate_child, mutate_flat, rule, resource) -> None:
    child = child_fixture()
    mutate_child(child)
    path = write_project(tmp_path, nested_template(sam_template), child)
    python = python_pairs(path)
    assert (rule, resource) in python, sorted(python)
    code, rust, output = rust_project(path)
    assert code == 1
    agree(python, rust, output)
    mutate_flat(sam_template)
    assert renamed(python_violations(sam_template)) == python, "the nested template fails as the flat one does"


@pytest.mark.parametrize("where", [n[1] for n in NOT_LOCAL], ids=[n[0] for n in NOT_LOCAL])
def test_an_application_not_in_a_local_file_is_reported_by_both(sam_template, tmp_path, where) -> None:
    parent = nested_template(sam_template)
    parent["Resources"][APP]["Properties"]["Location"] = where
    path = write_project(tmp_path, parent)
    python = python_pairs(path)
    assert ("nested-application", APP) in python
    code, rust, output = rust_project(path)
    assert code == 1
    agree(python, rust, output)
    message = f"cannot check nested application {APP} at "
    assert message in output and "only local template files are read" in output, output


@pytest.mark.parametrize(("breaks", "says"), [r[1:] for r in REFUSED], ids=[r[0] for r in REFUSED])
def test_an_application_that_cannot_be_inlined_exits_2(sam_template, tmp_path, breaks, says: str) -> None:
    parent, child = nested_template(sam_template), child_fixture()
    breaks(parent, child)
    path = write_project(tmp_path, parent, child)
    with pytest.raises(NestedTemplateError, match=re.escape(says)):
        python_pairs(path)
    proc = run_sqsafe("check", "--template", str(path))
    assert proc.returncode == 2 and proc.stdout == "", proc.stdout + proc.stderr
    assert says in proc.stderr and len(proc.stderr.splitlines()) == 1, proc.stderr
