use std::sync::Arc;
use std::time::{Duration, SystemTime};

use crate::clock::{duration_millis, epoch_millis};
use crate::error::{Error, Result};
use crate::fingerprint::Fingerprint;
use crate::key::IdempotencyKey;
use crate::record::StoredResult;

/// Settings of the local cache of completed keys.
///
/// The cache only saves a request for a duplicate that this same instance already completed or replayed; it is never
/// the control (the store's conditional write is), and it never holds `IN_PROGRESS` keys.
///
/// # Default
/// 1,024 entries, each answered for at most 5 minutes and never past its record's expiration.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CacheConfig {
    /// Most entries kept; the least useful are evicted first.
    pub max_entries: u64,
    /// How long an entry may answer for, measured on the injected clock.
    pub ttl: Duration,
}

impl Default for CacheConfig {
    fn default() -> Self {
        Self {
            max_entries: 1024,
            ttl: Duration::from_secs(300),
        }
    }
}

impl CacheConfig {
    pub(crate) fn validate(&self) -> Result<()> {
        if self.max_entries == 0 || self.ttl.is_zero() {
            return Err(Error::Config(
                "cache needs max_entries > 0 and ttl > 0 (or no cache at all)".into(),
            ));
        }
        Ok(())
    }
}

#[derive(Debug)]
pub(crate) struct CachedCompletion {
    pub(crate) fingerprint: Fingerprint,
    pub(crate) result: Option<StoredResult>,
    valid_until_ms: u64,
}

/// Bounded in size by moka; bounded in time by each entry's deadline on the injected clock (so tests never sleep),
/// with moka's own time-to-live as a backstop that frees memory.
pub(crate) struct CompletedCache {
    entries: moka::sync::Cache<IdempotencyKey, Arc<CachedCompletion>>,
    ttl_ms: u64,
}

impl CompletedCache {
    pub(crate) fn new(config: CacheConfig) -> Self {
        let entries = moka::sync::Cache::builder()
            .max_capacity(config.max_entries)
            .time_to_live(config.ttl)
            .build();
        Self {
            entries,
            ttl_ms: duration_millis(config.ttl),
        }
    }

    pub(crate) fn get(
        &self,
        key: &IdempotencyKey,
        now: SystemTime,
    ) -> Option<Arc<CachedCompletion>> {
        let entry = self.entries.get(key)?;
        if entry.valid_until_ms < epoch_millis(now) {
            self.entries.invalidate(key);
            return None;
        }
        Some(entry)
    }

    /// Caches a completed record that expires at `expiration` (epoch seconds).
    pub(crate) fn insert(
        &self,
        key: &IdempotencyKey,
        fingerprint: &Fingerprint,
        result: Option<StoredResult>,
        expiration: u64,
        now: SystemTime,
    ) {
        let valid_until_ms = epoch_millis(now)
            .saturating_add(self.ttl_ms)
            .min(expiration.saturating_mul(1000).saturating_add(999));
        let entry = CachedCompletion {
            fingerprint: fingerprint.clone(),
            result,
            valid_until_ms,
        };
        self.entries.insert(key.clone(), Arc::new(entry));
    }

    pub(crate) fn invalidate(&self, key: &IdempotencyKey) {
        self.entries.invalidate(key);
    }
}
