//! The layer's own answers: problem+json refusals (RFC 9457), the store failing, a replay.

use std::time::{Duration, SystemTime};

use bytes::Bytes;
use http::header::{HeaderValue, RETRY_AFTER};
use http::{Response, StatusCode};
use serde_json::json;
use sqsafe_idempotency::{Error as IdempotencyError, Replayed};
use sqsafe_telemetry::api_metrics::RequestOutcome as Outcome;

use super::body::ApiBody;
use super::headers::{REPLAY_BODY, REPLAYED};
use super::stored::StoredResponse;

/// An answer and how the request ended.
pub(super) type Answer<B> = (Response<ApiBody<B>>, Outcome);

pub(super) fn store_failed<B>(e: &IdempotencyError) -> Answer<B> {
    tracing::error!(error_kind = e.kind(), "idempotency store unavailable");
    let answer = problem(
        StatusCode::SERVICE_UNAVAILABLE,
        "idempotency-store-unavailable",
        "the request was not handled; retry it with the same Idempotency-Key",
    );
    (
        retry_after(answer, Duration::from_secs(1)),
        Outcome::StoreFailed,
    )
}

/// A problem+json answer (RFC 9457), refused before the handler.
pub(super) fn refused<B>(status: StatusCode, kind: &str, detail: &str) -> Answer<B> {
    (problem(status, kind, detail), Outcome::Refused)
}

/// A problem+json answer (RFC 9457).
pub(super) fn problem<B>(status: StatusCode, kind: &str, detail: &str) -> Response<ApiBody<B>> {
    let body = json!({
        "type": format!("https://sqsafe.invalid/problems/{kind}"),
        "title": status.canonical_reason().unwrap_or("error"),
        "status": status.as_u16(),
        "detail": detail,
    });
    let mut answer = Response::new(ApiBody::full(Bytes::from(body.to_string())));
    *answer.status_mut() = status;
    answer.headers_mut().insert(
        http::header::CONTENT_TYPE,
        HeaderValue::from_static("application/problem+json"),
    );
    answer
}

/// `Retry-After` in whole seconds, 1 to 60.
pub(super) fn retry_after<B>(
    mut answer: Response<ApiBody<B>>,
    wait: Duration,
) -> Response<ApiBody<B>> {
    let seconds = wait.as_secs_f64().ceil().clamp(1.0, 60.0) as u64;
    answer
        .headers_mut()
        .insert(RETRY_AFTER, HeaderValue::from(seconds));
    answer
}

/// The time until a claim held until `lease_until` may be taken over (`margin` after it).
pub(super) fn until_claimable(lease_until: SystemTime, margin: Duration) -> Duration {
    (lease_until + margin)
        .duration_since(SystemTime::now())
        .unwrap_or_default()
}

/// A completed key's replay. One whose answer cannot be read back (a record stored with a digest only, or in a
/// shape this version does not read) is still done, so it is never `409` (a client retries that) but `410 Gone`,
/// final for a client: the handler ran, and its answer is gone.
pub(super) fn replay<B>(result: Replayed<StoredResponse>) -> Response<ApiBody<B>> {
    match result {
        Replayed::Value(stored) => stored.into_response(),
        Replayed::Omitted { .. } | Replayed::Unavailable { .. } => {
            let mut answer = problem(
                StatusCode::GONE,
                "replay-unavailable",
                "this Idempotency-Key was handled, and its answer cannot be replayed",
            );
            let headers = answer.headers_mut();
            headers.insert(REPLAYED, HeaderValue::from_static("true"));
            headers.insert(REPLAY_BODY, HeaderValue::from_static("omitted"));
            answer
        }
    }
}

pub(super) fn new_correlation_id() -> String {
    uuid::Uuid::new_v4().to_string()
}
