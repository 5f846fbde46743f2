//! A DLQ message read as a dead letter: its sqsafe context, and copies of one original message taken together.

use std::collections::HashMap;

use aws_sdk_sqs::types::{Message, MessageAttributeValue, MessageSystemAttributeName};
use jiff::{SignedDuration, Timestamp};
use sqsafe_batch::{RedriveContext, attributes};

/// The kind shown for a message without sqsafe's context: SQS's redrive policy moved it (the function crashed or
/// timed out on every delivery), or it was sent to the DLQ by something else.
pub const NO_CONTEXT: &str = "no_context";

/// SQS's limit of message attributes per message.
const MAX_ATTRIBUTES: usize = 10;

/// One DLQ message, read.
#[derive(Debug, Clone, PartialEq)]
pub struct DeadLetter {
    /// The DLQ copy's message id.
    pub dlq_message_id: String,
    /// The message id the consumer saw (`sqsafe.original_message_id`; without context, the DLQ message's own id, which
    /// SQS's redrive policy keeps).
    pub original_message_id: String,
    /// `sqsafe.error_kind`, or [`NO_CONTEXT`].
    pub kind: String,
    /// `sqsafe.error_class`: `permanent` or `transient`.
    pub class: Option<String>,
    /// `sqsafe.error`.
    pub error: Option<String>,
    /// `sqsafe.attempts`.
    pub attempts: Option<u32>,
    /// `sqsafe.consumer`.
    pub consumer: Option<String>,
    /// `sqsafe.consumer_version`.
    pub consumer_version: Option<u32>,
    /// The correlation id attribute.
    pub correlation_id: Option<String>,
    /// The source queue's ARN: from `sqsafe.redrive`, else SQS's `DeadLetterQueueSourceArn`.
    pub source_queue: Option<String>,
    /// When the original was first sent (`sqsafe.redrive`).
    pub first_sent: Option<Timestamp>,
    /// When the original's idempotency protection ends (`sqsafe.redrive`).
    pub expires: Option<Timestamp>,
    /// When this copy was sent to the DLQ (its `SentTimestamp`; for a message SQS moved to a standard DLQ, the
    /// original's).
    pub sent: Option<Timestamp>,
    /// `MessageGroupId` of a copy in a FIFO DLQ (the original's group).
    pub group_id: Option<String>,
    /// The copy has SQS's 10 attributes and no `sqsafe.redrive`: some original attributes may have been left out.
    pub attributes_may_be_missing: bool,
    /// The body, unchanged.
    pub body: String,
    /// Every message attribute of the copy.
    pub attributes: HashMap<String, MessageAttributeValue>,
}

impl DeadLetter {
    /// Reads a received message; `correlation_attribute` names the correlation id attribute.
    pub fn read(message: &Message, correlation_attribute: &str) -> Self {
        let attributes = message.message_attributes().cloned().unwrap_or_default();
        let text = |name: &str| {
            attributes
                .get(name)
                .and_then(|a| a.string_value())
                .map(str::to_owned)
        };
        let number = |name: &str| text(name).and_then(|v| v.trim().parse().ok());
        let system = |name: MessageSystemAttributeName| {
            message
                .attributes()
                .and_then(|a| a.get(&name))
                .map(String::as_str)
        };
        let dlq_message_id = message.message_id().unwrap_or_default().to_owned();
        let kind = text(attributes::ERROR_KIND);
        let redrive = text(attributes::REDRIVE)
            .and_then(|v| RedriveContext::parse(&v))
            .unwrap_or_default();
        let time = |t: Option<std::time::SystemTime>| t.and_then(|t| Timestamp::try_from(t).ok());
        Self {
            original_message_id: text(attributes::ORIGINAL_MESSAGE_ID)
                .unwrap_or_else(|| dlq_message_id.clone()),
            kind: kind.clone().unwrap_or_else(|| NO_CONTEXT.to_owned()),
            class: text(attributes::ERROR_CLASS),
            error: text(attributes::ERROR_MESSAGE),
            attempts: number(attributes::ATTEMPTS),
            consumer: text(attributes::CONSUMER),
            consumer_version: number(attributes::CONSUMER_VERSION),
            correlation_id: text(correlation_attribute),
            source_queue: redrive.source_queue.clone().or_else(|| {
                system(MessageSystemAttributeName::DeadLetterQueueSourceArn).map(str::to_owned)
            }),
            first_sent: time(redrive.first_sent),
            expires: time(redrive.expires),
            sent: system(MessageSystemAttributeName::SentTimestamp)
                .and_then(|ms| ms.parse().ok())
                .and_then(|ms| Timestamp::from_millisecond(ms).ok()),
            group_id: system(MessageSystemAttributeName::MessageGroupId).map(str::to_owned),
            attributes_may_be_missing: kind.is_some()
                && attributes.len() >= MAX_ATTRIBUTES
                && !attributes.contains_key(attributes::REDRIVE),
            body: message.body().unwrap_or_default().to_owned(),
            dlq_message_id,
            attributes,
        }
    }

    /// The attributes a redriven message carries: the copy's, without sqsafe's failure context.
    pub fn original_attributes(&self) -> HashMap<String, MessageAttributeValue> {
        self.attributes
            .iter()
            .filter(|(name, _)| !name.starts_with(attributes::PREFIX))
            .map(|(name, value)| (name.clone(), value.clone()))
            .collect()
    }
}

/// One copy of a dead letter in the DLQ.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DlqCopy {
    /// Its DLQ message id.
    pub dlq_message_id: String,
    /// When it was sent to the DLQ.
    pub sent: Option<Timestamp>,
}

/// Where an age is counted from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AgeFrom {
    /// The original message's first send, recorded by sqsafe.
    FirstSent,
    /// The DLQ copy's send: for sqsafe's copies, the dead-lettering, later than the original's send by the time it
    /// spent in its queue; for a message SQS moved to a standard DLQ, the original's send.
    DlqCopy,
}

impl AgeFrom {
    /// `first_sent` or `dlq_copy`.
    pub fn as_str(self) -> &'static str {
        match self {
            AgeFrom::FirstSent => "first_sent",
            AgeFrom::DlqCopy => "dlq_copy",
        }
    }
}

/// A dead letter with every copy of it the scan found (dead-lettering is at least once: a crash between the DLQ send
/// and the delete leaves two copies of one original message).
#[derive(Debug, Clone, PartialEq)]
pub struct Entry {
    /// The first copy received, read.
    pub letter: DeadLetter,
    /// Every copy, in the order received.
    pub copies: Vec<DlqCopy>,
}

impl Entry {
    /// The earliest send known, and what it is.
    pub fn origin(&self) -> Option<(Timestamp, AgeFrom)> {
        if let Some(first) = self.letter.first_sent {
            return Some((first, AgeFrom::FirstSent));
        }
        self.copies
            .iter()
            .filter_map(|c| c.sent)
            .min()
            .map(|t| (t, AgeFrom::DlqCopy))
    }

    /// Its age at `now`.
    pub fn age(&self, now: Timestamp) -> Option<(SignedDuration, AgeFrom)> {
        self.origin()
            .map(|(t, from)| (now.duration_since(t).max(SignedDuration::ZERO), from))
    }

    /// When its idempotency protection ends: recorded by sqsafe, else the origin plus `window` when one is given.
    pub fn expires(&self, window: Option<SignedDuration>) -> Option<Timestamp> {
        self.letter.expires.or_else(|| {
            let (origin, _) = self.origin()?;
            origin.checked_add(window?).ok()
        })
    }
}

/// Reads `messages` and takes copies of one original message together, in the order first received.
pub(crate) fn entries(messages: &[Message], correlation_attribute: &str) -> Vec<Entry> {
    let mut out: Vec<Entry> = Vec::new();
    let mut index: HashMap<String, usize> = HashMap::new();
    for message in messages {
        let letter = DeadLetter::read(message, correlation_attribute);
        let copy = DlqCopy {
            dlq_message_id: letter.dlq_message_id.clone(),
            sent: letter.sent,
        };
        match index.get(&letter.original_message_id) {
            Some(&i) => out[i].copies.push(copy),
            None => {
                index.insert(letter.original_message_id.clone(), out.len());
                out.push(Entry {
                    letter,
                    copies: vec![copy],
                });
            }
        }
    }
    out
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    pub(crate) fn attr(value: &str) -> MessageAttributeValue {
        MessageAttributeValue::builder()
            .data_type("String")
            .string_value(value)
            .build()
            .expect("attribute")
    }

    /// A DLQ copy as sqsafe writes it, sent to the DLQ at `sent_ms`.
    pub(crate) fn copy(
        dlq_id: &str,
        original: &str,
        kind: &str,
        sent_ms: i64,
    ) -> aws_sdk_sqs::types::builders::MessageBuilder {
        Message::builder()
            .message_id(dlq_id)
            .receipt_handle(format!("rh-{dlq_id}"))
            .body(format!(r#"{{"id":"{original}"}}"#))
            .message_attributes(attributes::ERROR_KIND, attr(kind))
            .message_attributes(attributes::ERROR_CLASS, attr("permanent"))
            .message_attributes(attributes::ERROR_MESSAGE, attr("no such account"))
            .message_attributes(attributes::ATTEMPTS, attr("3"))
            .message_attributes(attributes::CONSUMER, attr("apply-ledger"))
            .message_attributes(attributes::CONSUMER_VERSION, attr("2"))
            .message_attributes(attributes::ORIGINAL_MESSAGE_ID, attr(original))
            .message_attributes("correlationId", attr(&format!("corr-{original}")))
            .message_attributes("tenant", attr("acme"))
            .attributes(
                MessageSystemAttributeName::SentTimestamp,
                sent_ms.to_string(),
            )
    }

    #[test]
    fn the_context_is_read_from_the_attributes() {
        let m = copy("d-1", "o-1", "precondition", 1_750_000_100_000)
            .message_attributes(
                attributes::REDRIVE,
                attr(r#"{"source_queue":"arn:aws:sqs:us-east-1:123456789012:ledger.fifo","first_sent":"2025-06-15T15:06:40Z","expires":"2025-07-15T15:06:40Z"}"#),
            )
            .build();
        let l = DeadLetter::read(&m, "correlationId");
        assert_eq!(l.original_message_id, "o-1");
        assert_eq!(l.kind, "precondition");
        assert_eq!(l.class.as_deref(), Some("permanent"));
        assert_eq!(l.error.as_deref(), Some("no such account"));
        assert_eq!((l.attempts, l.consumer_version), (Some(3), Some(2)));
        assert_eq!(l.consumer.as_deref(), Some("apply-ledger"));
        assert_eq!(l.correlation_id.as_deref(), Some("corr-o-1"));
        assert_eq!(
            l.source_queue.as_deref(),
            Some("arn:aws:sqs:us-east-1:123456789012:ledger.fifo")
        );
        assert_eq!(
            l.first_sent,
            Some(Timestamp::from_second(1_750_000_000).expect("t"))
        );
        assert!(!l.attributes_may_be_missing);
        let kept: Vec<_> = {
            let mut k: Vec<_> = l.original_attributes().into_keys().collect();
            k.sort();
            k
        };
        assert_eq!(kept, ["correlationId", "tenant"]);
    }

    #[test]
    fn a_message_without_context_is_its_own_original() {
        let m = Message::builder()
            .message_id("moved-1")
            .body("{}")
            .attributes(
                MessageSystemAttributeName::DeadLetterQueueSourceArn,
                "arn:aws:sqs:us-east-1:123456789012:payments",
            )
            .build();
        let l = DeadLetter::read(&m, "correlationId");
        assert_eq!(l.kind, NO_CONTEXT);
        assert_eq!(l.original_message_id, "moved-1");
        assert_eq!(
            l.source_queue.as_deref(),
            Some("arn:aws:sqs:us-east-1:123456789012:payments")
        );
    }

    #[test]
    fn copies_of_one_original_are_one_entry_aged_from_the_first_send() {
        let messages = [
            copy("d-1", "o-1", "precondition", 1_750_000_100_000).build(),
            copy("d-2", "o-2", "bad_payload", 1_750_000_200_000).build(),
            copy("d-3", "o-1", "precondition", 1_750_000_050_000).build(),
        ];
        let entries = entries(&messages, "correlationId");
        assert_eq!(entries.len(), 2);
        assert_eq!(entries[0].copies.len(), 2);
        let now = Timestamp::from_second(1_750_000_150).expect("t");
        // No first send recorded: the earliest copy's send.
        assert_eq!(
            entries[0].age(now),
            Some((SignedDuration::from_secs(100), AgeFrom::DlqCopy))
        );
        assert_eq!(entries[0].expires(None), None);
        assert_eq!(
            entries[0].expires(Some(SignedDuration::from_hours(1))),
            Some(Timestamp::from_second(1_750_003_650).expect("t"))
        );
    }
}
