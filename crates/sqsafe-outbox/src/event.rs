//! The event a producer records: what to publish, where, and under which ids.

use serde::Serialize;
use sqsafe_telemetry::TraceContext;

use crate::error::{Error, Result};

/// The longest event id and message group id: SQS's limit for `MessageDeduplicationId` and `MessageGroupId`.
pub const MAX_ID_CHARS: usize = 128;

/// The largest payload, in bytes: 390,000. SQS takes messages of up to 1 MiB (a destination's `MaximumMessageSize`
/// may be smaller: it then refuses the event at publish, a permanent failure); the binding limit is DynamoDB's 400 KB
/// item, which the outbox item, with its longest ids, type and destination ([`MAX_DESTINATION_BYTES`]), still fits
/// with this payload.
pub const MAX_PAYLOAD_BYTES: usize = 390_000;

/// The longest destination queue URL, in bytes (an SQS queue URL is about 120).
pub const MAX_DESTINATION_BYTES: usize = 1024;

/// The longest event type, in characters.
pub const MAX_EVENT_TYPE_CHARS: usize = 256;

/// One event to publish: its id, type, payload (the SQS message body, as is), destination queue URL, correlation
/// id and, for a FIFO destination, message group id.
///
/// **The event id is assigned once, before the first write, and kept on every retry.** Build the event once and
/// pass the same value to each try of [`Outbox::write`](crate::Outbox::write): a retry then meets the outbox item
/// its earlier try committed and writes nothing ([`Written::AlreadyRecorded`](crate::Written::AlreadyRecorded)).
/// [`OutboxEvent::new`] draws a random UUID; a producer that can retry across restarts should derive the id from
/// its own intent instead (`order-42/placed`) with [`with_event_id`](OutboxEvent::with_event_id), which is also how
/// tests pin it.
///
/// ```
/// use sqsafe_outbox::OutboxEvent;
///
/// let event = OutboxEvent::new(
///     "LedgerEntryRequested",
///     r#"{"version":"1","entry_id":"e-1","account_id":"acct-A","tenant":"acme","amount":1000,"currency":"EUR"}"#,
///     "https://sqs.eu-west-1.amazonaws.com/123456789012/ledger.fifo",
/// )
/// .with_event_id("entry-e-1")
/// .with_correlation_id("checkout-7")
/// .with_message_group_id("acct-A"); // required: the destination is a FIFO queue
/// assert_eq!(event.event_id(), "entry-e-1");
/// assert!(event.is_fifo());
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OutboxEvent {
    pub(crate) event_id: String,
    pub(crate) event_type: String,
    pub(crate) payload: String,
    pub(crate) destination: String,
    pub(crate) correlation_id: Option<String>,
    pub(crate) message_group_id: Option<String>,
    /// The W3C `traceparent` of the context the event was written in.
    pub(crate) traceparent: Option<String>,
}

impl OutboxEvent {
    /// An event with a new random id (a version-4 UUID). `payload` becomes the SQS message body unchanged.
    pub fn new(
        event_type: impl Into<String>,
        payload: impl Into<String>,
        destination: impl Into<String>,
    ) -> Self {
        Self {
            event_id: uuid::Uuid::new_v4().to_string(),
            event_type: event_type.into(),
            payload: payload.into(),
            destination: destination.into(),
            correlation_id: None,
            message_group_id: None,
            traceparent: None,
        }
    }

    /// [`new`](OutboxEvent::new) with `payload` serialised to JSON.
    ///
    /// # Errors
    /// [`Error::Payload`] when `payload` does not serialise.
    pub fn json<T: Serialize + ?Sized>(
        event_type: impl Into<String>,
        payload: &T,
        destination: impl Into<String>,
    ) -> Result<Self> {
        let body = serde_json::to_string(payload).map_err(Error::Payload)?;
        Ok(Self::new(event_type, body, destination))
    }

    /// Sets the event id (derived from the producer's own intent, or pinned by a test). At most
    /// [`MAX_ID_CHARS`] printable ASCII characters without spaces: it is the FIFO deduplication id.
    pub fn with_event_id(mut self, event_id: impl Into<String>) -> Self {
        self.event_id = event_id.into();
        self
    }

    /// Sets the correlation id the message carries (the `correlationId` attribute sqsafe's consumers read). Without
    /// one, the event id is used: every copy of the event, republished or not, shares it.
    pub fn with_correlation_id(mut self, correlation_id: impl Into<String>) -> Self {
        self.correlation_id = Some(correlation_id.into());
        self
    }

    /// Sets the trace context the event was written in (a consumer's `cx.trace_context()`): the item stores its
    /// `traceparent`, and the relay publishes the message with a `traceparent` attribute continuing that trace, so
    /// the next consumer's span is in the same trace. A context without a parent span stores nothing.
    pub fn with_trace_context(mut self, context: &TraceContext) -> Self {
        self.traceparent = context.traceparent();
        self
    }

    /// The trace context stored with the event, if any.
    pub fn trace_context(&self) -> Option<TraceContext> {
        self.traceparent
            .as_deref()
            .and_then(TraceContext::from_traceparent)
    }

    /// Sets the message group id, required for a FIFO destination: events of one group are delivered in order.
    pub fn with_message_group_id(mut self, group: impl Into<String>) -> Self {
        self.message_group_id = Some(group.into());
        self
    }

    /// The event id.
    pub fn event_id(&self) -> &str {
        &self.event_id
    }

    /// The event type (the `eventType` message attribute).
    pub fn event_type(&self) -> &str {
        &self.event_type
    }

    /// The payload: the message body.
    pub fn payload(&self) -> &str {
        &self.payload
    }

    /// The destination queue URL.
    pub fn destination(&self) -> &str {
        &self.destination
    }

    /// The correlation id as set, cleaned like every correlation id (control characters removed, at most 256
    /// characters), or the event id when none was set or nothing is left of it.
    pub fn correlation_id(&self) -> String {
        self.correlation_id
            .as_deref()
            .map(|c| sqsafe_telemetry::CorrelationId::new(c).as_str().to_owned())
            .filter(|c| !c.is_empty())
            .unwrap_or_else(|| self.event_id.clone())
    }

    /// The message group id, if any.
    pub fn message_group_id(&self) -> Option<&str> {
        self.message_group_id.as_deref()
    }

    /// Whether the destination is a FIFO queue (its URL ends in `.fifo`).
    pub fn is_fifo(&self) -> bool {
        self.destination.ends_with(".fifo")
    }

    /// The same event as far as publishing goes: type, payload, destination and group (the correlation id is left
    /// out: it does not change what is published, only how it is traced).
    pub(crate) fn same_content(&self, other: &OutboxEvent) -> bool {
        (
            &self.event_type,
            &self.payload,
            &self.destination,
            &self.message_group_id,
        ) == (
            &other.event_type,
            &other.payload,
            &other.destination,
            &other.message_group_id,
        )
    }

    /// Checks what SQS and DynamoDB would refuse, before anything is written.
    ///
    /// # Errors
    /// [`Error::InvalidEvent`], or [`Error::MissingGroupId`] for a FIFO destination without a group.
    pub fn validate(&self) -> Result<()> {
        let invalid = |reason: String| {
            Err(Error::InvalidEvent {
                event_id: self.event_id.clone(),
                reason,
            })
        };
        if let Some(reason) = id_problem(&self.event_id) {
            return invalid(format!("event id {reason}"));
        }
        if self.event_type.trim().is_empty() || self.event_type.chars().any(char::is_control) {
            return invalid("event type must be non-empty, without control characters".into());
        }
        if self.event_type.chars().count() > MAX_EVENT_TYPE_CHARS {
            return invalid(format!(
                "event type is longer than {MAX_EVENT_TYPE_CHARS} characters"
            ));
        }
        if self.payload.is_empty() {
            return invalid("payload is empty (SQS refuses an empty body)".into());
        }
        if self.payload.len() > MAX_PAYLOAD_BYTES {
            return invalid(format!(
                "payload is {} bytes, more than {MAX_PAYLOAD_BYTES}",
                self.payload.len()
            ));
        }
        if self.destination.len() > MAX_DESTINATION_BYTES {
            return invalid(format!(
                "destination is {} bytes, more than {MAX_DESTINATION_BYTES}",
                self.destination.len()
            ));
        }
        if !(self.destination.starts_with("https://") || self.destination.starts_with("http://")) {
            return invalid(format!(
                "destination {:?} is not a queue URL",
                self.destination
            ));
        }
        match (&self.message_group_id, self.is_fifo()) {
            (None, true) => Err(Error::MissingGroupId {
                event_id: self.event_id.clone(),
                destination: self.destination.clone(),
            }),
            (Some(group), _) => match id_problem(group) {
                Some(reason) => invalid(format!("message group id {reason}")),
                None => Ok(()),
            },
            (None, false) => Ok(()),
        }
    }
}

/// Why an id is not a valid SQS deduplication / group id: 1 to 128 printable ASCII characters, no spaces.
fn id_problem(id: &str) -> Option<String> {
    if id.is_empty() {
        return Some("is empty".into());
    }
    if id.chars().count() > MAX_ID_CHARS {
        return Some(format!("is longer than {MAX_ID_CHARS} characters"));
    }
    if !id.chars().all(|c| c.is_ascii_graphic()) {
        return Some("must be printable ASCII without spaces".into());
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    const QUEUE: &str = "https://sqs.eu-west-1.amazonaws.com/123456789012/payments";

    fn event() -> OutboxEvent {
        OutboxEvent::new("PaymentRequested", "{}", QUEUE).with_event_id("e-1")
    }

    fn reason(e: OutboxEvent) -> String {
        match e.validate() {
            Err(Error::InvalidEvent { reason, .. }) => reason,
            other => panic!("expected InvalidEvent, got {other:?}"),
        }
    }

    #[test]
    fn a_new_event_gets_a_random_id_and_keeps_it() {
        let a = OutboxEvent::new("T", "{}", QUEUE);
        let b = OutboxEvent::new("T", "{}", QUEUE);
        assert_ne!(a.event_id(), b.event_id());
        assert_eq!(
            a.clone().event_id(),
            a.event_id(),
            "a clone is the same event"
        );
        assert!(a.validate().is_ok());
    }

    #[test]
    fn the_correlation_id_defaults_to_the_event_id_and_is_cleaned() {
        assert_eq!(event().correlation_id(), "e-1");
        assert_eq!(
            event().with_correlation_id(" c-7\n").correlation_id(),
            "c-7"
        );
        assert_eq!(
            event().with_correlation_id("\u{7}").correlation_id(),
            "e-1",
            "nothing left"
        );
    }

    #[test]
    fn a_fifo_destination_needs_a_group() {
        let fifo = OutboxEvent::new("T", "{}", format!("{QUEUE}.fifo")).with_event_id("e-1");
        assert!(matches!(
            fifo.validate(),
            Err(Error::MissingGroupId { ref event_id, .. }) if event_id == "e-1"
        ));
        assert!(fifo.with_message_group_id("acct-A").validate().is_ok());
    }

    #[test]
    fn what_sqs_would_refuse_is_refused_before_writing() {
        assert!(reason(event().with_event_id("")).contains("empty"));
        assert!(reason(event().with_event_id("a b")).contains("printable"));
        assert!(reason(event().with_event_id("x".repeat(129))).contains("128"));
        assert!(reason(OutboxEvent::new("", "{}", QUEUE)).contains("event type"));
        assert!(reason(OutboxEvent::new("T", "", QUEUE)).contains("empty"));
        assert!(
            reason(OutboxEvent::new(
                "T",
                "x".repeat(MAX_PAYLOAD_BYTES + 1),
                QUEUE
            ))
            .contains("bytes")
        );
        assert!(reason(OutboxEvent::new("T", "{}", "payments")).contains("queue URL"));
        assert!(reason(event().with_message_group_id("g 1")).contains("group"));
    }

    #[test]
    fn json_payloads_serialise_once() {
        let e = OutboxEvent::json("T", &serde_json::json!({"a": 1}), QUEUE).expect("json");
        assert_eq!(e.payload(), r#"{"a":1}"#);
    }

    #[test]
    fn content_ignores_the_correlation_id() {
        let a = event().with_correlation_id("c-1");
        assert!(a.same_content(&event().with_correlation_id("c-2")));
        assert!(!a.same_content(&OutboxEvent::new("T", "{\"b\":1}", QUEUE)));
    }
}
