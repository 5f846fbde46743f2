//! The layer under the ordinary variety of real APIs (issue 47): what the URL says, transient answers, a handler past
//! its lease, stored sizes, the engine's fingerprint fields, streams, the record's name, stored headers, a client
//! that hangs up, bodies of different kinds. Each test failed on the layer before its fix.

use std::sync::atomic::{AtomicU32, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use axum::Router;
use axum::body::Body;
use axum::extract::{Path, RawQuery};
use axum::http::{HeaderMap, Request, StatusCode};
use axum::response::IntoResponse;
use axum::routing::{get, post};
use http_body_util::BodyExt;
use sqsafe::api::{ApiSettings, IdempotencyLayer};
use sqsafe::layers::idempotency::{DynamoDbStore, FingerprintFields, Idempotency};
use sqsafe_testkit::RequestCounter;
use tower::ServiceExt;

use super::{replayed, send};
use crate::api_common::OrdersTable;

fn layer(
    idem: Idempotency<DynamoDbStore>,
    settings: ApiSettings,
) -> IdempotencyLayer<DynamoDbStore> {
    IdempotencyLayer::with_settings(
        idem,
        |_: &axum::http::request::Parts| Some("acme".to_owned()),
        settings,
    )
    .expect("layer")
    .metrics_writer(|_| {})
}

async fn engine(prefix: &str) -> (OrdersTable, Idempotency<DynamoDbStore>) {
    let table = OrdersTable::create(&RequestCounter::default(), prefix).await;
    let idem = table.engine("orders-api", 1, |b| b);
    (table, idem)
}

fn post_to(uri: &str, key: &str, content_type: Option<&str>, body: &str) -> Request<Body> {
    let mut request = Request::post(uri).header("idempotency-key", key);
    if let Some(content_type) = content_type {
        request = request.header("content-type", content_type);
    }
    request.body(Body::from(body.to_owned())).expect("request")
}

const JSON: Option<&str> = Some("application/json");

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

/// Counts the handler's runs.
#[derive(Clone, Default)]
struct Runs(Arc<AtomicU32>);

impl Runs {
    fn next(&self) -> u32 {
        self.0.fetch_add(1, Ordering::SeqCst) + 1
    }
    fn get(&self) -> u32 {
        self.0.load(Ordering::SeqCst)
    }
}

/// 1. One key on `/orders/1/cancel`, then on `/orders/2/cancel` with the same body: the second is another request
/// under a used key (`422`), never order 1's answer replayed (before: the matched route `/orders/{id}/cancel` was
/// fingerprinted, and order 2 got order 1's stored answer). The same for the query string.
#[tokio::test]
async fn one_key_on_another_path_or_query_is_refused_never_replayed() {
    let (_table, idem) = engine("api-url").await;
    let runs = Runs::default();
    let counted = runs.clone();
    let counted_too = runs.clone();
    let app = Router::new()
        .route(
            "/orders/{id}/cancel",
            post(move |Path(id): Path<String>| async move {
                counted.next();
                (StatusCode::OK, format!("{{\"cancelled\":\"{id}\"}}"))
            }),
        )
        .route(
            "/charges",
            post(move |RawQuery(query): RawQuery| async move {
                counted_too.next();
                (
                    StatusCode::CREATED,
                    format!("{{\"query\":\"{}\"}}", query.unwrap_or_default()),
                )
            }),
        )
        .layer(layer(idem, ApiSettings::default()));

    let (status, _, body) = send(&app, post_to("/orders/1/cancel", "k-url", JSON, "{}")).await;
    assert_eq!(
        (status, text(&body)),
        (StatusCode::OK, "{\"cancelled\":\"1\"}".to_owned())
    );
    let (status, headers, body) =
        send(&app, post_to("/orders/2/cancel", "k-url", JSON, "{}")).await;
    assert_eq!(status, StatusCode::UNPROCESSABLE_ENTITY, "{}", text(&body));
    assert!(
        !replayed(&headers),
        "order 1's answer is never replayed for order 2"
    );
    // The same path again is the same request: the replay.
    let (status, headers, body) =
        send(&app, post_to("/orders/1/cancel", "k-url", JSON, "{}")).await;
    assert_eq!(
        (status, replayed(&headers), text(&body)),
        (StatusCode::OK, true, "{\"cancelled\":\"1\"}".to_owned())
    );

    let (status, _, _) = send(
        &app,
        post_to("/charges?currency=usd", "k-query", JSON, "{}"),
    )
    .await;
    assert_eq!(status, StatusCode::CREATED);
    let (status, headers, _) = send(
        &app,
        post_to("/charges?currency=eur", "k-query", JSON, "{}"),
    )
    .await;
    assert_eq!(
        (status, replayed(&headers)),
        (StatusCode::UNPROCESSABLE_ENTITY, false)
    );
    let (status, headers, _) = send(
        &app,
        post_to("/charges?currency=usd", "k-query", JSON, "{}"),
    )
    .await;
    assert_eq!((status, replayed(&headers)), (StatusCode::CREATED, true));
    assert_eq!(
        runs.get(),
        2,
        "one run per request, none for the refused ones"
    );
}

/// 2. A status the client retries (a rate limiter's 429, a timeout layer's 408, a 409 of the handler's own, a 425)
/// releases the key and passes through with its `Retry-After`; the retry runs the handler. Before, any 4xx was
/// stored and replayed for the whole window: the client's retries got the 429 forever.
#[tokio::test]
async fn an_answer_the_client_retries_is_never_stored() {
    let (table, idem) = engine("api-transient").await;
    let runs = Runs::default();
    let counted = runs.clone();
    let app = Router::new()
        .route(
            "/charges",
            post(move || async move {
                match counted.next() {
                    1 => (
                        StatusCode::TOO_MANY_REQUESTS,
                        [("retry-after", "7")],
                        "slow down",
                    )
                        .into_response(),
                    2 => (StatusCode::REQUEST_TIMEOUT, "too slow").into_response(),
                    3 => (StatusCode::CONFLICT, "busy").into_response(),
                    4 => (StatusCode::from_u16(425).expect("425"), "too early").into_response(),
                    _ => (StatusCode::CREATED, "{\"id\":\"ch_1\"}").into_response(),
                }
            }),
        )
        .layer(layer(idem, ApiSettings::default()));
    let request = || post_to("/charges", "k-429", JSON, "{\"amount\":1}");
    let (status, headers, _) = send(&app, request()).await;
    assert_eq!(
        (status, replayed(&headers)),
        (StatusCode::TOO_MANY_REQUESTS, false)
    );
    assert_eq!(
        headers["retry-after"], "7",
        "its Retry-After passes through"
    );
    assert!(
        table.records().await.is_empty(),
        "the key is released, nothing stored"
    );
    for expected in [
        StatusCode::REQUEST_TIMEOUT,
        StatusCode::CONFLICT,
        StatusCode::from_u16(425).expect("425"),
    ] {
        let (status, headers, _) = send(&app, request()).await;
        assert_eq!((status, replayed(&headers)), (expected, false));
    }
    let (status, headers, _) = send(&app, request()).await;
    assert_eq!((status, replayed(&headers)), (StatusCode::CREATED, false));
    let (status, headers, _) = send(&app, request()).await;
    assert_eq!((status, replayed(&headers)), (StatusCode::CREATED, true));
    assert_eq!(runs.get(), 5);
}

/// A final 4xx (and a 3xx) is stored and replayed: the client does not retry it either.
#[tokio::test]
async fn a_final_answer_is_stored_whatever_its_class() {
    let (_table, idem) = engine("api-final").await;
    let runs = Runs::default();
    let counted = runs.clone();
    let app = Router::new()
        .route(
            "/orders/{status}",
            post(move |Path(status): Path<u16>| async move {
                counted.next();
                let status = StatusCode::from_u16(status).expect("status");
                (status, [("location", "/orders/o-1")], "{}").into_response()
            }),
        )
        .layer(layer(idem, ApiSettings::default()));
    for status in [200u16, 204, 303, 400, 402, 404, 410, 422] {
        let key = format!("k-{status}");
        let uri = format!("/orders/{status}");
        let (first, _, _) = send(&app, post_to(&uri, &key, JSON, "{}")).await;
        let (again, headers, _) = send(&app, post_to(&uri, &key, JSON, "{}")).await;
        assert_eq!(
            (first.as_u16(), again.as_u16(), replayed(&headers)),
            (status, status, true)
        );
    }
    assert_eq!(runs.get(), 8);
}

/// What a handler of `delay` answers, after its effect (counted at its start).
fn slow_app(
    idem: Idempotency<DynamoDbStore>,
    settings: ApiSettings,
    delay: Duration,
) -> (Router, Runs) {
    let runs = Runs::default();
    let counted = runs.clone();
    let app = Router::new()
        .route(
            "/charges",
            post(move || async move {
                let n = counted.next();
                tokio::time::sleep(delay).await;
                (StatusCode::CREATED, format!("{{\"id\":\"ch_{n}\"}}"))
            }),
        )
        .layer(layer(idem, settings));
    (app, runs)
}

/// Sends `request` until it is not `409`, for at most `limit`.
async fn until_not_in_flight(
    app: &Router,
    request: impl Fn() -> Request<Body>,
    limit: Duration,
) -> (StatusCode, HeaderMap, Vec<u8>) {
    let started = Instant::now();
    loop {
        let answer = send(app, request()).await;
        if answer.0 != StatusCode::CONFLICT || started.elapsed() > limit {
            return answer;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// 3. A handler that outlives its lease (1 s here; its effect first, then a slow write of 2.5 s) runs once: its claim
/// is extended while it runs, a repeat meanwhile gets `409`, and its answer is stored when it ends and replayed.
/// Before, the handler was stopped at the lease and its key released: each retry ran the effect again (three
/// requests, three 504s, three effects).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_handler_that_outlives_its_lease_runs_once_and_its_answer_is_replayed() {
    let (_table, idem) = engine("api-lease").await;
    let settings = ApiSettings {
        lease: Duration::from_secs(1),
        ..ApiSettings::default()
    };
    let (app, runs) = slow_app(idem, settings, Duration::from_millis(2_500));
    let request = || post_to("/charges", "k-slow", JSON, "{\"amount\":1}");
    let first = tokio::spawn({
        let app = app.clone();
        async move { send(&app, request()).await }
    });
    // Past the first lease (and the takeover margin: 1 s + 2 s would have passed by 3 s): repeats get 409.
    for _ in 0..2 {
        tokio::time::sleep(Duration::from_millis(900)).await;
        let (status, headers, _) = send(&app, request()).await;
        assert_eq!(status, StatusCode::CONFLICT, "in flight, not run again");
        assert!(headers.contains_key("retry-after"));
    }
    let (status, headers, body) = first.await.expect("first");
    assert_eq!(
        (status, replayed(&headers), text(&body)),
        (StatusCode::CREATED, false, "{\"id\":\"ch_1\"}".to_owned())
    );
    let (status, headers, body) = send(&app, request()).await;
    assert_eq!(
        (status, replayed(&headers), text(&body)),
        (StatusCode::CREATED, true, "{\"id\":\"ch_1\"}".to_owned())
    );
    // Well past the lease and the margin: still the replay, never a second run.
    tokio::time::sleep(Duration::from_millis(3_100)).await;
    let (status, headers, _) = send(&app, request()).await;
    assert_eq!((status, replayed(&headers)), (StatusCode::CREATED, true));
    assert_eq!(runs.get(), 1);
}

/// Outside Lambda, a client waits `answer_within` (0.5 s here) and gets `504`; the handler runs on under its extended
/// claim, the retry gets `409` while it runs, then its answer.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_client_that_waited_its_time_gets_504_and_then_the_replay() {
    let (_table, idem) = engine("api-answer-within").await;
    let settings = ApiSettings {
        lease: Duration::from_secs(1),
        answer_within: Duration::from_millis(500),
        ..ApiSettings::default()
    };
    let (app, runs) = slow_app(idem, settings, Duration::from_millis(2_000));
    let request = || post_to("/charges", "k-504", JSON, "{\"amount\":1}");
    let started = Instant::now();
    let (status, headers, body) = send(&app, request()).await;
    assert_eq!(status, StatusCode::GATEWAY_TIMEOUT, "{}", text(&body));
    assert!(text(&body).contains("handler-still-running"));
    assert_eq!(headers["retry-after"], "1");
    assert!(started.elapsed() < Duration::from_millis(1_500));
    let (status, headers, body) = until_not_in_flight(&app, request, Duration::from_secs(10)).await;
    assert_eq!(
        (status, replayed(&headers), text(&body)),
        (StatusCode::CREATED, true, "{\"id\":\"ch_1\"}".to_owned())
    );
    assert_eq!(runs.get(), 1);
}

/// A handler that hangs never holds its key for good: at `max_handler_time` it is stopped and its claim kept until
/// its lease ends (it may have taken effect), as a crash would leave it; then a retry runs it again.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_handler_that_hangs_is_stopped_and_its_claim_taken_over_after_its_lease() {
    let (_table, idem) = engine("api-hangs").await;
    let runs = Runs::default();
    let counted = runs.clone();
    let settings = ApiSettings {
        lease: Duration::from_secs(1),
        max_handler_time: Duration::from_secs(1),
        ..ApiSettings::default()
    };
    let app = Router::new()
        .route(
            "/charges",
            post(move || async move {
                if counted.next() == 1 {
                    std::future::pending::<()>().await;
                }
                (StatusCode::CREATED, "{\"id\":\"ch_2\"}")
            }),
        )
        .layer(layer(idem, settings));
    let request = || post_to("/charges", "k-hangs", JSON, "{}");
    let started = Instant::now();
    let (status, headers, body) = send(&app, request()).await;
    assert_eq!(status, StatusCode::GATEWAY_TIMEOUT, "{}", text(&body));
    assert!(text(&body).contains("handler-timed-out"));
    assert!(headers.contains_key("retry-after"));
    assert!(started.elapsed() < Duration::from_secs(3));
    let (status, _, _) = send(&app, request()).await;
    assert_eq!(status, StatusCode::CONFLICT, "kept, not released at once");
    let (status, headers, body) = until_not_in_flight(&app, request, Duration::from_secs(10)).await;
    assert_eq!(
        (status, replayed(&headers), text(&body)),
        (StatusCode::CREATED, false, "{\"id\":\"ch_2\"}".to_owned())
    );
    assert_eq!(runs.get(), 2);
}

/// 4. A completed key never answers `409`: the cap is on what is stored (the record's JSON), so a body under the
/// cap raw that grows past the engine's when stored (47 KiB of short JSON strings, each `"` escaped) is stored
/// without its body, and a repeat gets the status. Before, only a digest was stored and every repeat got
/// `409 replay-unavailable` for the whole window, which a client reads as "in flight" and retries.
#[tokio::test]
async fn a_completed_key_never_answers_409() {
    let (_table, idem) = engine("api-sized").await;
    let runs = Runs::default();
    let counted = runs.clone();
    let strings = format!("[{}\"a\"]", "\"a\",".repeat(47 * 1024 / 4));
    let app = Router::new()
        .route(
            "/reports",
            post(move || async move {
                counted.next();
                (
                    StatusCode::OK,
                    [("content-type", "application/json")],
                    strings,
                )
            }),
        )
        .layer(layer(idem, ApiSettings::default()));
    let (status, _, body) = send(&app, post_to("/reports", "k-big", JSON, "{}")).await;
    assert_eq!(status, StatusCode::OK);
    assert!(body.len() > 47 * 1024);
    let (status, headers, body) = send(&app, post_to("/reports", "k-big", JSON, "{}")).await;
    assert_eq!(status, StatusCode::OK, "{}", text(&body));
    assert!(replayed(&headers));
    assert_eq!(headers["idempotent-replay-body"], "omitted");
    assert_eq!(headers["content-type"], "application/json");
    assert!(body.is_empty());
    assert_eq!(runs.get(), 1);
}

/// 5. The layer's fingerprint is its own: an `Idempotency` built with fingerprint fields for a consumer's payload
/// (`/amount`) still refuses other content under a used key. Before, the fields were applied to the layer's own
/// envelope, where no `/amount` exists: every request fingerprinted alike and other content was replayed.
#[tokio::test]
async fn the_engines_fingerprint_fields_do_not_apply_to_requests() {
    let table = OrdersTable::create(&RequestCounter::default(), "api-fields").await;
    let idem = table.engine("orders-api", 1, |b| {
        b.fingerprint_fields(FingerprintFields::only(["/amount"]))
    });
    let (app, runs) = slow_app(idem, ApiSettings::default(), Duration::ZERO);
    let (status, _, _) = send(
        &app,
        post_to("/charges", "k-fields", JSON, "{\"amount\":1}"),
    )
    .await;
    assert_eq!(status, StatusCode::CREATED);
    let (status, headers, _) = send(
        &app,
        post_to("/charges", "k-fields", JSON, "{\"amount\":2}"),
    )
    .await;
    assert_eq!(
        (status, replayed(&headers)),
        (StatusCode::UNPROCESSABLE_ENTITY, false)
    );
    assert_eq!(runs.get(), 1);
}

/// A body of `chunks` chunks of 64 KiB, made one at a time as they are read; `made` counts those made.
fn lazy_body(chunks: usize, made: Arc<AtomicUsize>) -> Body {
    let stream = futures::stream::unfold(0usize, move |i| {
        let made = Arc::clone(&made);
        async move {
            (i < chunks).then(|| {
                made.fetch_add(1, Ordering::SeqCst);
                (
                    Ok::<_, std::convert::Infallible>(bytes::Bytes::from(vec![b'x'; 64 * 1024])),
                    i + 1,
                )
            })
        }
    });
    Body::from_stream(stream)
}

/// 6. Streams pass through: a server-sent-events route (an answer that never ends) answers its first event, and a
/// 50 MB download streams, its first chunk at the client while at most a few of its 800 chunks were made. Before,
/// every answer was collected in memory first: the SSE route never answered and the download sat whole in memory.
#[tokio::test]
async fn unguarded_answers_stream_through_never_buffered() {
    let (_table, idem) = engine("api-streams").await;
    let made = Arc::new(AtomicUsize::new(0));
    let made_by = Arc::clone(&made);
    let app = Router::new()
        .route(
            "/events",
            get(|| async {
                let first = futures::stream::once(async {
                    Ok::<_, std::convert::Infallible>(bytes::Bytes::from_static(b"data: hello\n\n"))
                });
                let stream = futures::StreamExt::chain(first, futures::stream::pending());
                (
                    [("content-type", "text/event-stream")],
                    Body::from_stream(stream),
                )
            }),
        )
        .route(
            "/download",
            get(move || async move { lazy_body(800, Arc::clone(&made_by)) }),
        )
        .layer(layer(idem, ApiSettings::default()));

    let answer = tokio::time::timeout(
        Duration::from_secs(5),
        app.clone().oneshot(
            Request::get("/events")
                .body(Body::empty())
                .expect("request"),
        ),
    )
    .await
    .expect("the SSE route answers at once")
    .expect("infallible");
    let mut body = answer.into_body();
    let event = tokio::time::timeout(Duration::from_secs(5), body.frame())
        .await
        .expect("its first event arrives while the stream stays open")
        .expect("a frame")
        .expect("data");
    assert_eq!(event.into_data().expect("data"), "data: hello\n\n");

    let answer = app
        .oneshot(
            Request::get("/download")
                .body(Body::empty())
                .expect("request"),
        )
        .await
        .expect("infallible");
    let mut body = answer.into_body();
    let first = body.frame().await.expect("a frame").expect("data");
    assert_eq!(first.into_data().expect("data").len(), 64 * 1024);
    assert!(
        made.load(Ordering::SeqCst) <= 2,
        "streamed, not collected: {} chunks made",
        made.load(Ordering::SeqCst)
    );
    let mut total = 64 * 1024;
    while let Some(frame) = body.frame().await {
        total += frame.expect("data").into_data().expect("data").len();
    }
    assert_eq!(total, 800 * 64 * 1024);
}

/// A guarded answer is read up to the cap only: a 50 MB answer to a POST is stored without its body (a repeat gets
/// its status and headers), and streams to the first client with at most the cap read ahead.
#[tokio::test]
async fn a_guarded_answer_over_the_cap_streams_and_is_stored_without_its_body() {
    let (_table, idem) = engine("api-big-answer").await;
    let made = Arc::new(AtomicUsize::new(0));
    let made_by = Arc::clone(&made);
    let runs = Runs::default();
    let counted = runs.clone();
    let app = Router::new()
        .route(
            "/exports",
            post(move || async move {
                counted.next();
                (
                    [("content-type", "application/octet-stream")],
                    lazy_body(800, Arc::clone(&made_by)),
                )
            }),
        )
        .layer(layer(idem, ApiSettings::default()));
    let answer = app
        .clone()
        .oneshot(post_to("/exports", "k-export", JSON, "{}"))
        .await
        .expect("infallible");
    assert_eq!(answer.status(), StatusCode::OK);
    let mut body = answer.into_body();
    let first = body
        .frame()
        .await
        .expect("a frame")
        .expect("data")
        .into_data()
        .expect("data");
    // 48 KiB is kept at most: the first chunk (64 KiB) is past it, and the rest is not read ahead.
    assert_eq!(first.len(), 64 * 1024);
    assert!(
        made.load(Ordering::SeqCst) <= 2,
        "{} chunks made",
        made.load(Ordering::SeqCst)
    );
    let mut total = first.len();
    while let Some(frame) = body.frame().await {
        total += frame.expect("data").into_data().expect("data").len();
    }
    assert_eq!(total, 800 * 64 * 1024);
    let (status, headers, body) = send(&app, post_to("/exports", "k-export", JSON, "{}")).await;
    assert_eq!((status, replayed(&headers)), (StatusCode::OK, true));
    assert_eq!(headers["idempotent-replay-body"], "omitted");
    assert_eq!(headers["content-type"], "application/octet-stream");
    assert!(body.is_empty());
    assert_eq!(runs.get(), 1);
}

/// 7. The records are named after the `Idempotency` (its name and version): two APIs on one table do not share keys,
/// and bumping the version stops old replays. Before, every layer named its records `("api", 1)`.
#[tokio::test]
async fn records_take_the_idempotencys_name_and_version() {
    let table = OrdersTable::create(&RequestCounter::default(), "api-names").await;
    let (v1, v1_runs) = slow_app(
        table.engine("orders-api", 1, |b| b),
        ApiSettings::default(),
        Duration::ZERO,
    );
    let (v2, v2_runs) = slow_app(
        table.engine("orders-api", 2, |b| b),
        ApiSettings::default(),
        Duration::ZERO,
    );
    let (refunds, refunds_runs) = slow_app(
        table.engine("refunds-api", 1, |b| b),
        ApiSettings::default(),
        Duration::ZERO,
    );
    let request = || post_to("/charges", "k-name", JSON, "{\"amount\":1}");
    for app in [&v1, &v2, &refunds] {
        let (status, headers, _) = send(app, request()).await;
        assert_eq!((status, replayed(&headers)), (StatusCode::CREATED, false));
    }
    assert_eq!(
        (v1_runs.get(), v2_runs.get(), refunds_runs.get()),
        (1, 1, 1)
    );
    let mut keys: Vec<String> = table
        .records()
        .await
        .iter()
        .map(|r| sqsafe_testkit::item_string(r, "pk"))
        .collect();
    keys.sort();
    assert_eq!(keys.len(), 3, "{keys:?}");
    assert!(keys[0].starts_with("orders-api#v1#"), "{keys:?}");
    assert!(keys[1].starts_with("orders-api#v2#"), "{keys:?}");
    assert!(keys[2].starts_with("refunds-api#v1#"), "{keys:?}");
}

/// 8. What is stored of an answer is an allow-list: a replay never carries a cookie, a challenge, a hop-by-hop or
/// per-answer header, nor one echoing a token. Before, everything but a short deny-list was replayed.
#[tokio::test]
async fn a_replay_carries_only_the_allowed_headers() {
    let (_table, idem) = engine("api-headers").await;
    let settings = ApiSettings {
        stored_headers: vec![axum::http::HeaderName::from_static("x-order-version")],
        ..ApiSettings::default()
    };
    let app = Router::new()
        .route(
            "/orders",
            post(|| async {
                (
                    StatusCode::CREATED,
                    [
                        ("content-type", "application/json"),
                        ("location", "/orders/o-1"),
                        ("etag", "\"v1\""),
                        ("link", "</orders/o-1/items>; rel=items"),
                        ("cache-control", "no-store"),
                        ("x-order-version", "3"),
                        ("set-cookie", "session=abc"),
                        ("www-authenticate", "Bearer realm=orders"),
                        ("age", "12"),
                        ("expires", "Thu, 01 Jan 2026 00:00:00 GMT"),
                        ("retry-after", "30"),
                        ("x-session-token", "tok_secret"),
                    ],
                    "{\"id\":\"o-1\"}",
                )
            }),
        )
        .layer(layer(idem, settings));
    let request = || post_to("/orders", "k-headers", JSON, "{}");
    let (_, first, _) = send(&app, request()).await;
    assert_eq!(
        first["x-session-token"], "tok_secret",
        "the first answer is the handler's own"
    );
    let (status, headers, _) = send(&app, request()).await;
    assert_eq!((status, replayed(&headers)), (StatusCode::CREATED, true));
    for (name, value) in [
        ("content-type", "application/json"),
        ("location", "/orders/o-1"),
        ("etag", "\"v1\""),
        ("link", "</orders/o-1/items>; rel=items"),
        ("cache-control", "no-store"),
        ("x-order-version", "3"),
    ] {
        assert_eq!(
            headers.get(name).map(|v| v.to_str().expect("ascii")),
            Some(value),
            "{name}"
        );
    }
    for name in [
        "set-cookie",
        "www-authenticate",
        "age",
        "expires",
        "retry-after",
        "x-session-token",
    ] {
        assert!(headers.get(name).is_none(), "{name} replayed: {headers:?}");
    }
}

/// A credential, a cookie or a hop-by-hop header named to be stored is refused when the layer is built.
#[tokio::test]
async fn a_header_that_is_never_stored_is_refused_when_the_layer_is_built() {
    let (_table, idem) = engine("api-headers-refused").await;
    for name in [
        "set-cookie",
        "authorization",
        "connection",
        "upgrade",
        "content-encoding",
    ] {
        let settings = ApiSettings {
            stored_headers: vec![axum::http::HeaderName::from_static(name)],
            ..ApiSettings::default()
        };
        let refused = IdempotencyLayer::with_settings(
            idem.clone(),
            |_: &axum::http::request::Parts| None,
            settings,
        );
        let err = refused.err().expect("refused");
        assert!(err.to_string().contains(name), "{err}");
    }
}

/// 9. A client that hangs up after the handler made its effect, and a completion that then fails (the table gone):
/// the request's metric line still counts `RequestsStoreFailed`, the alarm the book relies on. Before, the line was
/// written by the request's future, which hyper dropped with the connection.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_hang_up_still_writes_the_metric_even_when_the_store_then_fails() {
    let (table, idem) = engine("api-hang-up-metric").await;
    let lines = Arc::new(Mutex::new(Vec::<serde_json::Value>::new()));
    let written = Arc::clone(&lines);
    let (effect_tx, effect_rx) = tokio::sync::oneshot::channel::<()>();
    let (gate_tx, gate_rx) = tokio::sync::oneshot::channel::<()>();
    let effect_tx = Arc::new(Mutex::new(Some(effect_tx)));
    let gate_rx = Arc::new(Mutex::new(Some(gate_rx)));
    let app = Router::new()
        .route(
            "/charges",
            post(move || async move {
                if let Some(tx) = effect_tx.lock().expect("effect").take() {
                    let _ = tx.send(());
                }
                let gate = gate_rx.lock().expect("gate").take();
                if let Some(gate) = gate {
                    let _ = gate.await;
                }
                (StatusCode::CREATED, "{\"id\":\"ch_1\"}")
            }),
        )
        .layer(
            IdempotencyLayer::with_settings(
                idem,
                |_: &axum::http::request::Parts| Some("acme".to_owned()),
                ApiSettings::default(),
            )
            .expect("layer")
            .metrics_writer(move |line| {
                written
                    .lock()
                    .expect("lines")
                    .push(serde_json::from_slice(line).expect("JSON"));
            }),
        );
    let call = app.oneshot(post_to("/charges", "k-gone", JSON, "{}"));
    tokio::select! {
        _ = call => panic!("answered before the gate opened"),
        _ = effect_rx => {}
    }
    // The client is gone; the table goes too; then the handler answers.
    table
        .client
        .delete_table()
        .table_name(&table.name)
        .send()
        .await
        .expect("delete table");
    let _ = gate_tx.send(());
    let started = Instant::now();
    while lines.lock().expect("lines").is_empty() && started.elapsed() < Duration::from_secs(20) {
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let lines = lines.lock().expect("lines");
    assert_eq!(
        lines.len(),
        1,
        "one line for the request whose client hung up: {lines:?}"
    );
    assert_eq!(lines[0]["RequestsStoreFailed"], 1, "{}", lines[0]);
}

/// A request's content type (if any) and body.
type Sent<'a> = (Option<&'a str>, &'a str);

/// 10. Bodies of different kinds never fingerprint alike: the JSON `{"text":"abc"}` is not the plain body `abc`; a
/// text body that parses as JSON is compared byte for byte (`1.0` is not `1`); JSON numbers beyond an `f64` are
/// compared exactly; the content type counts. Before, the body was parsed as JSON whatever its type, an `f64` held
/// its numbers, and a text body was wrapped as `{"text": ...}`.
#[tokio::test]
async fn bodies_of_different_kinds_never_match() {
    let (_table, idem) = engine("api-kinds").await;
    let (app, runs) = slow_app(idem, ApiSettings::default(), Duration::ZERO);
    let cases: [(&str, Sent, Sent); 5] = [
        (
            "k-kind",
            (JSON, "{\"text\":\"abc\"}"),
            (Some("text/plain"), "abc"),
        ),
        (
            "k-text-number",
            (Some("text/plain"), "1.0"),
            (Some("text/plain"), "1"),
        ),
        (
            "k-big-number",
            (JSON, "{\"amount\":12345678901234567890123}"),
            (JSON, "{\"amount\":12345678901234567890124}"),
        ),
        (
            "k-type",
            (JSON, "{\"a\":1}"),
            (Some("text/plain"), "{\"a\":1}"),
        ),
        ("k-no-type", (Some("text/plain"), "abc"), (None, "abc")),
    ];
    for (key, (first_type, first), (then_type, then)) in cases {
        let (status, _, _) = send(&app, post_to("/charges", key, first_type, first)).await;
        assert_eq!(status, StatusCode::CREATED, "{key}");
        let (status, headers, _) = send(&app, post_to("/charges", key, then_type, then)).await;
        assert_eq!(
            (status, replayed(&headers)),
            (StatusCode::UNPROCESSABLE_ENTITY, false),
            "{key}"
        );
    }
    assert_eq!(runs.get(), 5);
    // What stays alike: JSON's key order, spacing and the spelling of a number.
    let (status, headers, _) = send(
        &app,
        post_to(
            "/charges",
            "k-big-number",
            JSON,
            "{ \"amount\" : 1.2345678901234567890123e22 }",
        ),
    )
    .await;
    assert_eq!((status, replayed(&headers)), (StatusCode::CREATED, true));
}
