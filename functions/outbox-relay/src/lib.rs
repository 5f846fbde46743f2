//! The `outbox-relay` function: fed by the outbox table's DynamoDB stream, it publishes each new outbox event to its
//! SQS queue and marks it sent (see `sqsafe-outbox` for the producer's side). See the README.
#![forbid(unsafe_code)]

mod handler;
mod settings;

pub use handler::{HandlerError, Ignored, OutboxRelay, RecordOutcome};
pub use settings::Settings;
