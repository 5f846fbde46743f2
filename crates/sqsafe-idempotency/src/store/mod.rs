//! Storage backends: four conditional primitives and a read. Everything else (keys, fingerprints, expiry rules,
//! caching, result encoding) lives once in the core.

#[cfg(feature = "dynamodb")]
pub(crate) mod dynamodb;
pub(crate) mod memory;
#[cfg(feature = "dynamodb")]
pub mod size;
#[cfg(feature = "dynamodb")]
pub(crate) mod transact;

use std::collections::HashMap;
use std::future::Future;
use std::time::{Duration, SystemTime};

use crate::error::Result;
use crate::key::IdempotencyKey;
use crate::record::{Completion, IdempotencyRecord};

/// What a claim found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ClaimAttempt {
    /// The record was written: this attempt owns the key.
    Claimed,
    /// A record that still counts was there and was left alone; here it is, as read by the same conditional write.
    Existing(IdempotencyRecord),
}

/// What a fenced write ([`complete`](IdempotencyStore::complete), [`extend`](IdempotencyStore::extend),
/// [`release`](IdempotencyStore::release)) did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum FencedWrite {
    /// The condition held and the write was applied.
    Written,
    /// The condition failed; here is the record as the same write found it (`None`: there was no record).
    ///
    /// The core decides what that means: a retried write whose first try had landed finds its own result (our token,
    /// already completed, already extended, already gone), which is success, not a lost lease.
    Refused(Option<IdempotencyRecord>),
}

/// A place to keep idempotency records.
///
/// Each write is conditional and atomic. The lease timeline of one key:
///
/// ```text
///  claim(A) ──── lease A ────┤ lease passed: claim(B) may take over ──── lease B ────┤
///     complete/extend/release(token A) apply only while the record still carries token A;
///     once B took over, A's writes are refused (the core reports LeaseLost) and B's record is untouched.
///     "lease passed" means passed by more than the takeover margin on the claimer's clock.
/// ```
pub trait IdempotencyStore: Send + Sync + 'static {
    /// Writes `record` (status `IN_PROGRESS`) if no record exists, or the existing one is expired at `now`, or its
    /// lease passed more than `takeover_margin` before `now` ([`IdempotencyRecord::is_claimable`]). Otherwise returns the
    /// existing record, read by the same write.
    fn claim(
        &self,
        record: &IdempotencyRecord,
        now: SystemTime,
        takeover_margin: Duration,
    ) -> impl Future<Output = Result<ClaimAttempt>> + Send;

    /// Marks the key `COMPLETED` with `completion` if it is still `IN_PROGRESS` under `token`.
    fn complete(
        &self,
        key: &IdempotencyKey,
        token: &str,
        completion: &Completion,
    ) -> impl Future<Output = Result<FencedWrite>> + Send;

    /// Moves the lease of an `IN_PROGRESS` record held under `token` to `lease_expires_at` (epoch ms), only if that
    /// is later than the lease it has: a lease never shrinks. The record's `expiration` (epoch s) moves with it, so
    /// the record never expires under a live lease ([`protocol::in_progress_expiration_s`](crate::protocol)).
    fn extend(
        &self,
        key: &IdempotencyKey,
        token: &str,
        lease_expires_at: u64,
        expiration: u64,
    ) -> impl Future<Output = Result<FencedWrite>> + Send;

    /// Deletes an `IN_PROGRESS` record held under `token`, so a retry can claim at once.
    fn release(
        &self,
        key: &IdempotencyKey,
        token: &str,
    ) -> impl Future<Output = Result<FencedWrite>> + Send;

    /// The most bytes of result JSON that fit in `record`'s item besides everything else it carries, when the store
    /// has an item size limit (DynamoDB: 400 KB). Results that do not fit are kept as a digest, so a completion can
    /// never fail on the item size after its effect has run.
    fn result_room(&self, record: &IdempotencyRecord) -> Option<usize> {
        let _ = record;
        None
    }

    /// Reads a record as stored (expired or not). For operators and tests: no claim path reads.
    fn get(
        &self,
        key: &IdempotencyKey,
    ) -> impl Future<Output = Result<Option<IdempotencyRecord>>> + Send;

    /// Reads the records of `keys` as stored (expired or not), strongly consistent, in as few requests as the store
    /// allows: the keyed mode reads a whole batch's records at once (DynamoDB: `BatchGetItem`, up to 100 keys a
    /// request, unprocessed keys read again). A key given twice is read once; a key without a record is absent.
    fn get_many(
        &self,
        keys: &[IdempotencyKey],
    ) -> impl Future<Output = Result<HashMap<IdempotencyKey, IdempotencyRecord>>> + Send;

    /// The keyed mode's only write: puts `record` (status `COMPLETED`, its result) if
    /// [`protocol::keyed_completion_lands`](crate::protocol::keyed_completion_lands) at `now`: no record, an expired
    /// one, or an in-progress one of the same content. Otherwise the record as the same write found it
    /// ([`FencedWrite::Refused`]), for [`protocol::keyed_completion_refused`](crate::protocol::keyed_completion_refused)
    /// to judge.
    fn put_completed(
        &self,
        record: &IdempotencyRecord,
        now: SystemTime,
    ) -> impl Future<Output = Result<FencedWrite>> + Send;
}
