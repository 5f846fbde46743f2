//! Shared test fixtures: the testkit's moto-backed clients, deterministic clocks and tokens.
#![allow(dead_code, unused_imports, unreachable_pub, missing_docs)]

pub mod scenarios;

use std::sync::atomic::{AtomicU64, Ordering};

use sqsafe_idempotency::{Idempotency, IdempotencyBuilder, IdempotencyStore, ManualClock};
pub use sqsafe_testkit::{
    RequestCounter, create_table, dynamodb as dynamodb_client, unique_name as table_name,
};

/// 2027-01-15T08:00:00Z: far from any epoch edge.
pub const T0_MS: u64 = 1_800_000_000_000;

/// Tokens `tok-1`, `tok-2`, … in claim order.
pub fn counting_tokens() -> impl Fn() -> String + Send + Sync + 'static {
    let n = AtomicU64::new(0);
    move || format!("tok-{}", n.fetch_add(1, Ordering::SeqCst) + 1)
}

/// A builder with a manual clock at [`T0_MS`] and counting tokens.
pub fn builder<S: IdempotencyStore>(store: S, clock: &ManualClock) -> IdempotencyBuilder<S> {
    Idempotency::builder(store, "charge-payment", 1)
        .clock(clock.clone())
        .tokens(counting_tokens())
}
