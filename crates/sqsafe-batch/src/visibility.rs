use std::future::Future;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use futures::future::BoxFuture;
use sqsafe_idempotency::BoxError;

use crate::error::BatchError;

/// SQS's longest visibility timeout: 12 hours.
pub const MAX_VISIBILITY: Duration = Duration::from_secs(12 * 3600);

/// Changes when a received message becomes visible again. Implemented for SQS by [`SqsVisibility`].
pub trait VisibilityControl: Send + Sync + 'static {
    /// Makes the message with `receipt_handle` visible again after `timeout` from now.
    fn set_visibility(
        &self,
        receipt_handle: &str,
        timeout: Duration,
    ) -> impl Future<Output = Result<(), BoxError>> + Send;

    /// The queue's `maxReceiveCount` (its redrive policy), when it can be read: the processor warns once when a
    /// FIFO batch is larger than that count allows (see the book's receive-count rule, book/src/deploy.md). `None` by
    /// default.
    fn max_receive_count(&self) -> impl Future<Output = Result<Option<u32>, BoxError>> + Send {
        async { Ok(None) }
    }
}

/// [`VisibilityControl`] behind a pointer: the processor keeps any implementation, implementers write `async fn`.
pub(crate) trait DynVisibilityControl: Send + Sync + 'static {
    fn set_visibility_boxed<'a>(
        &'a self,
        receipt_handle: &'a str,
        timeout: Duration,
    ) -> BoxFuture<'a, Result<(), BoxError>>;

    fn max_receive_count_boxed(&self) -> BoxFuture<'_, Result<Option<u32>, BoxError>>;
}

impl<T: VisibilityControl> DynVisibilityControl for T {
    fn set_visibility_boxed<'a>(
        &'a self,
        receipt_handle: &'a str,
        timeout: Duration,
    ) -> BoxFuture<'a, Result<(), BoxError>> {
        Box::pin(self.set_visibility(receipt_handle, timeout))
    }

    fn max_receive_count_boxed(&self) -> BoxFuture<'_, Result<Option<u32>, BoxError>> {
        Box::pin(self.max_receive_count())
    }
}

/// `ChangeMessageVisibility` on one source queue.
#[derive(Debug, Clone)]
pub struct SqsVisibility {
    client: aws_sdk_sqs::Client,
    queue_url: String,
}

impl SqsVisibility {
    /// Controls messages received from `queue_url`.
    pub fn new(client: aws_sdk_sqs::Client, queue_url: impl Into<String>) -> Self {
        Self {
            client,
            queue_url: queue_url.into(),
        }
    }
}

impl VisibilityControl for SqsVisibility {
    async fn set_visibility(
        &self,
        receipt_handle: &str,
        timeout: Duration,
    ) -> Result<(), BoxError> {
        let seconds = i32::try_from(timeout.as_secs()).unwrap_or(i32::MAX);
        self.client
            .change_message_visibility()
            .queue_url(&self.queue_url)
            .receipt_handle(receipt_handle)
            .visibility_timeout(seconds)
            .send()
            .await?;
        Ok(())
    }

    /// `GetQueueAttributes(RedrivePolicy)` (the mapping's role has `sqs:GetQueueAttributes` on its queue).
    async fn max_receive_count(&self) -> Result<Option<u32>, BoxError> {
        let attributes = self
            .client
            .get_queue_attributes()
            .queue_url(&self.queue_url)
            .attribute_names(aws_sdk_sqs::types::QueueAttributeName::RedrivePolicy)
            .send()
            .await?;
        let Some(policy) = attributes
            .attributes()
            .and_then(|a| a.get(&aws_sdk_sqs::types::QueueAttributeName::RedrivePolicy))
        else {
            return Ok(None);
        };
        let policy: serde_json::Value = serde_json::from_str(policy)?;
        Ok(match &policy["maxReceiveCount"] {
            serde_json::Value::Number(n) => n.as_u64().and_then(|n| u32::try_from(n).ok()),
            serde_json::Value::String(s) => s.parse().ok(),
            _ => None,
        })
    }
}

/// Exponential backoff with jitter for transient failures, from the receive count.
///
/// Delivery `n` (1-based) waits a value drawn uniformly from `[d/2, d]` with `d = min(max, base * 2^(n-1))`
/// ("equal jitter": never immediate, never in lockstep). The jitter comes from [`fastrand`], seeded from the
/// operating system's entropy, so cold instances started together draw different delays; [`Backoff::seed`] makes a
/// run reproducible (tests).
///
/// # Default
/// base 5 s, max 15 min, jitter seeded from OS entropy.
#[derive(Debug, Clone)]
pub struct Backoff {
    base: Duration,
    max: Duration,
    rng: Arc<Mutex<fastrand::Rng>>,
}

impl Default for Backoff {
    fn default() -> Self {
        Self {
            base: Duration::from_secs(5),
            max: Duration::from_secs(900),
            rng: Arc::new(Mutex::new(fastrand::Rng::new())),
        }
    }
}

impl Backoff {
    /// Validated: `0 < base <= max <= 12 h`.
    pub fn new(base: Duration, max: Duration) -> Result<Self, BatchError> {
        if base.is_zero() || base > max || max > MAX_VISIBILITY {
            return Err(BatchError::Config(format!(
                "backoff needs 0 < base <= max <= 12 h (got base {base:?}, max {max:?})"
            )));
        }
        Ok(Self {
            base,
            max,
            ..Self::default()
        })
    }

    /// Seeds the jitter, for a reproducible sequence of delays (tests). Clones made before share the new seed.
    pub fn seed(self, seed: u64) -> Self {
        *self.rng.lock().unwrap_or_else(|p| p.into_inner()) = fastrand::Rng::with_seed(seed);
        self
    }

    /// The shortest delay [`delay`](Self::delay) can give before delivery `receive_count + 1`: half its ceiling,
    /// in whole seconds, at least 1 s. What records held back behind a failed one of their FIFO group wait, so that
    /// they are never due after it.
    pub fn min_delay(&self, receive_count: u32) -> Duration {
        Duration::from_secs((self.ceiling(receive_count) / 2).as_secs().max(1))
    }

    fn ceiling(&self, receive_count: u32) -> Duration {
        let exponent = receive_count.saturating_sub(1).min(30);
        self.base.saturating_mul(1 << exponent).min(self.max)
    }

    /// The delay before delivery `receive_count + 1`.
    pub fn delay(&self, receive_count: u32) -> Duration {
        let ceiling = self.ceiling(receive_count);
        let unit = self.rng.lock().unwrap_or_else(|p| p.into_inner()).f64();
        let half = ceiling / 2;
        // Whole seconds: SQS takes seconds. At least 1 s.
        let delay = half + half.mul_f64(unit);
        Duration::from_secs(delay.as_secs().max(1))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn delays_grow_exponentially_within_equal_jitter_bounds_and_cap() {
        let backoff = Backoff::new(Duration::from_secs(4), Duration::from_secs(60))
            .expect("valid")
            .seed(7);
        for (count, ceiling) in [(1, 4), (2, 8), (3, 16), (4, 32), (5, 60), (9, 60), (40, 60)] {
            for _ in 0..50 {
                let d = backoff.delay(count).as_secs();
                assert!(
                    d >= ceiling / 2 && d <= ceiling,
                    "receive {count}: {d}s not in [{}, {ceiling}]",
                    ceiling / 2
                );
            }
        }
    }

    #[test]
    fn the_same_seed_replays_the_same_delays() {
        let a = Backoff::default().seed(42);
        let b = Backoff::default().seed(42);
        let c = Backoff::default().seed(43);
        let run = |x: &Backoff| (1..20).map(|n| x.delay(n)).collect::<Vec<_>>();
        assert_eq!(run(&a), run(&b));
        assert_ne!(run(&Backoff::default().seed(42)), run(&c));
    }

    #[test]
    fn default_backoffs_draw_different_jitter() {
        // Cold instances started together must not retry in lockstep. Each delay at receive 10 is one of 451 whole
        // seconds in [450, 900], so two independent runs of 64 agree everywhere with probability 451^-64.
        let run = |x: &Backoff| (0..64).map(|_| x.delay(10)).collect::<Vec<_>>();
        assert_ne!(run(&Backoff::default()), run(&Backoff::default()));
    }

    #[test]
    fn settings_are_validated() {
        assert!(Backoff::new(Duration::ZERO, Duration::from_secs(1)).is_err());
        assert!(Backoff::new(Duration::from_secs(2), Duration::from_secs(1)).is_err());
        assert!(
            Backoff::new(
                Duration::from_secs(1),
                MAX_VISIBILITY + Duration::from_secs(1)
            )
            .is_err()
        );
        assert!(Backoff::new(Duration::from_secs(1), MAX_VISIBILITY).is_ok());
    }
}
