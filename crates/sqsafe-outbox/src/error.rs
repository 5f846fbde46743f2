use std::collections::HashMap;

use aws_sdk_dynamodb::types::AttributeValue;

/// The crate's result type.
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// What can go wrong while writing an outbox event or relaying one.
///
/// [`is_retryable`](Error::is_retryable) tells a failure that the same call can get past later (throttling, a
/// transaction conflict, a timeout) from one it cannot (an invalid event, a refused business condition). Each variant
/// has a short stable [`kind`](Error::kind) for logs.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// The event cannot be written or published as it is (an empty type, a payload too large, an event id SQS would
    /// refuse as a deduplication id, a destination that is not a queue URL). Nothing was written.
    #[error("outbox event {event_id}: {reason}")]
    InvalidEvent {
        /// The event.
        event_id: String,
        /// What is wrong.
        reason: String,
    },
    /// A FIFO destination (a queue URL ending in `.fifo`) needs a message group id; the event has none.
    #[error(
        "outbox event {event_id}: {destination} is a FIFO queue and needs a message group id (OutboxEvent::with_message_group_id)"
    )]
    MissingGroupId {
        /// The event.
        event_id: String,
        /// The FIFO queue.
        destination: String,
    },
    /// An outbox item with this event id already exists with other content (type, payload, destination or group):
    /// the producer reused an event id for a different event. Nothing was written.
    #[error("outbox event {event_id}: the id is already taken by an event with other content")]
    EventIdReused {
        /// The event.
        event_id: String,
    },
    /// One of the caller's own writes in the transaction had its condition refused: nothing was written, neither
    /// the business item nor the outbox item.
    #[error(
        "outbox event {event_id}: business write {index} was refused by its condition; nothing was written"
    )]
    BusinessRefused {
        /// The event.
        event_id: String,
        /// Index of the refused write among the caller's writes.
        index: usize,
        /// The item as it was, when that write asked for `ReturnValuesOnConditionCheckFailure = ALL_OLD`.
        item: Option<HashMap<String, AttributeValue>>,
    },
    /// More business writes than a transaction can hold beside the outbox item.
    #[error(
        "a transaction holds at most {max} business writes beside the outbox item, got {count}"
    )]
    TooManyWrites {
        /// How many were given.
        count: usize,
        /// The limit ([`MAX_BUSINESS_WRITES`](crate::MAX_BUSINESS_WRITES)).
        max: usize,
    },
    /// The payload could not be serialised to JSON.
    #[error("outbox event payload: {0}")]
    Payload(#[source] serde_json::Error),
    /// An item marked as an outbox event lacks a field or holds one of the wrong type (written by something other
    /// than [`Outbox`](crate::Outbox), or by an incompatible version).
    #[error("malformed outbox item: {0}")]
    MalformedItem(String),
    /// The relay was asked to publish to a queue that is not among its allowed destinations.
    #[error(
        "outbox event {event_id}: destination {destination} is not among the relay's allowed destinations"
    )]
    DestinationNotAllowed {
        /// The event.
        event_id: String,
        /// The destination it names.
        destination: String,
    },
    /// DynamoDB answered something that cannot happen with this crate's own writes (a refused condition without
    /// the old item it was asked for).
    #[error("outbox event {event_id}: inconsistent answer: {detail}")]
    Inconsistent {
        /// The event.
        event_id: String,
        /// What was seen.
        detail: String,
    },
    /// A call to DynamoDB or SQS failed (throttling, a transaction conflict, a timeout, a refused request).
    #[error("outbox event {event_id}: {operation} failed{}: {message}", code_part(.code))]
    Aws {
        /// The event.
        event_id: String,
        /// `TransactWriteItems`, `SendMessage`, `UpdateItem`.
        operation: &'static str,
        /// The service's error code, when it gave one.
        code: Option<String>,
        /// The error, with its sources.
        message: String,
    },
}

fn code_part(code: &Option<String>) -> String {
    code.as_deref()
        .map(|c| format!(" ({c})"))
        .unwrap_or_default()
}

/// Error codes no retry of the same request gets past.
const PERMANENT_CODES: &[&str] = &[
    "ValidationException",
    "ResourceNotFoundException",
    "AccessDeniedException",
    "AccessDenied",
    "UnrecognizedClientException",
    "InvalidParameterValue",
    "InvalidParameterCombination",
    "MissingParameter",
    "InvalidMessageContents",
    "AWS.SimpleQueueService.NonExistentQueue",
    "QueueDoesNotExist",
    "UnsupportedOperation",
];

impl Error {
    /// Whether the same call may succeed later: throttling, transaction conflicts, timeouts and 5xx are; invalid
    /// events, reused ids, refused business conditions, malformed items and refused requests are not.
    pub fn is_retryable(&self) -> bool {
        match self {
            Error::Aws { code, .. } => code
                .as_deref()
                .is_none_or(|c| !PERMANENT_CODES.contains(&c)),
            _ => false,
        }
    }

    /// A short stable label for logs: `invalid_event`, `missing_group_id`, `event_id_reused`, `business_refused`,
    /// `too_many_writes`, `payload`, `malformed_item`, `destination_not_allowed`, `inconsistent`, `aws`.
    pub fn kind(&self) -> &'static str {
        match self {
            Error::InvalidEvent { .. } => "invalid_event",
            Error::MissingGroupId { .. } => "missing_group_id",
            Error::EventIdReused { .. } => "event_id_reused",
            Error::BusinessRefused { .. } => "business_refused",
            Error::TooManyWrites { .. } => "too_many_writes",
            Error::Payload(_) => "payload",
            Error::MalformedItem(_) => "malformed_item",
            Error::DestinationNotAllowed { .. } => "destination_not_allowed",
            Error::Inconsistent { .. } => "inconsistent",
            Error::Aws { .. } => "aws",
        }
    }

    /// An SDK failure, with its service code and the chain of sources in the message.
    pub(crate) fn aws<E>(operation: &'static str, event_id: &str, error: E) -> Self
    where
        E: std::error::Error + aws_sdk_dynamodb::error::ProvideErrorMetadata + 'static,
    {
        let code = error.code().map(str::to_owned);
        Error::Aws {
            event_id: event_id.to_owned(),
            operation,
            code,
            message: chain(&error),
        }
    }
}

/// The error and its sources, `: `-separated (the SDK's top-level message alone says little, e.g. "service error").
fn chain(error: &(dyn std::error::Error + 'static)) -> String {
    let mut text = error.to_string();
    let mut source = error.source();
    while let Some(e) = source {
        text.push_str(": ");
        text.push_str(&e.to_string());
        source = e.source();
    }
    text
}

#[cfg(test)]
mod tests {
    use super::*;

    fn aws(code: Option<&str>) -> Error {
        Error::Aws {
            event_id: "e-1".into(),
            operation: "SendMessage",
            code: code.map(str::to_owned),
            message: "m".into(),
        }
    }

    #[test]
    fn only_aws_failures_without_a_permanent_code_are_retryable() {
        assert!(aws(None).is_retryable(), "a timeout has no code");
        assert!(aws(Some("ThrottlingException")).is_retryable());
        assert!(aws(Some("TransactionConflict")).is_retryable());
        assert!(!aws(Some("ValidationException")).is_retryable());
        assert!(!aws(Some("AccessDenied")).is_retryable());
        let reused = Error::EventIdReused {
            event_id: "e-1".into(),
        };
        assert!(!reused.is_retryable());
        assert_eq!(reused.kind(), "event_id_reused");
    }

    #[test]
    fn messages_name_the_event_and_the_code() {
        assert_eq!(
            aws(Some("ThrottlingException")).to_string(),
            "outbox event e-1: SendMessage failed (ThrottlingException): m"
        );
        assert_eq!(
            aws(None).to_string(),
            "outbox event e-1: SendMessage failed: m"
        );
    }
}
