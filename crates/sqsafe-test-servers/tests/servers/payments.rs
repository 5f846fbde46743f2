//! The payments API over real HTTP on 127.0.0.1, with reqwest, its keys in moto's DynamoDB (kept by sqsafe's
//! idempotency layer).

use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use reqwest::StatusCode;
use serde_json::{Value, json};
use sqsafe_test_servers::{Charge, Fault, PaymentsApi, PaymentsApiBuilder, RunningPayments, Stats};
use sqsafe_testkit::{RequestCounter, create_table, dynamodb, unique_name};
use tokio::sync::Notify;

fn loopback() -> SocketAddr {
    SocketAddr::from(([127, 0, 0, 1], 0))
}

/// A fresh key table in moto.
async fn key_table() -> (aws_sdk_dynamodb::Client, String) {
    let client = dynamodb(&RequestCounter::default()).await;
    let table = unique_name("payments-keys");
    create_table(&client, &table, "pk", None).await;
    (client, table)
}

/// The API with its keys on a table of its own.
async fn start(builder: PaymentsApiBuilder) -> RunningPayments {
    let (client, table) = key_table().await;
    builder
        .keys_in_dynamodb(client, table)
        .start(loopback())
        .await
        .expect("payments API starts")
}

fn client() -> reqwest::Client {
    // reqwest is built with `rustls-no-provider`; a provider must exist even for plain http.
    let _ = rustls::crypto::ring::default_provider().install_default();
    reqwest::Client::builder()
        .no_proxy()
        .build()
        .expect("client")
}

fn charge_body(payment_id: &str, amount: u64) -> Value {
    json!({ "payment_id": payment_id, "amount": amount, "currency": "EUR", "customer_id": "c-7" })
}

struct Reply {
    status: StatusCode,
    replayed: Option<String>,
    retry_after: Option<String>,
    body: String,
}

impl Reply {
    fn json(&self) -> Value {
        serde_json::from_str(&self.body).expect("JSON body")
    }

    /// The API's own errors: `{"error": "<code>", ...}`.
    fn error_code(&self) -> String {
        self.json()["error"]
            .as_str()
            .expect("error code")
            .to_owned()
    }

    /// The idempotency layer's answers: problem+json, `type` ending in `/problems/<kind>`.
    fn problem_kind(&self) -> String {
        let json = self.json();
        let kind = json["type"].as_str().expect("problem type");
        kind.rsplit('/').next().unwrap_or_default().to_owned()
    }
}

async fn post_raw(
    client: &reqwest::Client,
    api: &RunningPayments,
    key: Option<&str>,
    body: String,
) -> Reply {
    let mut request = client
        .post(format!("{}/v1/charges", api.base_url()))
        .header("content-type", "application/json")
        .body(body);
    if let Some(key) = key {
        request = request.header("Idempotency-Key", key);
    }
    read(request.send().await.expect("request sent")).await
}

async fn post(client: &reqwest::Client, api: &RunningPayments, key: &str, body: &Value) -> Reply {
    post_raw(client, api, Some(key), body.to_string()).await
}

async fn read(response: reqwest::Response) -> Reply {
    let status = response.status();
    let replayed = response
        .headers()
        .get("idempotent-replayed")
        .map(|v| v.to_str().expect("ASCII").to_owned());
    let retry_after = response
        .headers()
        .get("retry-after")
        .map(|v| v.to_str().expect("ASCII").to_owned());
    let body = response.text().await.expect("body");
    Reply {
        status,
        replayed,
        retry_after,
        body,
    }
}

#[tokio::test]
async fn a_new_key_charges_and_answers_201() {
    let api = start(PaymentsApi::builder()).await;
    let client = client();
    let response = client
        .post(format!("{}/v1/charges", api.base_url()))
        .header("Idempotency-Key", "payment:p-1")
        .header("x-correlation-id", "req-1")
        .json(&charge_body("p-1", 1250))
        .send()
        .await
        .expect("sent");
    assert_eq!(response.headers()["content-type"], "application/json");
    let reply = read(response).await;

    assert_eq!(reply.status, StatusCode::CREATED);
    assert_eq!(reply.replayed, None);
    assert_eq!(
        reply.json(),
        json!({ "id": "ch_1", "payment_id": "p-1", "amount": 1250, "currency": "EUR", "status": "succeeded" })
    );
    assert_eq!(
        api.charges(),
        [Charge {
            id: "ch_1".into(),
            idempotency_key: "payment:p-1".into(),
            payment_id: "p-1".into(),
            amount: 1250,
            currency: "EUR".into(),
            customer_id: "c-7".into(),
            correlation_id: Some("req-1".into()),
        }]
    );
}

#[tokio::test]
async fn a_retry_replays_the_stored_response_without_charging() {
    let api = start(PaymentsApi::builder()).await;
    let client = client();
    let first = post(&client, &api, "k-1", &charge_body("p-1", 1250)).await;
    let second = post(&client, &api, "k-1", &charge_body("p-1", 1250)).await;

    assert_eq!(first.status, StatusCode::CREATED);
    assert_eq!(second.status, first.status);
    assert_eq!(second.body, first.body, "byte for byte");
    assert_eq!(second.replayed.as_deref(), Some("true"));
    assert_eq!(first.replayed, None);
    assert_eq!(api.charges().len(), 1);
    assert_eq!(api.stats().replays, 1);
}

#[tokio::test]
async fn a_retry_while_the_first_is_in_flight_gets_409() {
    let entered = Arc::new(Notify::new());
    let release = Arc::new(Notify::new());
    let delay = {
        let (entered, release) = (entered.clone(), release.clone());
        move || {
            let (entered, release) = (entered.clone(), release.clone());
            async move {
                entered.notify_one();
                release.notified().await;
            }
        }
    };
    let api = Arc::new(start(PaymentsApi::builder().processing_delay(delay)).await);
    let client = client();

    let first = tokio::spawn({
        let (client, api) = (client.clone(), api.clone());
        async move { post(&client, &api, "k-1", &charge_body("p-1", 1250)).await }
    });
    entered.notified().await;

    let concurrent = post(&client, &api, "k-1", &charge_body("p-1", 1250)).await;
    assert_eq!(concurrent.status, StatusCode::CONFLICT);
    assert_eq!(concurrent.problem_kind(), "request-in-progress");
    assert!(concurrent.retry_after.is_some(), "409 with Retry-After");
    assert!(api.charges().is_empty(), "nothing charged while in flight");

    release.notify_one();
    let first = first.await.expect("first request");
    assert_eq!(first.status, StatusCode::CREATED);

    let after = post(&client, &api, "k-1", &charge_body("p-1", 1250)).await;
    assert_eq!(after.status, StatusCode::CREATED);
    assert_eq!(after.body, first.body);
    assert_eq!(after.replayed.as_deref(), Some("true"));
    assert_eq!(api.charges().len(), 1);
    assert_eq!(api.stats().conflicts_409, 1);
}

#[tokio::test]
async fn a_changed_body_gets_422_but_reformatting_is_not_a_change() {
    let api = start(PaymentsApi::builder()).await;
    let client = client();
    let first = post_raw(
        &client,
        &api,
        Some("k-1"),
        r#"{"payment_id":"p-1","amount":1250,"currency":"EUR","customer_id":"c-7"}"#.into(),
    )
    .await;
    assert_eq!(first.status, StatusCode::CREATED);

    let reformatted = post_raw(
        &client,
        &api,
        Some("k-1"),
        "{\n  \"customer_id\" : \"c-7\",\n  \"currency\": \"EUR\",  \"amount\":1250,\"payment_id\":\"p-1\"\n}".into(),
    )
    .await;
    assert_eq!(reformatted.status, StatusCode::CREATED);
    assert_eq!(reformatted.replayed.as_deref(), Some("true"));
    assert_eq!(reformatted.body, first.body);

    let changed = post(&client, &api, "k-1", &charge_body("p-1", 9999)).await;
    assert_eq!(changed.status, StatusCode::UNPROCESSABLE_ENTITY);
    assert_eq!(changed.problem_kind(), "idempotency-key-reused");
    assert_eq!(changed.replayed, None);

    assert_eq!(api.charges().len(), 1);
    assert_eq!(api.stats().mismatches_422, 1);
}

#[tokio::test]
async fn a_missing_empty_or_overlong_key_gets_400() {
    let api = start(PaymentsApi::builder()).await;
    let client = client();
    let body = charge_body("p-1", 1250).to_string();

    let missing = post_raw(&client, &api, None, body.clone()).await;
    assert_eq!(missing.status, StatusCode::BAD_REQUEST);
    assert_eq!(missing.problem_kind(), "missing-idempotency-key");

    let empty = post_raw(&client, &api, Some(""), body.clone()).await;
    assert_eq!(empty.status, StatusCode::BAD_REQUEST);
    assert_eq!(empty.problem_kind(), "invalid-idempotency-key");

    let overlong = post_raw(&client, &api, Some(&"k".repeat(256)), body.clone()).await;
    assert_eq!(overlong.status, StatusCode::BAD_REQUEST);
    assert_eq!(overlong.problem_kind(), "invalid-idempotency-key");

    let longest = post_raw(&client, &api, Some(&"k".repeat(255)), body).await;
    assert_eq!(longest.status, StatusCode::CREATED);

    assert_eq!(api.charges().len(), 1);
    assert_eq!(api.stats().bad_requests, 3);
}

#[tokio::test]
async fn a_malformed_body_gets_400_and_does_not_store_the_key() {
    let api = start(PaymentsApi::builder()).await;
    let client = client();

    let not_json = post_raw(&client, &api, Some("k-1"), "{\"payment_id\":".into()).await;
    assert_eq!(not_json.status, StatusCode::BAD_REQUEST);
    assert_eq!(not_json.error_code(), "invalid_json");

    let missing_field = post(
        &client,
        &api,
        "k-1",
        &json!({ "payment_id": "p-1", "amount": 1250 }),
    )
    .await;
    assert_eq!(missing_field.status, StatusCode::BAD_REQUEST);
    assert_eq!(missing_field.error_code(), "invalid_request");

    let wrong_type = post(
        &client,
        &api,
        "k-1",
        &json!({
            "payment_id": "p-1", "amount": "1250", "currency": "EUR", "customer_id": "c-7"
        }),
    )
    .await;
    assert_eq!(wrong_type.status, StatusCode::BAD_REQUEST);

    let zero = post(&client, &api, "k-1", &charge_body("p-1", 0)).await;
    assert_eq!(zero.status, StatusCode::BAD_REQUEST);

    // Had any of those stored the key, this would be a 422.
    let valid = post(&client, &api, "k-1", &charge_body("p-1", 1250)).await;
    assert_eq!(valid.status, StatusCode::CREATED);
    assert_eq!(valid.replayed, None);
    assert_eq!(api.charges().len(), 1);
}

#[tokio::test]
async fn a_failure_before_charging_leaves_no_charge_and_the_retry_charges_once() {
    let api = start(PaymentsApi::builder()).await;
    let client = client();
    api.force_next(Fault::Before);

    let failed = post(&client, &api, "k-1", &charge_body("p-1", 1250)).await;
    assert_eq!(failed.status, StatusCode::SERVICE_UNAVAILABLE);
    assert_eq!(failed.error_code(), "service_unavailable");
    assert!(api.charges().is_empty());

    let retry = post(&client, &api, "k-1", &charge_body("p-1", 1250)).await;
    assert_eq!(retry.status, StatusCode::CREATED);
    assert_eq!(retry.replayed, None, "a fresh charge, not a replay");
    let again = post(&client, &api, "k-1", &charge_body("p-1", 1250)).await;
    assert_eq!(again.replayed.as_deref(), Some("true"));

    assert_eq!(api.charges().len(), 1);
    assert_eq!(api.stats().failed_before, 1);
}

#[tokio::test]
async fn a_failure_after_charging_is_replayed_to_the_retry_with_the_same_charge() {
    let api = start(PaymentsApi::builder()).await;
    let client = client();
    api.force_next(Fault::After);

    let failed = post(&client, &api, "k-1", &charge_body("p-1", 1250)).await;
    assert_eq!(failed.status, StatusCode::SERVICE_UNAVAILABLE);
    let charges = api.charges();
    assert_eq!(charges.len(), 1, "charged although the client saw a 503");

    let retry = post(&client, &api, "k-1", &charge_body("p-1", 1250)).await;
    assert_eq!(retry.status, StatusCode::CREATED);
    assert_eq!(retry.replayed.as_deref(), Some("true"));
    assert_eq!(retry.json()["id"], charges[0].id.as_str());
    assert_eq!(api.charges(), charges, "no second charge");
    assert_eq!(api.stats().failed_after, 1);
}

#[tokio::test]
async fn forced_faults_override_the_rates_in_order() {
    let api = start(PaymentsApi::builder().fail_before_rate(1.0)).await;
    let client = client();
    api.force_next(Fault::None);
    api.force_next(Fault::After);

    let statuses = [
        post(&client, &api, "k-1", &charge_body("p-1", 100))
            .await
            .status,
        post(&client, &api, "k-2", &charge_body("p-2", 100))
            .await
            .status,
        post(&client, &api, "k-3", &charge_body("p-3", 100))
            .await
            .status,
    ];
    assert_eq!(
        statuses,
        [
            StatusCode::CREATED,
            StatusCode::SERVICE_UNAVAILABLE,
            StatusCode::SERVICE_UNAVAILABLE
        ]
    );
    // k-2 failed after charging, k-3 (the rate) before.
    let keys: Vec<String> = api
        .charges()
        .into_iter()
        .map(|c| c.idempotency_key)
        .collect();
    assert_eq!(keys, ["k-1", "k-2"]);
}

#[tokio::test]
async fn stats_count_every_outcome() {
    let api = start(PaymentsApi::builder()).await;
    let client = client();
    let body = charge_body("p-1", 1250);

    post(&client, &api, "k-1", &body).await; // charge
    post(&client, &api, "k-1", &body).await; // replay
    post(&client, &api, "k-1", &charge_body("p-1", 1)).await; // 422
    post_raw(&client, &api, None, body.to_string()).await; // 400
    api.force_next(Fault::Before);
    post(&client, &api, "k-2", &body).await; // 503 before
    api.force_next(Fault::After);
    post(&client, &api, "k-3", &body).await; // charge, 503 after
    post(&client, &api, "k-3", &body).await; // replay

    assert_eq!(
        api.stats(),
        Stats {
            requests: 7,
            charges: 2,
            replays: 2,
            conflicts_409: 0,
            mismatches_422: 1,
            failed_before: 1,
            failed_after: 1,
            bad_requests: 1,
            layer_errors: 0,
        }
    );
}

#[tokio::test]
async fn the_same_seed_gives_the_same_faults() {
    async fn run(seed: u64) -> (Vec<u16>, Stats) {
        let api = start(
            PaymentsApi::builder()
                .seed(seed)
                .fail_before_rate(0.3)
                .fail_after_rate(0.3),
        )
        .await;
        let client = client();
        let mut statuses = Vec::new();
        for i in 0..40 {
            let key = format!("k-{i}");
            statuses.push(
                post(&client, &api, &key, &charge_body(&key, 100))
                    .await
                    .status
                    .as_u16(),
            );
        }
        let stats = api.stats();
        api.shutdown().await;
        (statuses, stats)
    }

    let (a, stats) = run(42).await;
    let (b, _) = run(42).await;
    let (c, _) = run(43).await;
    assert_eq!(a, b);
    assert_ne!(a, c);

    let count = |status: u16| a.iter().filter(|s| **s == status).count() as u64;
    assert_eq!(count(201), stats.charges - stats.failed_after);
    assert_eq!(count(503), stats.failed_before + stats.failed_after);
    assert!(stats.failed_before > 0 && stats.failed_after > 0, "{stats}");
}

#[tokio::test]
async fn routes_health_ledger_404_and_405() {
    let api = start(PaymentsApi::builder()).await;
    let client = client();
    post(&client, &api, "k-1", &charge_body("p-1", 1250)).await;

    let health = client
        .get(format!("{}/health", api.base_url()))
        .send()
        .await
        .expect("sent");
    assert_eq!(health.status(), StatusCode::OK);

    let ledger: Vec<Charge> = client
        .get(format!("{}/v1/charges", api.base_url()))
        .send()
        .await
        .expect("sent")
        .json()
        .await
        .expect("ledger JSON");
    assert_eq!(ledger, api.charges());

    let stats: Stats = client
        .get(format!("{}/v1/stats", api.base_url()))
        .send()
        .await
        .expect("sent")
        .json()
        .await
        .expect("stats JSON");
    assert_eq!(stats, api.stats());
    assert_eq!(stats.charges, 1);

    let missing = client
        .get(format!("{}/v2/charges", api.base_url()))
        .send()
        .await
        .expect("sent");
    assert_eq!(missing.status(), StatusCode::NOT_FOUND);

    let wrong_method = client
        .delete(format!("{}/v1/charges", api.base_url()))
        .send()
        .await
        .expect("sent");
    assert_eq!(wrong_method.status(), StatusCode::METHOD_NOT_ALLOWED);
    assert_eq!(wrong_method.headers()["allow"], "GET, POST");
}

#[tokio::test]
async fn shutdown_and_drop_stop_the_server() {
    let client = client();

    let api = start(PaymentsApi::builder()).await;
    let url = format!("{}/health", api.base_url());
    assert!(client.get(&url).send().await.is_ok());
    api.shutdown().await;
    assert!(
        client.get(&url).send().await.is_err(),
        "closed after shutdown"
    );

    let api = start(PaymentsApi::builder()).await;
    let addr = api.addr();
    drop(api);
    // The aborted task drops its listener the next time the runtime gets to it; no sleeping, just yielding.
    let mut refused = false;
    for _ in 0..100 {
        tokio::task::yield_now().await;
        if tokio::net::TcpStream::connect(addr).await.is_err() {
            refused = true;
            break;
        }
    }
    assert!(refused, "still listening after drop");
}

#[tokio::test]
async fn binding_a_taken_port_is_a_typed_error() {
    let api = start(PaymentsApi::builder()).await;
    let err = PaymentsApi::builder()
        .keys_in_memory()
        .start(api.addr())
        .await
        .expect_err("port taken");
    assert!(err.is_bind(), "{err}");
}

/// A request whose charge hangs (its client went away) is stopped at the lease, the longest a charge may take; it may
/// have charged already, so its claim is not released: a retry gets `409` until the claim's lease runs out, then
/// takes it over and charges once.
#[tokio::test]
async fn a_request_abandoned_in_flight_holds_its_key_until_its_lease_ends() {
    let entered = Arc::new(Notify::new());
    let first = Arc::new(AtomicBool::new(true));
    let delay = {
        let (entered, first) = (entered.clone(), first.clone());
        move || {
            let held = first.swap(false, Ordering::SeqCst);
            let entered = entered.clone();
            async move {
                if held {
                    entered.notify_one();
                    std::future::pending::<()>().await;
                }
            }
        }
    };
    let lease = Duration::from_secs(1);
    let api = Arc::new(start(PaymentsApi::builder().lease(lease).processing_delay(delay)).await);
    let client = client();
    let abandoned = tokio::spawn({
        let (client, api) = (client.clone(), api.clone());
        async move { post(&client, &api, "k-1", &charge_body("p-1", 1250)).await }
    });
    entered.notified().await;
    abandoned.abort();

    let started = Instant::now();
    let mut conflicts = 0;
    let retry = loop {
        let reply = post(&client, &api, "k-1", &charge_body("p-1", 1250)).await;
        if reply.status != StatusCode::CONFLICT {
            break reply;
        }
        conflicts += 1;
        assert!(
            started.elapsed() < Duration::from_secs(20),
            "the abandoned claim was never taken over"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    };
    assert!(
        conflicts > 0,
        "the abandoned claim held its key for a while"
    );
    assert_eq!(retry.status, StatusCode::CREATED);
    assert_eq!(retry.replayed, None);
    assert_eq!(api.charges().len(), 1);
}

/// The keys live in the table, not in the process: a server started again on the same table replays what the first
/// one charged, although that charge's client was told it failed.
#[tokio::test]
async fn a_restarted_api_on_the_same_table_replays_what_the_first_charged() {
    let (dynamo, table) = key_table().await;
    let client = client();
    let first = PaymentsApi::builder()
        .keys_in_dynamodb(dynamo.clone(), table.clone())
        .start(loopback())
        .await
        .expect("started");
    first.force_next(Fault::After);
    let failed = post(&client, &first, "k-1", &charge_body("p-1", 1250)).await;
    assert_eq!(failed.status, StatusCode::SERVICE_UNAVAILABLE);
    assert_eq!(first.charges().len(), 1);
    first.shutdown().await;

    let second = PaymentsApi::builder()
        .keys_in_dynamodb(dynamo, table)
        .start(loopback())
        .await
        .expect("started again");
    let retry = post(&client, &second, "k-1", &charge_body("p-1", 1250)).await;
    assert_eq!(retry.status, StatusCode::CREATED);
    assert_eq!(retry.replayed.as_deref(), Some("true"));
    assert!(second.charges().is_empty(), "not charged again");
}

/// What `keys_in_memory` is documented to do: a restart forgets the keys, and the same retry charges again.
#[tokio::test]
async fn keys_in_memory_are_forgotten_by_a_restart() {
    let client = client();
    let first = PaymentsApi::builder()
        .keys_in_memory()
        .start(loopback())
        .await
        .expect("started");
    first.force_next(Fault::After);
    post(&client, &first, "k-1", &charge_body("p-1", 1250)).await;
    first.shutdown().await;
    let second = PaymentsApi::builder()
        .keys_in_memory()
        .start(loopback())
        .await
        .expect("started again");
    let retry = post(&client, &second, "k-1", &charge_body("p-1", 1250)).await;
    assert_eq!(retry.replayed, None);
    assert_eq!(second.charges().len(), 1, "charged again");
}

/// `hold_in_flight`: the held payment and every later charge wait, claimed; `held` resolves once no charge is
/// without its stored answer.
#[tokio::test]
async fn a_hold_stops_every_charge_and_says_when_it_is_in_place() {
    let api = Arc::new(start(PaymentsApi::builder().hold_in_flight("p-held")).await);
    let client = client();
    let before = post(&client, &api, "k-1", &charge_body("p-1", 100)).await;
    assert_eq!(before.status, StatusCode::CREATED);
    let held = tokio::spawn({
        let (client, api) = (client.clone(), api.clone());
        async move { post(&client, &api, "k-held", &charge_body("p-held", 100)).await }
    });
    api.held().await;
    let later = tokio::spawn({
        let (client, api) = (client.clone(), api.clone());
        async move { post(&client, &api, "k-2", &charge_body("p-2", 100)).await }
    });
    // The later request is claimed and waits at the hold, uncharged; only then is its repeat sent (sent before, the
    // repeat could claim the key itself and wait at the hold forever).
    let since = Instant::now();
    while api.waiting() < 2 {
        assert!(
            since.elapsed() < Duration::from_secs(10),
            "the later request never reached the hold"
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    let repeat = post(&client, &api, "k-2", &charge_body("p-2", 100)).await;
    assert_eq!(repeat.problem_kind(), "request-in-progress");
    assert_eq!(
        api.charges().len(),
        1,
        "only the charge made before the hold"
    );
    assert!(!held.is_finished() && !later.is_finished());
    held.abort();
    later.abort();
}
