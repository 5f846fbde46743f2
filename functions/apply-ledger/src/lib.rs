//! The `apply-ledger` consumer: `LedgerEntryRequested` events from a FIFO queue, each entry applied once, the entry,
//! the balance and the idempotency record committed in one DynamoDB transaction. See the README.
#![forbid(unsafe_code)]

mod event;
mod handler;

pub use event::{LedgerEntryRequested, LedgerEntryV1};
pub use handler::{AppliedEntry, ApplyLedger, BALANCE_SK, entry_sk};
