//! The idempotency layer's span continues its caller's trace, and is exported (`SQSAFE_TRACES=otlp`): before the
//! answer under Lambda, beside it in a server that keeps running. A test binary of its own: the exporter is the
//! process's.

use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use axum::Router;
use axum::body::Body;
use axum::http::{Request, StatusCode};
use axum::routing::post;
use sqsafe::api::IdempotencyLayer;
use sqsafe::layers::telemetry::{LogConfig, Traces};
use sqsafe_testkit::{OtlpReceiver, ReceivedSpan, RequestCounter};
use tower::ServiceExt;

mod api_common;
use api_common::orders_api_on_moto;

async fn app() -> Router {
    let idem = orders_api_on_moto(&RequestCounter::default(), "api-traces").await;
    let caller = |_: &axum::http::request::Parts| Some("acme".to_owned());
    Router::new()
        .route(
            "/charges",
            post(|| async { (StatusCode::CREATED, "{\"id\":\"ch_1\"}") }),
        )
        .layer(
            IdempotencyLayer::new(idem, caller)
                .expect("layer")
                .metrics_writer(|_| {}),
        )
}

fn request(key: &str, trace_header: (&str, &str)) -> Request<Body> {
    Request::post("/charges")
        .header("idempotency-key", key)
        .header(trace_header.0, trace_header.1)
        .body(Body::from("{\"amount\":100}"))
        .expect("request")
}

fn request_spans_of(receiver: &OtlpReceiver, trace_id: &str) -> Vec<ReceivedSpan> {
    receiver
        .spans()
        .into_iter()
        .filter(|s| s.name == "api request" && s.trace_id == trace_id)
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_request_span_is_a_child_of_its_caller_s_and_is_exported() {
    let receiver = OtlpReceiver::start().await;
    sqsafe::layers::telemetry::init_with(LogConfig {
        traces: Traces::Otlp {
            endpoint: receiver.traces_endpoint(),
            service_name: Some("orders-api".into()),
        },
        ..LogConfig::default()
    })
    .expect("subscriber installed");
    let app = app().await;

    // Under lambda_http (the invocation's context in the request): the span is at the collector when the answer is.
    let mut lambda = request(
        "k-lambda",
        (
            "traceparent",
            "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",
        ),
    );
    let mut context = lambda_runtime::Context::default();
    context.deadline = (SystemTime::now() + Duration::from_secs(10))
        .duration_since(UNIX_EPOCH)
        .expect("after the epoch")
        .as_millis()
        .try_into()
        .expect("milliseconds");
    lambda.extensions_mut().insert(context);
    let status = app
        .clone()
        .oneshot(lambda)
        .await
        .expect("infallible")
        .status();
    assert_eq!(status, StatusCode::CREATED);
    let spans = request_spans_of(&receiver, "4bf92f3577b34da6a3ce929d0e0e4736");
    assert_eq!(
        spans.len(),
        1,
        "exported before the answer, in the caller's trace: {:?}",
        receiver.spans()
    );
    assert_eq!(spans[0].parent_span_id.as_deref(), Some("00f067aa0ba902b7"));
    assert_eq!(spans[0].service_name.as_deref(), Some("orders-api"));

    // A long-running server (no invocation): the caller's X-Ray header, the spans sent beside the answer.
    let served = request(
        "k-server",
        (
            "x-amzn-trace-id",
            "Root=1-5759e988-bd862e3fe1be46a994272793;Parent=53995c3f42cd8ad8;Sampled=1",
        ),
    );
    let status = app.oneshot(served).await.expect("infallible").status();
    assert_eq!(status, StatusCode::CREATED);
    let waited = Instant::now();
    let spans = loop {
        let spans = request_spans_of(&receiver, "5759e988bd862e3fe1be46a994272793");
        if !spans.is_empty() || waited.elapsed() > Duration::from_secs(5) {
            break spans;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    };
    assert_eq!(spans.len(), 1, "{:?}", receiver.spans());
    assert_eq!(spans[0].parent_span_id.as_deref(), Some("53995c3f42cd8ad8"));
}
