//! The other end of the `Idempotency-Key`: a tower layer that makes an HTTP handler idempotent on the same engine as
//! the consumers (feature `api`).
//!
//! [`IdempotencyLayer`] wraps any tower service of HTTP requests (an axum `Router`, served by lambda_http or by a
//! plain hyper server). For a request whose method it guards (POST and PATCH by default):
//!
//! | the request | the answer |
//! |---|---|
//! | no `Idempotency-Key` header | `400` (problem+json) when the key is required (the default); passed through otherwise |
//! | a key longer than 255 characters, or with characters outside visible ASCII | `400` |
//! | no caller (the team's extractor found none) | `401` |
//! | first of its caller and key | one conditional write claims the key, the handler runs, its answer is stored and the record completed (fenced by the claim's token) |
//! | a repeat of the same content, completed | the stored answer: its status, headers and body byte for byte, with `Idempotent-Replayed: true`; the handler does not run |
//! | a repeat with other content (method, matched route, body, the named headers) | `422`; the handler does not run |
//! | a repeat while the first is in flight | `409` with `Retry-After`; the handler does not run |
//! | the handler answered `5xx`, panicked, or ran past the lease | the key is released: the client's retry runs the handler again (`500` for a panic, `504` for a timeout) |
//! | the client hangs up while the handler runs (a hyper server then drops the request) | the handler runs on in a task of its own and its answer is stored: the retry gets the replay, not a second run |
//!
//! **Scoped by the caller.** The key is the caller's: [`IdempotencyLayer::new`] takes an extractor that names the
//! caller from the request (the API Gateway authorizer's principal, the API key's id, a header the gateway sets).
//! Two callers that send one key have two records, and neither can read the other's answer.
//!
//! **The lease.** Under lambda_http, the claim's lease runs to the invocation's deadline (the `lambda_runtime::Context`
//! in the request's extensions); elsewhere it is [`ApiSettings::lease`] (30 s by default), and a handler still running
//! then is stopped and its key released.
//!
//! **A large answer.** An answer whose body is over [`ApiSettings::max_stored_body`] (48 KiB by default, under the
//! engine's 64 KiB result cap) is stored without its body: a repeat gets its status and headers, an empty body and
//! `Idempotent-Replay-Body: omitted`. The handler still does not run again.
//!
//! **Logs.** One line per guarded request (`api request handled`), with the method, the matched route, the outcome
//! and the correlation id (the request's `x-correlation-id`, else a new one), inside a span that carries them and the
//! caller's trace id (`producer_trace_id`, from `traceparent` or `X-Amzn-Trace-Id`, as a consumer logs its
//! producer's); never the body, the key or the caller.
//!
//! **Traces.** With spans exported (`SQSAFE_TRACES=otlp`, as for a consumer), the request's span (`api request`) is a
//! child of the caller's span named by its `traceparent` (else `X-Amzn-Trace-Id`): a consumer's `http call` span and
//! the API's request are one trace. The spans are sent when the request has been handled: under Lambda before the
//! answer, cut before the invocation's deadline; in a long-running server, beside the answer.
//!
//! **Metrics.** One CloudWatch Embedded Metric Format line per guarded request, on stdout where Lambda sends it to
//! CloudWatch Logs: a counter per outcome (`RequestsExecuted`, `RequestsReplayed`, `RequestsInProgress`,
//! `RequestsMismatched`, `RequestsRefused`, `RequestsReleased`, `RequestsStoreFailed`, `RequestsPassed`) and
//! `RequestDuration`, in the namespace [`ApiSettings::metrics_namespace`] (`sqsafe`), dimension `api` = the record
//! name ([`ApiSettings::name`]). [`IdempotencyLayer::metrics_writer`] sends them elsewhere; a namespace of `None`
//! turns them off.

mod answer;
mod headers;
mod request;
mod stored;

use std::convert::Infallible;
use std::future::Future;
use std::panic::AssertUnwindSafe;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context as TaskContext, Poll};
use std::time::{Duration, SystemTime};

use bytes::Bytes;
use futures::FutureExt;
use http::header::{HeaderName, HeaderValue, RETRY_AFTER};
use http::{Method, Request, Response, StatusCode};
use http_body_util::{BodyExt, Full, Limited};
use sqsafe_idempotency::{
    Claim, Error as IdempotencyError, Idempotency, IdempotencyStore, KeyBuilder,
};
use sqsafe_telemetry::TraceContext;
use sqsafe_telemetry::api_metrics::{RequestOutcome as Outcome, write_request_emf};
use tracing::Instrument;

use request::{fingerprint_of, route_of, valid_key};

use answer::{new_correlation_id, problem, refused, replay, store_failed};

pub use headers::{IDEMPOTENCY_KEY, MAX_KEY_CHARS, REPLAY_BODY, REPLAYED};
pub use stored::StoredResponse;

/// Names the caller of a request (its parts: method, URI, headers, extensions), or `None` when there is none.
pub type CallerFn = dyn Fn(&http::request::Parts) -> Option<String> + Send + Sync;

/// What the layer does, beyond its defaults.
#[derive(Debug, Clone)]
pub struct ApiSettings {
    /// The methods guarded; others pass through. Default: POST and PATCH.
    pub methods: Vec<Method>,
    /// `true` (the default): a guarded request without the key is refused (`400`); `false`: it passes through.
    pub key_required: bool,
    /// Request headers that count in the fingerprint beside the method, the matched route and the body.
    pub fingerprint_headers: Vec<HeaderName>,
    /// The claim's lease outside Lambda (no invocation deadline): the longest a handler may run. Default 30 s.
    pub lease: Duration,
    /// The largest request body read (`413` above). Default 1 MiB.
    pub max_request_body: usize,
    /// The largest answer body stored for replay; a larger one is stored without it. Default 48 KiB.
    pub max_stored_body: usize,
    /// The name the records carry (their key's consumer part) and its version: change the version when a handler's
    /// effect changes meaning, so that keys of the old one are not replayed. Default `("api", 1)`.
    pub name: (String, u32),
    /// The CloudWatch namespace of the one Embedded Metric Format line written per guarded request (its outcome
    /// and duration under the dimension `api` = the record name: `sqsafe_telemetry::api_metrics`), to stdout
    /// unless [`IdempotencyLayer::metrics_writer`] says otherwise. `None`: no metrics. Default `Some("sqsafe")`.
    pub metrics_namespace: Option<String>,
}

impl Default for ApiSettings {
    fn default() -> Self {
        Self {
            methods: vec![Method::POST, Method::PATCH],
            key_required: true,
            fingerprint_headers: Vec::new(),
            lease: Duration::from_secs(30),
            max_request_body: 1024 * 1024,
            max_stored_body: 48 * 1024,
            name: ("api".to_owned(), 1),
            metrics_namespace: Some("sqsafe".to_owned()),
        }
    }
}

/// The layer: see the [module](self).
pub struct IdempotencyLayer<S> {
    shared: Arc<Shared<S>>,
}

impl<S> Clone for IdempotencyLayer<S> {
    fn clone(&self) -> Self {
        Self {
            shared: Arc::clone(&self.shared),
        }
    }
}

struct Shared<S> {
    idem: Idempotency<S>,
    caller: Arc<CallerFn>,
    settings: ApiSettings,
    metrics_writer: Arc<MetricsWriter>,
}

/// Where the layer's metric lines go: each call gets one line, its newline included.
pub type MetricsWriter = dyn Fn(&[u8]) + Send + Sync;

fn to_stdout(line: &[u8]) {
    use std::io::Write as _;
    // Metrics never fail a request: a closed stdout loses the line.
    let _ = std::io::stdout().lock().write_all(line);
}

impl<S: IdempotencyStore + 'static> IdempotencyLayer<S> {
    /// The layer over `idem` (its table, window, lease rules), with `caller` naming each request's caller.
    pub fn new(
        idem: Idempotency<S>,
        caller: impl Fn(&http::request::Parts) -> Option<String> + Send + Sync + 'static,
    ) -> Self {
        Self::with_settings(idem, caller, ApiSettings::default())
    }

    /// The same, with `settings`.
    pub fn with_settings(
        idem: Idempotency<S>,
        caller: impl Fn(&http::request::Parts) -> Option<String> + Send + Sync + 'static,
        settings: ApiSettings,
    ) -> Self {
        Self {
            shared: Arc::new(Shared {
                idem,
                caller: Arc::new(caller),
                settings,
                metrics_writer: Arc::new(to_stdout),
            }),
        }
    }

    /// Sends the metric lines (see [`ApiSettings::metrics_namespace`]) to `writer` instead of stdout: a server that
    /// ships its metrics another way, or a test that reads them. Call it before the layer wraps a service.
    #[must_use]
    pub fn metrics_writer(self, writer: impl Fn(&[u8]) + Send + Sync + 'static) -> Self {
        let old = &self.shared;
        Self {
            shared: Arc::new(Shared {
                idem: old.idem.clone(),
                caller: Arc::clone(&old.caller),
                settings: old.settings.clone(),
                metrics_writer: Arc::new(writer),
            }),
        }
    }
}

impl<S, Svc> tower::Layer<Svc> for IdempotencyLayer<S> {
    type Service = IdempotencyService<S, Svc>;

    fn layer(&self, inner: Svc) -> Self::Service {
        IdempotencyService {
            shared: Arc::clone(&self.shared),
            inner,
        }
    }
}

/// The service [`IdempotencyLayer`] makes.
pub struct IdempotencyService<S, Svc> {
    shared: Arc<Shared<S>>,
    inner: Svc,
}

impl<S, Svc: Clone> Clone for IdempotencyService<S, Svc> {
    fn clone(&self) -> Self {
        Self {
            shared: Arc::clone(&self.shared),
            inner: self.inner.clone(),
        }
    }
}

impl<S, Svc, ReqBody, ResBody> tower::Service<Request<ReqBody>> for IdempotencyService<S, Svc>
where
    S: IdempotencyStore + 'static,
    Svc: tower::Service<Request<ReqBody>, Response = Response<ResBody>, Error = Infallible>
        + Clone
        + Send
        + 'static,
    Svc::Future: Send + 'static,
    ReqBody: http_body::Body<Data = Bytes> + From<Bytes> + Send + 'static,
    ReqBody::Error: Into<Box<dyn std::error::Error + Send + Sync>>,
    ResBody: http_body::Body<Data = Bytes> + Send + 'static,
    ResBody::Error: std::fmt::Display,
{
    type Response = Response<Full<Bytes>>;
    type Error = Infallible;
    type Future = Pin<Box<dyn Future<Output = Result<Self::Response, Infallible>> + Send>>;

    fn poll_ready(&mut self, cx: &mut TaskContext<'_>) -> Poll<Result<(), Infallible>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, request: Request<ReqBody>) -> Self::Future {
        // The clone that was polled ready handles this request; a fresh clone waits for the next one.
        let ready = self.inner.clone();
        let inner = std::mem::replace(&mut self.inner, ready);
        if !self.shared.settings.methods.contains(request.method()) {
            return Box::pin(async move { Ok(pass(inner, request).await) });
        }
        let shared = Arc::clone(&self.shared);
        let correlation_id = request
            .headers()
            .get(sqsafe_telemetry::correlation::HTTP_HEADER)
            .and_then(|v| v.to_str().ok())
            .filter(|v| !v.is_empty() && v.len() <= 256)
            .map_or_else(new_correlation_id, str::to_owned);
        let route = route_of(&request);
        // The caller's trace: W3C `traceparent`, else API Gateway's `X-Amzn-Trace-Id`; logged as a consumer logs its
        // producer's.
        let header = |name: &str| request.headers().get(name).and_then(|v| v.to_str().ok());
        let trace = header("traceparent")
            .and_then(TraceContext::from_traceparent)
            .or_else(|| header("x-amzn-trace-id").and_then(TraceContext::from_xray_header));
        let span = tracing::info_span!(
            target: "sqsafe::api",
            "api request",
            method = %request.method(),
            route = %route,
            correlation_id = %correlation_id,
            producer_trace_id = trace.as_ref().map(TraceContext::trace_id),
        );
        // With spans exported, the request's span continues its caller's trace as a child of the caller's span.
        if let Some(trace) = &trace {
            sqsafe_telemetry::traces::continue_from(&span, trace);
        }
        let lambda_deadline = request
            .extensions()
            .get::<lambda_runtime::Context>()
            .map(lambda_runtime::Context::deadline);
        Box::pin(async move {
            let answer = async move {
                let started = std::time::Instant::now();
                let (answer, outcome) = guarded(&shared, inner, request, &route).await;
                let status = answer.status().as_u16();
                if outcome == Outcome::StoreFailed {
                    tracing::error!(outcome = outcome.label(), status, "api request handled");
                } else {
                    tracing::info!(outcome = outcome.label(), status, "api request handled");
                }
                shared.metrics(outcome, started.elapsed());
                answer
            }
            .instrument(span)
            .await;
            export_spans(lambda_deadline).await;
            Ok(answer)
        })
    }
}

/// Sends the spans of the request that just ended, when spans are exported (`SQSAFE_TRACES=otlp`): under Lambda
/// before the answer (the function is frozen once it has answered; the send is cut before the invocation's
/// deadline), in a server that keeps running after it (the answer is not held for the collector).
async fn export_spans(lambda_deadline: Option<SystemTime>) {
    if !sqsafe_telemetry::traces::exporting() {
        return;
    }
    match lambda_deadline {
        Some(deadline) => sqsafe_telemetry::traces::flush(Some(deadline), SystemTime::now()).await,
        None => {
            tokio::spawn(sqsafe_telemetry::traces::flush(None, SystemTime::now()));
        }
    }
}

impl<S> Shared<S> {
    fn metrics(&self, outcome: Outcome, took: Duration) {
        let Some(namespace) = &self.settings.metrics_namespace else {
            return;
        };
        let now_ms = SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX));
        let mut line = Vec::with_capacity(640);
        if write_request_emf(
            &mut line,
            namespace,
            &self.settings.name.0,
            now_ms,
            outcome,
            took,
        )
        .is_ok()
        {
            (self.metrics_writer)(&line);
        }
    }
}

async fn guarded<S, Svc, ReqBody, ResBody>(
    shared: &Shared<S>,
    inner: Svc,
    request: Request<ReqBody>,
    route: &str,
) -> (Response<Full<Bytes>>, Outcome)
where
    S: IdempotencyStore + 'static,
    Svc: tower::Service<Request<ReqBody>, Response = Response<ResBody>, Error = Infallible>
        + Send
        + 'static,
    Svc::Future: Send + 'static,
    ReqBody: http_body::Body<Data = Bytes> + From<Bytes> + Send + 'static,
    ReqBody::Error: Into<Box<dyn std::error::Error + Send + Sync>>,
    ResBody: http_body::Body<Data = Bytes> + Send + 'static,
    ResBody::Error: std::fmt::Display,
{
    let settings = &shared.settings;
    let header_key = match request.headers().get(IDEMPOTENCY_KEY) {
        None if settings.key_required => {
            return refused(
                StatusCode::BAD_REQUEST,
                "missing-idempotency-key",
                "this request needs an Idempotency-Key header",
            );
        }
        None => return (pass(inner, request).await, Outcome::Passed),
        Some(value) => match valid_key(value) {
            Some(key) => key.to_owned(),
            None => {
                return refused(
                    StatusCode::BAD_REQUEST,
                    "invalid-idempotency-key",
                    "the Idempotency-Key must be 1 to 255 visible ASCII characters",
                );
            }
        },
    };
    let (parts, body) = request.into_parts();
    let Some(caller) = (shared.caller)(&parts).filter(|c| !c.is_empty()) else {
        return refused(
            StatusCode::UNAUTHORIZED,
            "unknown-caller",
            "the caller of this request could not be told, so its key cannot be kept for it",
        );
    };
    let body = match Limited::new(body, settings.max_request_body)
        .collect()
        .await
    {
        Ok(collected) => collected.to_bytes(),
        Err(_) => {
            return refused(
                StatusCode::PAYLOAD_TOO_LARGE,
                "request-too-large",
                "the request body is larger than this API reads",
            );
        }
    };
    let key = match KeyBuilder::new(settings.name.0.clone(), settings.name.1)
        .tenant(caller)
        .intent("http", header_key)
        .build()
    {
        Ok(key) => key,
        Err(_) => {
            return refused(
                StatusCode::BAD_REQUEST,
                "invalid-idempotency-key",
                "the Idempotency-Key cannot be used",
            );
        }
    };
    let fingerprint = fingerprint_of(&parts, route, &body, &settings.fingerprint_headers);
    let lambda_deadline = parts
        .extensions
        .get::<lambda_runtime::Context>()
        .map(lambda_runtime::Context::deadline)
        .filter(|deadline| *deadline > SystemTime::now());
    let deadline = lambda_deadline.unwrap_or_else(|| SystemTime::now() + settings.lease);
    let idem_request = match shared.idem.request(key, &fingerprint) {
        Ok(r) => r.deadline(deadline),
        Err(e) => return store_failed(&e),
    };
    let guard = match shared.idem.claim::<StoredResponse>(&idem_request).await {
        Ok(Claim::Acquired(guard)) => guard,
        Ok(Claim::Replay { result, .. }) => return (replay(result), Outcome::Replayed),
        Err(e) if e.is_payload_mismatch() => {
            return (
                problem(
                    StatusCode::UNPROCESSABLE_ENTITY,
                    "idempotency-key-reused",
                    "this Idempotency-Key was used with another request",
                ),
                Outcome::Mismatched,
            );
        }
        Err(IdempotencyError::InProgress {
            lease_expires_at, ..
        }) => {
            let wait = lease_expires_at
                .duration_since(SystemTime::now())
                .unwrap_or_default()
                .as_secs()
                .clamp(1, 60);
            let mut answer = problem(
                StatusCode::CONFLICT,
                "request-in-progress",
                "a request with this Idempotency-Key is still being handled; retry later",
            );
            answer
                .headers_mut()
                .insert(RETRY_AFTER, HeaderValue::from(wait));
            return (answer, Outcome::InProgress);
        }
        Err(e) => return store_failed(&e),
    };
    // From here the key is held: the handler, the storing of its answer and the release run in a task of their own,
    // so a client that hangs up (hyper then drops this future) cannot cut them between the effect and the record.
    let request = Request::from_parts(parts, ReqBody::from(body));
    let max_stored_body = settings.max_stored_body;
    let held = tokio::spawn(
        run_held(guard, inner, request, deadline, max_stored_body)
            .instrument(tracing::Span::current()),
    );
    match held.await {
        Ok(done) => done,
        // `run_held` catches the handler's panic itself; this is a panic of its own (or a runtime shutting down):
        // the key's lease ends by itself.
        Err(e) => {
            tracing::error!(error = %e, "the request's task failed: its key's lease will end");
            (
                problem(
                    StatusCode::INTERNAL_SERVER_ERROR,
                    "handler-failed",
                    "the request failed; it may be retried with the same Idempotency-Key",
                ),
                Outcome::Released,
            )
        }
    }
}

/// The handler under a held key, bounded by the lease (a panic or a timeout releases the key like a 5xx), then its
/// answer stored (2xx, 4xx) or the key released (5xx).
async fn run_held<S, Svc, ReqBody, ResBody>(
    guard: sqsafe_idempotency::Guard<S>,
    inner: Svc,
    request: Request<ReqBody>,
    deadline: SystemTime,
    max_stored_body: usize,
) -> (Response<Full<Bytes>>, Outcome)
where
    S: IdempotencyStore + 'static,
    Svc: tower::Service<Request<ReqBody>, Response = Response<ResBody>, Error = Infallible>
        + Send
        + 'static,
    Svc::Future: Send + 'static,
    ReqBody: Send + 'static,
    ResBody: http_body::Body<Data = Bytes> + Send + 'static,
    ResBody::Error: std::fmt::Display,
{
    let left = deadline
        .duration_since(SystemTime::now())
        .unwrap_or_default();
    let ran = tokio::time::timeout(
        left,
        AssertUnwindSafe(oneshot(inner, request)).catch_unwind(),
    )
    .await;
    let answer = match ran {
        Ok(Ok(answer)) => answer,
        Ok(Err(_panic)) => {
            release(guard).await;
            return (
                problem(
                    StatusCode::INTERNAL_SERVER_ERROR,
                    "handler-failed",
                    "the request failed; it may be retried with the same Idempotency-Key",
                ),
                Outcome::Released,
            );
        }
        Err(_elapsed) => {
            release(guard).await;
            return (
                problem(
                    StatusCode::GATEWAY_TIMEOUT,
                    "handler-timed-out",
                    "the request took too long; it may be retried with the same Idempotency-Key",
                ),
                Outcome::Released,
            );
        }
    };
    let (answer_parts, answer_body) = answer.into_parts();
    let status = answer_parts.status;
    let body = match answer_body.collect().await.map_err(|e| e.to_string()) {
        Ok(collected) => collected.to_bytes(),
        Err(e) => {
            tracing::warn!(error = %e, "the handler's answer body failed: key released");
            release(guard).await;
            return (
                problem(
                    StatusCode::BAD_GATEWAY,
                    "handler-failed",
                    "the request failed; it may be retried with the same Idempotency-Key",
                ),
                Outcome::Released,
            );
        }
    };
    let answer = Response::from_parts(answer_parts, Full::new(body.clone()));
    if status.is_server_error() {
        release(guard).await;
        return (answer, Outcome::Released);
    }
    let stored = StoredResponse::of(status, answer.headers(), &body, max_stored_body);
    if let Err(e) = guard.complete(&stored).await {
        // The handler ran and its answer goes to the client; a repeat finds the claim (409, then a run again once
        // its lease ended). Said loudly: it is the one way a handler can run twice.
        tracing::error!(error = %e, kind = e.kind(), "the answer could not be stored: a repeat may run the handler again");
        return (answer, Outcome::StoreFailed);
    }
    (answer, Outcome::Executed)
}

async fn pass<Svc, ReqBody, ResBody>(inner: Svc, request: Request<ReqBody>) -> Response<Full<Bytes>>
where
    Svc: tower::Service<Request<ReqBody>, Response = Response<ResBody>, Error = Infallible>,
    ResBody: http_body::Body<Data = Bytes>,
    ResBody::Error: std::fmt::Display,
{
    let answer = oneshot(inner, request).await;
    let (parts, body) = answer.into_parts();
    match body.collect().await.map_err(|e| e.to_string()) {
        Ok(collected) => Response::from_parts(parts, Full::new(collected.to_bytes())),
        Err(e) => {
            tracing::warn!(error = %e, "the handler's answer body failed");
            problem(
                StatusCode::BAD_GATEWAY,
                "handler-failed",
                "the answer could not be read",
            )
        }
    }
}

async fn oneshot<Svc, Req>(mut inner: Svc, request: Req) -> Svc::Response
where
    Svc: tower::Service<Req, Error = Infallible>,
{
    let Ok(()) = std::future::poll_fn(|cx| inner.poll_ready(cx)).await;
    let Ok(answer) = inner.call(request).await;
    answer
}

async fn release<S: IdempotencyStore>(guard: sqsafe_idempotency::Guard<S>) {
    if let Err(e) = guard.release().await {
        // Its lease ends by itself: a retry waits (409) until then.
        tracing::warn!(error = %e, kind = e.kind(), "the key could not be released; its lease will end");
    }
}
