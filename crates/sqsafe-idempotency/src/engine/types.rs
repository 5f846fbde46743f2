//! The engine and the values it takes and answers with.

use std::fmt;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, SystemTime};

use crate::cache::CompletedCache;
use crate::clock::{Clock, TokenSource};
use crate::fingerprint::{Fingerprint, FingerprintFields};
use crate::key::IdempotencyKey;
use crate::record::IdempotencyRecord;
use crate::settings::{CompletionRetry, Heartbeat};
use crate::store::IdempotencyStore;

/// Longest correlation id kept on a record, in characters; longer ones are cut.
pub const MAX_CORRELATION_CHARS: usize = 256;

/// The token of a record [`Idempotency::read_keyed`] made from the local cache's answer (no stored record has it:
/// a claim's tokens are random hex).
pub(crate) const CACHED_READ_TOKEN: &str = "local-cache";

/// Runs effects at most once per [`IdempotencyKey`], with the records kept in a store `S`.
///
/// Cheap to clone: clones share the store, the cache and the settings.
pub struct Idempotency<S> {
    pub(super) inner: Arc<Inner<S>>,
}

impl<S> Clone for Idempotency<S> {
    fn clone(&self) -> Self {
        Self {
            inner: Arc::clone(&self.inner),
        }
    }
}

pub(crate) struct Inner<S> {
    pub(crate) store: S,
    pub(crate) consumer: String,
    pub(crate) consumer_version: u32,
    pub(crate) idempotency_window: Duration,
    pub(crate) default_lease: Duration,
    pub(crate) min_lease: Duration,
    pub(crate) takeover_margin: Duration,
    pub(crate) completion_retry: CompletionRetry,
    pub(crate) fingerprint_fields: FingerprintFields,
    pub(crate) max_result_bytes: usize,
    pub(crate) cache: Option<CompletedCache>,
    pub(crate) heartbeat: Option<Heartbeat>,
    pub(crate) clock: Arc<dyn Clock>,
    pub(crate) tokens: Arc<dyn TokenSource>,
}

/// One claim request: the key, the fingerprint of the content, and the context that operators will want to see.
#[derive(Debug, Clone)]
pub struct Request {
    pub(super) key: IdempotencyKey,
    pub(super) fingerprint: Fingerprint,
    pub(crate) deadline: Option<SystemTime>,
    pub(super) attempt: u32,
    pub(super) correlation_id: Option<String>,
}

impl Request {
    /// The lease ends at this deadline (a Lambda invocation's deadline), or after the minimum lease if that is later.
    pub fn deadline(mut self, deadline: SystemTime) -> Self {
        self.deadline = Some(deadline);
        self
    }

    /// The delivery attempt, e.g. SQS `ApproximateReceiveCount`. Default 1.
    pub fn attempt(mut self, attempt: u32) -> Self {
        self.attempt = attempt;
        self
    }

    /// The correlation id to keep on the record, cut to [`MAX_CORRELATION_CHARS`] characters.
    pub fn correlation_id(mut self, id: impl Into<String>) -> Self {
        let mut id = id.into();
        if let Some((cut, _)) = id.char_indices().nth(MAX_CORRELATION_CHARS) {
            id.truncate(cut);
        }
        self.correlation_id = Some(id);
        self
    }

    /// The key.
    pub fn key(&self) -> &IdempotencyKey {
        &self.key
    }

    /// The fingerprint.
    pub fn fingerprint(&self) -> &Fingerprint {
        &self.fingerprint
    }
}

/// Where a replayed result came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ReplaySource {
    /// The store's completed record: returned by the refused claim (claim mode: one conditional write, no read), or
    /// read with the batch's records (keyed mode: no write).
    Store,
    /// The local cache of completed keys (no request).
    Cache,
}

/// A result replayed instead of running the effect again.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Replayed<T> {
    /// The stored result.
    Value(T),
    /// The result was over the size cap when it was stored; only its digest and size are known.
    Omitted {
        /// SHA-256 (hex) of the result's JSON.
        digest: String,
        /// Size of the result's JSON in bytes.
        size: u64,
    },
    /// The effect is done, but its stored result does not decode into today's type (its shape changed since, or
    /// none was stored). The duplicate is still a duplicate: it must not run again.
    Unavailable {
        /// Why the value is unavailable.
        reason: String,
    },
}

/// What [`Idempotency::run`] did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Outcome<T> {
    /// The effect ran, now, in this call.
    Executed(T),
    /// The key was already completed with the same content: the effect did not run.
    Replayed {
        /// The stored result.
        result: Replayed<T>,
        /// Store or cache.
        source: ReplaySource,
    },
}

impl<T> Outcome<T> {
    /// `true` when the effect ran in this call.
    pub fn is_executed(&self) -> bool {
        matches!(self, Outcome::Executed(_))
    }

    /// The value, executed or replayed, if one is known.
    pub fn into_value(self) -> Option<T> {
        match self {
            Outcome::Executed(v)
            | Outcome::Replayed {
                result: Replayed::Value(v),
                ..
            } => Some(v),
            Outcome::Replayed {
                result: Replayed::Omitted { .. } | Replayed::Unavailable { .. },
                ..
            } => None,
        }
    }
}

/// The answer to [`Idempotency::claim`].
pub enum Claim<S, T> {
    /// This attempt owns the key: run the effect, then [`Guard::complete`] or [`Guard::release`].
    Acquired(Guard<S>),
    /// Already completed with the same content.
    Replay {
        /// The stored result.
        result: Replayed<T>,
        /// Store or cache.
        source: ReplaySource,
    },
}

impl<S, T: fmt::Debug> fmt::Debug for Claim<S, T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Claim::Acquired(guard) => f.debug_tuple("Acquired").field(guard).finish(),
            Claim::Replay { result, source } => f
                .debug_struct("Replay")
                .field("result", result)
                .field("source", source)
                .finish(),
        }
    }
}

/// Ownership of a claimed key. Completing, extending and releasing present the claim's token, so they fail with
/// [`Error::LeaseLost`](crate::Error::LeaseLost) once another attempt has taken the key over.
///
/// A write whose first try landed but whose answer was lost (the SDK retried it) is recognised by its token and
/// counts as done: a retried claim that meets its own record owns the key, a retried completion that finds the key
/// completed under its token succeeded, a release that finds nothing or an extension that finds a lease at least as
/// long is done. Each such case logs `ambiguous write resolved` with the write's name.
///
/// Dropping a guard without completing or releasing leaves the record `IN_PROGRESS` until its lease passes.
pub struct Guard<S> {
    pub(super) idem: Idempotency<S>,
    /// The `IN_PROGRESS` record as this claim wrote it.
    pub(super) record: IdempotencyRecord,
    /// The lease this claim holds, epoch ms: moves forward with each extension.
    pub(super) lease_until: AtomicU64,
    pub(super) deadline: Option<SystemTime>,
}

impl<S> fmt::Debug for Guard<S> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Guard")
            .field("key", &self.record.key)
            .field("token", &self.record.token)
            .field("lease_until_ms", &self.lease_until.load(Ordering::Relaxed))
            .finish_non_exhaustive()
    }
}

impl<S: IdempotencyStore> Idempotency<S> {
    pub(crate) fn from_inner(inner: Inner<S>) -> Self {
        Self {
            inner: Arc::new(inner),
        }
    }

    /// The store.
    pub fn store(&self) -> &S {
        &self.inner.store
    }

    /// The idempotency window: how long a completed record suppresses duplicates.
    pub fn idempotency_window(&self) -> std::time::Duration {
        self.inner.idempotency_window
    }

    /// The consumer's name and effect version, as given to [`Idempotency::builder`] and kept on every record.
    pub fn name(&self) -> (&str, u32) {
        (&self.inner.consumer, self.inner.consumer_version)
    }

    /// How a completion is retried, and the time it keeps before a request's deadline.
    pub fn completion_retry(&self) -> CompletionRetry {
        self.inner.completion_retry
    }

    /// The largest result kept for replay, in bytes of JSON.
    pub fn max_result_bytes(&self) -> usize {
        self.inner.max_result_bytes
    }

    /// How long after its lease ends an `IN_PROGRESS` claim may be taken over.
    pub fn takeover_margin(&self) -> Duration {
        self.inner.takeover_margin
    }

    /// The shortest lease a claim gets.
    pub fn min_lease(&self) -> Duration {
        self.inner.min_lease
    }

    #[cfg(feature = "dynamodb")]
    pub(crate) fn inner(&self) -> &Inner<S> {
        &self.inner
    }
}
