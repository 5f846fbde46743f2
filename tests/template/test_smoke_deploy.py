"""Smoke deploy: template.yaml, translated by the SAM transform, created as a stack in moto server with the artifacts
`sam build` made, then every resource asserted with describe calls (a stack status alone proves nothing in moto).

Needs moto server (scripts/test.sh runs under `sqsafe local moto`, which exports AWS_ENDPOINT_URL; by hand,
`target/debug/sqsafe local moto -- .venv/bin/python -m pytest ...`) and `sam build` output in .aws-sam/build
(scripts/template-checks.sh runs it first).
Without either the tests FAIL, they never skip. Only 127.0.0.1 / localhost endpoints are accepted.

What moto (5.2.5) cannot do, found by running this, and where it is covered instead (test_structure.py):
- AWS::CloudWatch::Alarm and AWS::SNS::Subscription: "No Moto CloudFormation support"; listed with an empty logical id
  and not created. -> test_structure.test_alarms, test_alarm_email_subscription.
- AWS::Lambda::Permission (the outbox sweeper's schedule may invoke it): listed as created, without a physical id.
  -> test_structure.scheduled_functions (each EventBridge rule's target has its events.amazonaws.com permission).
- DynamoDB TimeToLiveSpecification, PointInTimeRecoverySpecification, SSESpecification: ignored (TTL and PITR read
  back DISABLED, no SSEDescription). -> test_structure.test_tables_ttl_pitr_sse.
- SQS RedriveAllowPolicy: moto's SQS does not know the attribute (GetQueueAttributes: InvalidAttributeName); dropped.
  -> test_structure.test_redrive_allow_policy.
- Lambda Architectures: arm64 reads back as x86_64; LoggingConfig is not returned.
  -> test_structure.test_functions_arm64_json_logging (and the built binary's ELF machine is checked here).
- A FIFO queue without QueueName gets a generated name without ".fifo" and the create fails; the template names its
  queues (it needs the source queues' names anyway for RedriveAllowPolicy).
- A queue's Ref (so Outputs, DLQ_URL and QUEUE_URL) is https://sqs.<region>.amazonaws.com/<account>/<name>, not the moto URL:
  queues are compared by name, and the clients here always use the moto endpoint.
- Environment variable values read back as numbers when the parameter is a Number: compared as strings.
- GetRolePolicy returns the policy document as a Python repr string: parsed with ast.literal_eval.
- AWS::CloudFormation::Stack (each consumer's nested application, sqsafe/consumer.yaml, as the SAM transform leaves
  it): moto creates the nested stack from its TemplateURL in moto's S3 (uploaded here, as `sam package` would), but
  has no `Fn::GetAtt <Stack>.Outputs.<Name>`: the parent failed with HTTP 500 (AttributeError in moto). The launcher
  moto runs under, crates/sqsafe-local/src/moto_server.py, adds that lookup; the nested stacks' resources are then asserted here
  like the parent's, under the ids the rules give them (ChargePaymentQueue: the application's id, then the child's).
- moto never runs the functions (no Docker) and its own SQS->Lambda mapping ignores batchItemFailures: this deploy
  proves wiring, not behaviour (that is tests/sqsafe-e2e).
"""

from __future__ import annotations

import ast
import base64
import hashlib
import io
import json
import os
import time
import urllib.parse
import uuid
import zipfile
from pathlib import Path
from typing import Any

import pytest

from nested import flatten
from sam_translate import ROOT, artifact_key, local_children, translate

BUILD_DIR = ROOT / ".aws-sam" / "build"
BUILD_INFO = ROOT / ".aws-sam" / "sqsafe-build.json"  # written by scripts/template-checks.sh
ELF_MACHINE = {"arm64": 0xB7, "x86_64": 0x3E}  # e_machine: EM_AARCH64, EM_X86_64
REGION = "us-east-1"
# Types moto's CloudFormation does not create (see the module docstring).
MOTO_SKIPS = {"AWS::CloudWatch::Alarm", "AWS::SNS::Subscription"}
# Listed as created, with no physical id.
MOTO_NO_PHYSICAL_ID = {"AWS::Lambda::Permission"}


# ------------------------------------------------------------------------------------------------ fixtures


@pytest.fixture(scope="module")
def endpoint() -> str:
    url = os.environ.get("AWS_ENDPOINT_URL")
    if not url:
        pytest.fail(
            "AWS_ENDPOINT_URL is not set: run under moto (scripts/test.sh does; or `target/debug/sqsafe local moto -- "
            "pytest ...`). This test never skips."
        )
    host = urllib.parse.urlparse(url).hostname
    if host not in ("127.0.0.1", "localhost", "::1"):
        pytest.fail(f"AWS_ENDPOINT_URL={url} is not a loopback address: refusing to send anything there")
    return url


@pytest.fixture(scope="module")
def aws(endpoint):
    import boto3
    from botocore.config import Config

    session = boto3.session.Session(
        aws_access_key_id="testing", aws_secret_access_key="testing", region_name=REGION
    )
    config = Config(connect_timeout=2, read_timeout=30, retries={"max_attempts": 2})
    clients: dict[str, Any] = {}

    def client(service: str):
        if service not in clients:
            clients[service] = session.client(service, endpoint_url=endpoint, config=config)
        return clients[service]

    try:
        client("s3").list_buckets()
    except Exception as e:  # noqa: BLE001 - any failure here means "no moto"
        pytest.fail(f"moto server is not answering at {endpoint}: {e}")
    return client


@pytest.fixture(scope="module")
def build(sam_template_module) -> dict[str, Any]:
    """The `sam build` output: architecture and the bootstrap of every function of the template."""
    if not BUILD_INFO.is_file():
        pytest.fail(f"{BUILD_INFO.relative_to(ROOT)} is missing: run scripts/template-checks.sh (it runs `sam build`)")
    info = json.loads(BUILD_INFO.read_text(encoding="utf-8"))
    functions = [k for k, v in sam_template_module["Resources"].items() if v["Type"] == "AWS::Serverless::Function"]
    binaries = {}
    for f in functions:
        path = BUILD_DIR / f / "bootstrap"
        if not path.is_file():
            pytest.fail(f"{path.relative_to(ROOT)} is missing: `sam build` did not build {f}")
        binaries[f] = path
    return {"architecture": info["architecture"], "reason": info.get("reason", ""), "binaries": binaries}


@pytest.fixture(scope="module")
def sam_template_module(_template_yaml):
    """template.yaml as deployed: its consumers' queues, alarms and dashboards in nested applications."""
    return _template_yaml


def _zip(path: Path) -> bytes:
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", zipfile.ZIP_DEFLATED) as z:
        info = zipfile.ZipInfo("bootstrap", date_time=(2020, 1, 1, 0, 0, 0))
        info.external_attr = 0o755 << 16  # executable, as Lambda needs
        info.compress_type = zipfile.ZIP_DEFLATED
        z.writestr(info, path.read_bytes())
    return buf.getvalue()


@pytest.fixture(scope="module")
def stack(aws, build, sam_template_module):
    """Uploads the artifacts, creates the translated stack, yields what the tests need, deletes it all afterwards."""
    suffix = uuid.uuid4().hex[:8]
    name, bucket = f"sqsafe-smoke-{suffix}", f"sqsafe-smoke-artifacts-{suffix}"
    s3, cfn = aws("s3"), aws("cloudformation")
    started = time.monotonic()

    s3.create_bucket(Bucket=bucket)
    zips = {}
    for f, path in build["binaries"].items():
        body = _zip(path)
        s3.put_object(Bucket=bucket, Key=artifact_key(f), Body=body)
        zips[f] = body
    # The nested applications' templates, where the translated template's TemplateURL points (sam_translate).
    children = {child.relative_to(ROOT).as_posix(): child.read_text(encoding="utf-8")
                for child in local_children(sam_template_module, ROOT)}
    for key, body in children.items():
        s3.put_object(Bucket=bucket, Key=key, Body=body.encode())
    parameters = {
        "PaymentsApiUrl": "http://127.0.0.1:9/payments",  # never called: moto does not run functions
        "Architecture": build["architecture"],
        "AlarmEmail": "ops@example.invalid",
    }
    deployed = translate(sam_template_module, bucket=bucket, region=REGION)
    # What the tests assert against: the same template with each nested application inlined (ChargePaymentQueue...).
    template = translate(flatten(sam_template_module, ROOT), bucket=bucket, region=REGION)
    cfn.create_stack(
        StackName=name,
        TemplateBody=json.dumps(deployed),
        Parameters=[{"ParameterKey": k, "ParameterValue": v} for k, v in parameters.items()],
        Capabilities=["CAPABILITY_IAM"],
    )
    deadline = time.monotonic() + 60
    while True:
        desc = cfn.describe_stacks(StackName=name)["Stacks"][0]
        if not desc["StackStatus"].endswith("_IN_PROGRESS") or time.monotonic() > deadline:
            break
        time.sleep(0.2)
    summaries = cfn.list_stack_resources(StackName=name)["StackResourceSummaries"]
    physical = {r["LogicalResourceId"]: r["PhysicalResourceId"] for r in summaries if r["LogicalResourceId"]}
    # Each nested stack's resources, under the id the flattened template gives them: <application id><child id>.
    nested = {}
    for app in (r["LogicalResourceId"] for r in summaries if r["ResourceType"] == "AWS::CloudFormation::Stack"):
        child = cfn.list_stack_resources(StackName=physical[app])["StackResourceSummaries"]
        nested[app] = {"stack": physical[app], "summaries": child,
                       "template": cfn.get_template(StackName=physical[app])["TemplateBody"]}
        physical.update({app + r["LogicalResourceId"]: r["PhysicalResourceId"] for r in child if r["LogicalResourceId"]})
    print(f"\nsmoke deploy: stack {name} {desc['StackStatus']} in {time.monotonic() - started:.1f} s "
          f"({len(physical)} resources; built for {build['architecture']})")
    info = {
        "name": name,
        "status": desc["StackStatus"],
        "reason": desc.get("StackStatusReason"),
        "outputs": {o["OutputKey"]: o["OutputValue"] for o in desc.get("Outputs", [])},
        "summaries": summaries,
        "physical": physical,
        "template": template,
        "deployed": deployed,
        "nested": nested,
        "children": children,
        "parameters": parameters,
        "zips": zips,
    }
    yield info

    # Teardown: the stack, the tables it retains (DeletionPolicy: Retain), the artifacts.
    try:
        cfn.delete_stack(StackName=name)
        dynamodb = aws("dynamodb")
        for logical, res in template["Resources"].items():
            if res["Type"] == "AWS::DynamoDB::Table" and logical in physical:
                try:
                    dynamodb.delete_table(TableName=physical[logical])
                except dynamodb.exceptions.ResourceNotFoundException:
                    pass
        for key in [artifact_key(f) for f in zips] + list(children):
            s3.delete_object(Bucket=bucket, Key=key)
        s3.delete_bucket(Bucket=bucket)
    except Exception as e:  # noqa: BLE001 - cleanup must not hide the test result
        print(f"smoke deploy cleanup: {e}")


# ------------------------------------------------------------------------------------------------ helpers


def resources_of(stack: dict, kind: str) -> dict[str, dict]:
    return {k: v for k, v in stack["template"]["Resources"].items() if v["Type"] == kind}


def queue_name(stack: dict, logical: str) -> str:
    # The physical id of a queue is its URL (in moto: an amazonaws.com-style URL): the name is its last segment.
    return stack["physical"][logical].rsplit("/", 1)[1]


def queue_attributes(aws, stack: dict, logical: str) -> dict[str, str]:
    sqs = aws("sqs")
    url = sqs.get_queue_url(QueueName=queue_name(stack, logical))["QueueUrl"]
    return sqs.get_queue_attributes(QueueUrl=url, AttributeNames=["All"])["Attributes"]


def consumers(stack: dict) -> list[tuple[str, str, str]]:
    """(function, its queue, that queue's DLQ) of each SQS mapping, from the translated template."""
    out = []
    queues = resources_of(stack, "AWS::SQS::Queue")
    for m in resources_of(stack, "AWS::Lambda::EventSourceMapping").values():
        function = m["Properties"]["FunctionName"]["Ref"]
        queue = m["Properties"]["EventSourceArn"]["Fn::GetAtt"][0]
        if queue not in queues:
            continue  # a stream mapping: stream_functions()
        dlq = queues[queue]["Properties"]["RedrivePolicy"]["deadLetterTargetArn"]["Fn::GetAtt"][0]
        out.append((function, queue, dlq))
    return sorted(out)


def stream_functions(stack: dict) -> list[tuple[str, str, dict]]:
    """(function, its stream's table, its mapping's properties) of each DynamoDB stream mapping (the outbox relay)."""
    out = []
    for m in resources_of(stack, "AWS::Lambda::EventSourceMapping").values():
        source = m["Properties"]["EventSourceArn"].get("Fn::GetAtt", [None, None])
        if source[1] == "StreamArn":
            out.append((m["Properties"]["FunctionName"]["Ref"], source[0], m["Properties"]))
    return sorted(out, key=lambda x: x[0])


def policy_document(raw: Any) -> dict:
    if isinstance(raw, dict):
        return raw
    try:
        return json.loads(raw)
    except ValueError:
        return ast.literal_eval(raw)  # moto returns the Python repr of the document


# ------------------------------------------------------------------------------------------------ tests


def test_built_for_the_recorded_architecture(build) -> None:
    """The template deploys arm64; the build is arm64 unless the aarch64 Rust std is missing (then it says why)."""
    arch = build["architecture"]
    assert arch in ELF_MACHINE
    if arch != "arm64":
        assert build["reason"], "an x86_64 build must record why it is not arm64"
    for f, path in build["binaries"].items():
        header = path.read_bytes()[:20]
        assert header[:4] == b"\x7fELF", f"{path} is not an ELF binary"
        machine = int.from_bytes(header[18:20], "little")
        assert machine == ELF_MACHINE[arch], f"{f}: bootstrap is machine {machine:#x}, expected {arch}"


def test_binaries_read_what_the_template_sets(build, sam_template_module) -> None:
    """Each function's built binary is the right crate's: it contains the name of every environment variable the
    template gives that function (a variable nobody reads would be configuration silently ignored)."""
    for f, path in build["binaries"].items():
        data = path.read_bytes()
        env = sam_template_module["Resources"][f]["Properties"]["Environment"]["Variables"]
        unread = sorted(var for var in env if var.encode() not in data)
        assert not unread, f"{f}: {path.name} never mentions {unread}: wrong Binary, or the code does not read them"


def all_summaries(stack: dict) -> list[dict]:
    """The parent stack's resource summaries and its nested stacks'."""
    return stack["summaries"] + [r for n in stack["nested"].values() for r in n["summaries"]]


def test_stack_created(stack) -> None:
    assert stack["status"] == "CREATE_COMPLETE", stack["reason"]
    for logical, res in stack["template"]["Resources"].items():
        if res["Type"] in MOTO_SKIPS | MOTO_NO_PHYSICAL_ID:
            continue
        assert stack["physical"].get(logical), f"{logical} ({res['Type']}) was not created"
    statuses = {r["ResourceStatus"] for r in all_summaries(stack)}
    assert statuses == {"CREATE_COMPLETE"}, statuses


def test_nested_stacks(stack) -> None:
    """Each consumer's nested application is a nested stack (AWS::CloudFormation::Stack after the SAM transform),
    created from the child template uploaded where its TemplateURL points: sqsafe/consumer.yaml for charge-payment,
    sqsafe/consumer-fifo.yaml for apply-ledger."""
    stacks = resources_of({"template": stack["deployed"]}, "AWS::CloudFormation::Stack")
    assert set(stacks) == {"ChargePayment", "ApplyLedger"} == set(stack["nested"]), sorted(stacks)
    want = {"ChargePayment": "sqsafe/consumer.yaml", "ApplyLedger": "sqsafe/consumer-fifo.yaml"}
    for app, key in want.items():
        url = stacks[app]["Properties"]["TemplateURL"]
        assert urllib.parse.urlparse(url).path == "/" + key, f"{app}: {url}"
        assert key in stack["children"], f"{key} was not uploaded"
        body = stack["nested"][app]["template"]
        assert body == stack["children"][key], f"{app}: its nested stack is not the uploaded {key}"
        created = {r["LogicalResourceId"] for r in stack["nested"][app]["summaries"] if r["LogicalResourceId"]}
        assert created >= {"Queue", "DeadLetterQueue", "LogGroup", "Dashboard"}, f"{app}: {sorted(created)}"


def test_queues_and_redrive(aws, stack) -> None:
    queues = resources_of(stack, "AWS::SQS::Queue")
    pairs = consumers(stack)
    assert {"ChargePaymentFunction", "ApplyLedgerFunction"} <= {f for f, _, _ in pairs}, pairs
    for function, queue, dlq in pairs:
        q, d = queue_attributes(aws, stack, queue), queue_attributes(aws, stack, dlq)
        want = queues[queue]["Properties"]
        assert q["VisibilityTimeout"] == str(want["VisibilityTimeout"]), queue
        assert q["MessageRetentionPeriod"] == str(want["MessageRetentionPeriod"]), queue
        assert d["MessageRetentionPeriod"] == "1209600", f"{dlq} keeps messages 14 days"
        assert q["SqsManagedSseEnabled"] == d["SqsManagedSseEnabled"] == "true", f"SSE on {queue} and {dlq}"
        redrive = json.loads(q["RedrivePolicy"])
        assert redrive["deadLetterTargetArn"] == d["QueueArn"], f"{queue} redrives to {dlq}"
        assert int(redrive["maxReceiveCount"]) == want["RedrivePolicy"]["maxReceiveCount"] >= 5
        fifo = bool(want.get("FifoQueue"))
        assert q.get("FifoQueue", "false") == d.get("FifoQueue", "false") == str(fifo).lower(), (queue, dlq)
        if fifo:
            assert q["ContentBasedDeduplication"] == "true", queue
    queue_of = {f: q for f, q, _ in pairs}
    assert queue_attributes(aws, stack, queue_of["ApplyLedgerFunction"])["FifoQueue"] == "true", "apply-ledger: FIFO"
    assert "FifoQueue" not in queue_attributes(aws, stack, queue_of["ChargePaymentFunction"]), "charge-payment: standard"


def test_event_source_mappings(aws, stack) -> None:
    lam = aws("lambda")
    for function, queue, _ in consumers(stack):
        mappings = lam.list_event_source_mappings(FunctionName=stack["physical"][function])["EventSourceMappings"]
        assert len(mappings) == 1, f"{function} has {len(mappings)} mappings"
        m = mappings[0]
        assert m["EventSourceArn"] == queue_attributes(aws, stack, queue)["QueueArn"], f"{function} polls {queue}"
        assert m["FunctionResponseTypes"] == ["ReportBatchItemFailures"], function
        assert m["ScalingConfig"]["MaximumConcurrency"] == 10, function
        fifo = bool(resources_of(stack, "AWS::SQS::Queue")[queue]["Properties"].get("FifoQueue"))
        assert m["BatchSize"] == (1 if fifo else 10), f"{function}: FIFO mappings take 1 record (rule fifo-mapping)"
        assert m["State"] == "Enabled", function


def test_tables(aws, stack) -> None:
    dynamodb = aws("dynamodb")
    want = {
        "IdempotencyTable": ([("pk", "HASH")], {"pk": "S"}),
        "LedgerTable": ([("pk", "HASH"), ("sk", "RANGE")], {"pk": "S", "sk": "S"}),
    }
    for logical, (keys, types) in want.items():
        table = dynamodb.describe_table(TableName=stack["physical"][logical])["Table"]
        assert [(k["AttributeName"], k["KeyType"]) for k in table["KeySchema"]] == keys, logical
        assert {a["AttributeName"]: a["AttributeType"] for a in table["AttributeDefinitions"]} == types, logical
        assert table["BillingModeSummary"]["BillingMode"] == "PAY_PER_REQUEST", logical
        assert table["TableStatus"] == "ACTIVE", logical


def test_functions(aws, stack) -> None:
    lam, iam = aws("lambda"), aws("iam")
    physical = stack["physical"]
    expected_env = {
        "ChargePaymentFunction": {
            "IDEMPOTENCY_TABLE": physical["IdempotencyTable"],
            "PAYMENTS_API_URL": stack["parameters"]["PaymentsApiUrl"],
            "PAYMENTS_TIMEOUT_MS": "5000",
            "SQSAFE_IDEMPOTENCY_MODE": "claim",
            "MAX_ATTEMPTS": "5",
            "IDEMPOTENCY_WINDOW_DAYS": "30",
            "DLQ_MAX_MESSAGE_SIZE": "1048576",
        },
        "ApplyLedgerFunction": {
            "IDEMPOTENCY_TABLE": physical["IdempotencyTable"],
            "LEDGER_TABLE": physical["LedgerTable"],
            "MAX_ATTEMPTS": "5",
            "IDEMPOTENCY_WINDOW_DAYS": "30",
            "DLQ_MAX_MESSAGE_SIZE": "1048576",
        },
    }
    for function, queue, dlq in consumers(stack):
        if function not in expected_env:  # a consumer made with `cargo xtask new-consumer`: what its template says
            expected_env[function] = declared_env(stack, function)
        cfg = lam.get_function_configuration(FunctionName=physical[function])
        assert cfg["Runtime"] == "provided.al2023" and cfg["Handler"] == "bootstrap", function
        assert (cfg["Timeout"], cfg["MemorySize"]) == (30, 256), function
        role = resources_of(stack, "AWS::Lambda::Function")[function]["Properties"]["Role"]["Fn::GetAtt"][0]
        assert cfg["Role"] == iam.get_role(RoleName=physical[role])["Role"]["Arn"], f"{function} runs as {role}"
        env = {k: str(v) for k, v in cfg["Environment"]["Variables"].items()}
        dlq_url = env.pop("DLQ_URL")
        assert dlq_url.rsplit("/", 1)[1] == queue_name(stack, dlq), f"{function}: DLQ_URL is {dlq}"
        queue_url = env.pop("QUEUE_URL")
        assert queue_url.rsplit("/", 1)[1] == queue_name(stack, queue), f"{function}: QUEUE_URL is {queue}"
        assert env == expected_env[function], function
        # The code is the artifact `sam build` made, as uploaded.
        body = stack["zips"][function]
        assert cfg["CodeSize"] == len(body), function
        assert cfg["CodeSha256"] == base64.b64encode(hashlib.sha256(body).digest()).decode(), function


def declared_env(stack, function: str) -> dict[str, str]:
    """A function's environment as its template declares it, Refs resolved (queues' URLs left out, checked apart)."""
    variables = resources_of(stack, "AWS::Lambda::Function")[function]["Properties"]["Environment"]["Variables"]
    parameters = stack["template"].get("Parameters", {})
    out = {}
    for name, value in variables.items():
        if name in ("DLQ_URL", "QUEUE_URL"):
            continue
        ref = value.get("Ref") if isinstance(value, dict) else None
        if ref is None:
            out[name] = str(value)
        elif ref in stack["physical"]:
            out[name] = stack["physical"][ref]
        else:
            out[name] = str(stack["parameters"].get(ref, parameters.get(ref, {}).get("Default")))
    return out


def test_roles_reach_only_their_resources(aws, stack) -> None:
    iam, physical = aws("iam"), stack["physical"]
    sqs_arn = {q: queue_attributes(aws, stack, q)["QueueArn"] for q in resources_of(stack, "AWS::SQS::Queue")}
    table_arn = {
        t: aws("dynamodb").describe_table(TableName=physical[t])["Table"]["TableArn"]
        for t in resources_of(stack, "AWS::DynamoDB::Table")
    }
    own_tables = {"ChargePaymentFunction": {"IdempotencyTable"}, "ApplyLedgerFunction": {"IdempotencyTable", "LedgerTable"}}
    for function, queue, dlq in consumers(stack):
        if function not in own_tables:  # a consumer made with `cargo xtask new-consumer`: the tables it is given
            variables = resources_of(stack, "AWS::Lambda::Function")[function]["Properties"]["Environment"]["Variables"]
            own_tables[function] = {
                v["Ref"] for v in variables.values() if isinstance(v, dict) and v.get("Ref") in table_arn
            }
        role = resources_of(stack, "AWS::Lambda::Function")[function]["Properties"]["Role"]["Fn::GetAtt"][0]
        name = physical[role]
        assert iam.list_attached_role_policies(RoleName=name)["AttachedPolicies"] == [], f"{role}: managed policies"
        allowed = {sqs_arn[queue], sqs_arn[dlq]} | {table_arn[t] for t in own_tables[function]}
        reached: dict[str, set[str]] = {}
        for policy in iam.list_role_policies(RoleName=name)["PolicyNames"]:
            doc = policy_document(iam.get_role_policy(RoleName=name, PolicyName=policy)["PolicyDocument"])
            for st in doc["Statement"]:
                actions = st["Action"] if isinstance(st["Action"], list) else [st["Action"]]
                resources = st["Resource"] if isinstance(st["Resource"], list) else [st["Resource"]]
                for action in actions:
                    assert action != "*" and not action.endswith(":*"), f"{role}: {action}"
                    if action.split(":")[0] in ("sqs", "dynamodb"):
                        for r in resources:
                            assert r in allowed, f"{role}: {action} on {r}, not one of {function}'s own resources"
                            reached.setdefault(r, set()).add(action)
        assert {"sqs:ReceiveMessage", "sqs:DeleteMessage", "sqs:GetQueueAttributes"} <= reached[sqs_arn[queue]]
        assert "sqs:SendMessage" in reached[sqs_arn[dlq]]
        assert "sqs:ChangeMessageVisibility" in reached[sqs_arn[queue]], f"{role}: backoff needs it on {queue}"
        assert "sqs:ChangeMessageVisibility" not in reached[sqs_arn[dlq]], f"{role}: never on the DLQ"
        # Every consumer claims with PutItem; the claim path (not a transactional consumer) also completes, extends
        # and releases. Only a function whose SQSAFE_IDEMPOTENCY_MODE may be keyed reads, and only with BatchGetItem
        # (no GetItem); nothing checks a condition item (rule grant-only-what-is-used).
        idempotency = reached[table_arn["IdempotencyTable"]]
        assert "dynamodb:PutItem" in idempotency, role
        claim_mode = {"dynamodb:PutItem", "dynamodb:UpdateItem", "dynamodb:DeleteItem"}
        assert idempotency <= claim_mode | {"dynamodb:BatchGetItem"}, f"{role}: {idempotency}"
        if function == "ChargePaymentFunction":
            # Its mode is a parameter (ChargePaymentIdempotencyMode): the keyed mode's read is granted.
            assert idempotency == claim_mode | {"dynamodb:BatchGetItem"}, idempotency
        if function == "ApplyLedgerFunction":
            assert idempotency == {"dynamodb:PutItem"}, idempotency


def test_stream_functions(aws, stack) -> None:
    """The outbox relay: its table's stream, its mapping on that stream, its environment and its role's reach."""
    dynamodb, lam, iam, physical = aws("dynamodb"), aws("lambda"), aws("iam"), stack["physical"]
    streams = stream_functions(stack)
    assert [f for f, _, _ in streams] == ["OutboxRelayFunction"], streams
    for function, table, declared in streams:
        description = dynamodb.describe_table(TableName=physical[table])["Table"]
        assert description["StreamSpecification"] == {"StreamEnabled": True, "StreamViewType": "NEW_IMAGE"}, table
        stream_arn = description["LatestStreamArn"]
        (m,) = lam.list_event_source_mappings(FunctionName=physical[function])["EventSourceMappings"]
        assert m["EventSourceArn"] == stream_arn, f"{function} reads {table}'s stream"
        assert m["StartingPosition"] == "TRIM_HORIZON", function
        assert m["FunctionResponseTypes"] == ["ReportBatchItemFailures"], function
        assert m["BisectBatchOnFunctionError"] is True, function
        assert m["MaximumRetryAttempts"] == declared["MaximumRetryAttempts"], function
        (failure_queue,) = {q for q in resources_of(stack, "AWS::SQS::Queue") if q in str(declared["DestinationConfig"])}
        failure_arn = queue_attributes(aws, stack, failure_queue)["QueueArn"]
        assert m["DestinationConfig"]["OnFailure"]["Destination"] == failure_arn, function
        assert m["State"] == "Enabled", function

        env = {k: str(v) for k, v in lam.get_function_configuration(FunctionName=physical[function])["Environment"]["Variables"].items()}
        assert env["OUTBOX_TABLE"] == physical[table]
        destinations = [url.rsplit("/", 1)[1] for url in env["OUTBOX_DESTINATIONS"].split(",")]
        assert destinations == [queue_name(stack, q) for q in ("ChargePaymentQueue", "ApplyLedgerQueue")]

        # Its role: stream reads on its stream, UpdateItem on its table, SendMessage on its destinations and its
        # on-failure queue; nothing else on DynamoDB or SQS.
        role = resources_of(stack, "AWS::Lambda::Function")[function]["Properties"]["Role"]["Fn::GetAtt"][0]
        table_arn = description["TableArn"]
        sqs_arns = {queue_attributes(aws, stack, q)["QueueArn"] for q in ("ChargePaymentQueue", "ApplyLedgerQueue")}
        reached: dict[str, set[str]] = {}
        for policy in iam.list_role_policies(RoleName=physical[role])["PolicyNames"]:
            doc = policy_document(iam.get_role_policy(RoleName=physical[role], PolicyName=policy)["PolicyDocument"])
            for st in doc["Statement"]:
                actions = st["Action"] if isinstance(st["Action"], list) else [st["Action"]]
                resources = st["Resource"] if isinstance(st["Resource"], list) else [st["Resource"]]
                for action in actions:
                    if action.split(":")[0] in ("sqs", "dynamodb"):
                        for r in resources:
                            reached.setdefault(r, set()).add(action)
        assert reached == {
            stream_arn: {"dynamodb:DescribeStream", "dynamodb:GetRecords", "dynamodb:GetShardIterator", "dynamodb:ListStreams"},
            table_arn: {"dynamodb:UpdateItem"},
            failure_arn: {"sqs:SendMessage"},
            **{arn: {"sqs:SendMessage"} for arn in sqs_arns},
        }, f"{role}: {reached}"


def test_log_groups(aws, stack) -> None:
    logs = aws("logs")
    for logical in resources_of(stack, "AWS::Logs::LogGroup"):
        name = stack["physical"][logical]
        (group,) = [g for g in logs.describe_log_groups(logGroupNamePrefix=name)["logGroups"] if g["logGroupName"] == name]
        assert group.get("retentionInDays") == 30, logical


def test_alarm_topic_and_outputs(aws, stack) -> None:
    topic = stack["physical"]["AlarmTopic"]
    aws("sns").get_topic_attributes(TopicArn=topic)
    out, physical = stack["outputs"], stack["physical"]
    assert out["AlarmTopicArn"] == topic
    assert out["IdempotencyTableName"] == physical["IdempotencyTable"]
    assert out["LedgerTableName"] == physical["LedgerTable"]
    for key, logical in {
        "ChargePaymentQueueUrl": "ChargePaymentQueue",
        "ChargePaymentDeadLetterQueueUrl": "ChargePaymentDeadLetterQueue",
        "ApplyLedgerQueueUrl": "ApplyLedgerQueue",
        "ApplyLedgerDeadLetterQueueUrl": "ApplyLedgerDeadLetterQueue",
    }.items():
        assert out[key].rsplit("/", 1)[1] == queue_name(stack, logical), key


def test_what_moto_skips_is_really_skipped(stack) -> None:
    """If a moto upgrade starts creating alarms or subscriptions, this fails: then assert them here with describe
    calls instead of only in test_structure.py."""
    created_types = {r["ResourceType"] for r in all_summaries(stack) if r["LogicalResourceId"]}
    assert not (created_types & MOTO_SKIPS), f"moto now creates {created_types & MOTO_SKIPS}: extend this test"
