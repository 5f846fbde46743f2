//! What a redrive of a dead letter needs to know, carried on the dead-letter copy in its context
//! ([`DeadLetterContext::redrive`](crate::DeadLetterContext::redrive), in the attribute
//! [`attributes::CONTEXT`](crate::attributes::CONTEXT)); copies written before that carry it alone, in the legacy
//! attribute [`attributes::REDRIVE`](crate::attributes::REDRIVE).
//!
//! SQS's own redrive (`StartMessageMoveTask`) only knows the source of messages its redrive policy moved
//! (`DeadLetterQueueSourceArn`); for a copy that sqsafe sent to the DLQ itself it fails with
//! `CouldNotDetermineMessageSource` unless told a destination. So sqsafe records the source queue, and with it when
//! the message was first sent and until when the consumer's idempotency record protects its intent: a redrive after
//! that applies the effect again instead of replaying it. `sqsafe dlq redrive` (crate `sqsafe-cli`) reads it.

use std::time::{Duration, SystemTime};

use aws_lambda_events::sqs::SqsMessage;
use jiff::Timestamp;
use serde::{Deserialize, Serialize};

use crate::attributes;

/// The redrive facts of one dead letter. Every field is optional: a message without an event source ARN or a
/// `SentTimestamp`, or a DLQ without an idempotency window, leaves the field out.
///
/// Its JSON form has RFC 3339 times, readable in the console:
/// `{"source_queue":"arn:aws:sqs:eu-west-1:123456789012:orders","first_sent":"2025-06-01T10:00:00.123Z","expires":"2025-07-01T10:00:00.123Z"}`.
/// The same fields appear in [`DeadLetterContext`](crate::DeadLetterContext)'s JSON (serde: this struct flattened
/// into it); [`to_attribute_value`](Self::to_attribute_value) and [`parse`](Self::parse) are the legacy attribute
/// [`attributes::REDRIVE`](crate::attributes::REDRIVE) on its own.
///
/// ```
/// use std::time::{Duration, SystemTime};
/// use sqsafe_batch::RedriveContext;
///
/// let sent = SystemTime::UNIX_EPOCH + Duration::from_secs(1_750_000_000);
/// let context = RedriveContext {
///     source_queue: Some("arn:aws:sqs:eu-west-1:123456789012:orders".into()),
///     first_sent: Some(sent),
///     expires: Some(sent + Duration::from_secs(30 * 86_400)),
/// };
/// let value = context.to_attribute_value();
/// assert!(value.contains(r#""first_sent":"2025-06-15T15:06:40Z""#));
/// assert_eq!(RedriveContext::parse(&value), Some(context));
/// ```
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(into = "Wire", try_from = "Wire")]
pub struct RedriveContext {
    /// The ARN of the queue the message was consumed from (the record's `eventSourceARN`).
    pub source_queue: Option<String>,
    /// When the message was first sent: its `SentTimestamp`, or the earlier
    /// [`attributes::FIRST_SENT`](crate::attributes::FIRST_SENT) a redrive put on it.
    pub first_sent: Option<SystemTime>,
    /// `first_sent` plus the consumer's idempotency window: after this, the intent's idempotency record may have
    /// expired, and a redriven copy would apply its effect again.
    pub expires: Option<SystemTime>,
}

/// The JSON form: times as RFC 3339 strings.
#[derive(Serialize, Deserialize)]
struct Wire {
    #[serde(skip_serializing_if = "Option::is_none", default)]
    source_queue: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none", default)]
    first_sent: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none", default)]
    expires: Option<String>,
}

impl From<RedriveContext> for Wire {
    fn from(c: RedriveContext) -> Self {
        Self {
            source_queue: c.source_queue,
            first_sent: c.first_sent.map(format_time),
            expires: c.expires.map(format_time),
        }
    }
}

impl TryFrom<Wire> for RedriveContext {
    type Error = String;

    fn try_from(wire: Wire) -> Result<Self, Self::Error> {
        let time = |field: &str, t: Option<String>| match t {
            Some(t) => parse_time(&t)
                .map(Some)
                .ok_or_else(|| format!("{field}: not an RFC 3339 time: {t:?}")),
            None => Ok(None),
        };
        Ok(Self {
            source_queue: wire.source_queue,
            first_sent: time("first_sent", wire.first_sent)?,
            expires: time("expires", wire.expires)?,
        })
    }
}

impl RedriveContext {
    /// The facts of `message`, with `expires` from `idempotency_window` when known.
    pub fn of(message: &SqsMessage, idempotency_window: Option<Duration>) -> Self {
        let sent = message
            .attributes
            .get("SentTimestamp")
            .and_then(|ms| ms.trim().parse::<i64>().ok())
            .and_then(|ms| Timestamp::from_millisecond(ms).ok())
            .map(SystemTime::from);
        // A message that was redriven carries the time its first copy was sent: the idempotency record was written
        // after that, not after the redrive.
        let carried = message
            .message_attributes
            .get(attributes::FIRST_SENT)
            .and_then(|a| a.string_value.as_deref())
            .and_then(parse_time);
        let first_sent = match (sent, carried) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        };
        let expires = first_sent
            .zip(idempotency_window)
            .and_then(|(at, window)| at.checked_add(window));
        Self {
            // A queue's ARN only: a stream record's dead letter has no queue to go back to.
            source_queue: message
                .event_source_arn
                .clone()
                .filter(|arn| arn.split(':').nth(2) == Some("sqs")),
            first_sent,
            expires,
        }
    }

    /// True when no fact is known.
    pub fn is_empty(&self) -> bool {
        self.source_queue.is_none() && self.first_sent.is_none() && self.expires.is_none()
    }

    /// Compact JSON, as the legacy attribute [`attributes::REDRIVE`](crate::attributes::REDRIVE) carried it.
    pub fn to_attribute_value(&self) -> String {
        // Serialising a struct of strings cannot fail.
        serde_json::to_string(self).unwrap_or_default()
    }

    /// Reads a value written by [`to_attribute_value`](Self::to_attribute_value) (a legacy
    /// [`attributes::REDRIVE`](crate::attributes::REDRIVE)); `None` when it is not in that form (unknown fields are
    /// ignored, so later versions may add some).
    pub fn parse(value: &str) -> Option<Self> {
        serde_json::from_str(value).ok()
    }
}

/// RFC 3339 in UTC, milliseconds when there are any (`2025-06-01T10:00:00.123Z`).
pub(crate) fn format_time(t: SystemTime) -> String {
    match Timestamp::try_from(t) {
        Ok(at) => Timestamp::from_millisecond(at.as_millisecond())
            .unwrap_or(at)
            .to_string(),
        // Outside years -9999..=9999: not a time SQS or Lambda produce.
        Err(_) => Timestamp::UNIX_EPOCH.to_string(),
    }
}

fn parse_time(s: &str) -> Option<SystemTime> {
    s.trim().parse::<Timestamp>().ok().map(SystemTime::from)
}

#[cfg(test)]
mod tests {
    use super::*;

    const ARN: &str = "arn:aws:sqs:us-east-1:123456789012:payments";

    fn message(sent_ms: Option<&str>, carried: Option<&str>) -> SqsMessage {
        let mut m = SqsMessage::default();
        m.event_source_arn = Some(ARN.into());
        if let Some(ms) = sent_ms {
            m.attributes.insert("SentTimestamp".into(), ms.into());
        }
        if let Some(at) = carried {
            let mut a = aws_lambda_events::sqs::SqsMessageAttribute::default();
            a.data_type = Some("String".into());
            a.string_value = Some(at.into());
            m.message_attributes
                .insert(attributes::FIRST_SENT.into(), a);
        }
        m
    }

    fn at(ms: u64) -> SystemTime {
        SystemTime::UNIX_EPOCH + Duration::from_millis(ms)
    }

    #[test]
    fn the_facts_come_from_the_record_and_the_window() {
        let day = Duration::from_secs(86_400);
        let c = RedriveContext::of(&message(Some("1750000000123"), None), Some(30 * day));
        assert_eq!(c.source_queue.as_deref(), Some(ARN));
        assert_eq!(c.first_sent, Some(at(1_750_000_000_123)));
        assert_eq!(c.expires, Some(at(1_750_000_000_123) + 30 * day));
        assert_eq!(
            c.to_attribute_value(),
            format!(
                r#"{{"source_queue":"{ARN}","first_sent":"2025-06-15T15:06:40.123Z","expires":"2025-07-15T15:06:40.123Z"}}"#
            )
        );
        assert_eq!(RedriveContext::parse(&c.to_attribute_value()), Some(c));
    }

    #[test]
    fn a_redriven_message_keeps_its_first_send() {
        // Redriven on 2025-07-01: its SentTimestamp is the redrive; the carried time is the original's.
        let c = RedriveContext::of(
            &message(Some("1751328000000"), Some("2025-06-15T15:06:40.123Z")),
            Some(Duration::from_secs(86_400)),
        );
        assert_eq!(c.first_sent, Some(at(1_750_000_000_123)));
        // A carried time later than the send (a clock error) never pushes the expiry out.
        let c = RedriveContext::of(
            &message(Some("1750000000123"), Some("2025-07-01T00:00:00Z")),
            None,
        );
        assert_eq!(c.first_sent, Some(at(1_750_000_000_123)));
        assert_eq!(c.expires, None, "no window, no expiry");
    }

    #[test]
    fn unknown_facts_are_left_out() {
        let mut m = message(Some("not a number"), None);
        m.event_source_arn = None;
        let c = RedriveContext::of(&m, Some(Duration::from_secs(60)));
        assert!(c.is_empty());
        assert_eq!(c.to_attribute_value(), "{}");
        assert_eq!(RedriveContext::parse("{}"), Some(RedriveContext::default()));
        assert_eq!(RedriveContext::parse("not json"), None);
        assert_eq!(RedriveContext::parse(r#"{"first_sent":"yesterday"}"#), None);
        assert!(
            RedriveContext::parse(r#"{"source_queue":"q","later":1}"#).is_some(),
            "unknown fields are ignored"
        );
    }
}
