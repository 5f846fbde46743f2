"""The rules template.yaml must keep, as code: `check(template)` returns every violation, each naming its rule and
the resource that breaks it. Nothing is hard-coded per function: every AWS::Serverless::Function, every queue, table
and alarm found in the template is checked, so a consumer added later is held to the same rules.

Values that are parameters are checked at their bounds, because a deployer may pass any allowed value: a timeout or
batching window at its MaxValue, the idempotency window at its MinValue, MAX_ATTEMPTS at its MaxValue. A parameter
without the bound a rule needs is itself a violation.

Used by test_rules.py (the real template must pass; mutated copies must fail with the named rule).
"""

from __future__ import annotations

import fnmatch
import json
import re
import tomllib
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterable

from nested import location, not_checked

ROOT = Path(__file__).resolve().parents[2]

# Rule name -> what it demands. Every violation carries one of these names.
RULES: dict[str, str] = {
    "function-crates": "every binary of every crate under functions/ is deployed by exactly one function, and no function builds a binary that is not there",
    "runtime": "functions run on provided.al2023",
    "architecture": "functions are arm64 (a parameter may offer x86_64 for builds, but its default is arm64)",
    "build-method": "functions are built by rust-cargolambda (Metadata BuildMethod, BuildProperties.Binary, Handler bootstrap)",
    "log-group": "each function logs JSON (LoggingConfig LogFormat JSON) to a log group of the template with RetentionInDays",
    "sqs-event": "each function has exactly one event source of the template: one SQS queue (an SQS consumer), one DynamoDB stream, `!GetAtt Table.StreamArn` (a stream function, see stream-mapping), or one schedule (the outbox sweeper, see outbox-sweeper)",
    "outbox-sweeper": "each outbox table a stream function relays has a sweeper: a scheduled function (rate of at most 5 minutes) with that OUTBOX_TABLE and the relay's OUTBOX_DESTINATIONS, reading its OUTBOX_PENDING_INDEX, a global secondary index of the table on pending (S, HASH) and created_at (N, RANGE) projecting ALL; and an alarm on sqsafe's OutboxOldestPendingAge (dimension consumer = the sweeper's binary) that notifies an SNS topic of the template and treats missing data as breaching (a sweeper that stopped running)",
    "stream-mapping": "a stream function's DynamoDB event reads a table whose stream is enabled with NEW_IMAGE or NEW_AND_OLD_IMAGES, from TRIM_HORIZON, with FunctionResponseTypes [ReportBatchItemFailures], BisectBatchOnFunctionError true, MaximumRetryAttempts -1 (unset is -1: a retryable failure is retried while the stream holds the record, so a destination that recovers gets its events; the relay takes permanent failures off the shard itself), the function's FAILURE_QUEUE_URL naming its on-failure destination (DestinationConfig.OnFailure), a standard SQS queue of the template",
    "report-batch-item-failures": "every SQS event source mapping has FunctionResponseTypes [ReportBatchItemFailures]",
    "maximum-concurrency": "every SQS event source mapping sets ScalingConfig.MaximumConcurrency, bounded within 2..1000",
    "fifo-mapping": "a FIFO queue's mapping has BatchSize 1 (no record held back behind a failing one of its group, so "
    "each gets its MaxAttempts real tries) and no batching window (Lambda rejects one)",
    "visibility-timeout": "a source queue's VisibilityTimeout >= 6 x its function's Timeout (max) + MaximumBatchingWindowInSeconds (max)",
    "dlq-required": "every consumed queue has a RedrivePolicy to a dead-letter queue of the template",
    "max-receive-count": "every RedrivePolicy has maxReceiveCount >= 5",
    "dlq-fifo": "a FIFO queue's dead-letter queue is FIFO, a standard queue's is standard",
    "dlq-retention": "every dead-letter queue and on-failure queue keeps messages 14 days (MessageRetentionPeriod 1209600)",
    "redrive-allow-policy": "every dead-letter queue has a RedriveAllowPolicy (byQueue) that names its source queue; a stream mapping's on-failure queue, which only Lambda sends to, has denyAll",
    "dlq-url": "a function's DLQ_URL is the dead-letter queue of the queue it consumes",
    "queue-url": "a function's QUEUE_URL is the queue it consumes (backoff, visibility heartbeat and the in-progress hold change visibility there)",
    "orphan-queue": "every queue is consumed by a function, a dead-letter queue, or a stream mapping's on-failure queue (so the rules above cover it)",
    "message-size": "every queue sets MaximumMessageSize (SQS takes up to 1 MiB; say which); a dead-letter queue's is never smaller than its source queue's; a consumer's DLQ_MAX_MESSAGE_SIZE (what its dead-letter copies are fitted to) is its DLQ's MaximumMessageSize",
    "sse": "every queue (SqsManagedSseEnabled or KmsMasterKeyId) and every table (SSESpecification.SSEEnabled) is encrypted",
    "pitr": "every table has point-in-time recovery",
    "on-demand": "every table is on-demand (PAY_PER_REQUEST)",
    "idempotency-table": "an IDEMPOTENCY_TABLE has the DynamoDB store's key schema (pk, String, no sort key) and TTL on expiration",
    "alarm-dlq": "each dead-letter queue and on-failure queue has an alarm: AWS/SQS ApproximateNumberOfMessagesVisible > 0 (GreaterThanThreshold, Threshold 0, TreatMissingData notBreaching), AlarmActions to an SNS topic of the template",
    "alarm-queue-age": "each consumed queue has an alarm on AWS/SQS ApproximateAgeOfOldestMessage, AlarmActions to an SNS topic of the template",
    "alarm-dead-letters": "each SQS consumer has an alarm on sqsafe's own RecordsSentToDlq (namespace sqsafe, dimension consumer = its binary) Sum > 0, so every new dead letter notifies even while the DLQ-depth alarm is already in ALARM",
    "alarm-function-errors": "each function has an alarm on its AWS/Lambda Errors and Throttles (> 0), AlarmActions to an SNS topic of the template",
    "alarm-stream-age": "each stream function has an alarm on its AWS/Lambda IteratorAge (the stream's backlog), AlarmActions to an SNS topic of the template",
    "dashboard": "each consumer has an AWS::CloudWatch::Dashboard (body valid JSON) that shows, for its own consumer, queue, DLQ and function: received, applied and replayed records, dead letters in all and by error kind, the DLQ's depth, the age of the oldest message, and the function's duration",
    "dashboard-metrics": "every sqsafe metric a dashboard or an alarm names is one the code writes (crates/sqsafe-telemetry/src/metrics.rs)",
    "emf-log-level": "a function's ApplicationLogLevel can only be TRACE, DEBUG or INFO: EMF metric lines carry no level, Lambda files them as INFO and drops them at WARN and above",
    "grant-only-what-is-used": "on each table a function's role grants no item action its code does not call (idempotency table: PutItem, UpdateItem, DeleteItem; ledger: PutItem, UpdateItem; effect table: PutItem; outbox table: UpdateItem, and Query for the sweeper; outbox destinations: SendMessage)",
    "idempotency-leading-keys": "every statement that grants item actions on a function's IDEMPOTENCY_TABLE limits them to the function's own keys: Condition ForAllValues:StringLike dynamodb:LeadingKeys [\"<its binary>#*\"] (the key prefix its consumer writes), so consumers that share the table cannot write or delete each other's records",
    "least-privilege": "no Action '*' anywhere; for DynamoDB and SQS no wildcard action and no wildcard resource, and each function's role reaches only its own queue, its own DLQ, its on-failure queue, the tables and queues named in its environment (another stack's through the String parameters it uses: `!Sub ...:table/${PricesTableName}`), and (stream reads) its own stream; no managed policies (they cannot be checked here)",
    "permissions": "each function's role grants what the function needs: receive/delete/attributes on its queue, ChangeMessageVisibility on its QUEUE_URL, SendMessage on its DLQ, item actions on its tables; a stream function: DescribeStream, GetRecords and GetShardIterator on its stream, SendMessage on its on-failure queue and its OUTBOX_DESTINATIONS, UpdateItem on its OUTBOX_TABLE; the outbox sweeper: Query and UpdateItem on its OUTBOX_TABLE, SendMessage on its OUTBOX_DESTINATIONS",
    "environment-grants": "every table and queue of the template that a function's environment names is granted to "
    "its role: at least one DynamoDB action on the table (or its stream, when the variable names the stream), one SQS "
    "action on the queue (the variables `permissions` reads get their exact actions there; a parameter or literal names "
    "another stack's resource, which this rule does not see)",
    "change-message-visibility": "each SQS consumer's role grants sqs:ChangeMessageVisibility on the function's source queue and on nothing else (not its DLQ, not another queue, not '*'); a stream function's grants it nowhere",
    "max-attempts": "MAX_ATTEMPTS (max) <= the consumed queue's maxReceiveCount",
    "idempotency-window": "IDEMPOTENCY_WINDOW_DAYS (min) x 86400 >= source queue retention + DLQ retention + redrive margin",
    "nested-application": "every nested application (AWS::Serverless::Application Location, AWS::CloudFormation::Stack TemplateURL) is a local template file, inlined by nested.flatten and checked with the rest (one in S3 or the Serverless Application Repository is not read, so its resources escape every rule)",
}

# Time allowed, after a message reaches the end of its DLQ retention, for an operator to redrive it and for the
# redriven copy to be consumed. The window rule adds it to the two retentions.
REDRIVE_MARGIN_SECONDS = 86_400
DLQ_RETENTION_SECONDS = 14 * 86_400
MIN_MAX_RECEIVE_COUNT = 5
VISIBILITY_FACTOR = 6
SQS_DEFAULTS = {"VisibilityTimeout": 30, "MessageRetentionPeriod": 345_600}
SAM_DEFAULT_TIMEOUT = 3
CODE_DEFAULT_MAX_ATTEMPTS = 5  # MAX_ATTEMPTS when unset (functions/*/README.md)
DATA_PLANE_SERVICES = ("dynamodb", "sqs")
# The one action a function may hold on its source queue only (the "change-message-visibility" rule).
CHANGE_VISIBILITY = "sqs:changemessagevisibility"

# Everything the code ever calls on each kind of table (the "grant-only-what-is-used" rule): no path reads (GetItem
# serves operators and tests only), no transaction uses a ConditionCheck item.
USED_ACTIONS: dict[str, set[str]] = {
    "IDEMPOTENCY_TABLE": {"dynamodb:PutItem", "dynamodb:UpdateItem", "dynamodb:DeleteItem"},
    "LEDGER_TABLE": {"dynamodb:PutItem", "dynamodb:UpdateItem"},
    "EFFECT_TABLE": {"dynamodb:PutItem"},
    # The outbox relay marks items sent (a conditional UpdateItem) and publishes to its destinations.
    "OUTBOX_TABLE": {"dynamodb:UpdateItem"},
    "OUTBOX_DESTINATIONS": {"sqs:SendMessage"},
    # The sweeper reads the pending index (Query on its ARN, under the table) and marks like the relay.
    "OUTBOX_TABLE (sweeper)": {"dynamodb:Query", "dynamodb:UpdateItem"},
}
EMF_LOG_LEVELS = {"TRACE", "DEBUG", "INFO"}

# What each kind of resource a function touches requires (the "permissions" rule). Keys are environment variables
# the functions read; "(source)" is the queue the event source mapping polls.
REQUIRED_ACTIONS: dict[str, set[str]] = {
    "(source)": {"sqs:ReceiveMessage", "sqs:DeleteMessage", "sqs:GetQueueAttributes"},
    "QUEUE_URL": {"sqs:ChangeMessageVisibility"},
    "DLQ_URL": {"sqs:SendMessage"},
    # Both kinds of consumer claim with a PutItem (a transactional one inside TransactWriteItems); UpdateItem and
    # DeleteItem only serve the claim path's completion, extension and release (see USED_ACTIONS).
    "IDEMPOTENCY_TABLE": {"dynamodb:PutItem"},
    "LEDGER_TABLE": {"dynamodb:PutItem", "dynamodb:UpdateItem"},
    # The table of a consumer made with `cargo xtask new-consumer --transact`: one conditional Put per intent.
    "EFFECT_TABLE": {"dynamodb:PutItem"},
    # A stream function: its event source mapping reads the stream, and sends a failed batch's details to the
    # on-failure queue, with the function's role.
    "(stream)": {"dynamodb:DescribeStream", "dynamodb:GetRecords", "dynamodb:GetShardIterator"},
    "(on-failure)": {"sqs:SendMessage"},
    "OUTBOX_TABLE": {"dynamodb:UpdateItem"},
    "OUTBOX_DESTINATIONS": {"sqs:SendMessage"},
    "OUTBOX_TABLE (sweeper)": {"dynamodb:Query", "dynamodb:UpdateItem"},
    "FAILURE_QUEUE_URL": {"sqs:SendMessage"},
}
# The environment variables the "permissions" rule demands exact actions for; "environment-grants" covers the others.
WIRED_VARS = ("QUEUE_URL", "DLQ_URL", "IDEMPOTENCY_TABLE", "LEDGER_TABLE", "EFFECT_TABLE", "OUTBOX_TABLE",
              "OUTBOX_DESTINATIONS", "FAILURE_QUEUE_URL")
# What an environment-grants message suggests granting, by service (the actions depend on the code, not the template).
GRANT_EXAMPLES = {"dynamodb": ("DynamoDB", "dynamodb:GetItem"), "sqs": ("SQS", "sqs:SendMessage")}
# The outbox sweeper: what it reads, how often it must run at least, the metric its alarm watches.
PENDING_INDEX_DEFAULT = "PendingByAge"
MAX_SWEEP_INTERVAL_SECONDS = 300
OUTBOX_AGE_METRIC = "OutboxOldestPendingAge"
# Actions on a stream ARN (GetAtt Table.StreamArn), not on a table: a stream function may hold them on its own stream.
STREAM_ACTIONS = {"dynamodb:describestream", "dynamodb:getrecords", "dynamodb:getsharditerator", "dynamodb:liststreams"}


@dataclass(frozen=True)
class Violation:
    rule: str
    resource: str
    message: str

    def __str__(self) -> str:
        return f"[{self.rule}] {self.resource}: {self.message}"


# ------------------------------------------------------------------------------------------------ helpers


def refs(value: Any) -> set[str]:
    """Logical ids (and parameters) a value refers to: Ref, Fn::GetAtt, ${X} / ${X.Attr} in Fn::Sub."""
    found: set[str] = set()
    if isinstance(value, dict):
        for key, inner in value.items():
            if key == "Ref" and isinstance(inner, str):
                found.add(inner)
            elif key == "Fn::GetAtt":
                if isinstance(inner, list) and inner and isinstance(inner[0], str):
                    found.add(inner[0])
                elif isinstance(inner, str):
                    found.add(inner.split(".", 1)[0])
            elif key == "Fn::Sub":
                text = inner[0] if isinstance(inner, list) else inner
                if isinstance(text, str):
                    found.update(m.split(".", 1)[0] for m in re.findall(r"\$\{([^!][^}]*)\}", text))
                if isinstance(inner, list) and len(inner) > 1:
                    found.update(refs(inner[1]))
            else:
                found.update(refs(inner))
    elif isinstance(value, list):
        for item in value:
            found.update(refs(item))
    return {r for r in found if not r.startswith("AWS::")}


def stream_refs(value: Any) -> set[str]:
    """Logical ids whose stream a value refers to: `Fn::GetAtt [X, StreamArn]` (or "X.StreamArn")."""
    found: set[str] = set()
    if isinstance(value, dict):
        for key, inner in value.items():
            if key == "Fn::GetAtt":
                parts = inner if isinstance(inner, list) else str(inner).split(".", 1)
                if len(parts) == 2 and parts[1] == "StreamArn" and isinstance(parts[0], str):
                    found.add(parts[0])
            else:
                found.update(stream_refs(inner))
    elif isinstance(value, list):
        for item in value:
            found.update(stream_refs(item))
    return found


def grants_visibility(action: str) -> bool:
    """Whether an IAM action (case-insensitive, wildcards allowed: `sqs:Change*`, `*`) allows ChangeMessageVisibility."""
    return fnmatch.fnmatchcase(CHANGE_VISIBILITY, action.lower())


def as_list(value: Any) -> list[Any]:
    if value is None:
        return []
    return value if isinstance(value, list) else [value]


def to_int(value: Any) -> int | None:
    if isinstance(value, bool):
        return None
    if isinstance(value, (int, float)):
        return int(value)
    if isinstance(value, str):
        try:
            return int(float(value))
        except ValueError:
            return None
    return None


def truthy(value: Any) -> bool:
    return value is True or (isinstance(value, str) and value.lower() == "true")


class Template:
    """Read-only view of a parsed template (long-form intrinsics), with the lookups the rules share."""

    def __init__(self, doc: dict[str, Any]):
        self.doc = doc
        self.resources: dict[str, dict[str, Any]] = doc.get("Resources", {}) or {}
        self.parameters: dict[str, dict[str, Any]] = doc.get("Parameters", {}) or {}
        self.globals: dict[str, Any] = ((doc.get("Globals") or {}).get("Function")) or {}

    def of_type(self, kind: str) -> dict[str, dict[str, Any]]:
        return {k: v for k, v in self.resources.items() if v.get("Type") == kind}

    def props(self, logical_id: str) -> dict[str, Any]:
        return self.resources.get(logical_id, {}).get("Properties", {}) or {}

    def is_type(self, logical_id: str, kind: str) -> bool:
        return self.resources.get(logical_id, {}).get("Type") == kind

    def function_props(self, logical_id: str) -> dict[str, Any]:
        """A SAM function's properties with Globals.Function underneath (shallow)."""
        return {**self.globals, **self.props(logical_id)}

    def bound(self, value: Any, which: str) -> tuple[int | None, str]:
        """The value at one bound ("max", "min" or "default"): a literal is its own bound; a Ref to a parameter gives
        its MaxValue / MinValue / Default (or the extreme of AllowedValues). Returns (value or None, description)."""
        literal = to_int(value)
        if literal is not None:
            return literal, f"{literal}"
        if isinstance(value, dict) and set(value) == {"Ref"} and value["Ref"] in self.parameters:
            name = value["Ref"]
            param = self.parameters[name]
            allowed = [to_int(v) for v in param.get("AllowedValues", [])]
            allowed = [v for v in allowed if v is not None]
            if which == "default":
                got = to_int(param.get("Default"))
                return got, f"parameter {name} Default {got}"
            key = "MaxValue" if which == "max" else "MinValue"
            got = to_int(param.get(key))
            if got is None and allowed:
                got = max(allowed) if which == "max" else min(allowed)
                return got, f"parameter {name} AllowedValues {which} {got}"
            return got, f"parameter {name} {key} {got}"
        return None, f"unresolvable value {value!r}"

    def default(self, value: Any) -> Any:
        """A string-valued setting at its default (literal, or the Default of the parameter it Refs)."""
        if isinstance(value, dict) and set(value) == {"Ref"} and value["Ref"] in self.parameters:
            return self.parameters[value["Ref"]].get("Default")
        return value


@dataclass
class Consumer:
    """A function and what it is wired to, as found in the template."""

    function: str
    props: dict[str, Any]
    event_name: str | None = None
    event: dict[str, Any] | None = None  # the SQS event's Properties
    queue: str | None = None  # the consumed queue's logical id
    dlq: str | None = None  # that queue's dead-letter queue
    role: str | None = None  # logical id of its AWS::IAM::Role, if any
    stream_table: str | None = None  # a stream function: the table whose stream its DynamoDB event reads
    schedule: dict[str, Any] | None = None  # a scheduled function (the outbox sweeper): its Schedule event's Properties
    on_failure: str | None = None  # a stream function: its mapping's on-failure queue


def function_crate_binaries(root: Path = ROOT) -> dict[str, str]:
    """Binary name -> crate directory, for every crate under functions/ (from [[bin]], else the package name)."""
    binaries: dict[str, str] = {}
    for manifest in sorted((root / "functions").glob("*/Cargo.toml")):
        cargo = tomllib.loads(manifest.read_text(encoding="utf-8"))
        bins = [b["name"] for b in cargo.get("bin", []) if "name" in b] or [cargo["package"]["name"]]
        for name in bins:
            binaries[name] = str(manifest.parent.relative_to(root))
    return binaries


# ------------------------------------------------------------------------------------------------ the checker


def check(doc: dict[str, Any], *, crate_binaries: dict[str, str] | None = None) -> list[Violation]:
    """Every violation of RULES in the parsed SAM template `doc` (its local nested applications already inlined by
    nested.flatten)."""
    t = Template(doc)
    out: list[Violation] = []

    def fail(rule: str, resource: str, message: str) -> None:
        assert rule in RULES, rule
        out.append(Violation(rule, resource, message))

    functions = t.of_type("AWS::Serverless::Function")
    queues = t.of_type("AWS::SQS::Queue")
    tables = t.of_type("AWS::DynamoDB::Table")
    alarms = t.of_type("AWS::CloudWatch::Alarm")

    # Queue -> its DLQ, from RedrivePolicy.
    dlq_of: dict[str, str] = {}
    for q in queues:
        target = refs((t.props(q).get("RedrivePolicy") or {}).get("deadLetterTargetArn"))
        target = {x for x in target if x in queues}
        if len(target) == 1:
            dlq_of[q] = target.pop()
    dlqs = set(dlq_of.values())

    consumers = [_consumer(t, f, queues, dlq_of, fail) for f in functions]
    consumed = {c.queue for c in consumers if c.queue}
    on_failure = {c.on_failure for c in consumers if c.on_failure}
    # Raw event source mappings (outside SAM functions) count as consumers of their queue too.
    raw_mappings = t.of_type("AWS::Lambda::EventSourceMapping")
    for m, res in raw_mappings.items():
        consumed.update(x for x in refs(res.get("Properties", {}).get("EventSourceArn")) if x in queues)
        failure_queue = _on_failure_queue(res.get("Properties", {}), queues)
        if failure_queue is not None:
            on_failure.add(failure_queue)

    _check_crates(t, functions, crate_binaries if crate_binaries is not None else function_crate_binaries(), fail)
    for c in consumers:
        _check_function(t, c, fail)
        if c.queue:
            _check_mapping(t, c, c.event or {}, f"{c.function}.Events.{c.event_name}", queues, fail)
            _check_wiring(t, c, queues, fail)
            _check_window(t, c, fail)
        if c.stream_table:
            _check_stream_mapping(t, c, c.event or {}, f"{c.function}.Events.{c.event_name}", queues, fail)
        _check_privileges(t, c, queues, tables, fail)
    for m, res in raw_mappings.items():
        props = res.get("Properties", {})
        streams = {x for x in stream_refs(props.get("EventSourceArn")) if x in tables}
        if streams:
            fake = Consumer(function=m, props={}, stream_table=streams.pop(), on_failure=_on_failure_queue(props, queues))
            _check_stream_mapping(t, fake, props, m, queues, fail)
            continue
        queue = next((x for x in refs(props.get("EventSourceArn")) if x in queues), None)
        fake = Consumer(function=m, props={}, queue=queue)
        _check_mapping(t, fake, props, m, queues, fail)

    _check_queues(t, queues, consumed, dlq_of, dlqs, fail, on_failure=on_failure)
    _check_tables(t, tables, consumers, fail)
    _check_alarms(t, alarms, consumed, dlqs | on_failure, fail)
    for c in consumers:
        _check_function_alarms(t, alarms, c, fail)
    dashboards = {d: _dashboard_metrics(t, d, fail) for d in t.of_type("AWS::CloudWatch::Dashboard")}
    for c in consumers:
        if c.queue:
            _check_dashboard(t, c, dashboards, fail)
    _check_outbox_sweepers(t, consumers, tables, alarms, fail)
    _check_sqsafe_metric_names(t, alarms, dashboards, fail)
    _check_policy_documents(t, fail)
    for rid, resource in doc.get("Resources", {}).items():
        nested, where = location(resource)
        if nested:
            fail("nested-application", rid, not_checked(rid, where))
    return out


def _consumer(t: Template, f: str, queues: dict, dlq_of: dict, fail) -> Consumer:
    props = t.function_props(f)
    c = Consumer(function=f, props=props)
    sqs_events = {
        name: ev for name, ev in (props.get("Events") or {}).items() if isinstance(ev, dict) and ev.get("Type") == "SQS"
    }
    stream_events = {
        name: ev
        for name, ev in (props.get("Events") or {}).items()
        if isinstance(ev, dict) and ev.get("Type") == "DynamoDB"
    }
    schedule_events = {
        name: ev
        for name, ev in (props.get("Events") or {}).items()
        if isinstance(ev, dict) and ev.get("Type") in ("Schedule", "ScheduleV2")
    }
    if not sqs_events and not stream_events and len(schedule_events) == 1 and len(props.get("Events") or {}) == 1:
        # A scheduled function (the outbox sweeper): its one event is a schedule.
        c.event_name, ev = next(iter(schedule_events.items()))
        c.schedule = ev.get("Properties") or {}
    elif not sqs_events and len(stream_events) == 1:
        # A stream function (the outbox relay): its one event is a DynamoDB stream.
        c.event_name, ev = next(iter(stream_events.items()))
        c.event = ev.get("Properties") or {}
        targets = [x for x in stream_refs(c.event.get("Stream")) if t.is_type(x, "AWS::DynamoDB::Table")]
        if len(targets) != 1:
            fail("sqs-event", f, f"event {c.event_name} does not name the stream of a table of this template (!GetAtt Table.StreamArn): {c.event.get('Stream')!r}")
        else:
            c.stream_table = targets[0]
        c.on_failure = _on_failure_queue(c.event, queues)
    elif len(sqs_events) != 1 or stream_events:
        fail("sqs-event", f, f"has {len(sqs_events)} SQS, {len(stream_events)} DynamoDB and {len(schedule_events)} schedule events; an sqsafe function has exactly one event source")
    if sqs_events:
        c.event_name, ev = next(iter(sqs_events.items()))
        c.event = ev.get("Properties") or {}
        targets = [x for x in refs(c.event.get("Queue")) if x in queues]
        if len(targets) != 1:
            fail("sqs-event", f, f"event {c.event_name} does not name a queue of this template: {c.event.get('Queue')!r}")
        else:
            c.queue = targets[0]
            c.dlq = dlq_of.get(c.queue)
    role = props.get("Role")
    if role is not None:
        role_refs = [x for x in refs(role) if t.is_type(x, "AWS::IAM::Role")]
        c.role = role_refs[0] if len(role_refs) == 1 else None
    return c


def _on_failure_queue(mapping: dict, queues: dict) -> str | None:
    """The queue of the template a stream mapping's DestinationConfig.OnFailure.Destination names, if any."""
    destination = ((mapping.get("DestinationConfig") or {}).get("OnFailure") or {}).get("Destination")
    return next((x for x in sorted(refs(destination)) if x in queues), None)


def _check_stream_mapping(t: Template, c: Consumer, ev: dict, where: str, queues: dict, fail) -> None:
    """stream-mapping: what makes a stream function's mapping survive a poison record without losing events."""
    table = c.stream_table or ""
    spec = t.props(table).get("StreamSpecification") or {}
    if spec.get("StreamViewType") not in ("NEW_IMAGE", "NEW_AND_OLD_IMAGES"):
        fail("stream-mapping", table, f"StreamSpecification.StreamViewType is {spec.get('StreamViewType')!r}: the relay reads each INSERT's NewImage")
    if ev.get("StartingPosition") != "TRIM_HORIZON":
        fail("stream-mapping", where, f"StartingPosition is {ev.get('StartingPosition')!r}, not TRIM_HORIZON: records written before the mapping reads would be skipped")
    if "ReportBatchItemFailures" not in as_list(ev.get("FunctionResponseTypes")):
        fail("stream-mapping", where, "FunctionResponseTypes lacks ReportBatchItemFailures: a failed record would replay its whole batch")
    if not truthy(ev.get("BisectBatchOnFunctionError")):
        fail("stream-mapping", where, "BisectBatchOnFunctionError is not true: a record that crashes the function is never isolated")
    retries = ev.get("MaximumRetryAttempts", -1)
    lo, lo_d = t.bound(retries, "min")
    hi, hi_d = t.bound(retries, "max")
    if lo != -1 or hi != -1:
        fail("stream-mapping", where, f"MaximumRetryAttempts must be -1 (retry while the stream holds the record): {lo_d}, {hi_d}; "
             "a mapping that gives up on a retryable failure leaves its event for the sweeper alone")
    env = (c.props.get("Environment") or {}).get("Variables") or {}
    if c.on_failure is not None and refs(env.get("FAILURE_QUEUE_URL")) != {c.on_failure}:
        fail("stream-mapping", c.function, f"FAILURE_QUEUE_URL is {env.get('FAILURE_QUEUE_URL')!r}, not its on-failure queue "
             f"{c.on_failure}: a permanent failure's details would go elsewhere, or the relay would refuse to start")
    if c.on_failure is None:
        fail("stream-mapping", where, "no DestinationConfig.OnFailure.Destination naming a queue of this template: a record given up on would leave no trace")
    elif truthy(t.props(c.on_failure).get("FifoQueue")):
        fail("stream-mapping", c.on_failure, "an on-failure destination must be a standard queue")


def _check_crates(t: Template, functions: dict, crate_binaries: dict[str, str], fail) -> None:
    deployed: dict[str, list[str]] = {}
    for f in functions:
        binary = ((t.resources[f].get("Metadata") or {}).get("BuildProperties") or {}).get("Binary")
        if binary:
            deployed.setdefault(binary, []).append(f)
    for binary, crate in sorted(crate_binaries.items()):
        if binary not in deployed:
            fail("function-crates", crate, f"binary {binary!r} has no AWS::Serverless::Function (BuildProperties.Binary)")
        elif len(deployed[binary]) > 1:
            fail("function-crates", crate, f"binary {binary!r} is deployed by {len(deployed[binary])} functions: {deployed[binary]}")
    for binary, fs in sorted(deployed.items()):
        if binary not in crate_binaries:
            fail("function-crates", fs[0], f"builds binary {binary!r}, which no crate under functions/ defines")


def _check_function(t: Template, c: Consumer, fail) -> None:
    f, p = c.function, c.props
    runtime = t.default(p.get("Runtime"))
    if runtime != "provided.al2023":
        fail("runtime", f, f"Runtime is {runtime!r}, not provided.al2023")

    archs = [t.default(a) for a in as_list(p.get("Architectures"))]
    if archs != ["arm64"]:
        fail("architecture", f, f"Architectures resolve to {archs or ['x86_64 (the default)']}, not [arm64]")

    meta = t.resources[f].get("Metadata") or {}
    if meta.get("BuildMethod") != "rust-cargolambda":
        fail("build-method", f, f"Metadata.BuildMethod is {meta.get('BuildMethod')!r}, not rust-cargolambda")
    if not (meta.get("BuildProperties") or {}).get("Binary"):
        fail("build-method", f, "Metadata.BuildProperties.Binary is missing (which binary of the workspace to build)")
    if p.get("Handler") != "bootstrap":
        fail("build-method", f, f"Handler is {p.get('Handler')!r}, not bootstrap")
    if p.get("PackageType", "Zip") != "Zip" or not p.get("CodeUri"):
        fail("build-method", f, "needs a zip package with CodeUri (the cargo workspace)")

    logging = p.get("LoggingConfig") or {}
    if logging.get("LogFormat") != "JSON":
        fail("log-group", f, f"LoggingConfig.LogFormat is {logging.get('LogFormat')!r}, not JSON")
    level = logging.get("ApplicationLogLevel", "INFO")
    if isinstance(level, dict) and set(level) == {"Ref"} and level["Ref"] in t.parameters:
        param = t.parameters[level["Ref"]]
        allowed = set(as_list(param.get("AllowedValues"))) or {"(any value)"}
    else:
        allowed = {level}
    if not allowed <= EMF_LOG_LEVELS:
        fail("emf-log-level", f, f"ApplicationLogLevel can be {sorted(allowed - EMF_LOG_LEVELS)}: every EMF metric line would be dropped")
    groups = [x for x in refs(logging.get("LogGroup")) if t.is_type(x, "AWS::Logs::LogGroup")]
    if not groups:
        # The default group /aws/lambda/<function name>, created by the template so that it has a retention.
        groups = [
            g
            for g in t.of_type("AWS::Logs::LogGroup")
            if f in refs(t.props(g).get("LogGroupName")) and "/aws/lambda/" in str(t.props(g).get("LogGroupName"))
        ]
    if not groups:
        fail("log-group", f, "no log group of the template (LoggingConfig.LogGroup, or one named /aws/lambda/${Function})")
    for g in groups:
        if t.props(g).get("RetentionInDays") is None:
            fail("log-group", g, f"log group of {f} has no RetentionInDays (logs would be kept forever)")


def _check_mapping(t: Template, c: Consumer, ev: dict, where: str, queues: dict, fail) -> None:
    if "ReportBatchItemFailures" not in as_list(ev.get("FunctionResponseTypes")):
        fail("report-batch-item-failures", where, "FunctionResponseTypes lacks ReportBatchItemFailures: one failed record would redeliver the whole batch")

    conc = (ev.get("ScalingConfig") or {}).get("MaximumConcurrency")
    if conc is None:
        fail("maximum-concurrency", where, "ScalingConfig.MaximumConcurrency is not set (unbounded scaling)")
    else:
        lo, lo_d = t.bound(conc, "min")
        hi, hi_d = t.bound(conc, "max")
        if lo is None or hi is None:
            fail("maximum-concurrency", where, f"MaximumConcurrency must be bounded: {lo_d}, {hi_d}")
        elif lo < 2 or hi > 1000:
            fail("maximum-concurrency", where, f"MaximumConcurrency range {lo}..{hi} is outside 2..1000 ({lo_d}, {hi_d})")

    if c.queue and truthy(t.props(c.queue).get("FifoQueue")):
        batch, batch_d = t.bound(ev.get("BatchSize", 10), "max")
        if batch is None or batch > 1:
            fail("fifo-mapping", where, f"BatchSize can reach {batch} ({batch_d}); on a FIFO queue it must be 1, or a "
                 "record held back behind a failing one of its group spends receives without running")
        if "MaximumBatchingWindowInSeconds" in ev:
            fail("fifo-mapping", where, "MaximumBatchingWindowInSeconds is set; FIFO queues do not support a batching window")


def _check_wiring(t: Template, c: Consumer, queues: dict, fail) -> None:
    """visibility-timeout, dlq-url, queue-url, max-attempts: the numbers and names that tie a function to its queue."""
    f, q = c.function, c.queue
    qp = t.props(q)
    ev = c.event or {}

    timeout, timeout_d = t.bound(c.props.get("Timeout", SAM_DEFAULT_TIMEOUT), "max")
    window, window_d = t.bound(ev.get("MaximumBatchingWindowInSeconds", 0), "max")
    visibility, visibility_d = t.bound(qp.get("VisibilityTimeout", SQS_DEFAULTS["VisibilityTimeout"]), "min")
    if None in (timeout, window, visibility):
        fail("visibility-timeout", q, f"cannot bound the numbers: timeout {timeout_d}, window {window_d}, visibility {visibility_d}")
    else:
        need = VISIBILITY_FACTOR * timeout + window
        if visibility < need:
            fail(
                "visibility-timeout",
                q,
                f"VisibilityTimeout {visibility} < {VISIBILITY_FACTOR} x {f} Timeout {timeout} ({timeout_d}) + batching window "
                f"{window} ({window_d}) = {need}",
            )

    env = (c.props.get("Environment") or {}).get("Variables") or {}
    if c.dlq is not None:
        if "DLQ_URL" not in env:
            fail("dlq-url", f, f"DLQ_URL is not set (sqsafe sends poison messages to {c.dlq} itself)")
        elif refs(env["DLQ_URL"]) != {c.dlq}:
            fail("dlq-url", f, f"DLQ_URL refers to {sorted(refs(env['DLQ_URL']))}, not {c.dlq}, the DLQ of {q}")

    if "QUEUE_URL" not in env:
        fail("queue-url", f, f"QUEUE_URL is not set (sqsafe changes the visibility of {q}'s messages itself)")
    elif refs(env["QUEUE_URL"]) != {q}:
        fail("queue-url", f, f"QUEUE_URL refers to {sorted(refs(env['QUEUE_URL']))}, not {q}, the queue it consumes")

    receive = to_int((qp.get("RedrivePolicy") or {}).get("maxReceiveCount"))
    if receive is not None:
        attempts, attempts_d = t.bound(env.get("MAX_ATTEMPTS", CODE_DEFAULT_MAX_ATTEMPTS), "max")
        if attempts is None:
            fail("max-attempts", f, f"MAX_ATTEMPTS is unbounded ({attempts_d}); give its parameter a MaxValue")
        elif attempts > receive:
            fail(
                "max-attempts",
                f,
                f"MAX_ATTEMPTS can be {attempts} ({attempts_d}) > {q} maxReceiveCount {receive}: SQS would dead-letter "
                f"the message without the context sqsafe adds",
            )


def _check_window(t: Template, c: Consumer, fail) -> None:
    f = c.function
    env = (c.props.get("Environment") or {}).get("Variables") or {}
    if "IDEMPOTENCY_WINDOW_DAYS" not in env:
        fail("idempotency-window", f, "IDEMPOTENCY_WINDOW_DAYS is not set: the window must be explicit to be checked")
        return
    days, days_d = t.bound(env["IDEMPOTENCY_WINDOW_DAYS"], "min")
    if days is None:
        fail("idempotency-window", f, f"IDEMPOTENCY_WINDOW_DAYS has no lower bound ({days_d}); give its parameter a MinValue")
        return
    if c.dlq is None:
        return  # dlq-required reports it
    source_ret, _ = t.bound(t.props(c.queue).get("MessageRetentionPeriod", SQS_DEFAULTS["MessageRetentionPeriod"]), "max")
    dlq_ret, _ = t.bound(t.props(c.dlq).get("MessageRetentionPeriod", SQS_DEFAULTS["MessageRetentionPeriod"]), "max")
    if source_ret is None or dlq_ret is None:
        fail("idempotency-window", f, "queue retention periods must be literals to check the window")
        return
    need = source_ret + dlq_ret + REDRIVE_MARGIN_SECONDS
    if days * 86_400 < need:
        fail(
            "idempotency-window",
            f,
            f"IDEMPOTENCY_WINDOW_DAYS can be {days} ({days_d}) = {days * 86_400} s < {c.queue} retention {source_ret} + "
            f"{c.dlq} retention {dlq_ret} + redrive margin {REDRIVE_MARGIN_SECONDS} = {need} s "
            f"(>= {-(-need // 86_400)} days): a redriven message would be applied again",
        )


def _statements(t: Template, c: Consumer, fail) -> list[dict[str, Any]] | None:
    """The statements of a function's role, or None when they cannot all be seen (a violation is reported)."""
    f, p = c.function, c.props
    if p.get("Role") is not None:
        if c.role is None:
            fail("least-privilege", f, f"Role {p.get('Role')!r} is not an AWS::IAM::Role of this template; its policies cannot be checked")
            return None
        rp = t.props(c.role)
        if rp.get("ManagedPolicyArns"):
            fail("least-privilege", c.role, f"ManagedPolicyArns {rp['ManagedPolicyArns']!r}: managed policies cannot be checked; write the statements inline")
        statements = []
        for policy in as_list(rp.get("Policies")):
            statements += as_list((policy.get("PolicyDocument") or {}).get("Statement"))
        for kind in ("AWS::IAM::Policy", "AWS::IAM::ManagedPolicy", "AWS::IAM::RolePolicy"):
            for pid, res in t.of_type(kind).items():
                pp = res.get("Properties", {})
                if c.role in refs(pp.get("Roles")) or c.role in refs(pp.get("RoleName")):
                    statements += as_list((pp.get("PolicyDocument") or {}).get("Statement"))
        return statements
    # SAM generates the role. Its SQS event attaches the managed AWSLambdaSQSQueueExecutionRole (sqs:ReceiveMessage,
    # DeleteMessage, GetQueueAttributes on Resource "*").
    if c.queue is not None:
        fail("least-privilege", f, "no Role: SAM's SQS event would attach AWSLambdaSQSQueueExecutionRole (Resource '*'); give the function its own AWS::IAM::Role")
    if c.stream_table is not None:
        fail("least-privilege", f, "no Role: SAM's DynamoDB event would attach AWSLambdaDynamoDBExecutionRole (Resource '*'); give the function its own AWS::IAM::Role")
    statements = []
    for policy in as_list(p.get("Policies")):
        if isinstance(policy, dict) and "Statement" in policy:
            statements += as_list(policy["Statement"])
        else:
            fail("least-privilege", f, f"policy {policy!r} is a managed policy or SAM policy template; write the statements out")
    return statements


def _check_leading_keys(t: Template, c: Consumer, statements: list, fail) -> None:
    """idempotency-leading-keys: item actions on the idempotency table only on the consumer's own key prefix."""
    env = (c.props.get("Environment") or {}).get("Variables") or {}
    table = next(iter(refs(env.get("IDEMPOTENCY_TABLE"))), None) if "IDEMPOTENCY_TABLE" in env else None
    if table is None:
        return
    binary = ((t.resources.get(c.function) or {}).get("Metadata") or {}).get("BuildProperties", {}).get("Binary")
    want = [f"{binary}#*"]
    owner = c.role or c.function
    for st in statements:
        if not isinstance(st, dict) or st.get("Effect") != "Allow":
            continue
        actions = [a for a in as_list(st.get("Action")) if isinstance(a, str) and a.lower().startswith("dynamodb:")]
        if not actions or not any(table in refs(r) for r in as_list(st.get("Resource")) if not isinstance(r, str)):
            continue
        condition = (st.get("Condition") or {}).get("ForAllValues:StringLike") or {}
        got = as_list(condition.get("dynamodb:LeadingKeys"))
        if got != want:
            fail(
                "idempotency-leading-keys",
                owner,
                f"statement {st.get('Sid', '')!r} grants {actions} on {table} for keys {got or 'of any consumer'}, "
                f"not only {want} (add Condition: ForAllValues:StringLike: dynamodb:LeadingKeys: {want})",
            )


def _message_size(t: Template, queue: str) -> tuple[Any, int | None]:
    """A queue's MaximumMessageSize as written, and its value (a parameter's default) or None."""
    raw = t.props(queue).get("MaximumMessageSize")
    if isinstance(raw, dict) and "Ref" in raw:
        return raw, to_int((t.parameters.get(raw["Ref"]) or {}).get("Default"))
    return raw, to_int(raw)


def _check_message_sizes(t: Template, c: Consumer, queues: dict, fail) -> None:
    """message-size, for one consumer: its queue and DLQ, and the DLQ_MAX_MESSAGE_SIZE it fits its copies to."""
    if c.queue is None or c.dlq is None:
        return
    source_raw, source = _message_size(t, c.queue)
    dlq_raw, dlq = _message_size(t, c.dlq)
    for q, raw in ((c.queue, source_raw), (c.dlq, dlq_raw)):
        if raw is None:
            fail("message-size", q, "no MaximumMessageSize: say the largest message it takes (SQS: up to 1048576)")
    if source is not None and dlq is not None and dlq < source:
        fail("message-size", c.dlq, f"MaximumMessageSize {dlq} is smaller than its source queue {c.queue}'s {source}: a dead letter would not fit")
    env = (c.props.get("Environment") or {}).get("Variables") or {}
    if dlq_raw is not None and env.get("DLQ_MAX_MESSAGE_SIZE") != dlq_raw:
        fail("message-size", c.function, f"DLQ_MAX_MESSAGE_SIZE is {env.get('DLQ_MAX_MESSAGE_SIZE')!r}, not its DLQ {c.dlq}'s MaximumMessageSize {dlq_raw!r}: its dead-letter copies would be fitted to another size")


def _check_privileges(t: Template, c: Consumer, queues: dict, tables: dict, fail) -> None:
    statements = _statements(t, c, fail)
    if statements is None:
        return
    _check_leading_keys(t, c, statements, fail)
    _check_message_sizes(t, c, queues, fail)
    f = c.function
    owner = c.role or f
    env = (c.props.get("Environment") or {}).get("Variables") or {}
    # Another stack's tables and queues, named by the String parameters its environment uses: reached through those
    # (a Number or a list cannot name one).
    elsewhere = {x for v in env.values() for x in refs(v)
                 if (t.parameters.get(x) or {}).get("Type") in ("String", "AWS::SSM::Parameter::Value<String>")}
    own_tables = {x for v in env.values() for x in refs(v) if x in tables} | elsewhere
    # Its source queue and DLQ, its on-failure queue, and the queues its environment names (where it publishes).
    own_queues = {x for x in (c.queue, c.dlq, c.on_failure) if x} | {x for v in env.values() for x in refs(v) if x in queues} | elsewhere
    granted_stream: dict[str, set[str]] = {}  # table -> actions allowed on its stream

    granted: dict[str, set[str]] = {}  # logical id -> actions allowed on it
    visibility_elsewhere: set[str] = set()  # what ChangeMessageVisibility reaches besides the source queue
    for st in statements:
        if not isinstance(st, dict) or st.get("Effect") != "Allow":
            continue
        if "NotAction" in st or "NotResource" in st:
            fail("least-privilege", owner, f"statement {st.get('Sid', '')!r} uses NotAction/NotResource")
            continue
        actions = [a for a in as_list(st.get("Action")) if isinstance(a, str)]
        resources = as_list(st.get("Resource"))
        for action in actions:
            service = action.split(":", 1)[0].lower()
            if grants_visibility(action):
                for resource in resources:
                    targets = refs(resource) if not isinstance(resource, str) else set()
                    if isinstance(resource, str) or not targets:
                        visibility_elsewhere.add(repr(resource))
                    visibility_elsewhere.update(x for x in targets if x != c.queue)
            if action == "*":
                fail("least-privilege", owner, f"statement {st.get('Sid', '')!r} allows Action '*'")
                continue
            if service not in DATA_PLANE_SERVICES:
                continue
            if "*" in action or "?" in action:
                fail("least-privilege", owner, f"wildcard action {action!r} on the {service} data plane")
            if action.lower() in STREAM_ACTIONS:
                for resource in resources:
                    streams = stream_refs(resource) if not isinstance(resource, str) else set()
                    if not c.stream_table or streams != {c.stream_table} or refs(resource) != streams:
                        fail("least-privilege", owner, f"{action} reaches {resource!r}, not only {f}'s own stream ({c.stream_table or 'it reads none'})")
                    for x in streams:
                        granted_stream.setdefault(x, set()).add(action)
                continue
            allowed = own_queues if service == "sqs" else own_tables
            for resource in resources:
                if not isinstance(resource, str) and stream_refs(resource):
                    fail("least-privilege", owner, f"{action} on a stream ARN {resource!r}: item and queue actions name the table or queue itself")
                    continue
                if isinstance(resource, str):
                    what = "Resource '*'" if resource == "*" else f"literal resource {resource!r}"
                    fail("least-privilege", owner, f"{action} on {what}: name the function's own {service} resources with Ref/GetAtt")
                    continue
                targets = refs(resource)
                others = sorted(targets - allowed)
                if others or not targets:
                    fail("least-privilege", owner, f"{action} reaches {others or resource!r}, not only {f}'s own {sorted(allowed)}")
                if isinstance(resource, dict) and "Fn::Sub" in resource and "*" in str(resource["Fn::Sub"]):
                    fail("least-privilege", owner, f"{action} on a wildcard ARN {resource['Fn::Sub']!r}")
                for x in targets:
                    granted.setdefault(x, set()).add(action)

    # change-message-visibility: on the source queue, and nowhere else; nowhere for a function without one.
    if not c.queue and visibility_elsewhere:
        fail("change-message-visibility", owner, f"sqs:ChangeMessageVisibility reaches {sorted(visibility_elsewhere)}: {f} consumes no queue")
    if c.queue:
        if not any(grants_visibility(a) for a in granted.get(c.queue, set())):
            fail("change-message-visibility", owner, f"{f} needs sqs:ChangeMessageVisibility on its source queue {c.queue}")
        if visibility_elsewhere:
            fail(
                "change-message-visibility",
                owner,
                f"sqs:ChangeMessageVisibility reaches {sorted(visibility_elsewhere)}: only {f}'s source queue {c.queue} "
                f"may have its messages' visibility changed",
            )

    # permissions: what the function needs, on exactly its resources.
    needs: list[tuple[str, str]] = []
    if c.queue:
        needs.append(("(source)", c.queue))
    if c.stream_table:
        needs.append(("(stream)", c.stream_table))
    if c.on_failure:
        needs.append(("(on-failure)", c.on_failure))
    for var in WIRED_VARS:
        for x in refs(env.get(var)):
            if x in queues or x in tables:
                needs.append((var, x))
    if c.schedule is not None:
        needs = [("OUTBOX_TABLE (sweeper)" if var == "OUTBOX_TABLE" else var, x) for var, x in needs]
    for var, x in needs:
        have = granted_stream.get(x, set()) if var == "(stream)" else granted.get(x, set())
        missing = sorted(REQUIRED_ACTIONS[var] - have)
        if missing:
            fail("permissions", owner, f"{f} needs {missing} on {x} ({var})")
        if var in USED_ACTIONS:
            unused = sorted(a for a in granted.get(x, set()) if a.lower() not in {u.lower() for u in USED_ACTIONS[var]})
            if unused:
                fail("grant-only-what-is-used", owner, f"{f} is granted {unused} on {x} ({var}), which its code never calls")

    _check_environment_grants(c, env, granted, granted_stream, queues, tables, fail)


def _check_environment_grants(c: Consumer, env: dict, granted: dict, granted_stream: dict, queues: dict, tables: dict,
                              fail) -> None:
    """environment-grants: a table or queue a function's environment names, and its role grants nothing on, is one its
    code calls and would be refused (a hand-added table without its statement)."""
    f = c.function
    owner = c.role or f
    for var, value in env.items():
        if var in WIRED_VARS:
            continue
        streams = stream_refs(value)
        for x in sorted(refs(value)):
            service = "dynamodb" if x in tables else "sqs" if x in queues else None
            if service is None:
                continue  # a parameter or a literal: another stack's resource, not one of this template
            have = granted.get(x, set()) | (granted_stream.get(x, set()) if x in streams else set())
            if not any(a.split(":", 1)[0].lower() == service for a in have):
                kind, example = GRANT_EXAMPLES[service]
                grants = "grants" if c.role else "its Policies grant"
                fail("environment-grants", owner, f"{grants} nothing on {x}, which {f}'s {var} names: add a "
                     f"statement allowing the {kind} actions its code calls (for example {example}) on !GetAtt {x}.Arn")


def _check_queues(t: Template, queues: dict, consumed: set, dlq_of: dict, dlqs: set, fail, *, on_failure: set = frozenset()) -> None:
    for q in queues:
        qp = t.props(q)
        if not (truthy(qp.get("SqsManagedSseEnabled")) or qp.get("KmsMasterKeyId")):
            fail("sse", q, "neither SqsManagedSseEnabled: true nor KmsMasterKeyId")
        if q not in consumed and q not in dlqs and q not in on_failure:
            fail("orphan-queue", q, "is neither consumed by a function, nor a dead-letter queue, nor a stream mapping's on-failure queue")
    # A stream mapping's on-failure queue: Lambda sends to it; it keeps what it holds as long as a DLQ, and no queue
    # may dead-letter into it.
    for q in sorted(on_failure - dlqs):
        qp = t.props(q)
        if to_int(qp.get("MessageRetentionPeriod")) != DLQ_RETENTION_SECONDS:
            fail("dlq-retention", q, f"MessageRetentionPeriod is {qp.get('MessageRetentionPeriod')!r}, needs {DLQ_RETENTION_SECONDS} (14 days)")
        rap = qp.get("RedriveAllowPolicy")
        if not isinstance(rap, dict) or rap.get("redrivePermission") != "denyAll":
            fail("redrive-allow-policy", q, f"RedriveAllowPolicy is {rap!r}: an on-failure queue takes no queue's dead letters (denyAll)")
    for q in sorted(consumed):
        if q not in dlq_of:
            fail("dlq-required", q, "consumed queue has no RedrivePolicy to a queue of this template")
    for q, d in dlq_of.items():
        rp = t.props(q).get("RedrivePolicy") or {}
        receive = to_int(rp.get("maxReceiveCount"))
        if receive is None or receive < MIN_MAX_RECEIVE_COUNT:
            fail("max-receive-count", q, f"maxReceiveCount is {rp.get('maxReceiveCount')!r}, needs >= {MIN_MAX_RECEIVE_COUNT}")
        if truthy(t.props(q).get("FifoQueue")) != truthy(t.props(d).get("FifoQueue")):
            fail("dlq-fifo", d, f"FifoQueue {t.props(d).get('FifoQueue')!r} does not match its source {q} ({t.props(q).get('FifoQueue')!r})")
    for d in sorted(dlqs):
        dp = t.props(d)
        retention = to_int(dp.get("MessageRetentionPeriod"))
        if retention != DLQ_RETENTION_SECONDS:
            fail("dlq-retention", d, f"MessageRetentionPeriod is {dp.get('MessageRetentionPeriod')!r}, needs {DLQ_RETENTION_SECONDS} (14 days)")
        rap = dp.get("RedriveAllowPolicy")
        sources = sorted(q for q, x in dlq_of.items() if x == d)
        if not isinstance(rap, dict):
            fail("redrive-allow-policy", d, "no RedriveAllowPolicy: any queue of the account could use it as its DLQ")
            continue
        if rap.get("redrivePermission") != "byQueue":
            fail("redrive-allow-policy", d, f"redrivePermission is {rap.get('redrivePermission')!r}, not byQueue")
            continue
        named = " ".join(str(a) for a in as_list(rap.get("sourceQueueArns")))
        for q in sources:
            name = t.props(q).get("QueueName")
            name_text = str(name.get("Fn::Sub") if isinstance(name, dict) else name)
            if q not in refs(rap.get("sourceQueueArns")) and (not name or name_text not in named):
                fail("redrive-allow-policy", d, f"sourceQueueArns {rap.get('sourceQueueArns')!r} does not name its source {q}")


def _check_tables(t: Template, tables: dict, consumers: list[Consumer], fail) -> None:
    for tb in tables:
        tp = t.props(tb)
        if not truthy((tp.get("SSESpecification") or {}).get("SSEEnabled")):
            fail("sse", tb, "SSESpecification.SSEEnabled is not true")
        if not truthy((tp.get("PointInTimeRecoverySpecification") or {}).get("PointInTimeRecoveryEnabled")):
            fail("pitr", tb, "PointInTimeRecoverySpecification.PointInTimeRecoveryEnabled is not true")
        if tp.get("BillingMode") != "PAY_PER_REQUEST":
            fail("on-demand", tb, f"BillingMode is {tp.get('BillingMode')!r}, not PAY_PER_REQUEST")
    idempotency = set()
    for c in consumers:
        env = (c.props.get("Environment") or {}).get("Variables") or {}
        idempotency.update(x for x in refs(env.get("IDEMPOTENCY_TABLE")) if x in tables)
        if "IDEMPOTENCY_TABLE" not in env and not c.stream_table and c.schedule is None:
            fail("idempotency-table", c.function, "IDEMPOTENCY_TABLE is not set")
    for tb in sorted(idempotency):
        tp = t.props(tb)
        keys = [(k.get("AttributeName"), k.get("KeyType")) for k in as_list(tp.get("KeySchema"))]
        if keys != [("pk", "HASH")]:
            fail("idempotency-table", tb, f"KeySchema {keys} is not the store's default [('pk', 'HASH')]")
        types = {a.get("AttributeName"): a.get("AttributeType") for a in as_list(tp.get("AttributeDefinitions"))}
        if types.get("pk") != "S":
            fail("idempotency-table", tb, f"pk is {types.get('pk')!r}, not S (String)")
        ttl = tp.get("TimeToLiveSpecification") or {}
        if ttl.get("AttributeName") != "expiration" or not truthy(ttl.get("Enabled")):
            fail("idempotency-table", tb, f"TimeToLiveSpecification {ttl!r} is not enabled on 'expiration'")


def _alarm_actions_ok(t: Template, ap: dict) -> bool:
    return any(t.is_type(x, "AWS::SNS::Topic") for a in as_list(ap.get("AlarmActions")) for x in refs(a))


def _alarms_on(t: Template, alarms: dict, queue: str, metric: str) -> list[str]:
    found = []
    for a in alarms:
        ap = t.props(a)
        if ap.get("Namespace") != "AWS/SQS" or ap.get("MetricName") != metric:
            continue
        dims = {d.get("Name"): d.get("Value") for d in as_list(ap.get("Dimensions")) if isinstance(d, dict)}
        if refs(dims.get("QueueName")) == {queue}:
            found.append(a)
    return found


def _check_alarms(t: Template, alarms: dict, consumed: set, dlqs: set, fail) -> None:
    for d in sorted(dlqs):
        found = _alarms_on(t, alarms, d, "ApproximateNumberOfMessagesVisible")
        if not found:
            fail("alarm-dlq", d, "no alarm on AWS/SQS ApproximateNumberOfMessagesVisible with QueueName of this DLQ")
        for a in found:
            ap = t.props(a)
            threshold = to_int(ap.get("Threshold"))
            if threshold != 0 or ap.get("ComparisonOperator") != "GreaterThanThreshold":
                fail("alarm-dlq", a, f"must fire on > 0: Threshold {ap.get('Threshold')!r}, ComparisonOperator {ap.get('ComparisonOperator')!r}")
            if ap.get("TreatMissingData") != "notBreaching":
                fail("alarm-dlq", a, f"TreatMissingData is {ap.get('TreatMissingData')!r}, not notBreaching")
            if not _alarm_actions_ok(t, ap):
                fail("alarm-dlq", a, "AlarmActions do not notify an SNS topic of this template")
    for q in sorted(consumed):
        found = _alarms_on(t, alarms, q, "ApproximateAgeOfOldestMessage")
        if not found:
            fail("alarm-queue-age", q, "no alarm on AWS/SQS ApproximateAgeOfOldestMessage with QueueName of this queue")
        for a in found:
            if not _alarm_actions_ok(t, t.props(a)):
                fail("alarm-queue-age", a, "AlarmActions do not notify an SNS topic of this template")


def names_function(t: Template, value: Any, f: str) -> bool:
    """Whether a FunctionName dimension's value names function `f`: `!Ref f`, or the function's own FunctionName (how
    a nested application's alarms name the parent's function, which they cannot `!Ref`)."""
    own = t.props(f).get("FunctionName")
    return refs(value) == {f} or (value is not None and own is not None and value == own)


def _check_function_alarms(t: Template, alarms: dict, c: Consumer, fail) -> None:
    """alarm-dead-letters (SQS consumers: the batch processor writes RecordsSentToDlq), alarm-function-errors, and
    alarm-stream-age (stream functions) for one function."""
    f = c.function
    binary = (t.resources[f].get("Metadata") or {}).get("BuildProperties", {}).get("Binary")
    dead_letters = []
    failures = []
    iterator_age = []
    for a in alarms:
        ap = t.props(a)
        dims = {d.get("Name"): d.get("Value") for d in as_list(ap.get("Dimensions")) if isinstance(d, dict)}
        if ap.get("Namespace") == "sqsafe" and ap.get("MetricName") == "RecordsSentToDlq" and dims.get("consumer") == binary:
            dead_letters.append(a)
        if ap.get("Namespace") == "AWS/Lambda" and ap.get("MetricName") == "IteratorAge" and names_function(t, dims.get("FunctionName"), f):
            iterator_age.append(a)
        watched = set()
        for m in as_list(ap.get("Metrics")):
            metric = ((m or {}).get("MetricStat") or {}).get("Metric") or {}
            mdims = {d.get("Name"): d.get("Value") for d in as_list(metric.get("Dimensions")) if isinstance(d, dict)}
            if metric.get("Namespace") == "AWS/Lambda" and names_function(t, mdims.get("FunctionName"), f):
                watched.add(metric.get("MetricName"))
        if {"Errors", "Throttles"} <= watched:
            failures.append(a)
    if c.stream_table:
        if not iterator_age:
            fail("alarm-stream-age", f, "no alarm on its AWS/Lambda IteratorAge (FunctionName dimension)")
        for a in iterator_age:
            if not _alarm_actions_ok(t, t.props(a)):
                fail("alarm-stream-age", a, "AlarmActions do not notify an SNS topic of this template")
    elif c.schedule is None and not dead_letters:
        fail("alarm-dead-letters", f, f"no alarm on namespace sqsafe RecordsSentToDlq with consumer = {binary!r}")
    for a in dead_letters:
        ap = t.props(a)
        if (ap.get("Statistic"), to_int(ap.get("Threshold")), ap.get("ComparisonOperator")) != ("Sum", 0, "GreaterThanThreshold"):
            fail("alarm-dead-letters", a, "must fire on Sum > 0 (Statistic Sum, Threshold 0, GreaterThanThreshold)")
        if not _alarm_actions_ok(t, ap):
            fail("alarm-dead-letters", a, "AlarmActions do not notify an SNS topic of this template")
    if not failures:
        fail("alarm-function-errors", f, "no alarm on its AWS/Lambda Errors and Throttles")
    for a in failures:
        if not _alarm_actions_ok(t, t.props(a)):
            fail("alarm-function-errors", a, "AlarmActions do not notify an SNS topic of this template")


# The counters the code writes: `Metric::X => "Name"` in crates/sqsafe-telemetry/src/metrics.rs, and BatchDuration.
def sqsafe_metric_names(root: Path = ROOT) -> set[str]:
    code = (root / "crates/sqsafe-telemetry/src/metrics.rs").read_text(encoding="utf-8")
    return (
        set(re.findall(r'Metric::\w+ => "(\w+)"', code))
        | set(re.findall(r'BATCH_DURATION: &str = "(\w+)"', code))
        | set(re.findall(r'pub const OUTBOX_\w+: &str = "(\w+)"', code))
    )


@dataclass
class DashboardMetric:
    namespace: str
    name: str
    dimensions: dict[str, Any]  # dimension name -> literal value, or the intrinsic a ${Var} of the Sub stands for
    expression: str | None = None


def _dashboard_metrics(t: Template, d: str, fail) -> list[DashboardMetric]:
    """The metrics (and expressions) of dashboard d's widgets, with ${Var} of its Fn::Sub resolved to what Var names."""
    body = t.props(d).get("DashboardBody")
    variables: dict[str, Any] = {}
    if isinstance(body, dict) and "Fn::Sub" in body:
        sub = body["Fn::Sub"]
        text, variables = (sub[0], sub[1] if len(sub) > 1 else {}) if isinstance(sub, list) else (sub, {})
    else:
        text = body
    if not isinstance(text, str):
        fail("dashboard", d, "DashboardBody is not a string (or a Fn::Sub of one)")
        return []
    # Placeholders that stay valid inside JSON strings, then back to what they name.
    marked = re.sub(r"\$\{([^}]+)\}", lambda m: f"@@{m.group(1)}@@", text)
    try:
        doc = json.loads(marked)
    except json.JSONDecodeError as e:
        fail("dashboard", d, f"DashboardBody is not valid JSON: {e}")
        return []

    def resolve(value: Any) -> Any:
        if isinstance(value, str):
            m = re.fullmatch(r"@@([^@]+)@@", value)
            if m:
                name = m.group(1)
                return variables.get(name, {"Ref": name})
        return value

    found: list[DashboardMetric] = []
    for widget in doc.get("widgets", []):
        for row in (widget.get("properties") or {}).get("metrics", []):
            if not isinstance(row, list):
                continue
            items = [x for x in row if not isinstance(x, dict)]
            options = [x for x in row if isinstance(x, dict)]
            expression = next((o["expression"] for o in options if "expression" in o), None)
            if expression is not None:
                resolved = re.sub(r"@@([^@]+)@@", lambda m: str(resolve(f"@@{m.group(1)}@@")), expression)
                found.append(DashboardMetric("", "", {}, resolved))
                continue
            if len(items) < 2 or "." in items[:2]:
                fail("dashboard", d, f"metric row {row!r}: write namespace and name out (no '.' shorthand)")
                continue
            dims = {items[i]: resolve(items[i + 1]) for i in range(2, len(items) - 1, 2)}
            found.append(DashboardMetric(items[0], items[1], dims))
    return found


def _check_dashboard(t: Template, c: Consumer, dashboards: dict[str, list[DashboardMetric]], fail) -> None:
    f = c.function
    binary = (t.resources[f].get("Metadata") or {}).get("BuildProperties", {}).get("Binary")

    def shows(metrics: list[DashboardMetric], namespace: str, name: str, dim: str, target: str) -> bool:
        for m in metrics:
            if m.namespace != namespace or m.name != name or dim not in m.dimensions:
                continue
            value = m.dimensions[dim]
            if value == target or (isinstance(value, dict) and refs(value) == {target}):
                return True
            if namespace == "AWS/Lambda" and dim == "FunctionName" and names_function(t, value, target):
                return True
        return False

    wanted = [
        ("sqsafe", "RecordsReceived", "consumer", binary, "records received"),
        ("sqsafe", "RecordsProcessed", "consumer", binary, "records applied"),
        ("sqsafe", "RecordsReplayed", "consumer", binary, "records replayed"),
        ("sqsafe", "RecordsSentToDlq", "consumer", binary, "records dead-lettered"),
        ("AWS/SQS", "ApproximateNumberOfMessagesVisible", "QueueName", c.dlq, "the DLQ's depth"),
        ("AWS/SQS", "ApproximateAgeOfOldestMessage", "QueueName", c.queue, "the age of the oldest message"),
        ("AWS/Lambda", "Duration", "FunctionName", f, "the function's duration"),
    ]
    best: tuple[str, list[str]] | None = None
    for d, metrics in sorted(dashboards.items()):
        missing = [what for ns, name, dim, target, what in wanted if not shows(metrics, ns, name, dim, target)]
        by_kind = any(
            m.expression and "error_kind" in m.expression and "RecordsSentToDlq" in m.expression
            and f'consumer="{binary}"' in m.expression
            for m in metrics
        )
        if not by_kind:
            missing.append("dead letters by error kind (a SEARCH on {sqsafe,consumer,error_kind} RecordsSentToDlq)")
        if not missing:
            return
        if len(missing) < len(wanted) and (best is None or len(missing) < len(best[1])):
            best = (d, missing)
    if best is None:
        fail("dashboard", f, "no dashboard shows this consumer")
    else:
        fail("dashboard", f, f"dashboard {best[0]} does not show " + ", ".join(best[1]))


def _check_sqsafe_metric_names(t: Template, alarms: dict, dashboards: dict[str, list[DashboardMetric]], fail) -> None:
    known = sqsafe_metric_names()
    for a in alarms:
        ap = t.props(a)
        if ap.get("Namespace") == "sqsafe" and ap.get("MetricName") not in known:
            fail("dashboard-metrics", a, f"sqsafe metric {ap.get('MetricName')!r} is not written by the code: {sorted(known)}")
    for d, metrics in sorted(dashboards.items()):
        for m in metrics:
            names = [m.name] if m.namespace == "sqsafe" else []
            if m.expression and "sqsafe" in m.expression:
                names += re.findall(r'MetricName="(\w+)"', m.expression)
            for name in names:
                if name not in known:
                    fail("dashboard-metrics", d, f"sqsafe metric {name!r} is not written by the code: {sorted(known)}")


def _policy_documents(t: Template) -> Iterable[tuple[str, dict]]:
    for rid, res in t.resources.items():
        p = res.get("Properties", {}) or {}
        kind = res.get("Type")
        if kind == "AWS::IAM::Role":
            for policy in as_list(p.get("Policies")):
                yield rid, policy.get("PolicyDocument") or {}
        elif kind in ("AWS::IAM::Policy", "AWS::IAM::ManagedPolicy", "AWS::IAM::RolePolicy"):
            yield rid, p.get("PolicyDocument") or {}
        elif kind == "AWS::Serverless::Function":
            for policy in as_list(p.get("Policies")):
                if isinstance(policy, dict) and "Statement" in policy:
                    yield rid, policy


def _schedule_seconds(expression: Any) -> int | None:
    """Seconds between runs of a `rate(N unit)` schedule; None for anything else (cron, an intrinsic)."""
    m = re.fullmatch(r"rate\((\d+) (minute|minutes|hour|hours|day|days)\)", str(expression).strip())
    if not m:
        return None
    unit = {"minute": 60, "hour": 3600, "day": 86400}[m.group(2).rstrip("s")]
    return int(m.group(1)) * unit


def _check_outbox_sweepers(t: Template, consumers: list[Consumer], tables: dict, alarms: dict, fail) -> None:
    """outbox-sweeper: no outbox event may stay PENDING unseen (the relay's stream record given up on, or gone)."""
    def env(c: Consumer) -> dict:
        return (c.props.get("Environment") or {}).get("Variables") or {}

    sweepers = [c for c in consumers if c.schedule is not None and refs(env(c).get("OUTBOX_TABLE"))]
    for relay in (c for c in consumers if c.stream_table and refs(env(c).get("OUTBOX_TABLE"))):
        table = relay.stream_table
        mine = [c for c in sweepers if table in refs(env(c).get("OUTBOX_TABLE"))]
        if not mine:
            fail("outbox-sweeper", relay.function, f"no scheduled function sweeps {table}: an event whose stream record "
                 "the relay gave up on (or never received) would stay PENDING for good")
            continue
        for c in mine:
            seconds = _schedule_seconds((c.schedule or {}).get("Schedule", (c.schedule or {}).get("ScheduleExpression")))
            if seconds is None or seconds > MAX_SWEEP_INTERVAL_SECONDS:
                fail("outbox-sweeper", f"{c.function}.Events.{c.event_name}",
                     f"runs {'on no rate(...) schedule' if seconds is None else f'every {seconds} s'}: at most every "
                     f"{MAX_SWEEP_INTERVAL_SECONDS} s")
            if refs(env(c).get("OUTBOX_DESTINATIONS")) != refs(env(relay).get("OUTBOX_DESTINATIONS")):
                fail("outbox-sweeper", c.function, f"OUTBOX_DESTINATIONS differ from {relay.function}'s: the sweeper "
                     "would refuse (or be allowed) other queues than the relay")
            index_name = t.default(env(c).get("OUTBOX_PENDING_INDEX", PENDING_INDEX_DEFAULT))
            tp = t.props(table)
            index = next((i for i in as_list(tp.get("GlobalSecondaryIndexes"))
                          if isinstance(i, dict) and i.get("IndexName") == index_name), None)
            types = {a.get("AttributeName"): a.get("AttributeType") for a in as_list(tp.get("AttributeDefinitions"))
                     if isinstance(a, dict)}
            keys = [(k.get("AttributeName"), k.get("KeyType")) for k in as_list((index or {}).get("KeySchema"))
                    if isinstance(k, dict)]
            if index is None:
                fail("outbox-sweeper", table, f"no global secondary index {index_name!r} (OUTBOX_PENDING_INDEX of {c.function})")
            elif (keys != [("pending", "HASH"), ("created_at", "RANGE")] or types.get("pending") != "S"
                  or types.get("created_at") != "N"
                  or (index.get("Projection") or {}).get("ProjectionType") != "ALL"):
                fail("outbox-sweeper", table, f"index {index_name!r} must be pending (S, HASH) + created_at (N, RANGE) "
                     f"projecting ALL, not {keys} {(index.get('Projection') or {})}")
            binary = ((t.resources[c.function].get("Metadata") or {}).get("BuildProperties") or {}).get("Binary")
            watching = [
                a for a, res in alarms.items()
                if (p := res.get("Properties") or {}).get("Namespace") == "sqsafe"
                and p.get("MetricName") == OUTBOX_AGE_METRIC
                and any(isinstance(d, dict) and d.get("Name") == "consumer" and d.get("Value") == binary
                        for d in as_list(p.get("Dimensions")))
            ]
            if not watching:
                fail("outbox-sweeper", c.function, f"no alarm on sqsafe {OUTBOX_AGE_METRIC} (consumer = {binary}): an "
                     "event neither the relay nor the sweeper can publish would wait unseen")
            for a in watching:
                ap = t.props(a)
                if not _alarm_actions_ok(t, ap):
                    fail("outbox-sweeper", a, "AlarmActions do not notify an SNS topic of this template")
                if ap.get("TreatMissingData") != "breaching":
                    fail("outbox-sweeper", a, f"TreatMissingData is {ap.get('TreatMissingData')!r}: a sweeper that "
                         "stopped running reports nothing, which must alarm (breaching)")


def _check_policy_documents(t: Template, fail) -> None:
    """Action '*' and data-plane wildcards anywhere, also in policies no function uses."""
    seen: set[tuple[str, str]] = set()
    for rid, doc in _policy_documents(t):
        for st in as_list(doc.get("Statement")):
            if not isinstance(st, dict) or st.get("Effect") != "Allow":
                continue
            for action in as_list(st.get("Action")):
                if not isinstance(action, str):
                    continue
                service = action.split(":", 1)[0].lower()
                bad = action == "*" or (service in DATA_PLANE_SERVICES and "*" in action)
                if bad and (rid, action) not in seen:
                    seen.add((rid, action))
                    fail("least-privilege", rid, f"allows {action!r}")
                if service in DATA_PLANE_SERVICES and "*" in as_list(st.get("Resource")) and (rid, f"{action}@*") not in seen:
                    seen.add((rid, f"{action}@*"))
                    fail("least-privilege", rid, f"allows {action} on Resource '*'")


def main(argv: list[str] | None = None) -> int:
    """`python tests/template/template_rules.py --template PATH`: the rules on any project's template (its function
    crates are found under functions/ beside it); prints each violation, exits 1 when there is one."""
    import argparse
    import sys

    from nested import flatten
    from sam_translate import load_template

    parser = argparse.ArgumentParser(description="Check a SAM template against sqsafe's template rules.")
    parser.add_argument("--template", type=Path, default=ROOT / "template.yaml")
    args = parser.parse_args(argv)
    path = args.template.resolve()
    doc = flatten(load_template(path), path.parent)
    violations = check(doc, crate_binaries=function_crate_binaries(path.parent))
    for v in violations:
        print(v, file=sys.stderr)
    functions = sum(1 for r in doc.get("Resources", {}).values() if r.get("Type") == "AWS::Serverless::Function")
    if violations:
        print(f"template_rules: {len(violations)} violation(s) in {path}", file=sys.stderr)
        return 1
    print(f"template_rules: {path}: all {len(RULES)} rules hold for its {functions} function(s)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
