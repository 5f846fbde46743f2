//! The events every peer gets: `PaymentRequested` (version 1) bodies in SQS batches shaped exactly as the local
//! event source mapping shapes what it receives (`sqsafe_local::esm::sqs_event`).

use aws_sdk_sqs::types::{Message, MessageAttributeValue, MessageSystemAttributeName};
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
    fn failures_are_counted_from_the_answer() {
        assert_eq!(failures(&json!({"batchItemFailures": []})), 0);
        assert_eq!(
            failures(&json!({"batchItemFailures": [{"itemIdentifier": "a"}]})),
            1
        );
        assert_eq!(failures(&Value::Null), 0);
    }
}
