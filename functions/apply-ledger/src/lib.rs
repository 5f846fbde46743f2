//! The `apply-ledger` consumer: `LedgerEntryRequested` events from a FIFO queue, each entry applied once, the entry,
//! the balance and the idempotency record committed in one DynamoDB transaction. See the README.
#![forbid(unsafe_code)]

mod config;
mod event;
mod handler;

pub use config::{Config, ConfigError};
pub use event::{LedgerEntryRequested, LedgerEntryV1, LedgerEvent};
pub use handler::{
    AppliedEntry, ApplyLedger, BALANCE_SK, CONSUMER, EFFECT_VERSION, INTENT_FIELDS, SetupError,
    entry_sk,
};
