//! Storage backends: four conditional primitives and a read. Everything else (keys, fingerprints, expiry rules,
//! caching, result encoding) lives once in the core.

#[cfg(feature = "dynamodb")]
pub(crate) mod dynamodb;
pub(crate) mod memory;
#[cfg(feature = "dynamodb")]
pub(crate) mod transact;

use std::future::Future;
use std::time::SystemTime;

use crate::error::Result;
use crate::key::IdempotencyKey;
use crate::record::{Completion, Record};

/// What a claim found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ClaimAttempt {
    /// The record was written: this attempt owns the key.
    Claimed,
    /// A record that still counts was there and was left alone; here it is, as read by the same conditional write.
    Existing(Record),
}

/// A place to keep idempotency records.
///
/// Each write is conditional and atomic. The lease timeline of one key:
///
/// ```text
///  claim(A) ──── lease A ────┤ lease passed: claim(B) may take over ──── lease B ────┤
///     complete/extend/release(token A) succeed only while the record still carries token A;
///     once B took over, A's writes fail with LeaseLost and B's record is untouched.
/// ```
pub trait IdempotencyStore: Send + Sync + 'static {
    /// Writes `record` (status `IN_PROGRESS`) if no record exists, or the existing one is expired, or its lease has
    /// passed ([`Record::is_claimable`] at `now`). Otherwise returns the existing record, read by the same write.
    fn claim(
        &self,
        record: &Record,
        now: SystemTime,
    ) -> impl Future<Output = Result<ClaimAttempt>> + Send;

    /// Marks the key `COMPLETED` with `completion` if it is still `IN_PROGRESS` under `token`; else
    /// [`Error::LeaseLost`](crate::Error::LeaseLost).
    fn complete(
        &self,
        key: &IdempotencyKey,
        token: &str,
        completion: &Completion,
    ) -> impl Future<Output = Result<()>> + Send;

    /// Moves the lease of an `IN_PROGRESS` record held under `token` to `lease_expires_at` (epoch ms); else
    /// [`Error::LeaseLost`](crate::Error::LeaseLost).
    fn extend(
        &self,
        key: &IdempotencyKey,
        token: &str,
        lease_expires_at: u64,
    ) -> impl Future<Output = Result<()>> + Send;

    /// Deletes an `IN_PROGRESS` record held under `token`, so a retry can claim at once; else
    /// [`Error::LeaseLost`](crate::Error::LeaseLost).
    fn release(&self, key: &IdempotencyKey, token: &str)
    -> impl Future<Output = Result<()>> + Send;

    /// Reads a record as stored (expired or not). For operators and tests: no claim path reads.
    fn get(&self, key: &IdempotencyKey) -> impl Future<Output = Result<Option<Record>>> + Send;
}
