"""What Powertools for AWS Lambda (Python) does with a Kinesis batch whose 4th record fails once, redelivered as
Lambda's event source mapping redelivers it: from the lowest sequence number the answer names.

10 records of one partition key; the handler's effect is "apply record n" (noted in order); record 4 raises the
first time. Lambda checkpoints at the reported sequence number and hands over every record from there. Printed: the
order the effects ran in, without idempotency and with the effect keyed on the record's sequence number (the best a
Powertools user can do: a record already applied is skipped). sqsafe's stream processor on the same case:
crates/sqsafe/tests/facade/streams.rs (1, 2, 3, then 4-10, each once).

Run: bash scripts/bench-venv.sh && .venv-bench/bin/python bench/peers/powertools/stream_order.py
Nothing here talks to AWS: Powertools' BatchProcessor is called in-process.
"""

import base64
import json

from aws_lambda_powertools.utilities.batch import BatchProcessor, EventType, process_partial_response


def event(ns):
    return {
        "Records": [
            {
                "kinesis": {
                    "kinesisSchemaVersion": "1.0",
                    "partitionKey": "order-7",
                    "sequenceNumber": f"{n:056d}",
                    "data": base64.b64encode(json.dumps({"n": n}).encode()).decode(),
                    "approximateArrivalTimestamp": 1780000000.123,
                },
                "eventSource": "aws:kinesis",
                "eventVersion": "1.0",
                "eventID": f"shardId-000000000000:{n:056d}",
                "eventName": "aws:kinesis:record",
                "invokeIdentityArn": "arn:aws:iam::123456789012:role/lambda",
                "awsRegion": "us-east-1",
                "eventSourceARN": "arn:aws:kinesis:us-east-1:123456789012:stream/orders",
            }
            for n in ns
        ]
    }


def run(keyed: bool) -> list[int]:
    applied: list[int] = []
    done: set[str] = set()
    failed_once = {"4": False}

    def handler(record):
        n = json.loads(record.kinesis.data_as_text())["n"]
        if keyed and record.kinesis.sequence_number in done:
            return  # the effect keyed on the sequence number: already applied
        if n == 4 and not failed_once["4"]:
            failed_once["4"] = True
            raise RuntimeError("record 4 fails once")
        applied.append(n)
        done.add(record.kinesis.sequence_number)

    processor = BatchProcessor(event_type=EventType.KinesisDataStreams)
    ns = list(range(1, 11))
    for _ in range(10):
        answer = process_partial_response(event=event(ns), record_handler=handler, processor=processor, context=None)
        named = [f["itemIdentifier"] for f in answer.get("batchItemFailures", [])]
        if not named:
            break
        lowest = min(int(s) for s in named)
        ns = [n for n in ns if n >= lowest]  # Lambda: every record from the checkpoint again
    return applied


def spans(order: list[int]) -> str:
    out, i = [], 0
    while i < len(order):
        j = i
        while j + 1 < len(order) and order[j + 1] == order[j] + 1:
            j += 1
        out.append(str(order[i]) if i == j else f"{order[i]}-{order[j]}")
        i = j + 1
    return ", ".join(out)


if __name__ == "__main__":
    import importlib.metadata

    version = importlib.metadata.version("aws-lambda-powertools")
    print(f"Powertools {version}, 10 Kinesis records of one partition key, the 4th failing once:")
    print(f"  effects as they ran:                   {spans(run(keyed=False))}")
    print(f"  keyed on the sequence number:          {spans(run(keyed=True))}")
