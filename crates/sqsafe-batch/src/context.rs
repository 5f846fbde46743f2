//! The sqsafe context of a dead letter, carried on its DLQ copy as one message attribute of compact JSON
//! ([`attributes::CONTEXT`](crate::attributes::CONTEXT)): written by [`SqsDeadLetterQueue`](crate::SqsDeadLetterQueue),
//! read by `sqsafe dlq inspect` and `sqsafe dlq redrive` (crate `sqsafe-cli`).
//!
//! One attribute, not one per fact, because SQS allows 10 message attributes per message: the context takes one of
//! them, the correlation id another, and the other 8 are left for the original message's own attributes, which a
//! redrive restores.

use serde::{Deserialize, Serialize};

use crate::redrive::RedriveContext;
use crate::stream::StreamOrigin;

/// What an operator needs to understand a dead letter, and what a redrive needs to send it back.
///
/// Its attribute value is compact JSON, fields in this order, each optional field left out when it is not known
/// (or was dropped to fit the DLQ's message size, see [`SqsDeadLetterQueue`](crate::SqsDeadLetterQueue)), times in
/// RFC 3339 as [`RedriveContext`] writes them:
///
/// ```text
/// {"error_kind":"precondition","original_message_id":"059f36b4-87a3-44ab-83d2-661975830a7d",
///  "error_class":"permanent","error":"insufficient balance","attempts":3,"consumer":"apply-ledger",
///  "consumer_version":2,"source_queue":"arn:aws:sqs:eu-west-1:123456789012:ledger",
///  "first_sent":"2025-06-15T15:06:40.123Z","expires":"2025-07-15T15:06:40.123Z"}
/// ```
///
/// Reading ignores fields it does not know, so a later version may add some.
///
/// ```
/// use sqsafe_batch::DeadLetterContext;
///
/// let context = DeadLetterContext {
///     error_kind: "precondition".into(),
///     original_message_id: "059f36b4".into(),
///     attempts: Some(3),
///     ..DeadLetterContext::default()
/// };
/// let value = context.to_attribute_value();
/// assert_eq!(value, r#"{"error_kind":"precondition","original_message_id":"059f36b4","attempts":3}"#);
/// assert_eq!(DeadLetterContext::parse(&value), Some(context));
/// ```
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct DeadLetterContext {
    /// Error label, e.g. `payload_mismatch` ([`RecordError::kind`](crate::RecordError::kind)). Always present.
    pub error_kind: String,
    /// Message id of the original message, to find it by (the DLQ copy has an id of its own). Always present.
    pub original_message_id: String,
    /// `transient` (attempts exhausted) or `permanent`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error_class: Option<String>,
    /// The error message: at most 1,024 characters, less (ending in `…`) when shortened to fit the DLQ's message
    /// size. Left out when empty.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    /// Delivery attempts made (`ApproximateReceiveCount` of the last one).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub attempts: Option<u32>,
    /// Consumer name.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub consumer: Option<String>,
    /// Consumer (effect) version.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub consumer_version: Option<u32>,
    /// A stream record's origin (stream, shard, sequence number, event id, partition key); left out for an SQS
    /// message. Such a letter has no `source_queue`: `sqsafe dlq redrive` sends it only where `--to` says.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stream: Option<StreamOrigin>,
    /// What a redrive needs: the source queue, the first send and the end of the idempotency window (the fields
    /// `source_queue`, `first_sent` and `expires`, beside the others in the JSON).
    #[serde(flatten)]
    pub redrive: RedriveContext,
}

impl DeadLetterContext {
    /// The attribute value: compact JSON.
    pub fn to_attribute_value(&self) -> String {
        // Serialising strings, numbers and RFC 3339 times cannot fail.
        serde_json::to_string(self).unwrap_or_default()
    }

    /// Reads an attribute value written by [`to_attribute_value`](Self::to_attribute_value); `None` when it is not
    /// in that form (not JSON, no `error_kind` or `original_message_id`, a time that is not RFC 3339). Unknown fields
    /// are ignored.
    pub fn parse(value: &str) -> Option<Self> {
        serde_json::from_str(value).ok()
    }
}

#[cfg(test)]
mod tests {
    use std::time::{Duration, SystemTime};

    use super::*;

    fn full() -> DeadLetterContext {
        let sent = SystemTime::UNIX_EPOCH + Duration::from_millis(1_750_000_000_123);
        DeadLetterContext {
            error_kind: "precondition".into(),
            original_message_id: "059f36b4-87a3-44ab-83d2-661975830a7d".into(),
            error_class: Some("permanent".into()),
            error: Some(r#"insufficient balance: "a-1" has 700"#.into()),
            attempts: Some(3),
            consumer: Some("apply-ledger".into()),
            consumer_version: Some(2),
            stream: None,
            redrive: RedriveContext {
                source_queue: Some("arn:aws:sqs:us-east-1:123456789012:ledger".into()),
                first_sent: Some(sent),
                expires: Some(sent + Duration::from_secs(30 * 86_400)),
            },
        }
    }

    #[test]
    fn every_field_in_order_and_back() {
        let value = full().to_attribute_value();
        assert_eq!(
            value,
            r#"{"error_kind":"precondition","original_message_id":"059f36b4-87a3-44ab-83d2-661975830a7d","error_class":"permanent","error":"insufficient balance: \"a-1\" has 700","attempts":3,"consumer":"apply-ledger","consumer_version":2,"source_queue":"arn:aws:sqs:us-east-1:123456789012:ledger","first_sent":"2025-06-15T15:06:40.123Z","expires":"2025-07-15T15:06:40.123Z"}"#
        );
        assert_eq!(DeadLetterContext::parse(&value), Some(full()));
    }

    #[test]
    fn unknown_fields_are_left_out_and_ignored() {
        let minimal = DeadLetterContext {
            error_kind: "bad_payload".into(),
            original_message_id: "m-1".into(),
            ..DeadLetterContext::default()
        };
        let value = minimal.to_attribute_value();
        assert_eq!(
            value,
            r#"{"error_kind":"bad_payload","original_message_id":"m-1"}"#
        );
        assert_eq!(DeadLetterContext::parse(&value), Some(minimal.clone()));
        assert_eq!(
            DeadLetterContext::parse(
                r#"{"error_kind":"bad_payload","original_message_id":"m-1","later":{"x":1}}"#
            ),
            Some(minimal),
            "a later version's fields are ignored"
        );
    }

    #[test]
    fn what_is_not_sqsafe_s_context_is_not_read() {
        for value in [
            "not json",
            "{}",
            r#"{"error_kind":"x"}"#,
            r#"{"error_kind":"x","original_message_id":"m","attempts":"three"}"#,
            r#"{"error_kind":"x","original_message_id":"m","first_sent":"yesterday"}"#,
        ] {
            assert_eq!(DeadLetterContext::parse(value), None, "{value}");
        }
    }
}
