//! The completion write both modes make after the effect ran, retried within the invocation's deadline.

use std::future::Future;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, SystemTime};

use backon::{ExponentialBuilder, Retryable};

use super::types::Inner;
use crate::clock::duration_millis;
use crate::error::{Error, Result};
use crate::key::IdempotencyKey;
use crate::store::FencedWrite;

/// Logs a conditional write that met its own earlier, landed try.
pub(super) fn ambiguous_write_resolved(write: &'static str, key: &IdempotencyKey) {
    tracing::info!(
        write,
        idempotency_key = %key,
        "ambiguous write resolved"
    );
}

/// Writes a completion after its effect ran: `write` is tried, and retried on a store error (throttling, a timeout)
/// with jittered exponential backoff while the `deadline` allows ([`CompletionRetry`](crate::CompletionRetry)), then gives up with
/// [`Error::CompletionFailed`]. A refused write is returned as it is, for the caller to judge.
///
/// Each try is cut at the time left before the deadline's reserve, and no retry starts after it: a write that hangs
/// until the SDK's timeout must not carry the invocation past its deadline (the backoff policy bounds only the
/// sleeps). The first try is always made, with at least half the reserve: a completion that lands saves a second run
/// of the effect, and the other half is left to report the batch.
pub(super) async fn write_completion<S, W, Fut>(
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

/// A completion try cut because no time is left before the invocation's deadline reserve.
pub(super) fn out_of_time(key: &IdempotencyKey) -> Error {
    Error::store(
        "complete",
        key.as_str(),
        "timed out: no time left before the invocation's deadline reserve",
    )
}

/// Runs a claim or a release within the invocation's `deadline`: cut at half the completion reserve before it (where
/// a completion's last try ends), and not made at all once that point has passed. A store that answers late (the SDK
/// backing off between throttled tries, an emulator under load) must not carry the invocation past its deadline:
/// Lambda would kill it, and every record of the batch would come back. `None`: no deadline, the SDK's own timeouts
/// bound the write. Nor does a deadline already passed when the write starts: no invocation is handed over, or still
/// running, past its deadline in Lambda, so such a deadline is an emulator's or a wrong clock's, and the write is
/// made as without one (the claim then takes the minimum lease).
///
/// A cut write may still land: a cut claim leaves an `IN_PROGRESS` record that its lease frees, as a claim whose
/// answer was lost does; a cut release leaves the key to its lease.
pub(crate) async fn before_deadline<S, T>(
    inner: &Inner<S>,
    operation: &'static str,
    key: &IdempotencyKey,
    deadline: Option<SystemTime>,
    write: impl Future<Output = Result<T>>,
) -> Result<T> {
    let now = inner.clock.now();
    let Some(deadline) = deadline.filter(|d| *d > now) else {
        return write.await;
    };
    let end = deadline
        .checked_sub(inner.completion_retry.reserve / 2)
        .unwrap_or(deadline);
    let left = end.duration_since(now).unwrap_or(Duration::ZERO);
    let cut = || {
        Error::store(
            operation,
            key.as_str(),
            format!(
                "timed out: cut {} ms before the invocation's deadline",
                duration_millis(inner.completion_retry.reserve / 2)
            ),
        )
    };
    if left.is_zero() {
        return Err(cut());
    }
    tokio::time::timeout(left, write)
        .await
        .unwrap_or_else(|_| Err(cut()))
}
