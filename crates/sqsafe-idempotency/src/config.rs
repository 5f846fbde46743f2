use std::sync::Arc;
use std::time::Duration;

use crate::cache::{CacheConfig, CompletedCache};
use crate::clock::{Clock, RandomTokens, SystemClock, TokenSource};
use crate::engine::{Idempotency, Inner};
use crate::error::{Error, Result};
use crate::fingerprint::FingerprintFields;
use crate::settings::{CompletionRetry, Heartbeat};
use crate::store::IdempotencyStore;

/// Longest result kept for replay, in bytes of JSON, by default. DynamoDB items stop at 400 KB.
pub const DEFAULT_MAX_RESULT_BYTES: usize = 64 * 1024;
/// Hard ceiling for [`IdempotencyBuilder::max_result_bytes`]: leaves room in a 400 KB item for the other attributes.
pub const MAX_RESULT_BYTES_LIMIT: usize = 300 * 1024;

/// How long after its lease ends an `IN_PROGRESS` claim may be taken over, by default (see
/// [`IdempotencyBuilder::takeover_margin`]).
pub const DEFAULT_TAKEOVER_MARGIN: Duration = Duration::from_secs(2);

/// Builds an [`Idempotency`]. Every setting is checked by [`IdempotencyBuilder::build`].
///
/// # Default
/// - idempotency window (ends at the record's `expiration`): 30 days after completion. It must cover the queue's retention, the DLQ's retention
///   and the time to redrive, or a redriven message runs its effect again.
/// - lease: until the Lambda deadline given with each request; without a deadline, 60 s; never less than 1 s.
/// - takeover margin: 2 s. A lease that passed is taken over only once it passed by more than this on the claimer's
///   clock, so an instance whose clock runs up to 2 s fast cannot take over a live lease.
/// - completion retries: [`CompletionRetry::default`], within the request's deadline.
/// - fingerprint: the whole payload.
/// - results kept for replay up to 64 KiB of JSON; larger ones are kept as SHA-256 and size only.
/// - no local cache; no heartbeat.
/// - system clock; random v4 UUID claim tokens.
pub struct IdempotencyBuilder<S> {
    store: S,
    consumer: String,
    consumer_version: u32,
    idempotency_window: Duration,
    default_lease: Duration,
    min_lease: Duration,
    takeover_margin: Duration,
    completion_retry: CompletionRetry,
    fingerprint_fields: FingerprintFields,
    max_result_bytes: usize,
    cache: Option<CacheConfig>,
    heartbeat: Option<Heartbeat>,
    clock: Arc<dyn Clock>,
    tokens: Arc<dyn TokenSource>,
}

impl<S: IdempotencyStore> Idempotency<S> {
    /// Starts building: `consumer` and `consumer_version` are kept on records for operators.
    pub fn builder(
        store: S,
        consumer: impl Into<String>,
        consumer_version: u32,
    ) -> IdempotencyBuilder<S> {
        IdempotencyBuilder::new(store, consumer.into(), consumer_version)
    }
}

impl<S: IdempotencyStore> IdempotencyBuilder<S> {
    pub(crate) fn new(store: S, consumer: String, consumer_version: u32) -> Self {
        Self {
            store,
            consumer,
            consumer_version,
            idempotency_window: Duration::from_secs(30 * 24 * 3600),
            default_lease: Duration::from_secs(60),
            min_lease: Duration::from_secs(1),
            takeover_margin: DEFAULT_TAKEOVER_MARGIN,
            completion_retry: CompletionRetry::default(),
            fingerprint_fields: FingerprintFields::All,
            max_result_bytes: DEFAULT_MAX_RESULT_BYTES,
            cache: None,
            heartbeat: None,
            clock: Arc::new(SystemClock),
            tokens: Arc::new(RandomTokens),
        }
    }

    /// The idempotency window: how long a completed record suppresses duplicates (its `expiration`).
    pub fn idempotency_window(mut self, window: Duration) -> Self {
        self.idempotency_window = window;
        self
    }

    /// Lease of a claim made without a deadline.
    pub fn default_lease(mut self, lease: Duration) -> Self {
        self.default_lease = lease;
        self
    }

    /// Shortest lease ever granted, even when the deadline is nearer.
    pub fn min_lease(mut self, lease: Duration) -> Self {
        self.min_lease = lease;
        self
    }

    /// How long after its lease ends an `IN_PROGRESS` claim may be taken over: the clock skew tolerated between
    /// instances. Larger values delay recovery from a crashed attempt by as much.
    pub fn takeover_margin(mut self, margin: Duration) -> Self {
        self.takeover_margin = margin;
        self
    }

    /// How a completion that fails after the effect ran is retried.
    pub fn completion_retry(mut self, retry: CompletionRetry) -> Self {
        self.completion_retry = retry;
        self
    }

    /// Which payload fields define the intent.
    pub fn fingerprint_fields(mut self, fields: FingerprintFields) -> Self {
        self.fingerprint_fields = fields;
        self
    }

    /// Largest result kept for replay, in bytes of JSON (at most [`MAX_RESULT_BYTES_LIMIT`]).
    pub fn max_result_bytes(mut self, bytes: usize) -> Self {
        self.max_result_bytes = bytes;
        self
    }

    /// Enables the local cache of completed keys.
    pub fn cache(mut self, cache: CacheConfig) -> Self {
        self.cache = Some(cache);
        self
    }

    /// Extends the lease periodically while the effect runs.
    pub fn heartbeat(mut self, heartbeat: Heartbeat) -> Self {
        self.heartbeat = Some(heartbeat);
        self
    }

    /// Replaces the clock.
    pub fn clock(mut self, clock: impl Clock) -> Self {
        self.clock = Arc::new(clock);
        self
    }

    /// Replaces the claim-token source.
    pub fn tokens(mut self, tokens: impl TokenSource) -> Self {
        self.tokens = Arc::new(tokens);
        self
    }

    /// Checks every setting and builds.
    pub fn build(self) -> Result<Idempotency<S>> {
        let name_ok = !self.consumer.is_empty()
            && self
                .consumer
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.'));
        if !name_ok {
            return Err(Error::Config(format!(
                "consumer name `{}` must be ASCII letters, digits, `-`, `_` or `.`",
                self.consumer
            )));
        }
        if self.idempotency_window < Duration::from_secs(1) {
            return Err(Error::Config(
                "idempotency_window must be at least 1 s".into(),
            ));
        }
        // An IN_PROGRESS record that expires while its lease (plus the margin) still runs would let a redelivery
        // take over a live claim. Leases from a deadline are stretched at claim time; these are known now.
        let longest_lease = self
            .heartbeat
            .map_or(self.default_lease, |h| h.lease.max(self.default_lease));
        if self.idempotency_window < longest_lease + self.takeover_margin {
            return Err(Error::Config(format!(
                "idempotency_window ({:?}) must be at least the longest lease ({longest_lease:?}: the default lease, \
                 or the heartbeat's) plus the takeover margin ({:?})",
                self.idempotency_window, self.takeover_margin
            )));
        }
        if self.min_lease.is_zero() || self.default_lease < self.min_lease {
            return Err(Error::Config(
                "leases must be positive, with default_lease >= min_lease".into(),
            ));
        }
        if self.completion_retry.attempts == 0
            || self.completion_retry.first_delay > self.completion_retry.max_delay
        {
            return Err(Error::Config(
                "completion_retry needs attempts >= 1 and first_delay <= max_delay".into(),
            ));
        }
        if self.max_result_bytes > MAX_RESULT_BYTES_LIMIT {
            return Err(Error::Config(format!(
                "max_result_bytes {} is over the limit of {MAX_RESULT_BYTES_LIMIT} (DynamoDB items stop at 400 KB)",
                self.max_result_bytes
            )));
        }
        if let Some(h) = self.heartbeat
            && (h.every.is_zero() || h.lease <= h.every)
        {
            return Err(Error::Config(
                "heartbeat needs every > 0 and lease > every".into(),
            ));
        }
        self.fingerprint_fields.validate()?;
        if let Some(c) = &self.cache {
            c.validate()?;
        }
        Ok(Idempotency::from_inner(Inner {
            store: self.store,
            consumer: self.consumer,
            consumer_version: self.consumer_version,
            idempotency_window: self.idempotency_window,
            default_lease: self.default_lease,
            min_lease: self.min_lease,
            takeover_margin: self.takeover_margin,
            completion_retry: self.completion_retry,
            fingerprint_fields: self.fingerprint_fields,
            max_result_bytes: self.max_result_bytes,
            cache: self.cache.map(CompletedCache::new),
            heartbeat: self.heartbeat,
            clock: self.clock,
            tokens: self.tokens,
        }))
    }
}
