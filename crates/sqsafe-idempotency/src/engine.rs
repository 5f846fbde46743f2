use futures::future::FusedFuture;
use std::collections::HashMap;
use std::fmt;
use std::future::Future;
use std::panic::AssertUnwindSafe;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, SystemTime};

use backon::{ExponentialBuilder, Retryable};
use futures::FutureExt;
use serde::Serialize;
use serde::de::DeserializeOwned;

use crate::cache::CompletedCache;
use crate::clock::{Clock, TokenSource, duration_millis, epoch_millis, from_millis};
use crate::config::{CompletionRetry, Heartbeat, IdempotencyBuilder};
use crate::error::{Error, Result, RunError};
use crate::fingerprint::{Fingerprint, FingerprintFields, sha256_hex};
use crate::key::IdempotencyKey;
use crate::protocol::{self, ClaimRefused, FencedRefused, KeyedRead};
use crate::record::{Completion, IdempotencyRecord, Status, StoredResult};
use crate::store::{ClaimAttempt, FencedWrite, IdempotencyStore};

/// Longest correlation id kept on a record, in characters; longer ones are cut.
pub const MAX_CORRELATION_CHARS: usize = 256;

/// The token of a record [`Idempotency::read_keyed`] made from the local cache's answer (no stored record has it:
/// a claim's tokens are random hex).
pub(crate) const CACHED_READ_TOKEN: &str = "local-cache";

/// A crash point for fault-injection tests; nothing without the `fault-injection` feature.
macro_rules! crash_point {
    ($point:ident, $key:expr) => {
        #[cfg(feature = "fault-injection")]
        crate::fault::point(crate::fault::Point::$point, $key);
    };
}

/// Runs effects at most once per [`IdempotencyKey`], with the records kept in a store `S`.
///
/// Cheap to clone: clones share the store, the cache and the settings.
pub struct Idempotency<S> {
    inner: Arc<Inner<S>>,
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
    key: IdempotencyKey,
    fingerprint: Fingerprint,
    deadline: Option<SystemTime>,
    attempt: u32,
    correlation_id: Option<String>,
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
/// [`Error::LeaseLost`] once another attempt has taken the key over.
///
/// A write whose first try landed but whose answer was lost (the SDK retried it) is recognised by its token and
/// counts as done: a retried claim that meets its own record owns the key, a retried completion that finds the key
/// completed under its token succeeded, a release that finds nothing or an extension that finds a lease at least as
/// long is done. Each such case logs `ambiguous write resolved` with the write's name.
///
/// Dropping a guard without completing or releasing leaves the record `IN_PROGRESS` until its lease passes.
pub struct Guard<S> {
    idem: Idempotency<S>,
    /// The `IN_PROGRESS` record as this claim wrote it.
    record: IdempotencyRecord,
    /// The lease this claim holds, epoch ms: moves forward with each extension.
    lease_until: AtomicU64,
    deadline: Option<SystemTime>,
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

/// Logs a conditional write that met its own earlier, landed try.
fn ambiguous_write_resolved(write: &'static str, key: &IdempotencyKey) {
    tracing::info!(
        write,
        idempotency_key = %key,
        "ambiguous write resolved"
    );
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

    /// A request for `key` with the fingerprint of `payload` (restricted to the configured fields).
    pub fn request<P: Serialize + ?Sized>(
        &self,
        key: IdempotencyKey,
        payload: &P,
    ) -> Result<Request> {
        let fingerprint = Fingerprint::of(payload, &self.inner.fingerprint_fields)?;
        Ok(self.request_with_fingerprint(key, fingerprint))
    }

    /// A request for `key` with a fingerprint computed by the caller (e.g. [`Fingerprint::of_value`] of a raw body
    /// with the intent's own fields), instead of the builder's fingerprint fields.
    pub fn request_with_fingerprint(
        &self,
        key: IdempotencyKey,
        fingerprint: Fingerprint,
    ) -> Request {
        Request {
            key,
            fingerprint,
            deadline: None,
            attempt: 1,
            correlation_id: None,
        }
    }

    /// Runs `effect` once for `key`: see [`Idempotency::execute`].
    pub async fn run<P, T, E, F, Fut>(
        &self,
        key: IdempotencyKey,
        payload: &P,
        effect: F,
    ) -> Result<Outcome<T>, RunError<E>>
    where
        P: Serialize + ?Sized,
        T: Serialize + DeserializeOwned,
        F: FnOnce() -> Fut,
        Fut: Future<Output = Result<T, E>>,
    {
        let request = self.request(key, payload)?;
        self.execute(&request, effect).await
    }

    /// Claims the key and runs `effect` if this attempt owns it; replays the stored result if the key is completed
    /// with the same content.
    ///
    /// - effect succeeds: the record is completed with its result (fenced by the claim token), `Outcome::Executed`.
    ///   A completion that fails (throttling, a timeout) is retried with backoff within the request's deadline, then
    ///   gives up with [`Error::CompletionFailed`].
    /// - effect fails or panics: the key is released so a retry can run it; `RunError::Effect` (a panic resumes).
    /// - completed, or claimed and live, with other content: [`Error::PayloadMismatch`], the effect does not run.
    /// - a live claim elsewhere: [`Error::InProgress`] (transient), the effect does not run.
    /// - with a heartbeat, the claim lost to another attempt: [`Error::LeaseLost`], the effect's future is dropped.
    pub async fn execute<T, E, F, Fut>(
        &self,
        request: &Request,
        effect: F,
    ) -> Result<Outcome<T>, RunError<E>>
    where
        T: Serialize + DeserializeOwned,
        F: FnOnce() -> Fut,
        Fut: Future<Output = Result<T, E>>,
    {
        let guard = match self.claim::<T>(request).await? {
            Claim::Replay { result, source } => return Ok(Outcome::Replayed { result, source }),
            Claim::Acquired(guard) => guard,
        };
        crash_point!(AfterClaim, request.key());
        let effect = AssertUnwindSafe(effect()).catch_unwind();
        let outcome = match self.inner.heartbeat {
            None => effect.await,
            // A lost claim stops the effect here (its future is dropped): it must not run on beside the new owner.
            Some(heartbeat) => guard.with_heartbeat(heartbeat, effect).await?,
        };
        match outcome {
            Ok(Ok(value)) => {
                crash_point!(AfterEffect, request.key());
                guard.complete(&value).await?;
                crash_point!(AfterComplete, request.key());
                Ok(Outcome::Executed(value))
            }
            Ok(Err(e)) => {
                guard.release_after_failure().await;
                Err(RunError::Effect(e))
            }
            Err(panic) => {
                guard.release_after_failure().await;
                std::panic::resume_unwind(panic)
            }
        }
    }

    /// Claims the key: one conditional write, no read (or no request at all on a cache hit).
    pub async fn claim<T: DeserializeOwned>(&self, request: &Request) -> Result<Claim<S, T>> {
        let now = self.inner.clock.now();
        if let Some(result) = self.replay_from_cache(request, now)? {
            return Ok(Claim::Replay {
                result,
                source: ReplaySource::Cache,
            });
        }
        let token = self.inner.tokens.token();
        let record = self.new_record(request, now, token);
        let store = &self.inner.store;
        match store
            .claim(&record, now, self.inner.takeover_margin)
            .await?
        {
            ClaimAttempt::Claimed => Ok(Claim::Acquired(self.guard(record, request.deadline))),
            ClaimAttempt::Existing(existing) => {
                let seen = existing.seen_by(&record.token, &record.fingerprint);
                let margin_ms = duration_millis(self.inner.takeover_margin);
                match protocol::claim_refused(&seen, epoch_millis(now), margin_ms) {
                    // The SDK retried a claim whose first try landed: the record it met is ours.
                    ClaimRefused::OwnRetry => {
                        ambiguous_write_resolved("claim", &record.key);
                        Ok(Claim::Acquired(self.guard(record, request.deadline)))
                    }
                    decision => self.refused(request, existing, decision, now),
                }
            }
        }
    }

    /// The keyed mode's read: the records of `keys`, strongly consistent, in as few requests as the store allows
    /// (DynamoDB: one `BatchGetItem` per 100 keys, unprocessed keys read again). Keys the local cache holds as
    /// completed are not read from the store: the cache's answer is part of the read, as the completed record it
    /// stands for (its fingerprint, result and expiration), so it still counts when the cache has let the key go
    /// by the time its request runs (its time-to-live ran out, or it was evicted). The read is cut at the
    /// `deadline` less the completion's reserve, as a store error: nothing ran, so the records come back.
    ///
    /// Hand each request's record to [`execute_keyed`](Self::execute_keyed).
    pub async fn read_keyed(
        &self,
        keys: &[IdempotencyKey],
        deadline: Option<SystemTime>,
    ) -> Result<HashMap<IdempotencyKey, IdempotencyRecord>> {
        let now = self.inner.clock.now();
        let mut cached = HashMap::new();
        let unread: Vec<IdempotencyKey> = match &self.inner.cache {
            Some(cache) => keys
                .iter()
                .filter(|k| match cache.get(k, now) {
                    Some(hit) => {
                        cached.insert((*k).clone(), self.cached_record(k, &hit, now));
                        false
                    }
                    None => true,
                })
                .cloned()
                .collect(),
            None => keys.to_vec(),
        };
        if unread.is_empty() {
            return Ok(cached);
        }
        let read = async {
            let mut read = self.inner.store.get_many(&unread).await?;
            read.extend(cached);
            Ok(read)
        };
        let Some(deadline) = deadline else {
            return read.await;
        };
        let left = deadline
            .duration_since(now)
            .unwrap_or(Duration::ZERO)
            .saturating_sub(self.inner.completion_retry.reserve);
        tokio::time::timeout(left, read).await.unwrap_or_else(|_| {
            Err(Error::store(
                "get_many",
                unread[0].as_str(),
                format!(
                    "timed out reading {} keys: no time left before the invocation's deadline reserve",
                    unread.len()
                ),
            ))
        })
    }

    /// The keyed mode, for an effect whose downstream applies its `Idempotency-Key` (derived from the key) at most
    /// once within the idempotency window: no claim, no in-progress record. `read` is the request's record as
    /// [`read_keyed`](Self::read_keyed) found it (`None`: there was none).
    ///
    /// - completed with the same content (in the read, or in the local cache): replays, no write, the effect does not
    ///   run.
    /// - a record of other content that still counts: [`Error::PayloadMismatch`], the effect does not run.
    /// - otherwise the effect runs (under the downstream key), then one conditional write puts the completed record
    ///   (absent, expired, or an older claim of the same content: see
    ///   [`protocol::keyed_completion_lands`](crate::protocol::keyed_completion_lands)), retried like a claim's
    ///   completion within the deadline. Refused because a concurrent delivery completed the same content: the
    ///   stored result replays. Refused for other content: [`Error::PayloadMismatch`].
    /// - the effect fails: `RunError::Effect`, nothing was written (a panic resumes).
    ///
    /// Two deliveries of one intent that read before either completed both run the effect: the downstream key is
    /// what keeps it to one. Use the claim mode ([`execute`](Self::execute)) for any effect without one.
    pub async fn execute_keyed<T, E, F, Fut>(
        &self,
        request: &Request,
        read: Option<&IdempotencyRecord>,
        effect: F,
    ) -> Result<Outcome<T>, RunError<E>>
    where
        T: Serialize + DeserializeOwned,
        F: FnOnce() -> Fut,
        Fut: Future<Output = Result<T, E>>,
    {
        let now = self.inner.clock.now();
        if let Some(result) = self.replay_from_cache(request, now)? {
            return Ok(Outcome::Replayed {
                result,
                source: ReplaySource::Cache,
            });
        }
        let key = &request.key;
        let seen = read.map(|r| r.seen_by("", &request.fingerprint));
        match protocol::keyed_read(seen.as_ref(), epoch_millis(now)) {
            KeyedRead::Run => {}
            KeyedRead::Replay => {
                let found = read.expect("a replay is of a record read");
                let source = if found.token == CACHED_READ_TOKEN {
                    ReplaySource::Cache
                } else {
                    ReplaySource::Store
                };
                return Ok(Outcome::Replayed {
                    result: self.replay_stored(key, found, now),
                    source,
                });
            }
            KeyedRead::PayloadMismatch => {
                let found = read.expect("a mismatch is of a record read");
                check_fingerprint(key, &found.fingerprint, &request.fingerprint)?;
                return Err(Error::Inconsistent {
                    key: key.to_string(),
                    detail: format!(
                        "the read said other content, yet the fingerprints agree: {found:?}"
                    ),
                }
                .into());
            }
        }
        let outcome = AssertUnwindSafe(effect()).catch_unwind().await;
        let value = match outcome {
            Ok(Ok(value)) => value,
            Ok(Err(e)) => return Err(RunError::Effect(e)),
            Err(panic) => std::panic::resume_unwind(panic),
        };
        crash_point!(AfterEffect, key);
        let done = self.complete_keyed(request, &value).await?;
        crash_point!(AfterComplete, key);
        Ok(match done {
            None => Outcome::Executed(value),
            Some(result) => Outcome::Replayed {
                result,
                source: ReplaySource::Store,
            },
        })
    }

    /// Puts the completed record after a keyed effect ran. `None`: it landed (or its own first try had); `Some`: a
    /// concurrent delivery of the same content completed first, whose stored result replays.
    async fn complete_keyed<T: Serialize + DeserializeOwned>(
        &self,
        request: &Request,
        value: &T,
    ) -> Result<Option<Replayed<T>>> {
        let inner = &self.inner;
        let now = inner.clock.now();
        let key = &request.key;
        let mut record = self.new_record(request, now, inner.tokens.token());
        record.status = Status::Completed;
        record.lease_expires_at = None;
        record.expiration = protocol::completed_expiration_s(
            epoch_millis(now),
            duration_millis(inner.idempotency_window),
        );
        record.result = self.encode_result(&record, value);
        let then = "the message comes back and runs again under the same downstream key";
        let written = write_completion(inner, key, request.deadline, now, then, || {
            inner.store.put_completed(&record, now)
        })
        .await?;
        let found = match written {
            FencedWrite::Written => None,
            FencedWrite::Refused(Some(found)) if found.token == record.token => {
                // The SDK retried a put whose first try landed: the record it met is this one.
                ambiguous_write_resolved("put_completed", key);
                None
            }
            FencedWrite::Refused(Some(found)) => Some(found),
            FencedWrite::Refused(None) => {
                return Err(Error::Inconsistent {
                    key: key.to_string(),
                    detail: "keyed completion refused, yet the key had no record".to_owned(),
                });
            }
        };
        let Some(found) = found else {
            self.remember(
                key,
                &record.fingerprint,
                record.result,
                record.expiration,
                now,
            );
            return Ok(None);
        };
        let seen = found.seen_by(&record.token, &record.fingerprint);
        match protocol::keyed_completion_refused(&seen, epoch_millis(now)) {
            ClaimRefused::Replay => {
                tracing::info!(idempotency_key = %key,
                    "completed by a concurrent delivery of the same content; replaying its result");
                Ok(Some(self.replay_stored(key, &found, now)))
            }
            ClaimRefused::PayloadMismatch => {
                tracing::error!(idempotency_key = %key,
                    "another content completed this key while the effect ran; the downstream key kept it to one \
                     effect there. Failing as a payload mismatch");
                check_fingerprint(key, &found.fingerprint, &record.fingerprint)?;
                Err(inconsistent_put(key, &found))
            }
            _ => Err(inconsistent_put(key, &found)),
        }
    }

    fn guard(&self, record: IdempotencyRecord, deadline: Option<SystemTime>) -> Guard<S> {
        Guard {
            idem: self.clone(),
            lease_until: AtomicU64::new(record.lease_expires_at.unwrap_or(0)),
            record,
            deadline,
        }
    }

    #[cfg(feature = "dynamodb")]
    pub(crate) fn inner(&self) -> &Inner<S> {
        &self.inner
    }

    /// A completed key this instance saw recently, with the fingerprint checked.
    pub(crate) fn replay_from_cache<T: DeserializeOwned>(
        &self,
        request: &Request,
        now: SystemTime,
    ) -> Result<Option<Replayed<T>>> {
        let Some(hit) = self
            .inner
            .cache
            .as_ref()
            .and_then(|c| c.get(&request.key, now))
        else {
            return Ok(None);
        };
        check_fingerprint(&request.key, &hit.fingerprint, &request.fingerprint)?;
        Ok(Some(decode(&request.key, hit.result.as_ref())))
    }

    /// The `IN_PROGRESS` record a claim writes.
    pub(crate) fn new_record(
        &self,
        request: &Request,
        now: SystemTime,
        token: String,
    ) -> IdempotencyRecord {
        let inner = &self.inner;
        let lease_until = self.lease_until(now, request.deadline);
        IdempotencyRecord {
            key: request.key.clone(),
            status: Status::InProgress,
            expiration: protocol::in_progress_expiration_s(
                epoch_millis(now),
                duration_millis(inner.idempotency_window),
                lease_until,
                duration_millis(inner.takeover_margin),
            ),
            lease_expires_at: Some(lease_until),
            token,
            fingerprint: request.fingerprint.clone(),
            result: None,
            consumer: inner.consumer.clone(),
            consumer_version: inner.consumer_version,
            attempt: request.attempt,
            created_at: epoch_millis(now),
            correlation_id: request.correlation_id.clone(),
        }
    }

    /// A completed record of the request's content, replayed: its result decoded, and the key remembered in the local
    /// cache.
    fn replay_stored<T: DeserializeOwned>(
        &self,
        key: &IdempotencyKey,
        record: &IdempotencyRecord,
        now: SystemTime,
    ) -> Replayed<T> {
        self.remember(
            key,
            &record.fingerprint,
            record.result.clone(),
            record.expiration,
            now,
        );
        decode(key, record.result.as_ref())
    }

    /// The completed record a cache entry stands for, as the keyed read hands it on (its token says where it
    /// came from: [`CACHED_READ_TOKEN`]).
    fn cached_record(
        &self,
        key: &IdempotencyKey,
        hit: &crate::cache::CachedCompletion,
        now: SystemTime,
    ) -> IdempotencyRecord {
        IdempotencyRecord {
            key: key.clone(),
            status: Status::Completed,
            expiration: hit.expiration,
            lease_expires_at: None,
            token: CACHED_READ_TOKEN.to_owned(),
            fingerprint: hit.fingerprint.clone(),
            result: hit.result.clone(),
            consumer: self.inner.consumer.clone(),
            consumer_version: self.inner.consumer_version,
            attempt: 0,
            created_at: epoch_millis(now),
            correlation_id: None,
        }
    }

    /// Remembers a completed key in the local cache, if there is one.
    pub(crate) fn remember(
        &self,
        key: &IdempotencyKey,
        fingerprint: &Fingerprint,
        result: Option<StoredResult>,
        expiration: u64,
        now: SystemTime,
    ) {
        if let Some(cache) = &self.inner.cache {
            cache.insert(key, fingerprint, result, expiration, now);
        }
    }

    /// The claim was refused: say why, from the old record the same write returned and the protocol's reading of it.
    pub(crate) fn refused<T: DeserializeOwned>(
        &self,
        request: &Request,
        existing: IdempotencyRecord,
        decision: ClaimRefused,
        now: SystemTime,
    ) -> Result<Claim<S, T>> {
        let key = &request.key;
        match decision {
            ClaimRefused::PayloadMismatch => {
                check_fingerprint(key, &existing.fingerprint, &request.fingerprint)?;
                Err(inconsistent_claim(key, &existing, now))
            }
            ClaimRefused::Replay => Ok(Claim::Replay {
                result: self.replay_stored(key, &existing, now),
                source: ReplaySource::Store,
            }),
            ClaimRefused::InProgress { claimable_after_ms } => Err(Error::InProgress {
                key: key.to_string(),
                lease_expires_at: claimable_after_ms.map_or(now, from_millis),
            }),
            ClaimRefused::OwnRetry | ClaimRefused::Inconsistent => {
                Err(inconsistent_claim(key, &existing, now))
            }
        }
    }

    fn lease_until(&self, now: SystemTime, deadline: Option<SystemTime>) -> u64 {
        protocol::lease_until_ms(
            epoch_millis(now),
            deadline.map(epoch_millis),
            duration_millis(self.inner.min_lease),
            duration_millis(self.inner.default_lease),
        )
    }

    /// The result to store with `record`: its JSON when it fits under the configured cap and in the store's item
    /// beside the record's other attributes, else its digest and size.
    pub(crate) fn encode_result<T: Serialize>(
        &self,
        record: &IdempotencyRecord,
        value: &T,
    ) -> Option<StoredResult> {
        let key = &record.key;
        let json = match serde_json::to_string(value) {
            Ok(json) => json,
            Err(e) => {
                // The effect already happened: completing without a result beats releasing (which would run it again).
                tracing::warn!(idempotency_key = %key, error = %e, "result cannot be encoded; completing without it");
                return None;
            }
        };
        let cap = match self.inner.store.result_room(record) {
            Some(room) => room.min(self.inner.max_result_bytes),
            None => self.inner.max_result_bytes,
        };
        if json.len() <= cap {
            return Some(StoredResult::Json(json));
        }
        tracing::warn!(
            idempotency_key = %key,
            size = json.len(),
            cap,
            "result over the size cap (or the room left in the item); keeping its digest only"
        );
        Some(StoredResult::Omitted {
            digest: sha256_hex(json.as_bytes()),
            size: json.len() as u64,
        })
    }
}

impl<S: IdempotencyStore> Guard<S> {
    /// The key held.
    pub fn key(&self) -> &IdempotencyKey {
        &self.record.key
    }

    /// Records the effect's result and marks the key completed.
    ///
    /// A failed write (throttling, a timeout) is retried with jittered exponential backoff while the request's
    /// deadline allows (see [`CompletionRetry`]); then [`Error::CompletionFailed`]. A refused write is
    /// [`Error::LeaseLost`] unless the key is already completed under this claim's token (a retried write whose first
    /// try landed), which is success.
    pub async fn complete<T: Serialize>(self, value: &T) -> Result<()> {
        let inner = &self.idem.inner;
        let now = inner.clock.now();
        let result = self.idem.encode_result(&self.record, value);
        let completion = Completion {
            result: result.clone(),
            expiration: protocol::completed_expiration_s(
                epoch_millis(now),
                duration_millis(inner.idempotency_window),
            ),
        };
        let key = &self.record.key;
        let token = self.record.token.as_str();
        let then = "the key stays in progress until its lease ends";
        let written = write_completion(inner, key, self.deadline, now, then, || {
            inner.store.complete(key, token, &completion)
        })
        .await?;
        match written {
            FencedWrite::Written => {}
            FencedWrite::Refused(found) => {
                match protocol::complete_refused(self.seen(&found).as_ref()) {
                    FencedRefused::Done => ambiguous_write_resolved("complete", key),
                    FencedRefused::LeaseLost | FencedRefused::Inconsistent => {
                        return Err(self.lost("complete", found.as_ref()));
                    }
                }
            }
        }
        self.idem.remember(
            key,
            &self.record.fingerprint,
            result,
            completion.expiration,
            now,
        );
        Ok(())
    }

    /// Extends the lease to now + `lease`. A lease never shrinks: when it already ends later, nothing changes.
    pub async fn extend(&self, lease: Duration) -> Result<()> {
        let inner = &self.idem.inner;
        let now_ms = epoch_millis(inner.clock.now());
        let until = now_ms.saturating_add(duration_millis(lease));
        // The record must outlive the new lease and the margin, as at the claim.
        let expiration = protocol::in_progress_expiration_s(
            now_ms,
            duration_millis(inner.idempotency_window),
            until,
            duration_millis(inner.takeover_margin),
        );
        let key = &self.record.key;
        match inner
            .store
            .extend(key, &self.record.token, until, expiration)
            .await?
        {
            FencedWrite::Written => {
                self.lease_until.fetch_max(until, Ordering::Relaxed);
                Ok(())
            }
            FencedWrite::Refused(found) => {
                match (protocol::extend_refused(self.seen(&found).as_ref()), found) {
                    // Already extended as far (by this write's first try, or by a longer lease).
                    (FencedRefused::Done, Some(r)) if r.status == Status::InProgress => {
                        ambiguous_write_resolved("extend", key);
                        self.lease_until
                            .fetch_max(r.lease_expires_at.unwrap_or(0), Ordering::Relaxed);
                        Ok(())
                    }
                    (FencedRefused::Done, _) => Ok(()),
                    (FencedRefused::LeaseLost | FencedRefused::Inconsistent, found) => {
                        Err(self.lost("extend", found.as_ref()))
                    }
                }
            }
        }
    }

    /// Deletes the in-progress record so that a retry can claim the key at once. A record already gone counts as
    /// released.
    pub async fn release(self) -> Result<()> {
        let inner = &self.idem.inner;
        let key = &self.record.key;
        if let Some(cache) = &inner.cache {
            cache.invalidate(key);
        }
        match inner.store.release(key, &self.record.token).await? {
            FencedWrite::Written => Ok(()),
            FencedWrite::Refused(found) => {
                match protocol::release_refused(self.seen(&found).as_ref()) {
                    FencedRefused::Done => {
                        ambiguous_write_resolved("release", key);
                        Ok(())
                    }
                    FencedRefused::Inconsistent => Err(Error::Inconsistent {
                        key: key.to_string(),
                        detail: format!(
                            "release refused although the record still carries this claim's token: {found:?}"
                        ),
                    }),
                    FencedRefused::LeaseLost => Err(self.lost("release", found.as_ref())),
                }
            }
        }
    }

    /// A record found by a refused write, as this claim sees it.
    fn seen(&self, found: &Option<IdempotencyRecord>) -> Option<protocol::Seen> {
        found
            .as_ref()
            .map(|r| r.seen_by(&self.record.token, &self.record.fingerprint))
    }

    /// Another attempt holds the key now (or nobody does): log it loudly, since it can mean clock skew, and say so.
    fn lost(&self, write: &'static str, found: Option<&IdempotencyRecord>) -> Error {
        let now_ms = epoch_millis(self.idem.inner.clock.now());
        let lease_until_ms = self.lease_until.load(Ordering::Relaxed);
        let margin_ms = duration_millis(self.idem.inner.takeover_margin);
        tracing::error!(
            idempotency_key = %self.record.key,
            write,
            lease_until_ms,
            now_ms,
            own_lease_passed = lease_until_ms < now_ms,
            takeover_margin_ms = margin_ms,
            holder_claimed_at_ms = found.map(|r| r.created_at),
            holder_correlation_id = found.and_then(|r| r.correlation_id.as_deref()),
            "lease lost: another attempt took the key over. If this attempt's lease had not passed on its own clock \
             (own_lease_passed = false), the instances' clocks are skewed by more than the takeover margin"
        );
        Error::LeaseLost {
            key: self.record.key.to_string(),
        }
    }

    async fn release_after_failure(self) {
        let key = self.record.key.clone();
        if let Err(e) = self.release().await {
            // Not fatal: the lease passes and the key becomes claimable again.
            tracing::warn!(idempotency_key = %key, error = %e, "could not release the key after a failed effect");
        }
    }

    /// Runs `effect` while extending the lease; stops it (drops its future) when the claim is lost.
    ///
    /// A beat's write runs beside the effect, not instead of it: while an extension is in flight the effect is still
    /// polled, and an effect that finishes meanwhile returns at once (the write in flight is dropped: the fenced
    /// completion decides). The next beat is timed from the end of the last one.
    async fn with_heartbeat<Fut: Future>(
        &self,
        heartbeat: Heartbeat,
        effect: Fut,
    ) -> Result<Fut::Output> {
        let mut effect = std::pin::pin!(effect);
        let mut beat = std::pin::pin!(futures::future::Fuse::terminated());
        let mut wait = std::pin::pin!(tokio::time::sleep(heartbeat.every));
        loop {
            tokio::select! {
                biased;
                out = &mut effect => return Ok(out),
                extended = &mut beat, if !beat.is_terminated() => {
                    let extended: Result<()> = extended;
                    wait.as_mut().reset(tokio::time::Instant::now() + heartbeat.every);
                    match extended {
                        Ok(()) => tracing::debug!(idempotency_key = %self.record.key, "lease extended"),
                        Err(e) if e.is_lease_lost() => return Err(e),
                        // A failed write is not a lost claim: keep going; the next beat or the fenced completion
                        // decides.
                        Err(e) => tracing::warn!(idempotency_key = %self.record.key, error = %e,
                            "heartbeat could not extend the lease"),
                    }
                }
                () = &mut wait, if beat.is_terminated() => {
                    beat.set(self.extend(heartbeat.lease).fuse());
                }
            }
        }
    }
}

/// Writes a completion after its effect ran: `write` is tried, and retried on a store error (throttling, a timeout)
/// with jittered exponential backoff while the `deadline` allows ([`CompletionRetry`]), then gives up with
/// [`Error::CompletionFailed`]. A refused write is returned as it is, for the caller to judge.
///
/// Each try is cut at the time left before the deadline's reserve, and no retry starts after it: a write that hangs
/// until the SDK's timeout must not carry the invocation past its deadline (the backoff policy bounds only the
/// sleeps). The first try is always made, with at least half the reserve: a completion that lands saves a second run
/// of the effect, and the other half is left to report the batch.
async fn write_completion<S, W, Fut>(
    inner: &Inner<S>,
    key: &IdempotencyKey,
    deadline: Option<SystemTime>,
    now: SystemTime,
    then: &'static str,
    write: W,
) -> Result<FencedWrite>
where
    W: Fn() -> Fut,
    Fut: Future<Output = Result<FencedWrite>>,
{
    let retry = inner.completion_retry;
    let mut policy = ExponentialBuilder::default()
        .with_min_delay(retry.first_delay)
        .with_max_delay(retry.max_delay)
        .with_max_times(retry.attempts.saturating_sub(1) as usize)
        .with_jitter();
    if let Some(deadline) = deadline {
        let left = deadline.duration_since(now).unwrap_or(Duration::ZERO);
        policy = policy.with_total_delay(Some(left.saturating_sub(retry.reserve)));
    }
    let budget_end = deadline.map(|d| d - retry.reserve);
    let time_left = || {
        budget_end.map(|end| {
            end.duration_since(inner.clock.now())
                .unwrap_or(Duration::ZERO)
        })
    };
    let tries = AtomicU64::new(0);
    let written = (|| {
        let first = tries.fetch_add(1, Ordering::Relaxed) == 0;
        let left = time_left().map(|left| {
            if first {
                left.max(retry.reserve / 2)
            } else {
                left
            }
        });
        let write = write();
        async move {
            match left {
                None => write.await,
                Some(left) if left.is_zero() => Err(out_of_time(key)),
                Some(left) => tokio::time::timeout(left, write)
                    .await
                    .unwrap_or_else(|_| Err(out_of_time(key))),
            }
        }
    })
    .retry(policy)
    .sleep(tokio::time::sleep)
    .when(|e| e.is_store() && time_left().is_none_or(|left| !left.is_zero()))
    .notify(|e, delay| {
        tracing::warn!(idempotency_key = %key, error = %e, retry_in_ms = duration_millis(delay),
            "completion failed after the effect ran; retrying");
    })
    .await;
    match written {
        Ok(written) => Ok(written),
        Err(e) if e.is_store() => {
            let attempts = u32::try_from(tries.load(Ordering::Relaxed)).unwrap_or(u32::MAX);
            tracing::error!(idempotency_key = %key, error = %e, attempts,
                "completion failed after the effect ran; {then}");
            Err(Error::CompletionFailed {
                key: key.to_string(),
                attempts,
                source: Box::new(e),
            })
        }
        Err(e) => Err(e),
    }
}

fn check_fingerprint(
    key: &IdempotencyKey,
    stored: &Fingerprint,
    actual: &Fingerprint,
) -> Result<()> {
    if stored == actual {
        return Ok(());
    }
    Err(Error::PayloadMismatch {
        key: key.to_string(),
        stored: stored.to_string(),
        actual: actual.to_string(),
    })
}

/// The stored result as `T`. A result that no longer decodes (its type changed since it was stored, or none was
/// stored and `T` is not `()`) replays as [`Replayed::Unavailable`]: the effect is done either way.
fn decode<T: DeserializeOwned>(key: &IdempotencyKey, stored: Option<&StoredResult>) -> Replayed<T> {
    let json = match stored {
        Some(StoredResult::Json(json)) => json.as_str(),
        Some(StoredResult::Omitted { digest, size }) => {
            return Replayed::Omitted {
                digest: digest.clone(),
                size: *size,
            };
        }
        // Completed without a result (it could not be encoded): fine for a caller that expects nothing.
        None => "null",
    };
    match serde_json::from_str(json) {
        Ok(value) => Replayed::Value(value),
        Err(e) => {
            tracing::warn!(idempotency_key = %key, error = %e,
                "stored result does not decode into today's type; replaying as done, value unavailable");
            Replayed::Unavailable {
                reason: format!("stored result does not decode: {e}"),
            }
        }
    }
}

/// A refused claim that the protocol's rules say should have landed: the store disagrees with them.
fn inconsistent_claim(
    key: &IdempotencyKey,
    existing: &IdempotencyRecord,
    now: SystemTime,
) -> Error {
    Error::Inconsistent {
        key: key.to_string(),
        detail: format!(
            "claim refused although the stored record is claimable at {now:?}: {existing:?}"
        ),
    }
}

/// A refused keyed completion that the protocol's rules say should have landed.
fn inconsistent_put(key: &IdempotencyKey, found: &IdempotencyRecord) -> Error {
    Error::Inconsistent {
        key: key.to_string(),
        detail: format!("keyed completion refused although the stored record allows it: {found:?}"),
    }
}

/// A completion try cut because no time is left before the invocation's deadline reserve.
fn out_of_time(key: &IdempotencyKey) -> Error {
    Error::store(
        "complete",
        key.as_str(),
        "timed out: no time left before the invocation's deadline reserve",
    )
}
