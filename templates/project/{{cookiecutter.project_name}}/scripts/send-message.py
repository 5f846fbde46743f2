"""Sends one message to a queue of the local pipeline (`make local` prints ready-made commands that use this).

    .venv/bin/python scripts/send-message.py --endpoint URL --queue URL --body FILE [--group ID] [--correlation-id ID]

--group is required by FIFO queues (the MessageGroupId: the account, the customer...); --correlation-id becomes the
`correlationId` message attribute that sqsafe carries into its logs, its DLQ context and what the consumer calls.
"""
import argparse
import sys
from pathlib import Path

import boto3

parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
parser.add_argument("--endpoint", required=True, help="the local AWS endpoint (loopback only)")
parser.add_argument("--queue", required=True, help="the queue URL")
parser.add_argument("--body", required=True, type=Path, help="a file holding the message body")
parser.add_argument("--group", help="MessageGroupId (FIFO queues)")
parser.add_argument("--correlation-id", help="the correlationId message attribute")
args = parser.parse_args()
if not args.endpoint.startswith(("http://127.0.0.1", "http://localhost")):
    sys.exit("--endpoint must be the local moto server (loopback)")
if args.queue.endswith(".fifo") and not args.group:
    sys.exit("a FIFO queue needs --group (its MessageGroupId)")
sqs = boto3.client(
    "sqs", endpoint_url=args.endpoint, region_name="us-east-1", aws_access_key_id="x", aws_secret_access_key="x"
)
send = {"QueueUrl": args.queue, "MessageBody": args.body.read_text(encoding="utf-8")}
if args.group:
    send["MessageGroupId"] = args.group
if args.correlation_id:
    send["MessageAttributes"] = {"correlationId": {"DataType": "String", "StringValue": args.correlation_id}}
print(f"sent {sqs.send_message(**send)['MessageId']}")
