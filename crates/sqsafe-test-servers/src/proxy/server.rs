use std::collections::BTreeSet;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::{Duration, SystemTime};

use axum::Router;
use axum::http::Uri;
use bytes::Bytes;
use http_body_util::Full;
use hyper_util::client::legacy::Client;
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::rt::{TokioExecutor, TokioTimer};
use tokio::net::TcpListener;

use super::config::{FaultProxyConfig, parse_upstream};
use super::error::Error;
use super::fault::{Fault, FaultPlan};
use super::forward::handle;
use super::ownership::WriteId;
use super::stats::{InjectedFault, ProxyStats, RECENT_FAULTS, SelfMetWrite};
use sqsafe_testkit::{ServerSettings as Settings, ServerTask};

/// The pooled client the proxy forwards with.
pub(crate) type UpstreamClient = Client<HttpConnector, Full<Bytes>>;

/// Starts fault proxies; see the [module documentation](super).
#[derive(Debug, Clone, Copy)]
pub struct FaultProxy;

impl FaultProxy {
    /// Validates `config`, binds a free port on 127.0.0.1 and serves on a spawned task until the returned handle is
    /// shut down or dropped. Faults start enabled. Must be called within a Tokio runtime.
    pub async fn start(config: FaultProxyConfig) -> Result<RunningProxy, Error> {
        RunningProxy::start(config).await
    }
}

/// State shared by the proxy's connections and its [`RunningProxy`] handle.
#[derive(Debug)]
pub(crate) struct Shared {
    state: Mutex<State>,
    enabled: AtomicBool,
    operations: Option<BTreeSet<String>>,
    pub(crate) upstream: Uri,
    pub(crate) client: UpstreamClient,
    /// moto rolls a failed TransactWriteItems back by restoring a copy of the tables taken when it started, which
    /// also erases writes that other requests made meanwhile (and can leave half of a concurrent transaction).
    /// DynamoDB transactions are atomic; to keep that true in front of moto, a transaction runs alone: it takes this
    /// lock for writing, every other DynamoDB request for reading.
    pub(crate) isolation: tokio::sync::RwLock<()>,
}

#[derive(Debug)]
struct State {
    plan: FaultPlan,
    stats: ProxyStats,
    /// Fenced writes answered with a 500 after the write, whose next try is inspected (see `ownership`). Few: one per
    /// after-write fault on a fenced write, removed when a retry gets a real answer.
    ambiguous: BTreeSet<WriteId>,
}

impl Shared {
    /// The lock is never held across an await and every update is a few counter bumps, so a poisoned lock holds
    /// consistent data: poisoning is ignored.
    fn state(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Counts one request and decides its fault. `operation` is the DynamoDB operation, `None` for other traffic.
    pub(crate) fn admit(&self, operation: Option<&str>) -> Fault {
        let mut state = self.state();
        state.stats.requests += 1;
        let Some(operation) = operation else {
            return Fault::None;
        };
        state.stats.dynamodb_requests += 1;
        *state
            .stats
            .by_operation
            .entry(operation.to_owned())
            .or_default() += 1;
        let eligible = self
            .operations
            .as_ref()
            .is_none_or(|only| only.contains(operation));
        // Read under the lock, so that a request either draws with the faults on or does not draw at all.
        if eligible && self.enabled.load(Ordering::SeqCst) {
            let fault = state.plan.draw(operation);
            let name = match fault {
                Fault::Throttle => {
                    state.stats.throttled += 1;
                    "throttled"
                }
                Fault::Error500 => {
                    state.stats.errors_500 += 1;
                    "500"
                }
                Fault::AfterWrite500 => "500 after the write",
                Fault::UnprocessedKeys => "every key unprocessed",
                Fault::None => return fault,
            };
            let recent = &mut state.stats.recent_faults;
            if recent.len() == RECENT_FAULTS {
                recent.pop_front();
            }
            recent.push_back(InjectedFault {
                at: SystemTime::now(),
                operation: operation.to_owned(),
                fault: name,
            });
            fault
        } else {
            Fault::None
        }
    }

    /// Counted once the request was forwarded, so the counter means "applied upstream, answered 500".
    pub(crate) fn count_after_write_500(&self) {
        self.state().stats.after_write_500 += 1;
    }

    /// Counted once the answer is built (a request whose body does not parse is forwarded instead).
    pub(crate) fn count_unprocessed_keys(&self) {
        self.state().stats.unprocessed_keys += 1;
    }

    pub(crate) fn count_upstream_error(&self) {
        self.state().stats.upstream_errors += 1;
    }

    /// A fenced write was applied and answered 500: its next try will be inspected.
    pub(crate) fn remember_ambiguous(&self, id: WriteId) {
        self.state().ambiguous.insert(id);
    }

    /// Whether `id` is the retry of a write answered 500 after it landed (cheap when there is none).
    pub(crate) fn is_ambiguous(&self, id: &WriteId) -> bool {
        self.state().ambiguous.contains(id)
    }

    /// Whether any write waits for its retry: when none does, requests are not parsed at all.
    pub(crate) fn any_ambiguous(&self) -> bool {
        !self.state().ambiguous.is_empty()
    }

    /// The client got the upstream's answer to the retry of `id`: forget it, and count it when it met its own write.
    pub(crate) fn settle_ambiguous(&self, id: &WriteId, met_own_write: bool) {
        let mut state = self.state();
        state.ambiguous.remove(id);
        if met_own_write {
            *state
                .stats
                .self_met_writes
                .entry(id.operation.clone())
                .or_default() += 1;
            state.stats.self_met.push(SelfMetWrite {
                operation: id.operation.clone(),
                table: id.table.clone(),
                key: id.key.clone(),
            });
        }
    }
}

/// A fault proxy serving on a spawned task. Dropping it stops the proxy; [`shutdown`](Self::shutdown) also waits
/// until the port is released.
#[derive(Debug)]
pub struct RunningProxy {
    addr: SocketAddr,
    shared: Arc<Shared>,
    server: ServerTask,
}

impl RunningProxy {
    async fn start(config: FaultProxyConfig) -> Result<Self, Error> {
        config.validate()?;
        let upstream = parse_upstream(&config.upstream)?;
        let addr = SocketAddr::from(([127, 0, 0, 1], 0));
        let bind_error = |source| Error::Bind { addr, source };
        let listener = TcpListener::bind(addr).await.map_err(bind_error)?;
        let local = listener.local_addr().map_err(bind_error)?;

        let mut connector = HttpConnector::new();
        connector.set_nodelay(true);
        let client = Client::builder(TokioExecutor::new())
            .timer(TokioTimer::new())
            .pool_timer(TokioTimer::new())
            .pool_idle_timeout(Duration::from_secs(30))
            .build(connector);
        let shared = Arc::new(Shared {
            state: Mutex::new(State {
                plan: FaultPlan::new(
                    config.seed,
                    config.throttle_rate,
                    config.error_500_rate,
                    config.after_write_500_rate,
                    config.unprocessed_keys_rate,
                ),
                stats: ProxyStats::default(),
                ambiguous: BTreeSet::new(),
            }),
            enabled: AtomicBool::new(true),
            operations: config.operations.map(|ops| ops.into_iter().collect()),
            upstream,
            client,
            isolation: tokio::sync::RwLock::new(()),
        });
        let settings = Settings {
            nodelay: true,
            header_read_timeout: true,
            log_prefix: "proxy ",
        };
        // Every request is forwarded, whatever its method and path: one fallback, no routes.
        let router = Router::new().fallback(handle).with_state(shared.clone());
        let server = ServerTask::spawn(listener, settings, move || router.clone());
        tracing::info!(
            addr = %local,
            upstream = %config.upstream,
            seed = config.seed,
            throttle_rate = config.throttle_rate,
            error_500_rate = config.error_500_rate,
            after_write_500_rate = config.after_write_500_rate,
            unprocessed_keys_rate = config.unprocessed_keys_rate,
            "fault proxy listening"
        );
        Ok(Self {
            addr: local,
            shared,
            server,
        })
    }

    /// The address the proxy listens on.
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// `http://127.0.0.1:PORT`, without a trailing slash: the endpoint to give the SDK (`AWS_ENDPOINT_URL_DYNAMODB`).
    pub fn endpoint(&self) -> String {
        format!("http://{}", self.addr)
    }

    /// The counters so far.
    pub fn stats(&self) -> ProxyStats {
        self.shared.state().stats.clone()
    }

    /// Turns fault injection on or off (it starts on), for example off while creating tables and for the final
    /// checks. While off the proxy is transparent and takes no draws from the RNG, so turning it back on continues the
    /// seeded sequence where it stopped. Requests already past their fault decision are not affected.
    pub fn set_enabled(&self, on: bool) {
        // Taken under the state lock so that no request is halfway through its decision.
        let _state = self.shared.state();
        self.shared.enabled.store(on, Ordering::SeqCst);
    }

    /// Whether faults are injected.
    pub fn is_enabled(&self) -> bool {
        self.shared.enabled.load(Ordering::SeqCst)
    }

    /// Stops accepting, cuts open connections (requests in flight are dropped) and waits until the listening socket
    /// is closed.
    pub async fn shutdown(self) {
        self.server.shutdown().await;
    }
}
