use std::collections::HashMap;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::SystemTime;

use super::{ClaimAttempt, IdempotencyStore};
use crate::error::{Error, Result};
use crate::key::IdempotencyKey;
use crate::record::{Completion, Record, Status};

/// Records in this process's memory, with the same conditions as the DynamoDB store.
///
/// For unit tests and local runs of one process only: records vanish with the process, and two Lambda instances do
/// not see each other's claims. Clones share the same records.
#[derive(Debug, Clone, Default)]
pub struct InMemoryStore {
    records: Arc<Mutex<HashMap<IdempotencyKey, Record>>>,
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

    fn lock(&self) -> MutexGuard<'_, HashMap<IdempotencyKey, Record>> {
        // A panic while holding the lock cannot leave a half-written record (each write is one insert or remove).
        self.records
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    fn owned<'a>(
        records: &'a mut HashMap<IdempotencyKey, Record>,
        key: &IdempotencyKey,
        token: &str,
    ) -> Result<&'a mut Record> {
        match records.get_mut(key) {
            Some(r) if r.token == token && r.status == Status::InProgress => Ok(r),
            _ => Err(Error::LeaseLost {
                key: key.to_string(),
            }),
        }
    }
}

impl IdempotencyStore for InMemoryStore {
    async fn claim(&self, record: &Record, now: SystemTime) -> Result<ClaimAttempt> {
        let mut records = self.lock();
        match records.get(&record.key) {
            Some(existing) if !existing.is_claimable(now) => {
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
    ) -> Result<()> {
        let mut records = self.lock();
        let record = Self::owned(&mut records, key, token)?;
        record.status = Status::Completed;
        record.expiration = completion.expiration;
        record.lease_expires_at = None;
        record.result = completion.result.clone();
        Ok(())
    }

    async fn extend(&self, key: &IdempotencyKey, token: &str, lease_expires_at: u64) -> Result<()> {
        let mut records = self.lock();
        Self::owned(&mut records, key, token)?.lease_expires_at = Some(lease_expires_at);
        Ok(())
    }

    async fn release(&self, key: &IdempotencyKey, token: &str) -> Result<()> {
        let mut records = self.lock();
        Self::owned(&mut records, key, token)?;
        records.remove(key);
        Ok(())
    }

    async fn get(&self, key: &IdempotencyKey) -> Result<Option<Record>> {
        Ok(self.lock().get(key).cloned())
    }
}
