//! An HTTP effect in a few lines (feature `http`): a client for the API a consumer calls, which sends every request
//! with the intent's `Idempotency-Key`, the record's correlation id, its trace context (`traceparent`, continuing the
//! producer's trace; with traces exported, from the call's own span) and a time bound taken from the invocation's
//! deadline, and maps the answer to a [`RecordError`] that the batch processor acts on.
//!
//! ```
//! use serde::{Deserialize, Serialize};
//! use sqsafe::http::HttpClient;
//! use sqsafe::{Consumer, Context, Effect, Intent, RecordError, Setup};
//!
//! #[derive(Deserialize)]
//! struct Payment { tenant: String, payment_id: String, amount: u64 }
//!
//! #[derive(Serialize, Deserialize)]
//! struct Charge { id: String }
//!
//! struct ChargePayment { payments: HttpClient }
//!
//! impl Consumer for ChargePayment {
//!     const NAME: &'static str = "charge-payment";
//!     const EFFECT_VERSION: u32 = 1;
//!     const INTENT_FIELDS: &'static [&'static str] = &["/tenant", "/payment_id", "/amount"];
//!     type Payload = Payment;
//!     type Output = Charge;
//!
//!     fn new(setup: &Setup) -> Result<Self, sqsafe::Error> {
//!         let payments = HttpClient::builder(setup.env.url("PAYMENTS_API_URL")?)
//!             .name("payments API")
//!             .timeout(setup.env.millis("PAYMENTS_TIMEOUT_MS", 5000, 1..=60_000)?)
//!             .build()?;
//!         Ok(Self { payments })
//!     }
//!
//!     fn intent(p: &Payment) -> Intent {
//!         Intent::new(&p.tenant, "payment", &p.payment_id)
//!     }
//!
//!     fn effect<'a>(&'a self, p: Payment, cx: &'a Context<'a>) -> Result<Effect<'a, Charge>, RecordError> {
//!         let body = serde_json::json!({ "payment_id": p.payment_id, "amount": p.amount });
//!         Ok(Effect::call(async move { self.payments.post_json("/v1/charges", &body, cx).await?.json() }))
//!     }
//! }
//! ```
//!
//! # Status mapping
//!
//! | answer | result | kind |
//! |---|---|---|
//! | 2xx | `Ok(HttpResponse)` | |
//! | 2xx whose body [`HttpResponse::json`] cannot read | transient | `downstream_bad_response` |
//! | 2xx replayed without its body (`Idempotent-Replay-Body: omitted`), read by [`HttpResponse::json`] | permanent | `downstream_replay_without_body` |
//! | 2xx whose body is larger than [`max_body_bytes`](HttpClientBuilder::max_body_bytes) | transient | `downstream_bad_response` |
//! | 409 Conflict (the same key in flight, per the IETF Idempotency-Key draft) | transient | `downstream_in_flight` |
//! | 422 Unprocessable Content (the key was used with another payload) | permanent | `downstream_key_reused` |
//! | 408, 425, 429, 5xx | transient | `downstream_unavailable` |
//! | other 4xx (`410` for a replay whose answer is gone among them); 1xx and 3xx (not followed) | permanent | `downstream_rejected` |
//! | no answer within the time bound | transient | `downstream_timeout` |
//! | no connection, or the answer was cut | transient | `downstream_unreachable` |
//! | too little time before the deadline: not sent | transient | `deadline` ([`RecordError::DEADLINE`]) |
//! | a request that cannot be built (a path that is no URI, a body that is no JSON) | permanent | `downstream_bad_request` |
//!
//! The statuses are read from one table, [`crate::status`], that `sqsafe::api` (the other end of the key) reads too:
//! what is retried here, the layer releases and never stores; what is final here, it stores and replays.
//!
//! Any other answer is mapped by its status whatever its body's size: a 422 or 400 error page larger than the cap is
//! still dead-lettered at once, and a 429 or 503 keeps its `Retry-After`; its body is not read (so its error carries
//! no code). A 2xx over the cap is transient: the effect cannot read the body, and the retry, carrying the same
//! `Idempotency-Key`, gets the API's replay.
//!
//! A transient answer with a `Retry-After` header (delta-seconds or an HTTP-date) carries it as
//! [`RecordError::retry_not_before`]: the batch processor keeps the message invisible until then instead of its
//! backoff. Transient errors after the request was sent (a timeout, a 5xx, a cut or unreadable answer) may follow an
//! effect that happened: the retry carries the same `Idempotency-Key`, and the API answers it with the first result.
//!
//! Error messages name the API ([`name`](HttpClientBuilder::name)) and carry the status and the API's error code
//! (`{"error": "<code>"}`, when it is a short identifier) only, never the response's text: they go to the logs and
//! to the dead-letter context, and an API's text may echo what was sent (a card, a customer).
//!
//! # Time
//!
//! Each request may take [`timeout`](HttpClientBuilder::timeout), cut to what is left before the invocation's
//! deadline less [`deadline_reserve`](HttpClientBuilder::deadline_reserve) (2 s by default, the batch processor's
//! own reserve: the call ends at least 1 s before the idempotency layer's completion reserve of 1 s begins, so the
//! completion that follows has its own time). With no time left the request is not sent.
//!
//! # TLS
//!
//! rustls with the ring provider and the platform's root certificates, through the same hyper, hyper-util and
//! hyper-rustls the AWS SDK's client is built on (`sqsafe-aws`): the feature adds no package to a consumer's tree.
//! The provider is passed to this client's TLS configuration, not installed process-wide, so the choice of the
//! rest of the program is left alone.

mod mapping;
mod response;

use std::fmt;
use std::sync::Arc;
use std::time::{Duration, SystemTime};

use bytes::Bytes;
use http::header::{CONTENT_TYPE, HeaderName, RETRY_AFTER};
use http::{Request, Uri};
use http_body_util::{BodyExt, Full, LengthLimitError, Limited};
use hyper_rustls::{ConfigBuilderExt, HttpsConnector};
use hyper_util::client::legacy::Client;
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::rt::TokioExecutor;
use serde::Serialize;
use sqsafe_batch::RecordError;
use sqsafe_telemetry::TraceContext;
use tracing::Instrument as _;

use crate::consumer::Context;

pub use http::Method;
pub use response::HttpResponse;

/// How errors name the API by default.
pub const DEFAULT_NAME: &str = "downstream API";
/// The longest a request may take by default.
pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(5);
/// The most of a response's body read by default: an API's answer is a few hundred bytes, and a larger one (a
/// proxy's error page, a misbehaving API) is not held in memory.
pub const DEFAULT_MAX_BODY_BYTES: usize = 64 * 1024;
/// The time kept free before the invocation's deadline by default: the batch processor's own reserve
/// ([`sqsafe_batch::DEFAULT_DEADLINE_RESERVE`]), more than the idempotency layer's completion reserve (1 s).
pub const DEFAULT_DEADLINE_RESERVE: Duration = sqsafe_batch::DEFAULT_DEADLINE_RESERVE;

/// The header that carries [`Context::downstream_key`].
pub const IDEMPOTENCY_KEY_HEADER: &str = "idempotency-key";

/// The W3C trace context header: [`Context::trace_context`], continued from the call's span.
pub const TRACEPARENT: &str = "traceparent";

/// A client for one HTTP API, built once per process (in [`Consumer::new`](crate::Consumer::new)) and cheap to clone.
/// See the [module docs](self) for what each answer means.
#[derive(Clone)]
pub struct HttpClient {
    inner: Arc<Inner>,
}

struct Inner {
    client: Client<HttpsConnector<HttpConnector>, Full<Bytes>>,
    /// Without a trailing `/`; a request's path is appended.
    base_url: String,
    name: Arc<str>,
    timeout: Duration,
    max_body_bytes: usize,
    deadline_reserve: Duration,
    key_header: HeaderName,
}

impl fmt::Debug for HttpClient {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let inner = &self.inner;
        f.debug_struct("HttpClient")
            .field("name", &inner.name)
            .field("base_url", &inner.base_url)
            .field("timeout", &inner.timeout)
            .field("max_body_bytes", &inner.max_body_bytes)
            .field("deadline_reserve", &inner.deadline_reserve)
            .field("idempotency_header", &inner.key_header)
            .finish_non_exhaustive()
    }
}

/// Settings of an [`HttpClient`], checked by [`build`](Self::build).
///
/// # Default
/// Name `"downstream API"`, timeout 5 s, bodies read up to 64 KiB, 2 s kept before the deadline, the downstream key
/// sent as `Idempotency-Key`.
#[derive(Debug, Clone)]
#[must_use]
pub struct HttpClientBuilder {
    base_url: String,
    name: String,
    timeout: Duration,
    max_body_bytes: usize,
    deadline_reserve: Duration,
    key_header: String,
}

/// Why an [`HttpClient`] could not be built; [`HttpClientBuilder::build`] returns it as [`crate::Error::Setup`].
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum HttpSetupError {
    /// The base URL is not an `http://` or `https://` URL with a host.
    #[error("{name}: base URL {url:?} is not an http(s):// URL with a host")]
    BadUrl {
        /// The API's name.
        name: String,
        /// The URL as given.
        url: String,
    },
    /// A setting is out of range.
    #[error("{name}: {setting} must be more than zero")]
    Zero {
        /// The API's name.
        name: String,
        /// `timeout` or `max_body_bytes`.
        setting: &'static str,
    },
    /// The header named for the downstream key is not a valid HTTP header name.
    #[error("{name}: {header:?} is not an HTTP header name")]
    BadHeader {
        /// The API's name.
        name: String,
        /// The name as given.
        header: String,
    },
    /// TLS could not be set up (no root certificates could be read, a protocol version refused).
    #[error("{name}: TLS setup failed: {source}")]
    Tls {
        /// The API's name.
        name: String,
        /// What failed.
        #[source]
        source: crate::BoxError,
    },
}

impl HttpClient {
    /// A builder for a client of the API at `base_url` (`http://` or `https://`, checked by
    /// [`build`](HttpClientBuilder::build)); request paths are joined to it.
    pub fn builder(base_url: impl Into<String>) -> HttpClientBuilder {
        HttpClientBuilder {
            base_url: base_url.into(),
            name: DEFAULT_NAME.to_owned(),
            timeout: DEFAULT_TIMEOUT,
            max_body_bytes: DEFAULT_MAX_BODY_BYTES,
            deadline_reserve: DEFAULT_DEADLINE_RESERVE,
            key_header: IDEMPOTENCY_KEY_HEADER.to_owned(),
        }
    }

    /// `POST path` (joined to the base URL) with `body` as JSON, and the headers `Idempotency-Key:
    /// cx.downstream_key()`, the correlation header (`x-correlation-id`), `traceparent` and `Content-Type:
    /// application/json`.
    /// The request is bounded in time (see the [module docs](self)); a 2xx is `Ok`, anything else the error of the
    /// status mapping.
    pub async fn post_json<B: Serialize + ?Sized>(
        &self,
        path: &str,
        body: &B,
        cx: &Context<'_>,
    ) -> Result<HttpResponse, RecordError> {
        self.send_json(Method::POST, path, body, cx).await
    }

    /// [`post_json`](Self::post_json) with `PUT`.
    pub async fn put_json<B: Serialize + ?Sized>(
        &self,
        path: &str,
        body: &B,
        cx: &Context<'_>,
    ) -> Result<HttpResponse, RecordError> {
        self.send_json(Method::PUT, path, body, cx).await
    }

    /// [`post_json`](Self::post_json) with any method.
    pub async fn send_json<B: Serialize + ?Sized>(
        &self,
        method: Method,
        path: &str,
        body: &B,
        cx: &Context<'_>,
    ) -> Result<HttpResponse, RecordError> {
        let inner = &self.inner;
        let body = serde_json::to_vec(body).map_err(|e| {
            RecordError::permanent(
                "downstream_bad_request",
                format!("{}: the request body is not JSON ({e})", inner.name),
            )
        })?;
        let Some(budget) = mapping::budget(
            inner.timeout,
            cx.deadline(),
            inner.deadline_reserve,
            SystemTime::now(),
        ) else {
            return Err(RecordError::transient(
                RecordError::DEADLINE,
                format!(
                    "{} not called: less than the {} ms reserve left before the invocation's deadline",
                    inner.name,
                    inner.deadline_reserve.as_millis()
                ),
            ));
        };
        // The call's own span (exported with the record's when traces are on); its context goes out as traceparent.
        let span = tracing::info_span!(
            target: "sqsafe::http",
            "http call",
            downstream = %inner.name,
            method = %method,
            path,
        );
        let trace = sqsafe_telemetry::traces::continue_from(&span, cx.trace_context());
        let request = self.request(method, path, body, cx, &trace)?;
        match tokio::time::timeout(budget, self.exchange(request))
            .instrument(span)
            .await
        {
            Ok(answer) => answer,
            Err(_elapsed) => Err(RecordError::transient(
                "downstream_timeout",
                format!(
                    "{} did not answer within {} ms",
                    inner.name,
                    budget.as_millis()
                ),
            )),
        }
    }

    fn request(
        &self,
        method: Method,
        path: &str,
        body: Vec<u8>,
        cx: &Context<'_>,
        trace: &TraceContext,
    ) -> Result<Request<Full<Bytes>>, RecordError> {
        let inner = &self.inner;
        let slash = if path.starts_with('/') { "" } else { "/" };
        let (correlation, correlation_id) =
            sqsafe_telemetry::correlation::http_header(cx.correlation_id());
        let request = Request::builder()
            .method(method)
            .uri(format!("{}{slash}{path}", inner.base_url))
            .header(CONTENT_TYPE, "application/json")
            .header(&inner.key_header, cx.downstream_key())
            .header(correlation, correlation_id);
        let request = match trace.traceparent() {
            Some(traceparent) => request.header(TRACEPARENT, traceparent),
            None => request,
        };
        request.body(Full::new(Bytes::from(body))).map_err(|e| {
            RecordError::permanent(
                "downstream_bad_request",
                format!("{}: the request could not be built ({e})", inner.name),
            )
        })
    }

    /// Sends, reads the answer (its body up to the cap), then maps it by its status.
    async fn exchange(&self, request: Request<Full<Bytes>>) -> Result<HttpResponse, RecordError> {
        let inner = &self.inner;
        let response = inner.client.request(request).await.map_err(|e| {
            RecordError::transient("downstream_unreachable", format!("{}: {e}", inner.name))
                .with_source(e)
        })?;
        let (parts, body) = response.into_parts();
        let retry_after = parts.headers.get(RETRY_AFTER).and_then(|v| v.to_str().ok());
        let retry_not_before = mapping::retry_after(retry_after, SystemTime::now());
        // The status and headers are the answer; a body over the cap is only unread (mapping::over_cap).
        let body = match Limited::new(body, inner.max_body_bytes).collect().await {
            Ok(collected) => collected.to_bytes(),
            Err(e) if e.is::<LengthLimitError>() => {
                return Err(mapping::over_cap(
                    &inner.name,
                    parts.status,
                    inner.max_body_bytes,
                    retry_not_before,
                ));
            }
            Err(e) => {
                return Err(RecordError::transient(
                    "downstream_unreachable",
                    format!("{}: the answer was cut", inner.name),
                )
                .with_source(e));
            }
        };
        mapping::classify(&inner.name, parts.status, &body, retry_not_before)?;
        Ok(HttpResponse::new(
            parts.status,
            parts.headers,
            body,
            Arc::clone(&inner.name),
        ))
    }
}

impl HttpClientBuilder {
    /// How errors name the API, e.g. `"payments API"`.
    pub fn name(mut self, name: impl Into<String>) -> Self {
        self.name = name.into();
        self
    }

    /// The longest a request may take, answer read included (more than zero).
    pub fn timeout(mut self, timeout: Duration) -> Self {
        self.timeout = timeout;
        self
    }

    /// The most of a response's body read (more than zero). A 2xx with a larger body is a transient
    /// `downstream_bad_response`; any other answer is mapped by its status, its body unread.
    pub fn max_body_bytes(mut self, cap: usize) -> Self {
        self.max_body_bytes = cap;
        self
    }

    /// The time kept free before the invocation's deadline: a request never runs into it, and is not sent when
    /// nothing else is left.
    pub fn deadline_reserve(mut self, reserve: Duration) -> Self {
        self.deadline_reserve = reserve;
        self
    }

    /// The header that carries [`Context::downstream_key`], for an API that reads its idempotency key under
    /// another name (e.g. `PayPal-Request-Id`). Checked by [`build`](Self::build).
    pub fn idempotency_header(mut self, header: impl Into<String>) -> Self {
        self.key_header = header.into();
        self
    }

    /// Checks the settings and builds the client (TLS with ring and the platform's root certificates for an
    /// `https://` base URL). Errors are [`HttpSetupError`]s inside [`crate::Error::Setup`].
    pub fn build(self) -> Result<HttpClient, crate::Error> {
        let name = self.name;
        let base_url = self.base_url.trim_end_matches('/').to_owned();
        let scheme = base_url
            .parse::<Uri>()
            .ok()
            .filter(|uri| uri.host().is_some_and(|h| !h.is_empty()))
            .filter(|uri| uri.query().is_none())
            .and_then(|uri| uri.scheme_str().map(str::to_ascii_lowercase));
        let https = match scheme.as_deref() {
            Some("https") => true,
            Some("http") => false,
            _ => {
                return Err(crate::Error::setup(HttpSetupError::BadUrl {
                    name,
                    url: self.base_url,
                }));
            }
        };
        for (setting, zero) in [
            ("timeout", self.timeout.is_zero()),
            ("max_body_bytes", self.max_body_bytes == 0),
        ] {
            if zero {
                return Err(crate::Error::setup(HttpSetupError::Zero { name, setting }));
            }
        }
        let Ok(key_header) = HeaderName::try_from(self.key_header.as_str()) else {
            return Err(crate::Error::setup(HttpSetupError::BadHeader {
                name,
                header: self.key_header,
            }));
        };
        let tls = tls_config(https).map_err(|source| {
            crate::Error::setup(HttpSetupError::Tls {
                name: name.clone(),
                source,
            })
        })?;
        let connector = hyper_rustls::HttpsConnectorBuilder::new()
            .with_tls_config(tls)
            .https_or_http()
            .enable_http1()
            .build();
        let client = Client::builder(TokioExecutor::new()).build(connector);
        Ok(HttpClient {
            inner: Arc::new(Inner {
                client,
                base_url,
                name: name.into(),
                timeout: self.timeout,
                max_body_bytes: self.max_body_bytes,
                deadline_reserve: self.deadline_reserve,
                key_header,
            }),
        })
    }
}

/// rustls with ring, given to this client only (no process-wide default is installed or needed). The platform's
/// roots are read only for an `https://` API: a plain `http://` one (a local run) needs none, and works where there
/// are none.
fn tls_config(https: bool) -> Result<rustls::ClientConfig, crate::BoxError> {
    // rustls 0.23.48 deprecates ring's provider (it has no post-quantum key exchange); ring stays, as for the AWS
    // SDK's client (sqsafe-aws), for its build time: aws-lc-sys's build script alone takes about 36 s on 2 cores.
    // Without the allow, a team's project that resolves rustls 0.23.48 or later warns while compiling sqsafe.
    #[allow(deprecated)]
    let ring = rustls::crypto::ring::default_provider();
    let builder = rustls::ClientConfig::builder_with_provider(Arc::new(ring))
        .with_safe_default_protocol_versions()?;
    let builder = if https {
        builder.with_native_roots()?
    } else {
        builder.with_root_certificates(rustls::RootCertStore::empty())
    };
    Ok(builder.with_no_client_auth())
}
