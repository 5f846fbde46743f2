//! What the proxy's connections and its handle share: the fault plan, the counters, the upstream client.

use std::collections::BTreeSet;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Mutex, MutexGuard, PoisonError};
use std::time::SystemTime;

use axum::http::Uri;
use bytes::Bytes;
use http_body_util::Full;
use hyper_util::client::legacy::Client;
use hyper_util::client::legacy::connect::HttpConnector;

use super::fault::{Fault, FaultPlan};
use super::ownership::WriteId;
use super::stats::{InjectedFault, ProxyStats, RECENT_FAULTS, SelfMetWrite};

/// The pooled client the proxy forwards with.
pub(crate) type UpstreamClient = Client<HttpConnector, Full<Bytes>>;

/// State shared by the proxy's connections and its [`RunningProxy`](super::RunningProxy) handle.
#[derive(Debug)]
pub(crate) struct Shared {
    pub(crate) state: Mutex<State>,
    pub(crate) enabled: AtomicBool,
    pub(crate) operations: Option<BTreeSet<String>>,
    pub(crate) upstream: Uri,
    pub(crate) client: UpstreamClient,
    /// moto rolls a failed TransactWriteItems back by restoring a copy of the tables taken when it started, which
    /// also erases writes that other requests made meanwhile (and can leave half of a concurrent transaction).
    /// DynamoDB transactions are atomic; to keep that true in front of moto, a transaction runs alone: it takes this
    /// lock for writing, every other DynamoDB request for reading.
    pub(crate) isolation: tokio::sync::RwLock<()>,
}

#[derive(Debug)]
pub(crate) struct State {
    pub(crate) plan: FaultPlan,
    pub(crate) stats: ProxyStats,
    /// Fenced writes answered with a 500 after the write, whose next try is inspected (see `ownership`). Few: one per
    /// after-write fault on a fenced write, removed when a retry gets a real answer.
    pub(crate) ambiguous: BTreeSet<WriteId>,
}

impl Shared {
    /// The lock is never held across an await and every update is a few counter bumps, so a poisoned lock holds
    /// consistent data: poisoning is ignored.
    pub(crate) fn state(&self) -> MutexGuard<'_, State> {
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
