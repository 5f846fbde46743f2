//! The idempotency state machine against DynamoDB's real API (moto server, started by `make test`).

use sqsafe_idempotency::DynamoDbStore;

use crate::common::scenarios::{self, Fixture, Requests};
use crate::common::{
    self, LostAnswer, RequestCounter, create_table, dynamodb_client, dynamodb_losing, table_name,
};

async fn fixture() -> Fixture<DynamoDbStore> {
    let requests = RequestCounter::default();
    let lost = LostAnswer::default();
    let client = dynamodb_losing(&requests, &lost).await;
    let table = table_name("idem");
    create_table(&client, &table, "pk", None).await;
    let store = DynamoDbStore::builder(client, table)
        .build()
        .expect("store");
    requests.take();
    Fixture {
        store,
        requests: Requests(Some(requests)),
        lose_answer: Box::new(move |operation| lost.arm(operation)),
    }
}

macro_rules! on_dynamodb {
    ($($name:ident),* $(,)?) => {$(
        #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
        async fn $name() {
            scenarios::$name(fixture().await).await;
        }
    )*};
}

on_dynamodb!(
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

use std::sync::atomic::{AtomicU32, Ordering};

use aws_sdk_dynamodb::types::AttributeValue;
use sqsafe_idempotency::{
    AttributeNames, ErrorClass, IdempotencyStore, ManualClock, Outcome, RunError,
};

use crate::common::scenarios::{key, payment};
use crate::common::{T0_MS, builder};

#[tokio::test]
async fn a_missing_table_is_a_typed_transient_store_error() {
    let requests = RequestCounter::default();
    let client = dynamodb_client(&requests).await;
    let store = DynamoDbStore::builder(client, "no-such-table")
        .build()
        .expect("store");
    let clock = ManualClock::at_millis(T0_MS);
    let idem = builder(store, &clock).build().expect("config");
    let effects = AtomicU32::new(0);
    let result = idem
        .run(key("p-1"), &payment("p-1", 1), || async {
            effects.fetch_add(1, Ordering::SeqCst);
            Ok::<_, String>(())
        })
        .await;
    let Err(RunError::Idempotency(err)) = result else {
        panic!("expected a store error, got {result:?}")
    };
    assert!(err.is_store(), "{err}");
    assert_eq!(err.class(), ErrorClass::Transient);
    assert!(err.to_string().contains("claim"), "{err}");
    // The message itself says what happened, not just "service error".
    assert!(
        err.to_string().contains("ResourceNotFoundException"),
        "the store error names the service's error code: {err}"
    );
    let source = std::error::Error::source(&err).expect("the SDK error is the source");
    assert!(
        format!("{source:?}").contains("ResourceNotFoundException"),
        "{source:?}"
    );
    assert_eq!(
        effects.load(Ordering::SeqCst),
        0,
        "no effect without a claim"
    );
}

#[tokio::test]
async fn records_are_stored_with_ttl_friendly_types_and_operator_attributes() {
    let fx = fixture().await;
    let client_requests = fx.requests.0.clone().expect("counter");
    let table = fx.store.table().to_owned();
    let raw_client = dynamodb_client(&client_requests).await;
    let clock = ManualClock::at_millis(T0_MS);
    let idem = builder(fx.store, &clock).build().expect("config");
    let request = idem
        .request(key("p-1"), &payment("p-1", 1))
        .expect("request")
        .correlation_id("c-9")
        .attempt(3);
    idem.execute(&request, || async { Ok::<_, String>(7) })
        .await
        .expect("run");

    let item = raw_client
        .get_item()
        .table_name(&table)
        .key("pk", AttributeValue::S(key("p-1").to_string()))
        .send()
        .await
        .expect("get")
        .item
        .expect("item");
    let n = |name: &str| item.get(name).and_then(|v| v.as_n().ok()).cloned();
    let s = |name: &str| item.get(name).and_then(|v| v.as_s().ok()).cloned();
    assert_eq!(
        n("expiration"),
        Some((T0_MS / 1000 + 30 * 86_400).to_string()),
        "TTL attribute is a Number of seconds"
    );
    assert_eq!(s("status").as_deref(), Some("COMPLETED"));
    assert_eq!(s("result").as_deref(), Some("7"));
    assert_eq!(
        s("fingerprint").as_deref(),
        Some(request.fingerprint().as_str())
    );
    assert_eq!(s("consumer").as_deref(), Some("charge-payment"));
    assert_eq!(n("consumer_version").as_deref(), Some("1"));
    assert_eq!(n("attempt").as_deref(), Some("3"));
    assert_eq!(n("created_at"), Some(T0_MS.to_string()));
    assert_eq!(s("correlation_id").as_deref(), Some("c-9"));
    assert!(
        !item.contains_key("lease_expires_at"),
        "completion removes the lease"
    );
}

#[tokio::test]
async fn single_table_mode_with_a_sort_key_and_custom_names() {
    let requests = RequestCounter::default();
    let client = dynamodb_client(&requests).await;
    let table = table_name("single");
    create_table(&client, &table, "PK", Some("SK")).await;
    let names = AttributeNames {
        partition_key: "PK".into(),
        status: "Status".into(),
        ..AttributeNames::default()
    };
    let store = DynamoDbStore::builder(client.clone(), &table)
        .attribute_names(names)
        .sort_key("SK", "IDEMPOTENCY")
        .build()
        .expect("store");
    let clock = ManualClock::at_millis(T0_MS);
    let idem = builder(store, &clock).build().expect("config");
    let effects = AtomicU32::new(0);
    let body = payment("p-1", 1);
    let run = || {
        idem.run(key("p-1"), &body, || async {
            Ok::<_, String>(effects.fetch_add(1, Ordering::SeqCst) + 1)
        })
    };
    assert_eq!(run().await.expect("first"), Outcome::Executed(1));
    assert!(!run().await.expect("replay").is_executed());
    assert_eq!(effects.load(Ordering::SeqCst), 1);

    let item = client
        .get_item()
        .table_name(&table)
        .key("PK", AttributeValue::S(key("p-1").to_string()))
        .key("SK", AttributeValue::S("IDEMPOTENCY".into()))
        .send()
        .await
        .expect("get")
        .item
        .expect("the record lives under PK + SK");
    assert_eq!(
        item.get("Status")
            .and_then(|v| v.as_s().ok())
            .map(String::as_str),
        Some("COMPLETED")
    );
}

#[test]
fn store_settings_are_validated() {
    let config = aws_sdk_dynamodb::Config::builder()
        .behavior_version_latest()
        .build();
    let client = aws_sdk_dynamodb::Client::from_conf(config);
    assert!(
        DynamoDbStore::builder(client.clone(), "t").build().is_err(),
        "table name too short"
    );
    let clash = AttributeNames {
        token: "status".into(),
        ..AttributeNames::default()
    };
    let err = DynamoDbStore::builder(client.clone(), "table")
        .attribute_names(clash)
        .build()
        .expect_err("clash");
    assert!(err.to_string().contains("`status` is used twice"), "{err}");
    assert!(
        DynamoDbStore::builder(client.clone(), "table")
            .sort_key("SK", "")
            .build()
            .is_err()
    );
    assert!(
        DynamoDbStore::builder(client, "table")
            .sort_key("pk", "x")
            .build()
            .is_err(),
        "sort key = partition key"
    );
}

/// Whether a result is kept or only its digest is decided by the whole item's size: a completion can never fail
/// DynamoDB's 400 KB item limit after its effect has run.
#[tokio::test]
async fn a_result_that_would_overflow_the_item_is_kept_as_a_digest() {
    let fx = fixture().await;
    let clock = ManualClock::at_millis(T0_MS);
    // A long consumer name (kept on every record) leaves less room in the item than the result cap assumes.
    let consumer = "c".repeat(150 * 1024);
    let idem = sqsafe_idempotency::Idempotency::builder(fx.store, consumer, 1)
        .clock(clock.clone())
        .max_result_bytes(sqsafe_idempotency::MAX_RESULT_BYTES_LIMIT)
        .build()
        .expect("config");
    let big = "x".repeat(280 * 1024);
    let effects = AtomicU32::new(0);
    let outcome = idem
        .run(key("p-big"), &payment("p-big", 1), || async {
            effects.fetch_add(1, Ordering::SeqCst);
            Ok::<_, String>(big.clone())
        })
        .await
        .expect("the completion fits: the result is kept as a digest");
    assert!(outcome.is_executed());
    let record = idem
        .store()
        .get(&key("p-big"))
        .await
        .expect("get")
        .expect("record");
    assert_eq!(record.status, sqsafe_idempotency::Status::Completed);
    assert!(
        matches!(record.result, Some(sqsafe_idempotency::StoredResult::Omitted { size, .. }) if size == big.len() as u64 + 2),
        "{:?}",
        record.result.as_ref().map(|_| "some result")
    );
    let replay = idem
        .run(key("p-big"), &payment("p-big", 1), || async {
            effects.fetch_add(1, Ordering::SeqCst);
            Ok::<_, String>(String::new())
        })
        .await
        .expect("replay");
    assert!(!replay.is_executed());
    assert_eq!(effects.load(Ordering::SeqCst), 1);
}

/// The keyed mode's read is cut at the invocation's deadline less the completion's reserve: a read that would carry
/// the invocation past it is a store error (the records come back), not a late answer.
#[tokio::test]
async fn a_keyed_read_with_no_time_left_before_the_deadline_reserve_is_a_store_error() {
    use sqsafe_idempotency::{Clock, Idempotency, ManualClock};
    use std::time::Duration;
    let fx = fixture().await;
    let clock = ManualClock::at_millis(common::T0_MS);
    let idem = Idempotency::builder(fx.store, "charge-payment", 1)
        .clock(clock.clone())
        .build()
        .expect("config");
    let keys = [scenarios::key("r-1"), scenarios::key("r-2")];
    // 500 ms left, less than the 1 s reserve.
    let deadline = clock.now() + Duration::from_millis(500);
    let err = idem
        .read_keyed(&keys, Some(deadline))
        .await
        .expect_err("no time left");
    assert!(err.is_store(), "{err}");
    assert!(
        err.to_string().contains("timed out reading 2 keys"),
        "{err}"
    );
    // With time left, the same read answers (nothing stored: no records).
    let read = idem
        .read_keyed(&keys, Some(clock.now() + Duration::from_secs(30)))
        .await
        .expect("read");
    assert!(read.is_empty(), "{read:?}");
}
