use std::future::Future;
use std::panic::AssertUnwindSafe;
use std::sync::Arc;
use std::time::{Duration, SystemTime};

use futures::FutureExt;
use serde::Serialize;
use serde::de::DeserializeOwned;

use crate::cache::CompletedCache;
use crate::clock::{Clock, TokenSource, duration_millis, epoch_millis, epoch_secs};
use crate::config::{Heartbeat, IdempotencyBuilder};
use crate::error::{Error, Result, RunError};
use crate::fingerprint::{Fingerprint, FingerprintFields, sha256_hex};
use crate::key::IdempotencyKey;
use crate::record::{Completion, Record, Status, StoredResult};
use crate::store::{ClaimAttempt, IdempotencyStore};

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
    pub(crate) record_ttl: Duration,
    pub(crate) default_lease: Duration,
    pub(crate) min_lease: Duration,
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

    /// The correlation id to keep on the record.
    pub fn correlation_id(mut self, id: impl Into<String>) -> Self {
        self.correlation_id = Some(id.into());
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
    /// The store's completed record (one conditional write, no read).
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
                result: Replayed::Omitted { .. },
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

/// Ownership of a claimed key. Completing, extending and releasing present the claim's token, so they fail with
/// [`Error::LeaseLost`] once another attempt has taken the key over.
///
/// Dropping a guard without completing or releasing leaves the record `IN_PROGRESS` until its lease passes.
pub struct Guard<S> {
    idem: Idempotency<S>,
    key: IdempotencyKey,
    fingerprint: Fingerprint,
    token: String,
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

    /// A request for `key` with the fingerprint of `payload` (restricted to the configured fields).
    pub fn request<P: Serialize + ?Sized>(
        &self,
        key: IdempotencyKey,
        payload: &P,
    ) -> Result<Request> {
        let fingerprint = Fingerprint::of(payload, &self.inner.fingerprint_fields)?;
        Ok(Request {
            key,
            fingerprint,
            deadline: None,
            attempt: 1,
            correlation_id: None,
        })
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
    /// - effect fails or panics: the key is released so a retry can run it; `RunError::Effect` (a panic resumes).
    /// - completed with other content: [`Error::PayloadMismatch`], the effect does not run.
    /// - a live claim elsewhere: [`Error::InProgress`] (transient), the effect does not run.
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
            Some(heartbeat) => guard.with_heartbeat(heartbeat, effect).await,
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
        let record = self.new_record(request, now, token.clone());
        match self.inner.store.claim(&record, now).await? {
            ClaimAttempt::Claimed => Ok(Claim::Acquired(Guard {
                idem: self.clone(),
                key: request.key.clone(),
                fingerprint: request.fingerprint.clone(),
                token,
            })),
            ClaimAttempt::Existing(existing) => self.refused(request, existing, now),
        }
    }

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
        decode(&request.key, hit.result.as_ref()).map(Some)
    }

    /// The `IN_PROGRESS` record a claim writes.
    pub(crate) fn new_record(&self, request: &Request, now: SystemTime, token: String) -> Record {
        let inner = &self.inner;
        Record {
            key: request.key.clone(),
            status: Status::InProgress,
            expiration: epoch_secs(now + inner.record_ttl),
            lease_expires_at: Some(self.lease_until(now, request.deadline)),
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

    /// The claim was refused: say why, from the old record the same write returned.
    pub(crate) fn refused<T: DeserializeOwned>(
        &self,
        request: &Request,
        existing: Record,
        now: SystemTime,
    ) -> Result<Claim<S, T>> {
        let key = &request.key;
        check_fingerprint(key, &existing.fingerprint, &request.fingerprint)?;
        match existing.status {
            Status::Completed if !existing.is_expired(now) => {
                let result = decode(key, existing.result.as_ref())?;
                self.remember(
                    key,
                    &existing.fingerprint,
                    existing.result,
                    existing.expiration,
                    now,
                );
                Ok(Claim::Replay {
                    result,
                    source: ReplaySource::Store,
                })
            }
            Status::InProgress if !existing.is_claimable(now) => Err(Error::InProgress {
                key: key.to_string(),
                lease_expires_at: existing.lease_expires().unwrap_or(now),
            }),
            _ => Err(Error::Inconsistent {
                key: key.to_string(),
                detail: format!(
                    "claim refused although the stored record is claimable at {now:?}: {existing:?}"
                ),
            }),
        }
    }

    fn lease_until(&self, now: SystemTime, deadline: Option<SystemTime>) -> u64 {
        let floor = now + self.inner.min_lease;
        let until = match deadline {
            Some(d) => d.max(floor),
            None => now + self.inner.default_lease,
        };
        epoch_millis(until)
    }

    pub(crate) fn encode_result<T: Serialize>(
        &self,
        key: &IdempotencyKey,
        value: &T,
    ) -> Option<StoredResult> {
        let json = match serde_json::to_string(value) {
            Ok(json) => json,
            Err(e) => {
                // The effect already happened: completing without a result beats releasing (which would run it again).
                tracing::warn!(idempotency_key = %key, error = %e, "result cannot be encoded; completing without it");
                return None;
            }
        };
        if json.len() <= self.inner.max_result_bytes {
            return Some(StoredResult::Json(json));
        }
        tracing::warn!(
            idempotency_key = %key,
            size = json.len(),
            cap = self.inner.max_result_bytes,
            "result over the size cap; keeping its digest only"
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
        &self.key
    }

    /// Records the effect's result and marks the key completed.
    pub async fn complete<T: Serialize>(self, value: &T) -> Result<()> {
        let inner = &self.idem.inner;
        let now = inner.clock.now();
        let result = self.idem.encode_result(&self.key, value);
        let completion = Completion {
            result: result.clone(),
            expiration: epoch_secs(now + inner.record_ttl),
        };
        inner
            .store
            .complete(&self.key, &self.token, &completion)
            .await?;
        self.idem.remember(
            &self.key,
            &self.fingerprint,
            result,
            completion.expiration,
            now,
        );
        Ok(())
    }

    /// Extends the lease to now + `lease`.
    pub async fn extend(&self, lease: Duration) -> Result<()> {
        let inner = &self.idem.inner;
        let until = epoch_millis(inner.clock.now()).saturating_add(duration_millis(lease));
        inner.store.extend(&self.key, &self.token, until).await
    }

    /// Deletes the in-progress record so that a retry can claim the key at once.
    pub async fn release(self) -> Result<()> {
        if let Some(cache) = &self.idem.inner.cache {
            cache.invalidate(&self.key);
        }
        self.idem.inner.store.release(&self.key, &self.token).await
    }

    async fn release_after_failure(self) {
        let key = self.key.clone();
        if let Err(e) = self.release().await {
            // Not fatal: the lease passes and the key becomes claimable again.
            tracing::warn!(idempotency_key = %key, error = %e, "could not release the key after a failed effect");
        }
    }

    async fn with_heartbeat<Fut: Future>(&self, heartbeat: Heartbeat, effect: Fut) -> Fut::Output {
        let mut effect = std::pin::pin!(effect);
        loop {
            tokio::select! {
                biased;
                out = &mut effect => return out,
                () = tokio::time::sleep(heartbeat.every) => match self.extend(heartbeat.lease).await {
                    Ok(()) => tracing::debug!(idempotency_key = %self.key, "lease extended"),
                    // Keep going: if the claim was really lost, completion is fenced and says so.
                    Err(e) => tracing::warn!(idempotency_key = %self.key, error = %e, "heartbeat could not extend the lease"),
                },
            }
        }
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

fn decode<T: DeserializeOwned>(
    key: &IdempotencyKey,
    stored: Option<&StoredResult>,
) -> Result<Replayed<T>> {
    match stored {
        Some(StoredResult::Json(json)) => {
            serde_json::from_str(json)
                .map(Replayed::Value)
                .map_err(|source| Error::ResultDecode {
                    key: key.to_string(),
                    source,
                })
        }
        Some(StoredResult::Omitted { digest, size }) => Ok(Replayed::Omitted {
            digest: digest.clone(),
            size: *size,
        }),
        // Completed without a result (it could not be encoded): replay as "unit" if the caller expects nothing.
        None => serde_json::from_str("null")
            .map(Replayed::Value)
            .map_err(|source| Error::ResultDecode {
                key: key.to_string(),
                source,
            }),
    }
}
