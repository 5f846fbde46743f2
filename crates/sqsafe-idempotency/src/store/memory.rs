use std::collections::HashMap;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, SystemTime};

use super::{ClaimAttempt, FencedWrite, IdempotencyStore};
use crate::clock::{duration_millis, epoch_millis};
use crate::error::Result;
use crate::key::IdempotencyKey;
use crate::protocol;
use crate::protocol::Status;
use crate::record::{Completion, IdempotencyRecord};

/// Records in this process's memory, with the same conditions as the DynamoDB store.
///
/// For unit tests and local runs of one process only: records vanish with the process, and two Lambda instances do
/// not see each other's claims. Clones share the same records.
#[derive(Debug, Clone, Default)]
pub struct InMemoryStore {
    records: Arc<Mutex<HashMap<IdempotencyKey, IdempotencyRecord>>>,
}

impl InMemoryStore {
    /// An empty store.
    pub fn new() -> Self {
        Self::default()
    }

    /// Number of records held (expired ones included, as TTL would not have removed them yet).
    pub fn len(&self) -> usize {
        self.lock().len()
    }

    /// `true` when no record is held.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    fn lock(&self) -> MutexGuard<'_, HashMap<IdempotencyKey, IdempotencyRecord>> {
        // A panic while holding the lock cannot leave a half-written record (each write is one insert or remove).
        self.records
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// The record held under `token` and still `IN_PROGRESS` ([`protocol::owns`]).
    fn owned<'a>(
        records: &'a mut HashMap<IdempotencyKey, IdempotencyRecord>,
        key: &IdempotencyKey,
        token: &str,
    ) -> Option<&'a mut IdempotencyRecord> {
        records.get_mut(key).filter(|r| {
            let seen = r.seen_by(token, &r.fingerprint);
            protocol::owns(Some(&seen))
        })
    }

    /// The refusal of a fenced write: the record as it is (or none).
    fn refused(
        records: &HashMap<IdempotencyKey, IdempotencyRecord>,
        key: &IdempotencyKey,
    ) -> FencedWrite {
        FencedWrite::Refused(records.get(key).cloned())
    }
}

impl IdempotencyStore for InMemoryStore {
    async fn claim(
        &self,
        record: &IdempotencyRecord,
        now: SystemTime,
        takeover_margin: Duration,
    ) -> Result<ClaimAttempt> {
        let mut records = self.lock();
        let (now_ms, margin_ms) = (epoch_millis(now), duration_millis(takeover_margin));
        match records.get(&record.key) {
            Some(existing)
                if !protocol::claim_lands(
                    Some(&existing.seen_by(&record.token, &record.fingerprint)),
                    now_ms,
                    margin_ms,
                ) =>
            {
                Ok(ClaimAttempt::Existing(existing.clone()))
            }
            _ => {
                records.insert(record.key.clone(), record.clone());
                Ok(ClaimAttempt::Claimed)
            }
        }
    }

    async fn complete(
        &self,
        key: &IdempotencyKey,
        token: &str,
        completion: &Completion,
    ) -> Result<FencedWrite> {
        let mut records = self.lock();
        let Some(record) = Self::owned(&mut records, key, token) else {
            return Ok(Self::refused(&records, key));
        };
        record.status = Status::Completed;
        record.expiration = completion.expiration;
        record.lease_expires_at = None;
        record.result = completion.result.clone();
        Ok(FencedWrite::Written)
    }

    async fn extend(
        &self,
        key: &IdempotencyKey,
        token: &str,
        lease_expires_at: u64,
        expiration: u64,
    ) -> Result<FencedWrite> {
        let mut records = self.lock();
        let seen = records.get(key).map(|r| r.seen_by(token, &r.fingerprint));
        // A lease never shrinks: a shorter one is refused like the store's condition refuses it.
        if !protocol::extend_lands(seen.as_ref(), lease_expires_at) {
            return Ok(Self::refused(&records, key));
        }
        if let Some(record) = records.get_mut(key) {
            record.lease_expires_at = Some(lease_expires_at);
            record.expiration = expiration;
        }
        Ok(FencedWrite::Written)
    }

    async fn release(&self, key: &IdempotencyKey, token: &str) -> Result<FencedWrite> {
        let mut records = self.lock();
        if Self::owned(&mut records, key, token).is_none() {
            return Ok(Self::refused(&records, key));
        }
        records.remove(key);
        Ok(FencedWrite::Written)
    }

    async fn get(&self, key: &IdempotencyKey) -> Result<Option<IdempotencyRecord>> {
        Ok(self.lock().get(key).cloned())
    }

    async fn get_many(
        &self,
        keys: &[IdempotencyKey],
    ) -> Result<HashMap<IdempotencyKey, IdempotencyRecord>> {
        let records = self.lock();
        Ok(keys
            .iter()
            .filter_map(|k| records.get(k).map(|r| (k.clone(), r.clone())))
            .collect())
    }

    async fn put_completed(
        &self,
        record: &IdempotencyRecord,
        now: SystemTime,
    ) -> Result<FencedWrite> {
        let mut records = self.lock();
        let seen = records
            .get(&record.key)
            .map(|r| r.seen_by(&record.token, &record.fingerprint));
        if !protocol::keyed_completion_lands(seen.as_ref(), epoch_millis(now)) {
            return Ok(Self::refused(&records, &record.key));
        }
        records.insert(record.key.clone(), record.clone());
        Ok(FencedWrite::Written)
    }
}
