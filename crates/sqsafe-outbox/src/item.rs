//! The outbox item: one DynamoDB item per event, written by [`Outbox`](crate::Outbox) and read back by the relay
//! from the table's stream. Its layout is defined here once, for both sides.

use std::collections::HashMap;

use aws_sdk_dynamodb::types::AttributeValue;

use crate::error::{Error, Result};
use crate::event::OutboxEvent;

/// The value of `entity` on an event id's reservation item (the relay and the sweeper ignore it).
pub const RESERVATION_ENTITY: &str = "sqsafe.outbox-id";

/// Attribute names of an outbox item (the key attributes are the table's, see
/// [`Outbox::key_attributes`](crate::Outbox::key_attributes)).
pub mod attributes {
    /// Marks the item as an outbox event ([`ENTITY`](super::ENTITY)): the relay ignores every other item of a
    /// table it shares.
    pub const ENTITY: &str = "entity";
    /// The event id.
    pub const EVENT_ID: &str = "event_id";
    /// The event type.
    pub const EVENT_TYPE: &str = "event_type";
    /// The payload (the message body).
    pub const PAYLOAD: &str = "payload";
    /// The destination queue URL.
    pub const DESTINATION: &str = "destination";
    /// The correlation id.
    pub const CORRELATION_ID: &str = "correlation_id";
    /// The message group id (FIFO destinations).
    pub const MESSAGE_GROUP_ID: &str = "message_group_id";
    /// The W3C `traceparent` the event was written in, when set.
    pub const TRACEPARENT: &str = "traceparent";
    /// `PENDING` or `SENT`.
    pub const STATUS: &str = "status";
    /// `PENDING` while the item is pending, removed when the relay marks it sent: the partition key of the sparse
    /// index that the sweeper reads (see [`PENDING_INDEX`](super::PENDING_INDEX)), so the index holds only what
    /// still waits to be published.
    pub const PENDING: &str = "pending";
    /// When the producer wrote it, epoch milliseconds.
    pub const CREATED_AT: &str = "created_at";
    /// When the relay marked it sent, epoch milliseconds.
    pub const SENT_AT: &str = "sent_at";
    /// The SQS message id of the publication that marked it sent.
    pub const SENT_MESSAGE_ID: &str = "sent_message_id";
    /// Epoch seconds after which a `SENT` item may be deleted (the table's TTL attribute); never set on a `PENDING`
    /// item, so an event not yet published is never expired.
    pub const EXPIRATION: &str = "expiration";
}

/// The value of [`attributes::ENTITY`] on every outbox item.
pub const ENTITY: &str = "sqsafe.outbox-event";

/// The default name of the outbox table's sparse global secondary index on pending items: partition key
/// [`attributes::PENDING`] (string), sort key [`attributes::CREATED_AT`] (number), every attribute projected. Only
/// pending items carry [`attributes::PENDING`], so the [`Sweeper`](crate::Sweeper) reads nothing else.
pub const PENDING_INDEX: &str = "PendingByAge";

/// Where an outbox item stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Status {
    /// Written by the producer, not yet confirmed published.
    Pending,
    /// Published, and marked so by the relay.
    Sent,
}

impl Status {
    /// `PENDING` or `SENT`, as stored.
    pub fn as_str(self) -> &'static str {
        match self {
            Status::Pending => "PENDING",
            Status::Sent => "SENT",
        }
    }

    fn parse(value: &str) -> Option<Self> {
        match value {
            "PENDING" => Some(Status::Pending),
            "SENT" => Some(Status::Sent),
            _ => None,
        }
    }
}

/// The item a new event is written as (key attributes included, status `PENDING`).
pub(crate) fn new_item(
    event: &OutboxEvent,
    key: HashMap<String, AttributeValue>,
    created_at_ms: u64,
) -> HashMap<String, AttributeValue> {
    let s = |v: &str| AttributeValue::S(v.to_owned());
    let mut item = key;
    item.insert(attributes::ENTITY.into(), s(ENTITY));
    item.insert(attributes::EVENT_ID.into(), s(&event.event_id));
    item.insert(attributes::EVENT_TYPE.into(), s(&event.event_type));
    item.insert(attributes::PAYLOAD.into(), s(&event.payload));
    item.insert(attributes::DESTINATION.into(), s(&event.destination));
    item.insert(
        attributes::CORRELATION_ID.into(),
        s(&event.correlation_id()),
    );
    if let Some(group) = &event.message_group_id {
        item.insert(attributes::MESSAGE_GROUP_ID.into(), s(group));
    }
    if let Some(traceparent) = &event.traceparent {
        item.insert(attributes::TRACEPARENT.into(), s(traceparent));
    }
    item.insert(attributes::STATUS.into(), s(Status::Pending.as_str()));
    item.insert(attributes::PENDING.into(), s(Status::Pending.as_str()));
    item.insert(
        attributes::CREATED_AT.into(),
        AttributeValue::N(created_at_ms.to_string()),
    );
    item
}

/// The reservation item of an event's id (see [`Outbox`](crate::Outbox)): what identifies the event, not its payload
/// (a SHA-256 of it), and an `expiration` for the table's TTL.
pub(crate) fn reservation_item(
    event: &OutboxEvent,
    key: HashMap<String, AttributeValue>,
    created_at_ms: u64,
    expires_secs: u64,
) -> HashMap<String, AttributeValue> {
    let s = |v: &str| AttributeValue::S(v.to_owned());
    let mut item = key;
    item.insert(attributes::ENTITY.into(), s(RESERVATION_ENTITY));
    item.insert(attributes::EVENT_ID.into(), s(&event.event_id));
    item.insert(attributes::EVENT_TYPE.into(), s(&event.event_type));
    item.insert(attributes::DESTINATION.into(), s(&event.destination));
    if let Some(group) = &event.message_group_id {
        item.insert(attributes::MESSAGE_GROUP_ID.into(), s(group));
    }
    item.insert(PAYLOAD_SHA256.into(), s(&payload_sha256(&event.payload)));
    item.insert(
        attributes::CREATED_AT.into(),
        AttributeValue::N(created_at_ms.to_string()),
    );
    item.insert(
        attributes::EXPIRATION.into(),
        AttributeValue::N(expires_secs.to_string()),
    );
    item
}

/// Whether a reservation item names this event (its type, destination, group and payload).
pub(crate) fn reservation_matches(
    item: &HashMap<String, AttributeValue>,
    event: &OutboxEvent,
) -> bool {
    let text = |name: &str| {
        item.get(name)
            .and_then(|v| v.as_s().ok())
            .map(String::as_str)
    };
    text(attributes::EVENT_ID) == Some(event.event_id.as_str())
        && text(attributes::EVENT_TYPE) == Some(event.event_type.as_str())
        && text(attributes::DESTINATION) == Some(event.destination.as_str())
        && text(attributes::MESSAGE_GROUP_ID) == event.message_group_id.as_deref()
        && text(PAYLOAD_SHA256) == Some(payload_sha256(&event.payload).as_str())
}

/// The reservation's digest of the payload.
const PAYLOAD_SHA256: &str = "payload_sha256";

fn payload_sha256(payload: &str) -> String {
    use sha2::Digest;
    sha2::Sha256::digest(payload.as_bytes())
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

/// An outbox item as read back: from the table's stream (the relay) or from a refused write (`ALL_OLD`).
#[derive(Debug, Clone, PartialEq)]
pub struct OutboxRecord {
    keys: HashMap<String, AttributeValue>,
    event: OutboxEvent,
    status: Status,
    created_at_ms: u64,
}

impl OutboxRecord {
    /// Reads an item. `keys` are the item's key attributes (a stream record's `Keys`); the relay marks the item
    /// sent by them, whatever the table's key schema.
    ///
    /// `Ok(None)` for an item that is not an outbox event (no [`attributes::ENTITY`] = [`ENTITY`]): a table shared
    /// with business items has those too.
    ///
    /// # Errors
    /// [`Error::MalformedItem`] for an outbox item that lacks a field or holds one of the wrong type.
    pub fn from_item(
        keys: HashMap<String, AttributeValue>,
        item: &HashMap<String, AttributeValue>,
    ) -> Result<Option<Self>> {
        if item.get(attributes::ENTITY).and_then(|v| v.as_s().ok()) != Some(&ENTITY.to_owned()) {
            return Ok(None);
        }
        let text = |name: &str| -> Result<Option<String>> {
            match item.get(name) {
                None => Ok(None),
                Some(AttributeValue::S(v)) => Ok(Some(v.clone())),
                Some(other) => Err(Error::MalformedItem(format!(
                    "{name} is {other:?}, not a string"
                ))),
            }
        };
        let required =
            |name: &str| text(name)?.ok_or_else(|| Error::MalformedItem(format!("no {name}")));
        let event_id = required(attributes::EVENT_ID)?;
        let status_text = required(attributes::STATUS)?;
        let status = Status::parse(&status_text).ok_or_else(|| {
            Error::MalformedItem(format!(
                "event {event_id}: status {status_text:?} is neither PENDING nor SENT"
            ))
        })?;
        let created_at_ms = match item.get(attributes::CREATED_AT) {
            Some(AttributeValue::N(n)) => n.parse().map_err(|_| {
                Error::MalformedItem(format!(
                    "event {event_id}: created_at {n:?} is not a whole number"
                ))
            })?,
            _ => {
                return Err(Error::MalformedItem(format!(
                    "event {event_id}: no numeric created_at"
                )));
            }
        };
        let event = OutboxEvent {
            event_type: required(attributes::EVENT_TYPE)?,
            payload: required(attributes::PAYLOAD)?,
            destination: required(attributes::DESTINATION)?,
            correlation_id: text(attributes::CORRELATION_ID)?,
            message_group_id: text(attributes::MESSAGE_GROUP_ID)?,
            // A trace context never fails an event: one that is not a string is left out.
            traceparent: text(attributes::TRACEPARENT).ok().flatten(),
            event_id,
        };
        Ok(Some(Self {
            keys,
            event,
            status,
            created_at_ms,
        }))
    }

    /// The item's key attributes.
    pub fn keys(&self) -> &HashMap<String, AttributeValue> {
        &self.keys
    }

    /// The event.
    pub fn event(&self) -> &OutboxEvent {
        &self.event
    }

    /// Its status when read.
    pub fn status(&self) -> Status {
        self.status
    }

    /// When the producer wrote it, epoch milliseconds.
    pub fn created_at_ms(&self) -> u64 {
        self.created_at_ms
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn event() -> OutboxEvent {
        OutboxEvent::new("T", r#"{"a":1}"#, "https://q/x.fifo")
            .with_event_id("e-1")
            .with_message_group_id("g-1")
    }

    fn key() -> HashMap<String, AttributeValue> {
        HashMap::from([("pk".to_owned(), AttributeValue::S("outbox#g-1".into()))])
    }

    #[test]
    fn an_item_reads_back_as_the_event_it_was_written_from() {
        let item = new_item(&event(), key(), 1_700_000_000_123);
        let record = OutboxRecord::from_item(key(), &item)
            .expect("valid")
            .expect("an outbox item");
        assert_eq!(record.event(), &event().with_correlation_id("e-1"));
        assert_eq!(record.status(), Status::Pending);
        assert_eq!(record.created_at_ms(), 1_700_000_000_123);
        assert_eq!(record.keys(), &key());
    }

    #[test]
    fn the_trace_context_is_stored_and_read_back() {
        let written_in = sqsafe_telemetry::TraceContext::from_traceparent(
            "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",
        )
        .expect("valid");
        let traced = event().with_trace_context(&written_in);
        let item = new_item(&traced, key(), 1);
        assert_eq!(
            item.get(attributes::TRACEPARENT),
            Some(&AttributeValue::S(
                "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01".into()
            ))
        );
        let back = OutboxRecord::from_item(key(), &item)
            .expect("valid")
            .expect("an outbox item");
        assert_eq!(back.event().trace_context(), Some(written_in));
        assert!(
            back.event().same_content(&event()),
            "a trace is not content"
        );
        // Without one, nothing is stored.
        assert!(!new_item(&event(), key(), 1).contains_key(attributes::TRACEPARENT));
    }

    #[test]
    fn other_items_are_not_outbox_events() {
        let business = HashMap::from([("pk".to_owned(), AttributeValue::S("order#1".into()))]);
        assert_eq!(OutboxRecord::from_item(key(), &business).expect("ok"), None);
        let mut other_entity = new_item(&event(), key(), 1);
        other_entity.insert(attributes::ENTITY.into(), AttributeValue::S("order".into()));
        assert_eq!(
            OutboxRecord::from_item(key(), &other_entity).expect("ok"),
            None
        );
    }

    #[test]
    fn an_outbox_item_without_its_fields_is_malformed() {
        for missing in [
            attributes::EVENT_ID,
            attributes::PAYLOAD,
            attributes::DESTINATION,
            attributes::STATUS,
            attributes::CREATED_AT,
        ] {
            let mut item = new_item(&event(), key(), 1);
            item.remove(missing);
            let err = OutboxRecord::from_item(key(), &item).expect_err(missing);
            assert!(
                matches!(err, Error::MalformedItem(ref m) if m.contains(missing)),
                "{missing}: {err}"
            );
        }
        let mut item = new_item(&event(), key(), 1);
        item.insert(attributes::PAYLOAD.into(), AttributeValue::N("1".into()));
        assert!(OutboxRecord::from_item(key(), &item).is_err());
    }
}
