"""The project template's first consumer is what `sqsafe new consumer` makes: one source, two renderers.

templates/project renders its consumer through cookiecutter (what `sam init --location` runs) from the same Jinja
files `sqsafe new consumer` renders with minijinja (templates/project/templates/consumer/). What could still differ
is what each renderer is given (cookiecutter.json's `__consumer` and `__workspace`, the Rust side's variables) and
how it renders (trim_blocks, lstrip_blocks, the last newline). So: a project rendered for consumer `send-invoice`,
and a project rendered for another consumer into which `sqsafe new consumer send-invoice` then adds one, must hold
the same files for it, byte for byte, and the same resources for it in template.yaml.

The binary: $SQSAFE_BIN (relative to the repository root), default target/debug/sqsafe.
"""

from __future__ import annotations

import os
import re
import subprocess
from pathlib import Path

import pytest
from cookiecutter.exceptions import FailedHookException
from cookiecutter.main import cookiecutter

ROOT = Path(__file__).resolve().parents[2]
NAME = "send-invoice"


def sqsafe_bin() -> Path:
    path = Path(os.environ.get("SQSAFE_BIN") or ROOT / "target" / "debug" / "sqsafe")
    path = path if path.is_absolute() else ROOT / path
    if not path.is_file():
        pytest.fail(f"no sqsafe binary at {path}: cargo build -p sqsafe-cli --bin sqsafe, or set SQSAFE_BIN",
                    pytrace=False)
    return path


def render(into: Path, consumer: str, envelope: str = "sqs", api: str = "", source: str = "sqs") -> Path:
    """The project template rendered as `sam init --location templates/project --no-input` renders it."""
    cookiecutter(str(ROOT / "templates" / "project"), no_input=True, output_dir=str(into),
                 extra_context={"project_name": "proj", "consumer_name": consumer, "sqsafe_path": str(ROOT),
                                "envelope": envelope, "api_name": api, "source": source})
    return into / "proj"


def files_of(project: Path, name: str) -> dict[str, bytes]:
    crate = project / "functions" / name
    out = {str(p.relative_to(project)): p.read_bytes() for p in sorted(crate.rglob("*")) if p.is_file()}
    out[f"events/{name}.json"] = (project / "events" / f"{name}.json").read_bytes()
    return out


def resources_of(template: str, name: str) -> str:
    """The consumer's section of template.yaml's Resources: from its header comment to the next blank line + comment
    or the end-of-consumers marker."""
    start = template.index(f"  # ---------------------------------------------------------------- {name} (")
    end = re.compile(r"\n  # -{64} ").search(template, start + 1)
    assert end, template
    return template[start:end.start()]


# Each envelope the template offers (cookiecutter.json's `envelope`, `sqsafe new consumer --envelope`), and each stream
# source (its `source`, `--source`).
@pytest.fixture(scope="module", params=[("sqs", "sqs"), ("sns", "sqs"), ("eventbridge", "sqs"), ("s3", "sqs"),
                                        ("sqs", "kinesis"), ("sqs", "dynamodb-stream")])
def projects(tmp_path_factory, request) -> tuple[Path, Path]:
    envelope, source = request.param
    rendered = render(tmp_path_factory.mktemp("rendered"), NAME, envelope, source=source)
    added = render(tmp_path_factory.mktemp("added"), "first-one")
    proc = subprocess.run([str(sqsafe_bin()), "new", "consumer", NAME, "--envelope", envelope, "--source", source],
                          cwd=added, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    return rendered, added


def test_the_rendered_consumer_is_the_one_sqsafe_new_consumer_writes(projects) -> None:
    rendered, added = projects
    ours, theirs = files_of(rendered, NAME), files_of(added, NAME)
    assert sorted(ours) == sorted(theirs)
    for path in ours:
        assert ours[path] == theirs[path], f"{path} differs between sam init and sqsafe new consumer"
    assert len(ours) == 7, sorted(ours)


def test_its_resources_in_template_yaml_are_the_same(projects) -> None:
    rendered, added = projects
    ours = (rendered / "template.yaml").read_text(encoding="utf-8")
    theirs = (added / "template.yaml").read_text(encoding="utf-8")
    assert resources_of(ours, NAME) == resources_of(theirs, NAME)
    for text in (ours, theirs):
        assert "  SendInvoiceApiUrl:\n    Type: String" in text
    # A stream consumer's sample is its source's event.
    sample = (rendered / "events" / f"{NAME}.json").read_text(encoding="utf-8")
    assert ('"eventSource": "aws:kinesis"' in sample) == ("  SendInvoiceStream:\n" in ours)
    assert ('"eventSource": "aws:dynamodb"' in sample) == ("  SendInvoiceSourceTable:\n" in ours)
    for marker in ("end of consumers", "end of consumer outputs"):
        assert ours.count(marker) == 1 and theirs.count(marker) == 1
    # Nothing of Jinja reaches the project.
    for path in rendered.rglob("*"):
        if path.is_file() and path.suffix in {".rs", ".toml", ".md", ".json", ".yaml"}:
            assert not re.search(r"\{\{|\{%|\{#", path.read_text(encoding="utf-8")), path


# The API `sam init` offers (cookiecutter.json's `api_name`) is the one `sqsafe new api` writes, from the same
# templates/project/templates/api/.
API = "orders-api"


@pytest.fixture(scope="module")
def api_projects(tmp_path_factory) -> tuple[Path, Path]:
    rendered = render(tmp_path_factory.mktemp("api-rendered"), NAME, api=API)
    added = render(tmp_path_factory.mktemp("api-added"), NAME)
    proc = subprocess.run([str(sqsafe_bin()), "new", "api", API], cwd=added, capture_output=True, text=True,
                          timeout=120)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    return rendered, added


def test_the_rendered_api_is_the_one_sqsafe_new_api_writes(api_projects) -> None:
    rendered, added = api_projects
    ours, theirs = files_of(rendered, API), files_of(added, API)
    assert sorted(ours) == sorted(theirs)
    for path in ours:
        assert ours[path] == theirs[path], f"{path} differs between sam init and sqsafe new api"
    assert len(ours) == 7, sorted(ours)
    # Its resources and outputs, where sqsafe new api puts them: the whole template is the same.
    assert (rendered / "template.yaml").read_text(encoding="utf-8") == (added / "template.yaml").read_text(
        encoding="utf-8")
    assert "  OrdersApiStoreFailedAlarm:" in (rendered / "template.yaml").read_text(encoding="utf-8")


def test_without_an_api_nothing_of_one_is_left(tmp_path) -> None:
    project = render(tmp_path, NAME)
    assert sorted(p.name for p in (project / "functions").iterdir()) == [NAME]
    assert sorted(p.name for p in (project / "events").iterdir()) == [f"{NAME}.json"]
    assert "HttpApi" not in (project / "template.yaml").read_text(encoding="utf-8")


@pytest.mark.parametrize("api", [NAME, "Orders", "sqsafe-api", "a--b"])
def test_an_api_name_that_cannot_be_one_is_refused_before_anything_is_written(tmp_path, api) -> None:
    from cookiecutter.exceptions import FailedHookException
    with pytest.raises(FailedHookException):
        render(tmp_path, NAME, api=api)
    assert not (tmp_path / "proj").exists()


def test_a_stream_consumer_with_an_envelope_is_refused_before_anything_is_written(tmp_path, capfd) -> None:
    with pytest.raises(FailedHookException):
        render(tmp_path, NAME, "sns", source="kinesis")
    assert not (tmp_path / "proj").exists()
    assert "an envelope is a queue's" in capfd.readouterr().err
