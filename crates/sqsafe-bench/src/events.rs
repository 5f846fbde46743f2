//! The events every peer gets: `PaymentRequested` (version 1) bodies in SQS batches shaped exactly as the local
//! event source mapping shapes what it receives (`sqsafe_local::esm::sqs_event`), or in Kinesis batches shaped as
//! Lambda's stream poller (and `sqsafe_local::esm::StreamMapping`) hands a shard's records over.

use aws_sdk_sqs::types::{Message, MessageAttributeValue, MessageSystemAttributeName};
use base64::Engine as _;
use serde_json::{Value, json};

/// The queue the batches claim to come from (a standard queue: records run concurrently where a peer can).
pub(crate) const QUEUE_ARN: &str = "arn:aws:sqs:us-east-1:123456789012:bench-payments";

/// The body of payment `payment_id`, as a publisher sends it.
pub(crate) fn payment_body(payment_id: &str) -> String {
    json!({
        "type": "PaymentRequested",
        "version": "1",
        "payment_id": payment_id,
        "tenant": "acme",
        "amount": 1250,
        "currency": "EUR",
        "customer_id": "cus-17",
    })
    .to_string()
}

/// A batch with one record per payment id; each record gets a message id of its own.
pub(crate) fn batch(payment_ids: &[String]) -> Value {
    let messages: Vec<Message> = payment_ids.iter().map(|id| message(id)).collect();
    sqsafe_local::esm::sqs_event(&messages, QUEUE_ARN)
}

fn message(payment_id: &str) -> Message {
    let correlation = MessageAttributeValue::builder()
        .data_type("String")
        .string_value(format!("corr-{payment_id}"))
        .build();
    let mut message = Message::builder()
        .message_id(uuid::Uuid::new_v4().to_string())
        .receipt_handle(format!("bench-receipt-{payment_id}"))
        .body(payment_body(payment_id))
        .md5_of_body("00000000000000000000000000000000")
        .attributes(MessageSystemAttributeName::ApproximateReceiveCount, "1")
        .attributes(MessageSystemAttributeName::SentTimestamp, "1796025600000");
    if let Ok(attribute) = correlation {
        message = message.message_attributes("correlationId", attribute);
    }
    message.build()
}

/// The stream the Kinesis batches claim to come from.
pub(crate) const STREAM_ARN: &str = "arn:aws:kinesis:us-east-1:123456789012:stream/bench-payments";
/// Their shard.
pub(crate) const SHARD_ID: &str = "shardId-000000000000";
/// Their partition key: one customer's payments, so order matters between every two of them.
pub(crate) const PARTITION_KEY: &str = "cus-17";

/// A Kinesis batch of one shard: a record per (payment id, sequence number), in that order, one partition key.
pub(crate) fn kinesis_batch(records: &[(String, u64)]) -> Value {
    let records: Vec<Value> = records
        .iter()
        .map(|(payment_id, sequence)| {
            let sequence = sequence_number(*sequence);
            json!({
                "kinesis": {
                    "kinesisSchemaVersion": "1.0",
                    "partitionKey": PARTITION_KEY,
                    "sequenceNumber": sequence,
                    "data": base64::engine::general_purpose::STANDARD.encode(payment_body(payment_id)),
                    "approximateArrivalTimestamp": 1_796_025_600.123,
                },
                "eventSource": "aws:kinesis",
                "eventVersion": "1.0",
                "eventID": format!("{SHARD_ID}:{sequence}"),
                "eventName": "aws:kinesis:record",
                "invokeIdentityArn": "arn:aws:iam::123456789012:role/bench",
                "awsRegion": "us-east-1",
                "eventSourceARN": STREAM_ARN,
            })
        })
        .collect();
    json!({ "Records": records })
}

/// A Kinesis sequence number: 56 digits as Kinesis writes them, ordered as `n` is.
pub(crate) fn sequence_number(n: u64) -> String {
    format!("4965{n:052}")
}

/// The `itemIdentifier`s an answer's `batchItemFailures` name.
pub(crate) fn failure_ids(answer: &Value) -> Vec<String> {
    answer
        .get("batchItemFailures")
        .and_then(Value::as_array)
        .map(|failures| {
            failures
                .iter()
                .filter_map(|f| f.get("itemIdentifier").and_then(Value::as_str))
                .map(str::to_owned)
                .collect()
        })
        .unwrap_or_default()
}

/// The `batchItemFailures` of an answer: empty when every record succeeded.
pub(crate) fn failures(answer: &Value) -> usize {
    answer
        .get("batchItemFailures")
        .and_then(Value::as_array)
        .map_or(0, Vec::len)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_batch_carries_each_payment_once_with_its_own_message_id() {
        let ids: Vec<String> = (0..3).map(|i| format!("p-{i}")).collect();
        let event = batch(&ids);
        let records = event["Records"].as_array().expect("records");
        assert_eq!(records.len(), 3);
        assert_ne!(records[0]["messageId"], records[1]["messageId"]);
        let body: Value =
            serde_json::from_str(records[2]["body"].as_str().expect("body")).expect("json");
        assert_eq!(body["payment_id"], "p-2");
        assert_eq!(body["version"], "1");
        assert_eq!(records[0]["attributes"]["ApproximateReceiveCount"], "1");
        assert_eq!(
            records[0]["messageAttributes"]["correlationId"]["stringValue"],
            "corr-p-0"
        );
        assert_eq!(records[0]["eventSourceARN"], QUEUE_ARN);
    }

    #[test]
    fn a_kinesis_batch_carries_each_payment_in_order_under_one_partition_key() {
        let records: Vec<(String, u64)> = (0..3).map(|i| (format!("p-{i}"), 7 + i)).collect();
        let event = kinesis_batch(&records);
        let records = event["Records"].as_array().expect("records");
        assert_eq!(records.len(), 3);
        let data = base64::engine::general_purpose::STANDARD
            .decode(records[2]["kinesis"]["data"].as_str().expect("data"))
            .expect("base64");
        let body: Value = serde_json::from_slice(&data).expect("json");
        assert_eq!(body["payment_id"], "p-2");
        assert_eq!(records[0]["kinesis"]["partitionKey"], PARTITION_KEY);
        let seq = |i: usize| {
            records[i]["kinesis"]["sequenceNumber"]
                .as_str()
                .expect("seq")
                .to_owned()
        };
        assert!(seq(0) < seq(1) && seq(1) < seq(2) && seq(0).len() == 56);
        assert_eq!(records[1]["eventID"], format!("{SHARD_ID}:{}", seq(1)));
        assert_eq!(records[0]["eventSource"], "aws:kinesis");
    }

    #[test]
    fn the_failures_an_answer_names_are_read() {
        let answer =
            json!({"batchItemFailures": [{"itemIdentifier": "4"}, {"itemIdentifier": "9"}]});
        assert_eq!(failure_ids(&answer), ["4", "9"]);
        assert!(failure_ids(&json!({"batchItemFailures": []})).is_empty());
        assert!(failure_ids(&Value::Null).is_empty());
    }

    #[test]
    fn failures_are_counted_from_the_answer() {
        assert_eq!(failures(&json!({"batchItemFailures": []})), 0);
        assert_eq!(
            failures(&json!({"batchItemFailures": [{"itemIdentifier": "a"}]})),
            1
        );
        assert_eq!(failures(&Value::Null), 0);
    }
}
