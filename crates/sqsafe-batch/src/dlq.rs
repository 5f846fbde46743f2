use std::collections::HashMap;
use std::future::Future;
use std::time::Duration;

use aws_lambda_events::sqs::SqsMessage;
use aws_sdk_sqs::types::MessageAttributeValue;
use futures::future::BoxFuture;
use sqsafe_idempotency::{BoxError, ErrorClass};

use crate::error::{BatchError, class_name};
use crate::redrive::RedriveContext;

/// Message attribute names the dead-letter copy carries (besides the correlation id attribute).
pub mod attributes {
    /// Error label, e.g. `payload_mismatch`.
    pub const ERROR_KIND: &str = "sqsafe.error_kind";
    /// `transient` or `permanent`.
    pub const ERROR_CLASS: &str = "sqsafe.error_class";
    /// The error message (at most 1,024 characters).
    pub const ERROR_MESSAGE: &str = "sqsafe.error";
    /// Delivery attempts made (`ApproximateReceiveCount` of the last one).
    pub const ATTEMPTS: &str = "sqsafe.attempts";
    /// Consumer name.
    pub const CONSUMER: &str = "sqsafe.consumer";
    /// Consumer (effect) version.
    pub const CONSUMER_VERSION: &str = "sqsafe.consumer_version";
    /// Message id of the original message, to find it by.
    pub const ORIGINAL_MESSAGE_ID: &str = "sqsafe.original_message_id";
    /// What a redrive needs: the source queue's ARN, when the message was first sent, and until when its idempotency
    /// record protects it ([`RedriveContext`](crate::RedriveContext), as JSON). Carried only when SQS's limit of 10
    /// attributes leaves room after the original attributes, so its presence also says that none of the original's
    /// string and number attributes was left out.
    pub const REDRIVE: &str = "sqsafe.redrive";
    /// Put on a redriven message by `sqsafe dlq redrive`: when its first copy was sent (RFC 3339). A later
    /// dead-lettering counts the message's age and idempotency expiry from it, not from the redrive.
    pub const FIRST_SENT: &str = "sqsafe.first_sent";
    /// Every attribute sqsafe writes starts with this. Such attributes are never copied from the original message
    /// (they would be stale).
    pub const PREFIX: &str = "sqsafe.";
}

/// SQS allows at most 10 message attributes per message.
const MAX_ATTRIBUTES: usize = 10;
const MAX_ERROR_CHARS: usize = 1024;
/// A shortened `sqsafe.error` keeps at least this many bytes (else it is dropped as a whole).
const MIN_ERROR_BYTES: usize = 32;
const ELLIPSIS: &str = "…";

/// The message size [`SqsDeadLetterQueue`] fits its copies into unless told otherwise: 262,144 bytes (256 KiB), the
/// limit of every queue created before 2025 and the smallest default SQS has had.
pub const DEFAULT_MAX_MESSAGE_SIZE: usize = 262_144;
/// The largest `MaximumMessageSize` SQS accepts: 1,048,576 bytes (1 MiB), also the default for queues created since
/// 2025.
pub const MAX_MESSAGE_SIZE_LIMIT: usize = 1_048_576;
/// The smallest `MaximumMessageSize` SQS accepts: 1,024 bytes.
const MIN_MESSAGE_SIZE: usize = 1_024;

/// Everything an operator needs to understand a dead-lettered message.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FailureContext {
    /// Original message id.
    pub message_id: String,
    /// Error label.
    pub error_kind: String,
    /// Transient (attempts exhausted) or permanent.
    pub error_class: ErrorClass,
    /// Error message.
    pub error_message: String,
    /// Delivery attempts made.
    pub attempts: u32,
    /// Consumer name.
    pub consumer: String,
    /// Consumer version.
    pub consumer_version: u32,
    /// Correlation id.
    pub correlation_id: String,
}

/// Where records that must not come back go, with their context. Implemented for SQS by [`SqsDeadLetterQueue`].
pub trait DeadLetterQueue: Send + Sync + 'static {
    /// Sends a copy of `message` with `failure` attached. An error keeps the record in the batch's failures, so the
    /// message comes back instead of being lost.
    fn send(
        &self,
        message: &SqsMessage,
        failure: &FailureContext,
    ) -> impl Future<Output = Result<(), BoxError>> + Send;
}

/// [`DeadLetterQueue`] behind a pointer: the processor keeps any implementation, implementers write `async fn`.
pub(crate) trait DynDeadLetterQueue: Send + Sync + 'static {
    fn send_boxed<'a>(
        &'a self,
        message: &'a SqsMessage,
        failure: &'a FailureContext,
    ) -> BoxFuture<'a, Result<(), BoxError>>;
}

impl<T: DeadLetterQueue> DynDeadLetterQueue for T {
    fn send_boxed<'a>(
        &'a self,
        message: &'a SqsMessage,
        failure: &'a FailureContext,
    ) -> BoxFuture<'a, Result<(), BoxError>> {
        Box::pin(self.send(message, failure))
    }
}

/// A dead-letter queue in SQS: the body unchanged, the context as message attributes.
///
/// The copy carries [`attributes`]' seven context attributes plus the correlation id attribute, then as many of the
/// original attributes as SQS's limit of 10 leaves room for (sorted by name; none named `sqsafe.*`), then, if there
/// is still room, [`attributes::REDRIVE`]: the source queue, the first send and the end of the idempotency window
/// (set with [`idempotency_window`](Self::idempotency_window)), which `sqsafe dlq redrive` uses. The original
/// attributes come first because a redrive restores them: one left out would change the message its consumer sees,
/// while a missing redrive context only makes the redrive ask for `--to` and `--window`. For a FIFO DLQ (URL ending
/// in `.fifo`) the original group id is kept and the original message id is the deduplication id.
///
/// # Size
/// SQS counts a message's body and each attribute's name, data type and value against the queue's
/// `MaximumMessageSize`, and refuses a message above it. A body near the limit leaves little room, so the context
/// shrinks to fit [`max_message_size`](Self::max_message_size): `sqsafe.redrive` and the copied original attributes
/// go first (last first), then `sqsafe.error` is shortened (ending in `…`), then `sqsafe.error`,
/// `sqsafe.consumer_version`, `sqsafe.consumer`, `sqsafe.error_class`, `sqsafe.attempts` and the correlation id are
/// dropped in that order, down to `sqsafe.original_message_id` and `sqsafe.error_kind`. A warning says what was left
/// out.
///
/// When not even those two fit (a body at the limit), the body is sent alone, with no attributes: the message is
/// kept, and the context goes to an error log line that names the copy's DLQ message id (the record's span adds
/// the original message id and correlation id). If SQS still refuses the copy, the send fails and the record is
/// reported, so it comes back: nothing is lost.
///
/// # Default
/// `max_message_size` 262,144 bytes ([`DEFAULT_MAX_MESSAGE_SIZE`]); correlation id attribute `correlationId`; no
/// idempotency window (`sqsafe.redrive` then has no `expires`; the `sqsafe` façade sets it from
/// `IDEMPOTENCY_WINDOW_DAYS`).
#[derive(Debug, Clone)]
pub struct SqsDeadLetterQueue {
    client: aws_sdk_sqs::Client,
    queue_url: String,
    correlation_attribute: String,
    max_message_size: usize,
    idempotency_window: Option<Duration>,
}

impl SqsDeadLetterQueue {
    /// Sends to the queue at `queue_url`.
    pub fn new(client: aws_sdk_sqs::Client, queue_url: impl Into<String>) -> Self {
        Self {
            client,
            queue_url: queue_url.into(),
            correlation_attribute: sqsafe_telemetry::correlation::DEFAULT_ATTRIBUTE.to_owned(),
            max_message_size: DEFAULT_MAX_MESSAGE_SIZE,
            idempotency_window: None,
        }
    }

    /// The consumer's idempotency window: each copy's `sqsafe.redrive` then says until when a redrive is replayed
    /// rather than applied again (the message's first send plus `window`), so that `sqsafe dlq redrive` can refuse
    /// a dead letter whose idempotency record may have expired.
    pub fn idempotency_window(mut self, window: Duration) -> Self {
        self.idempotency_window = Some(window);
        self
    }

    /// The attribute name that carries the correlation id (default `correlationId`).
    pub fn correlation_attribute(mut self, name: impl Into<String>) -> Self {
        self.correlation_attribute = name.into();
        self
    }

    /// The DLQ's `MaximumMessageSize` in bytes, which copies are fitted into: set it to the queue's attribute
    /// (1,048,576 for queues created since 2025 without the attribute, CloudFormation's included). Too low a value
    /// drops context that would have fitted; too high a value lets SQS refuse a copy near the limit (then the record
    /// comes back instead of going to the DLQ).
    ///
    /// # Errors
    /// [`BatchError::Config`] outside SQS's range, 1,024 to 1,048,576 bytes.
    ///
    /// # Default
    /// 262,144 bytes ([`DEFAULT_MAX_MESSAGE_SIZE`]).
    pub fn max_message_size(mut self, bytes: usize) -> Result<Self, BatchError> {
        if !(MIN_MESSAGE_SIZE..=MAX_MESSAGE_SIZE_LIMIT).contains(&bytes) {
            return Err(BatchError::Config(format!(
                "max_message_size must be {MIN_MESSAGE_SIZE} to {MAX_MESSAGE_SIZE_LIMIT} bytes (got {bytes})"
            )));
        }
        self.max_message_size = bytes;
        Ok(self)
    }

    /// The DLQ's URL.
    pub fn queue_url(&self) -> &str {
        &self.queue_url
    }
}

/// One message attribute with a string value, as SQS counts it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Attribute {
    pub(crate) name: String,
    pub(crate) data_type: String,
    pub(crate) value: String,
}

impl Attribute {
    fn new(name: impl Into<String>, data_type: &str, value: impl Into<String>) -> Self {
        Self {
            name: name.into(),
            data_type: data_type.to_owned(),
            value: value.into(),
        }
    }

    /// SQS counts the name, the data type and the value.
    fn size(&self) -> usize {
        self.name.len() + self.data_type.len() + self.value.len()
    }

    fn to_sdk(&self) -> Result<MessageAttributeValue, BoxError> {
        Ok(MessageAttributeValue::builder()
            .data_type(&self.data_type)
            .string_value(&self.value)
            .build()?)
    }
}

/// The attributes of a dead-letter copy after fitting, and what was left out.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Fitted {
    pub(crate) attributes: Vec<Attribute>,
    /// Names of the attributes left out.
    pub(crate) dropped: Vec<String>,
    /// `sqsafe.error` was shortened.
    pub(crate) shortened: bool,
}

/// The context the copy carries, then the originals, then the redrive context, in that order; no more than SQS's 10.
pub(crate) fn dead_letter_attributes(
    message: &SqsMessage,
    failure: &FailureContext,
    correlation_attribute: &str,
    idempotency_window: Option<Duration>,
) -> Vec<Attribute> {
    let error: String = failure
        .error_message
        .chars()
        .take(MAX_ERROR_CHARS)
        .collect();
    let mut out = vec![
        Attribute::new(attributes::ERROR_KIND, "String", &failure.error_kind),
        Attribute::new(
            attributes::ORIGINAL_MESSAGE_ID,
            "String",
            &failure.message_id,
        ),
        Attribute::new(
            attributes::ERROR_CLASS,
            "String",
            class_name(failure.error_class),
        ),
        Attribute::new(
            attributes::ERROR_MESSAGE,
            "String",
            if error.is_empty() {
                "-".to_owned()
            } else {
                error
            },
        ),
        Attribute::new(attributes::ATTEMPTS, "Number", failure.attempts.to_string()),
        Attribute::new(attributes::CONSUMER, "String", &failure.consumer),
        Attribute::new(
            attributes::CONSUMER_VERSION,
            "Number",
            failure.consumer_version.to_string(),
        ),
        Attribute::new(correlation_attribute, "String", &failure.correlation_id),
    ];
    let mut originals: Vec<_> = message.message_attributes.iter().collect();
    originals.sort_by(|a, b| a.0.cmp(b.0));
    for (name, attr) in originals {
        if out.len() >= MAX_ATTRIBUTES {
            break;
        }
        if out.iter().any(|a| &a.name == name) || name.starts_with(attributes::PREFIX) {
            continue;
        }
        let (Some(data_type), Some(value)) =
            (attr.data_type.as_deref(), attr.string_value.as_deref())
        else {
            continue; // binary and list values are not copied
        };
        out.push(Attribute::new(name, data_type, value));
    }
    let redrive = RedriveContext::of(message, idempotency_window);
    if out.len() < MAX_ATTRIBUTES && !redrive.is_empty() {
        out.push(Attribute::new(
            attributes::REDRIVE,
            "String",
            redrive.to_attribute_value(),
        ));
    }
    out
}

/// Fits `attributes` (context first, as [`dead_letter_attributes`] orders them) beside a body of `body_bytes` into
/// `limit` bytes, shrinking in the documented order. Empty when not even the error kind and original message id fit.
pub(crate) fn fit(
    body_bytes: usize,
    mut attributes: Vec<Attribute>,
    correlation_attribute: &str,
    limit: usize,
) -> Fitted {
    const CONTEXT: usize = 8;
    let size = |a: &[Attribute]| body_bytes + a.iter().map(Attribute::size).sum::<usize>();
    let mut dropped = Vec::new();
    let mut shortened = false;
    // 1. The redrive context and the copied originals, last first.
    while size(&attributes) > limit && attributes.len() > CONTEXT {
        if let Some(a) = attributes.pop() {
            dropped.push(a.name);
        }
    }
    // 2. A shorter error message.
    let over = size(&attributes).saturating_sub(limit);
    if over > 0
        && let Some(error) = attributes
            .iter_mut()
            .find(|a| a.name == attributes::ERROR_MESSAGE)
    {
        let keep = error.value.len().saturating_sub(over + ELLIPSIS.len());
        if keep >= MIN_ERROR_BYTES {
            let mut end = keep;
            while !error.value.is_char_boundary(end) {
                end -= 1;
            }
            error.value.truncate(end);
            error.value.push_str(ELLIPSIS);
            shortened = true;
        }
    }
    // 3. The optional context, down to the error kind and the original message id.
    for name in [
        attributes::ERROR_MESSAGE,
        attributes::CONSUMER_VERSION,
        attributes::CONSUMER,
        attributes::ERROR_CLASS,
        attributes::ATTEMPTS,
        correlation_attribute,
    ] {
        if size(&attributes) <= limit {
            break;
        }
        if let Some(at) = attributes.iter().position(|a| a.name == name) {
            dropped.push(attributes.remove(at).name);
        }
    }
    if size(&attributes) > limit {
        dropped.extend(attributes.drain(..).map(|a| a.name));
    }
    Fitted {
        attributes,
        dropped,
        shortened,
    }
}

impl DeadLetterQueue for SqsDeadLetterQueue {
    async fn send(&self, message: &SqsMessage, failure: &FailureContext) -> Result<(), BoxError> {
        let body = message.body.clone().unwrap_or_default();
        let fitted = fit(
            body.len(),
            dead_letter_attributes(
                message,
                failure,
                &self.correlation_attribute,
                self.idempotency_window,
            ),
            &self.correlation_attribute,
            self.max_message_size,
        );
        let attributes = fitted
            .attributes
            .iter()
            .map(|a| Ok((a.name.clone(), a.to_sdk()?)))
            .collect::<Result<HashMap<_, _>, BoxError>>()?;
        let mut send = self
            .client
            .send_message()
            .queue_url(&self.queue_url)
            .message_body(body)
            .set_message_attributes((!attributes.is_empty()).then_some(attributes));
        if self.queue_url.ends_with(".fifo") {
            let group = crate::record::group_id(message).unwrap_or("sqsafe-dead-letters");
            send = send
                .message_group_id(group)
                .message_deduplication_id(&failure.message_id);
        }
        let sent = send.send().await?;
        let dlq_message_id = sent.message_id().unwrap_or_default();
        if fitted.attributes.is_empty() {
            tracing::error!(
                dlq_message_id,
                original_message_id = %failure.message_id,
                error_kind = %failure.error_kind,
                error_class = class_name(failure.error_class),
                error = %failure.error_message,
                attempts = failure.attempts,
                max_message_size = self.max_message_size,
                "dead-lettered without context: the body leaves no room for it within the DLQ's message size; \
                 the context is in this line"
            );
        } else if !fitted.dropped.is_empty() || fitted.shortened {
            tracing::warn!(
                dlq_message_id,
                dropped = ?fitted.dropped,
                error_shortened = fitted.shortened,
                max_message_size = self.max_message_size,
                "dead-letter context shrunk to fit the DLQ's message size"
            );
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn failure(error: &str) -> FailureContext {
        FailureContext {
            message_id: "059f36b4-87a3-44ab-83d2-661975830a7d".into(),
            error_kind: "precondition".into(),
            error_class: ErrorClass::Permanent,
            error_message: error.into(),
            attempts: 3,
            consumer: "apply-ledger".into(),
            consumer_version: 2,
            correlation_id: "checkout-7".into(),
        }
    }

    fn message_with(originals: &[(&str, &str)]) -> SqsMessage {
        let mut m = SqsMessage::default();
        for (name, value) in originals {
            let mut a = aws_lambda_events::sqs::SqsMessageAttribute::default();
            a.data_type = Some("String".into());
            a.string_value = Some((*value).into());
            m.message_attributes.insert((*name).into(), a);
        }
        m
    }

    fn names(f: &Fitted) -> Vec<&str> {
        f.attributes.iter().map(|a| a.name.as_str()).collect()
    }

    fn total(body: usize, f: &Fitted) -> usize {
        body + f.attributes.iter().map(Attribute::size).sum::<usize>()
    }

    const LIMIT: usize = 262_144;

    #[test]
    fn a_small_body_keeps_all_context_and_originals() {
        let attrs = dead_letter_attributes(
            &message_with(&[("b", "2"), ("a", "1")]),
            &failure("insufficient balance"),
            "correlationId",
            None,
        );
        let fitted = fit(100, attrs, "correlationId", LIMIT);
        assert!(fitted.dropped.is_empty() && !fitted.shortened);
        assert_eq!(fitted.attributes.len(), 10);
        assert_eq!(&names(&fitted)[8..], ["a", "b"]);
    }

    #[test]
    fn context_shrinks_in_order_down_to_kind_and_original_id() {
        let error = "e".repeat(1500);
        let attrs = || {
            dead_letter_attributes(
                &message_with(&[("a", &"x".repeat(300)), ("b", &"y".repeat(300))]),
                &failure(&error),
                "correlationId",
                None,
            )
        };
        let full = total(0, &fit(0, attrs(), "correlationId", LIMIT));
        // Room for everything but the last original.
        let f = fit(LIMIT - full + 10, attrs(), "correlationId", LIMIT);
        assert_eq!(f.dropped, ["b"]);
        assert!(!f.shortened);
        // No original fits, and the error must give up 500 bytes.
        let f = fit(LIMIT - full + 800, attrs(), "correlationId", LIMIT);
        assert_eq!(f.dropped, ["b", "a"]);
        assert!(f.shortened);
        let error_value = &f.attributes[3].value;
        assert!(error_value.ends_with(ELLIPSIS) && error_value.len() < 1024);
        assert!(total(LIMIT - full + 800, &f) <= LIMIT);
        // Nothing optional fits.
        let minimal = attributes::ERROR_KIND.len()
            + "String".len() * 2
            + "precondition".len()
            + attributes::ORIGINAL_MESSAGE_ID.len()
            + "059f36b4-87a3-44ab-83d2-661975830a7d".len();
        let f = fit(LIMIT - minimal, attrs(), "correlationId", LIMIT);
        assert_eq!(
            names(&f),
            [attributes::ERROR_KIND, attributes::ORIGINAL_MESSAGE_ID]
        );
        assert_eq!(
            f.dropped,
            [
                "b",
                "a",
                attributes::ERROR_MESSAGE,
                attributes::CONSUMER_VERSION,
                attributes::CONSUMER,
                attributes::ERROR_CLASS,
                attributes::ATTEMPTS,
                "correlationId"
            ]
        );
        assert_eq!(total(LIMIT - minimal, &f), LIMIT);
        // One byte more: nothing fits.
        let f = fit(LIMIT - minimal + 1, attrs(), "correlationId", LIMIT);
        assert!(f.attributes.is_empty());
        assert_eq!(f.dropped.len(), 10);
    }

    #[test]
    fn a_shortened_error_ends_on_a_character_boundary() {
        let error = "é".repeat(600); // 2 bytes each
        let attrs = dead_letter_attributes(&message_with(&[]), &failure(&error), "c", None);
        let full = total(0, &fit(0, attrs.clone(), "c", LIMIT));
        let f = fit(LIMIT - full + 301, attrs, "c", LIMIT);
        assert!(f.shortened);
        assert!(f.attributes[3].value.ends_with(ELLIPSIS));
        assert!(total(LIMIT - full + 301, &f) <= LIMIT);
    }

    /// A record as Lambda hands it over: source queue ARN and `SentTimestamp` (2025-06-15T15:06:40.123Z).
    fn record_with(originals: &[(&str, &str)]) -> SqsMessage {
        let mut m = message_with(originals);
        m.event_source_arn = Some("arn:aws:sqs:us-east-1:123456789012:ledger".into());
        m.attributes
            .insert("SentTimestamp".into(), "1750000000123".into());
        m
    }

    fn value<'a>(f: &'a Fitted, name: &str) -> Option<&'a str> {
        f.attributes
            .iter()
            .find(|a| a.name == name)
            .map(|a| a.value.as_str())
    }

    const DAY: Duration = Duration::from_secs(86_400);

    #[test]
    fn the_redrive_context_follows_the_originals_when_there_is_room() {
        let attrs = dead_letter_attributes(
            &record_with(&[("tenant", "acme")]),
            &failure("insufficient balance"),
            "correlationId",
            Some(30 * DAY),
        );
        let fitted = fit(100, attrs, "correlationId", LIMIT);
        assert_eq!(&names(&fitted)[8..], ["tenant", attributes::REDRIVE]);
        let redrive = RedriveContext::parse(value(&fitted, attributes::REDRIVE).expect("redrive"))
            .expect("sqsafe's JSON");
        assert_eq!(
            redrive.source_queue.as_deref(),
            Some("arn:aws:sqs:us-east-1:123456789012:ledger")
        );
        let sent = std::time::UNIX_EPOCH + Duration::from_millis(1_750_000_000_123);
        assert_eq!(redrive.first_sent, Some(sent));
        assert_eq!(redrive.expires, Some(sent + 30 * DAY));

        // Two originals fill SQS's 10: they are kept, the redrive context is not (a redrive then asks for --to).
        let attrs = dead_letter_attributes(
            &record_with(&[("tenant", "acme"), ("traceparent", "00-ab")]),
            &failure("x"),
            "correlationId",
            Some(30 * DAY),
        );
        assert_eq!(
            &names(&fit(100, attrs, "correlationId", LIMIT))[8..],
            ["tenant", "traceparent"]
        );
    }

    #[test]
    fn sqsafe_attributes_of_the_original_are_not_copied_but_its_first_send_is_kept() {
        // A message redriven earlier, still carrying the attributes a move task keeps and the first send.
        let attrs = dead_letter_attributes(
            &record_with(&[
                (attributes::FIRST_SENT, "2025-06-01T00:00:00Z"),
                (attributes::REDRIVE, "{}"),
                ("sqsafe.error", "stale"),
            ]),
            &failure("fresh"),
            "correlationId",
            Some(DAY),
        );
        let fitted = fit(100, attrs, "correlationId", LIMIT);
        assert_eq!(fitted.attributes.len(), 9, "{:?}", names(&fitted));
        assert_eq!(value(&fitted, attributes::ERROR_MESSAGE), Some("fresh"));
        let redrive = RedriveContext::parse(value(&fitted, attributes::REDRIVE).expect("redrive"))
            .expect("sqsafe's JSON");
        let first: jiff::Timestamp = "2025-06-01T00:00:00Z".parse().expect("time");
        assert_eq!(redrive.first_sent, Some(std::time::SystemTime::from(first)));
    }

    #[test]
    fn the_redrive_context_is_the_first_to_go_when_the_body_is_large() {
        let attrs = || {
            dead_letter_attributes(
                &record_with(&[("tenant", "acme")]),
                &failure("insufficient balance"),
                "correlationId",
                Some(DAY),
            )
        };
        let full = total(0, &fit(0, attrs(), "correlationId", LIMIT));
        let f = fit(LIMIT - full + 1, attrs(), "correlationId", LIMIT);
        assert_eq!(f.dropped, [attributes::REDRIVE]);
        assert!(names(&f).contains(&"tenant"));
    }

    #[test]
    fn the_size_setting_is_validated() {
        let client = aws_sdk_sqs::Client::from_conf(
            aws_sdk_sqs::Config::builder()
                .behavior_version(aws_sdk_sqs::config::BehaviorVersion::latest())
                .build(),
        );
        let dlq = || SqsDeadLetterQueue::new(client.clone(), "https://example.invalid/q");
        assert!(dlq().max_message_size(1023).is_err());
        assert!(dlq().max_message_size(MAX_MESSAGE_SIZE_LIMIT + 1).is_err());
        assert!(dlq().max_message_size(1024).is_ok());
        assert!(dlq().max_message_size(MAX_MESSAGE_SIZE_LIMIT).is_ok());
    }
}
