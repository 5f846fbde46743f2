//! Shared test fixtures: the testkit's moto-backed clients, deterministic clocks and tokens.
#![allow(dead_code, unused_imports, unreachable_pub, missing_docs)]

pub mod scenarios;

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime};

use sqsafe_idempotency::{
    ClaimAttempt, Completion, FencedWrite, Idempotency, IdempotencyBuilder, IdempotencyKey,
    IdempotencyRecord, IdempotencyStore, ManualClock, Result,
};
pub use sqsafe_testkit::{
    LostAnswer, RequestCounter, create_table, dynamodb as dynamodb_client, dynamodb_losing,
    unique_name as table_name,
};

/// 2027-01-15T08:00:00Z: far from any epoch edge.
pub const T0_MS: u64 = 1_800_000_000_000;

/// Tokens `tok-1`, `tok-2`, … in claim order.
pub fn counting_tokens() -> impl Fn() -> String + Send + Sync + 'static {
    let n = AtomicU64::new(0);
    move || format!("tok-{}", n.fetch_add(1, Ordering::SeqCst) + 1)
}

/// A builder with a manual clock at [`T0_MS`], counting tokens and no takeover margin (scenarios about the margin
/// set it).
pub fn builder<S: IdempotencyStore>(store: S, clock: &ManualClock) -> IdempotencyBuilder<S> {
    Idempotency::builder(store, "charge-payment", 1)
        .clock(clock.clone())
        .tokens(counting_tokens())
        .takeover_margin(Duration::ZERO)
}

/// A store whose armed writes land and then "lose their answer": each is applied, then applied again as the SDK's
/// retry would be, and the retry's answer is returned. The in-memory counterpart of [`LostAnswer`].
#[derive(Debug, Clone, Default)]
pub struct Retried<S> {
    pub inner: S,
    armed: Arc<Mutex<Vec<&'static str>>>,
}

impl<S> Retried<S> {
    pub fn new(inner: S) -> Self {
        Self {
            inner,
            armed: Arc::default(),
        }
    }

    pub fn arm(&self, operation: &'static str) {
        self.armed.lock().expect("lock").push(operation);
    }

    fn take(&self, operation: &'static str) -> bool {
        let mut armed = self.armed.lock().expect("lock");
        match armed.iter().position(|o| *o == operation) {
            Some(i) => {
                armed.remove(i);
                true
            }
            None => false,
        }
    }
}

impl<S: IdempotencyStore> IdempotencyStore for Retried<S> {
    async fn claim(
        &self,
        record: &IdempotencyRecord,
        now: SystemTime,
        margin: Duration,
    ) -> Result<ClaimAttempt> {
        let first = self.inner.claim(record, now, margin).await?;
        if self.take("PutItem") && first == ClaimAttempt::Claimed {
            return self.inner.claim(record, now, margin).await;
        }
        Ok(first)
    }

    async fn complete(
        &self,
        key: &IdempotencyKey,
        token: &str,
        completion: &Completion,
    ) -> Result<FencedWrite> {
        let first = self.inner.complete(key, token, completion).await?;
        if self.take("UpdateItem") && first == FencedWrite::Written {
            return self.inner.complete(key, token, completion).await;
        }
        Ok(first)
    }

    async fn extend(
        &self,
        key: &IdempotencyKey,
        token: &str,
        until: u64,
        expiration: u64,
    ) -> Result<FencedWrite> {
        let first = self.inner.extend(key, token, until, expiration).await?;
        if self.take("UpdateItem") && first == FencedWrite::Written {
            return self.inner.extend(key, token, until, expiration).await;
        }
        Ok(first)
    }

    async fn release(&self, key: &IdempotencyKey, token: &str) -> Result<FencedWrite> {
        let first = self.inner.release(key, token).await?;
        if self.take("DeleteItem") && first == FencedWrite::Written {
            return self.inner.release(key, token).await;
        }
        Ok(first)
    }

    async fn get(&self, key: &IdempotencyKey) -> Result<Option<IdempotencyRecord>> {
        self.inner.get(key).await
    }

    async fn get_many(
        &self,
        keys: &[IdempotencyKey],
    ) -> Result<std::collections::HashMap<IdempotencyKey, IdempotencyRecord>> {
        self.inner.get_many(keys).await
    }

    async fn put_completed(
        &self,
        record: &IdempotencyRecord,
        now: SystemTime,
    ) -> Result<FencedWrite> {
        let first = self.inner.put_completed(record, now).await?;
        if self.take("PutItem") && first == FencedWrite::Written {
            return self.inner.put_completed(record, now).await;
        }
        Ok(first)
    }
}
