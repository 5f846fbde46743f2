//! The `outbox-relay` function: fed by the outbox table's DynamoDB stream, it publishes each new outbox event to its
//! SQS queue and marks it sent (see `sqsafe-outbox` for the producer's side); and the `outbox-sweeper` function, run
//! on a schedule, that publishes what is still pending past a threshold. See the README.
#![forbid(unsafe_code)]

mod handler;
mod settings;
mod sweeper;

pub use handler::{HandlerError, OutboxRelay, RetryPolicy};
pub use settings::Settings;
pub use sweeper::{OutboxSweeper, SWEEPER_NAME, SweepError, SweepSummary, SweeperSettings};
