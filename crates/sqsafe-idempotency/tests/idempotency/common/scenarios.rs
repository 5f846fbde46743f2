//! The state machine's behaviour, written once and run against every store: `dynamodb.rs` (moto server, the
//! proof) and `memory.rs` (the in-memory store, which must agree with it).
#![allow(dead_code, unreachable_pub, missing_docs)]

use std::sync::Arc;
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::{Duration, UNIX_EPOCH};

use serde_json::{Value, json};
use sqsafe_idempotency::{
    CacheConfig, Claim, Error, ErrorClass, Heartbeat, Idempotency, IdempotencyKey,
    IdempotencyStore, KeyBuilder, ManualClock, Outcome, ReplaySource, Replayed, RunError, Status,
    StoredResult,
};

use super::{RequestCounter, T0_MS, builder};

pub struct Fixture<S> {
    pub store: S,
    pub requests: Requests,
    /// Makes the next write of an operation (`PutItem`, `UpdateItem`, `DeleteItem`) land and lose its answer, so
    /// that it is retried against its own result.
    pub lose_answer: Box<dyn Fn(&'static str) + Send + Sync>,
}

/// The store's requests, when they can be counted (DynamoDB); budgets are asserted only then.
pub struct Requests(pub Option<RequestCounter>);

impl Requests {
    /// Operation names sent since the last call, or `None` for a store that sends none.
    fn sent(&self) -> Option<Vec<String>> {
        self.0.as_ref().map(RequestCounter::take)
    }

    /// Forgets what was sent so far.
    fn take_all(&self) {
        let _ = self.sent();
    }

    fn assert_sent(&self, expected: &[&str], what: &str) {
        if let Some(sent) = self.sent() {
            assert_eq!(sent, expected, "requests sent for {what}");
        }
    }
}

pub fn key(id: &str) -> IdempotencyKey {
    KeyBuilder::new("charge-payment", 1)
        .tenant("acme")
        .intent("payment", id)
        .build()
        .expect("key")
}

pub fn payment(id: &str, amount: u64) -> Value {
    json!({ "payment_id": id, "amount": amount, "currency": "EUR" })
}

/// Runs a charge whose effect counts itself and returns `ch_<n>`.
async fn charge<S: IdempotencyStore>(
    idem: &Idempotency<S>,
    id: &str,
    amount: u64,
    effects: &AtomicU32,
) -> Result<Outcome<String>, RunError<String>> {
    idem.run(key(id), &payment(id, amount), || async {
        let n = effects.fetch_add(1, Ordering::SeqCst) + 1;
        Ok::<_, String>(format!("ch_{n}"))
    })
    .await
}

fn idempotency_error<T: std::fmt::Debug>(r: Result<T, RunError<String>>) -> Error {
    match r {
        Err(RunError::Idempotency(e)) => e,
        other => panic!("expected an idempotency error, got {other:?}"),
    }
}

pub async fn fresh_key_runs_once_then_replays<S: IdempotencyStore>(fx: Fixture<S>) {
    let clock = ManualClock::at_millis(T0_MS);
    let idem = builder(fx.store, &clock).build().expect("config");
    let effects = AtomicU32::new(0);
    let request = idem
        .request(key("p-1"), &payment("p-1", 100))
        .expect("request")
        .attempt(2)
        .correlation_id("corr-1");
    fx.requests.assert_sent(&[], "building a request");

    let first = idem
        .execute(&request, || async {
            Ok::<_, String>(format!("ch_{}", effects.fetch_add(1, Ordering::SeqCst) + 1))
        })
        .await
        .expect("first delivery");
    assert_eq!(first, Outcome::Executed("ch_1".to_owned()));
    fx.requests.assert_sent(
        &["PutItem", "UpdateItem"],
        "a fresh key (claim + complete, no read)",
    );

    for _ in 0..2 {
        let again = charge(&idem, "p-1", 100, &effects)
            .await
            .expect("duplicate");
        assert_eq!(
            again,
            Outcome::Replayed {
                result: Replayed::Value("ch_1".to_owned()),
                source: ReplaySource::Store
            }
        );
        fx.requests.assert_sent(
            &["PutItem"],
            "a completed duplicate (one conditional write, no read)",
        );
    }
    assert_eq!(effects.load(Ordering::SeqCst), 1, "the effect ran once");

    let record = idem
        .store()
        .get(&key("p-1"))
        .await
        .expect("get")
        .expect("record exists");
    assert_eq!(record.status, Status::Completed);
    assert_eq!(
        record.result,
        Some(StoredResult::Json("\"ch_1\"".to_owned()))
    );
    assert_eq!(
        record.expiration,
        T0_MS / 1000 + 30 * 24 * 3600,
        "default window: 30 days"
    );
    assert_eq!(
        record.lease_expires_at, None,
        "a completed record has no lease"
    );
    assert_eq!(record.fingerprint, *request.fingerprint());
    assert_eq!(
        (record.consumer.as_str(), record.consumer_version),
        ("charge-payment", 1)
    );
    assert_eq!(record.attempt, 2);
    assert_eq!(record.created_at, T0_MS);
    assert_eq!(record.correlation_id.as_deref(), Some("corr-1"));
    assert_eq!(record.token, "tok-1");
}

pub async fn live_in_progress_is_refused_as_transient<S: IdempotencyStore>(fx: Fixture<S>) {
    let clock = ManualClock::at_millis(T0_MS);
    let idem = builder(fx.store, &clock).build().expect("config");
    let deadline = UNIX_EPOCH + Duration::from_millis(T0_MS + 30_000);
    let request = idem
        .request(key("p-2"), &payment("p-2", 100))
        .expect("request")
        .deadline(deadline);
    let Ok(Claim::Acquired(_held)) = idem.claim::<String>(&request).await else {
        panic!("first claim acquires")
    };
    let record = idem
        .store()
        .get(&key("p-2"))
        .await
        .expect("get")
        .expect("record");
    assert_eq!(record.status, Status::InProgress);
    assert_eq!(
        record.lease_expires_at,
        Some(T0_MS + 30_000),
        "lease ends at the Lambda deadline"
    );
    fx.requests.sent();

    let effects = AtomicU32::new(0);
    clock.advance(Duration::from_secs(30)); // exactly at the lease end: still held
    let err = idempotency_error(charge(&idem, "p-2", 100, &effects).await);
    assert!(err.is_in_progress(), "{err}");
    assert_eq!(err.class(), ErrorClass::Transient);
    assert!(err.is_retryable());
    match err {
        Error::InProgress {
            lease_expires_at, ..
        } => {
            assert_eq!(
                lease_expires_at, deadline,
                "the error says when the key may be taken over"
            );
        }
        other => panic!("{other}"),
    }
    assert_eq!(
        effects.load(Ordering::SeqCst),
        0,
        "no effect while another attempt holds the key"
    );
    fx.requests
        .assert_sent(&["PutItem"], "a refused claim (no read)");
}

pub async fn stale_in_progress_is_taken_over<S: IdempotencyStore>(fx: Fixture<S>) {
    let clock = ManualClock::at_millis(T0_MS);
    let idem = builder(fx.store, &clock)
        .default_lease(Duration::from_secs(5))
        .build()
        .expect("config");
    let request = idem
        .request(key("p-3"), &payment("p-3", 100))
        .expect("request");
    // The first attempt claims and "crashes": its guard is dropped without completing or releasing.
    let Ok(Claim::Acquired(crashed)) = idem.claim::<String>(&request).await else {
        panic!("claim")
    };
    drop(crashed);

    clock.advance(Duration::from_millis(5_001));
    let effects = AtomicU32::new(0);
    let taken = charge(&idem, "p-3", 100, &effects).await.expect("takeover");
    assert_eq!(taken, Outcome::Executed("ch_1".to_owned()));
    let record = idem
        .store()
        .get(&key("p-3"))
        .await
        .expect("get")
        .expect("record");
    assert_eq!(
        (record.status, record.token.as_str()),
        (Status::Completed, "tok-2")
    );
}

pub async fn lease_follows_the_deadline_but_never_below_the_minimum<S: IdempotencyStore>(
    fx: Fixture<S>,
) {
    let clock = ManualClock::at_millis(T0_MS);
    let idem = builder(fx.store, &clock)
        .min_lease(Duration::from_secs(2))
        .build()
        .expect("config");
    let past = UNIX_EPOCH + Duration::from_millis(T0_MS - 10_000);
    let request = idem
        .request(key("p-4"), &payment("p-4", 1))
        .expect("request")
        .deadline(past);
    let Ok(Claim::Acquired(_g)) = idem.claim::<String>(&request).await else {
        panic!("claim")
    };
    let record = idem
        .store()
        .get(&key("p-4"))
        .await
        .expect("get")
        .expect("record");
    assert_eq!(
        record.lease_expires_at,
        Some(T0_MS + 2_000),
        "a past deadline still gets the minimum lease"
    );
}

pub async fn expired_completed_record_runs_again<S: IdempotencyStore>(fx: Fixture<S>) {
    let clock = ManualClock::at_millis(T0_MS);
    let idem = builder(fx.store, &clock)
        .idempotency_window(Duration::from_secs(3600))
        .build()
        .expect("config");
    let effects = AtomicU32::new(0);
    charge(&idem, "p-5", 100, &effects).await.expect("first");

    clock.advance(Duration::from_secs(3600)); // the last second of the window: still a duplicate
    assert!(
        !charge(&idem, "p-5", 100, &effects)
            .await
            .expect("replay")
            .is_executed()
    );
    fx.requests.sent();

    clock.advance(Duration::from_secs(1)); // past the window; the item is still there (TTL deletion lags)
    assert!(
        idem.store().get(&key("p-5")).await.expect("get").is_some(),
        "item still present"
    );
    fx.requests.sent();
    let again = charge(&idem, "p-5", 100, &effects)
        .await
        .expect("after expiry");
    assert_eq!(again, Outcome::Executed("ch_2".to_owned()));
    fx.requests
        .assert_sent(&["PutItem", "UpdateItem"], "re-claiming an expired record");
    assert_eq!(effects.load(Ordering::SeqCst), 2);
}

pub async fn mismatch_is_refused_without_effect<S: IdempotencyStore>(fx: Fixture<S>) {
    let clock = ManualClock::at_millis(T0_MS);
    let idem = builder(fx.store, &clock).build().expect("config");
    let effects = AtomicU32::new(0);
    charge(&idem, "p-6", 100, &effects).await.expect("first");
    let stored = idem
        .store()
        .get(&key("p-6"))
        .await
        .expect("get")
        .expect("record");

    let err = idempotency_error(charge(&idem, "p-6", 999, &effects).await);
    assert!(err.is_payload_mismatch(), "{err}");
    assert_eq!(err.class(), ErrorClass::Permanent);
    assert!(
        err.to_string().contains(key("p-6").as_str()),
        "the error names the key: {err}"
    );
    assert_eq!(effects.load(Ordering::SeqCst), 1, "no second effect");
    let after = idem
        .store()
        .get(&key("p-6"))
        .await
        .expect("get")
        .expect("record");
    assert_eq!(after, stored, "the record is untouched");

    // Also while the first attempt is still in progress.
    let request = idem
        .request(key("p-7"), &payment("p-7", 1))
        .expect("request");
    let Ok(Claim::Acquired(_held)) = idem.claim::<String>(&request).await else {
        panic!("claim")
    };
    let err = idempotency_error(charge(&idem, "p-7", 2, &effects).await);
    assert!(err.is_payload_mismatch(), "{err}");
}

pub async fn failed_effect_releases_the_key<S: IdempotencyStore>(fx: Fixture<S>) {
    let clock = ManualClock::at_millis(T0_MS);
    let idem = builder(fx.store, &clock).build().expect("config");
    fx.requests.sent();
    let failed = idem
        .run(key("p-8"), &payment("p-8", 100), || async {
            Err::<String, _>("downstream 503".to_owned())
        })
        .await;
    assert!(
        matches!(failed, Err(RunError::Effect(ref e)) if e == "downstream 503"),
        "{failed:?}"
    );
    fx.requests
        .assert_sent(&["PutItem", "DeleteItem"], "claim + release");
    assert_eq!(
        idem.store().get(&key("p-8")).await.expect("get"),
        None,
        "released"
    );

    let effects = AtomicU32::new(0);
    let retry = charge(&idem, "p-8", 100, &effects).await.expect("retry");
    assert_eq!(
        retry,
        Outcome::Executed("ch_1".to_owned()),
        "the retry runs at once, no lease to wait for"
    );
}

pub async fn panicking_effect_releases_the_key<S: IdempotencyStore + Clone>(fx: Fixture<S>) {
    let clock = ManualClock::at_millis(T0_MS);
    let idem = builder(fx.store, &clock).build().expect("config");
    let panicking = idem.clone();
    let joined = tokio::spawn(async move {
        panicking
            .run(key("p-9"), &payment("p-9", 1), || async {
                if T0_MS > 0 {
                    panic!("effect blew up");
                }
                Ok::<String, String>(String::new())
            })
            .await
    })
    .await;
    assert!(joined.expect_err("the panic resumes").is_panic());
    assert_eq!(
        idem.store().get(&key("p-9")).await.expect("get"),
        None,
        "released despite the panic"
    );
}

/// A claims, its lease passes, B takes over: A's late writes must not touch B's record.
async fn late_and_owner<S: IdempotencyStore>(
    idem: &Idempotency<S>,
    clock: &ManualClock,
    id: &str,
) -> (sqsafe_idempotency::Guard<S>, sqsafe_idempotency::Guard<S>) {
    let request = idem.request(key(id), &payment(id, 100)).expect("request");
    let Ok(Claim::Acquired(late)) = idem.claim::<String>(&request).await else {
        panic!("A claims")
    };
    clock.advance(Duration::from_secs(6));
    let Ok(Claim::Acquired(owner)) = idem.claim::<String>(&request).await else {
        panic!("B takes over")
    };
    (late, owner)
}

pub async fn fencing_stops_a_late_complete_and_extend<S: IdempotencyStore>(fx: Fixture<S>) {
    let clock = ManualClock::at_millis(T0_MS);
    let idem = builder(fx.store, &clock)
        .default_lease(Duration::from_secs(5))
        .build()
        .expect("config");
    let (late, owner) = late_and_owner(&idem, &clock, "p-10").await;
    let owned = idem
        .store()
        .get(&key("p-10"))
        .await
        .expect("get")
        .expect("record");
    assert_eq!(owned.token, "tok-2");

    assert!(matches!(
        late.extend(Duration::from_secs(60)).await,
        Err(Error::LeaseLost { .. })
    ));
    let err = late
        .complete(&"late result")
        .await
        .expect_err("A cannot complete");
    assert!(matches!(err, Error::LeaseLost { .. }), "{err}");
    assert!(err.is_retryable());
    assert_eq!(
        idem.store()
            .get(&key("p-10"))
            .await
            .expect("get")
            .expect("record"),
        owned,
        "B's record untouched"
    );

    owner
        .extend(Duration::from_secs(60))
        .await
        .expect("the owner can extend");
    owner.complete(&"ch_b").await.expect("the owner completes");
    let effects = AtomicU32::new(0);
    let replay = charge(&idem, "p-10", 100, &effects).await.expect("replay");
    assert_eq!(
        replay.into_value().as_deref(),
        Some("ch_b"),
        "B's result is the one kept"
    );
}

pub async fn fencing_stops_a_late_release<S: IdempotencyStore>(fx: Fixture<S>) {
    let clock = ManualClock::at_millis(T0_MS);
    let idem = builder(fx.store, &clock)
        .default_lease(Duration::from_secs(5))
        .build()
        .expect("config");
    let (late, owner) = late_and_owner(&idem, &clock, "p-11").await;
    let owned = idem
        .store()
        .get(&key("p-11"))
        .await
        .expect("get")
        .expect("record");
    assert!(matches!(late.release().await, Err(Error::LeaseLost { .. })));
    assert_eq!(
        idem.store()
            .get(&key("p-11"))
            .await
            .expect("get")
            .expect("record"),
        owned,
        "not deleted"
    );
    owner.release().await.expect("the owner can release");
    assert_eq!(idem.store().get(&key("p-11")).await.expect("get"), None);
}

pub async fn concurrent_claims_have_one_winner<S: IdempotencyStore + Clone>(fx: Fixture<S>) {
    let clock = ManualClock::at_millis(T0_MS);
    let idem = builder(fx.store, &clock).build().expect("config");
    let request = Arc::new(
        idem.request(key("p-12"), &payment("p-12", 100))
            .expect("request"),
    );
    let barrier = Arc::new(tokio::sync::Barrier::new(20));
    let tasks: Vec<_> = (0..20)
        .map(|_| {
            let (idem, request, barrier) =
                (idem.clone(), Arc::clone(&request), Arc::clone(&barrier));
            tokio::spawn(async move {
                barrier.wait().await;
                idem.claim::<String>(&request).await
            })
        })
        .collect();
    let mut winners = Vec::new();
    let mut in_progress = 0;
    for task in tasks {
        match task.await.expect("task") {
            Ok(Claim::Acquired(guard)) => winners.push(guard),
            Ok(Claim::Replay { .. }) => panic!("nothing completed yet"),
            Err(e) if e.is_in_progress() => in_progress += 1,
            Err(e) => panic!("unexpected error: {e}"),
        }
    }
    assert_eq!((winners.len(), in_progress), (1, 19), "exactly one winner");
    // The stored record is the winner's: only the winner can complete it.
    winners
        .pop()
        .expect("one")
        .complete(&"ch_1")
        .await
        .expect("the winner completes");
    let record = idem
        .store()
        .get(&key("p-12"))
        .await
        .expect("get")
        .expect("record");
    assert_eq!(record.status, Status::Completed);
}

pub async fn oversized_result_is_kept_as_a_digest<S: IdempotencyStore>(fx: Fixture<S>) {
    let clock = ManualClock::at_millis(T0_MS);
    let idem = builder(fx.store, &clock)
        .max_result_bytes(100)
        .build()
        .expect("config");
    let big = "x".repeat(1_000);
    let first = idem
        .run(key("p-13"), &payment("p-13", 1), || async {
            Ok::<_, String>(big.clone())
        })
        .await
        .expect("first");
    assert_eq!(
        first,
        Outcome::Executed(big.clone()),
        "this call still gets its value"
    );
    let record = idem
        .store()
        .get(&key("p-13"))
        .await
        .expect("get")
        .expect("record");
    let json = serde_json::to_string(&big).expect("json");
    let Some(StoredResult::Omitted { digest, size }) = record.result else {
        panic!("digest only: {:?}", record.result)
    };
    assert_eq!(size, json.len() as u64);
    assert_eq!(digest.len(), 64);

    let effects = AtomicU32::new(0);
    let replay = idem
        .run(key("p-13"), &payment("p-13", 1), || async {
            effects.fetch_add(1, Ordering::SeqCst);
            Ok::<String, String>(String::new())
        })
        .await
        .expect("replay");
    assert_eq!(
        replay,
        Outcome::Replayed {
            result: Replayed::Omitted { digest, size },
            source: ReplaySource::Store
        }
    );
    assert_eq!(effects.load(Ordering::SeqCst), 0);
}

pub async fn cache_answers_completed_duplicates_without_requests<S: IdempotencyStore>(
    fx: Fixture<S>,
) {
    let clock = ManualClock::at_millis(T0_MS);
    let cache = CacheConfig {
        max_entries: 100,
        ttl: Duration::from_secs(60),
        ..CacheConfig::default()
    };
    let idem = builder(fx.store, &clock)
        .cache(cache)
        .build()
        .expect("config");
    let effects = AtomicU32::new(0);
    charge(&idem, "p-14", 100, &effects).await.expect("first");
    fx.requests.sent();

    let hit = charge(&idem, "p-14", 100, &effects)
        .await
        .expect("cache hit");
    assert_eq!(
        hit,
        Outcome::Replayed {
            result: Replayed::Value("ch_1".to_owned()),
            source: ReplaySource::Cache
        }
    );
    fx.requests.assert_sent(&[], "a cache hit");

    let err = idempotency_error(charge(&idem, "p-14", 5, &effects).await);
    assert!(
        err.is_payload_mismatch(),
        "the cache checks the fingerprint: {err}"
    );
    fx.requests
        .assert_sent(&[], "a mismatch answered from cache");

    clock.advance(Duration::from_secs(61));
    let from_store = charge(&idem, "p-14", 100, &effects)
        .await
        .expect("store replay");
    assert_eq!(
        from_store,
        Outcome::Replayed {
            result: Replayed::Value("ch_1".to_owned()),
            source: ReplaySource::Store
        },
        "the cache window passed"
    );
    fx.requests
        .assert_sent(&["PutItem"], "after the cache window");
    assert_eq!(effects.load(Ordering::SeqCst), 1);

    // In-progress keys are never cached: a held key is asked of the store every time.
    let request = idem
        .request(key("p-15"), &payment("p-15", 1))
        .expect("request");
    let Ok(Claim::Acquired(_held)) = idem.claim::<String>(&request).await else {
        panic!("claim")
    };
    fx.requests.sent();
    for _ in 0..2 {
        assert!(idempotency_error(charge(&idem, "p-15", 1, &effects).await).is_in_progress());
        fx.requests
            .assert_sent(&["PutItem"], "an in-progress key, never from cache");
    }
}

pub async fn extend_moves_the_lease<S: IdempotencyStore>(fx: Fixture<S>) {
    let clock = ManualClock::at_millis(T0_MS);
    let idem = builder(fx.store, &clock)
        .default_lease(Duration::from_secs(5))
        .build()
        .expect("config");
    let request = idem
        .request(key("p-16"), &payment("p-16", 1))
        .expect("request");
    let Ok(Claim::Acquired(guard)) = idem.claim::<String>(&request).await else {
        panic!("claim")
    };
    clock.advance(Duration::from_secs(4));
    guard.extend(Duration::from_secs(10)).await.expect("extend");
    let record = idem
        .store()
        .get(&key("p-16"))
        .await
        .expect("get")
        .expect("record");
    assert_eq!(record.lease_expires_at, Some(T0_MS + 14_000));
    clock.advance(Duration::from_secs(5)); // past the first lease, inside the extended one
    let effects = AtomicU32::new(0);
    assert!(idempotency_error(charge(&idem, "p-16", 1, &effects).await).is_in_progress());
}

/// The SDK retried a claim whose first try landed: the retry meets a record with this attempt's own token. That is
/// this attempt's claim, not another one in progress.
pub async fn a_retried_claim_that_meets_its_own_record_owns_the_key<S: IdempotencyStore>(
    fx: Fixture<S>,
) {
    let clock = ManualClock::at_millis(T0_MS);
    let idem = builder(fx.store, &clock).build().expect("config");
    (fx.lose_answer)("PutItem");
    let effects = AtomicU32::new(0);
    let outcome = charge(&idem, "p-20", 100, &effects)
        .await
        .expect("the claim is ours: no InProgress against itself");
    assert_eq!(outcome, Outcome::Executed("ch_1".to_owned()));
    assert_eq!(effects.load(Ordering::SeqCst), 1);
    fx.requests.assert_sent(
        &["PutItem", "PutItem", "UpdateItem"],
        "the claim, its retry, the completion",
    );
    let record = idem
        .store()
        .get(&key("p-20"))
        .await
        .expect("get")
        .expect("record");
    assert_eq!(
        (record.status, record.token.as_str()),
        (Status::Completed, "tok-1")
    );
}

/// A retried completion whose first try landed finds the key completed under its own token: success, not LeaseLost
/// (which would send a message whose effect is done to the DLQ on its last attempt).
pub async fn a_retried_completion_that_finds_its_own_result_succeeds<S: IdempotencyStore>(
    fx: Fixture<S>,
) {
    let clock = ManualClock::at_millis(T0_MS);
    let idem = builder(fx.store, &clock).build().expect("config");
    (fx.lose_answer)("UpdateItem");
    let effects = AtomicU32::new(0);
    let outcome = charge(&idem, "p-21", 100, &effects)
        .await
        .expect("a completion that landed is a success");
    assert_eq!(outcome, Outcome::Executed("ch_1".to_owned()));
    fx.requests.assert_sent(
        &["PutItem", "UpdateItem", "UpdateItem"],
        "the claim, the completion, its retry",
    );
    let again = charge(&idem, "p-21", 100, &effects)
        .await
        .expect("duplicate");
    assert_eq!(again.into_value().as_deref(), Some("ch_1"));
    assert_eq!(effects.load(Ordering::SeqCst), 1, "the effect ran once");
}

/// A retried release whose first try landed finds nothing: the key is released.
pub async fn a_retried_release_that_finds_nothing_succeeds<S: IdempotencyStore>(fx: Fixture<S>) {
    let clock = ManualClock::at_millis(T0_MS);
    let idem = builder(fx.store, &clock).build().expect("config");
    let request = idem
        .request(key("p-22"), &payment("p-22", 100))
        .expect("request");
    let Ok(Claim::Acquired(guard)) = idem.claim::<String>(&request).await else {
        panic!("claim")
    };
    (fx.lose_answer)("DeleteItem");
    guard
        .release()
        .await
        .expect("a release that landed is a success");
    assert_eq!(idem.store().get(&key("p-22")).await.expect("get"), None);
}

/// Extending is idempotent and never shortens a lease: a retried extension that finds its own lease succeeds, and a
/// shorter lease (a late or short heartbeat) leaves the longer one in place.
pub async fn extend_never_shortens_a_lease_and_a_retried_extend_succeeds<S: IdempotencyStore>(
    fx: Fixture<S>,
) {
    let clock = ManualClock::at_millis(T0_MS);
    let idem = builder(fx.store, &clock)
        .default_lease(Duration::from_secs(60))
        .build()
        .expect("config");
    let request = idem
        .request(key("p-23"), &payment("p-23", 100))
        .expect("request");
    let Ok(Claim::Acquired(guard)) = idem.claim::<String>(&request).await else {
        panic!("claim")
    };
    let lease = || async {
        idem.store()
            .get(&key("p-23"))
            .await
            .expect("get")
            .expect("record")
            .lease_expires_at
    };
    (fx.lose_answer)("UpdateItem");
    guard
        .extend(Duration::from_secs(120))
        .await
        .expect("an extension that landed is a success");
    assert_eq!(lease().await, Some(T0_MS + 120_000));
    guard
        .extend(Duration::from_secs(10))
        .await
        .expect("a shorter lease is not an error");
    assert_eq!(
        lease().await,
        Some(T0_MS + 120_000),
        "the lease did not shrink"
    );
    clock.advance(Duration::from_secs(30));
    guard
        .extend(Duration::from_secs(120))
        .await
        .expect("a longer one moves it");
    assert_eq!(lease().await, Some(T0_MS + 150_000));
    guard.complete(&"ch").await.expect("complete");
}

/// Clock skew: an instance whose clock runs ahead sees a live lease as passed. It may take over only once the lease
/// passed by more than the takeover margin on its own clock; the loser's late completion is refused.
pub async fn takeover_waits_for_the_margin_so_a_fast_clock_cannot_steal_a_live_lease<
    S: IdempotencyStore + Clone,
>(
    fx: Fixture<S>,
) {
    let margin = Duration::from_secs(10);
    let clock_a = ManualClock::at_millis(T0_MS);
    let idem_a = builder(fx.store.clone(), &clock_a)
        .takeover_margin(margin)
        .build()
        .expect("config");
    let deadline = UNIX_EPOCH + Duration::from_millis(T0_MS + 30_000);
    let request = idem_a
        .request(key("p-24"), &payment("p-24", 100))
        .expect("request")
        .deadline(deadline);
    let Ok(Claim::Acquired(a)) = idem_a.claim::<String>(&request).await else {
        panic!("A claims")
    };

    // B's clock runs 35 s ahead of A's: on B's clock, A's lease passed 5 s ago. Within the margin: refused.
    let clock_b = ManualClock::at_millis(T0_MS + 35_000);
    let idem_b = builder(fx.store, &clock_b)
        .takeover_margin(margin)
        .tokens(|| "b-token".to_owned())
        .build()
        .expect("config");
    let err = match idem_b.claim::<String>(&request).await {
        Err(e) => e,
        Ok(other) => panic!("a live lease (within the margin) must not be taken over: {other:?}"),
    };
    match err {
        Error::InProgress {
            lease_expires_at, ..
        } => assert_eq!(
            lease_expires_at,
            deadline + margin,
            "the error says when the key can be taken over: lease end + margin"
        ),
        other => panic!("{other}"),
    }
    // Exactly at lease end + margin: still refused; 1 ms later: taken over.
    clock_b.set_millis(T0_MS + 40_000);
    assert!(idem_b.claim::<String>(&request).await.is_err());
    clock_b.set_millis(T0_MS + 40_001);
    let Ok(Claim::Acquired(b)) = idem_b.claim::<String>(&request).await else {
        panic!("B takes over once the lease passed by more than the margin")
    };
    let err = a.complete(&"late").await.expect_err("A lost the claim");
    assert!(err.is_lease_lost(), "{err}");
    b.complete(&"ch_b").await.expect("B completes");
}

/// A live claim with other content is a mismatch (permanent), not "in progress" (transient): the same key must
/// carry the same intent whatever state its record is in.
pub async fn a_live_claim_with_other_content_is_a_mismatch<S: IdempotencyStore>(fx: Fixture<S>) {
    let clock = ManualClock::at_millis(T0_MS);
    let idem = builder(fx.store, &clock).build().expect("config");
    let request = idem
        .request(key("p-25"), &payment("p-25", 100))
        .expect("request");
    let Ok(Claim::Acquired(_held)) = idem.claim::<String>(&request).await else {
        panic!("claim")
    };
    let effects = AtomicU32::new(0);
    let err = idempotency_error(charge(&idem, "p-25", 999, &effects).await);
    assert!(err.is_payload_mismatch(), "{err}");
    assert_eq!(err.class(), ErrorClass::Permanent);
    assert_eq!(effects.load(Ordering::SeqCst), 0);
}

/// Found by the model checker (crates/sqsafe-model, property 5): an attempt claims with one content and dies (its
/// effect may have run); once its lease has passed by the margin, a message of the same key with other content
/// must still be a payload mismatch, as the book's table says (book/src/how-it-works.md), not a takeover that runs the
/// other content's effect.
pub async fn a_passed_claim_with_other_content_is_a_mismatch_not_a_takeover<S: IdempotencyStore>(
    fx: Fixture<S>,
) {
    let clock = ManualClock::at_millis(T0_MS);
    let idem = builder(fx.store, &clock)
        .default_lease(Duration::from_secs(5))
        .takeover_margin(Duration::from_secs(1))
        .build()
        .expect("config");
    let request = idem
        .request(key("p-26"), &payment("p-26", 100))
        .expect("request");
    // The first attempt claims and "crashes" (between its effect and its completion, say).
    let Ok(Claim::Acquired(crashed)) = idem.claim::<String>(&request).await else {
        panic!("claim")
    };
    drop(crashed);

    clock.advance(Duration::from_millis(6_001));
    let effects = AtomicU32::new(0);
    let err = idempotency_error(charge(&idem, "p-26", 999, &effects).await);
    assert!(err.is_payload_mismatch(), "{err}");
    assert_eq!(err.class(), ErrorClass::Permanent);
    assert_eq!(effects.load(Ordering::SeqCst), 0);
    // The record is still the first content's, and the same content still takes it over.
    let taken = charge(&idem, "p-26", 100, &effects)
        .await
        .expect("takeover");
    assert_eq!(taken, Outcome::Executed("ch_1".to_owned()));
}

/// Found by the model checker (crates/sqsafe-model, property 6): an effect kept alive by a heartbeat can run past
/// the idempotency window the claim gave its record. Each extension must carry the record's expiry past the new
/// lease and the margin, or the record expires under a live lease and a duplicate takes the key over.
pub async fn an_extension_keeps_the_record_alive_past_its_lease<S: IdempotencyStore>(
    fx: Fixture<S>,
) {
    let clock = ManualClock::at_millis(T0_MS);
    // The shortest window the builder accepts with this heartbeat: its lease (2 s) plus the margin (1 s).
    let idem = builder(fx.store, &clock)
        .default_lease(Duration::from_secs(1))
        .takeover_margin(Duration::from_secs(1))
        .heartbeat(Heartbeat {
            every: Duration::from_secs(1),
            lease: Duration::from_secs(2),
        })
        .idempotency_window(Duration::from_secs(3))
        .build()
        .expect("config");
    let request = idem
        .request(key("p-27"), &payment("p-27", 1))
        .expect("request");
    let Ok(Claim::Acquired(guard)) = idem.claim::<String>(&request).await else {
        panic!("claim")
    };
    // The effect runs on; its heartbeat extends the lease at 1 s, 2 s and 3 s: the lease now ends at 5 s.
    for _ in 0..3 {
        clock.advance(Duration::from_secs(1));
        guard.extend(Duration::from_secs(2)).await.expect("extend");
    }
    let record = idem
        .store()
        .get(&key("p-27"))
        .await
        .expect("get")
        .expect("record");
    let lease = record.lease_expires_at.expect("lease");
    assert_eq!(lease, T0_MS + 5_000);
    assert!(
        record.expiration * 1_000 >= lease + 1_000,
        "expires at {} s, before the lease ({lease} ms) and the margin",
        record.expiration
    );
    // At 4.5 s the lease is live: a duplicate must wait, not take over an expired record.
    clock.advance(Duration::from_millis(1_500));
    let effects = AtomicU32::new(0);
    let err = idempotency_error(charge(&idem, "p-27", 1, &effects).await);
    assert!(err.is_in_progress(), "{err}");
    assert_eq!(effects.load(Ordering::SeqCst), 0);
}

/// A completed record of `id` with `fp` and `result`, written by the keyed mode's attempt `token`.
fn completed(
    id: &str,
    fp: &str,
    token: &str,
    expiration: u64,
) -> sqsafe_idempotency::IdempotencyRecord {
    sqsafe_idempotency::IdempotencyRecord {
        key: key(id),
        status: Status::Completed,
        expiration,
        lease_expires_at: None,
        token: token.to_owned(),
        fingerprint: sqsafe_idempotency::Fingerprint::from_stored(fp),
        result: Some(StoredResult::Json(format!("\"ch_{token}\""))),
        consumer: "charge-payment".to_owned(),
        consumer_version: 1,
        attempt: 1,
        created_at: T0_MS,
        correlation_id: None,
    }
}

/// The keyed mode's primitives: one read for a whole batch (a key given twice read once, a key without a record
/// absent), and one conditional put of the completed record. It lands on nothing, on an expired record and on an
/// older attempt's in-progress claim of the same content; it is refused by a live completed record (the same
/// content: a replay, also for its own retry whose first try landed; other content: a mismatch) and by a live claim
/// of other content (a mismatch).
pub async fn keyed_completions_land_once_and_what_refuses_them_says_replay_or_mismatch<
    S: IdempotencyStore,
>(
    fx: Fixture<S>,
) {
    use sqsafe_idempotency::protocol::{self, ClaimRefused};
    use sqsafe_idempotency::{FencedWrite, IdempotencyRecord};
    let now = UNIX_EPOCH + Duration::from_millis(T0_MS);
    let live = T0_MS / 1000 + 3600;
    let judge = |write: FencedWrite, mine: &IdempotencyRecord| match write {
        FencedWrite::Written => None,
        FencedWrite::Refused(Some(old)) => Some(protocol::keyed_completion_refused(
            &old.seen_by(&mine.token, &mine.fingerprint),
            T0_MS,
        )),
        FencedWrite::Refused(None) => panic!("refused with no old record"),
    };

    // Fresh: lands. Its retry (the answer lost) meets its own record: a replay.
    let first = completed("k-1", "fp-a", "t1", live);
    (fx.lose_answer)("PutItem");
    let retried = fx.store.put_completed(&first, now).await.expect("put");
    assert_eq!(
        judge(retried, &first),
        Some(ClaimRefused::Replay),
        "its own retry"
    );
    fx.requests
        .assert_sent(&["PutItem", "PutItem"], "a put and its retry");
    // Another delivery of the same content: a replay; of other content: a mismatch. Nothing overwritten.
    let again = completed("k-1", "fp-a", "t2", live);
    let write = fx.store.put_completed(&again, now).await.expect("put");
    assert_eq!(judge(write, &again), Some(ClaimRefused::Replay));
    let other = completed("k-1", "fp-b", "t3", live);
    let write = fx.store.put_completed(&other, now).await.expect("put");
    assert_eq!(judge(write, &other), Some(ClaimRefused::PayloadMismatch));
    fx.requests
        .assert_sent(&["PutItem", "PutItem"], "two refused puts");
    let stored = fx
        .store
        .get(&key("k-1"))
        .await
        .expect("get")
        .expect("record");
    assert_eq!(
        (stored.token.as_str(), stored.status),
        ("t1", Status::Completed)
    );

    // An older attempt's in-progress claim of the same content is completed over; of other content, refused.
    let mut claim = completed("k-2", "fp-a", "t4", live);
    claim.status = Status::InProgress;
    claim.result = None;
    claim.lease_expires_at = Some(T0_MS + 60_000);
    fx.store.put_completed(&claim, now).await.expect("seed");
    let over = completed("k-2", "fp-a", "t5", live);
    assert_eq!(
        judge(
            fx.store.put_completed(&over, now).await.expect("put"),
            &over
        ),
        None
    );
    let mut foreign = claim.clone();
    foreign.key = key("k-3");
    foreign.fingerprint = sqsafe_idempotency::Fingerprint::from_stored("fp-b");
    fx.store.put_completed(&foreign, now).await.expect("seed");
    let mine = completed("k-3", "fp-a", "t6", live);
    let write = fx.store.put_completed(&mine, now).await.expect("put");
    assert_eq!(judge(write, &mine), Some(ClaimRefused::PayloadMismatch));
    // An expired completed record of other content no longer counts.
    let stale = completed("k-4", "fp-b", "t7", T0_MS / 1000 - 1);
    fx.store.put_completed(&stale, now).await.expect("seed");
    let fresh = completed("k-4", "fp-a", "t8", live);
    assert_eq!(
        judge(
            fx.store.put_completed(&fresh, now).await.expect("put"),
            &fresh
        ),
        None
    );
    fx.requests.take_all();

    // One read for the batch: k-1 twice, k-2, k-9 (no record).
    let read = fx
        .store
        .get_many(&[key("k-1"), key("k-2"), key("k-1"), key("k-9")])
        .await
        .expect("get_many");
    fx.requests
        .assert_sent(&["BatchGetItem"], "one read for the batch");
    let mut found: Vec<(String, String)> = read
        .iter()
        .map(|(k, r)| (k.as_str().to_owned(), r.token.clone()))
        .collect();
    found.sort();
    assert_eq!(
        found,
        [
            (key("k-1").as_str().to_owned(), "t1".to_owned()),
            (key("k-2").as_str().to_owned(), "t5".to_owned()),
        ]
    );
    assert_eq!(read[&key("k-1")].result, first.result, "read as stored");
}

/// Runs a keyed charge of `id` with the record `read` found: the effect counts itself and returns `ch_<n>`.
async fn keyed_charge<S: IdempotencyStore>(
    idem: &Idempotency<S>,
    read: &std::collections::HashMap<IdempotencyKey, sqsafe_idempotency::IdempotencyRecord>,
    id: &str,
    amount: u64,
    effects: &AtomicU32,
) -> Result<Outcome<String>, RunError<String>> {
    let request = idem
        .request(key(id), &payment(id, amount))
        .expect("request");
    idem.execute_keyed(&request, read.get(&key(id)), || async {
        let n = effects.fetch_add(1, Ordering::SeqCst) + 1;
        Ok::<_, String>(format!("ch_{n}"))
    })
    .await
}

/// The keyed mode end to end on the engine: a fresh intent costs the batch's read and one write; a duplicate that
/// arrives after the completion replays from the read with no write; other content is a mismatch before any effect;
/// a failed effect writes nothing; two deliveries that read before either completed both call, and the second
/// replays the first's result (the downstream key kept the call to one effect); a put whose answer was lost is
/// still this delivery's execution; an older claim of the same content is completed over.
pub async fn keyed_mode_reads_once_writes_once_and_replays_duplicates_without_a_write<
    S: IdempotencyStore,
>(
    fx: Fixture<S>,
) {
    let clock = ManualClock::at_millis(T0_MS);
    let idem = builder(fx.store, &clock).build().expect("config");
    let effects = AtomicU32::new(0);
    let read = |keys: Vec<IdempotencyKey>| {
        let idem = idem.clone();
        async move { idem.read_keyed(&keys, None).await.expect("read") }
    };

    // Fresh: one read for the batch, then one write per record.
    let batch = read(vec![key("k-1"), key("k-2")]).await;
    assert!(batch.is_empty(), "nothing stored yet: {batch:?}");
    fx.requests
        .assert_sent(&["BatchGetItem"], "the batch's read");
    let first = keyed_charge(&idem, &batch, "k-1", 100, &effects)
        .await
        .expect("fresh");
    assert_eq!(first, Outcome::Executed("ch_1".to_owned()));
    fx.requests
        .assert_sent(&["PutItem"], "a fresh keyed record");
    let stored = idem
        .store()
        .get(&key("k-1"))
        .await
        .expect("get")
        .expect("record");
    assert_eq!(stored.status, Status::Completed);
    assert_eq!(stored.lease_expires_at, None, "no lease in the keyed mode");
    assert_eq!(
        stored.result,
        Some(StoredResult::Json("\"ch_1\"".to_owned()))
    );
    fx.requests.take_all();

    // A duplicate after the completion: the read replays it, no write, no effect.
    let batch = read(vec![key("k-1")]).await;
    let dup = keyed_charge(&idem, &batch, "k-1", 100, &effects)
        .await
        .expect("duplicate");
    assert_eq!(
        dup,
        Outcome::Replayed {
            result: Replayed::Value("ch_1".to_owned()),
            source: ReplaySource::Store
        }
    );
    // Other content under the same key: a mismatch, before any effect.
    let err = idempotency_error(keyed_charge(&idem, &batch, "k-1", 5, &effects).await);
    assert!(err.is_payload_mismatch(), "{err}");
    fx.requests.assert_sent(
        &["BatchGetItem"],
        "a duplicate and a mismatch: the read alone",
    );
    assert_eq!(effects.load(Ordering::SeqCst), 1, "neither ran the effect");

    // A failed effect writes nothing: the message comes back and runs again.
    let empty = std::collections::HashMap::new();
    let request = idem
        .request(key("k-3"), &payment("k-3", 1))
        .expect("request");
    let failed = idem
        .execute_keyed(&request, None, || async {
            Err::<String, _>("payments API down".to_owned())
        })
        .await;
    assert!(matches!(failed, Err(RunError::Effect(_))), "{failed:?}");
    fx.requests.assert_sent(&[], "a failed keyed effect");
    assert_eq!(idem.store().get(&key("k-3")).await.expect("get"), None);
    fx.requests.take_all();

    // Two deliveries read before either completed: both call (the downstream key keeps it to one effect there); the
    // second's put is refused and it replays the first's stored result. With other content, a mismatch.
    let a = keyed_charge(&idem, &empty, "k-4", 100, &effects)
        .await
        .expect("a");
    assert_eq!(a, Outcome::Executed("ch_2".to_owned()));
    let b = keyed_charge(&idem, &empty, "k-4", 100, &effects)
        .await
        .expect("b");
    assert_eq!(
        b,
        Outcome::Replayed {
            result: Replayed::Value("ch_2".to_owned()),
            source: ReplaySource::Store
        },
        "the concurrent delivery's result, not its own call's ch_3"
    );
    let err = idempotency_error(keyed_charge(&idem, &empty, "k-4", 7, &effects).await);
    assert!(err.is_payload_mismatch(), "{err}");
    fx.requests
        .assert_sent(&["PutItem", "PutItem", "PutItem"], "three keyed puts");

    // A put that landed but lost its answer: its retry meets its own record, and the delivery executed.
    (fx.lose_answer)("PutItem");
    let lost = keyed_charge(&idem, &empty, "k-5", 100, &effects)
        .await
        .expect("lost answer");
    assert_eq!(lost, Outcome::Executed("ch_5".to_owned()));
    fx.requests
        .assert_sent(&["PutItem", "PutItem"], "a put and its retry");

    // An older claim of the same content (the claim mode's, its owner gone) is completed over.
    let claimed = idem
        .claim::<String>(
            &idem
                .request(key("k-6"), &payment("k-6", 100))
                .expect("request"),
        )
        .await
        .expect("claim");
    let Claim::Acquired(guard) = claimed else {
        panic!("fresh key")
    };
    let batch = read(vec![key("k-6")]).await;
    assert_eq!(batch[&key("k-6")].status, Status::InProgress);
    let over = keyed_charge(&idem, &batch, "k-6", 100, &effects)
        .await
        .expect("over a claim");
    assert_eq!(over, Outcome::Executed("ch_6".to_owned()));
    let late = guard
        .complete(&"ch_late".to_owned())
        .await
        .expect_err("fenced");
    assert!(late.is_lease_lost(), "{late}");
    let stored = idem
        .store()
        .get(&key("k-6"))
        .await
        .expect("get")
        .expect("record");
    assert_eq!(
        stored.result,
        Some(StoredResult::Json("\"ch_6\"".to_owned()))
    );

    // The record expires after the window: then the intent runs again (the downstream key's own window decides).
    clock.advance(idem.idempotency_window() + Duration::from_secs(2));
    let batch = read(vec![key("k-1")]).await;
    let again = keyed_charge(&idem, &batch, "k-1", 100, &effects)
        .await
        .expect("after the window");
    assert!(again.is_executed(), "{again:?}");
}

/// With the local cache, the keyed mode's duplicates of a completed key cost no request at all: the read skips the
/// key and the replay comes from the cache (the fingerprint checked there too).
pub async fn keyed_mode_skips_the_read_for_keys_the_cache_holds<S: IdempotencyStore>(
    fx: Fixture<S>,
) {
    let clock = ManualClock::at_millis(T0_MS);
    let cache = CacheConfig {
        max_entries: 100,
        ttl: Duration::from_secs(60),
        ..CacheConfig::default()
    };
    let idem = builder(fx.store, &clock)
        .cache(cache)
        .build()
        .expect("config");
    let effects = AtomicU32::new(0);
    let empty = std::collections::HashMap::new();
    keyed_charge(&idem, &empty, "c-1", 100, &effects)
        .await
        .expect("fresh");
    fx.requests.take_all();
    let batch = idem.read_keyed(&[key("c-1")], None).await.expect("read");
    assert_eq!(
        batch.get(&key("c-1")).map(|r| r.status),
        Some(Status::Completed),
        "the cache's answer is part of the read"
    );
    fx.requests.assert_sent(&[], "a read of a cached key");
    let hit = keyed_charge(&idem, &batch, "c-1", 100, &effects)
        .await
        .expect("hit");
    assert_eq!(
        hit,
        Outcome::Replayed {
            result: Replayed::Value("ch_1".to_owned()),
            source: ReplaySource::Cache
        }
    );
    let err = idempotency_error(keyed_charge(&idem, &batch, "c-1", 9, &effects).await);
    assert!(err.is_payload_mismatch(), "{err}");
    fx.requests.assert_sent(&[], "cache answers");
    assert_eq!(effects.load(Ordering::SeqCst), 1);

    // The cache lets the key go between the batch's read and a record's turn (its time-to-live ran out; moka may
    // also evict it): the read's answer still stands. The duplicate replays, other content is refused before the
    // call, and neither makes a request (issue 40, item 2: it ran the effect and wrote a refused put).
    let batch = idem.read_keyed(&[key("c-1")], None).await.expect("read");
    clock.advance(Duration::from_secs(61));
    let after = keyed_charge(&idem, &batch, "c-1", 100, &effects)
        .await
        .expect("after the cache let go");
    assert_eq!(
        after,
        Outcome::Replayed {
            result: Replayed::Value("ch_1".to_owned()),
            source: ReplaySource::Cache
        }
    );
    let batch = idem.read_keyed(&[key("c-1")], None).await.expect("read");
    clock.advance(Duration::from_secs(61));
    let err = idempotency_error(keyed_charge(&idem, &batch, "c-1", 9, &effects).await);
    assert!(err.is_payload_mismatch(), "{err}");
    fx.requests.assert_sent(&[], "the read's cached answers");
    assert_eq!(effects.load(Ordering::SeqCst), 1, "one effect");
}
