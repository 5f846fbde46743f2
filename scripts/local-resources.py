"""Creates template.yaml's tables and queues in a running moto server (`make moto`), for running the functions by hand
as their READMEs show (`cargo lambda watch`). Names follow the template without the stack name: `IdempotencyTable` is
`idempotency`, `${AWS::StackName}-charge-payment` is `charge-payment`. Every consumer in the template is found, those
added with `cargo xtask new-consumer` too. Idempotent: what exists is left alone. Prints the queue URLs to pass as
QUEUE_URL and DLQ_URL."""
import os
import re
import sys
from pathlib import Path

import boto3
from samtranslator.yaml_helper import yaml_parse

ROOT = Path(__file__).resolve().parent.parent

endpoint = os.environ.get("AWS_ENDPOINT_URL")
if not endpoint or not endpoint.startswith("http://127.0.0.1"):
    sys.exit("AWS_ENDPOINT_URL must point at the local moto server (run `make moto` and apply its export lines)")
kw = dict(endpoint_url=endpoint, region_name="us-east-1", aws_access_key_id="testing", aws_secret_access_key="testing")
dynamodb, sqs = boto3.client("dynamodb", **kw), boto3.client("sqs", **kw)
resources = yaml_parse((ROOT / "template.yaml").read_text(encoding="utf-8"))["Resources"]


def table_name(logical_id: str) -> str:
    """`IdempotencyTable` -> `idempotency`, `SendInvoiceTable` -> `send-invoice`."""
    base = logical_id.removesuffix("Table")
    return re.sub(r"(?<!^)(?=[A-Z])", "-", base).lower()


def queue_name(props: dict) -> str:
    name = props["QueueName"]
    name = name.get("Fn::Sub", name) if isinstance(name, dict) else name
    return name.replace("${AWS::StackName}-", "")


for logical_id, res in sorted(resources.items()):
    if res["Type"] != "AWS::DynamoDB::Table":
        continue
    props, name = res["Properties"], table_name(logical_id)
    extra = {}
    if props.get("StreamSpecification"):
        # The outbox table's stream, which the outbox relay reads (functions/outbox-relay/README.md).
        extra["StreamSpecification"] = {"StreamEnabled": True, **props["StreamSpecification"]}
    try:
        dynamodb.create_table(
            TableName=name,
            BillingMode="PAY_PER_REQUEST",
            AttributeDefinitions=props["AttributeDefinitions"],
            KeySchema=props["KeySchema"],
            **extra,
        )
    except dynamodb.exceptions.ResourceInUseException:
        pass  # already there
    else:
        ttl = props.get("TimeToLiveSpecification")
        if ttl:
            dynamodb.update_time_to_live(TableName=name, TimeToLiveSpecification=ttl)
    print(f"table {name}  ({logical_id})")

for logical_id, res in sorted(resources.items()):
    if res["Type"] != "AWS::SQS::Queue":
        continue
    props = res["Properties"]
    attrs = {}
    if props.get("FifoQueue"):
        attrs["FifoQueue"] = "true"
    if props.get("ContentBasedDeduplication"):
        attrs["ContentBasedDeduplication"] = "true"
    name = queue_name(props)
    try:
        url = sqs.create_queue(QueueName=name, Attributes=attrs)["QueueUrl"]
    except sqs.exceptions.QueueNameExists:
        url = sqs.get_queue_url(QueueName=name)["QueueUrl"]  # already there
    print(f"queue {url}  ({logical_id})")
