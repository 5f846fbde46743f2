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
//! | a body over [`ApiSettings::max_request_body`] | `413` |
//! | first of its caller and key | one conditional write claims the key, the handler runs, and its answer is stored or its key released by its status (below) |
//! | a repeat of the same request, completed | the stored answer: its status, stored headers and body byte for byte, with `Idempotent-Replayed: true`; the handler does not run |
//! | a repeat of another request (method, path, query, content type, body, the named headers) | `422`; the handler does not run |
//! | a repeat while the first is in flight | `409` with `Retry-After`; the handler does not run |
//! | the handler answered a status the client retries (`408`, `409`, `425`, `429`, `5xx`: [`crate::status`]), or panicked | the key is released and the answer passed through, its `Retry-After` with it (`500` for a panic): the retry runs the handler again |
//! | the handler answered a final status (`2xx`, other `4xx`, `1xx`, `3xx`) | stored and replayed |
//! | the handler runs longer than its lease | its claim is extended while it runs: it runs once, and its answer is stored when it ends |
//! | outside Lambda, no answer within [`ApiSettings::answer_within`] | `504` (`handler-still-running`); the handler runs on and its answer is stored: the retry gets `409`, then the replay |
//! | the handler still runs after [`ApiSettings::max_handler_time`] (5 min), or under Lambda at the invocation's deadline less the completion's reserve (1 s) | `504` (`handler-timed-out`); the handler is stopped and its claim kept (it may have taken effect) until its lease ends |
//! | under Lambda, less than the completion's reserve left when the request arrives | `503` (`no-time-left`) with `Retry-After: 1`; nothing is claimed and the handler does not start (if the claim itself took the time left, the key is released) |
//! | the client hangs up (a hyper server then drops the request) | the request runs on in a task of its own: its answer is stored, its log line and metric written; the retry gets the replay |
//! | the idempotency table failed | `503` with `Retry-After: 1` |
//! | a completed key whose answer cannot be read back | `410` (`replay-unavailable`), final for a client: the handler does not run again |
//!
//! **What a repeat must match:** what the request means, never a pattern of it: the method, the path as sent (its
//! parameters: `/orders/1/cancel` is not `/orders/2/cancel`), the query string's pairs in order, the content type,
//! and the body as its type says (JSON as JSON, key order and spacing aside and numbers exact; anything else byte for
//! byte; never one kind equal to another), plus the headers named in [`ApiSettings::fingerprint_headers`]. The
//! engine's fingerprint fields (for consumers' payloads) never apply here.
//!
//! **Scoped by the caller.** The key is the caller's: [`IdempotencyLayer::new`] takes an extractor that names the
//! caller from the request (the API Gateway authorizer's principal, the API key's id, a header the gateway sets).
//! Two callers that send one key have two records, and neither can read the other's answer. The records are named
//! after the [`Idempotency`] (its name and version), unless [`ApiSettings::name`] says otherwise.
//!
//! **What is stored of an answer:** its status, the headers of an allow-list ([`DEFAULT_STORED_HEADERS`] and
//! [`ApiSettings::stored_headers`]; never a credential, a cookie or a hop-by-hop header), and its body when the
//! whole fits in [`ApiSettings::max_stored_body`] (48 KiB of the record's JSON) and is not encoded. Otherwise it is
//! stored without the body: a repeat gets the status and headers, an empty body and `Idempotent-Replay-Body:
//! omitted`. Only that much of an answer is ever read into memory; the rest streams through.
//!
//! **Streams pass through.** A request the layer does not guard (a GET, a method not listed) and its answer are
//! never buffered: a server-sent-events route or a large download streams as without the layer.
//!
//! **Logs.** One line per guarded request (`api request handled`), with the method, the matched route, the outcome,
//! the status and the correlation id (the request's `x-correlation-id`, else a new one), inside a span that carries
//! them and the caller's trace id (`producer_trace_id`, from `traceparent` or `X-Amzn-Trace-Id`, as a consumer logs
//! its producer's); never the body, the key or the caller. Written when the request ends, whether or not its client
//! still waits.
//!
//! **Traces.** With spans exported (`SQSAFE_TRACES=otlp`, as for a consumer), the request's span (`api request`) is a
//! child of the caller's span named by its `traceparent` (else `X-Amzn-Trace-Id`): a consumer's `http call` span and
//! the API's request are one trace. The spans are sent when the request has been handled: under Lambda before the
//! answer, cut before the invocation's deadline; in a long-running server, beside the answer.
//!
//! **Metrics.** One CloudWatch Embedded Metric Format line per guarded request, on stdout where Lambda sends it to
//! CloudWatch Logs: a counter per outcome (`RequestsExecuted`, `RequestsReplayed`, `RequestsInProgress`,
//! `RequestsMismatched`, `RequestsRefused`, `RequestsReleased`, `RequestsStoreFailed`, `RequestsPassed`,
//! `RequestsTimedOut`) and `RequestDuration`, in the namespace [`ApiSettings::metrics_namespace`] (`sqsafe`), dimension
//! `api` = the record name. [`IdempotencyLayer::metrics_writer`] sends them elsewhere; a namespace of `None` turns
//! them off.

mod answer;
mod body;
mod headers;
mod held;
mod json;
mod request;
mod settings;
mod stored;

use std::convert::Infallible;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context as TaskContext, Poll};
use std::time::{Duration, Instant, SystemTime};

use bytes::Bytes;
use http::{Request, Response, StatusCode};
use sqsafe_idempotency::{Idempotency, IdempotencyStore};
use sqsafe_telemetry::TraceContext;
use sqsafe_telemetry::api_metrics::{RequestOutcome as Outcome, write_request_emf};
use tracing::Instrument;

use answer::{Answer, new_correlation_id, problem, refused, retry_after};
use request::{route_of, valid_key};
use settings::Resolved;

pub use body::ApiBody;
pub use headers::{IDEMPOTENCY_KEY, MAX_KEY_CHARS, REPLAY_BODY, REPLAYED};
pub use settings::{ApiConfigError, ApiSettings, DEFAULT_STORED_HEADERS};
pub use stored::StoredResponse;

use crate::BoxError;

/// Names the caller of a request (its parts: method, URI, headers, extensions), or `None` when there is none.
pub type CallerFn = dyn Fn(&http::request::Parts) -> Option<String> + Send + Sync;

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
    settings: Resolved,
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
    /// The layer over `idem` (its table, window, lease rules, name and version), with `caller` naming each request's
    /// caller, and the [default settings](ApiSettings).
    ///
    /// # Errors
    /// As [`with_settings`](Self::with_settings).
    pub fn new(
        idem: Idempotency<S>,
        caller: impl Fn(&http::request::Parts) -> Option<String> + Send + Sync + 'static,
    ) -> Result<Self, ApiConfigError> {
        Self::with_settings(idem, caller, ApiSettings::default())
    }

    /// The same, with `settings`.
    ///
    /// # Errors
    /// [`ApiConfigError`]: a stored header that is never stored, a lease under 1 s or the engine's shortest, a zero
    /// `answer_within` or `max_handler_time`, a record name that cannot make keys.
    pub fn with_settings(
        idem: Idempotency<S>,
        caller: impl Fn(&http::request::Parts) -> Option<String> + Send + Sync + 'static,
        settings: ApiSettings,
    ) -> Result<Self, ApiConfigError> {
        let settings = Resolved::new(settings, &idem)?;
        Ok(Self {
            shared: Arc::new(Shared {
                idem,
                caller: Arc::new(caller),
                settings,
                metrics_writer: Arc::new(to_stdout),
            }),
        })
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
    ReqBody::Error: Into<BoxError>,
    ResBody: http_body::Body<Data = Bytes> + Send + 'static,
    ResBody::Error: Into<BoxError>,
{
    type Response = Response<ApiBody<ResBody>>;
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
        // Under Lambda, the invocation's deadline; one already passed is an emulator's (`cargo lambda watch` sends
        // 600000): unknown, the request handled as outside Lambda, as the batch processor reads it.
        let lambda_deadline = request
            .extensions()
            .get::<lambda_runtime::Context>()
            .and_then(|context| {
                sqsafe_batch::usable_deadline(context.deadline(), SystemTime::now())
            });
        // What the key header says decides the path; only a keyed request outside Lambda is answered before its end.
        let key = match request.headers().get(IDEMPOTENCY_KEY) {
            None if shared.settings.key_required => KeyHeader::Refused(Box::new(refused(
                StatusCode::BAD_REQUEST,
                "missing-idempotency-key",
                "this request needs an Idempotency-Key header",
            ))),
            None => KeyHeader::Absent,
            Some(value) => match valid_key(value) {
                Some(key) => KeyHeader::Valid(key.to_owned()),
                None => KeyHeader::Refused(Box::new(refused(
                    StatusCode::BAD_REQUEST,
                    "invalid-idempotency-key",
                    "the Idempotency-Key must be 1 to 255 visible ASCII characters",
                ))),
            },
        };
        let wait = match (&key, lambda_deadline) {
            (KeyHeader::Valid(_), None) => Some(shared.settings.answer_within),
            _ => None,
        };
        // The request runs in a task of its own from here: a client that hangs up (hyper then drops this future)
        // cuts neither the handler, nor the storing of its answer, nor its log line and metric.
        let (answer_tx, answer_rx) = tokio::sync::oneshot::channel();
        let task = tokio::spawn(
            async move {
                let started = Instant::now();
                let (answer, outcome) = match key {
                    KeyHeader::Refused(refusal) => *refusal,
                    KeyHeader::Absent => (pass(inner, request).await, Outcome::Passed),
                    KeyHeader::Valid(key) => {
                        held::guarded(&shared, inner, request, key, lambda_deadline).await
                    }
                };
                let status = answer.status().as_u16();
                let client_waiting = answer_tx.send(answer).is_ok();
                if outcome == Outcome::StoreFailed {
                    tracing::error!(
                        outcome = outcome.label(),
                        status,
                        client_waiting,
                        "api request handled"
                    );
                } else {
                    tracing::info!(
                        outcome = outcome.label(),
                        status,
                        client_waiting,
                        "api request handled"
                    );
                }
                shared.metrics(outcome, started.elapsed());
            }
            .instrument(span),
        );
        Box::pin(async move {
            let answer = match wait {
                None => answer_rx.await.ok(),
                Some(wait) => match tokio::time::timeout(wait, answer_rx).await {
                    Ok(answer) => answer.ok(),
                    Err(_elapsed) => Some(still_running(wait)),
                },
            };
            // The request's span closes when its task ends, and is exported then.
            match lambda_deadline {
                Some(deadline) => {
                    // Nothing of the request runs once the function has answered (Lambda freezes it then).
                    let _ = task.await;
                    export_spans(Some(deadline)).await;
                }
                None => {
                    tokio::spawn(async move {
                        let _ = task.await;
                        export_spans(None).await;
                    });
                }
            }
            // No answer: the request's task failed (a panic of the layer's own, or a runtime shutting down).
            Ok(answer.unwrap_or_else(|| {
                tracing::error!("the request's task failed: its key's lease will end");
                problem(
                    StatusCode::INTERNAL_SERVER_ERROR,
                    "handler-failed",
                    "the request failed; it may be retried with the same Idempotency-Key",
                )
            }))
        })
    }
}

/// What a guarded request's key header says.
enum KeyHeader<B> {
    Valid(String),
    Absent,
    Refused(Box<Answer<B>>),
}

/// Outside Lambda, the handler has not answered within `answer_within`: it runs on under its extended claim.
fn still_running<B>(waited: Duration) -> Response<ApiBody<B>> {
    tracing::warn!(
        waited_ms = waited.as_millis() as u64,
        "no answer within answer_within: 504 to the client, the handler runs on"
    );
    let answer = problem(
        StatusCode::GATEWAY_TIMEOUT,
        "handler-still-running",
        "the request is still being handled; retry it with the same Idempotency-Key: 409 while it runs, then its \
         answer",
    );
    retry_after(answer, Duration::from_secs(1))
}

/// Sends the spans of the request that just ended, when spans are exported (`SQSAFE_TRACES=otlp`): under Lambda
/// before the answer (the function is frozen once it has answered; the send is cut before the invocation's
/// deadline), in a server from a task of its own once the request's task ended (the answer is not held for the
/// collector).
async fn export_spans(lambda_deadline: Option<SystemTime>) {
    if !sqsafe_telemetry::traces::exporting() {
        return;
    }
    sqsafe_telemetry::traces::flush(lambda_deadline, SystemTime::now()).await;
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

/// A request passed through: its body and its answer's streamed, never read.
async fn pass<Svc, ReqBody, ResBody>(
    inner: Svc,
    request: Request<ReqBody>,
) -> Response<ApiBody<ResBody>>
where
    Svc: tower::Service<Request<ReqBody>, Response = Response<ResBody>, Error = Infallible>,
{
    let (parts, body) = oneshot(inner, request).await.into_parts();
    Response::from_parts(parts, ApiBody::streamed(Bytes::new(), Box::pin(body)))
}

async fn oneshot<Svc, Req>(mut inner: Svc, request: Req) -> Svc::Response
where
    Svc: tower::Service<Req, Error = Infallible>,
{
    let Ok(()) = std::future::poll_fn(|cx| inner.poll_ready(cx)).await;
    let Ok(answer) = inner.call(request).await;
    answer
}
