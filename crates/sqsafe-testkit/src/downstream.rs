//! A fake downstream HTTP API on loopback: it records every call (method, path, `Idempotency-Key`, correlation id,
//! body), answers with scripted replies and then a default, and counts the effects per key, so a consumer's test
//! asserts what its effect sent and how often it took effect.

use std::collections::{BTreeMap, VecDeque};
use std::net::SocketAddr;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use axum::Router;
use axum::body::Body;
use axum::extract::Request;
use axum::http::{HeaderMap, HeaderName, HeaderValue, StatusCode, header};
use axum::response::Response;
use tokio::net::TcpListener;

use crate::server::{ServerSettings, ServerTask};

/// The most of a request's body kept: the fake is for effects' requests, a few kilobytes.
pub(crate) const MAX_REQUEST_BYTES: usize = 1024 * 1024;

/// A fake HTTP API on `127.0.0.1`, for a consumer's tests. Replies queued with [`reply_next`](Self::reply_next) are
/// given in order, one per call; after them every call gets the default: `200` with
/// `{"call": N, "idempotency_key": "<key>"}` (N counts calls from 1; the key is `null` when the call had none).
///
/// ```
/// use sqsafe_testkit::{FakeDownstream, Reply};
///
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() {
/// let api = FakeDownstream::start().await;
/// api.reply_next(Reply::status(503).retry_after_secs(1));
/// assert!(api.url().starts_with("http://127.0.0.1:"));
/// assert!(api.calls().is_empty());
/// # }
/// ```
///
/// The server stops when the value is dropped.
#[derive(Debug)]
pub struct FakeDownstream {
    addr: SocketAddr,
    state: Arc<Mutex<State>>,
    _server: ServerTask,
}

#[derive(Debug, Default)]
pub(crate) struct State {
    replies: VecDeque<Reply>,
    calls: Vec<Call>,
    effects: BTreeMap<String, usize>,
}

/// One call as the fake API received it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Call {
    /// `POST`, `PUT`, …
    pub method: String,
    /// The path, with its query if any.
    pub path: String,
    /// The `Idempotency-Key` header.
    pub idempotency_key: Option<String>,
    /// The `x-correlation-id` header.
    pub correlation_id: Option<String>,
    /// The body (as UTF-8, lossily).
    pub body: String,
    /// Every header, its name in lower case (a header sent twice: the values joined by `, `).
    pub headers: BTreeMap<String, String>,
}

/// A scripted reply: a status, and optionally a body, headers and a delay before answering.
#[derive(Debug, Clone)]
pub struct Reply {
    status: StatusCode,
    body: Option<(Vec<u8>, &'static str)>,
    headers: Vec<(HeaderName, HeaderValue)>,
    delay: Duration,
}

impl Reply {
    /// A reply with this status and no body.
    ///
    /// # Panics
    /// When `code` is not a status code (100 to 999).
    pub fn status(code: u16) -> Self {
        let status = StatusCode::from_u16(code)
            .unwrap_or_else(|e| panic!("Reply::status({code}): not an HTTP status: {e}"));
        Self {
            status,
            body: None,
            headers: Vec::new(),
            delay: Duration::ZERO,
        }
    }

    /// `value` as the body, `Content-Type: application/json`.
    pub fn json(mut self, value: serde_json::Value) -> Self {
        self.body = Some((value.to_string().into_bytes(), "application/json"));
        self
    }

    /// `bytes` as the body as they are (a page that is no JSON, a body larger than a client's cap),
    /// `Content-Type: application/octet-stream`.
    pub fn body(mut self, bytes: impl Into<Vec<u8>>) -> Self {
        self.body = Some((bytes.into(), "application/octet-stream"));
        self
    }

    /// A header of the reply.
    ///
    /// # Panics
    /// When `name` or `value` cannot be an HTTP header's.
    pub fn header(mut self, name: impl Into<String>, value: impl Into<String>) -> Self {
        let (name, value) = (name.into(), value.into());
        match (HeaderName::try_from(&name), HeaderValue::try_from(&value)) {
            (Ok(name), Ok(value)) => self.headers.push((name, value)),
            _ => panic!("Reply::header({name:?}, {value:?}): not a valid HTTP header"),
        }
        self
    }

    /// `Retry-After: <secs>`.
    pub fn retry_after_secs(self, secs: u64) -> Self {
        self.header("retry-after", secs.to_string())
    }

    /// `Retry-After: <value>`, e.g. an HTTP-date (`Wed, 21 Oct 2015 07:28:00 GMT`).
    pub fn retry_after(self, value: impl Into<String>) -> Self {
        self.header("retry-after", value)
    }

    /// Waits this long before answering (a slow API, a client's timeout). The call and, for a 2xx, its effect are
    /// counted when it arrives, before the wait: an API whose answer is lost has still done the work.
    pub fn delay(mut self, delay: Duration) -> Self {
        self.delay = delay;
        self
    }
}

impl FakeDownstream {
    /// Starts the fake API on `127.0.0.1`, on a free port. Must be called within a Tokio runtime.
    ///
    /// # Panics
    /// When no port can be bound (the message says so); [`try_start`](Self::try_start) returns the error instead.
    pub async fn start() -> Self {
        Self::try_start()
            .await
            .unwrap_or_else(|e| panic!("FakeDownstream: {e}"))
    }

    /// [`start`](Self::start), for a program rather than a test: an error when no port can be bound.
    ///
    /// # Errors
    /// Binding `127.0.0.1:0` failed, or the bound address could not be read.
    pub async fn try_start() -> std::io::Result<Self> {
        Self::serve(|state| {
            Router::new().fallback(move |request: Request| {
                let state = Arc::clone(&state);
                async move { answer(&state, request).await }
            })
        })
        .await
    }

    /// Binds a free loopback port and serves the router `routes` makes over the fake's state.
    pub(crate) async fn serve(
        routes: impl FnOnce(Arc<Mutex<State>>) -> Router,
    ) -> std::io::Result<Self> {
        let listener = TcpListener::bind("127.0.0.1:0")
            .await
            .map_err(|e| std::io::Error::new(e.kind(), format!("cannot bind 127.0.0.1:0: {e}")))?;
        let addr = listener.local_addr()?;
        let state = Arc::new(Mutex::new(State::default()));
        let router = routes(Arc::clone(&state));
        let settings = ServerSettings {
            nodelay: true,
            header_read_timeout: true,
            log_prefix: "fake downstream ",
        };
        let server = ServerTask::spawn(listener, settings, move || router.clone());
        Ok(Self {
            addr,
            state,
            _server: server,
        })
    }

    /// `http://127.0.0.1:PORT`, without a trailing slash.
    pub fn url(&self) -> String {
        format!("http://{}", self.addr)
    }

    /// Queues a reply: queued replies answer the next calls in order, then the default does.
    pub fn reply_next(&self, reply: Reply) {
        lock(&self.state).replies.push_back(reply);
    }

    /// Every call so far, in the order they arrived.
    pub fn calls(&self) -> Vec<Call> {
        lock(&self.state).calls.clone()
    }

    /// How many calls carried `Idempotency-Key: key`.
    pub fn calls_for(&self, key: &str) -> usize {
        lock(&self.state)
            .calls
            .iter()
            .filter(|c| c.idempotency_key.as_deref() == Some(key))
            .count()
    }

    /// Calls answered with a 2xx, per `Idempotency-Key` (`""` for calls without one): how often each intent took
    /// effect downstream.
    pub fn effects(&self) -> BTreeMap<String, usize> {
        lock(&self.state).effects.clone()
    }
}

/// A test's assertion panicking in another thread must not hide the calls from the rest of the test.
fn lock(state: &Mutex<State>) -> MutexGuard<'_, State> {
    state
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner())
}

fn text(headers: &HeaderMap, name: &str) -> Option<String> {
    headers
        .get(name)
        .map(|v| String::from_utf8_lossy(v.as_bytes()).into_owned())
}

fn all_headers(headers: &HeaderMap) -> BTreeMap<String, String> {
    let mut out: BTreeMap<String, String> = BTreeMap::new();
    for (name, value) in headers {
        let value = String::from_utf8_lossy(value.as_bytes());
        out.entry(name.as_str().to_owned())
            .and_modify(|v| {
                v.push_str(", ");
                v.push_str(&value);
            })
            .or_insert_with(|| value.into_owned());
    }
    out
}

async fn answer(state: &Mutex<State>, request: Request) -> Response {
    let (parts, body) = request.into_parts();
    let body = axum::body::to_bytes(body, MAX_REQUEST_BYTES)
        .await
        .unwrap_or_default();
    let (n, key) = record(state, &parts, &body);
    run(state, n, key).await
}

/// Keeps the call and gives its number (from 1) and its key.
pub(crate) fn record(
    state: &Mutex<State>,
    parts: &axum::http::request::Parts,
    body: &[u8],
) -> (usize, Option<String>) {
    let call = Call {
        method: parts.method.to_string(),
        path: parts
            .uri
            .path_and_query()
            .map_or_else(|| parts.uri.path().to_owned(), ToString::to_string),
        idempotency_key: text(&parts.headers, "idempotency-key"),
        correlation_id: text(&parts.headers, "x-correlation-id"),
        body: String::from_utf8_lossy(body).into_owned(),
        headers: all_headers(&parts.headers),
    };
    let key = call.idempotency_key.clone();
    let mut state = lock(state);
    state.calls.push(call);
    (state.calls.len(), key)
}

/// The work of call `n`: the next scripted reply (else the default), its effect counted when it is a 2xx, answered
/// after its delay.
pub(crate) async fn run(state: &Mutex<State>, n: usize, key: Option<String>) -> Response {
    let reply = {
        let mut state = lock(state);
        let reply = state.replies.pop_front().unwrap_or_else(|| {
            Reply::status(200).json(serde_json::json!({
                "call": n,
                "idempotency_key": key,
            }))
        });
        if reply.status.is_success() {
            *state.effects.entry(key.unwrap_or_default()).or_default() += 1;
        }
        reply
    };
    if !reply.delay.is_zero() {
        tokio::time::sleep(reply.delay).await;
    }
    respond(reply)
}

fn respond(reply: Reply) -> Response {
    let (body, content_type) = match reply.body {
        Some((bytes, content_type)) => (Body::from(bytes), Some(content_type)),
        None => (Body::empty(), None),
    };
    let mut response = Response::new(body);
    *response.status_mut() = reply.status;
    let headers = response.headers_mut();
    if let Some(content_type) = content_type {
        headers.insert(header::CONTENT_TYPE, HeaderValue::from_static(content_type));
    }
    for (name, value) in reply.headers {
        headers.append(name, value);
    }
    response
}
