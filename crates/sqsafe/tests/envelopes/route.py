"""Sets up one real path into an SQS queue in moto server and sends the same intent through it twice, for
crates/sqsafe/tests/facade/envelopes.rs (the Rust tests have the SQS and DynamoDB SDKs only; this is boto3 from the
venv).

    route.py KIND PREFIX     KIND: sns | sns-raw | eventbridge | s3

sns: an SNS topic with an SQS subscription (the notification wraps each publish); sns-raw: the same with
RawMessageDelivery; eventbridge: a rule on the default bus with the queue as its target; s3: a bucket whose
ObjectCreated notifications go to the queue (S3 also sends its s3:TestEvent when they are set up). Publishes twice
(puts the same object twice), with the correlation id `corr-PREFIX` where the path carries message attributes.
Prints {"queue_url", "queue_arn", "expected"}: how many messages the queue should get. The endpoint and credentials
come from the environment (AWS_ENDPOINT_URL, loopback only).
"""

import json
import os
import sys
from urllib.parse import urlparse

import boto3


def main() -> int:
    kind, prefix = sys.argv[1], sys.argv[2]
    endpoint = os.environ["AWS_ENDPOINT_URL"]
    if urlparse(endpoint).hostname not in ("127.0.0.1", "localhost"):
        raise SystemExit(f"route.py: {endpoint} is not loopback")
    session = dict(endpoint_url=endpoint, region_name="us-east-1", aws_access_key_id="testing",
                   aws_secret_access_key="testing")
    sqs = boto3.client("sqs", **session)
    queue_url = sqs.create_queue(QueueName=f"{prefix}-queue")["QueueUrl"]
    queue_arn = sqs.get_queue_attributes(QueueUrl=queue_url, AttributeNames=["QueueArn"])["Attributes"]["QueueArn"]
    intent = json.dumps({"tenant": "acme", "id": f"{prefix}-1", "amount": 1250})
    expected = 2
    if kind in ("sns", "sns-raw"):
        sns = boto3.client("sns", **session)
        topic = sns.create_topic(Name=f"{prefix}-topic")["TopicArn"]
        attributes = {"RawMessageDelivery": "true"} if kind == "sns-raw" else {}
        sns.subscribe(TopicArn=topic, Protocol="sqs", Endpoint=queue_arn, Attributes=attributes)
        for _ in range(2):
            sns.publish(TopicArn=topic, Message=intent,
                        MessageAttributes={"correlationId": {"DataType": "String", "StringValue": f"corr-{prefix}"}})
    elif kind == "eventbridge":
        events = boto3.client("events", **session)
        events.put_rule(Name=f"{prefix}-rule", EventPattern=json.dumps({"source": [f"{prefix}.shop"]}))
        events.put_targets(Rule=f"{prefix}-rule", Targets=[{"Id": "queue", "Arn": queue_arn}])
        for _ in range(2):
            events.put_events(Entries=[{"Source": f"{prefix}.shop", "DetailType": "PaymentRequested",
                                        "Detail": intent}])
    elif kind == "s3":
        s3 = boto3.client("s3", **session)
        bucket = f"{prefix}-uploads"
        s3.create_bucket(Bucket=bucket)
        s3.put_bucket_notification_configuration(Bucket=bucket, NotificationConfiguration={
            "QueueConfigurations": [{"QueueArn": queue_arn, "Events": ["s3:ObjectCreated:*"]}]})
        for _ in range(2):
            s3.put_object(Bucket=bucket, Key="incoming/day 1.csv", Body=b"id,amount\n1,1250\n")
        expected = 3  # and the s3:TestEvent
    else:
        raise SystemExit(f"route.py: unknown kind {kind!r}")
    print(json.dumps({"queue_url": queue_url, "queue_arn": queue_arn, "expected": expected}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
