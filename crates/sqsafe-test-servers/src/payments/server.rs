use std::net::SocketAddr;
use std::sync::{Arc, Mutex};

use sqsafe_idempotency::{DynamoDbStore, Idempotency, IdempotencyStore, InMemoryStore};
use tokio::net::TcpListener;

use super::config::{KeyPlace, PaymentsApi, PaymentsApiBuilder};
use super::fault::{Fault, FaultPlan};
use super::hold::Hold;
use super::http::router;
use super::ledger::{Charge, Ledger, Stats};
use super::shared::Shared;
use crate::error::{Error, Result};
use sqsafe_testkit::{ServerSettings as Settings, ServerTask};

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
        let faults = FaultPlan::new(api.seed, api.fail_before_rate, api.fail_after_rate);
        let shared = Arc::new(Shared {
            ledger: Mutex::new(Ledger::new(faults, api.ledger_file.as_deref())?),
            delay: api.delay,
            hold: api.hold.map(|payment_id| Arc::new(Hold::new(payment_id))),
        });
        let router = match api.keys {
            KeyPlace::DynamoDb { client, table } => {
                let store = DynamoDbStore::builder(client, table)
                    .build()
                    .map_err(|e| Error::Layer(e.to_string()))?;
                router(Arc::clone(&shared), engine(store)?, api.lease)
            }
            KeyPlace::InMemory => router(
                Arc::clone(&shared),
                engine(InMemoryStore::new())?,
                api.lease,
            ),
        }
        .map_err(|e| Error::Layer(e.to_string()))?;
        let bind_error = |source| Error::Bind { addr, source };
        let listener = TcpListener::bind(addr).await.map_err(bind_error)?;
        let local = listener.local_addr().map_err(bind_error)?;
        let settings = Settings {
            nodelay: false,
            header_read_timeout: true,
            log_prefix: "",
        };
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

    /// The ledger: every charge made so far, oldest first (with a ledger file, those of earlier processes first).
    pub fn charges(&self) -> Vec<Charge> {
        self.shared.charges()
    }

    /// Queues `fault` for the next new request of `payment_id` (a request whose key the layer has just claimed), ahead
    /// of [`force_next`](Self::force_next)'s queue and the seeded RNG: a fault aimed at one payment whatever the order
    /// in which concurrent requests arrive.
    pub fn force_for_payment(&self, payment_id: &str, fault: Fault) {
        self.shared.ledger().force_for_payment(payment_id, fault);
    }

    /// Queues `fault` for the next new request (a request whose key the layer has just claimed), ahead of the seeded
    /// RNG. Several calls queue several outcomes, used in order; forcing does not shift the seeded sequence.
    pub fn force_next(&self, fault: Fault) {
        self.shared.ledger().force(fault);
    }

    /// The counters so far.
    pub fn stats(&self) -> Stats {
        self.shared.ledger().stats()
    }

    /// Resolves once the payment given to [`hold_in_flight`](crate::PaymentsApiBuilder::hold_in_flight) is held and
    /// no charge is without its stored answer, with the number of requests then waiting, claimed and not charged
    /// (the held one among them); never, without a hold.
    pub async fn held(&self) -> usize {
        match &self.shared.hold {
            Some(hold) => hold.held().await,
            None => std::future::pending().await,
        }
    }

    /// The requests waiting at the hold now, claimed and not charged (the held one among them); 0 without a hold.
    pub fn waiting(&self) -> usize {
        self.shared.hold.as_ref().map_or(0, |hold| hold.waiting())
    }

    /// Stops accepting, cuts open connections and waits until the listening socket is closed. A request whose key
    /// the idempotency layer claimed runs on in its own task until its answer is stored (sqsafe::api does not let a
    /// cut connection part a charge from its record); a process killed instead leaves its keys claimed until their
    /// lease runs out (a retry gets `409` until then), since a request cut after its charge must not be charged again.
    pub async fn shutdown(self) {
        self.server.shutdown().await;
    }
}

fn engine<S: IdempotencyStore>(store: S) -> Result<Idempotency<S>> {
    Idempotency::builder(store, "payments-api", 1)
        .build()
        .map_err(|e| Error::Layer(e.to_string()))
}

impl PaymentsApi {
    /// Binds `addr` (use port 0 for a free port) and serves on a spawned task until the returned handle is shut
    /// down or dropped. Must be called within a Tokio runtime.
    pub async fn start(self, addr: SocketAddr) -> Result<RunningPayments> {
        RunningPayments::start(self, addr).await
    }
}

impl PaymentsApiBuilder {
    /// [`build`](Self::build), then [`PaymentsApi::start`].
    pub async fn start(self, addr: SocketAddr) -> Result<RunningPayments> {
        self.build()?.start(addr).await
    }
}
