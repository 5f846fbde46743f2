use std::collections::HashMap;
use std::future::Future;
use std::time::Duration;

use aws_lambda_events::sqs::{SqsMessage, SqsMessageAttribute};
use aws_sdk_sqs::primitives::Blob;
use aws_sdk_sqs::types::MessageAttributeValue;
use futures::future::BoxFuture;
use sqsafe_idempotency::{BoxError, ErrorClass};

use crate::attributes;
use crate::context::DeadLetterContext;
use crate::error::{BatchError, class_name};
use crate::redrive::RedriveContext;
use crate::stream::StreamOrigin;

/// SQS allows at most 10 message attributes per message.
const MAX_ATTRIBUTES: usize = 10;
const MAX_ERROR_CHARS: usize = 1024;
/// A shortened `error` keeps at least this many bytes (else it is dropped as a whole).
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

/// A dead-letter queue in SQS: the body unchanged, the context in one message attribute.
///
/// # Attributes
/// The copy carries, in this order:
/// 1. [`attributes::CONTEXT`]: the [`DeadLetterContext`] as compact JSON: error kind, original message id, error
///    class, error message (its first 1,024 characters), attempts, consumer and version, and what
///    `sqsafe dlq redrive` needs: the source queue, the first send (the record's `SentTimestamp`, or the earlier
///    [`attributes::FIRST_SENT`] a redrive put on it) and the end of the idempotency window (set with
///    [`idempotency_window`](Self::idempotency_window)).
/// 2. The correlation id attribute: the record's correlation id, which a redriven message keeps.
/// 3. The original message's own attributes, sorted by name, with their data types and values (text for `String`
///    and `Number`, the same bytes for `Binary` and `Binary.<custom>`), as many as SQS's limit of 10 leaves room
///    for: 8 besides the two above, so a message with up to 8 attributes of its own (besides the correlation id)
///    keeps every one. An original with more loses the last ones by name, and a warning names them. None named
///    `sqsafe.*` is copied (stale context; a carried `sqsafe.first_sent` becomes the context's `first_sent`).
///    Nor is a list value (`stringListValues`, `binaryListValues`), which SQS reserves and does not accept today,
///    or an attribute without a value of its data type (a text type without `stringValue`, a binary type without
///    `binaryValue`): neither can come from SQS, and a warning names any.
///
/// A redrive restores the original attributes: one left out would change the message its consumer sees. For a FIFO
/// DLQ (URL ending in `.fifo`) the original group id is kept and the original message id is the deduplication id.
///
/// # Size
/// SQS counts a message's body and each attribute's name, data type and value (a binary value by its bytes) against
/// the queue's `MaximumMessageSize`, and refuses a message above it. A body near the limit leaves little room, so the
/// copy shrinks to fit [`max_message_size`](Self::max_message_size), in this order: the context's redrive fields
/// (`source_queue`, `first_sent`, `expires`: a redrive then asks for `--to` and `--window`), then the copied
/// original attributes (last first), then the context's `error` is shortened (ending in `…`, keeping at least 32
/// bytes), then `error`, `consumer_version`, `consumer`, `error_class` and `attempts` are dropped from the context,
/// and then the correlation id attribute, down to a context of `error_kind` and `original_message_id`. A warning
/// says what was left out.
///
/// When not even that fits (a body at the limit), the body is sent alone, with no attributes: the message is
/// kept, and the context goes to an error log line that names the copy's DLQ message id (the record's span adds
/// the original message id and correlation id). If SQS still refuses the copy, the send fails and the record is
/// reported, so it comes back: nothing is lost.
///
/// # Default
/// `max_message_size` 262,144 bytes ([`DEFAULT_MAX_MESSAGE_SIZE`]); correlation id attribute `correlationId`; no
/// idempotency window (the context then has no `expires`; the `sqsafe` façade sets it from
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

    /// The consumer's idempotency window: each copy's context then says (`expires`) until when a redrive is replayed
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

/// The value of a message attribute: SQS carries text (data types `String` and `Number`, with or without a custom
/// label) or bytes (`Binary`, `Binary.<custom>`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Value {
    Text(String),
    Bytes(Vec<u8>),
}

impl Value {
    /// Bytes SQS counts: UTF-8 bytes of text, the bytes themselves of a binary value (not their base64 on the
    /// wire).
    fn len(&self) -> usize {
        match self {
            Value::Text(text) => text.len(),
            Value::Bytes(bytes) => bytes.len(),
        }
    }
}

/// Whether SQS expects a `BinaryValue` for `data_type`: `Binary`, or `Binary.` followed by a custom label.
fn is_binary(data_type: &str) -> bool {
    data_type
        .strip_prefix("Binary")
        .is_some_and(|label| label.is_empty() || label.starts_with('.'))
}

/// One message attribute, as SQS counts it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Attribute {
    pub(crate) name: String,
    pub(crate) data_type: String,
    pub(crate) value: Value,
}

impl Attribute {
    fn text(name: impl Into<String>, data_type: &str, value: impl Into<String>) -> Self {
        Self {
            name: name.into(),
            data_type: data_type.to_owned(),
            value: Value::Text(value.into()),
        }
    }

    /// An original attribute as Lambda hands it over, or `None` when it has no single value of its data type (a
    /// list value, which SQS does not accept today, or a value that does not match the type).
    fn of_original(name: &str, attr: &SqsMessageAttribute) -> Option<Self> {
        let data_type = attr.data_type.as_deref()?;
        let value = if is_binary(data_type) {
            Value::Bytes(attr.binary_value.as_ref()?.to_vec())
        } else {
            Value::Text(attr.string_value.clone()?)
        };
        Some(Self {
            name: name.to_owned(),
            data_type: data_type.to_owned(),
            value,
        })
    }

    /// SQS counts the name, the data type and the value.
    fn size(&self) -> usize {
        self.name.len() + self.data_type.len() + self.value.len()
    }

    fn to_sdk(&self) -> Result<MessageAttributeValue, BoxError> {
        let value = MessageAttributeValue::builder().data_type(&self.data_type);
        let value = match &self.value {
            Value::Text(text) => value.string_value(text),
            Value::Bytes(bytes) => value.binary_value(Blob::new(bytes.as_slice())),
        };
        Ok(value.build()?)
    }
}

/// What a dead-letter copy carries before it is fitted into the DLQ's message size.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Letter {
    pub(crate) context: DeadLetterContext,
    /// `None` when the record's correlation id is empty (SQS refuses an empty value).
    pub(crate) correlation: Option<Attribute>,
    /// The original's own attributes that fit SQS's limit, sorted by name.
    pub(crate) originals: Vec<Attribute>,
    /// Names of the original's attributes beyond SQS's limit, left out.
    pub(crate) over_limit: Vec<String>,
    /// Names of the original's attributes without a single value of their data type (list values), which are not
    /// copied.
    pub(crate) not_copied: Vec<String>,
}

impl Letter {
    /// The context of `failure`, the correlation id attribute, then the original's own attributes sorted by name:
    /// no more than SQS's 10.
    pub(crate) fn of(
        message: &SqsMessage,
        failure: &FailureContext,
        correlation_attribute: &str,
        idempotency_window: Option<Duration>,
    ) -> Self {
        let error: String = failure
            .error_message
            .chars()
            .take(MAX_ERROR_CHARS)
            .collect();
        // A redriven message names its first copy's id; an id that could not be one (blank, oversized) is ignored.
        let first_message_id = message
            .message_attributes
            .get(attributes::FIRST_MESSAGE_ID)
            .and_then(|a| a.string_value.as_deref())
            .map(str::trim)
            .filter(|id| !id.is_empty() && id.len() <= 128);
        let context = DeadLetterContext {
            error_kind: failure.error_kind.clone(),
            original_message_id: first_message_id
                .map_or_else(|| failure.message_id.clone(), str::to_owned),
            error_class: Some(class_name(failure.error_class).to_owned()),
            error: (!error.is_empty()).then_some(error),
            attempts: Some(failure.attempts),
            consumer: Some(failure.consumer.clone()),
            consumer_version: Some(failure.consumer_version),
            stream: StreamOrigin::of(message),
            redrive: RedriveContext::of(message, idempotency_window),
        };
        let correlation = (!failure.correlation_id.is_empty())
            .then(|| Attribute::text(correlation_attribute, "String", &failure.correlation_id));
        let room = MAX_ATTRIBUTES - 1 - usize::from(correlation.is_some());
        let mut originals = Vec::new();
        let mut over_limit = Vec::new();
        let mut not_copied = Vec::new();
        let mut sorted: Vec<_> = message.message_attributes.iter().collect();
        sorted.sort_by(|a, b| a.0.cmp(b.0));
        for (name, attr) in sorted {
            if name == correlation_attribute || name.starts_with(attributes::PREFIX) {
                continue;
            }
            let Some(original) = Attribute::of_original(name, attr) else {
                not_copied.push(name.clone());
                continue;
            };
            if originals.len() < room {
                originals.push(original);
            } else {
                over_limit.push(name.clone());
            }
        }
        Self {
            context,
            correlation,
            originals,
            over_limit,
            not_copied,
        }
    }

    /// Body and attributes as SQS counts them.
    fn size(&self, body_bytes: usize) -> usize {
        body_bytes
            + context_attribute(&self.context).size()
            + self.correlation.as_ref().map_or(0, Attribute::size)
            + self.originals.iter().map(Attribute::size).sum::<usize>()
    }
}

fn context_attribute(context: &DeadLetterContext) -> Attribute {
    Attribute::text(attributes::CONTEXT, "String", context.to_attribute_value())
}

/// The attributes of a dead-letter copy after fitting, and what was left out.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Fitted {
    /// The context, the correlation id, the originals; empty when not even the minimal context fits.
    pub(crate) attributes: Vec<Attribute>,
    /// Names of the attributes left out for size (originals, the correlation id attribute, and
    /// [`attributes::CONTEXT`] itself when nothing fits).
    pub(crate) dropped: Vec<String>,
    /// Fields dropped from the context for size.
    pub(crate) dropped_fields: Vec<&'static str>,
    /// The context's `error` was shortened.
    pub(crate) shortened: bool,
}

/// Removes one field from a context; true when it was there.
type DropField = fn(&mut DeadLetterContext) -> bool;

/// The context's optional fields, in the order they are dropped for size (after the redrive fields).
const DROPPED_IN_ORDER: [(&str, DropField); 5] = [
    ("error", |c| c.error.take().is_some()),
    ("consumer_version", |c| c.consumer_version.take().is_some()),
    ("consumer", |c| c.consumer.take().is_some()),
    ("error_class", |c| c.error_class.take().is_some()),
    ("attempts", |c| c.attempts.take().is_some()),
];

/// Fits `letter` beside a body of `body_bytes` into `limit` bytes, shrinking in the documented order.
pub(crate) fn fit(body_bytes: usize, mut letter: Letter, limit: usize) -> Fitted {
    let mut dropped = Vec::new();
    let mut dropped_fields = Vec::new();
    let mut shortened = false;
    // 1. The redrive fields.
    if letter.size(body_bytes) > limit {
        let redrive = std::mem::take(&mut letter.context.redrive);
        for (field, known) in [
            ("source_queue", redrive.source_queue.is_some()),
            ("first_sent", redrive.first_sent.is_some()),
            ("expires", redrive.expires.is_some()),
        ] {
            if known {
                dropped_fields.push(field);
            }
        }
    }
    // 2. The copied originals, last first.
    while letter.size(body_bytes) > limit {
        let Some(a) = letter.originals.pop() else {
            break;
        };
        dropped.push(a.name);
    }
    // 3. A shorter error message. JSON escapes make a character take at least as many bytes in the attribute as in
    // the message, so cutting the message by the excess is enough.
    let over = letter.size(body_bytes).saturating_sub(limit);
    if over > 0
        && let Some(error) = letter.context.error.as_mut()
    {
        let keep = error.len().saturating_sub(over + ELLIPSIS.len());
        if keep >= MIN_ERROR_BYTES {
            let mut end = keep;
            while !error.is_char_boundary(end) {
                end -= 1;
            }
            error.truncate(end);
            error.push_str(ELLIPSIS);
            shortened = true;
        }
    }
    // 4. The optional context, then the correlation id, down to the error kind and the original message id.
    for (field, drop) in DROPPED_IN_ORDER {
        if letter.size(body_bytes) <= limit {
            break;
        }
        if drop(&mut letter.context) {
            dropped_fields.push(field);
        }
    }
    if letter.size(body_bytes) > limit
        && let Some(correlation) = letter.correlation.take()
    {
        dropped.push(correlation.name);
    }
    if letter.size(body_bytes) > limit {
        dropped.push(attributes::CONTEXT.to_owned());
        return Fitted {
            attributes: Vec::new(),
            dropped,
            dropped_fields,
            shortened,
        };
    }
    let mut out = vec![context_attribute(&letter.context)];
    out.extend(letter.correlation);
    out.extend(letter.originals);
    Fitted {
        attributes: out,
        dropped,
        dropped_fields,
        shortened,
    }
}

impl DeadLetterQueue for SqsDeadLetterQueue {
    async fn send(&self, message: &SqsMessage, failure: &FailureContext) -> Result<(), BoxError> {
        let body = message.body.clone().unwrap_or_default();
        let letter = Letter::of(
            message,
            failure,
            &self.correlation_attribute,
            self.idempotency_window,
        );
        let over_limit = letter.over_limit.clone();
        let not_copied = letter.not_copied.clone();
        let fitted = fit(body.len(), letter, self.max_message_size);
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
        if !over_limit.is_empty() {
            tracing::warn!(
                dlq_message_id,
                left_out = ?over_limit,
                "original attributes left out of the dead-letter copy: SQS allows 10 message attributes, and the \
                 context and correlation id take two; a redrive of it sends the message without them"
            );
        }
        if !not_copied.is_empty() {
            tracing::warn!(
                dlq_message_id,
                not_copied = ?not_copied,
                "attributes without a single value of their data type (list values, which SQS does not accept) \
                 are not copied to the dead-letter copy; a redrive of it sends the message without them"
            );
        }
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
        } else if !fitted.dropped.is_empty()
            || !fitted.dropped_fields.is_empty()
            || fitted.shortened
        {
            tracing::warn!(
                dlq_message_id,
                dropped = ?fitted.dropped,
                dropped_context_fields = ?fitted.dropped_fields,
                error_shortened = fitted.shortened,
                max_message_size = self.max_message_size,
                "dead-letter copy shrunk to fit the DLQ's message size"
            );
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const ID: &str = "059f36b4-87a3-44ab-83d2-661975830a7d";

    fn failure(error: &str) -> FailureContext {
        FailureContext {
            message_id: ID.into(),
            error_kind: "precondition".into(),
            error_class: ErrorClass::Permanent,
            error_message: error.into(),
            attempts: 3,
            consumer: "apply-ledger".into(),
            consumer_version: 2,
            correlation_id: "checkout-7".into(),
        }
    }

    fn string_attribute(value: &str) -> aws_lambda_events::sqs::SqsMessageAttribute {
        let mut a = aws_lambda_events::sqs::SqsMessageAttribute::default();
        a.data_type = Some("String".into());
        a.string_value = Some(value.into());
        a
    }

    fn message_with(originals: &[(&str, &str)]) -> SqsMessage {
        let mut m = SqsMessage::default();
        for (name, value) in originals {
            m.message_attributes
                .insert((*name).into(), string_attribute(value));
        }
        m
    }

    /// A record as Lambda hands it over: source queue ARN and `SentTimestamp` (2025-06-15T15:06:40.123Z).
    fn record_with(originals: &[(&str, &str)]) -> SqsMessage {
        let mut m = message_with(originals);
        m.event_source_arn = Some("arn:aws:sqs:us-east-1:123456789012:ledger".into());
        m.attributes
            .insert("SentTimestamp".into(), "1750000000123".into());
        m
    }

    fn letter(message: &SqsMessage, error: &str, window: Option<Duration>) -> Letter {
        Letter::of(message, &failure(error), "correlationId", window)
    }

    fn names(f: &Fitted) -> Vec<&str> {
        f.attributes.iter().map(|a| a.name.as_str()).collect()
    }

    fn total(body: usize, f: &Fitted) -> usize {
        body + f.attributes.iter().map(Attribute::size).sum::<usize>()
    }

    /// The context a fitted copy carries.
    fn context(f: &Fitted) -> DeadLetterContext {
        let first = f.attributes.first().expect("attributes");
        assert_eq!(first.name, attributes::CONTEXT);
        let Value::Text(json) = &first.value else {
            panic!("a text value: {first:?}");
        };
        DeadLetterContext::parse(json).expect("sqsafe's JSON")
    }

    fn binary_attribute(data_type: &str, value: &[u8]) -> SqsMessageAttribute {
        let mut a = SqsMessageAttribute::default();
        a.data_type = Some(data_type.into());
        let mut bytes = aws_lambda_events::encodings::Base64Data::default();
        bytes.extend_from_slice(value);
        a.binary_value = Some(bytes);
        a
    }

    const LIMIT: usize = 262_144;
    const DAY: Duration = Duration::from_secs(86_400);

    #[test]
    fn every_original_is_kept_up_to_the_limit() {
        let own = [
            ("h", "8"),
            ("g", "7"),
            ("f", "6"),
            ("e", "5"),
            ("d", "4"),
            ("c", "3"),
            ("b", "2"),
            ("a", "1"),
        ];
        let mut m = record_with(&own);
        m.message_attributes
            .insert("correlationId".into(), string_attribute("checkout-7"));
        let l = letter(&m, "insufficient balance", Some(DAY));
        assert!(l.over_limit.is_empty() && l.not_copied.is_empty());
        let fitted = fit(100, l, LIMIT);
        assert!(fitted.dropped.is_empty() && fitted.dropped_fields.is_empty() && !fitted.shortened);
        assert_eq!(
            names(&fitted),
            [
                attributes::CONTEXT,
                "correlationId",
                "a",
                "b",
                "c",
                "d",
                "e",
                "f",
                "g",
                "h"
            ]
        );
        assert_eq!(fitted.attributes[1].value, Value::Text("checkout-7".into()));
        assert_eq!(fitted.attributes[2].data_type, "String");
    }

    #[test]
    fn originals_beyond_the_limit_are_left_out_last_by_name_and_named() {
        let nine: Vec<(String, String)> =
            (1..=9).map(|n| (format!("a{n}"), n.to_string())).collect();
        let nine: Vec<(&str, &str)> = nine.iter().map(|(n, v)| (n.as_str(), v.as_str())).collect();
        let mut m = message_with(&nine);
        m.message_attributes
            .insert("correlationId".into(), string_attribute("checkout-7"));
        let l = letter(&m, "x", None);
        assert_eq!(l.over_limit, ["a9"]);
        assert_eq!(l.originals.len(), 8);
        assert_eq!(fit(100, l, LIMIT).attributes.len(), MAX_ATTRIBUTES);

        // Ten of its own and no correlation id attribute: the record's correlation id still takes one.
        let mut m = message_with(&nine);
        m.message_attributes
            .insert("a0".into(), string_attribute("0"));
        assert_eq!(letter(&m, "x", None).over_limit, ["a8", "a9"]);

        // No correlation id to write: its room goes to the originals.
        let mut f = failure("x");
        f.correlation_id.clear();
        let l = Letter::of(&m, &f, "correlationId", None);
        assert_eq!(
            (l.correlation.as_ref(), l.over_limit.as_slice()),
            (None, &["a9".to_owned()][..])
        );
        assert_eq!(fit(100, l, LIMIT).attributes.len(), MAX_ATTRIBUTES);
    }

    #[test]
    fn binary_values_are_copied_as_the_same_bytes_with_their_type() {
        let thumbnail = [0x89, b'P', b'N', b'G', 0x00, 0xff, 0x80];
        let mut m = message_with(&[("tenant", "acme")]);
        m.message_attributes
            .insert("thumbnail".into(), binary_attribute("Binary", &thumbnail));
        m.message_attributes.insert(
            "signature".into(),
            binary_attribute("Binary.sha256", &[0; 32]),
        );
        let l = letter(&m, "x", None);
        assert!(l.not_copied.is_empty() && l.over_limit.is_empty());
        let fitted = fit(100, l, LIMIT);
        assert_eq!(
            names(&fitted),
            [
                attributes::CONTEXT,
                "correlationId",
                "signature",
                "tenant",
                "thumbnail"
            ]
        );
        assert_eq!(
            fitted.attributes[4],
            Attribute {
                name: "thumbnail".into(),
                data_type: "Binary".into(),
                value: Value::Bytes(thumbnail.to_vec()),
            }
        );
        assert_eq!(fitted.attributes[2].data_type, "Binary.sha256");
        // Sent as SQS's BinaryValue, with no StringValue beside it.
        let sdk = fitted.attributes[4].to_sdk().expect("valid");
        assert_eq!(sdk.data_type(), "Binary");
        assert_eq!(sdk.binary_value().map(|b| b.as_ref()), Some(&thumbnail[..]));
        assert_eq!(sdk.string_value(), None);
        let sdk = fitted.attributes[3].to_sdk().expect("valid");
        assert_eq!(
            (sdk.string_value(), sdk.binary_value()),
            (Some("acme"), None)
        );
    }

    #[test]
    fn list_values_and_values_of_another_type_are_not_copied_and_named() {
        let mut m = message_with(&[("tenant", "acme")]);
        let mut strings = SqsMessageAttribute::default();
        strings.data_type = Some("String".into());
        strings.string_list_values = vec!["a".into(), "b".into()];
        m.message_attributes.insert("tags".into(), strings);
        let mut blobs = SqsMessageAttribute::default();
        blobs.data_type = Some("Binary".into());
        blobs.binary_list_values.push(
            binary_attribute("Binary", &[1])
                .binary_value
                .expect("bytes"),
        );
        m.message_attributes.insert("blobs".into(), blobs);
        // Text where SQS expects bytes, and bytes where it expects text.
        let mut mistyped = string_attribute("iVBORw0K");
        mistyped.data_type = Some("Binary".into());
        m.message_attributes.insert("image".into(), mistyped);
        m.message_attributes
            .insert("count".into(), binary_attribute("Number", &[7]));
        let l = letter(&m, "x", None);
        assert_eq!(l.not_copied, ["blobs", "count", "image", "tags"]);
        assert_eq!(
            names(&fit(100, l, LIMIT)),
            [attributes::CONTEXT, "correlationId", "tenant"]
        );
        // A label that only starts like `Binary` is a text type.
        assert!(is_binary("Binary") && is_binary("Binary.gzip"));
        assert!(!is_binary("BinaryData") && !is_binary("String.Binary"));
    }

    #[test]
    fn a_binary_value_counts_its_bytes_toward_the_size() {
        // 300 bytes; their base64 on the wire would be 400.
        let bytes = [0xff; 300];
        let with_binary = || {
            let mut m = message_with(&[]);
            m.message_attributes
                .insert("thumbnail".into(), binary_attribute("Binary", &bytes));
            letter(&m, "insufficient balance", None)
        };
        let bare = total(
            0,
            &fit(
                0,
                letter(&message_with(&[]), "insufficient balance", None),
                LIMIT,
            ),
        );
        let full = bare + "thumbnail".len() + "Binary".len() + bytes.len();
        assert_eq!(with_binary().size(0), full);
        // Exactly at the limit: kept.
        let f = fit(LIMIT - full, with_binary(), LIMIT);
        assert_eq!(
            names(&f),
            [attributes::CONTEXT, "correlationId", "thumbnail"]
        );
        assert_eq!(total(LIMIT - full, &f), LIMIT);
        // One byte over: the binary original goes first, nothing else.
        let f = fit(LIMIT - full + 1, with_binary(), LIMIT);
        assert_eq!(f.dropped, ["thumbnail"]);
        assert!(f.dropped_fields.is_empty() && !f.shortened);
        assert_eq!(total(LIMIT - full + 1, &f), LIMIT - full + 1 + bare);
    }

    #[test]
    fn the_context_carries_the_failure_and_the_redrive_facts() {
        let l = letter(
            &record_with(&[("tenant", "acme")]),
            "insufficient balance",
            Some(30 * DAY),
        );
        let c = context(&fit(100, l, LIMIT));
        let sent = std::time::UNIX_EPOCH + Duration::from_millis(1_750_000_000_123);
        assert_eq!(
            c,
            DeadLetterContext {
                error_kind: "precondition".into(),
                original_message_id: ID.into(),
                error_class: Some("permanent".into()),
                error: Some("insufficient balance".into()),
                attempts: Some(3),
                consumer: Some("apply-ledger".into()),
                consumer_version: Some(2),
                stream: None,
                redrive: RedriveContext {
                    source_queue: Some("arn:aws:sqs:us-east-1:123456789012:ledger".into()),
                    first_sent: Some(sent),
                    expires: Some(sent + 30 * DAY),
                },
            }
        );
        // An empty error is left out; a long one keeps its first 1,024 characters.
        let c = context(&fit(100, letter(&message_with(&[]), "", None), LIMIT));
        assert_eq!((c.error, c.redrive.is_empty()), (None, true));
        let c = context(&fit(
            100,
            letter(&message_with(&[]), &"é".repeat(2000), None),
            LIMIT,
        ));
        assert_eq!(c.error.map(|e| e.chars().count()), Some(MAX_ERROR_CHARS));
    }

    #[test]
    fn sqsafe_attributes_of_the_original_are_not_copied_but_its_first_send_is_kept() {
        // A message redriven earlier, with the first send a redrive puts on it, and stale context.
        let l = letter(
            &record_with(&[
                (attributes::FIRST_SENT, "2025-06-01T00:00:00Z"),
                (attributes::CONTEXT, "{}"),
                (attributes::REDRIVE, "{}"),
                ("sqsafe.error", "stale"),
            ]),
            "fresh",
            Some(DAY),
        );
        assert!(l.over_limit.is_empty() && l.not_copied.is_empty());
        let fitted = fit(100, l, LIMIT);
        assert_eq!(names(&fitted), [attributes::CONTEXT, "correlationId"]);
        let c = context(&fitted);
        assert_eq!(c.error.as_deref(), Some("fresh"));
        let first: jiff::Timestamp = "2025-06-01T00:00:00Z".parse().expect("time");
        assert_eq!(
            c.redrive.first_sent,
            Some(std::time::SystemTime::from(first))
        );
    }

    #[test]
    fn the_copy_shrinks_in_order_down_to_kind_and_original_id() {
        let error = "e".repeat(1500);
        let message = record_with(&[("a", &"x".repeat(300)), ("b", &"y".repeat(300))]);
        let l = || letter(&message, &error, Some(DAY));
        let full = total(0, &fit(0, l(), LIMIT));
        // One byte over: the redrive fields go, nothing else.
        let f = fit(LIMIT - full + 1, l(), LIMIT);
        assert_eq!(f.dropped_fields, ["source_queue", "first_sent", "expires"]);
        assert!(f.dropped.is_empty() && !f.shortened);
        assert_eq!(names(&f), [attributes::CONTEXT, "correlationId", "a", "b"]);
        assert!(context(&f).redrive.is_empty());
        let mut without_redrive = l();
        without_redrive.context.redrive = RedriveContext::default();
        let rest = without_redrive.size(0);
        // Then the originals, last first.
        let f = fit(LIMIT - rest + 10, l(), LIMIT);
        assert_eq!(f.dropped, ["b"]);
        assert!(!f.shortened);
        // No original fits, and the error must give up 200 bytes more.
        let body = LIMIT - rest + 800;
        let f = fit(body, l(), LIMIT);
        assert_eq!(f.dropped, ["b", "a"]);
        assert!(f.shortened);
        assert_eq!(f.dropped_fields.len(), 3, "only the redrive fields");
        let shortened = context(&f).error.expect("error");
        assert!(shortened.ends_with(ELLIPSIS) && shortened.len() < MAX_ERROR_CHARS);
        assert!(total(body, &f) <= LIMIT);
        // Nothing optional fits.
        let minimal = attributes::CONTEXT.len()
            + "String".len()
            + format!(r#"{{"error_kind":"precondition","original_message_id":"{ID}"}}"#).len();
        let f = fit(LIMIT - minimal, l(), LIMIT);
        assert_eq!(names(&f), [attributes::CONTEXT]);
        assert_eq!(f.dropped, ["b", "a", "correlationId"]);
        assert_eq!(
            f.dropped_fields,
            [
                "source_queue",
                "first_sent",
                "expires",
                "error",
                "consumer_version",
                "consumer",
                "error_class",
                "attempts"
            ]
        );
        assert_eq!(
            context(&f),
            DeadLetterContext {
                error_kind: "precondition".into(),
                original_message_id: ID.into(),
                ..DeadLetterContext::default()
            }
        );
        assert_eq!(total(LIMIT - minimal, &f), LIMIT);
        // One byte more: nothing fits.
        let f = fit(LIMIT - minimal + 1, l(), LIMIT);
        assert!(f.attributes.is_empty());
        assert_eq!(
            f.dropped.last().map(String::as_str),
            Some(attributes::CONTEXT)
        );
    }

    #[test]
    fn a_body_at_the_limit_goes_alone() {
        let l = letter(
            &record_with(&[("tenant", "acme")]),
            "insufficient balance",
            Some(DAY),
        );
        let f = fit(LIMIT, l, LIMIT);
        assert!(f.attributes.is_empty());
        assert_eq!(total(LIMIT, &f), LIMIT);
        assert_eq!(f.dropped, ["tenant", "correlationId", attributes::CONTEXT]);
    }

    #[test]
    fn a_shortened_error_ends_on_a_character_boundary() {
        let error = "é".repeat(600); // 2 bytes each
        let l = || letter(&message_with(&[]), &error, None);
        let full = total(0, &fit(0, l(), LIMIT));
        let f = fit(LIMIT - full + 301, l(), LIMIT);
        assert!(f.shortened);
        assert!(context(&f).error.is_some_and(|e| e.ends_with(ELLIPSIS)));
        assert!(total(LIMIT - full + 301, &f) <= LIMIT);
    }

    #[test]
    fn a_shortened_error_fits_with_its_json_escapes() {
        // 500 bytes, 1,200 in the JSON: each quote takes two bytes there, each control character six.
        let error = "\"q\" \u{1}".repeat(100);
        let l = || letter(&message_with(&[]), &error, None);
        let full = total(0, &fit(0, l(), LIMIT));
        for over in [1, 100, 465] {
            let f = fit(LIMIT - full + over, l(), LIMIT);
            assert!(f.shortened, "{over}");
            assert!(total(LIMIT - full + over, &f) <= LIMIT, "{over}");
        }
        // The cut is counted in the message's bytes: less than 32 of them left, the error goes whole.
        let f = fit(LIMIT - full + 466, l(), LIMIT);
        assert_eq!(
            (f.shortened, f.dropped_fields.as_slice()),
            (false, &["error"][..])
        );
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
