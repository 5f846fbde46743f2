//! Correlation ids: one id that follows a piece of work across queues, functions and HTTP calls, so one
//! CloudWatch Logs Insights query finds every line about it.
//!
//! ```
//! use aws_lambda_events::sqs::SqsMessage;
//! use sqsafe_telemetry::correlation::{self, CorrelationOrigin, CorrelationSource};
//!
//! let mut message = SqsMessage::default();
//! message.body = Some(r#"{"order_id":"o-7","correlation_id":"checkout-7"}"#.to_owned());
//!
//! // The `correlationId` message attribute first, then the body's `/correlation_id`, else a new UUID.
//! let source = CorrelationSource::new().body_pointer("/correlation_id");
//! let id = source.extract(&message);
//! assert_eq!(id.as_str(), "checkout-7");
//! assert_eq!(id.origin(), CorrelationOrigin::Body);
//!
//! // Pass it on: `with_correlation(sqs.send_message(), &id)` for the next queue, this for HTTP.
//! let (name, value) = correlation::http_header(&id);
//! assert_eq!((name, value.as_str()), ("x-correlation-id", "checkout-7"));
//! ```
//!
//! A value read from a message is untrusted: control characters are removed, surrounding whitespace is trimmed,
//! and it is cut to [`MAX_CHARS`] characters, so it cannot forge log lines or break an HTTP header. A value that is
//! empty after that counts as absent. Bodies are parsed only to read the pointer; nothing here logs them.

use std::fmt;
use std::sync::Arc;

use aws_lambda_events::sqs::SqsMessage;
use aws_sdk_sqs::operation::send_message::builders::SendMessageFluentBuilder;
use aws_sdk_sqs::types::MessageAttributeValue;

/// The SQS message attribute that carries the correlation id.
pub const DEFAULT_ATTRIBUTE: &str = "correlationId";

/// The HTTP header that carries the correlation id.
pub const HTTP_HEADER: &str = "x-correlation-id";

/// The longest correlation id kept, in characters; longer values are cut.
pub const MAX_CHARS: usize = 256;

/// Where a [`CorrelationId`] came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum CorrelationOrigin {
    /// The message attribute (or a value supplied through [`CorrelationId::new`]).
    Attribute,
    /// The message body, at the configured JSON pointer.
    Body,
    /// The envelope around the payload: an SNS notification's message attribute of the same name, an EventBridge
    /// event's `id` (see [`CorrelationSource::extract_with`]).
    Envelope,
    /// Nothing carried one, so a new id was generated: this message starts a new trail.
    Generated,
}

/// A correlation id: a short, clean string and where it came from.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct CorrelationId {
    value: String,
    origin: CorrelationOrigin,
}

impl CorrelationId {
    /// An id you already hold (an incoming HTTP header, a test value), cleaned like one read from a message.
    /// Its origin is [`CorrelationOrigin::Attribute`]: supplied, not generated.
    ///
    /// A value with nothing left after cleaning gives an empty id, which SQS refuses as an attribute value; ids
    /// from [`CorrelationSource::extract`] are never empty.
    pub fn new(value: impl Into<String>) -> Self {
        Self {
            value: clean(&value.into()),
            origin: CorrelationOrigin::Attribute,
        }
    }

    /// The id.
    pub fn as_str(&self) -> &str {
        &self.value
    }

    /// Where it came from.
    pub fn origin(&self) -> CorrelationOrigin {
        self.origin
    }
}

impl fmt::Display for CorrelationId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.value)
    }
}

type Generator = Arc<dyn Fn() -> String + Send + Sync>;

/// Where to look for a message's correlation id, and how to make one when there is none.
///
/// # Default
///
/// The [`DEFAULT_ATTRIBUTE`] message attribute, no body pointer, random version-4 UUIDs.
#[derive(Clone)]
pub struct CorrelationSource {
    attribute: String,
    body_pointer: Option<String>,
    generator: Generator,
}

impl CorrelationSource {
    /// The defaults.
    pub fn new() -> Self {
        Self {
            attribute: DEFAULT_ATTRIBUTE.to_owned(),
            body_pointer: None,
            generator: Arc::new(|| uuid::Uuid::new_v4().to_string()),
        }
    }

    /// Reads the message attribute `name` instead of [`DEFAULT_ATTRIBUTE`].
    pub fn attribute(mut self, name: impl Into<String>) -> Self {
        self.attribute = name.into();
        self
    }

    /// Also looks in JSON bodies, at this JSON pointer (RFC 6901, e.g. `/correlation_id` or `/meta/trace`), when
    /// the attribute is absent. A pointer must start with `/`.
    pub fn body_pointer(mut self, pointer: impl Into<String>) -> Self {
        self.body_pointer = Some(pointer.into());
        self
    }

    /// Makes new ids with `f` instead of random UUIDs (tests pass a fixed one).
    pub fn generator(mut self, f: impl Fn() -> String + Send + Sync + 'static) -> Self {
        self.generator = Arc::new(f);
        self
    }

    /// The message's correlation id: the attribute's string value, else the string at the body pointer (when the
    /// body is JSON), else a generated one. Values are cleaned (see the [module docs](crate::correlation)) and must be non-empty
    /// to count. Never fails: a malformed body just means the next source is used.
    pub fn extract(&self, message: &SqsMessage) -> CorrelationId {
        self.extract_with(message, None)
    }

    /// [`extract`](Self::extract) for a payload inside an envelope (SNS, EventBridge): the SQS message attribute
    /// first, then the id the envelope carried (`carried`: the notification's attribute of the same name, the event's
    /// id), then the body pointer, then a generated one.
    pub fn extract_with(&self, message: &SqsMessage, carried: Option<&str>) -> CorrelationId {
        let (value, origin) = if let Some(value) = self.attribute_value(message) {
            (value, CorrelationOrigin::Attribute)
        } else if let Some(value) = carried.and_then(|v| non_empty(clean(v))) {
            (value, CorrelationOrigin::Envelope)
        } else if let Some(value) = self.body_value(message) {
            (value, CorrelationOrigin::Body)
        } else {
            (clean(&(self.generator)()), CorrelationOrigin::Generated)
        };
        CorrelationId { value, origin }
    }

    /// The message attribute it reads (an SNS notification carries its publisher's under the same name).
    pub fn attribute_name(&self) -> &str {
        &self.attribute
    }

    fn attribute_value(&self, message: &SqsMessage) -> Option<String> {
        let value = message
            .message_attributes
            .get(&self.attribute)?
            .string_value
            .as_deref()?;
        non_empty(clean(value))
    }

    fn body_value(&self, message: &SqsMessage) -> Option<String> {
        let pointer = self.body_pointer.as_deref()?;
        let body: serde_json::Value = serde_json::from_str(message.body.as_deref()?).ok()?;
        non_empty(clean(body.pointer(pointer)?.as_str()?))
    }
}

impl Default for CorrelationSource {
    fn default() -> Self {
        Self::new()
    }
}

impl fmt::Debug for CorrelationSource {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("CorrelationSource")
            .field("attribute", &self.attribute)
            .field("body_pointer", &self.body_pointer)
            .finish_non_exhaustive()
    }
}

/// The id as an SQS message attribute value (data type `String`).
pub fn sqs_attribute(id: &CorrelationId) -> MessageAttributeValue {
    MessageAttributeValue::builder()
        .data_type("String")
        .string_value(id.as_str())
        .build()
        // `build` fails only when `data_type` is missing, and it is set just above.
        .unwrap_or_else(|_| unreachable!("data_type is set"))
}

/// Adds the id to an outgoing message under [`DEFAULT_ATTRIBUTE`], so the next consumer continues the trail.
pub fn with_correlation(
    builder: SendMessageFluentBuilder,
    id: &CorrelationId,
) -> SendMessageFluentBuilder {
    builder.message_attributes(DEFAULT_ATTRIBUTE, sqs_attribute(id))
}

/// The id as an HTTP header, `(HTTP_HEADER, value)`, for any HTTP client.
pub fn http_header(id: &CorrelationId) -> (&'static str, String) {
    (HTTP_HEADER, id.as_str().to_owned())
}

/// Removes control characters and surrounding whitespace, and cuts to [`MAX_CHARS`].
fn clean(raw: &str) -> String {
    let trimmed = raw.trim();
    // The usual case, a short clean id: what the steps below would give, without building three strings.
    if trimmed.len() <= MAX_CHARS && !trimmed.chars().any(char::is_control) {
        return trimmed.to_owned();
    }
    let without_controls: String = raw.chars().filter(|c| !c.is_control()).collect();
    let cut: String = without_controls.trim().chars().take(MAX_CHARS).collect();
    cut.trim_end().to_owned()
}

fn non_empty(value: String) -> Option<String> {
    (!value.is_empty()).then_some(value)
}

#[cfg(test)]
mod tests;
