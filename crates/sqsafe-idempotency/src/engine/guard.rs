//! What the claim's owner does with it: complete (fenced by its token), extend (the heartbeat), release.

use std::future::Future;
use std::sync::atomic::Ordering;
use std::time::Duration;

use futures::FutureExt;
use futures::future::FusedFuture;
use serde::Serialize;

use super::completion::{ambiguous_write_resolved, before_deadline, write_completion};
use super::types::Guard;
use crate::clock::{duration_millis, epoch_millis};
use crate::error::{Error, Result};
use crate::key::IdempotencyKey;
use crate::protocol::Status;
use crate::protocol::{self, FencedRefused};
use crate::record::{Completion, IdempotencyRecord};
use crate::settings::Heartbeat;
use crate::store::{FencedWrite, IdempotencyStore};

impl<S: IdempotencyStore> Guard<S> {
    /// The key held.
    pub fn key(&self) -> &IdempotencyKey {
        &self.record.key
    }

    /// The end of the lease this claim holds (moved forward by each extension).
    pub fn lease_until(&self) -> std::time::SystemTime {
        crate::clock::from_millis(self.lease_until.load(Ordering::Relaxed))
    }

    /// Records the effect's result and marks the key completed.
    ///
    /// A failed write (throttling, a timeout) is retried with jittered exponential backoff while the request's
    /// deadline allows (see [`CompletionRetry`](crate::CompletionRetry)); then [`Error::CompletionFailed`]. A refused write is
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
    /// released. Cut half the completion reserve before the request's deadline, like a claim (a transient
    /// [`Error::Store`]; the lease then frees the key).
    pub async fn release(self) -> Result<()> {
        let inner = &self.idem.inner;
        let key = &self.record.key;
        if let Some(cache) = &inner.cache {
            cache.invalidate(key);
        }
        let released = before_deadline(
            inner,
            "release",
            key,
            self.deadline,
            inner.store.release(key, &self.record.token),
        );
        match released.await? {
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
    pub(super) fn seen(&self, found: &Option<IdempotencyRecord>) -> Option<protocol::Seen> {
        found
            .as_ref()
            .map(|r| r.seen_by(&self.record.token, &self.record.fingerprint))
    }

    /// Another attempt holds the key now (or nobody does): log it loudly, since it can mean clock skew, and say so.
    pub(super) fn lost(&self, write: &'static str, found: Option<&IdempotencyRecord>) -> Error {
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

    pub(super) async fn release_after_failure(self) {
        let key = self.record.key.clone();
        if let Err(e) = self.release().await {
            // Not fatal: the lease passes and the key becomes claimable again.
            tracing::warn!(idempotency_key = %key, error = %e, "could not release the key after a failed effect");
        }
    }

    /// Runs `effect` while extending the lease every `heartbeat.every` to now + `heartbeat.lease`; stops it (drops
    /// its future) and answers [`Error::LeaseLost`] when the claim is lost to another attempt. A failed extension
    /// (throttling, a timeout) is logged and retried at the next beat: the claim is kept as long as the lease allows.
    ///
    /// A beat's write runs beside the effect, not instead of it: while an extension is in flight the effect is still
    /// polled, and an effect that finishes meanwhile returns at once (the write in flight is dropped: the fenced
    /// completion decides). The next beat is timed from the end of the last one.
    pub async fn with_heartbeat<Fut: Future>(
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
