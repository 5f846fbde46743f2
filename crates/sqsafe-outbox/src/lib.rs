#![doc = include_str!("../README.md")]
#![forbid(unsafe_code)]

mod error;
mod event;
mod item;
mod outbox;
mod relay;
mod sweeper;

pub use error::{Error, Result};
pub use event::{
    MAX_DESTINATION_BYTES, MAX_EVENT_TYPE_CHARS, MAX_ID_CHARS, MAX_PAYLOAD_BYTES, OutboxEvent,
};
pub use item::{ENTITY, OutboxRecord, PENDING_INDEX, RESERVATION_ENTITY, Status, attributes};
pub use outbox::{MAX_BUSINESS_WRITES, Outbox, Written};
pub use relay::{
    EVENT_ID_ATTRIBUTE, EVENT_TYPE_ATTRIBUTE, Marked, Relay, Relayed, TRACEPARENT_ATTRIBUTE,
};
pub use sweeper::{Sweeper, Swept};

/// The clock the writer and the relay stamp items with (tests pass a [`ManualClock`] or a closure).
pub use sqsafe_idempotency::{Clock, ManualClock, SystemClock};
