//! The layer's own answers: problem+json refusals (RFC 9457), the store failing, a replay.

use bytes::Bytes;
use http::header::{HeaderValue, RETRY_AFTER};
use http::{Response, StatusCode};
use http_body_util::Full;
use serde_json::json;
use sqsafe_idempotency::{Error as IdempotencyError, Replayed};
use sqsafe_telemetry::api_metrics::RequestOutcome as Outcome;

use super::headers::REPLAYED;
use super::stored::StoredResponse;

pub(super) fn store_failed(e: &IdempotencyError) -> (Response<Full<Bytes>>, Outcome) {
    tracing::error!(error_kind = e.kind(), "idempotency store unavailable");
    let mut answer = problem(
        StatusCode::SERVICE_UNAVAILABLE,
        "idempotency-store-unavailable",
        "the request was not handled; retry it with the same Idempotency-Key",
    );
    answer
        .headers_mut()
        .insert(RETRY_AFTER, HeaderValue::from(1u64));
    (answer, Outcome::StoreFailed)
}

/// A problem+json answer (RFC 9457), refused before the handler.
pub(super) fn refused(
    status: StatusCode,
    kind: &str,
    detail: &str,
) -> (Response<Full<Bytes>>, Outcome) {
    (problem(status, kind, detail), Outcome::Refused)
}

/// A problem+json answer (RFC 9457).
pub(super) fn problem(status: StatusCode, kind: &str, detail: &str) -> Response<Full<Bytes>> {
    let body = json!({
        "type": format!("https://sqsafe.invalid/problems/{kind}"),
        "title": status.canonical_reason().unwrap_or("error"),
        "status": status.as_u16(),
        "detail": detail,
    });
    Response::builder()
        .status(status)
        .header(http::header::CONTENT_TYPE, "application/problem+json")
        .body(Full::new(Bytes::from(body.to_string())))
        .unwrap_or_else(|_| Response::new(Full::new(Bytes::new())))
}

pub(super) fn replay(result: Replayed<StoredResponse>) -> Response<Full<Bytes>> {
    match result {
        Replayed::Value(stored) => stored.into_response(),
        Replayed::Omitted { .. } | Replayed::Unavailable { .. } => {
            let mut answer = problem(
                StatusCode::CONFLICT,
                "replay-unavailable",
                "this Idempotency-Key was handled, and its answer cannot be replayed",
            );
            answer
                .headers_mut()
                .insert(REPLAYED, HeaderValue::from_static("true"));
            answer
        }
    }
}

pub(super) fn new_correlation_id() -> String {
    uuid::Uuid::new_v4().to_string()
}
