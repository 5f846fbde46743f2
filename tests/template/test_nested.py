"""Nested applications: a consumer's queue, DLQ and their alarms in a nested application whose template is a local
file (fixtures/sqs-consumer.yaml) are checked by `sqsafe check` as if they were written in the parent.

The nested template is template.yaml with charge-payment's queue, DLQ, DLQ alarm and queue-age alarm moved into the
application ChargePaymentQueues; the rest of the template reads them through its outputs. It keeps every rule, and a
mutation inside the child fails the rules the same mutation fails in the flat template, on the renamed resources
(ChargePaymentQueue -> ChargePaymentQueuesQueue). nested.py's flatten, which the independent validators (the SAM
transform, cfn-lint, the smoke deploy) read the template through, inlines the child the same way.
"""

from __future__ import annotations

import copy
import json
import re
import shutil
from pathlib import Path
from typing import Any, Callable

import pytest

from nested import NestedTemplateError, flatten
from sam_translate import load_template, refs
from sqsafe_check import check_doc, check_path, run_sqsafe
from test_rules import props

FIXTURE = Path(__file__).resolve().parent / "fixtures" / "sqs-consumer.yaml"
LOCATION = "sqsafe/sqs-consumer.yaml"
APP = "ChargePaymentQueues"

# Flat logical id -> (child logical id, the output that stands for its Ref, for its Arn, for its QueueName).
MOVED = {
    "ChargePaymentQueue": ("Queue", "QueueUrl", "QueueArn", "QueueName"),
    "ChargePaymentDeadLetterQueue": ("DeadLetterQueue", "DeadLetterQueueUrl", "DeadLetterQueueArn", "DeadLetterQueueName"),
    "ChargePaymentDeadLetterAlarm": ("DeadLetterAlarm", None, None, None),
    "ChargePaymentQueueAgeAlarm": ("QueueAgeAlarm", None, None, None),
}
# The flat template's ids as the flattened nested template names them.
RENAMED = {flat: APP + child for flat, (child, *_) in MOVED.items()}


def _output(name: str | None, flat: str) -> dict:
    assert name is not None, f"the parent still refers to {flat}, which has no output for it"
    return {"Fn::GetAtt": [APP, f"Outputs.{name}"]}


def _through_outputs(v: Any) -> Any:
    """The parent's references to the moved resources, made through the application's outputs."""
    if isinstance(v, list):
        return [_through_outputs(x) for x in v]
    if not isinstance(v, dict):
        return v
    if len(v) == 1:
        ((key, inner),) = v.items()
        if key == "Ref" and inner in MOVED:
            return _output(MOVED[inner][1], inner)
        if key == "Fn::GetAtt" and isinstance(inner, list) and inner[0] in MOVED:
            attr = {"Arn": 2, "QueueName": 3}[inner[1]]
            return _output(MOVED[inner[0]][attr], inner[0])
        if key == "Fn::Sub" and isinstance(inner, list):
            return {"Fn::Sub": [inner[0], {k: _through_outputs(x) for k, x in inner[1].items()}]}
    return {k: _through_outputs(x) for k, x in v.items()}


def nested_template(flat: dict[str, Any]) -> dict[str, Any]:
    """template.yaml (parsed) with charge-payment's queues and their alarms moved into a nested application."""
    doc = copy.deepcopy(flat)
    resources = {}
    for rid, resource in doc["Resources"].items():
        if rid == "ChargePaymentQueue":
            resources[APP] = {
                "Type": "AWS::Serverless::Application",
                "Properties": {
                    "Location": LOCATION,
                    "Parameters": {
                        "ConsumerName": "charge-payment",
                        "AlarmTopicArn": {"Ref": "AlarmTopic"},
                        "MaximumMessageSize": {"Ref": "MaximumMessageSize"},
                        "VisibilityTimeout": props(flat, "ChargePaymentQueue")["VisibilityTimeout"],
                        "QueueAgeAlarmSeconds": {"Ref": "QueueAgeAlarmSeconds"},
                    },
                },
            }
        elif rid not in MOVED:
            resources[rid] = _through_outputs(resource)
    doc["Resources"] = resources
    doc["Outputs"] = _through_outputs(doc.get("Outputs", {}))
    return doc


def write_project(folder: Path, parent: dict[str, Any], child: dict[str, Any] | None = None) -> Path:
    """The parent as folder/template.json and the child at its Location (the fixture itself when `child` is None)."""
    (folder / "sqsafe").mkdir(parents=True, exist_ok=True)
    if child is None:
        shutil.copy(FIXTURE, folder / LOCATION)
    else:
        (folder / LOCATION).write_text(json.dumps(child), encoding="utf-8")
    path = folder / "template.json"
    path.write_text(json.dumps(parent), encoding="utf-8")
    return path


def renamed(pairs: set[tuple[str, str]]) -> set[tuple[str, str]]:
    return {(rule, RENAMED.get(resource, resource)) for rule, resource in pairs}


def child_props(child: dict, rid: str) -> dict:
    return child["Resources"][rid]["Properties"]


# (what, mutate the child, the same mutation in the flat template, rule expected, resource expected)
NestedMutation = tuple[str, Callable[[dict], None], Callable[[dict], None], str, str]

NESTED_MUTATIONS: list[NestedMutation] = [
    ("DLQ retention dropped",
     lambda c: child_props(c, "DeadLetterQueue").pop("MessageRetentionPeriod"),
     lambda d: props(d, "ChargePaymentDeadLetterQueue").pop("MessageRetentionPeriod"),
     "dlq-retention", "ChargePaymentQueuesDeadLetterQueue"),
    ("maxReceiveCount 2",
     lambda c: child_props(c, "Queue")["RedrivePolicy"].update(maxReceiveCount=2),
     lambda d: props(d, "ChargePaymentQueue")["RedrivePolicy"].update(maxReceiveCount=2),
     "max-receive-count", "ChargePaymentQueuesQueue"),
    ("DLQ alarm without AlarmActions",
     lambda c: child_props(c, "DeadLetterAlarm").pop("AlarmActions"),
     lambda d: props(d, "ChargePaymentDeadLetterAlarm").pop("AlarmActions"),
     "alarm-dlq", "ChargePaymentQueuesDeadLetterAlarm"),
    ("queue-age alarm on another metric",
     lambda c: child_props(c, "QueueAgeAlarm").update(MetricName="NumberOfMessagesSent"),
     lambda d: props(d, "ChargePaymentQueueAgeAlarm").update(MetricName="NumberOfMessagesSent"),
     "alarm-queue-age", "ChargePaymentQueuesQueue"),
    ("source queue unencrypted",
     lambda c: child_props(c, "Queue").pop("SqsManagedSseEnabled"),
     lambda d: props(d, "ChargePaymentQueue").pop("SqsManagedSseEnabled"),
     "sse", "ChargePaymentQueuesQueue"),
    ("visibility timeout 120",
     lambda c: child_props(c, "Queue").update(VisibilityTimeout=120),
     lambda d: props(d, "ChargePaymentQueue").update(VisibilityTimeout=120),
     "visibility-timeout", "ChargePaymentQueuesQueue"),
]

# (what, the application's Location): templates sqsafe check does not read.
NOT_LOCAL = [
    ("S3 URL", "https://s3.amazonaws.com/bucket/sqs-consumer.yaml"),
    ("Serverless Application Repository",
     {"ApplicationId": "arn:aws:serverlessrepo:us-east-1:123456789012:applications/sqs-consumer", "SemanticVersion": "1.0.0"}),
]


def _drop_parameter(doc: dict, child: dict) -> None:
    doc["Resources"][APP]["Properties"]["Parameters"].pop("ConsumerName")


def _conditions(doc: dict, child: dict) -> None:
    child["Conditions"] = {"Always": {"Fn::Equals": ["a", "a"]}}


def _unknown_output(doc: dict, child: dict) -> None:
    child["Outputs"].pop("QueueArn")


def _self_nesting(doc: dict, child: dict) -> None:
    child["Resources"]["Again"] = {"Type": "AWS::Serverless::Application", "Properties": {"Location": "sqs-consumer.yaml"}}


# (what, break the parent or the child, what the error says): templates neither checker can inline.
REFUSED: list[tuple[str, Callable[[dict, dict], None], str]] = [
    ("missing file", lambda d, c: d["Resources"][APP]["Properties"].update(Location="sqsafe/missing.yaml"),
     f"nested application {APP}: cannot read its template"),
    ("parameter without a value", _drop_parameter, "parameter ConsumerName of"),
    ("Conditions in the child", _conditions,
     f"nested application {APP}: Conditions are not supported by sqsafe check"),
    ("unknown output", _unknown_output, f"nested application {APP} has no output QueueArn"),
    ("a child that nests itself", _self_nesting, "nests itself"),
]


@pytest.fixture
def nested(sam_template) -> dict[str, Any]:
    return nested_template(sam_template)


def child_fixture() -> dict[str, Any]:
    return load_template(FIXTURE)


def test_the_nested_template_keeps_every_rule(nested, tmp_path) -> None:
    code, found, output = check_path(write_project(tmp_path, nested))
    assert code == 0 and found == set(), output
    assert [r for r, x in nested["Resources"].items() if x["Type"] == "AWS::Serverless::Application"] == [APP]
    assert not refs(nested["Resources"]) & set(MOVED), "the parent reads the moved resources through outputs only"


def test_flattening_renames_and_resolves(nested, tmp_path) -> None:
    path = write_project(tmp_path, nested)
    flat = flatten(load_template(path), path.parent)
    resources = flat["Resources"]
    assert APP not in resources and set(RENAMED.values()) <= set(resources)
    queue = resources["ChargePaymentQueuesQueue"]["Properties"]
    assert queue["RedrivePolicy"]["deadLetterTargetArn"] == {"Fn::GetAtt": ["ChargePaymentQueuesDeadLetterQueue", "Arn"]}
    assert queue["QueueName"] == {"Fn::Sub": "${AWS::StackName}-charge-payment"}
    assert queue["MaximumMessageSize"] == {"Ref": "MaximumMessageSize"}
    alarm = resources["ChargePaymentQueuesDeadLetterAlarm"]["Properties"]
    assert alarm["AlarmActions"] == [{"Ref": "AlarmTopic"}]
    fn = resources["ChargePaymentFunction"]["Properties"]
    assert fn["Events"]["Queue"]["Properties"]["Queue"] == {"Fn::GetAtt": ["ChargePaymentQueuesQueue", "Arn"]}
    assert fn["Environment"]["Variables"]["DLQ_URL"] == {"Ref": "ChargePaymentQueuesDeadLetterQueue"}


@pytest.mark.parametrize(("mutate_child", "mutate_flat", "rule", "resource"), [m[1:] for m in NESTED_MUTATIONS],
                         ids=[m[0] for m in NESTED_MUTATIONS])
def test_a_mutation_in_the_child_fails_as_in_the_flat_template(
    sam_template, nested, tmp_path, mutate_child, mutate_flat, rule: str, resource: str
) -> None:
    child = child_fixture()
    mutate_child(child)
    code, found, output = check_path(write_project(tmp_path / "nested", nested, child))
    assert code == 1 and (rule, resource) in found, output
    mutate_flat(sam_template)
    (tmp_path / "flat").mkdir()
    _, flat, flat_output = check_doc(sam_template, tmp_path / "flat")
    assert found == renamed(flat), f"nested:\n{output}\nflat:\n{flat_output}"


@pytest.mark.parametrize("where", [n[1] for n in NOT_LOCAL], ids=[n[0] for n in NOT_LOCAL])
def test_an_application_not_in_a_local_file_is_reported(nested, tmp_path, where) -> None:
    nested["Resources"][APP]["Properties"]["Location"] = where
    code, found, output = check_path(write_project(tmp_path, nested))
    assert code == 1 and ("nested-application", APP) in found, output
    message = f"cannot check nested application {APP} at "
    assert message in output and "only local template files are read" in output, output


@pytest.mark.parametrize(("breaks", "says"), [r[1:] for r in REFUSED], ids=[r[0] for r in REFUSED])
def test_an_application_that_cannot_be_inlined_exits_2(nested, tmp_path, breaks, says: str) -> None:
    child = child_fixture()
    breaks(nested, child)
    path = write_project(tmp_path, nested, child)
    proc = run_sqsafe("check", "--template", str(path))
    assert proc.returncode == 2 and proc.stdout == "", proc.stdout + proc.stderr
    assert says in proc.stderr and len(proc.stderr.splitlines()) == 1, proc.stderr
    # The validators' reader refuses it too.
    with pytest.raises(NestedTemplateError, match=re.escape(says)):
        flatten(load_template(path), path.parent)
