//! The idempotency layer's log line, captured: in a test binary of its own, since a scoped `tracing` subscriber shares
//! its callsites' interest with every thread of the process.

use std::sync::Arc;

use axum::Router;
use axum::body::Body;
use axum::http::{Request, StatusCode};
use axum::routing::post;
use sqsafe::api::IdempotencyLayer;
use sqsafe_testkit::RequestCounter;
use tower::ServiceExt;

mod api_common;
use api_common::orders_api_on_moto;

async fn app() -> Router {
    let idem = orders_api_on_moto(&RequestCounter::default(), "api-logs").await;
    let caller = |parts: &axum::http::request::Parts| {
        parts
            .headers
            .get("x-caller")
            .and_then(|v| v.to_str().ok())
            .map(str::to_owned)
    };
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

/// Captured log lines.
#[derive(Clone, Default)]
struct Logs(Arc<std::sync::Mutex<Vec<u8>>>);

impl std::io::Write for Logs {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.0.lock().expect("logs").extend_from_slice(buf);
        Ok(buf.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

impl<'a> tracing_subscriber::fmt::MakeWriter<'a> for Logs {
    type Writer = Logs;
    fn make_writer(&'a self) -> Self::Writer {
        self.clone()
    }
}

/// The request's line carries its correlation id and its caller's trace id (from `traceparent`, as a consumer logs
/// its producer's), and neither the key, the caller nor the body.
#[tokio::test]
async fn the_log_line_carries_the_correlation_and_trace_ids_and_no_key_or_body() {
    use tracing_subscriber::layer::SubscriberExt as _;
    let logs = Logs::default();
    let config = sqsafe::layers::telemetry::LogConfig {
        format: sqsafe::layers::telemetry::LogFormat::Json,
        function_name: None,
        ..Default::default()
    };
    let subscriber = tracing_subscriber::registry().with(
        sqsafe::layers::telemetry::layer_with_writer(&config, logs.clone()),
    );
    let _guard = tracing::subscriber::set_default(subscriber);
    let app = app().await;
    let mut request = Request::post("/charges")
        .header("idempotency-key", "k-secret-key")
        .header("x-caller", "acme-caller")
        .body(Body::from("{\"amount\":777123}"))
        .expect("request");
    let headers = request.headers_mut();
    headers.insert("x-correlation-id", "corr-42".parse().expect("header"));
    headers.insert(
        "traceparent",
        "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
            .parse()
            .expect("header"),
    );
    let status = app.oneshot(request).await.expect("infallible").status();
    assert_eq!(status, StatusCode::CREATED);
    let text = String::from_utf8(logs.0.lock().expect("logs").clone()).expect("utf-8");
    let handled: Vec<serde_json::Value> = text
        .lines()
        .map(|l| serde_json::from_str(l).expect("JSON lines"))
        .filter(|l: &serde_json::Value| l.to_string().contains("api request handled"))
        .collect();
    assert_eq!(handled.len(), 1, "{text}");
    let line = handled[0].to_string();
    assert!(line.contains("corr-42"), "{line}");
    assert!(line.contains("4bf92f3577b34da6a3ce929d0e0e4736"), "{line}");
    assert!(line.contains("\"outcome\":\"executed\""), "{line}");
    for secret in ["k-secret-key", "acme-caller", "777123"] {
        assert!(!text.contains(secret), "{secret} logged: {text}");
    }
}
