//! The payments API's routes (see the [module documentation](super) for what each answers).

use std::sync::Arc;

use axum::body::Body;
use axum::extract::State;
use axum::http::header::{ALLOW, CONTENT_TYPE, HeaderMap, HeaderName, HeaderValue};
use axum::http::{StatusCode, Uri};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use axum::{Json, Router};
use bytes::Bytes;
use http_body_util::{BodyExt, LengthLimitError, Limited};
use serde::Serialize;
use serde_json::Value;

use super::fault::Fault;
use super::fingerprint::fingerprint;
use super::ledger::{Admission, ChargeRequest, StoredResponse};
use super::server::Shared;

/// Longest accepted `Idempotency-Key`, in bytes (header values are ASCII).
const MAX_KEY_LEN: usize = 255;
/// Largest accepted request body.
const MAX_BODY_BYTES: usize = 64 * 1024;

const IDEMPOTENCY_KEY: HeaderName = HeaderName::from_static("idempotency-key");
const CORRELATION_ID: HeaderName = HeaderName::from_static("x-correlation-id");
const IDEMPOTENT_REPLAYED: HeaderName = HeaderName::from_static("idempotent-replayed");

/// The routes, each with a `405` (and its `Allow`) for the other methods, HEAD included (axum would answer it with
/// the GET handler), and a JSON `404` elsewhere.
pub(crate) fn router(shared: Arc<Shared>) -> Router {
    let only = |allow: &'static str| move || async move { method_not_allowed(allow) };
    Router::new()
        .route(
            "/health",
            get(health).head(only("GET")).fallback(only("GET")),
        )
        .route(
            "/v1/charges",
            get(list_charges)
                .post(create_charge)
                .head(only("GET, POST"))
                .fallback(only("GET, POST")),
        )
        .fallback(|uri: Uri| async move {
            error(
                StatusCode::NOT_FOUND,
                "not_found",
                &format!("no route for {}", uri.path()),
            )
        })
        .with_state(shared)
}

async fn health() -> Response {
    json(StatusCode::OK, &serde_json::json!({ "status": "ok" }))
}

async fn list_charges(State(shared): State<Arc<Shared>>) -> Response {
    json(StatusCode::OK, &shared.charges())
}

async fn create_charge(
    State(shared): State<Arc<Shared>>,
    headers: HeaderMap,
    body: Body,
) -> Response {
    shared.ledger().count_request();
    let (key, correlation_id) = match read_headers(&headers) {
        Ok(found) => found,
        Err(rejection) => return bad_request(&shared, rejection),
    };
    let (body, charge) = match read_body(body).await {
        Ok(parsed) => parsed,
        Err(rejection) => return bad_request(&shared, rejection),
    };
    let fingerprint = fingerprint(&body);

    let admission = shared
        .ledger()
        .admit(&key, &fingerprint, &charge.payment_id);
    let fault = match admission {
        Admission::New(fault) => fault,
        Admission::Replay(stored) => {
            tracing::debug!(key, "replaying stored response");
            return replay(stored);
        }
        Admission::InFlight => {
            return error(
                StatusCode::CONFLICT,
                "request_in_flight",
                "a request with this Idempotency-Key is still being processed; retry later",
            );
        }
        Admission::Mismatch => {
            return error(
                StatusCode::UNPROCESSABLE_ENTITY,
                "idempotency_key_reused",
                "this Idempotency-Key was used with a different request body",
            );
        }
    };

    let in_flight = InFlight::new(shared.clone(), key);
    if let Some(delay) = &shared.delay {
        delay.delay().await;
    }
    match fault {
        Fault::Before => {
            in_flight.fail_before();
            unavailable()
        }
        Fault::After => {
            in_flight.charge(charge, correlation_id, true);
            unavailable()
        }
        Fault::None => stored(in_flight.charge(charge, correlation_id, false)),
    }
}

/// Owns an in-flight key until it is charged or released. If the request is dropped first (the client went away,
/// the server shut down), the key is released so that a retry can charge, as a crash before charging would leave it.
struct InFlight {
    shared: Arc<Shared>,
    key: String,
    settled: bool,
}

impl InFlight {
    fn new(shared: Arc<Shared>, key: String) -> Self {
        Self {
            shared,
            key,
            settled: false,
        }
    }

    fn fail_before(mut self) {
        self.settled = true;
        let mut ledger = self.shared.ledger();
        ledger.release(&self.key);
        ledger.count_failed_before();
        tracing::info!(key = self.key, "injected failure before charging");
    }

    fn charge(
        mut self,
        charge: ChargeRequest,
        correlation_id: Option<String>,
        fail_after: bool,
    ) -> StoredResponse {
        self.settled = true;
        let mut ledger = self.shared.ledger();
        let stored = ledger.charge(&self.key, charge, correlation_id);
        if fail_after {
            ledger.count_failed_after();
            tracing::info!(key = self.key, "charged, injected failure after charging");
        } else {
            tracing::info!(key = self.key, "charged");
        }
        stored
    }
}

impl Drop for InFlight {
    fn drop(&mut self) {
        if !self.settled {
            self.shared.ledger().release(&self.key);
        }
    }
}

fn read_headers(headers: &HeaderMap) -> Result<(String, Option<String>), Rejection> {
    let key = match headers.get(IDEMPOTENCY_KEY) {
        None => {
            return Err(Rejection::new(
                StatusCode::BAD_REQUEST,
                "missing_idempotency_key",
                "the Idempotency-Key header is required",
            ));
        }
        Some(value) => value.to_str().ok().map(str::trim).unwrap_or_default(),
    };
    if key.is_empty() || key.len() > MAX_KEY_LEN {
        return Err(Rejection::new(
            StatusCode::BAD_REQUEST,
            "invalid_idempotency_key",
            format!(
                "the Idempotency-Key header must be 1 to {MAX_KEY_LEN} visible ASCII characters"
            ),
        ));
    }
    let correlation_id = headers
        .get(CORRELATION_ID)
        .and_then(|v| v.to_str().ok())
        .map(str::trim)
        .filter(|v| !v.is_empty())
        .map(str::to_owned);
    Ok((key.to_owned(), correlation_id))
}

async fn read_body(body: Body) -> Result<(Value, ChargeRequest), Rejection> {
    let bytes = match Limited::new(body, MAX_BODY_BYTES).collect().await {
        Ok(collected) => collected.to_bytes(),
        Err(e) if e.is::<LengthLimitError>() => {
            return Err(Rejection::new(
                StatusCode::PAYLOAD_TOO_LARGE,
                "body_too_large",
                format!("the request body is over {MAX_BODY_BYTES} bytes"),
            ));
        }
        Err(e) => {
            return Err(Rejection::new(
                StatusCode::BAD_REQUEST,
                "unreadable_body",
                format!("the request body could not be read: {e}"),
            ));
        }
    };
    let value: Value = serde_json::from_slice(&bytes).map_err(|e| {
        Rejection::new(
            StatusCode::BAD_REQUEST,
            "invalid_json",
            format!("the request body is not JSON: {e}"),
        )
    })?;
    let charge: ChargeRequest = serde_json::from_value(value.clone()).map_err(|e| {
        Rejection::new(
            StatusCode::BAD_REQUEST,
            "invalid_request",
            format!("the request body is not a charge: {e}"),
        )
    })?;
    validate(&charge)
        .map_err(|message| Rejection::new(StatusCode::BAD_REQUEST, "invalid_request", message))?;
    Ok((value, charge))
}

fn validate(charge: &ChargeRequest) -> Result<(), &'static str> {
    if charge.amount == 0 {
        return Err("amount must be a positive number of minor units");
    }
    if charge.payment_id.trim().is_empty() {
        return Err("payment_id must not be empty");
    }
    if charge.customer_id.trim().is_empty() {
        return Err("customer_id must not be empty");
    }
    if charge.currency.len() != 3 || !charge.currency.bytes().all(|b| b.is_ascii_alphabetic()) {
        return Err("currency must be a three-letter ISO 4217 code");
    }
    Ok(())
}

fn bad_request(shared: &Shared, rejection: Rejection) -> Response {
    shared.ledger().count_bad_request();
    rejection.into_response()
}

fn stored(stored: StoredResponse) -> Response {
    let status = StatusCode::from_u16(stored.status).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
    with_body(status, stored.body)
}

fn replay(stored_response: StoredResponse) -> Response {
    let mut response = stored(stored_response);
    response
        .headers_mut()
        .insert(IDEMPOTENT_REPLAYED, HeaderValue::from_static("true"));
    response
}

fn unavailable() -> Response {
    error(
        StatusCode::SERVICE_UNAVAILABLE,
        "service_unavailable",
        "the payments service failed; retry with the same Idempotency-Key",
    )
}

fn method_not_allowed(allow: &'static str) -> Response {
    let mut response = error(
        StatusCode::METHOD_NOT_ALLOWED,
        "method_not_allowed",
        &format!("allowed methods: {allow}"),
    );
    // axum adds an `Allow` of its own only when the response has none.
    response
        .headers_mut()
        .insert(ALLOW, HeaderValue::from_static(allow));
    response
}

fn error(status: StatusCode, code: &'static str, message: &str) -> Response {
    Rejection::new(status, code, message).into_response()
}

/// A request refused before it touched the ledger.
#[derive(Debug)]
struct Rejection {
    status: StatusCode,
    code: &'static str,
    message: String,
}

impl Rejection {
    fn new(status: StatusCode, code: &'static str, message: impl Into<String>) -> Self {
        Self {
            status,
            code,
            message: message.into(),
        }
    }
}

impl IntoResponse for Rejection {
    fn into_response(self) -> Response {
        json(
            self.status,
            &serde_json::json!({ "error": self.code, "message": self.message }),
        )
    }
}

fn json(status: StatusCode, body: &impl Serialize) -> Response {
    (status, Json(body)).into_response()
}

/// Bytes already serialised as JSON (a stored answer, replayed byte for byte).
fn with_body(status: StatusCode, body: Bytes) -> Response {
    (
        status,
        [(CONTENT_TYPE, HeaderValue::from_static("application/json"))],
        body,
    )
        .into_response()
}
