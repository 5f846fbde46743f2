"""The Powertools peer: charges each PaymentRequested once, like functions/charge-payment, with Powertools for AWS
Lambda (Python): BatchProcessor for partial batch failures, idempotent_function on a DynamoDB persistence layer.
`handler` takes SQS batches; `kinesis_handler` (BENCH_HANDLER=handler.kinesis_handler, figure 9) Kinesis batches
whose records' data are the same payments, with BatchProcessor(EventType.KinesisDataStreams).

The idempotency key is the payment (tenant, payment_id); the payload is validated on the same fields as
charge-payment's INTENT_FIELDS. The effect is the same POST to the payments API with an Idempotency-Key.
"""

import hashlib
import json
import os

import urllib3
from aws_lambda_powertools import Logger
from aws_lambda_powertools.utilities.batch import BatchProcessor, EventType, process_partial_response
from aws_lambda_powertools.utilities.data_classes.kinesis_stream_event import KinesisStreamRecord
from aws_lambda_powertools.utilities.data_classes.sqs_event import SQSRecord
from aws_lambda_powertools.utilities.idempotency import (
    DynamoDBPersistenceLayer,
    IdempotencyConfig,
    idempotent_function,
)

logger = Logger()
processor = BatchProcessor(event_type=EventType.SQS)
kinesis_processor = BatchProcessor(event_type=EventType.KinesisDataStreams)
persistence = DynamoDBPersistenceLayer(table_name=os.environ["IDEMPOTENCY_TABLE"])
config = IdempotencyConfig(
    event_key_jmespath="[tenant, payment_id]",
    payload_validation_jmespath="[tenant, payment_id, amount, currency, customer_id]",
    raise_on_no_idempotency_key=True,
    expires_after_seconds=30 * 86400,
    use_local_cache=os.environ.get("BENCH_LOCAL_CACHE") == "1",
)
http = urllib3.PoolManager(retries=False, timeout=5.0)
CHARGES_URL = os.environ["PAYMENTS_API_URL"].rstrip("/") + "/v1/charges"


@idempotent_function(data_keyword_argument="payment", config=config, persistence_store=persistence)
def charge(payment: dict) -> dict:
    key = hashlib.sha256(f"{payment['tenant']}#payment:{payment['payment_id']}".encode()).hexdigest()
    body = {field: payment[field] for field in ("payment_id", "amount", "currency", "customer_id")}
    response = http.request(
        "POST",
        CHARGES_URL,
        body=json.dumps(body),
        headers={"Content-Type": "application/json", "Idempotency-Key": key},
    )
    if response.status >= 300:
        raise RuntimeError(f"payments API answered {response.status}")
    return json.loads(response.data)


def record_handler(record: SQSRecord) -> dict:
    return charge_payment(json.loads(record.body))


def kinesis_record_handler(record: KinesisStreamRecord) -> dict:
    return charge_payment(record.kinesis.data_as_json())


def charge_payment(payment: dict) -> dict:
    if payment.get("version") != "1":
        raise ValueError(f"unknown PaymentRequested version {payment.get('version')!r}")
    currency = payment["currency"]
    if payment["amount"] <= 0 or len(currency) != 3 or not currency.isupper() or not payment["customer_id"].strip():
        raise ValueError("invalid payment")
    charged = charge(payment=payment)
    logger.info("payment charged", extra={"payment_id": payment["payment_id"], "charge_id": charged["id"]})
    return charged


def handler(event, context):
    config.register_lambda_context(context)
    return process_partial_response(event=event, record_handler=record_handler, processor=processor, context=context)


def kinesis_handler(event, context):
    config.register_lambda_context(context)
    return process_partial_response(
        event=event, record_handler=kinesis_record_handler, processor=kinesis_processor, context=context
    )
