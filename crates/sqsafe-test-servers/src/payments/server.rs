use std::net::SocketAddr;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

use tokio::net::TcpListener;

use super::config::{PaymentsApi, ProcessingDelay};
use super::fault::{Fault, FaultPlan};
use super::http::router;
use super::ledger::{Charge, Ledger, Stats};
use crate::error::{Error, Result};
use sqsafe_testkit::{ServerSettings as Settings, ServerTask};

/// State shared by the server's connections and its [`RunningPayments`] handle.
pub(crate) struct Shared {
    ledger: Mutex<Ledger>,
    pub(crate) delay: Option<Arc<dyn ProcessingDelay>>,
}

impl Shared {
    /// The lock is never held across an await, and every transition leaves the ledger consistent, so a panic while
    /// holding it (there is no code that panics there) would not leave anything half-done: poisoning is ignored.
    pub(crate) fn ledger(&self) -> MutexGuard<'_, Ledger> {
        self.ledger.lock().unwrap_or_else(PoisonError::into_inner)
    }

    pub(crate) fn charges(&self) -> Vec<Charge> {
        self.ledger().charges().to_vec()
    }
}

/// A payments API serving on a spawned task. Dropping it stops the server; [`shutdown`](Self::shutdown) also waits
/// until the port is released.
#[derive(Debug)]
pub struct RunningPayments {
    addr: SocketAddr,
    shared: Arc<Shared>,
    server: ServerTask,
}

impl RunningPayments {
    pub(crate) async fn start(api: PaymentsApi, addr: SocketAddr) -> Result<Self> {
        let bind_error = |source| Error::Bind { addr, source };
        let listener = TcpListener::bind(addr).await.map_err(bind_error)?;
        let local = listener.local_addr().map_err(bind_error)?;
        let shared = Arc::new(Shared {
            ledger: Mutex::new(Ledger::new(FaultPlan::new(
                api.seed,
                api.fail_before_rate,
                api.fail_after_rate,
            ))),
            delay: api.delay,
        });
        let settings = Settings {
            nodelay: false,
            header_read_timeout: true,
            log_prefix: "",
        };
        let router = router(shared.clone());
        let server = ServerTask::spawn(listener, settings, move || router.clone());
        tracing::info!(addr = %local, seed = api.seed, "payments API listening");
        Ok(Self {
            addr: local,
            shared,
            server,
        })
    }

    /// The address the server listens on, with the actual port when port 0 was asked for.
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// `http://127.0.0.1:PORT`, without a trailing slash.
    pub fn base_url(&self) -> String {
        format!("http://{}", self.addr)
    }

    /// The ledger: every charge made so far, oldest first.
    pub fn charges(&self) -> Vec<Charge> {
        self.shared.charges()
    }

    /// Queues `fault` for the next new request of `payment_id` (its first use of a key), ahead of
    /// [`force_next`](Self::force_next)'s queue and the seeded RNG: a fault aimed at one payment whatever the order in
    /// which concurrent requests arrive.
    pub fn force_for_payment(&self, payment_id: &str, fault: Fault) {
        self.shared.ledger().force_for_payment(payment_id, fault);
    }

    /// Queues `fault` for the next new request (a request whose key is not known yet), ahead of the seeded RNG.
    /// Several calls queue several outcomes, used in order; forcing does not shift the seeded sequence.
    pub fn force_next(&self, fault: Fault) {
        self.shared.ledger().force(fault);
    }

    /// The counters so far.
    pub fn stats(&self) -> Stats {
        self.shared.ledger().stats()
    }

    /// Stops accepting, cuts open connections (requests still in flight are dropped, their keys released) and waits
    /// until the listening socket is closed.
    pub async fn shutdown(self) {
        self.server.shutdown().await;
    }
}

impl std::fmt::Debug for Shared {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Shared")
            .field("ledger", &self.ledger)
            .field("processing_delay", &self.delay.is_some())
            .finish()
    }
}
