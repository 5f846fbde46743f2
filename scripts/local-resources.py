"""Creates the resources the functions' READMEs use in a running moto server (`make moto`): the idempotency and ledger
tables, the two source queues and their DLQs. Idempotent: what exists is left alone. Prints the queue URLs to pass
as QUEUE_URL and DLQ_URL."""
import os
import sys

import boto3

endpoint = os.environ.get("AWS_ENDPOINT_URL")
if not endpoint or not endpoint.startswith("http://127.0.0.1"):
    sys.exit("AWS_ENDPOINT_URL must point at the local moto server (run `make moto` and apply its export lines)")
kw = dict(endpoint_url=endpoint, region_name="us-east-1", aws_access_key_id="testing", aws_secret_access_key="testing")
dynamodb, sqs = boto3.client("dynamodb", **kw), boto3.client("sqs", **kw)

for name, keys in [("idempotency", [("pk", "HASH")]), ("ledger", [("pk", "HASH"), ("sk", "RANGE")])]:
    try:
        dynamodb.create_table(
            TableName=name,
            BillingMode="PAY_PER_REQUEST",
            AttributeDefinitions=[{"AttributeName": k, "AttributeType": "S"} for k, _ in keys],
            KeySchema=[{"AttributeName": k, "KeyType": t} for k, t in keys],
        )
    except dynamodb.exceptions.ResourceInUseException:
        pass  # already there
    else:
        if name == "idempotency":
            dynamodb.update_time_to_live(
                TableName=name, TimeToLiveSpecification={"Enabled": True, "AttributeName": "expiration"}
            )
    print(f"table {name}")
fifo = {"FifoQueue": "true"}
for name, attrs in [
    ("charge-payment", {}),
    ("charge-payment-dlq", {}),
    ("apply-ledger.fifo", {**fifo, "ContentBasedDeduplication": "true"}),
    ("apply-ledger-dlq.fifo", fifo),
]:
    print(f"queue {sqs.create_queue(QueueName=name, Attributes=attrs)['QueueUrl']}")
