//! The payments API's routes (see the [module documentation](super) for what each answers). `POST /v1/charges` runs
//! through two layers: `admit` (reads and validates the body, counts the answers, turns an injected fault after
//! charging into a `503`), then sqsafe's [`IdempotencyLayer`], which owns everything about the key.

use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use axum::body::Body;
use axum::extract::{Request, State};
use axum::handler::Handler;
use axum::http::header::{ALLOW, CONTENT_TYPE, HeaderMap, HeaderName, HeaderValue};
use axum::http::{Method, StatusCode, Uri};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use axum::{Extension, Json, Router};
use bytes::Bytes;
use http_body_util::{BodyExt, LengthLimitError, Limited};
use serde::Serialize;
use sqsafe::api::{ApiConfigError, ApiSettings, IDEMPOTENCY_KEY, IdempotencyLayer, REPLAYED};
use sqsafe_idempotency::{Idempotency, IdempotencyStore};
use tower::Layer;

use super::fault::Fault;
use super::hold::Charging;
use super::ledger::ChargeRequest;
use super::shared::Shared;

/// Largest accepted request body.
const MAX_BODY_BYTES: usize = 64 * 1024;
/// The records' name and version (their keys' consumer part).
const RECORD_NAME: &str = "payments-api";
/// The one caller: this fake has one merchant account, so every client's keys are that account's.
const MERCHANT: &str = "merchant";

const CORRELATION_ID: HeaderName = HeaderName::from_static("x-correlation-id");

/// What the charge handler tells `admit` about one request: its fault, and whether it charged (kept until the answer
/// is back through the layer, for a hold).
#[derive(Clone, Default)]
struct Slot(Arc<Mutex<SlotState>>);

#[derive(Default)]
struct SlotState {
    fault: Option<Fault>,
    charging: Option<Charging>,
}

impl Slot {
    fn with<R>(&self, f: impl FnOnce(&mut SlotState) -> R) -> R {
        f(&mut self.0.lock().unwrap_or_else(PoisonError::into_inner))
    }
}

/// The routes, each with a `405` (and its `Allow`) for the other methods, HEAD included (axum would answer it with
/// the GET handler), and a JSON `404` elsewhere.
pub(crate) fn router<S: IdempotencyStore + 'static>(
    shared: Arc<Shared>,
    idem: Idempotency<S>,
    lease: Duration,
) -> Result<Router, ApiConfigError> {
    let settings = ApiSettings {
        methods: vec![Method::POST],
        lease,
        // The longest a charge is processed, and waited for: then stopped, its claim kept until its lease ends.
        answer_within: lease,
        max_handler_time: lease,
        name: Some((RECORD_NAME.to_owned(), 1)),
        // A test server shares its process's stdout with the test that runs it: no metric lines there.
        metrics_namespace: None,
        ..ApiSettings::default()
    };
    let keys = IdempotencyLayer::with_settings(idem, |_: &_| Some(MERCHANT.to_owned()), settings)?;
    let charge = axum::middleware::from_fn_with_state(Arc::clone(&shared), admit)
        .layer(keys.layer(create_charge.with_state(Arc::clone(&shared))));
    let only = |allow: &'static str| move || async move { method_not_allowed(allow) };
    Ok(Router::new()
        .route(
            "/health",
            get(health).head(only("GET")).fallback(only("GET")),
        )
        .route(
            "/v1/stats",
            get(stats).head(only("GET")).fallback(only("GET")),
        )
        .route(
            "/v1/charges",
            get(list_charges)
                .post_service(charge)
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
        .with_state(shared))
}

async fn health() -> Response {
    json(StatusCode::OK, &serde_json::json!({ "status": "ok" }))
}

async fn stats(State(shared): State<Arc<Shared>>) -> Response {
    json(StatusCode::OK, &shared.ledger().stats())
}

async fn list_charges(State(shared): State<Arc<Shared>>) -> Response {
    json(StatusCode::OK, &shared.charges())
}

/// In front of the idempotency layer: a request that is not a valid charge is refused before any key is claimed
/// (as a gateway's request validation would), and each answer is counted.
async fn admit(State(shared): State<Arc<Shared>>, request: Request, next: Next) -> Response {
    shared.ledger().stats_mut().requests += 1;
    let (mut parts, body) = request.into_parts();
    let body = match read_body(body).await {
        Ok(body) => body,
        Err(rejection) => {
            shared.ledger().stats_mut().bad_requests += 1;
            return rejection.into_response();
        }
    };
    let slot = Slot::default();
    parts.extensions.insert(slot.clone());
    let answer = next.run(Request::from_parts(parts, Body::from(body))).await;
    // The answer is back through the layer: its record is completed (or released). A hold may go on.
    let (fault, charging) = slot.with(|s| (s.fault, s.charging.take()));
    drop(charging);
    let mut ledger = shared.ledger();
    let stats = ledger.stats_mut();
    let status = answer.status();
    if answer.headers().get(REPLAYED).is_some_and(|v| v == "true") {
        stats.replays += 1;
    } else if status == StatusCode::CONFLICT {
        stats.conflicts_409 += 1;
    } else if status == StatusCode::UNPROCESSABLE_ENTITY {
        stats.mismatches_422 += 1;
    } else if status == StatusCode::BAD_REQUEST || status == StatusCode::PAYLOAD_TOO_LARGE {
        stats.bad_requests += 1;
    } else if status.is_server_error() && fault != Some(Fault::Before) {
        stats.layer_errors += 1;
    }
    drop(ledger);
    if fault == Some(Fault::After) && status == StatusCode::CREATED {
        // Charged, and its 201 stored for replay by the layer: the client is told it failed all the same.
        return unavailable();
    }
    answer
}

/// Runs only for a key the layer has just claimed: draws the fault, waits the processing delay, charges.
async fn create_charge(
    State(shared): State<Arc<Shared>>,
    Extension(slot): Extension<Slot>,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    // `admit` validated the body; a failure here would be this file's bug, answered as a bad request all the same.
    let charge: ChargeRequest = match serde_json::from_slice(&body) {
        Ok(charge) => charge,
        Err(e) => return error(StatusCode::BAD_REQUEST, "invalid_request", &e.to_string()),
    };
    let key = text(&headers, &IDEMPOTENCY_KEY).unwrap_or_default();
    let correlation_id = text(&headers, &CORRELATION_ID);
    let fault = shared.ledger().next_fault(&charge.payment_id);
    slot.with(|s| s.fault = Some(fault));
    if let Some(delay) = &shared.delay {
        delay.delay().await;
    }
    if fault == Fault::Before {
        shared.ledger().stats_mut().failed_before += 1;
        tracing::info!(key, "injected failure before charging");
        // A 5xx: the layer releases the key, so the retry charges.
        return unavailable();
    }
    if let Some(hold) = &shared.hold {
        let charging = hold.before_charge(&charge.payment_id).await;
        slot.with(|s| s.charging = Some(charging));
    }
    let body = {
        let mut ledger = shared.ledger();
        if fault == Fault::After {
            ledger.stats_mut().failed_after += 1;
        }
        ledger.charge(&key, charge, correlation_id)
    };
    tracing::info!(key, after = fault == Fault::After, "charged");
    with_body(StatusCode::CREATED, Bytes::from(body))
}

fn text(headers: &HeaderMap, name: &HeaderName) -> Option<String> {
    headers
        .get(name)
        .and_then(|v| v.to_str().ok())
        .map(str::trim)
        .filter(|v| !v.is_empty())
        .map(str::to_owned)
}

async fn read_body(body: Body) -> Result<Bytes, Rejection> {
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
    let value: serde_json::Value = serde_json::from_slice(&bytes).map_err(|e| {
        Rejection::new(
            StatusCode::BAD_REQUEST,
            "invalid_json",
            format!("the request body is not JSON: {e}"),
        )
    })?;
    let charge: ChargeRequest = serde_json::from_value(value).map_err(|e| {
        Rejection::new(
            StatusCode::BAD_REQUEST,
            "invalid_request",
            format!("the request body is not a charge: {e}"),
        )
    })?;
    validate(&charge)
        .map_err(|message| Rejection::new(StatusCode::BAD_REQUEST, "invalid_request", message))?;
    Ok(bytes)
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

/// A request refused before any key was claimed.
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

/// Bytes already serialised as JSON.
fn with_body(status: StatusCode, body: Bytes) -> Response {
    (
        status,
        [(CONTENT_TYPE, HeaderValue::from_static("application/json"))],
        body,
    )
        .into_response()
}
