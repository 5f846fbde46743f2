"""The deployment rules of issue #4, enforced on template.yaml by `sqsafe check`, their one implementation
(crates/sqsafe-cli/src/check; run through sqsafe_check.py).

The mutation tests break a copy of the template in memory, one way at a time, and show that sqsafe check reports the
named rule for the named resource (exit 1): proof that each rule can fail. Each mutation starts from the template,
which passes every rule, so what else it reports comes of that one change. The changes of PASSING do right what a
mutation breaks, and keep every rule. The independent validators (sam validate, cfn-lint on the SAM transform's
output, the smoke deploy into moto) are in template-checks.sh and test_structure.py / test_smoke_deploy.py.
"""

from __future__ import annotations

import copy
import shutil
from typing import Callable

import pytest

from sam_translate import ROOT, function_crate_binaries
from sqsafe_check import VIOLATION, check_doc, rules, run_sqsafe


def test_the_template_passes_every_rule(sam_template, tmp_path) -> None:
    code, found, output = check_doc(sam_template, tmp_path)
    assert code == 0 and found == set(), output
    # template.yaml itself (YAML, short-form tags), found from the repository root as the project's template.
    functions = sum(1 for r in sam_template["Resources"].values() if r["Type"] == "AWS::Serverless::Function")
    for args in (("check",), ("check", "--template", "template.yaml")):
        proc = run_sqsafe(*args)
        assert proc.returncode == 0, proc.stdout + proc.stderr
        assert f"all {len(rules())} rules hold for its {functions} function(s)" in proc.stdout, proc.stdout


def test_rules_are_not_vacuous(sam_template) -> None:
    """The rules iterate over what they find: make sure the template has the consumers, queues and tables."""
    kinds = [r["Type"] for r in sam_template["Resources"].values()]
    crates = function_crate_binaries()
    assert len(crates) >= 2, f"expected the function crates under functions/, found {crates}"
    assert kinds.count("AWS::Serverless::Function") == len(crates)
    # SQS consumers and stream functions (the outbox relay), by their one event source.
    sources = [
        {e.get("Type") for e in (r["Properties"].get("Events") or {}).values()}
        for r in sam_template["Resources"].values()
        if r["Type"] == "AWS::Serverless::Function"
    ]
    sqs, streams, schedules = sources.count({"SQS"}), sources.count({"DynamoDB"}), sources.count({"Schedule"})
    assert sqs >= 2 and streams >= 1 and schedules >= 1 and sqs + streams + schedules == len(crates), sources
    assert kinds.count("AWS::SQS::Queue") == 2 * sqs + streams, "a queue and a DLQ per consumer, an on-failure queue per stream function"
    assert kinds.count("AWS::CloudWatch::Alarm") == 4 * sqs + 3 * streams + 2 * schedules, (
        "per consumer DLQ depth, queue age, dead letters, errors; per stream function on-failure depth, iterator age, "
        "errors; per outbox sweeper pending age, errors"
    )
    assert kinds.count("AWS::DynamoDB::Table") >= 1


# ------------------------------------------------------------------------------------------------ mutations

R = "Resources"


def props(doc: dict, logical_id: str) -> dict:
    return doc[R][logical_id]["Properties"]


def event(doc: dict, function: str) -> dict:
    return props(doc, function)["Events"]["Queue"]["Properties"]


def statements(doc: dict, role: str) -> list[dict]:
    return props(doc, role)["Policies"][0]["PolicyDocument"]["Statement"]


def statement(doc: dict, role: str, sid: str) -> dict:
    return next(s for s in statements(doc, role) if s.get("Sid") == sid)


def add_consumer_without_dlq(doc: dict) -> None:
    """A third consumer, added later by someone, whose queue has no DLQ and no alarms: caught without naming it."""
    doc[R]["RefundQueue"] = {
        "Type": "AWS::SQS::Queue",
        "Properties": {"SqsManagedSseEnabled": True, "VisibilityTimeout": 400},
    }
    fn = copy.deepcopy(doc[R]["ChargePaymentFunction"])
    fn["Metadata"]["BuildProperties"]["Binary"] = "refund"
    fn["Properties"]["Events"]["Queue"]["Properties"]["Queue"] = {"Fn::GetAtt": ["RefundQueue", "Arn"]}
    doc[R]["RefundFunction"] = fn


def add_api_on_sams_implicit_api(doc: dict) -> None:
    """An HTTP API function (as sqsafe new api makes) whose route is on SAM's implicit API: no authorizer, no alarm."""
    fn = copy.deepcopy(doc[R]["ChargePaymentFunction"])
    fn["Metadata"]["BuildProperties"]["Binary"] = "orders-api"
    fn["Properties"]["Events"] = {"Api": {"Type": "HttpApi", "Properties": {"Path": "/orders", "Method": "POST"}}}
    doc[R]["OrdersApiFunction"] = fn


def use_sam_generated_role(doc: dict) -> None:
    del props(doc, "ApplyLedgerFunction")["Role"]
    props(doc, "ApplyLedgerFunction")["Policies"] = ["AmazonDynamoDBFullAccess"]


def non_fifo_dlq(doc: dict) -> None:
    dlq = props(doc, "ApplyLedgerDeadLetterQueue")
    del dlq["FifoQueue"]
    dlq["QueueName"] = {"Fn::Sub": "${AWS::StackName}-apply-ledger-dlq"}


def stream_event(doc: dict, function: str) -> dict:
    return props(doc, function)["Events"]["Stream"]["Properties"]


def add_raw_stream_mapping_without_bisect(doc: dict) -> None:
    """A plain AWS::Lambda::EventSourceMapping on the outbox stream, outside SAM: held to the same rule."""
    mapping = copy.deepcopy(stream_event(doc, "OutboxRelayFunction"))
    mapping.pop("BisectBatchOnFunctionError")
    mapping["EventSourceArn"] = mapping.pop("Stream")
    mapping["FunctionName"] = {"Ref": "OutboxRelayFunction"}
    doc[R]["RawStreamMapping"] = {"Type": "AWS::Lambda::EventSourceMapping", "Properties": mapping}


# A Kinesis consumer (ship-order: its stream, failure queue, on-failure queue, role, log group and alarms) wired as the
# stream-consumer rule wants it; the crate tests of the same rule read the same file (crates/sqsafe-cli/src/check).
STREAM_CONSUMER = ROOT / "crates" / "sqsafe-cli" / "src" / "check" / "testdata" / "stream_consumers.yaml"


def add_stream_consumer(doc: dict) -> None:
    from sam_translate import load_template

    doc[R].update(load_template(STREAM_CONSUMER))


def add_stream_consumer_then(change: Callable[[dict], None]) -> Callable[[dict], None]:
    def mutate(doc: dict) -> None:
        add_stream_consumer(doc)
        change(doc)

    return mutate


def workspace_with(tmp_path, crate: str):
    """A copy of the workspace's function crates (their manifests) plus `crate`, for `sqsafe check --root`."""
    workspace = tmp_path / "workspace"
    (workspace / "functions").mkdir(parents=True)
    (workspace / "Cargo.toml").write_text('[workspace]\nmembers = ["functions/*"]\n', encoding="utf-8")
    for manifest in (ROOT / "functions").glob("*/Cargo.toml"):
        (workspace / "functions" / manifest.parent.name).mkdir()
        shutil.copy(manifest, workspace / "functions" / manifest.parent.name / "Cargo.toml")
    (workspace / "functions" / crate).mkdir()
    (workspace / "functions" / crate / "Cargo.toml").write_text(
        f'[package]\nname = "{crate}"\nversion = "0.1.0"\n', encoding="utf-8"
    )
    return workspace


def variables(doc: dict, function: str) -> dict:
    return props(doc, function)["Environment"]["Variables"]


def add_prices_table(doc: dict) -> None:
    """A table added by hand, as a team adds one its code reads; it keeps every table rule."""
    doc[R]["PricesTable"] = {
        "Type": "AWS::DynamoDB::Table",
        "Properties": {
            "BillingMode": "PAY_PER_REQUEST",
            "AttributeDefinitions": [{"AttributeName": "pk", "AttributeType": "S"}],
            "KeySchema": [{"AttributeName": "pk", "KeyType": "HASH"}],
            "SSESpecification": {"SSEEnabled": True},
            "PointInTimeRecoverySpecification": {"PointInTimeRecoveryEnabled": True},
        },
    }


def prices_table_named(doc: dict) -> None:
    """ChargePaymentFunction's environment names the new table; its role grants nothing on it."""
    add_prices_table(doc)
    variables(doc, "ChargePaymentFunction")["PRICES_TABLE"] = {"Ref": "PricesTable"}


def prices_table_granted(doc: dict) -> None:
    """ChargePaymentRole reaches the new table, which the function's environment does not name."""
    add_prices_table(doc)
    statements(doc, "ChargePaymentRole").append(
        {"Sid": "Prices", "Effect": "Allow", "Action": "dynamodb:GetItem", "Resource": {"Fn::GetAtt": ["PricesTable", "Arn"]}})


def prices_table_named_and_granted(doc: dict) -> None:
    prices_table_named(doc)
    prices_table_granted(doc)


def receipts_queue_named(doc: dict) -> None:
    """ChargePaymentFunction publishes to another consumer's queue (its URL, through !Sub); no statement allows it."""
    variables(doc, "ChargePaymentFunction")["RECEIPTS_QUEUE_URL"] = {"Fn::Sub": "${ApplyLedgerQueue}"}


def receipts_queue_named_and_granted(doc: dict) -> None:
    receipts_queue_named(doc)
    statements(doc, "ChargePaymentRole").append(
        {"Sid": "Receipts", "Effect": "Allow", "Action": "sqs:SendMessage", "Resource": {"Fn::GetAtt": ["ApplyLedgerQueue", "Arn"]}})


def other_stack_table_named(doc: dict) -> None:
    """Another stack's table, its name a parameter: no resource of this template, so nothing to hold the role to."""
    doc["Parameters"]["PricesTableName"] = {"Type": "String", "Default": "prices"}
    variables(doc, "ChargePaymentFunction")["PRICES_TABLE"] = {"Ref": "PricesTableName"}
    variables(doc, "ApplyLedgerFunction")["RATES_TABLE"] = "rates-prod"


def other_stack_table_named_and_granted(doc: dict) -> None:
    other_stack_table_named(doc)
    statements(doc, "ChargePaymentRole").append({
        "Sid": "Prices", "Effect": "Allow", "Action": "dynamodb:GetItem",
        "Resource": {"Fn::Sub": "arn:${AWS::Partition}:dynamodb:${AWS::Region}:${AWS::AccountId}:table/${PricesTableName}"},
    })


def number_parameter_granted_as_a_table(doc: dict) -> None:
    """A Number parameter the environment uses (MaxAttempts) cannot name another stack's table: a grant through it
    is not one of the function's resources."""
    statements(doc, "ChargePaymentRole").append({
        "Sid": "Attempts", "Effect": "Allow", "Action": "dynamodb:GetItem",
        "Resource": {"Fn::Sub": "arn:${AWS::Partition}:dynamodb:${AWS::Region}:${AWS::AccountId}:table/${MaxAttempts}"},
    })


def other_stack_table_granted_elsewhere(doc: dict) -> None:
    other_stack_table_named_and_granted(doc)
    statements(doc, "ApplyLedgerRole").append(copy.deepcopy(statement(doc, "ChargePaymentRole", "Prices")))


Mutation = tuple[str, Callable[[dict], None], str, str]

# How a nested application's alarms and dashboard name the parent's function (sqsafe/consumer.yaml): by the
# FunctionName the parent gives it, since they cannot `!Ref` it.
CHARGE_PAYMENT_NAME = {"Fn::Sub": "${AWS::StackName}-charge-payment"}
APPLY_LEDGER_NAME = {"Fn::Sub": "${AWS::StackName}-apply-ledger"}


def watched_by_function_name(doc: dict, alarm_name: dict = CHARGE_PAYMENT_NAME, dashboard_name: dict = CHARGE_PAYMENT_NAME) -> None:
    """charge-payment's function named (FunctionName), its errors alarm and dashboard naming it by a name."""
    props(doc, "ChargePaymentFunction")["FunctionName"] = CHARGE_PAYMENT_NAME
    for metric in props(doc, "ChargePaymentFunctionErrorsAlarm")["Metrics"]:
        for dimension in ((metric.get("MetricStat") or {}).get("Metric") or {}).get("Dimensions", []):
            if dimension["Name"] == "FunctionName":
                dimension["Value"] = alarm_name
    props(doc, "ChargePaymentDashboard")["DashboardBody"]["Fn::Sub"][1]["Function"] = dashboard_name


MUTATIONS: list[Mutation] = [
    # (what, mutate, rule expected, resource expected)
    ("maxReceiveCount 2", lambda d: props(d, "ChargePaymentQueue")["RedrivePolicy"].update(maxReceiveCount=2),
     "max-receive-count", "ChargePaymentQueue"),
    ("ReportBatchItemFailures removed", lambda d: event(d, "ApplyLedgerFunction").pop("FunctionResponseTypes"),
     "report-batch-item-failures", "ApplyLedgerFunction.Events.Queue"),
    ("idempotency window 7 days", lambda d: d["Parameters"]["IdempotencyWindowDays"].update(MinValue=7, Default=7),
     "idempotency-window", "ChargePaymentFunction"),
    ("source retention 14 days, window 19", lambda d: props(d, "ApplyLedgerQueue").update(MessageRetentionPeriod=1209600),
     "idempotency-window", "ApplyLedgerFunction"),
    ("window unbounded below", lambda d: d["Parameters"]["IdempotencyWindowDays"].pop("MinValue"),
     "idempotency-window", "ApplyLedgerFunction"),
    ("window not set", lambda d: props(d, "ChargePaymentFunction")["Environment"]["Variables"].pop("IDEMPOTENCY_WINDOW_DAYS"),
     "idempotency-window", "ChargePaymentFunction"),
    ("visibility timeout 120", lambda d: props(d, "ApplyLedgerQueue").update(VisibilityTimeout=120),
     "visibility-timeout", "ApplyLedgerQueue"),
    ("function timeout up to 300", lambda d: d["Parameters"]["FunctionTimeout"].update(MaxValue=300),
     "visibility-timeout", "ChargePaymentQueue"),
    ("batching window up to 300", lambda d: d["Parameters"]["MaximumBatchingWindowInSeconds"].update(MaxValue=300),
     "visibility-timeout", "ChargePaymentQueue"),
    ("function timeout unbounded", lambda d: d["Parameters"]["FunctionTimeout"].pop("MaxValue"),
     "visibility-timeout", "ApplyLedgerQueue"),
    ("MaxAttempts up to 10", lambda d: d["Parameters"]["MaxAttempts"].update(MaxValue=10),
     "max-attempts", "ApplyLedgerFunction"),
    ("DLQ keeps 4 days", lambda d: props(d, "ChargePaymentDeadLetterQueue").update(MessageRetentionPeriod=345600),
     "dlq-retention", "ChargePaymentDeadLetterQueue"),
    ("RedriveAllowPolicy removed", lambda d: props(d, "ApplyLedgerDeadLetterQueue").pop("RedriveAllowPolicy"),
     "redrive-allow-policy", "ApplyLedgerDeadLetterQueue"),
    ("RedriveAllowPolicy allowAll", lambda d: props(d, "ChargePaymentDeadLetterQueue").update(RedriveAllowPolicy={"redrivePermission": "allowAll"}),
     "redrive-allow-policy", "ChargePaymentDeadLetterQueue"),
    ("standard DLQ for a FIFO queue", non_fifo_dlq, "dlq-fifo", "ApplyLedgerDeadLetterQueue"),
    ("DLQ_URL of the other function", lambda d: props(d, "ChargePaymentFunction")["Environment"]["Variables"].update(DLQ_URL={"Ref": "ApplyLedgerDeadLetterQueue"}),
     "dlq-url", "ChargePaymentFunction"),
    ("queue SSE off", lambda d: props(d, "ApplyLedgerDeadLetterQueue").update(SqsManagedSseEnabled=False),
     "sse", "ApplyLedgerDeadLetterQueue"),
    ("table SSE removed", lambda d: props(d, "LedgerTable").pop("SSESpecification"), "sse", "LedgerTable"),
    ("PITR removed", lambda d: props(d, "IdempotencyTable").pop("PointInTimeRecoverySpecification"),
     "pitr", "IdempotencyTable"),
    ("provisioned table", lambda d: props(d, "LedgerTable").update(BillingMode="PROVISIONED"), "on-demand", "LedgerTable"),
    ("TTL removed", lambda d: props(d, "IdempotencyTable").pop("TimeToLiveSpecification"),
     "idempotency-table", "IdempotencyTable"),
    ("idempotency table with a sort key", lambda d: props(d, "IdempotencyTable")["KeySchema"].append({"AttributeName": "sk", "KeyType": "RANGE"}),
     "idempotency-table", "IdempotencyTable"),
    ("DLQ alarm removed", lambda d: d[R].pop("ApplyLedgerDeadLetterAlarm"), "alarm-dlq", "ApplyLedgerDeadLetterQueue"),
    ("DLQ alarm treats missing data as breaching", lambda d: props(d, "ChargePaymentDeadLetterAlarm").update(TreatMissingData="breaching"),
     "alarm-dlq", "ChargePaymentDeadLetterAlarm"),
    ("DLQ alarm threshold 10", lambda d: props(d, "ChargePaymentDeadLetterAlarm").update(Threshold=10),
     "alarm-dlq", "ChargePaymentDeadLetterAlarm"),
    ("DLQ alarm without actions", lambda d: props(d, "ApplyLedgerDeadLetterAlarm").pop("AlarmActions"),
     "alarm-dlq", "ApplyLedgerDeadLetterAlarm"),
    ("age alarm removed", lambda d: d[R].pop("ChargePaymentQueueAgeAlarm"), "alarm-queue-age", "ChargePaymentQueue"),
    ("age alarm on the wrong queue", lambda d: props(d, "ApplyLedgerQueueAgeAlarm")["Dimensions"][0].update(Value={"Fn::GetAtt": ["ChargePaymentQueue", "QueueName"]}),
     "alarm-queue-age", "ApplyLedgerQueue"),
    ("dynamodb:* action", lambda d: statement(d, "ChargePaymentRole", "IdempotencyRecords").update(Action="dynamodb:*"),
     "least-privilege", "ChargePaymentRole"),
    ("Action *", lambda d: statements(d, "ApplyLedgerRole").append({"Effect": "Allow", "Action": "*", "Resource": "*"}),
     "least-privilege", "ApplyLedgerRole"),
    ("SendMessage on Resource *", lambda d: statement(d, "ApplyLedgerRole", "DeadLetter").update(Resource="*"),
     "least-privilege", "ApplyLedgerRole"),
    ("the other function's table", lambda d: statement(d, "ChargePaymentRole", "IdempotencyRecords").update(Resource=[{"Fn::GetAtt": ["IdempotencyTable", "Arn"]}, {"Fn::GetAtt": ["LedgerTable", "Arn"]}]),
     "least-privilege", "ChargePaymentRole"),
    ("the other function's queue", lambda d: statement(d, "ChargePaymentRole", "DeadLetter").update(Resource={"Fn::GetAtt": ["ApplyLedgerDeadLetterQueue", "Arn"]}),
     "least-privilege", "ChargePaymentRole"),
    ("managed policy on the role", lambda d: props(d, "ChargePaymentRole").update(ManagedPolicyArns=["arn:aws:iam::aws:policy/AmazonSQSFullAccess"]),
     "least-privilege", "ChargePaymentRole"),
    ("SAM-generated role", use_sam_generated_role, "least-privilege", "ApplyLedgerFunction"),
    ("DLQ without MaximumMessageSize", lambda d: props(d, "ApplyLedgerDeadLetterQueue").pop("MaximumMessageSize"),
     "message-size", "ApplyLedgerDeadLetterQueue"),
    ("DLQ smaller than its source", lambda d: props(d, "ChargePaymentDeadLetterQueue").update(MaximumMessageSize=262144),
     "message-size", "ChargePaymentDeadLetterQueue"),
    ("copies fitted to another size", lambda d: props(d, "ChargePaymentFunction")["Environment"]["Variables"].update(DLQ_MAX_MESSAGE_SIZE=262144),
     "message-size", "ChargePaymentFunction"),
    ("idempotency records of any consumer", lambda d: statement(d, "ChargePaymentRole", "IdempotencyRecords").pop("Condition"),
     "idempotency-leading-keys", "ChargePaymentRole"),
    ("the other consumer's key prefix", lambda d: statement(d, "ApplyLedgerRole", "IdempotencyRecords")["Condition"]["ForAllValues:StringLike"].update({"dynamodb:LeadingKeys": ["charge-payment#*"]}),
     "idempotency-leading-keys", "ApplyLedgerRole"),
    ("QUEUE_URL names the DLQ", lambda d: props(d, "ChargePaymentFunction")["Environment"]["Variables"].update(QUEUE_URL={"Ref": "ChargePaymentDeadLetterQueue"}),
     "queue-url", "ChargePaymentFunction"),
    ("QUEUE_URL not set", lambda d: props(d, "ApplyLedgerFunction")["Environment"]["Variables"].pop("QUEUE_URL"),
     "queue-url", "ApplyLedgerFunction"),
    ("ChangeMessageVisibility also on the DLQ", lambda d: statement(d, "ChargePaymentRole", "OwnMessageVisibility").update(Resource=[{"Fn::GetAtt": ["ChargePaymentQueue", "Arn"]}, {"Fn::GetAtt": ["ChargePaymentDeadLetterQueue", "Arn"]}]),
     "change-message-visibility", "ChargePaymentRole"),
    ("ChangeMessageVisibility moved to the DLQ", lambda d: statement(d, "ApplyLedgerRole", "OwnMessageVisibility").update(Resource={"Fn::GetAtt": ["ApplyLedgerDeadLetterQueue", "Arn"]}),
     "change-message-visibility", "ApplyLedgerRole"),
    ("ChangeMessageVisibility through a wildcard on the DLQ", lambda d: statement(d, "ChargePaymentRole", "DeadLetter").update(Action=["sqs:SendMessage", "sqs:Change*"]),
     "change-message-visibility", "ChargePaymentRole"),
    ("ChangeMessageVisibility missing", lambda d: statements(d, "ApplyLedgerRole").remove(statement(d, "ApplyLedgerRole", "OwnMessageVisibility")),
     "change-message-visibility", "ApplyLedgerRole"),
    ("ChangeMessageVisibility missing (permissions for QUEUE_URL)", lambda d: statements(d, "ChargePaymentRole").remove(statement(d, "ChargePaymentRole", "OwnMessageVisibility")),
     "permissions", "ChargePaymentRole"),
    ("SendMessage to the DLQ missing", lambda d: statements(d, "ChargePaymentRole").remove(statement(d, "ChargePaymentRole", "DeadLetter")),
     "permissions", "ChargePaymentRole"),
    ("ConditionCheckItem kept, PutItem on the ledger missing", lambda d: statement(d, "ApplyLedgerRole", "Ledger").update(Action=["dynamodb:UpdateItem", "dynamodb:ConditionCheckItem"]),
     "permissions", "ApplyLedgerRole"),
    ("MaximumConcurrency up to 5000", lambda d: d["Parameters"]["MaximumConcurrency"].update(MaxValue=5000),
     "maximum-concurrency", "ChargePaymentFunction.Events.Queue"),
    ("ScalingConfig removed", lambda d: event(d, "ApplyLedgerFunction").pop("ScalingConfig"),
     "maximum-concurrency", "ApplyLedgerFunction.Events.Queue"),
    ("batching window on the FIFO mapping", lambda d: event(d, "ApplyLedgerFunction").update(MaximumBatchingWindowInSeconds=5),
     "fifo-mapping", "ApplyLedgerFunction.Events.Queue"),
    ("BatchGetItem missing while the mode may be keyed", lambda d: statement(d, "ChargePaymentRole", "IdempotencyRecords").update(
        Action=["dynamodb:PutItem", "dynamodb:UpdateItem", "dynamodb:DeleteItem"]),
     "permissions", "ChargePaymentRole"),
    ("BatchGetItem granted to a consumer that only claims", lambda d: statement(d, "ApplyLedgerRole", "IdempotencyRecords").update(
        Action=statement(d, "ApplyLedgerRole", "IdempotencyRecords")["Action"] + ["dynamodb:BatchGetItem"]),
     "grant-only-what-is-used", "ApplyLedgerRole"),
    ("GetItem granted on the idempotency table", lambda d: statement(d, "ChargePaymentRole", "IdempotencyRecords").update(
        Action=["dynamodb:GetItem", "dynamodb:PutItem", "dynamodb:UpdateItem", "dynamodb:DeleteItem"]),
     "grant-only-what-is-used", "ChargePaymentRole"),
    ("ConditionCheckItem granted on the ledger", lambda d: statement(d, "ApplyLedgerRole", "Ledger").update(
        Action=["dynamodb:PutItem", "dynamodb:UpdateItem", "dynamodb:ConditionCheckItem"]),
     "grant-only-what-is-used", "ApplyLedgerRole"),
    ("log level WARN allowed", lambda d: d["Parameters"]["LogLevel"].update(AllowedValues=["TRACE", "DEBUG", "INFO", "WARN"]),
     "emf-log-level", "ChargePaymentFunction"),
    ("dead-letters alarm removed", lambda d: d[R].pop("ChargePaymentDeadLettersAlarm"),
     "alarm-dead-letters", "ChargePaymentFunction"),
    ("dead-letters alarm on another consumer", lambda d: props(d, "ApplyLedgerDeadLettersAlarm")["Dimensions"][0].update(Value="charge-payment"),
     "alarm-dead-letters", "ApplyLedgerFunction"),
    ("dead-letters alarm on the average", lambda d: props(d, "ApplyLedgerDeadLettersAlarm").update(Statistic="Average"),
     "alarm-dead-letters", "ApplyLedgerDeadLettersAlarm"),
    ("throttles not watched", lambda d: props(d, "ChargePaymentFunctionErrorsAlarm")["Metrics"].pop(2),
     "alarm-function-errors", "ChargePaymentFunction"),
    ("FIFO mapping with batches of BatchSize", lambda d: event(d, "ApplyLedgerFunction").update(BatchSize={"Ref": "BatchSize"}),
     "fifo-mapping", "ApplyLedgerFunction.Events.Queue"),
    ("errors alarm on another function's FunctionName", lambda d: watched_by_function_name(d, alarm_name=APPLY_LEDGER_NAME),
     "alarm-function-errors", "ChargePaymentFunction"),
    ("dashboard removed", lambda d: d[R].pop("ApplyLedgerDashboard"), "dashboard", "ApplyLedgerFunction"),
    ("dashboard shows another function's FunctionName", lambda d: watched_by_function_name(d, dashboard_name=APPLY_LEDGER_NAME),
     "dashboard", "ChargePaymentFunction"),
    ("dashboard shows another DLQ", lambda d: props(d, "ChargePaymentDashboard")["DashboardBody"]["Fn::Sub"][1].update(
        DeadLetterQueue={"Fn::GetAtt": ["ApplyLedgerDeadLetterQueue", "QueueName"]}),
     "dashboard", "ChargePaymentFunction"),
    ("dashboard without dead letters by kind", lambda d: props(d, "ChargePaymentDashboard")["DashboardBody"]["Fn::Sub"].__setitem__(
        0, props(d, "ChargePaymentDashboard")["DashboardBody"]["Fn::Sub"][0].replace("error_kind", "kind")),
     "dashboard", "ChargePaymentFunction"),
    ("dashboard body not JSON", lambda d: props(d, "ApplyLedgerDashboard")["DashboardBody"]["Fn::Sub"].__setitem__(0, "{widgets: ["),
     "dashboard", "ApplyLedgerDashboard"),
    ("dashboard shows a metric the code never writes", lambda d: props(d, "ChargePaymentDashboard")["DashboardBody"]["Fn::Sub"].__setitem__(
        0, props(d, "ChargePaymentDashboard")["DashboardBody"]["Fn::Sub"][0].replace('"RecordsReplayed"', '"RecordsDuplicated"')),
     "dashboard-metrics", "ChargePaymentDashboard"),
    ("runtime provided.al2", lambda d: props(d, "ApplyLedgerFunction").update(Runtime="provided.al2"), "runtime", "ApplyLedgerFunction"),
    ("x86_64 by default", lambda d: d["Parameters"]["Architecture"].update(Default="x86_64"), "architecture", "ChargePaymentFunction"),
    ("built without cargo-lambda", lambda d: d[R]["ChargePaymentFunction"].pop("Metadata"), "build-method", "ChargePaymentFunction"),
    ("log retention removed", lambda d: props(d, "ApplyLedgerLogGroup").pop("RetentionInDays"), "log-group", "ApplyLedgerLogGroup"),
    ("text logs", lambda d: props(d, "ChargePaymentFunction")["LoggingConfig"].update(LogFormat="Text"), "log-group", "ChargePaymentFunction"),
    ("a second SQS event", lambda d: props(d, "ChargePaymentFunction")["Events"].update(Other=copy.deepcopy(props(d, "ChargePaymentFunction")["Events"]["Queue"])),
     "sqs-event", "ChargePaymentFunction"),
    ("a queue nobody consumes", lambda d: d[R].update(SpareQueue={"Type": "AWS::SQS::Queue", "Properties": {"SqsManagedSseEnabled": True}}),
     "orphan-queue", "SpareQueue"),
    ("a new consumer without DLQ", add_consumer_without_dlq, "dlq-required", "RefundQueue"),
    ("a new consumer without alarms", add_consumer_without_dlq, "alarm-queue-age", "RefundQueue"),
    ("a new consumer's binary is no crate", add_consumer_without_dlq, "function-crates", "RefundFunction"),
    # The outbox relay, a stream function: the same rules, read for a DynamoDB stream instead of a queue.
    ("stream mapping without bisection", lambda d: stream_event(d, "OutboxRelayFunction").update(BisectBatchOnFunctionError=False),
     "stream-mapping", "OutboxRelayFunction.Events.Stream"),
    ("stream mapping without on-failure destination", lambda d: stream_event(d, "OutboxRelayFunction").pop("DestinationConfig"),
     "stream-mapping", "OutboxRelayFunction.Events.Stream"),
    ("stream mapping gives up after 10 retries", lambda d: stream_event(d, "OutboxRelayFunction").update(MaximumRetryAttempts=10),
     "stream-mapping", "OutboxRelayFunction.Events.Stream"),
    ("relay without FAILURE_QUEUE_URL", lambda d: props(d, "OutboxRelayFunction")["Environment"]["Variables"].pop("FAILURE_QUEUE_URL"),
     "stream-mapping", "OutboxRelayFunction"),
    ("relay's FAILURE_QUEUE_URL is a consumer's DLQ", lambda d: props(d, "OutboxRelayFunction")["Environment"]["Variables"].update(
        FAILURE_QUEUE_URL={"Ref": "ChargePaymentDeadLetterQueue"}), "stream-mapping", "OutboxRelayFunction"),
    ("stream mapping without ReportBatchItemFailures", lambda d: stream_event(d, "OutboxRelayFunction").pop("FunctionResponseTypes"),
     "stream-mapping", "OutboxRelayFunction.Events.Stream"),
    ("stream mapping from LATEST", lambda d: stream_event(d, "OutboxRelayFunction").update(StartingPosition="LATEST"),
     "stream-mapping", "OutboxRelayFunction.Events.Stream"),
    ("outbox stream without the new image", lambda d: props(d, "OutboxTable").update(StreamSpecification={"StreamViewType": "KEYS_ONLY"}),
     "stream-mapping", "OutboxTable"),
    ("raw stream mapping without bisection", add_raw_stream_mapping_without_bisect, "stream-mapping", "RawStreamMapping"),
    # A stream consumer (Kinesis, or DynamoDB without OUTBOX_TABLE): bounded retries, a failure queue of its own.
    ("Kinesis consumer retries forever", add_stream_consumer_then(
        lambda d: stream_event(d, "ShipOrderFunction").update(MaximumRetryAttempts=-1)),
     "stream-consumer", "ShipOrderFunction.Events.Stream"),
    ("Kinesis consumer keeps records for the stream's retention", add_stream_consumer_then(
        lambda d: stream_event(d, "ShipOrderFunction").pop("MaximumRecordAgeInSeconds")),
     "stream-consumer", "ShipOrderFunction.Events.Stream"),
    ("Kinesis consumer's dead letters in its on-failure queue", add_stream_consumer_then(
        lambda d: variables(d, "ShipOrderFunction").update(DLQ_URL={"Ref": "ShipOrderOnFailureQueue"})),
     "stream-consumer", "ShipOrderFunction"),
    ("Kinesis consumer's window shorter than a record's retries", add_stream_consumer_then(
        lambda d: variables(d, "ShipOrderFunction").update(IDEMPOTENCY_WINDOW_DAYS="1")),
     "stream-consumer", "ShipOrderFunction"),
    ("Kinesis consumer without its IteratorAge alarm", add_stream_consumer_then(
        lambda d: d[R].pop("ShipOrderIteratorAgeAlarm")),
     "alarm-stream-age", "ShipOrderFunction"),
    ("Kinesis reads on Resource *", add_stream_consumer_then(
        lambda d: statement(d, "ShipOrderRole", "EventSourceMapping").update(Resource="*")),
     "least-privilege", "ShipOrderRole"),
    ("iterator-age alarm removed", lambda d: d[R].pop("OutboxRelayIteratorAgeAlarm"), "alarm-stream-age", "OutboxRelayFunction"),
    ("on-failure queue alarm removed", lambda d: d[R].pop("OutboxRelayFailuresAlarm"), "alarm-dlq", "OutboxRelayFailureQueue"),
    ("on-failure queue open to redrives", lambda d: props(d, "OutboxRelayFailureQueue").update(RedriveAllowPolicy={"redrivePermission": "allowAll"}),
     "redrive-allow-policy", "OutboxRelayFailureQueue"),
    ("on-failure queue keeps 4 days", lambda d: props(d, "OutboxRelayFailureQueue").update(MessageRetentionPeriod=345600),
     "dlq-retention", "OutboxRelayFailureQueue"),
    ("stream reads on Resource *", lambda d: statement(d, "OutboxRelayRole", "EventSourceMapping").update(Resource="*"),
     "least-privilege", "OutboxRelayRole"),
    ("stream reads on another table's stream", lambda d: statement(d, "OutboxRelayRole", "EventSourceMapping").update(Resource={"Fn::GetAtt": ["LedgerTable", "StreamArn"]}),
     "least-privilege", "OutboxRelayRole"),
    ("a consumer reads the outbox stream", lambda d: statements(d, "ChargePaymentRole").append(
        {"Effect": "Allow", "Action": "dynamodb:GetRecords", "Resource": {"Fn::GetAtt": ["OutboxTable", "StreamArn"]}}),
     "least-privilege", "ChargePaymentRole"),
    ("GetRecords missing", lambda d: statement(d, "OutboxRelayRole", "EventSourceMapping").update(Action=["dynamodb:DescribeStream", "dynamodb:GetShardIterator"]),
     "permissions", "OutboxRelayRole"),
    ("SendMessage to the on-failure queue missing", lambda d: statements(d, "OutboxRelayRole").remove(statement(d, "OutboxRelayRole", "OnFailure")),
     "permissions", "OutboxRelayRole"),
    ("a destination not granted", lambda d: statement(d, "OutboxRelayRole", "Publish").update(Resource=[{"Fn::GetAtt": ["ChargePaymentQueue", "Arn"]}]),
     "permissions", "OutboxRelayRole"),
    ("SendMessage beyond the destinations", lambda d: statement(d, "OutboxRelayRole", "Publish")["Resource"].append({"Fn::GetAtt": ["ChargePaymentDeadLetterQueue", "Arn"]}),
     "least-privilege", "OutboxRelayRole"),
    ("PutItem granted on the outbox table", lambda d: statement(d, "OutboxRelayRole", "MarkSent").update(Action=["dynamodb:UpdateItem", "dynamodb:PutItem"]),
     "grant-only-what-is-used", "OutboxRelayRole"),
    ("ReceiveMessage granted on a destination", lambda d: statement(d, "OutboxRelayRole", "Publish").update(Action=["sqs:SendMessage", "sqs:ReceiveMessage"]),
     "grant-only-what-is-used", "OutboxRelayRole"),
    ("the relay changes visibility", lambda d: statements(d, "OutboxRelayRole").append(
        {"Effect": "Allow", "Action": "sqs:ChangeMessageVisibility", "Resource": {"Fn::GetAtt": ["ChargePaymentQueue", "Arn"]}}),
     "change-message-visibility", "OutboxRelayRole"),
    ("a stream function with an SQS event too", lambda d: props(d, "OutboxRelayFunction")["Events"].update(
        Queue=copy.deepcopy(props(d, "ChargePaymentFunction")["Events"]["Queue"])),
     "sqs-event", "OutboxRelayFunction"),
    ("stream function with a SAM-generated role", lambda d: props(d, "OutboxRelayFunction").pop("Role"),
     "least-privilege", "OutboxRelayFunction"),
    # The outbox sweeper: nothing stays PENDING unseen.
    ("outbox sweeper removed", lambda d: d[R].pop("OutboxSweeperFunction"), "outbox-sweeper", "OutboxRelayFunction"),
    ("pending index removed", lambda d: props(d, "OutboxTable").pop("GlobalSecondaryIndexes"), "outbox-sweeper", "OutboxTable"),
    ("pending index keyed by status", lambda d: props(d, "OutboxTable")["GlobalSecondaryIndexes"][0]["KeySchema"][0].update(AttributeName="status"),
     "outbox-sweeper", "OutboxTable"),
    ("pending index projects keys only", lambda d: props(d, "OutboxTable")["GlobalSecondaryIndexes"][0]["Projection"].update(ProjectionType="KEYS_ONLY"),
     "outbox-sweeper", "OutboxTable"),
    ("sweeper runs hourly", lambda d: props(d, "OutboxSweeperFunction")["Events"]["Schedule"]["Properties"].update(Schedule="rate(1 hour)"),
     "outbox-sweeper", "OutboxSweeperFunction.Events.Schedule"),
    ("sweeper publishes to other destinations than the relay", lambda d: props(d, "OutboxSweeperFunction")["Environment"]["Variables"].update(
        OUTBOX_DESTINATIONS={"Ref": "ChargePaymentQueue"}), "outbox-sweeper", "OutboxSweeperFunction"),
    ("outbox age alarm removed", lambda d: d[R].pop("OutboxPendingAgeAlarm"), "outbox-sweeper", "OutboxSweeperFunction"),
    ("outbox age alarm silent when the sweeper stops", lambda d: props(d, "OutboxPendingAgeAlarm").update(TreatMissingData="notBreaching"),
     "outbox-sweeper", "OutboxPendingAgeAlarm"),
    ("the sweeper cannot read the pending index", lambda d: statements(d, "OutboxSweeperRole").remove(statement(d, "OutboxSweeperRole", "ReadPending")),
     "permissions", "OutboxSweeperRole"),
    # A team's own resources: every table and queue its environment names is granted, and nothing else.
    ("a hand-added table without its grant", prices_table_named, "environment-grants", "ChargePaymentRole"),
    ("a queue the environment names without its grant", receipts_queue_named, "environment-grants", "ChargePaymentRole"),
    ("a hand-added table granted but named by no variable", prices_table_granted, "least-privilege", "ChargePaymentRole"),
    ("another stack's table granted to a role whose environment does not name it", other_stack_table_granted_elsewhere,
     "least-privilege", "ApplyLedgerRole"),
    ("a grant through a Number parameter the environment uses", number_parameter_granted_as_a_table,
     "least-privilege", "ChargePaymentRole"),
    ("the sweeper may delete outbox items", lambda d: statement(d, "OutboxSweeperRole", "MarkSent").update(Action=["dynamodb:UpdateItem", "dynamodb:DeleteItem"]),
     "grant-only-what-is-used", "OutboxSweeperRole"),
    ("an HTTP API function on SAM's implicit API", add_api_on_sams_implicit_api, "api-function", "OrdersApiFunction"),
    ("a nested application in S3", lambda d: d[R].update(Extras={
        "Type": "AWS::Serverless::Application",
        "Properties": {"Location": "https://s3.amazonaws.com/bucket/extras.yaml"}}),
     "nested-application", "Extras"),
]


@pytest.mark.parametrize(("mutate", "rule", "resource"), [m[1:] for m in MUTATIONS], ids=[m[0] for m in MUTATIONS])
def test_mutation_is_caught(sam_template, tmp_path, mutate, rule: str, resource: str) -> None:
    mutate(sam_template)
    code, found, output = check_doc(sam_template, tmp_path)
    assert code == 1 and (rule, resource) in found, f"expected [{rule}] {resource}; sqsafe check said:\n{output}"


# Changes that keep every rule: what a mutation above breaks, done right.
PASSING: list[tuple[str, Callable[[dict], None]]] = [
    ("a hand-added table with its grant", prices_table_named_and_granted),
    ("a queue the environment names, with its grant", receipts_queue_named_and_granted),
    ("another stack's table named by a parameter or a literal", other_stack_table_named),
    ("another stack's table named by a parameter, granted through it", other_stack_table_named_and_granted),
    ("the function's alarms and dashboard name it by its FunctionName", watched_by_function_name),
]


@pytest.mark.parametrize("mutate", [p[1] for p in PASSING], ids=[p[0] for p in PASSING])
def test_change_keeps_every_rule(sam_template, tmp_path, mutate) -> None:
    mutate(sam_template)
    code, found, output = check_doc(sam_template, tmp_path)
    assert code == 0 and found == set(), output


def test_a_kinesis_consumer_wired_as_the_rule_wants_keeps_every_rule(sam_template, tmp_path) -> None:
    add_stream_consumer(sam_template)
    code, found, output = check_doc(sam_template, tmp_path, "--root", str(workspace_with(tmp_path, "ship-order")))
    assert code == 0 and found == set(), output


def test_environment_grants_names_the_fix(sam_template, tmp_path) -> None:
    prices_table_named(sam_template)
    _, _, output = check_doc(sam_template, tmp_path)
    assert [line for line in output.splitlines() if line.startswith("[environment-grants]")] == [
        "[environment-grants] ChargePaymentRole: grants nothing on PricesTable, which ChargePaymentFunction's "
        "PRICES_TABLE names: add a statement allowing the DynamoDB actions its code calls (for example "
        "dynamodb:GetItem) on !GetAtt PricesTable.Arn"
    ]


def test_missing_function_crate_is_caught(sam_template, tmp_path) -> None:
    """A crate under functions/ without a function in the template: a copy of the workspace's crates plus one."""
    workspace = workspace_with(tmp_path, "send-receipt")
    code, found, output = check_doc(sam_template, tmp_path, "--root", str(workspace))
    assert code == 1 and found == {("function-crates", "functions/send-receipt")}, output


def test_every_rule_is_shown_failing() -> None:
    """Every rule sqsafe check knows has a mutation here or in test_nested.py (or the crate test above)."""
    from test_nested import NESTED_MUTATIONS

    covered = {m[2] for m in MUTATIONS} | {m[3] for m in NESTED_MUTATIONS} | {"function-crates"}
    known = rules()
    assert covered == known, f"never shown to fail: {sorted(known - covered)}; unknown: {sorted(covered - known)}"


def test_a_violation_line_names_rule_and_resource(sam_template, tmp_path) -> None:
    props(sam_template, "ChargePaymentQueue")["RedrivePolicy"]["maxReceiveCount"] = 2
    _, _, output = check_doc(sam_template, tmp_path)
    line = next(line for line in output.splitlines() if line.startswith("[max-receive-count]"))
    m = VIOLATION.match(line)
    assert m and m["resource"] == "ChargePaymentQueue" and "maxReceiveCount" in m["message"], line


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
