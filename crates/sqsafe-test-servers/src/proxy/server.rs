use std::collections::BTreeSet;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::Router;
use hyper_util::client::legacy::Client;
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::rt::{TokioExecutor, TokioTimer};
use tokio::net::TcpListener;

use super::config::{FaultProxyConfig, parse_upstream};
use super::error::Error;
use super::fault::FaultPlan;
use super::forward::handle;
use super::shared::{Shared, State};
use super::stats::ProxyStats;
use sqsafe_testkit::{ServerSettings as Settings, ServerTask};

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

impl FaultProxyConfig {
    /// [`FaultProxy::start`] with this configuration.
    pub async fn start(self) -> Result<RunningProxy, Error> {
        FaultProxy::start(self).await
    }
}
