"""Consumers made by `sqsafe new consumer` keep every rule in both checkers: standard and FIFO, with and without
--transact, in a project made from templates/project's base template. Their queue, DLQ, log group, alarms and
dashboard are a nested application from sqsafe/consumer.yaml (consumer-fifo.yaml), which both checkers inline.

A function renamed without its application (so the child's alarms and dashboard watch another name) fails the same
rules in both: the rules accept a function's own FunctionName only when it is the very one the alarm names.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from nested import flatten
from sam_translate import load_template
from template_rules import ROOT, check, function_crate_binaries
from test_rules_rust import Pairs, VIOLATION, agree, run_sqsafe

CONSUMERS = [
    ("send-invoice", []),
    ("ship-order", ["--fifo"]),
    ("book-refund", ["--transact"]),
    ("book-shipment", ["--fifo", "--transact"]),
]
# What a generated consumer's crate inherits from the workspace (crates/sqsafe-cli/src/scaffold.rs DEPENDENCIES).
DEPENDENCIES = ["aws-sdk-dynamodb", "serde", "sqsafe", "tokio", "tracing",
                "aws-sdk-sqs", "aws_lambda_events", "serde_json", "sqsafe-local", "sqsafe-testkit"]


@pytest.fixture(scope="module")
def project(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("generated")
    deps = "".join(f'{d} = "1"\n' for d in DEPENDENCIES)
    (root / "Cargo.toml").write_text(f'[workspace]\nmembers = ["functions/*"]\n\n[workspace.dependencies]\n{deps}')
    # The project template's template.yaml without the lines that include its first consumer.
    project = (ROOT / "templates" / "project" / "{{cookiecutter.project_name}}" / "template.yaml").read_text(
        encoding="utf-8")
    base = "".join(line for line in project.splitlines(keepends=True) if not line.startswith(("{%", "{#")))
    base = base.replace("{{ cookiecutter.project_name }}", "my-consumers")
    (root / "template.yaml").write_text(base, encoding="utf-8")
    for name, flags in CONSUMERS:
        proc = run_sqsafe("new", "consumer", name, *flags, "--root", str(root))
        assert proc.returncode == 0, proc.stdout + proc.stderr
    assert (root / "sqsafe" / "consumer.yaml").is_file() and (root / "sqsafe" / "consumer-fifo.yaml").is_file()
    return root


def both(root: Path) -> tuple[Pairs, Pairs, str]:
    template = root / "template.yaml"
    python = {(v.rule, v.resource) for v in check(
        flatten(load_template(template), root), crate_binaries=function_crate_binaries(root))}
    proc = run_sqsafe("check", "--root", str(root))
    assert proc.returncode in (0, 1), proc.stdout + proc.stderr
    rust: Pairs = set()
    for line in proc.stdout.splitlines()[:-1]:
        m = VIOLATION.match(line)
        assert m, f"not a violation line: {line!r}"
        rust.add((m["rule"], m["resource"]))
    return python, rust, proc.stdout


def test_generated_consumers_keep_every_rule_in_both(project) -> None:
    python, rust, output = both(project)
    agree(python, rust, output)
    assert python == set(), sorted(python)
    assert "all 42 rules hold for its 4 function(s)" in output, output


def test_a_function_renamed_without_its_application_fails_both(project, tmp_path) -> None:
    template = project / "template.yaml"
    text = template.read_text(encoding="utf-8")
    own = '\n      FunctionName: !Sub "${AWS::StackName}-send-invoice"'
    assert text.count(own) == 1, "the function's FunctionName (the application's is indented further)"
    try:
        template.write_text(text.replace(own, own.replace("send-invoice", "renamed")), encoding="utf-8")
        python, rust, output = both(project)
    finally:
        template.write_text(text, encoding="utf-8")
    agree(python, rust, output)
    assert python == {("alarm-function-errors", "SendInvoiceFunction"), ("dashboard", "SendInvoiceFunction")}, python
