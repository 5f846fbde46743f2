#![doc = include_str!("../README.md")]
#![forbid(unsafe_code)]

mod cache;
mod clock;
mod config;
mod engine;
mod error;
#[cfg(feature = "fault-injection")]
mod fault;
mod fingerprint;
mod key;
pub mod protocol;
mod record;
mod settings;
mod store;

pub use cache::CacheConfig;
pub use clock::{Clock, ManualClock, RandomTokens, SystemClock, TokenSource};
pub use config::{
    DEFAULT_MAX_RESULT_BYTES, DEFAULT_TAKEOVER_MARGIN, IdempotencyBuilder, MAX_RESULT_BYTES_LIMIT,
};
pub use engine::{
    Claim, Guard, Idempotency, MAX_CORRELATION_CHARS, Outcome, ReplaySource, Replayed, Request,
};
pub use error::{BoxError, Error, ErrorClass, Result, RunError};
pub use fingerprint::{Fingerprint, FingerprintFields};
pub use key::{IdempotencyKey, KeyBuilder, MAX_KEY_BYTES};
pub use protocol::Status;
pub use record::{Completion, IdempotencyRecord, StoredResult};
pub use settings::{CompletionRetry, Heartbeat};
#[cfg(feature = "dynamodb")]
pub use store::dynamodb::{AttributeNames, DynamoDbStore, DynamoDbStoreBuilder};
pub use store::memory::InMemoryStore;
/// DynamoDB's item size and capacity units, by its sizing rules.
#[cfg(feature = "dynamodb")]
pub use store::size;
#[cfg(feature = "dynamodb")]
pub use store::transact::{MAX_EFFECT_ITEMS, TransactOutcome};
pub use store::{ClaimAttempt, FencedWrite, IdempotencyStore};
