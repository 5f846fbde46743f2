//! `sqsafe::api`'s idempotency layer on an axum Router, its records in moto's DynamoDB: concurrent repeats of one key
//! run the handler once, repeats replay byte for byte, other content is refused, a 5xx or a panic releases the key,
//! and two callers never share a record.

use std::sync::Arc;
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::Duration;

use axum::Router;
use axum::body::Body;
use axum::extract::State;
use axum::http::{Request, StatusCode};
use axum::response::IntoResponse;
use axum::routing::{get, post};
use http_body_util::BodyExt;
use sqsafe::api::{ApiSettings, IdempotencyLayer};
use sqsafe_testkit::RequestCounter;
use tower::ServiceExt;

use crate::api_common::{OrdersTable, orders_api_on_moto};
// Issue 47's variety: path, query, statuses, a long handler, sizes, streams, names, headers, hang-ups, body kinds.
mod api_variety;

/// What the handler does on its n-th run (1-based).
#[derive(Clone)]
struct Api {
    runs: Arc<AtomicU32>,
    behaviour: Arc<dyn Fn(u32) -> Behaviour + Send + Sync>,
}

#[derive(Clone, Copy)]
enum Behaviour {
    Created { delay_ms: u64 },
    Unavailable,
    Panic,
    Big,
}

async fn charge(State(api): State<Api>, body: String) -> axum::response::Response {
    let n = api.runs.fetch_add(1, Ordering::SeqCst) + 1;
    match (api.behaviour)(n) {
        Behaviour::Created { delay_ms } => {
            tokio::time::sleep(Duration::from_millis(delay_ms)).await;
            let amount = serde_json::from_str::<serde_json::Value>(&body)
                .ok()
                .and_then(|b| b["amount"].as_u64())
                .unwrap_or(0);
            (
                StatusCode::CREATED,
                [
                    ("content-type", "application/json"),
                    ("location", "/charges/x"),
                ],
                format!("{{\"id\":\"ch_{n}\",\"amount\":{amount}}}"),
            )
                .into_response()
        }
        Behaviour::Unavailable => (StatusCode::SERVICE_UNAVAILABLE, "try later").into_response(),
        Behaviour::Panic => panic!("the handler broke"),
        Behaviour::Big => (StatusCode::OK, "x".repeat(4096)).into_response(),
    }
}

struct Fixture {
    app: Router,
    table: OrdersTable,
    runs: Arc<AtomicU32>,
    requests: RequestCounter,
    /// The layer's metric lines, parsed.
    metrics: Arc<std::sync::Mutex<Vec<serde_json::Value>>>,
}

async fn fixture(
    behaviour: impl Fn(u32) -> Behaviour + Send + Sync + 'static,
    settings: ApiSettings,
) -> Fixture {
    let requests = RequestCounter::default();
    let table = OrdersTable::create(&requests, "api").await;
    let idem = table.engine("orders-api", 1, |b| b);
    let runs = Arc::new(AtomicU32::new(0));
    let api = Api {
        runs: Arc::clone(&runs),
        behaviour: Arc::new(behaviour),
    };
    // The caller: a header the gateway sets (an authorizer's principal would be read the same way).
    let caller = |parts: &axum::http::request::Parts| {
        parts
            .headers
            .get("x-caller")
            .and_then(|v| v.to_str().ok())
            .map(str::to_owned)
    };
    let app = Router::new()
        .route("/charges", post(charge))
        .route("/charges/{id}", get(|| async { "a charge" }));
    let metrics = Arc::new(std::sync::Mutex::new(Vec::new()));
    let lines = Arc::clone(&metrics);
    let layer = IdempotencyLayer::with_settings(idem, caller, settings)
        .expect("layer")
        .metrics_writer(move |line| {
            let doc = serde_json::from_slice(line).expect("a metric line is JSON");
            lines.lock().expect("metrics").push(doc);
        });
    let app = app.layer(layer).with_state(api);
    requests.take();
    Fixture {
        app,
        table,
        runs,
        requests,
        metrics,
    }
}

fn created() -> impl Fn(u32) -> Behaviour + Send + Sync + 'static {
    |_| Behaviour::Created { delay_ms: 0 }
}

fn charge_request(key: Option<&str>, caller: Option<&str>, body: &str) -> Request<Body> {
    let mut request = Request::post("/charges").header("content-type", "application/json");
    if let Some(key) = key {
        request = request.header("idempotency-key", key);
    }
    if let Some(caller) = caller {
        request = request.header("x-caller", caller);
    }
    request.body(Body::from(body.to_owned())).expect("request")
}

/// Status, headers and body bytes of an answer.
async fn send(
    app: &Router,
    request: Request<Body>,
) -> (StatusCode, axum::http::HeaderMap, Vec<u8>) {
    let answer = app.clone().oneshot(request).await.expect("infallible");
    let (parts, body) = answer.into_parts();
    let bytes = body.collect().await.expect("body").to_bytes().to_vec();
    (parts.status, parts.headers, bytes)
}

fn replayed(headers: &axum::http::HeaderMap) -> bool {
    headers
        .get("idempotent-replayed")
        .is_some_and(|v| v == "true")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn twenty_concurrent_requests_with_one_key_run_the_handler_once() {
    let fx = fixture(
        |_| Behaviour::Created { delay_ms: 300 },
        ApiSettings::default(),
    )
    .await;
    let body = r#"{"amount": 1250, "currency": "EUR"}"#;
    let answers = futures::future::join_all((0..20).map(|_| {
        let app = fx.app.clone();
        async move { send(&app, charge_request(Some("k-20"), Some("acme"), body)).await }
    }))
    .await;
    assert_eq!(fx.runs.load(Ordering::SeqCst), 1, "the handler ran once");
    let first: Vec<_> = answers
        .iter()
        .filter(|(status, headers, _)| *status == StatusCode::CREATED && !replayed(headers))
        .collect();
    assert_eq!(first.len(), 1, "one answer of the run itself");
    for (status, headers, answer) in &answers {
        match *status {
            StatusCode::CREATED => assert_eq!(answer, &first[0].2, "a replay is the first answer"),
            StatusCode::CONFLICT => assert!(headers.contains_key("retry-after"), "{headers:?}"),
            other => panic!(
                "unexpected answer {other}: {}",
                String::from_utf8_lossy(answer)
            ),
        }
    }

    // A later repeat: the stored answer, byte for byte, its headers with it; the handler does not run.
    fx.requests.take();
    let (status, headers, again) =
        send(&fx.app, charge_request(Some("k-20"), Some("acme"), body)).await;
    assert_eq!(status, StatusCode::CREATED);
    assert!(replayed(&headers));
    assert_eq!(headers["location"], "/charges/x");
    assert_eq!(headers["content-type"], "application/json");
    assert_eq!(again, first[0].2);
    assert_eq!(
        fx.requests.take(),
        ["PutItem"],
        "a repeat is the refused claim alone"
    );
    // The same content with other spacing is the same request; other content is refused before the handler.
    let (status, _, _) = send(
        &fx.app,
        charge_request(
            Some("k-20"),
            Some("acme"),
            r#"{"currency":"EUR","amount":1250}"#,
        ),
    )
    .await;
    assert_eq!(status, StatusCode::CREATED);
    let (status, headers, problem) = send(
        &fx.app,
        charge_request(
            Some("k-20"),
            Some("acme"),
            r#"{"amount": 99, "currency": "EUR"}"#,
        ),
    )
    .await;
    assert_eq!(status, StatusCode::UNPROCESSABLE_ENTITY);
    assert_eq!(headers["content-type"], "application/problem+json");
    assert!(String::from_utf8_lossy(&problem).contains("idempotency-key-reused"));
    assert_eq!(fx.runs.load(Ordering::SeqCst), 1, "never a second run");
}

/// One metric line per guarded request, with exactly its outcome's counter at 1; a request the layer does not guard
/// (a GET) writes none.
#[tokio::test]
async fn each_guarded_request_writes_one_metric_line_naming_its_outcome() {
    let fx = fixture(created(), ApiSettings::default()).await;
    let body = "{\"amount\":4}";
    for request in [
        charge_request(Some("k-m"), Some("acme"), body),
        charge_request(Some("k-m"), Some("acme"), body),
        charge_request(Some("k-m"), Some("acme"), "{\"amount\":5}"),
        charge_request(None, Some("acme"), body),
        Request::get("/charges/x")
            .body(Body::empty())
            .expect("request"),
    ] {
        send(&fx.app, request).await;
    }
    let outcomes: Vec<(String, String)> = fx
        .metrics
        .lock()
        .expect("metrics")
        .iter()
        .map(|doc| {
            let set: Vec<&str> = sqsafe_telemetry_outcomes()
                .into_iter()
                .filter(|name| doc[*name] == 1)
                .collect();
            assert_eq!(set.len(), 1, "one outcome per line: {doc}");
            assert!(doc["RequestDuration"].is_number(), "{doc}");
            (
                doc["api"].as_str().unwrap_or("").to_owned(),
                set[0].to_owned(),
            )
        })
        .collect();
    // The dimension is the records' name: the Idempotency's own (`orders-api`).
    let api = |m: &str| ("orders-api".to_owned(), m.to_owned());
    assert_eq!(
        outcomes,
        [
            api("RequestsExecuted"),
            api("RequestsReplayed"),
            api("RequestsMismatched"),
            api("RequestsRefused"),
        ]
    );
}

fn sqsafe_telemetry_outcomes() -> Vec<&'static str> {
    sqsafe::layers::telemetry::api_metrics::RequestOutcome::ALL
        .iter()
        .map(|o| o.metric_name())
        .collect()
}

#[tokio::test]
async fn a_fresh_request_costs_one_claim_and_one_completion() {
    let fx = fixture(created(), ApiSettings::default()).await;
    let (status, _, _) = send(
        &fx.app,
        charge_request(Some("k-1"), Some("acme"), "{\"amount\":1}"),
    )
    .await;
    assert_eq!(status, StatusCode::CREATED);
    assert_eq!(fx.requests.take(), ["PutItem", "UpdateItem"]);
}

#[tokio::test]
async fn a_5xx_or_a_panic_releases_the_key_and_the_retry_runs() {
    let fx = fixture(
        |n| match n {
            1 => Behaviour::Unavailable,
            2 => Behaviour::Panic,
            _ => Behaviour::Created { delay_ms: 0 },
        },
        ApiSettings::default(),
    )
    .await;
    let request = || charge_request(Some("k-5xx"), Some("acme"), "{\"amount\":7}");
    let (status, headers, _) = send(&fx.app, request()).await;
    assert_eq!(status, StatusCode::SERVICE_UNAVAILABLE);
    assert!(!replayed(&headers));
    let (status, _, problem) = send(&fx.app, request()).await;
    assert_eq!(
        status,
        StatusCode::INTERNAL_SERVER_ERROR,
        "{}",
        String::from_utf8_lossy(&problem)
    );
    let (status, headers, _) = send(&fx.app, request()).await;
    assert_eq!(status, StatusCode::CREATED);
    assert!(!replayed(&headers), "the third try ran");
    let (status, headers, _) = send(&fx.app, request()).await;
    assert_eq!((status, replayed(&headers)), (StatusCode::CREATED, true));
    assert_eq!(fx.runs.load(Ordering::SeqCst), 3);
}

#[tokio::test]
async fn two_callers_with_one_key_never_share_a_record() {
    let fx = fixture(created(), ApiSettings::default()).await;
    let (a, _, a_body) = send(
        &fx.app,
        charge_request(Some("shared"), Some("acme"), "{\"amount\":1}"),
    )
    .await;
    let (b, b_headers, b_body) = send(
        &fx.app,
        charge_request(Some("shared"), Some("globex"), "{\"amount\":2}"),
    )
    .await;
    assert_eq!((a, b), (StatusCode::CREATED, StatusCode::CREATED));
    assert!(
        !replayed(&b_headers),
        "globex's request ran: acme's record is not its"
    );
    assert_eq!(fx.runs.load(Ordering::SeqCst), 2);
    // Each caller's repeat replays its own answer.
    let (_, _, a_again) = send(
        &fx.app,
        charge_request(Some("shared"), Some("acme"), "{\"amount\":1}"),
    )
    .await;
    let (_, _, b_again) = send(
        &fx.app,
        charge_request(Some("shared"), Some("globex"), "{\"amount\":2}"),
    )
    .await;
    assert_eq!((a_again, b_again), (a_body, b_body));
}

#[tokio::test]
async fn a_request_without_a_usable_key_or_caller_is_refused_before_the_handler() {
    let fx = fixture(created(), ApiSettings::default()).await;
    let (status, headers, _) = send(&fx.app, charge_request(None, Some("acme"), "{}")).await;
    assert_eq!(status, StatusCode::BAD_REQUEST);
    assert_eq!(headers["content-type"], "application/problem+json");
    let long = "k".repeat(256);
    for bad in [long.as_str(), "with space", "tab\tkey"] {
        let request = Request::post("/charges")
            .header("idempotency-key", bad)
            .header("x-caller", "acme")
            .body(Body::from("{}"))
            .expect("request");
        let (status, _, _) = send(&fx.app, request).await;
        assert_eq!(status, StatusCode::BAD_REQUEST, "{bad:?}");
    }
    let (status, _, _) = send(&fx.app, charge_request(Some("k"), None, "{}")).await;
    assert_eq!(status, StatusCode::UNAUTHORIZED);
    // A method the layer does not guard passes through, key or not.
    let (status, _, body) = send(
        &fx.app,
        Request::get("/charges/ch_1")
            .body(Body::empty())
            .expect("request"),
    )
    .await;
    assert_eq!(
        (status, body.as_slice()),
        (StatusCode::OK, b"a charge".as_slice())
    );
    assert_eq!(fx.runs.load(Ordering::SeqCst), 0);
    assert!(fx.requests.take().is_empty(), "nothing read or written");
}

#[tokio::test]
async fn a_key_may_be_optional_then_a_request_without_it_passes_through() {
    let settings = ApiSettings {
        key_required: false,
        ..ApiSettings::default()
    };
    let fx = fixture(created(), settings).await;
    for _ in 0..2 {
        let (status, headers, _) = send(&fx.app, charge_request(None, Some("acme"), "{}")).await;
        assert_eq!(status, StatusCode::CREATED);
        assert!(!replayed(&headers));
    }
    assert_eq!(fx.runs.load(Ordering::SeqCst), 2, "no key, no idempotency");
}

#[tokio::test]
async fn an_answer_too_large_to_store_replays_its_status_without_its_body() {
    let settings = ApiSettings {
        max_stored_body: 1024,
        ..ApiSettings::default()
    };
    let fx = fixture(|_| Behaviour::Big, settings).await;
    let (status, _, body) = send(&fx.app, charge_request(Some("big"), Some("acme"), "{}")).await;
    assert_eq!((status, body.len()), (StatusCode::OK, 4096));
    let (status, headers, body) =
        send(&fx.app, charge_request(Some("big"), Some("acme"), "{}")).await;
    assert_eq!(status, StatusCode::OK);
    assert!(replayed(&headers));
    assert_eq!(headers["idempotent-replay-body"], "omitted");
    assert!(body.is_empty());
    assert_eq!(fx.runs.load(Ordering::SeqCst), 1);
}

fn in_lambda(key: &str, deadline_in: Duration) -> Request<Body> {
    let mut request = charge_request(Some(key), Some("acme"), "{\"amount\":3}");
    let mut context = lambda_runtime::Context::default();
    let deadline = std::time::SystemTime::now() + deadline_in;
    context.deadline = deadline
        .duration_since(std::time::UNIX_EPOCH)
        .expect("after the epoch")
        .as_millis()
        .try_into()
        .expect("ms");
    request.extensions_mut().insert(context);
    request
}

/// Under lambda_http the handler must end by the invocation's deadline less the completion's reserve (1 s), so that
/// its answer can still be stored before Lambda freezes the function. One still running then is stopped and
/// answered 504, and its claim is kept, never released at once, since it may have taken effect: the client's retry
/// gets 409 (not a second run) until the claim's lease (the invocation's deadline) and the takeover margin passed.
/// Before, the handler could use the whole invocation (its completion then had no time left), and a handler past
/// the deadline had its key released: the retry ran it again.
#[tokio::test]
async fn a_handler_past_the_invocations_deadline_less_the_reserve_is_stopped_and_its_claim_kept() {
    let fx = fixture(
        |n| Behaviour::Created {
            delay_ms: if n == 1 { 1_700 } else { 0 },
        },
        ApiSettings::default(),
    )
    .await;
    let started = std::time::Instant::now();
    let (status, headers, problem) =
        send(&fx.app, in_lambda("k-deadline", Duration::from_secs(2))).await;
    assert_eq!(
        status,
        StatusCode::GATEWAY_TIMEOUT,
        "{}",
        String::from_utf8_lossy(&problem)
    );
    assert!(String::from_utf8_lossy(&problem).contains("handler-timed-out"));
    assert!(headers.contains_key("retry-after"));
    let took = started.elapsed();
    assert!(
        took < Duration::from_millis(1_600),
        "stopped at the deadline less the reserve, not after the handler's 1.7 s: {took:?}"
    );
    let (status, _, _) = send(&fx.app, in_lambda("k-deadline", Duration::from_secs(10))).await;
    assert_eq!(
        status,
        StatusCode::CONFLICT,
        "the claim is kept, not released"
    );
    assert_eq!(
        fx.runs.load(Ordering::SeqCst),
        1,
        "never run a second time at once"
    );
    let records = fx.table.records().await;
    assert_eq!(records.len(), 1);
    assert_eq!(
        sqsafe_testkit::item_string(&records[0], "status"),
        "IN_PROGRESS"
    );
}

/// `cargo lambda watch` hands every invocation `Lambda-Runtime-Deadline-Ms: 600000` (ten minutes after the epoch): a
/// deadline already passed when the request arrives is an emulator's, unknown, and the request is handled as outside
/// Lambda (a `503 no-time-left` for every request, as the layer answered for a while, would make `sqsafe local up
/// --watch` useless).
#[tokio::test]
async fn an_emulators_deadline_already_passed_is_unknown() {
    let fx = fixture(created(), ApiSettings::default()).await;
    let mut request = charge_request(Some("k-watch"), Some("acme"), "{\"amount\":3}");
    let mut context = lambda_runtime::Context::default();
    context.deadline = 600_000;
    request.extensions_mut().insert(context);
    let (status, headers, _) = send(&fx.app, request).await;
    assert_eq!((status, replayed(&headers)), (StatusCode::CREATED, false));
}

/// Too little of the invocation left to run the handler before the reserve: it is not started and nothing is claimed
/// (no request to the table: a claim made then could not be released in time, and would hold the key until its lease
/// ends), with `503` and `Retry-After`.
#[tokio::test]
async fn a_request_with_no_time_left_before_the_reserve_is_not_started() {
    let fx = fixture(created(), ApiSettings::default()).await;
    let (status, headers, problem) =
        send(&fx.app, in_lambda("k-late", Duration::from_millis(600))).await;
    assert_eq!(status, StatusCode::SERVICE_UNAVAILABLE);
    assert!(String::from_utf8_lossy(&problem).contains("no-time-left"));
    assert!(headers.contains_key("retry-after"));
    assert_eq!(fx.runs.load(Ordering::SeqCst), 0);
    assert_eq!(
        fx.requests.take(),
        Vec::<String>::new(),
        "nothing claimed, nothing released"
    );
    let (status, headers, _) = send(&fx.app, in_lambda("k-late", Duration::from_secs(10))).await;
    assert_eq!((status, replayed(&headers)), (StatusCode::CREATED, false));
}

/// The handler's first run makes its effect, says so, and answers with a body that waits for the test's gate.
#[derive(Clone, Default)]
struct HangUp {
    runs: Arc<AtomicU32>,
    effect_made: Arc<std::sync::Mutex<Option<tokio::sync::oneshot::Sender<()>>>>,
    gate: Arc<std::sync::Mutex<Option<tokio::sync::oneshot::Receiver<()>>>>,
}

async fn charge_then_stream(State(api): State<HangUp>) -> axum::response::Response {
    let n = api.runs.fetch_add(1, Ordering::SeqCst) + 1;
    let gate = api.gate.lock().expect("gate").take();
    if let Some(effect_made) = api.effect_made.lock().expect("effect").take() {
        let _ = effect_made.send(());
    }
    let body = futures::stream::once(async move {
        if let Some(gate) = gate {
            let _ = gate.await;
        }
        Ok::<_, std::convert::Infallible>(format!("{{\"id\":\"ch_{n}\"}}"))
    });
    (StatusCode::CREATED, Body::from_stream(body)).into_response()
}

/// A client that hangs up once the handler has made its effect (a hyper server then drops the request's future, as
/// the payments API's did when charge-payment's HTTP budget ran out) does not leave the effect without its record:
/// the handler's answer is stored all the same and the retry replays it. Before, the dropped future never completed
/// the record, and once the claim's lease ended the retry ran the handler a second time.
#[tokio::test]
async fn a_client_that_hangs_up_after_the_effect_gets_the_replay_on_its_retry() {
    let requests = RequestCounter::default();
    let idem = orders_api_on_moto(&requests, "api-hang-up").await;
    let api = HangUp::default();
    let (effect_tx, effect_rx) = tokio::sync::oneshot::channel();
    let (gate_tx, gate_rx) = tokio::sync::oneshot::channel();
    *api.effect_made.lock().expect("effect") = Some(effect_tx);
    *api.gate.lock().expect("gate") = Some(gate_rx);
    let settings = ApiSettings {
        lease: Duration::from_secs(2),
        ..ApiSettings::default()
    };
    let app = Router::new()
        .route("/charges", post(charge_then_stream))
        .layer(
            IdempotencyLayer::with_settings(
                idem,
                |_: &axum::http::request::Parts| Some("acme".to_owned()),
                settings,
            )
            .expect("layer"),
        )
        .with_state(api.clone());
    let request = || charge_request(Some("k-hang-up"), None, "{\"amount\":5}");

    let call = app.clone().oneshot(request());
    tokio::select! {
        _ = call => panic!("answered before the body's gate opened"),
        _ = effect_rx => {}
    }
    // The request's future is dropped here, between the effect and the storing of its answer; then the answer's
    // body comes (to whoever still reads it).
    let _ = gate_tx.send(());

    // The retry: a 409 while the first request's task stores its answer, then the replay. The lease is 2 s, so a
    // record never completed would be taken over (and the handler run again) well within the 10 s allowed here.
    let started = std::time::Instant::now();
    let (status, headers, body) = loop {
        let answer = send(&app, request()).await;
        if answer.0 != StatusCode::CONFLICT || started.elapsed() > Duration::from_secs(10) {
            break answer;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    };
    assert_eq!(
        (
            status,
            replayed(&headers),
            String::from_utf8_lossy(&body).into_owned()
        ),
        (StatusCode::CREATED, true, "{\"id\":\"ch_1\"}".to_owned()),
        "the retry replays the first run's answer"
    );
    assert_eq!(api.runs.load(Ordering::SeqCst), 1, "the handler ran once");
}
