//! The same scenarios on the in-memory store, which must behave exactly like the DynamoDB one.

use sqsafe_idempotency::InMemoryStore;

use crate::common::Retried;
use crate::common::scenarios::{self, Fixture, Requests};

fn fixture() -> Fixture<Retried<InMemoryStore>> {
    let store = Retried::new(InMemoryStore::new());
    let arming = store.clone();
    Fixture {
        store,
        requests: Requests(None),
        lose_answer: Box::new(move |operation| arming.arm(operation)),
    }
}

macro_rules! in_memory {
    ($($name:ident),* $(,)?) => {$(
        #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
        async fn $name() {
            scenarios::$name(fixture()).await;
        }
    )*};
}

in_memory!(
    fresh_key_runs_once_then_replays,
    live_in_progress_is_refused_as_transient,
    stale_in_progress_is_taken_over,
    lease_follows_the_deadline_but_never_below_the_minimum,
    expired_completed_record_runs_again,
    mismatch_is_refused_without_effect,
    failed_effect_releases_the_key,
    panicking_effect_releases_the_key,
    fencing_stops_a_late_complete_and_extend,
    fencing_stops_a_late_release,
    concurrent_claims_have_one_winner,
    oversized_result_is_kept_as_a_digest,
    cache_answers_completed_duplicates_without_requests,
    extend_moves_the_lease,
    a_retried_claim_that_meets_its_own_record_owns_the_key,
    a_retried_completion_that_finds_its_own_result_succeeds,
    a_retried_release_that_finds_nothing_succeeds,
    extend_never_shortens_a_lease_and_a_retried_extend_succeeds,
    takeover_waits_for_the_margin_so_a_fast_clock_cannot_steal_a_live_lease,
    a_live_claim_with_other_content_is_a_mismatch,
    a_passed_claim_with_other_content_is_a_mismatch_not_a_takeover,
    an_extension_keeps_the_record_alive_past_its_lease,
    keyed_completions_land_once_and_what_refuses_them_says_replay_or_mismatch,
    keyed_mode_reads_once_writes_once_and_replays_duplicates_without_a_write,
    keyed_mode_skips_the_read_for_keys_the_cache_holds,
);

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use sqsafe_idempotency::{
    CacheConfig, Claim, Error, FingerprintFields, Heartbeat, Idempotency, IdempotencyBuilder,
    IdempotencyStore, ManualClock, Outcome, RunError,
};

use crate::common::T0_MS;
use crate::common::scenarios::{key, payment};

/// A clock that follows tokio's (paused) time, so the lease timestamps and the heartbeat's sleeps agree.
fn tokio_clock() -> impl Fn() -> SystemTime + Send + Sync + 'static {
    let start = tokio::time::Instant::now();
    move || UNIX_EPOCH + Duration::from_millis(T0_MS) + start.elapsed()
}

fn long_work(
    idem: &Idempotency<InMemoryStore>,
) -> tokio::task::JoinHandle<Result<Outcome<String>, RunError<String>>> {
    let idem = idem.clone();
    tokio::spawn(async move {
        idem.run(key("long"), &payment("long", 1), || async {
            tokio::time::sleep(Duration::from_secs(60)).await;
            Ok::<_, String>("done".to_owned())
        })
        .await
    })
}

#[tokio::test(start_paused = true)]
async fn heartbeat_keeps_a_long_effect_claimed() {
    let idem = Idempotency::builder(InMemoryStore::new(), "c", 1)
        .clock(tokio_clock())
        .default_lease(Duration::from_secs(15))
        .heartbeat(Heartbeat {
            every: Duration::from_secs(10),
            lease: Duration::from_secs(30),
        })
        .build()
        .expect("config");
    let long = long_work(&idem);
    tokio::time::sleep(Duration::from_secs(45)).await; // well past the first 15 s lease

    let duplicate = idem
        .run(key("long"), &payment("long", 1), || async {
            Ok::<_, String>("twice".to_owned())
        })
        .await;
    assert!(
        matches!(duplicate, Err(RunError::Idempotency(ref e)) if e.is_in_progress()),
        "{duplicate:?}"
    );
    let record = idem
        .store()
        .get(&key("long"))
        .await
        .expect("get")
        .expect("record");
    assert_eq!(
        record.lease_expires_at,
        Some(T0_MS + 40_000 + 30_000),
        "extended at 10, 20, 30, 40 s"
    );
    assert_eq!(
        long.await.expect("task").expect("run"),
        Outcome::Executed("done".to_owned())
    );
}

/// A beat runs beside the effect: a slow lease extension does not keep the effect's future from being polled, so an
/// effect that is done is completed at once, not after the beat's write.
#[tokio::test(start_paused = true)]
async fn a_slow_heartbeat_does_not_pause_the_effect() {
    let store = ThrottledCompletions {
        extend_hang: Duration::from_secs(5),
        ..ThrottledCompletions::failing(0)
    };
    let idem = Idempotency::builder(store, "c", 1)
        .clock(tokio_clock())
        .default_lease(Duration::from_secs(15))
        .heartbeat(Heartbeat {
            every: Duration::from_secs(1),
            lease: Duration::from_secs(30),
        })
        .build()
        .expect("config");
    let started = tokio::time::Instant::now();
    let outcome = idem
        .run(key("beat"), &payment("beat", 1), || async {
            tokio::time::sleep(Duration::from_millis(1_500)).await;
            Ok::<_, String>("done".to_owned())
        })
        .await
        .expect("run");
    assert_eq!(outcome, Outcome::Executed("done".to_owned()));
    let spent = started.elapsed();
    assert!(
        spent < Duration::from_secs(2),
        "the effect, done at 1.5 s, waited for the beat's 5 s write: {spent:?}"
    );
}

#[tokio::test(start_paused = true)]
async fn without_heartbeat_a_long_effect_loses_its_claim_and_cannot_complete() {
    let idem = Idempotency::builder(InMemoryStore::new(), "c", 1)
        .clock(tokio_clock())
        .default_lease(Duration::from_secs(15))
        .build()
        .expect("config");
    let long = long_work(&idem);
    tokio::time::sleep(Duration::from_secs(45)).await;
    let takeover = idem
        .run(key("long"), &payment("long", 1), || async {
            Ok::<_, String>("second".to_owned())
        })
        .await;
    assert_eq!(
        takeover.expect("takeover"),
        Outcome::Executed("second".to_owned())
    );
    let late = long.await.expect("task");
    assert!(
        matches!(late, Err(RunError::Idempotency(Error::LeaseLost { .. }))),
        "{late:?}"
    );
    let record = idem
        .store()
        .get(&key("long"))
        .await
        .expect("get")
        .expect("record");
    assert_eq!(
        record.result,
        Some(sqsafe_idempotency::StoredResult::Json("\"second\"".into()))
    );
}

fn base() -> IdempotencyBuilder<InMemoryStore> {
    Idempotency::builder(InMemoryStore::new(), "c", 1)
}

/// An IN_PROGRESS record must not expire before its lease (plus the takeover margin) ends, or a redelivery could
/// take over a live claim once the record is gone: a lease from a far deadline stretches the record's expiry.
#[tokio::test]
async fn an_in_progress_record_never_expires_before_its_lease_and_margin() {
    let clock = ManualClock::at_millis(T0_MS);
    let idem = Idempotency::builder(InMemoryStore::new(), "c", 1)
        .clock(clock.clone())
        .idempotency_window(Duration::from_secs(3_600))
        .build()
        .expect("config");
    let deadline = UNIX_EPOCH + Duration::from_millis(T0_MS + 7_200_000);
    let request = idem
        .request(key("far"), &payment("far", 1))
        .expect("request")
        .deadline(deadline);
    let Ok(Claim::Acquired(_guard)) = idem.claim::<String>(&request).await else {
        panic!("claimed")
    };
    let record = idem
        .store()
        .get(&key("far"))
        .await
        .expect("get")
        .expect("record");
    let lease_end_ms = record.lease_expires_at.expect("a lease");
    assert_eq!(lease_end_ms, T0_MS + 7_200_000);
    assert!(
        record.expiration * 1_000 >= lease_end_ms + 2_000,
        "expiry {} s is before the lease end {} ms plus the 2 s margin",
        record.expiration,
        lease_end_ms
    );
}

#[test]
fn builder_settings_are_validated_with_clear_errors() {
    let cases: Vec<(IdempotencyBuilder<InMemoryStore>, &str)> = vec![
        (
            Idempotency::builder(InMemoryStore::new(), "my consumer", 1),
            "consumer name",
        ),
        (
            base().idempotency_window(Duration::ZERO),
            "idempotency_window",
        ),
        (base().min_lease(Duration::ZERO), "leases must be positive"),
        (
            base().default_lease(Duration::from_millis(500)),
            "default_lease >= min_lease",
        ),
        (base().max_result_bytes(500 * 1024), "max_result_bytes"),
        (
            // The default lease (60 s) plus the takeover margin (2 s) outlive a 61 s window.
            base().idempotency_window(Duration::from_secs(61)),
            "at least the longest lease",
        ),
        (
            base()
                .idempotency_window(Duration::from_secs(600))
                .heartbeat(Heartbeat {
                    every: Duration::from_secs(60),
                    lease: Duration::from_secs(900),
                }),
            "at least the longest lease",
        ),
        (
            base().heartbeat(Heartbeat {
                every: Duration::from_secs(10),
                lease: Duration::from_secs(10),
            }),
            "heartbeat",
        ),
        (
            base().heartbeat(Heartbeat {
                every: Duration::ZERO,
                lease: Duration::from_secs(10),
            }),
            "heartbeat",
        ),
        (
            base().fingerprint_fields(FingerprintFields::only(["amount"])),
            "JSON pointer",
        ),
        (
            base().cache(CacheConfig {
                max_entries: 0,
                ttl: Duration::from_secs(1),
                ..CacheConfig::default()
            }),
            "cache",
        ),
        (
            base().cache(CacheConfig {
                max_entries: 1,
                ttl: Duration::ZERO,
                ..CacheConfig::default()
            }),
            "cache",
        ),
    ];
    for (builder, expected) in cases {
        let err = builder.build().err().expect("invalid settings are refused");
        assert!(matches!(err, Error::Config(_)), "{err:?}");
        assert!(
            err.to_string().contains(expected),
            "`{err}` should mention `{expected}`"
        );
    }
    assert!(base().build().is_ok(), "the defaults are valid");
}

#[tokio::test]
async fn fingerprint_fields_decide_what_counts_as_the_same_intent() {
    let idem = base()
        .fingerprint_fields(FingerprintFields::except(["/sent_at"]))
        .build()
        .expect("config");
    let first = serde_json::json!({"payment_id": "p", "amount": 5, "sent_at": "10:00"});
    let resent = serde_json::json!({"sent_at": "10:05", "amount": 5, "payment_id": "p"});
    let changed = serde_json::json!({"payment_id": "p", "amount": 6, "sent_at": "10:00"});
    let ok = || async { Ok::<_, String>(1) };
    assert!(
        idem.run(key("p"), &first, ok)
            .await
            .expect("first")
            .is_executed()
    );
    assert!(
        !idem
            .run(key("p"), &resent, ok)
            .await
            .expect("resent")
            .is_executed(),
        "sent_at is not part of the intent"
    );
    let err = idem
        .run(key("p"), &changed, ok)
        .await
        .expect_err("changed amount");
    assert!(err.idempotency().is_some_and(Error::is_payload_mismatch));
}

#[tokio::test]
async fn a_stored_result_of_another_shape_replays_as_done_with_the_value_unavailable() {
    let idem = base().build().expect("config");
    idem.run(key("p"), &payment("p", 1), || async {
        Ok::<_, String>("text".to_owned())
    })
    .await
    .expect("first");
    let effects = std::sync::atomic::AtomicU32::new(0);
    let outcome = idem
        .run(key("p"), &payment("p", 1), || async {
            effects.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
            Ok::<_, String>(42u32)
        })
        .await
        .expect("a duplicate is a replay, whatever its stored result's shape");
    assert_eq!(
        effects.load(std::sync::atomic::Ordering::SeqCst),
        0,
        "the effect did not run again"
    );
    match outcome {
        Outcome::Replayed {
            result: sqsafe_idempotency::Replayed::Unavailable { reason },
            ..
        } => assert!(reason.contains("does not decode"), "{reason}"),
        other => panic!("expected a replay with the value unavailable, got {other:?}"),
    }
}

/// A heartbeat that finds its claim taken over stops the effect (drops its future) and reports `LeaseLost`, instead
/// of letting it run on beside the new owner.
#[tokio::test(start_paused = true)]
async fn a_heartbeat_that_finds_the_claim_lost_stops_the_effect() {
    use std::sync::Arc;
    use std::sync::atomic::{AtomicBool, Ordering};

    struct SetOnDrop(Arc<AtomicBool>);
    impl Drop for SetOnDrop {
        fn drop(&mut self) {
            self.0.store(true, Ordering::SeqCst);
        }
    }

    let store = InMemoryStore::new();
    let idem = Idempotency::builder(store.clone(), "c", 1)
        .clock(tokio_clock())
        .default_lease(Duration::from_secs(5))
        .heartbeat(Heartbeat {
            every: Duration::from_secs(1),
            lease: Duration::from_secs(5),
        })
        .build()
        .expect("config");
    // Another instance, whose clock is an hour ahead, takes the key over while the effect runs.
    let thief = Idempotency::builder(store, "c", 1)
        .clock(|| UNIX_EPOCH + Duration::from_millis(T0_MS + 3_600_000))
        .tokens(|| "thief".to_owned())
        .build()
        .expect("config");
    let dropped = Arc::new(AtomicBool::new(false));
    let flag = Arc::clone(&dropped);
    let body = payment("hb", 1);
    let run = idem.run(key("hb"), &body, move || async move {
        let _drop = SetOnDrop(flag);
        std::future::pending::<Result<String, String>>().await
    });
    let steal = async {
        tokio::time::sleep(Duration::from_millis(500)).await;
        let request = thief
            .request(key("hb"), &payment("hb", 1))
            .expect("request");
        match thief.claim::<String>(&request).await {
            Ok(sqsafe_idempotency::Claim::Acquired(guard)) => guard,
            other => panic!("the thief takes over: {other:?}"),
        }
    };
    let (outcome, _thief_guard) =
        tokio::join!(tokio::time::timeout(Duration::from_secs(60), run), steal);
    let outcome = outcome.expect("the effect was stopped, not left running");
    assert!(
        matches!(outcome, Err(RunError::Idempotency(Error::LeaseLost { .. }))),
        "{outcome:?}"
    );
    assert!(
        dropped.load(Ordering::SeqCst),
        "the effect's future was dropped"
    );
}

/// A store whose completions fail (throttled) a number of times before they go through.
#[derive(Clone)]
struct ThrottledCompletions {
    inner: InMemoryStore,
    failures_left: std::sync::Arc<std::sync::atomic::AtomicU32>,
    tries: std::sync::Arc<std::sync::atomic::AtomicU32>,
    /// How long each failing try takes before it fails (a write that hangs until the SDK's timeout).
    hang: Duration,
    /// How long each lease extension takes (a slow heartbeat write).
    extend_hang: Duration,
    /// How long each claim takes before it is written (a store that answers late: throttled and retried by the SDK).
    claim_hang: Duration,
    /// How long each release takes before it is written.
    release_hang: Duration,
}

impl ThrottledCompletions {
    fn failing(times: u32) -> Self {
        Self::hanging(times, Duration::ZERO)
    }

    fn hanging(times: u32, hang: Duration) -> Self {
        Self {
            inner: InMemoryStore::new(),
            failures_left: std::sync::Arc::new(times.into()),
            tries: std::sync::Arc::default(),
            hang,
            extend_hang: Duration::ZERO,
            claim_hang: Duration::ZERO,
            release_hang: Duration::ZERO,
        }
    }
}

impl IdempotencyStore for ThrottledCompletions {
    async fn claim(
        &self,
        record: &sqsafe_idempotency::IdempotencyRecord,
        now: SystemTime,
        margin: Duration,
    ) -> sqsafe_idempotency::Result<sqsafe_idempotency::ClaimAttempt> {
        tokio::time::sleep(self.claim_hang).await;
        self.inner.claim(record, now, margin).await
    }

    async fn complete(
        &self,
        key: &sqsafe_idempotency::IdempotencyKey,
        token: &str,
        completion: &sqsafe_idempotency::Completion,
    ) -> sqsafe_idempotency::Result<sqsafe_idempotency::FencedWrite> {
        use std::sync::atomic::Ordering;
        self.tries.fetch_add(1, Ordering::SeqCst);
        let left = self.failures_left.load(Ordering::SeqCst);
        if left > 0 {
            self.failures_left.store(left - 1, Ordering::SeqCst);
            tokio::time::sleep(self.hang).await;
            return Err(Error::store(
                "complete",
                key.as_str(),
                "ThrottlingException: Rate of requests exceeds the allowed throughput.",
            ));
        }
        self.inner.complete(key, token, completion).await
    }

    async fn extend(
        &self,
        key: &sqsafe_idempotency::IdempotencyKey,
        token: &str,
        until: u64,
        expiration: u64,
    ) -> sqsafe_idempotency::Result<sqsafe_idempotency::FencedWrite> {
        tokio::time::sleep(self.extend_hang).await;
        self.inner.extend(key, token, until, expiration).await
    }

    async fn release(
        &self,
        key: &sqsafe_idempotency::IdempotencyKey,
        token: &str,
    ) -> sqsafe_idempotency::Result<sqsafe_idempotency::FencedWrite> {
        tokio::time::sleep(self.release_hang).await;
        self.inner.release(key, token).await
    }

    async fn get_many(
        &self,
        keys: &[sqsafe_idempotency::IdempotencyKey],
    ) -> sqsafe_idempotency::Result<
        std::collections::HashMap<
            sqsafe_idempotency::IdempotencyKey,
            sqsafe_idempotency::IdempotencyRecord,
        >,
    > {
        self.inner.get_many(keys).await
    }

    async fn put_completed(
        &self,
        record: &sqsafe_idempotency::IdempotencyRecord,
        now: SystemTime,
    ) -> sqsafe_idempotency::Result<sqsafe_idempotency::FencedWrite> {
        self.inner.put_completed(record, now).await
    }

    async fn get(
        &self,
        key: &sqsafe_idempotency::IdempotencyKey,
    ) -> sqsafe_idempotency::Result<Option<sqsafe_idempotency::IdempotencyRecord>> {
        self.inner.get(key).await
    }
}

#[tokio::test(start_paused = true)]
async fn a_completion_that_fails_after_the_effect_is_retried_with_backoff() {
    use std::sync::atomic::Ordering;
    let store = ThrottledCompletions::failing(3);
    let idem = Idempotency::builder(store.clone(), "c", 1)
        .clock(tokio_clock())
        .build()
        .expect("config");
    let deadline = UNIX_EPOCH + Duration::from_millis(T0_MS + 30_000);
    let request = idem
        .request(key("cr"), &payment("cr", 1))
        .expect("request")
        .deadline(deadline);
    let started = tokio::time::Instant::now();
    let outcome = idem
        .execute(&request, || async { Ok::<_, String>("ch_1".to_owned()) })
        .await
        .expect("completed on the fourth try");
    assert_eq!(outcome, Outcome::Executed("ch_1".to_owned()));
    assert_eq!(store.tries.load(Ordering::SeqCst), 4);
    assert!(
        started.elapsed() < Duration::from_secs(5),
        "{:?}",
        started.elapsed()
    );
    let record = idem
        .store()
        .get(&key("cr"))
        .await
        .expect("get")
        .expect("record");
    assert_eq!(record.status, sqsafe_idempotency::Status::Completed);
}

/// Each try of a completion is cut at the time left before the deadline's reserve, and the whole retry ends before
/// it: a write that hangs until the SDK's timeout must not carry the invocation past its deadline (Lambda would kill
/// the batch mid-way, and the records already done would come back).
#[tokio::test(start_paused = true)]
async fn a_completion_whose_writes_hang_ends_before_the_deadline_reserve() {
    use std::sync::atomic::Ordering;
    let store = ThrottledCompletions::hanging(u32::MAX, Duration::from_secs(3));
    let idem = Idempotency::builder(store.clone(), "c", 1)
        .clock(tokio_clock())
        .build()
        .expect("config");
    // 8 s left; the default reserve is 1 s: everything after the effect must end within 7 s.
    let deadline = UNIX_EPOCH + Duration::from_millis(T0_MS + 8_000);
    let request = idem
        .request(key("hang"), &payment("hang", 1))
        .expect("request")
        .deadline(deadline);
    let started = tokio::time::Instant::now();
    let err = idem
        .execute(&request, || async { Ok::<_, String>("ch_1".to_owned()) })
        .await
        .expect_err("every completion hangs");
    let spent = started.elapsed();
    assert!(
        spent <= Duration::from_secs(7),
        "the retry ended before the reserve: {spent:?} ({} tries)",
        store.tries.load(Ordering::SeqCst)
    );
    let err = err.idempotency().expect("idempotency error");
    assert!(
        matches!(err, Error::CompletionFailed { .. }),
        "completion failed, and said so: {err}"
    );
}

/// A claim is cut at half the completion reserve before the deadline, like a completion's last try: a store that
/// answers late (throttled, the SDK backing off between its tries) must not carry the invocation past its deadline.
/// The record fails as a retryable store error and its effect never runs.
#[tokio::test(start_paused = true)]
async fn a_claim_that_answers_late_is_cut_before_the_deadline() {
    use std::sync::atomic::{AtomicU32, Ordering};
    let mut store = ThrottledCompletions::failing(0);
    store.claim_hang = Duration::from_secs(3);
    let idem = Idempotency::builder(store.clone(), "c", 1)
        .clock(tokio_clock())
        .build()
        .expect("config");
    // 2 s left; the default completion reserve is 1 s: the claim may take until 0.5 s before the deadline.
    let deadline = UNIX_EPOCH + Duration::from_millis(T0_MS + 2_000);
    let request = idem
        .request(key("late-claim"), &payment("late-claim", 1))
        .expect("request")
        .deadline(deadline);
    let effects = AtomicU32::new(0);
    let started = tokio::time::Instant::now();
    let err = idem
        .execute(&request, || async {
            effects.fetch_add(1, Ordering::SeqCst);
            Ok::<_, String>("ch_1".to_owned())
        })
        .await
        .expect_err("the claim is cut");
    let spent = started.elapsed();
    assert_eq!(
        spent,
        Duration::from_millis(1_500),
        "cut at deadline - 500 ms"
    );
    assert_eq!(
        effects.load(Ordering::SeqCst),
        0,
        "no effect without a claim"
    );
    let err = err.idempotency().expect("idempotency error");
    assert!(err.is_retryable(), "{err}");
    assert!(
        err.to_string().contains("deadline"),
        "says why it was cut: {err}"
    );
}

/// A release after a failed effect is cut the same way: the key is freed by its lease instead, and the record's own
/// error is what the caller gets.
#[tokio::test(start_paused = true)]
async fn a_release_that_answers_late_is_cut_before_the_deadline() {
    let mut store = ThrottledCompletions::failing(0);
    store.release_hang = Duration::from_secs(3);
    let idem = Idempotency::builder(store.clone(), "c", 1)
        .clock(tokio_clock())
        .build()
        .expect("config");
    let deadline = UNIX_EPOCH + Duration::from_millis(T0_MS + 2_000);
    let request = idem
        .request(key("late-release"), &payment("late-release", 1))
        .expect("request")
        .deadline(deadline);
    let started = tokio::time::Instant::now();
    let err = idem
        .execute(&request, || async {
            tokio::time::sleep(Duration::from_millis(200)).await;
            Err::<String, _>("payments API: 503".to_owned())
        })
        .await
        .expect_err("the effect failed");
    assert_eq!(
        started.elapsed(),
        Duration::from_millis(1_500),
        "the release is cut at deadline - 500 ms"
    );
    assert!(
        matches!(&err, RunError::Effect(e) if e == "payments API: 503"),
        "the effect's error: {err:?}"
    );
    let record = idem
        .store()
        .get(&key("late-release"))
        .await
        .expect("get")
        .expect("the claim stays until its lease passes");
    assert_eq!(record.status, sqsafe_idempotency::Status::InProgress);
}

#[tokio::test(start_paused = true)]
async fn a_completion_that_keeps_failing_gives_up_within_the_deadline_with_a_clear_error() {
    use std::sync::atomic::{AtomicU32, Ordering};
    let store = ThrottledCompletions::failing(u32::MAX);
    let idem = Idempotency::builder(store.clone(), "c", 1)
        .clock(tokio_clock())
        .build()
        .expect("config");
    // 3 s left; the default reserve is 1 s: retries may spend 2 s.
    let deadline = UNIX_EPOCH + Duration::from_millis(T0_MS + 3_000);
    let request = idem
        .request(key("cf"), &payment("cf", 1))
        .expect("request")
        .deadline(deadline);
    let effects = AtomicU32::new(0);
    let started = tokio::time::Instant::now();
    let err = idem
        .execute(&request, || async {
            effects.fetch_add(1, Ordering::SeqCst);
            Ok::<_, String>("ch_1".to_owned())
        })
        .await
        .expect_err("completion keeps failing");
    let spent = started.elapsed();
    assert!(
        spent <= Duration::from_secs(2),
        "retries stayed within the deadline: {spent:?}"
    );
    let err = err.idempotency().expect("idempotency error");
    match err {
        Error::CompletionFailed { attempts, .. } => assert!(
            (2..=6).contains(attempts),
            "retried, and bounded: {attempts} tries"
        ),
        other => panic!("expected CompletionFailed, got {other}"),
    }
    assert!(err.is_retryable());
    assert_eq!(err.kind(), "completion_failed");
    let text = err.to_string();
    assert!(
        text.contains("ran") && text.contains("ThrottlingException"),
        "{text}"
    );
    assert_eq!(effects.load(Ordering::SeqCst), 1);
    let record = idem
        .store()
        .get(&key("cf"))
        .await
        .expect("get")
        .expect("record");
    assert_eq!(
        record.status,
        sqsafe_idempotency::Status::InProgress,
        "the key stays in progress (not released: that would run the effect again at once)"
    );
}

#[tokio::test]
async fn the_correlation_id_kept_on_a_record_is_capped() {
    let idem = base().build().expect("config");
    let long = "é".repeat(10_000);
    let request = idem
        .request(key("corr"), &payment("corr", 1))
        .expect("request")
        .correlation_id(long);
    idem.execute(&request, || async { Ok::<_, String>(()) })
        .await
        .expect("run");
    let record = idem
        .store()
        .get(&key("corr"))
        .await
        .expect("get")
        .expect("record");
    let kept = record.correlation_id.expect("kept");
    assert_eq!(
        kept.chars().count(),
        sqsafe_idempotency::MAX_CORRELATION_CHARS
    );
}

/// A lost lease is logged as an error that says clocks may be skewed, with what the attempt knew.
#[tokio::test(flavor = "current_thread")]
async fn a_lost_lease_is_logged_as_an_error_naming_possible_clock_skew() {
    use std::io::Write;
    use std::sync::{Arc, Mutex};

    #[derive(Clone, Default)]
    struct Lines(Arc<Mutex<Vec<u8>>>);
    impl Write for Lines {
        fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
            self.0.lock().expect("lock").extend_from_slice(buf);
            Ok(buf.len())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }
    let lines = Lines::default();
    let writer = lines.clone();
    let subscriber = tracing_subscriber::fmt()
        .json()
        .with_writer(move || writer.clone())
        .finish();
    let _default = tracing::subscriber::set_default(subscriber);

    let store = InMemoryStore::new();
    let clock = sqsafe_idempotency::ManualClock::at_millis(T0_MS);
    let idem = Idempotency::builder(store.clone(), "c", 1)
        .clock(clock.clone())
        .build()
        .expect("config");
    let request = idem
        .request(key("skew"), &payment("skew", 1))
        .expect("request")
        .deadline(UNIX_EPOCH + Duration::from_millis(T0_MS + 30_000));
    let Ok(sqsafe_idempotency::Claim::Acquired(guard)) = idem.claim::<String>(&request).await
    else {
        panic!("claim")
    };
    // An instance whose clock is 5 minutes fast takes the live lease over.
    let fast = Idempotency::builder(store, "c", 1)
        .clock(|| UNIX_EPOCH + Duration::from_millis(T0_MS + 300_000))
        .tokens(|| "fast".to_owned())
        .build()
        .expect("config");
    let Ok(sqsafe_idempotency::Claim::Acquired(_fast)) = fast.claim::<String>(&request).await
    else {
        panic!("the fast clock takes over")
    };
    let err = guard.complete(&"late").await.expect_err("lost");
    assert!(err.is_lease_lost());
    let text = String::from_utf8(lines.0.lock().expect("lock").clone()).expect("utf-8");
    let line = text
        .lines()
        .find(|l| l.contains("lease lost"))
        .unwrap_or_else(|| panic!("no lease-lost line in {text}"));
    let json: serde_json::Value = serde_json::from_str(line).expect("json");
    assert_eq!(json["level"], "ERROR", "{line}");
    assert!(
        json["fields"]["message"]
            .as_str()
            .unwrap_or_default()
            .contains("clocks are skewed"),
        "{line}"
    );
    assert_eq!(json["fields"]["own_lease_passed"], false, "{line}");
}

#[tokio::test]
async fn claims_and_guards_can_be_debugged() {
    let idem = base().build().expect("config");
    let request = idem
        .request(key("dbg"), &payment("dbg", 1))
        .expect("request");
    let claim = idem.claim::<String>(&request).await.expect("claim");
    let text = format!("{claim:?}");
    assert!(text.contains("Acquired") && text.contains("dbg"), "{text}");
}
