//! The same scenarios on the in-memory store, which must behave exactly like the DynamoDB one.

mod common;

use common::scenarios::{self, Fixture, Requests};
use sqsafe_idempotency::InMemoryStore;

macro_rules! in_memory {
    ($($name:ident),* $(,)?) => {$(
        #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
        async fn $name() {
            scenarios::$name(Fixture { store: InMemoryStore::new(), requests: Requests(None) }).await;
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
);

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use common::T0_MS;
use common::scenarios::{key, payment};
use sqsafe_idempotency::{
    CacheConfig, Error, FingerprintFields, Heartbeat, Idempotency, IdempotencyBuilder,
    IdempotencyStore, Outcome, RunError,
};

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

#[test]
fn builder_settings_are_validated_with_clear_errors() {
    let cases: Vec<(IdempotencyBuilder<InMemoryStore>, &str)> = vec![
        (
            Idempotency::builder(InMemoryStore::new(), "my consumer", 1),
            "consumer name",
        ),
        (base().record_ttl(Duration::ZERO), "record_ttl"),
        (base().min_lease(Duration::ZERO), "leases must be positive"),
        (
            base().default_lease(Duration::from_millis(500)),
            "default_lease >= min_lease",
        ),
        (base().max_result_bytes(500 * 1024), "max_result_bytes"),
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
            }),
            "cache",
        ),
        (
            base().cache(CacheConfig {
                max_entries: 1,
                ttl: Duration::ZERO,
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
async fn a_stored_result_of_another_shape_is_a_permanent_decode_error() {
    let idem = base().build().expect("config");
    idem.run(key("p"), &payment("p", 1), || async {
        Ok::<_, String>("text".to_owned())
    })
    .await
    .expect("first");
    let err = idem
        .run(key("p"), &payment("p", 1), || async {
            Ok::<_, String>(42u32)
        })
        .await
        .expect_err("decode");
    let err = err.idempotency().expect("idempotency error");
    assert!(matches!(err, Error::ResultDecode { .. }), "{err}");
    assert!(!err.is_retryable());
}
