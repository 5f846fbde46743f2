"""The moto launcher (crates/sqsafe-local/src/moto_server.py: sqsafe local runs moto through it) makes moto's conditional writes atomic, as DynamoDB's are.

moto checks a PutItem's condition and then stores the item with nothing held between the two. Under CPU load the
interpreter can switch threads in that gap, and two claims of one key both pass `attribute_not_exists` (make test saw
it once: three winners of 20 in `concurrent_claims_have_one_winner`). Here the gap is widened on purpose (the condition
check sleeps 50 ms after evaluating, letting every other request in), so the race happens every time with plain moto
and the launcher must still give exactly one winner. The widening is applied to both servers the same way.
"""

import importlib.util
import json
import os
import socket
import subprocess
import sys
import threading
import time
import urllib.request
from pathlib import Path

import boto3
import botocore.config
import pytest

ROOT = Path(__file__).resolve().parents[2]
# The one launcher: sqsafe-local embeds it (sqsafe local up | moto | the tests' MotoServer).
LAUNCHER = ROOT / "crates" / "sqsafe-local" / "src" / "moto_server.py"
RACERS = 10
TRIALS = 3

# Widens the gap between moto's condition check and its write: every evaluation sleeps after answering.
WIDEN = """
import time
import moto.dynamodb.models.table as table

_get_filter_expression = table.get_filter_expression

class _Slow:
    def __init__(self, inner):
        self.inner = inner

    def expr(self, item):
        answer = self.inner.expr(item)
        time.sleep(0.05)
        return answer

table.get_filter_expression = lambda *a, **k: _Slow(_get_filter_expression(*a, **k))
"""

PLAIN = WIDEN + """
import sys
from moto.server import main
sys.argv[0] = "moto_server"
sys.exit(main())
"""

THROUGH_LAUNCHER = WIDEN + f"""
import runpy
runpy.run_path({str(LAUNCHER)!r}, run_name="__main__")
"""


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def start(code, tmp_path, name):
    port = free_port()
    log = open(tmp_path / f"{name}.log", "wb")
    proc = subprocess.Popen(
        [sys.executable, "-c", code, "-H", "127.0.0.1", "-p", str(port)],
        stdout=log,
        stderr=subprocess.STDOUT,
        stdin=subprocess.DEVNULL,
    )
    url = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        assert proc.poll() is None, (tmp_path / f"{name}.log").read_text()
        try:
            with urllib.request.urlopen(urllib.request.Request(f"{url}/moto-api/reset", method="POST"), timeout=2):
                return proc, url
        except OSError:
            time.sleep(0.1)
    proc.kill()
    pytest.fail(f"{name} moto not ready on {url}: " + (tmp_path / f"{name}.log").read_text())


def winners_per_trial(url):
    client = boto3.client(
        "dynamodb",
        endpoint_url=url,
        region_name="us-east-1",
        aws_access_key_id="testing",
        aws_secret_access_key="testing",
        config=botocore.config.Config(max_pool_connections=RACERS, retries={"max_attempts": 1}, read_timeout=60),
    )
    client.create_table(
        TableName="race",
        KeySchema=[{"AttributeName": "pk", "KeyType": "HASH"}],
        AttributeDefinitions=[{"AttributeName": "pk", "AttributeType": "S"}],
        BillingMode="PAY_PER_REQUEST",
    )
    counts = []
    for trial in range(TRIALS):
        barrier = threading.Barrier(RACERS)
        winners, errors = [], []

        def claim(racer):
            barrier.wait()
            try:
                client.put_item(
                    TableName="race",
                    Item={"pk": {"S": f"key-{trial}"}, "token": {"S": str(racer)}},
                    ConditionExpression="attribute_not_exists(pk)",
                )
                winners.append(racer)
            except client.exceptions.ConditionalCheckFailedException:
                pass
            except Exception as e:  # noqa: BLE001 - reported below, the test fails on it
                errors.append(repr(e))

        threads = [threading.Thread(target=claim, args=(r,)) for r in range(RACERS)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        assert errors == [], errors
        stored = client.get_item(TableName="race", Key={"pk": {"S": f"key-{trial}"}})["Item"]["token"]["S"]
        counts.append((len(winners), stored in map(str, winners)))
    return counts


@pytest.fixture
def server(tmp_path, request):
    procs = []

    def run(code, name):
        proc, url = start(code, tmp_path, name)
        procs.append(proc)
        return url

    yield run
    for proc in procs:
        proc.kill()
        proc.wait()


def test_plain_moto_lets_racing_conditional_puts_all_win_when_the_gap_is_widened(server):
    # The race the launcher closes is real: without it, more than one claim wins every trial.
    counts = winners_per_trial(server(PLAIN, "plain"))
    print("plain moto, winners per trial:", counts)
    assert all(winners > 1 for winners, _ in counts), counts


def test_the_launcher_gives_one_winner_per_key_however_wide_the_gap(server):
    counts = winners_per_trial(server(THROUGH_LAUNCHER, "launcher"))
    print("through the launcher, winners per trial:", counts)
    assert counts == [(1, True)] * TRIALS, counts


def test_sqs_is_not_held_behind_dynamodb(server):
    # The lock covers DynamoDB only: an SQS long poll waits on its own while DynamoDB keeps answering.
    url = server(THROUGH_LAUNCHER, "launcher-sqs")
    env = dict(region_name="us-east-1", aws_access_key_id="testing", aws_secret_access_key="testing", endpoint_url=url)
    sqs = boto3.client("sqs", config=botocore.config.Config(read_timeout=30), **env)
    dynamodb = boto3.client("dynamodb", **env)
    queue = sqs.create_queue(QueueName="q")["QueueUrl"]
    polled = []
    poller = threading.Thread(target=lambda: polled.append(sqs.receive_message(QueueUrl=queue, WaitTimeSeconds=5)))
    poller.start()
    time.sleep(0.5)
    started = time.monotonic()
    dynamodb.list_tables()
    answered_in = time.monotonic() - started
    poller.join()
    assert "Messages" not in polled[0]
    assert answered_in < 4, f"ListTables waited {answered_in:.1f} s behind an SQS long poll"


def load_launcher():
    """The launcher as a module (importing it patches moto's dispatcher in this process only)."""
    spec = importlib.util.spec_from_file_location("moto_launcher", LAUNCHER)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_write_lock_is_handed_to_its_waiters_in_the_order_they_came():
    # threading.Lock wakes any waiter: under a burst of hundreds of writes one could wait past the client's timeout
    # (seen: make test's proxy test, 800 puts at once, one timed out after 10 s).
    lock = load_launcher().FifoLock()
    order = []

    def write(n):
        with lock:
            order.append(n)

    lock.__enter__()
    threads = []
    for n in range(20):
        thread = threading.Thread(target=write, args=(n,))
        thread.start()
        threads.append(thread)
        deadline = time.monotonic() + 10
        while lock.waiting() < n + 1:  # queued before the next one starts: the arrival order is known
            assert time.monotonic() < deadline, f"writer {n} never queued"
            time.sleep(0.001)
    lock.__exit__(None, None, None)
    for thread in threads:
        thread.join(10)
    assert order == list(range(20)), order


def test_only_writes_take_the_lock():
    launcher = load_launcher()
    assert {"GetItem", "Query", "Scan", "BatchGetItem", "TransactGetItems"} <= launcher._READS
    assert not {"PutItem", "UpdateItem", "DeleteItem", "BatchWriteItem", "TransactWriteItems"} & launcher._READS


def test_cloudformation_is_loaded_on_its_first_request_not_at_start():
    # Importing moto's CloudFormation models loads nearly every backend (seconds of CPU on a loaded machine); every
    # test harness starts a moto, and almost none of them sees CloudFormation.
    probe = (
        f"import runpy, sys; runpy.run_path({str(LAUNCHER)!r}, run_name='probe'); "
        "print('moto.cloudformation.models' in sys.modules)"
    )
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=120, check=True)
    assert out.stdout.strip() == "False", out.stdout + out.stderr


CHILD = """
Resources:
  Queue:
    Type: AWS::SQS::Queue
    Properties:
      QueueName: nested-child
Outputs:
  QueueArn:
    Value: !GetAtt Queue.Arn
"""


def test_a_parent_stack_reads_its_nested_stacks_outputs(server):
    # moto 5.2.5 creates a nested stack but answers its Fn::GetAtt <Stack>.Outputs.<Name> with HTTP 500: through the
    # launcher the parent gets the child's output (what a SAM nested application such as sqsafe/consumer.yaml needs).
    url = server(f"import runpy\nrunpy.run_path({str(LAUNCHER)!r}, run_name='__main__')", "launcher-cfn")
    env = dict(region_name="us-east-1", aws_access_key_id="testing", aws_secret_access_key="testing", endpoint_url=url)
    s3 = boto3.client("s3", **env)
    s3.create_bucket(Bucket="templates")
    s3.put_object(Bucket="templates", Key="child.yaml", Body=CHILD.encode())
    parent = {
        "Resources": {
            "Child": {
                "Type": "AWS::CloudFormation::Stack",
                "Properties": {"TemplateURL": "https://templates.s3.amazonaws.com/child.yaml"},
            },
        },
        "Outputs": {"ChildQueueArn": {"Value": {"Fn::GetAtt": ["Child", "Outputs.QueueArn"]}}},
    }
    cfn = boto3.client("cloudformation", **env)
    cfn.create_stack(StackName="parent", TemplateBody=json.dumps(parent))
    stack = cfn.describe_stacks(StackName="parent")["Stacks"][0]
    assert stack["StackStatus"] == "CREATE_COMPLETE", stack
    outputs = {o["OutputKey"]: o["OutputValue"] for o in stack.get("Outputs", [])}
    sqs = boto3.client("sqs", **env)
    child_queue = sqs.get_queue_url(QueueName="nested-child")["QueueUrl"]
    arn = sqs.get_queue_attributes(QueueUrl=child_queue, AttributeNames=["QueueArn"])["Attributes"]["QueueArn"]
    assert outputs == {"ChildQueueArn": arn}
