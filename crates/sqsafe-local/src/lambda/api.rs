//! The Lambda Runtime API, version 2018-06-01, for one execution environment: a queue of one invocation, the long
//! poll that hands it out, and the three endpoints that answer.
//!
//! | request | answer |
//! |---|---|
//! | `GET /2018-06-01/runtime/invocation/next` | blocks until an invocation is queued, then `200`, the event and the `Lambda-Runtime-*` headers |
//! | `POST .../invocation/{id}/response` | `202`; over 6 MB: `413`, and the invocation fails |
//! | `POST .../invocation/{id}/error` | `202` |
//! | `POST /2018-06-01/runtime/init/error` | `202`; after the first `/next`: `403` |
//! | an id that is not the current invocation | `400 InvalidRequestID` |
//! | the current id, already answered | `403 InvalidStateTransition` |
//! | another path / method | `404` / `405` |
//!
//! Errors are `{"errorMessage": ..., "errorType": ...}`, the Runtime API's `ErrorResponse`.
//!
//! Each connection belongs to the process generation it was accepted in. When a process ends, [`RuntimeApi::reset`]
//! starts a new generation: a dead process's long poll can never take its successor's event.

use std::net::{Ipv4Addr, SocketAddr};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::{Duration, SystemTime};

use axum::body::Body;
use axum::extract::{Path, State};
use axum::http::header::{ALLOW, CONTENT_TYPE, HeaderMap, HeaderName, HeaderValue};
use axum::http::{StatusCode, Uri};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::{Json, Router};
use bytes::Bytes;
use http_body_util::{BodyExt, LengthLimitError, Limited};
use serde_json::{Value, json};
use tokio::net::TcpListener;
use tokio::sync::{Notify, mpsc};
use tokio::time::Instant;

use super::ids::epoch_ms;
use crate::error::{Error, Result};
use sqsafe_testkit::{ServerSettings as Settings, ServerTask};

/// Lambda's limit for a synchronous response (and here also for an error body).
pub(crate) const MAX_PAYLOAD_BYTES: usize = 6 * 1024 * 1024;

const REQUEST_ID: HeaderName = HeaderName::from_static("lambda-runtime-aws-request-id");
const DEADLINE_MS: HeaderName = HeaderName::from_static("lambda-runtime-deadline-ms");
const FUNCTION_ARN: HeaderName = HeaderName::from_static("lambda-runtime-invoked-function-arn");
const TRACE_ID: HeaderName = HeaderName::from_static("lambda-runtime-trace-id");
const ERROR_TYPE: HeaderName = HeaderName::from_static("lambda-runtime-function-error-type");

/// An invocation waiting for the runtime's `/next`.
#[derive(Debug)]
pub(crate) struct Invocation {
    pub(crate) id: String,
    pub(crate) event: Bytes,
    pub(crate) trace_id: String,
    /// The deadline is set when the runtime takes the event: now + this.
    pub(crate) timeout: Duration,
}

/// What the runtime did, in order, for the instance that waits on it.
#[derive(Debug)]
pub(crate) enum ApiEvent {
    /// `/next` handed out invocation `id` at `at`; it must be answered by `deadline`.
    Delivered {
        id: String,
        at: Instant,
        deadline: Instant,
    },
    /// `/response` for `id`.
    Response { id: String, body: Bytes },
    /// `/error` for `id`, or a response over the size limit.
    Error {
        id: String,
        error_type: String,
        message: String,
    },
    /// `/init/error`.
    InitError { error_type: String, message: String },
}

/// The server of one execution environment.
#[derive(Debug)]
pub(crate) struct RuntimeApi {
    addr: SocketAddr,
    shared: Arc<Shared>,
    server: ServerTask,
}

#[derive(Debug)]
struct Shared {
    state: Mutex<RuntimeState>,
    /// Wakes the long polls: an event was queued, or the generation changed.
    wake: Notify,
    events: mpsc::UnboundedSender<ApiEvent>,
    function_arn: String,
}

#[derive(Debug, Default)]
struct RuntimeState {
    generation: u64,
    /// This generation's runtime has asked for an event: `/init/error` is no longer allowed.
    initialised: bool,
    queued: Option<Invocation>,
    current: Option<Current>,
}

#[derive(Debug)]
struct Current {
    id: String,
    answered: bool,
}

impl Shared {
    /// The lock is never held across an await and no code panics while holding it: poisoning is ignored.
    fn state(&self) -> MutexGuard<'_, RuntimeState> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// A closed receiver means the instance is gone; the server is about to stop too.
    fn send(&self, event: ApiEvent) {
        let _ = self.events.send(event);
    }
}

impl RuntimeApi {
    /// Listens on `127.0.0.1`, on a free port.
    pub(crate) async fn start(
        function_arn: String,
    ) -> Result<(Self, mpsc::UnboundedReceiver<ApiEvent>)> {
        let addr = SocketAddr::from((Ipv4Addr::LOCALHOST, 0));
        let bind_error = |source| Error::Bind { addr, source };
        let listener = TcpListener::bind(addr).await.map_err(bind_error)?;
        let local = listener.local_addr().map_err(bind_error)?;
        let (events, received) = mpsc::unbounded_channel();
        let shared = Arc::new(Shared {
            state: Mutex::new(RuntimeState::default()),
            wake: Notify::new(),
            events,
            function_arn,
        });
        let settings = Settings {
            nodelay: false,
            // No header timeout: a runtime's connection sits idle between its answer and its next poll.
            header_read_timeout: false,
            log_prefix: "runtime API ",
        };
        let routes = routes();
        let connection_shared = shared.clone();
        let server = ServerTask::spawn(listener, settings, move || {
            let shared = connection_shared.clone();
            // The connection belongs to the generation it is accepted in.
            let generation = shared.state().generation;
            routes.clone().with_state(Connection { shared, generation })
        });
        let api = Self {
            addr: local,
            shared,
            server,
        };
        Ok((api, received))
    }

    pub(crate) fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// Queues `invocation` for the next `/next` (replacing one not taken yet, which cannot happen: the instance
    /// queues one at a time).
    pub(crate) fn queue(&self, invocation: Invocation) {
        {
            let mut state = self.shared.state();
            state.queued = Some(invocation);
            state.current = None;
        }
        self.shared.wake.notify_waiters();
    }

    /// Forgets the process that ended: its connections get `500` from now on, and the next process starts fresh.
    pub(crate) fn reset(&self) {
        {
            let mut state = self.shared.state();
            state.generation += 1;
            state.initialised = false;
            state.queued = None;
            state.current = None;
        }
        self.shared.wake.notify_waiters();
    }

    /// Stops accepting, cuts the connections and waits until the port is released.
    pub(crate) async fn shutdown(self) {
        self.server.shutdown().await;
    }
}

/// What a request knows: the shared state, and the generation its connection was accepted in.
#[derive(Debug, Clone)]
struct Connection {
    shared: Arc<Shared>,
    generation: u64,
}

/// The four endpoints, each with a `405` (and its `Allow`) for the other methods, and a `404` elsewhere.
fn routes() -> Router<Connection> {
    let only = |allow: &'static str| move || async move { method_not_allowed(allow) };
    Router::new()
        .route(
            "/2018-06-01/runtime/invocation/next",
            // An explicit HEAD, or axum would answer it with `next` and hand out an event that nobody reads.
            get(next).head(only("GET")).fallback(only("GET")),
        )
        .route(
            "/2018-06-01/runtime/init/error",
            post(init_error).fallback(only("POST")),
        )
        .route(
            "/2018-06-01/runtime/invocation/{id}/response",
            post(response).fallback(only("POST")),
        )
        .route(
            "/2018-06-01/runtime/invocation/{id}/error",
            post(invocation_error).fallback(only("POST")),
        )
        .fallback(|uri: Uri| async move { not_found(uri.path()) })
}

/// The long poll. Waits without a timeout, as the Runtime API does: the runtime must not time it out either.
async fn next(State(Connection { shared, generation }): State<Connection>) -> Response {
    loop {
        let woken = shared.wake.notified();
        tokio::pin!(woken);
        // Registered before the state is read, so a queue between the read and the await is not missed.
        woken.as_mut().enable();
        {
            let mut state = shared.state();
            if state.generation != generation {
                return error(
                    StatusCode::INTERNAL_SERVER_ERROR,
                    "Runtime.ExecutionEnvironmentReset",
                    "this execution environment was reset; the runtime should exit",
                );
            }
            if let Some(invocation) = state.queued.take() {
                state.initialised = true;
                state.current = Some(Current {
                    id: invocation.id.clone(),
                    answered: false,
                });
                let at = Instant::now();
                let deadline_ms = epoch_ms(SystemTime::now() + invocation.timeout);
                shared.send(ApiEvent::Delivered {
                    id: invocation.id.clone(),
                    at,
                    deadline: at + invocation.timeout,
                });
                return next_response(invocation, deadline_ms, &shared.function_arn);
            }
        }
        woken.await;
    }
}

fn next_response(invocation: Invocation, deadline_ms: u128, function_arn: &str) -> Response {
    let mut response = Response::new(Body::from(invocation.event));
    let headers = response.headers_mut();
    headers.insert(CONTENT_TYPE, HeaderValue::from_static("application/json"));
    // Request ids, ARNs and trace ids are built here from hex digits and ASCII names; a function name that is not a
    // valid header value (Lambda allows only letters, digits, `-` and `_`) loses only that header.
    for (name, value) in [
        (REQUEST_ID, invocation.id.as_str()),
        (DEADLINE_MS, &deadline_ms.to_string()),
        (FUNCTION_ARN, function_arn),
        (TRACE_ID, invocation.trace_id.as_str()),
    ] {
        if let Ok(value) = HeaderValue::from_str(value) {
            headers.insert(name, value);
        }
    }
    response
}

async fn response(
    State(Connection { shared, .. }): State<Connection>,
    Path(id): Path<String>,
    body: Body,
) -> Response {
    let payload = read_payload(body).await;
    if let Payload::Broken(reason) = &payload {
        return unreadable(reason);
    }
    // Held until the event is sent, so that a reset cannot come between the check and the send.
    let mut state = shared.state();
    if let Err(refusal) = answer(&mut state, &id) {
        return refusal.response();
    }
    match payload {
        Payload::Complete(body) => {
            shared.send(ApiEvent::Response { id, body });
            accepted()
        }
        Payload::TooLarge | Payload::Broken(_) => {
            shared.send(ApiEvent::Error {
                id,
                error_type: "Function.ResponseSizeTooLarge".to_owned(),
                message: format!("the response is over the limit of {MAX_PAYLOAD_BYTES} bytes"),
            });
            too_large()
        }
    }
}

async fn invocation_error(
    State(Connection { shared, .. }): State<Connection>,
    Path(id): Path<String>,
    headers: HeaderMap,
    body: Body,
) -> Response {
    let header_type = error_type_header(&headers);
    let payload = read_payload(body).await;
    if let Payload::Broken(reason) = &payload {
        return unreadable(reason);
    }
    // Held until the event is sent, so that a reset cannot come between the check and the send.
    let mut state = shared.state();
    if let Err(refusal) = answer(&mut state, &id) {
        return refusal.response();
    }
    let (error_type, message) = payload.into_error(header_type);
    shared.send(ApiEvent::Error {
        id,
        error_type,
        message,
    });
    accepted()
}

async fn init_error(
    State(Connection { shared, generation }): State<Connection>,
    headers: HeaderMap,
    body: Body,
) -> Response {
    let header_type = error_type_header(&headers);
    let payload = read_payload(body).await;
    if let Payload::Broken(reason) = &payload {
        return unreadable(reason);
    }
    let state = shared.state();
    if state.generation != generation || state.initialised {
        return Refusal::AlreadyAnswered.response();
    }
    let (error_type, message) = payload.into_error(header_type);
    shared.send(ApiEvent::InitError {
        error_type,
        message,
    });
    accepted()
}

/// Why an answer is refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Refusal {
    /// Not the current invocation: `400 InvalidRequestID`.
    UnknownId,
    /// Already answered (or, for `/init/error`, past init): `403 InvalidStateTransition`.
    AlreadyAnswered,
}

impl Refusal {
    fn response(self) -> Response {
        match self {
            Refusal::UnknownId => error(
                StatusCode::BAD_REQUEST,
                "InvalidRequestID",
                "Invalid request ID",
            ),
            Refusal::AlreadyAnswered => error(
                StatusCode::FORBIDDEN,
                "InvalidStateTransition",
                "State transition from the current state is not allowed",
            ),
        }
    }
}

/// Marks the current invocation answered if `id` names it and it is still open.
fn answer(state: &mut RuntimeState, id: &str) -> Result<(), Refusal> {
    match state.current.as_mut() {
        Some(current) if current.id == id && !current.answered => {
            current.answered = true;
            Ok(())
        }
        Some(current) if current.id == id => Err(Refusal::AlreadyAnswered),
        _ => Err(Refusal::UnknownId),
    }
}

fn error_type_header(headers: &HeaderMap) -> Option<String> {
    headers
        .get(ERROR_TYPE)
        .and_then(|v| v.to_str().ok())
        .map(str::to_owned)
}

/// A body the runtime posted.
#[derive(Debug)]
enum Payload {
    Complete(Bytes),
    /// Over [`MAX_PAYLOAD_BYTES`].
    TooLarge,
    /// The connection broke while sending it (the process died): nothing to act on.
    Broken(String),
}

impl Payload {
    /// An error's type and message; see [`parse_error`].
    fn into_error(self, header_type: Option<String>) -> (String, String) {
        match self {
            Payload::Complete(body) => parse_error(&body, header_type),
            Payload::TooLarge | Payload::Broken(_) => (
                header_type.unwrap_or_else(|| "Unhandled".to_owned()),
                format!("the error body is over the limit of {MAX_PAYLOAD_BYTES} bytes"),
            ),
        }
    }
}

/// `{errorType, errorMessage}`, with the `Lambda-Runtime-Function-Error-Type` header as a fallback type and the raw
/// body as a fallback message.
fn parse_error(body: &[u8], header_type: Option<String>) -> (String, String) {
    let parsed: Option<Value> = serde_json::from_slice(body).ok();
    let field = |name: &str| {
        parsed
            .as_ref()
            .and_then(|v| v.get(name))
            .and_then(Value::as_str)
            .map(str::to_owned)
    };
    let error_type = field("errorType")
        .or(header_type)
        .unwrap_or_else(|| "Unhandled".to_owned());
    let message =
        field("errorMessage").unwrap_or_else(|| String::from_utf8_lossy(body).into_owned());
    (error_type, message)
}

async fn read_payload(body: Body) -> Payload {
    match Limited::new(body, MAX_PAYLOAD_BYTES).collect().await {
        Ok(collected) => Payload::Complete(collected.to_bytes()),
        Err(e) if e.is::<LengthLimitError>() => Payload::TooLarge,
        Err(e) => Payload::Broken(e.to_string()),
    }
}

fn too_large() -> Response {
    error(
        StatusCode::PAYLOAD_TOO_LARGE,
        "RequestEntityTooLarge",
        &format!("the payload is over the limit of {MAX_PAYLOAD_BYTES} bytes"),
    )
}

fn unreadable(reason: &str) -> Response {
    error(
        StatusCode::BAD_REQUEST,
        "InvalidRequest",
        &format!("the body could not be read: {reason}"),
    )
}

fn accepted() -> Response {
    json_response(StatusCode::ACCEPTED, &json!({ "status": "OK" }))
}

fn not_found(path: &str) -> Response {
    error(
        StatusCode::NOT_FOUND,
        "NotFound",
        &format!("no route for {path}"),
    )
}

fn method_not_allowed(allow: &'static str) -> Response {
    let mut response = error(
        StatusCode::METHOD_NOT_ALLOWED,
        "MethodNotAllowed",
        &format!("allowed methods: {allow}"),
    );
    // axum adds an `Allow` of its own only when the response has none.
    response
        .headers_mut()
        .insert(ALLOW, HeaderValue::from_static(allow));
    response
}

fn error(status: StatusCode, error_type: &str, message: &str) -> Response {
    json_response(
        status,
        &json!({ "errorMessage": message, "errorType": error_type }),
    )
}

fn json_response(status: StatusCode, body: &Value) -> Response {
    (status, Json(body)).into_response()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn errors_are_read_from_the_body_then_the_header() {
        let body = br#"{"errorType":"MyError","errorMessage":"boom","stackTrace":[]}"#;
        assert_eq!(
            parse_error(body, Some("Header".into())),
            ("MyError".to_owned(), "boom".to_owned())
        );
        assert_eq!(
            parse_error(b"not json", Some("Header".into())),
            ("Header".to_owned(), "not json".to_owned())
        );
        assert_eq!(
            parse_error(b"{}", None),
            ("Unhandled".to_owned(), "{}".to_owned())
        );
    }

    #[test]
    fn only_the_open_current_invocation_can_be_answered() {
        let mut state = RuntimeState::default();
        assert_eq!(answer(&mut state, "a"), Err(Refusal::UnknownId));
        state.current = Some(Current {
            id: "a".into(),
            answered: false,
        });
        assert_eq!(answer(&mut state, "b"), Err(Refusal::UnknownId));
        assert_eq!(answer(&mut state, "a"), Ok(()));
        assert_eq!(answer(&mut state, "a"), Err(Refusal::AlreadyAnswered));
        assert_eq!(
            Refusal::UnknownId.response().status(),
            StatusCode::BAD_REQUEST
        );
        assert_eq!(
            Refusal::AlreadyAnswered.response().status(),
            StatusCode::FORBIDDEN
        );
    }
}
