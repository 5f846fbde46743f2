//! A DLQ message read as a dead letter: its sqsafe context, and copies of one original message taken together.

use std::collections::HashMap;

use aws_sdk_sqs::types::{Message, MessageAttributeValue, MessageSystemAttributeName};
use jiff::{SignedDuration, Timestamp};
use sqsafe_batch::{DeadLetterContext, RedriveContext, attributes};

/// The kind shown for a message without sqsafe's context: SQS's redrive policy moved it (the function crashed or
/// timed out on every delivery), or it was sent to the DLQ by something else.
pub const NO_CONTEXT: &str = "no_context";

/// SQS's limit of message attributes per message.
const MAX_ATTRIBUTES: usize = 10;

/// One DLQ message, read.
///
/// sqsafe's context comes from the copy's `sqsafe.context` ([`DeadLetterContext`]) or, for a copy written before it,
/// from the legacy attributes, one per fact (`sqsafe.error_kind`, ..., `sqsafe.redrive`; see
/// [`attributes`](sqsafe_batch::attributes)).
#[derive(Debug, Clone, PartialEq)]
pub struct DeadLetter {
    /// The DLQ copy's message id.
    pub dlq_message_id: String,
    /// The message id the consumer saw (the context's `original_message_id`; without context, the DLQ message's own
    /// id, which SQS's redrive policy keeps).
    pub original_message_id: String,
    /// The context's `error_kind`, or [`NO_CONTEXT`].
    pub kind: String,
    /// The context's `error_class`: `permanent` or `transient`.
    pub class: Option<String>,
    /// The context's `error`.
    pub error: Option<String>,
    /// The context's `attempts`.
    pub attempts: Option<u32>,
    /// The context's `consumer`.
    pub consumer: Option<String>,
    /// The context's `consumer_version`.
    pub consumer_version: Option<u32>,
    /// The correlation id attribute.
    pub correlation_id: Option<String>,
    /// The source queue's ARN: the context's `source_queue`, else SQS's `DeadLetterQueueSourceArn`.
    pub source_queue: Option<String>,
    /// The stream a stream record came from (the context's `stream`: its ARN, else its source); such a letter has no
    /// source queue to go back to.
    pub stream: Option<String>,
    /// When the original was first sent (the context's `first_sent`).
    pub first_sent: Option<Timestamp>,
    /// When the original's idempotency protection ends (the context's `expires`).
    pub expires: Option<Timestamp>,
    /// When this copy was sent to the DLQ (its `SentTimestamp`; for a message SQS moved to a standard DLQ, the
    /// original's).
    pub sent: Option<Timestamp>,
    /// `MessageGroupId` of a copy in a FIFO DLQ (the original's group).
    pub group_id: Option<String>,
    /// Some of the original's attributes may have been left out of the copy. sqsafe leaves originals out at SQS's
    /// limit of 10 attributes, so true when the copy has 10; and to fit the DLQ's message size, but only after the
    /// context's redrive fields, so true when the context has none of `source_queue`, `first_sent`, `expires` (as
    /// also for a record that came without an event source ARN or `SentTimestamp`, outside Lambda). A legacy copy:
    /// true without `sqsafe.redrive`, which went before any original for either reason. False without sqsafe's
    /// context. Attributes with list values (which SQS does not accept today) are never copied, and not counted
    /// here (a warning named them); binary values are copied like text.
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
        let system = |name: MessageSystemAttributeName| {
            message
                .attributes()
                .and_then(|a| a.get(&name))
                .map(String::as_str)
        };
        let dlq_message_id = message.message_id().unwrap_or_default().to_owned();
        let (context, may_be_missing) =
            match text(attributes::CONTEXT).and_then(|v| DeadLetterContext::parse(&v)) {
                Some(context) => {
                    let missing = attributes.len() >= MAX_ATTRIBUTES || context.redrive.is_empty();
                    (Some(context), missing)
                }
                None => {
                    let legacy = legacy_context(text);
                    let missing = legacy.is_some() && !attributes.contains_key(attributes::REDRIVE);
                    (legacy, missing)
                }
            };
        let context = context.unwrap_or_default();
        let time = |t: Option<std::time::SystemTime>| t.and_then(|t| Timestamp::try_from(t).ok());
        let nonempty = |s: String| (!s.is_empty()).then_some(s);
        Self {
            original_message_id: nonempty(context.original_message_id)
                .unwrap_or_else(|| dlq_message_id.clone()),
            kind: nonempty(context.error_kind).unwrap_or_else(|| NO_CONTEXT.to_owned()),
            class: context.error_class,
            error: context.error,
            attempts: context.attempts,
            consumer: context.consumer,
            consumer_version: context.consumer_version,
            correlation_id: text(correlation_attribute),
            source_queue: context.redrive.source_queue.clone().or_else(|| {
                system(MessageSystemAttributeName::DeadLetterQueueSourceArn).map(str::to_owned)
            }),
            stream: context.stream.as_ref().map(|origin| {
                origin
                    .stream_arn
                    .clone()
                    .unwrap_or_else(|| format!("{:?}", origin.source).to_lowercase())
            }),
            first_sent: time(context.redrive.first_sent),
            expires: time(context.redrive.expires),
            sent: system(MessageSystemAttributeName::SentTimestamp)
                .and_then(|ms| ms.parse().ok())
                .and_then(|ms| Timestamp::from_millisecond(ms).ok()),
            group_id: system(MessageSystemAttributeName::MessageGroupId).map(str::to_owned),
            attributes_may_be_missing: may_be_missing,
            body: message.body().unwrap_or_default().to_owned(),
            dlq_message_id,
            attributes,
        }
    }

    /// The attributes a redriven message carries: the copy's, without sqsafe's context (any `sqsafe.*` attribute,
    /// the legacy ones included).
    pub fn original_attributes(&self) -> HashMap<String, MessageAttributeValue> {
        self.attributes
            .iter()
            .filter(|(name, _)| !name.starts_with(attributes::PREFIX))
            .map(|(name, value)| (name.clone(), value.clone()))
            .collect()
    }
}

/// The context of a copy in the legacy layout (one attribute per fact, written before `sqsafe.context`), read by
/// `text`; `None` without `sqsafe.error_kind`. Its original message id may be missing (empty).
fn legacy_context(text: impl Fn(&str) -> Option<String>) -> Option<DeadLetterContext> {
    let number = |name: &str| text(name).and_then(|v| v.trim().parse().ok());
    Some(DeadLetterContext {
        error_kind: text(attributes::ERROR_KIND)?,
        original_message_id: text(attributes::ORIGINAL_MESSAGE_ID).unwrap_or_default(),
        error_class: text(attributes::ERROR_CLASS),
        error: text(attributes::ERROR_MESSAGE),
        attempts: number(attributes::ATTEMPTS),
        consumer: text(attributes::CONSUMER),
        consumer_version: number(attributes::CONSUMER_VERSION),
        stream: None,
        redrive: text(attributes::REDRIVE)
            .and_then(|v| RedriveContext::parse(&v))
            .unwrap_or_default(),
    })
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

    /// The context sqsafe writes for `original`, failed with `kind` (no redrive facts).
    pub(crate) fn context(original: &str, kind: &str) -> DeadLetterContext {
        DeadLetterContext {
            error_kind: kind.into(),
            original_message_id: original.into(),
            error_class: Some("permanent".into()),
            error: Some("no such account".into()),
            attempts: Some(3),
            consumer: Some("apply-ledger".into()),
            consumer_version: Some(2),
            stream: None,
            redrive: RedriveContext::default(),
        }
    }

    /// A DLQ copy as sqsafe writes it, with `context`, sent to the DLQ at `sent_ms`.
    pub(crate) fn copy_with(
        dlq_id: &str,
        context: &DeadLetterContext,
        sent_ms: i64,
    ) -> aws_sdk_sqs::types::builders::MessageBuilder {
        let original = &context.original_message_id;
        Message::builder()
            .message_id(dlq_id)
            .receipt_handle(format!("rh-{dlq_id}"))
            .body(format!(r#"{{"id":"{original}"}}"#))
            .message_attributes(attributes::CONTEXT, attr(&context.to_attribute_value()))
            .message_attributes("correlationId", attr(&format!("corr-{original}")))
            .message_attributes("tenant", attr("acme"))
            .attributes(
                MessageSystemAttributeName::SentTimestamp,
                sent_ms.to_string(),
            )
    }

    /// A DLQ copy as sqsafe writes it, sent to the DLQ at `sent_ms`.
    pub(crate) fn copy(
        dlq_id: &str,
        original: &str,
        kind: &str,
        sent_ms: i64,
    ) -> aws_sdk_sqs::types::builders::MessageBuilder {
        copy_with(dlq_id, &context(original, kind), sent_ms)
    }

    /// A DLQ copy as sqsafe wrote it before `sqsafe.context` (one attribute per fact), sent at `sent_ms`.
    pub(crate) fn legacy_copy(
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

    const ARN: &str = "arn:aws:sqs:us-east-1:123456789012:ledger.fifo";
    const REDRIVE: &str = r#"{"source_queue":"arn:aws:sqs:us-east-1:123456789012:ledger.fifo","first_sent":"2025-06-15T15:06:40Z","expires":"2025-07-15T15:06:40Z"}"#;

    /// What both layouts say of the same dead letter.
    fn assert_read(l: &DeadLetter) {
        assert_eq!(l.original_message_id, "o-1");
        assert_eq!(l.kind, "precondition");
        assert_eq!(l.class.as_deref(), Some("permanent"));
        assert_eq!(l.error.as_deref(), Some("no such account"));
        assert_eq!((l.attempts, l.consumer_version), (Some(3), Some(2)));
        assert_eq!(l.consumer.as_deref(), Some("apply-ledger"));
        assert_eq!(l.correlation_id.as_deref(), Some("corr-o-1"));
        assert_eq!(l.source_queue.as_deref(), Some(ARN));
        assert_eq!(
            l.first_sent,
            Some(Timestamp::from_second(1_750_000_000).expect("t"))
        );
        assert_eq!(
            l.expires,
            Some(Timestamp::from_second(1_752_592_000).expect("t"))
        );
        assert!(!l.attributes_may_be_missing);
        let mut kept: Vec<_> = l.original_attributes().into_keys().collect();
        kept.sort();
        assert_eq!(kept, ["correlationId", "tenant"]);
    }

    #[test]
    fn the_context_is_read_from_its_attribute() {
        let mut context = context("o-1", "precondition");
        context.redrive = RedriveContext::parse(REDRIVE).expect("redrive");
        let m = copy_with("d-1", &context, 1_750_000_100_000).build();
        assert_read(&DeadLetter::read(&m, "correlationId"));
    }

    #[test]
    fn a_legacy_letter_is_read_from_its_separate_attributes() {
        let m = legacy_copy("d-1", "o-1", "precondition", 1_750_000_100_000)
            .message_attributes(attributes::REDRIVE, attr(REDRIVE))
            .build();
        assert_read(&DeadLetter::read(&m, "correlationId"));
        // Without sqsafe.redrive (SQS's limit or the size reached): originals may have been left out.
        let m = legacy_copy("d-1", "o-1", "precondition", 1_750_000_100_000).build();
        let l = DeadLetter::read(&m, "correlationId");
        assert_eq!(l.original_message_id, "o-1");
        assert!(l.attributes_may_be_missing);
        assert_eq!(l.expires, None);
    }

    #[test]
    fn originals_may_be_missing_at_the_attribute_limit_or_without_redrive_fields() {
        let mut context = context("o-1", "precondition");
        context.redrive = RedriveContext::parse(REDRIVE).expect("redrive");
        let read = |m: Message| DeadLetter::read(&m, "correlationId").attributes_may_be_missing;
        let mut full = copy_with("d-1", &context, 0);
        for n in 0..7 {
            full = full.message_attributes(format!("own-{n}"), attr("v"));
        }
        assert!(read(full.build()), "10 attributes");
        let mut nine = copy_with("d-1", &context, 0);
        for n in 0..6 {
            nine = nine.message_attributes(format!("own-{n}"), attr("v"));
        }
        assert!(!read(nine.build()), "9 attributes: every original is there");
        assert!(
            read(copy("d-1", "o-1", "precondition", 0).build()),
            "the redrive fields go only after the originals"
        );
        let moved = Message::builder().message_id("m").body("{}").build();
        assert!(!read(moved), "no context: nothing says");
    }

    #[test]
    fn an_unreadable_context_is_no_context() {
        let m = Message::builder()
            .message_id("d-1")
            .body("{}")
            .message_attributes(attributes::CONTEXT, attr("not json"))
            .message_attributes("tenant", attr("acme"))
            .build();
        let l = DeadLetter::read(&m, "correlationId");
        assert_eq!(
            (l.kind.as_str(), l.original_message_id.as_str()),
            (NO_CONTEXT, "d-1")
        );
        assert_eq!(
            l.original_attributes().len(),
            1,
            "sqsafe.context is never restored"
        );
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
