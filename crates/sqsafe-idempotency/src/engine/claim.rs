//! The claim mode: one conditional write claims the key; the effect runs under the [`Guard`] it gives.

use std::future::Future;
use std::panic::AssertUnwindSafe;
use std::sync::atomic::AtomicU64;
use std::time::SystemTime;

use futures::FutureExt;
use serde::Serialize;
use serde::de::DeserializeOwned;

use super::completion::{ambiguous_write_resolved, before_deadline};
use super::replay::check_fingerprint;
use super::types::{Claim, Guard, Idempotency, Outcome, ReplaySource, Request};
use crate::clock::{duration_millis, epoch_millis, from_millis};
use crate::error::{Error, Result, RunError};
use crate::fingerprint::Fingerprint;
use crate::key::IdempotencyKey;
use crate::protocol::Status;
use crate::protocol::{self, ClaimRefused};
use crate::record::IdempotencyRecord;
use crate::store::{ClaimAttempt, IdempotencyStore};

impl<S: IdempotencyStore> Idempotency<S> {
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
    ///
    /// With a deadline on the request, the write is cut half the completion reserve before it (a transient
    /// [`Error::Store`]): a store that answers late must not carry the invocation past its deadline.
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
        let claimed = before_deadline(
            &self.inner,
            "claim",
            &record.key,
            request.deadline,
            store.claim(&record, now, self.inner.takeover_margin),
        );
        match claimed.await? {
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

    pub(super) fn guard(
        &self,
        record: IdempotencyRecord,
        deadline: Option<SystemTime>,
    ) -> Guard<S> {
        Guard {
            idem: self.clone(),
            lease_until: AtomicU64::new(record.lease_expires_at.unwrap_or(0)),
            record,
            deadline,
        }
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

    pub(super) fn lease_until(&self, now: SystemTime, deadline: Option<SystemTime>) -> u64 {
        protocol::lease_until_ms(
            epoch_millis(now),
            deadline.map(epoch_millis),
            duration_millis(self.inner.min_lease),
            duration_millis(self.inner.default_lease),
        )
    }
}

/// A refused claim that the protocol's rules say should have landed: the store disagrees with them.
pub(super) fn inconsistent_claim(
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
