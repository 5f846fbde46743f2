//! What the layer does beyond its defaults, and the checks its settings pass when the layer is built.

use std::time::Duration;

use http::Method;
use http::header::HeaderName;
use sqsafe_idempotency::{Heartbeat, Idempotency, IdempotencyStore, KeyBuilder};

/// The answer headers stored with every answer (beside the ones a team adds with
/// [`ApiSettings::stored_headers`]): what says what the answer is and where its resource lives, never what belongs to
/// one connection or one answer.
pub const DEFAULT_STORED_HEADERS: [HeaderName; 5] = [
    http::header::CONTENT_TYPE,
    http::header::LOCATION,
    http::header::ETAG,
    http::header::LINK,
    http::header::CACHE_CONTROL,
];

/// Headers never stored, even when named: credentials and cookies (a replay must not hand one caller's token to a
/// retry, nor set a cookie twice), hop-by-hop headers (about one connection), the body's framing and encoding (set
/// again from the replayed body; an encoding was negotiated for one request) and the layer's own.
const NEVER_STORED: [&str; 17] = [
    "authorization",
    "proxy-authorization",
    "www-authenticate",
    "proxy-authenticate",
    "cookie",
    "set-cookie",
    "connection",
    "keep-alive",
    "proxy-connection",
    "te",
    "trailer",
    "transfer-encoding",
    "upgrade",
    "content-length",
    "content-encoding",
    // The layer's own (headers.rs: REPLAYED, REPLAY_BODY).
    "idempotent-replayed",
    "idempotent-replay-body",
];

/// What the layer does, beyond its defaults. Checked when the layer is built
/// ([`IdempotencyLayer::with_settings`](super::IdempotencyLayer::with_settings)).
///
/// # Default
/// POST and PATCH guarded, the key required, no header fingerprinted, [`DEFAULT_STORED_HEADERS`] stored, a 30 s
/// lease, clients answered within 30 s outside Lambda, handlers stopped after 5 min, request bodies up to 1 MiB,
/// answers stored up to 48 KiB, the records named after the [`Idempotency`], metrics in the namespace `sqsafe`.
#[derive(Debug, Clone)]
pub struct ApiSettings {
    /// The methods guarded; others pass through untouched (their bodies streamed, never read). Default: POST and
    /// PATCH.
    pub methods: Vec<Method>,
    /// `true` (the default): a guarded request without the key is refused (`400`); `false`: it passes through.
    pub key_required: bool,
    /// Request headers that a repeat must match too, beside the method, the path, the query, the content type and
    /// the body. Default: none.
    pub fingerprint_headers: Vec<HeaderName>,
    /// Answer headers stored and replayed beside [`DEFAULT_STORED_HEADERS`]. A credential, a cookie, a hop-by-hop
    /// header, `content-length`, `content-encoding` or the layer's own is refused when the layer is built.
    pub stored_headers: Vec<HeaderName>,
    /// The claim's lease: a crashed process's claim is taken over once it passed (and the engine's takeover margin
    /// after it). While the handler runs, the lease is extended every third of it, so a handler may run longer than
    /// its lease and still run once. Under Lambda the first lease ends at the invocation's deadline when that is
    /// sooner. At least 1 s. Default 30 s.
    pub lease: Duration,
    /// Outside Lambda, how long a client waits for the handler: then it gets `504` (`handler-still-running`) while
    /// the handler runs on under its extended claim and its answer is stored; the client's retry gets `409`, then
    /// the replay. Under Lambda the handler must end before the invocation's deadline less the completion's reserve,
    /// and the client waits for it. Default 30 s.
    pub answer_within: Duration,
    /// The longest a handler may run: then it is stopped (its future dropped) and its claim kept until its lease
    /// ends, as a crash would leave it (it may have taken effect): a retry gets `409` until then, and then runs it
    /// again. A handler that hangs so never holds its key for good. Under Lambda the invocation's deadline less the
    /// completion's reserve stops it sooner. Default 5 min.
    pub max_handler_time: Duration,
    /// The largest request body read (`413` above). Default 1 MiB.
    pub max_request_body: usize,
    /// The most of an answer stored for replay, in bytes of the stored record's JSON (its status, headers and body
    /// as stored): an answer over it is stored without its body (a replay says `Idempotent-Replay-Body: omitted`),
    /// and only this much of it is ever held in memory. Never more than the engine's `max_result_bytes`. Default
    /// 48 KiB.
    pub max_stored_body: usize,
    /// The records' name (their key's consumer part) and its version: change the version when a handler's effect
    /// changes meaning, so that keys of the old one are not replayed. Default `None`: the [`Idempotency`]'s own
    /// name and version (`Idempotency::builder(store, "orders-api", 2)` names them `orders-api`, version 2).
    pub name: Option<(String, u32)>,
    /// The CloudWatch namespace of the one Embedded Metric Format line written per guarded request (its outcome
    /// and duration under the dimension `api` = the record name: `sqsafe_telemetry::api_metrics`), to stdout
    /// unless [`IdempotencyLayer::metrics_writer`](super::IdempotencyLayer::metrics_writer) says otherwise. `None`:
    /// no metrics. Default `Some("sqsafe")`.
    pub metrics_namespace: Option<String>,
}

impl Default for ApiSettings {
    fn default() -> Self {
        Self {
            methods: vec![Method::POST, Method::PATCH],
            key_required: true,
            fingerprint_headers: Vec::new(),
            stored_headers: Vec::new(),
            lease: Duration::from_secs(30),
            answer_within: Duration::from_secs(30),
            max_handler_time: Duration::from_secs(300),
            max_request_body: 1024 * 1024,
            max_stored_body: 48 * 1024,
            name: None,
            metrics_namespace: Some("sqsafe".to_owned()),
        }
    }
}

/// Why the layer refused its settings.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum ApiConfigError {
    /// A header named in [`ApiSettings::stored_headers`] is one the layer never stores.
    #[error(
        "stored_headers: `{0}` is never stored (a credential, a cookie, a hop-by-hop header, the body's framing or \
         encoding, or one the layer sets itself)"
    )]
    HeaderNeverStored(HeaderName),
    /// [`ApiSettings::lease`] is shorter than 1 s or than the engine's shortest lease.
    #[error(
        "lease {lease:?} must be at least 1 s and at least the engine's shortest lease ({min:?})"
    )]
    Lease {
        /// The lease given.
        lease: Duration,
        /// The shortest allowed.
        min: Duration,
    },
    /// [`ApiSettings::answer_within`] or [`ApiSettings::max_handler_time`] is zero.
    #[error("{0} must be more than zero")]
    Zero(&'static str),
    /// The records' name cannot make keys.
    #[error("record name `{name}` (version {version}) cannot make keys: {reason}")]
    Name {
        /// The name.
        name: String,
        /// Its version.
        version: u32,
        /// Why.
        reason: String,
    },
}

/// The settings as the layer uses them, after the checks.
#[derive(Debug, Clone)]
pub(super) struct Resolved {
    pub(super) methods: Vec<Method>,
    pub(super) key_required: bool,
    /// Sorted, without repeats: the order they were named in does not count.
    pub(super) fingerprint_headers: Vec<HeaderName>,
    pub(super) stored_headers: Vec<HeaderName>,
    pub(super) lease: Duration,
    pub(super) heartbeat: Heartbeat,
    pub(super) answer_within: Duration,
    pub(super) max_handler_time: Duration,
    pub(super) max_request_body: usize,
    pub(super) max_stored: usize,
    pub(super) name: (String, u32),
    pub(super) metrics_namespace: Option<String>,
}

impl Resolved {
    pub(super) fn new<S: IdempotencyStore>(
        settings: ApiSettings,
        idem: &Idempotency<S>,
    ) -> Result<Self, ApiConfigError> {
        if let Some(name) = settings
            .stored_headers
            .iter()
            .find(|name| NEVER_STORED.contains(&name.as_str()))
        {
            return Err(ApiConfigError::HeaderNeverStored(name.clone()));
        }
        let min = idem.min_lease().max(Duration::from_secs(1));
        if settings.lease < min {
            return Err(ApiConfigError::Lease {
                lease: settings.lease,
                min,
            });
        }
        if settings.answer_within.is_zero() {
            return Err(ApiConfigError::Zero("answer_within"));
        }
        if settings.max_handler_time.is_zero() {
            return Err(ApiConfigError::Zero("max_handler_time"));
        }
        let (name, version) = settings.name.unwrap_or_else(|| {
            let (name, version) = idem.name();
            (name.to_owned(), version)
        });
        if let Err(e) = KeyBuilder::new(name.clone(), version)
            .tenant("caller")
            .intent("http", "key")
            .build()
        {
            return Err(ApiConfigError::Name {
                name,
                version,
                reason: e.to_string(),
            });
        }
        let mut fingerprint_headers = settings.fingerprint_headers;
        fingerprint_headers.sort_unstable_by(|a, b| a.as_str().cmp(b.as_str()));
        fingerprint_headers.dedup();
        let mut stored_headers = DEFAULT_STORED_HEADERS.to_vec();
        for name in settings.stored_headers {
            if !stored_headers.contains(&name) {
                stored_headers.push(name);
            }
        }
        Ok(Self {
            methods: settings.methods,
            key_required: settings.key_required,
            fingerprint_headers,
            stored_headers,
            lease: settings.lease,
            // A third of the lease: two beats may fail (a throttled write) before the lease can pass.
            heartbeat: Heartbeat {
                every: settings.lease / 3,
                lease: settings.lease,
            },
            answer_within: settings.answer_within,
            max_handler_time: settings.max_handler_time,
            max_request_body: settings.max_request_body,
            max_stored: settings.max_stored_body.min(idem.max_result_bytes()),
            name: (name, version),
            metrics_namespace: settings.metrics_namespace,
        })
    }
}
