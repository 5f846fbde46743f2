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
/// Bounded twice: by entries and by bytes (key, fingerprint and stored result of each entry), so a few large results
/// cannot hold much memory.
///
/// # Default
/// 1,024 entries and 8 MiB, each entry answered for at most 5 minutes and never past its record's expiration.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CacheConfig {
    /// Most entries kept; the least useful are evicted first.
    pub max_entries: u64,
    /// Most bytes of keys, fingerprints and results kept.
    pub max_bytes: u64,
    /// How long an entry may answer for, measured on the injected clock.
    pub ttl: Duration,
}

impl Default for CacheConfig {
    fn default() -> Self {
        Self {
            max_entries: 1024,
            max_bytes: 8 * 1024 * 1024,
            ttl: Duration::from_secs(300),
        }
    }
}

impl CacheConfig {
    pub(crate) fn validate(&self) -> Result<()> {
        if self.max_entries == 0 || self.max_bytes == 0 || self.ttl.is_zero() {
            return Err(Error::Config(
                "cache needs max_entries > 0, max_bytes > 0 and ttl > 0 (or no cache at all)"
                    .into(),
            ));
        }
        Ok(())
    }

    /// Each entry weighs its bytes, but at least `max_bytes / max_entries`: one weighed capacity then bounds both.
    fn min_weight(&self) -> u64 {
        (self.max_bytes / self.max_entries).max(1)
    }
}

#[derive(Debug)]
pub(crate) struct CachedCompletion {
    pub(crate) fingerprint: Fingerprint,
    pub(crate) result: Option<StoredResult>,
    /// The completed record's own expiration (epoch seconds), as stored: the keyed mode's read hands a cached
    /// answer on as the record it stands for.
    pub(crate) expiration: u64,
    valid_until_ms: u64,
}

/// Bounded in size by moka; bounded in time by each entry's deadline on the injected clock (so tests never sleep),
/// with moka's own time-to-live as a backstop that frees memory.
pub(crate) struct CompletedCache {
    entries: moka::sync::Cache<IdempotencyKey, Arc<CachedCompletion>>,
    ttl_ms: u64,
}

impl CachedCompletion {
    fn bytes(&self) -> u64 {
        let result = match &self.result {
            None => 0,
            Some(StoredResult::Json(json)) => json.len(),
            Some(StoredResult::Omitted { digest, .. }) => digest.len() + 8,
        };
        (self.fingerprint.as_str().len() + result + std::mem::size_of::<Self>()) as u64
    }
}

impl CompletedCache {
    pub(crate) fn new(config: CacheConfig) -> Self {
        let floor = config.min_weight();
        let entries = moka::sync::Cache::builder()
            .max_capacity(config.max_bytes)
            .weigher(move |key: &IdempotencyKey, entry: &Arc<CachedCompletion>| {
                let bytes = key.as_str().len() as u64 + entry.bytes();
                u32::try_from(bytes.max(floor)).unwrap_or(u32::MAX)
            })
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
            expiration,
            valid_until_ms,
        };
        self.entries.insert(key.clone(), Arc::new(entry));
    }

    pub(crate) fn invalidate(&self, key: &IdempotencyKey) {
        self.entries.invalidate(key);
    }

    /// Weighted size now (after pending evictions): for tests.
    #[cfg(test)]
    fn weighted_size(&self) -> u64 {
        self.entries.run_pending_tasks();
        self.entries.weighted_size()
    }
}

#[cfg(test)]
mod tests {
    use std::time::UNIX_EPOCH;

    use super::*;
    use crate::key::KeyBuilder;

    fn key(i: usize) -> IdempotencyKey {
        KeyBuilder::new("c", 1)
            .intent("k", i.to_string())
            .build()
            .expect("key")
    }

    #[test]
    fn large_results_are_bounded_by_bytes_not_entries() {
        let config = CacheConfig {
            max_entries: 1000,
            max_bytes: 1024 * 1024,
            ttl: Duration::from_secs(60),
        };
        let cache = CompletedCache::new(config);
        let now = UNIX_EPOCH + Duration::from_secs(1_800_000_000);
        let big = "x".repeat(100 * 1024);
        for i in 0..100 {
            cache.insert(
                &key(i),
                &Fingerprint::from_stored("f"),
                Some(StoredResult::Json(big.clone())),
                u64::MAX / 2000,
                now,
            );
        }
        let size = cache.weighted_size();
        assert!(
            size <= config.max_bytes,
            "100 results of 100 KiB held {size} bytes, over the 1 MiB bound"
        );
        assert!(size > 0, "the cache still holds something");
    }

    #[test]
    fn small_entries_are_bounded_by_count() {
        let config = CacheConfig {
            max_entries: 10,
            ..CacheConfig::default()
        };
        let cache = CompletedCache::new(config);
        let now = UNIX_EPOCH + Duration::from_secs(1_800_000_000);
        for i in 0..100 {
            cache.insert(
                &key(i),
                &Fingerprint::from_stored("f"),
                None,
                u64::MAX / 2000,
                now,
            );
        }
        cache.entries.run_pending_tasks();
        assert!(
            cache.entries.entry_count() <= 10,
            "{} entries",
            cache.entries.entry_count()
        );
    }

    #[test]
    fn settings_are_validated() {
        for bad in [
            CacheConfig {
                max_entries: 0,
                ..CacheConfig::default()
            },
            CacheConfig {
                max_bytes: 0,
                ..CacheConfig::default()
            },
            CacheConfig {
                ttl: Duration::ZERO,
                ..CacheConfig::default()
            },
        ] {
            assert!(bad.validate().is_err(), "{bad:?}");
        }
    }
}
