use std::collections::HashMap;
use std::fmt;

use bytes::Bytes;
use serde::{Deserialize, Serialize};

use super::fault::{Fault, FaultPlan};

/// One charge the payments API made: an entry of its ledger.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Charge {
    /// `ch_1`, `ch_2`, … in the order the charges were made.
    pub id: String,
    /// The `Idempotency-Key` of the request that made the charge.
    pub idempotency_key: String,
    /// The caller's payment id, from the request body.
    pub payment_id: String,
    /// Amount in minor units (cents).
    pub amount: u64,
    /// Currency code as sent, e.g. `EUR`.
    pub currency: String,
    /// The caller's customer id.
    pub customer_id: String,
    /// The `x-correlation-id` header of the request that made the charge, if it had one.
    pub correlation_id: Option<String>,
}

/// Counters since the server started.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct Stats {
    /// `POST /v1/charges` requests received, valid or not.
    pub requests: u64,
    /// Charges made (ledger entries), including those answered with an injected `503` after charging.
    pub charges: u64,
    /// Stored responses replayed to a retry with the same key and body.
    pub replays: u64,
    /// Requests refused with `409` because the first request with their key was still being processed.
    pub conflicts_409: u64,
    /// Requests refused with `422` because their key was first used with another body.
    pub mismatches_422: u64,
    /// Injected `503`s before charging (key forgotten, nothing charged).
    pub failed_before: u64,
    /// Injected `503`s after charging (charge made and stored for replay).
    pub failed_after: u64,
    /// Requests refused with `400` or `413`: no usable key, unreadable or invalid body. Their key is not stored.
    pub bad_requests: u64,
}

impl fmt::Display for Stats {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "requests={} charges={} replays={} conflicts_409={} mismatches_422={} failed_before={} failed_after={} \
             bad_requests={}",
            self.requests,
            self.charges,
            self.replays,
            self.conflicts_409,
            self.mismatches_422,
            self.failed_before,
            self.failed_after,
            self.bad_requests
        )
    }
}

/// A validated `POST /v1/charges` body.
#[derive(Debug, Clone, Deserialize)]
pub(crate) struct ChargeRequest {
    pub(crate) payment_id: String,
    pub(crate) amount: u64,
    pub(crate) currency: String,
    pub(crate) customer_id: String,
}

/// The `201` body, in this field order.
#[derive(Serialize)]
struct ChargeResponse<'a> {
    id: &'a str,
    payment_id: &'a str,
    amount: u64,
    currency: &'a str,
    status: &'static str,
}

/// A response kept for replay: exactly the status and bytes the first request got (or would have got).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct StoredResponse {
    pub(crate) status: u16,
    pub(crate) body: Bytes,
}

/// What to do with a request whose key and fingerprint are known.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Admission {
    /// The key was new and is now in flight for this request, which must settle it with
    /// [`Ledger::charge`] or [`Ledger::release`].
    New(Fault),
    /// The key is done: answer with this.
    Replay(StoredResponse),
    /// The first request with this key is still being processed.
    InFlight,
    /// The key was first used with another body.
    Mismatch,
}

#[derive(Debug)]
enum KeyState {
    InFlight,
    Done(StoredResponse),
}

#[derive(Debug)]
struct KeyEntry {
    fingerprint: String,
    state: KeyState,
}

/// The payments API's whole state: keys, charges, counters and the fault plan. Kept under one lock, never held
/// across an await, so each transition below is atomic.
#[derive(Debug)]
pub(crate) struct Ledger {
    keys: HashMap<String, KeyEntry>,
    charges: Vec<Charge>,
    stats: Stats,
    faults: FaultPlan,
}

impl Ledger {
    pub(crate) fn new(faults: FaultPlan) -> Self {
        Self {
            keys: HashMap::new(),
            charges: Vec::new(),
            stats: Stats::default(),
            faults,
        }
    }

    pub(crate) fn count_request(&mut self) {
        self.stats.requests += 1;
    }

    pub(crate) fn count_bad_request(&mut self) {
        self.stats.bad_requests += 1;
    }

    /// A body that differs from the first one is refused even while the first is in flight: the request is wrong
    /// whatever happens to the first, so retrying it later cannot help.
    pub(crate) fn admit(&mut self, key: &str, fingerprint: &str, payment_id: &str) -> Admission {
        match self.keys.get(key) {
            Some(entry) if entry.fingerprint != fingerprint => {
                self.stats.mismatches_422 += 1;
                Admission::Mismatch
            }
            Some(KeyEntry {
                state: KeyState::InFlight,
                ..
            }) => {
                self.stats.conflicts_409 += 1;
                Admission::InFlight
            }
            Some(KeyEntry {
                state: KeyState::Done(response),
                ..
            }) => {
                self.stats.replays += 1;
                Admission::Replay(response.clone())
            }
            None => {
                self.keys.insert(
                    key.to_owned(),
                    KeyEntry {
                        fingerprint: fingerprint.to_owned(),
                        state: KeyState::InFlight,
                    },
                );
                Admission::New(self.faults.next_for(payment_id))
            }
        }
    }

    /// Forgets an in-flight key without charging, so that a retry starts afresh. A done key is kept.
    pub(crate) fn release(&mut self, key: &str) {
        if matches!(
            self.keys.get(key),
            Some(KeyEntry {
                state: KeyState::InFlight,
                ..
            })
        ) {
            self.keys.remove(key);
        }
    }

    pub(crate) fn count_failed_before(&mut self) {
        self.stats.failed_before += 1;
    }

    pub(crate) fn count_failed_after(&mut self) {
        self.stats.failed_after += 1;
    }

    /// Makes the charge for an in-flight key and stores its `201` for replay.
    pub(crate) fn charge(
        &mut self,
        key: &str,
        request: ChargeRequest,
        correlation_id: Option<String>,
    ) -> StoredResponse {
        let id = format!("ch_{}", self.charges.len() + 1);
        let body = ChargeResponse {
            id: &id,
            payment_id: &request.payment_id,
            amount: request.amount,
            currency: &request.currency,
            status: "succeeded",
        };
        let response = StoredResponse {
            status: 201,
            // Five plain fields cannot fail to serialise; the fallback only keeps `unwrap` out.
            body: serde_json::to_vec(&body)
                .map(Bytes::from)
                .unwrap_or_default(),
        };
        self.charges.push(Charge {
            id,
            idempotency_key: key.to_owned(),
            payment_id: request.payment_id,
            amount: request.amount,
            currency: request.currency,
            customer_id: request.customer_id,
            correlation_id,
        });
        self.stats.charges += 1;
        if let Some(entry) = self.keys.get_mut(key) {
            entry.state = KeyState::Done(response.clone());
        }
        response
    }

    pub(crate) fn force_for_payment(&mut self, payment_id: &str, fault: Fault) {
        self.faults.force_for(payment_id, fault);
    }

    pub(crate) fn force(&mut self, fault: Fault) {
        self.faults.force(fault);
    }

    pub(crate) fn charges(&self) -> &[Charge] {
        &self.charges
    }

    pub(crate) fn stats(&self) -> Stats {
        self.stats
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ledger() -> Ledger {
        Ledger::new(FaultPlan::new(0, 0.0, 0.0))
    }

    fn request() -> ChargeRequest {
        ChargeRequest {
            payment_id: "p-1".into(),
            amount: 1250,
            currency: "EUR".into(),
            customer_id: "c-1".into(),
        }
    }

    #[test]
    fn a_key_goes_from_new_to_in_flight_to_done() {
        let mut l = ledger();
        assert_eq!(l.admit("k", "f", "p"), Admission::New(Fault::None));
        assert_eq!(l.admit("k", "f", "p"), Admission::InFlight);
        let stored = l.charge("k", request(), Some("corr-1".into()));
        assert_eq!(stored.status, 201);
        assert_eq!(l.admit("k", "f", "p"), Admission::Replay(stored));
        assert_eq!(l.admit("k", "other", "p"), Admission::Mismatch);
        assert_eq!(l.charges().len(), 1);
        assert_eq!(l.charges()[0].correlation_id.as_deref(), Some("corr-1"));
        let stats = l.stats();
        assert_eq!(
            (
                stats.charges,
                stats.replays,
                stats.conflicts_409,
                stats.mismatches_422
            ),
            (1, 1, 1, 1)
        );
    }

    #[test]
    fn a_released_key_is_new_again_but_a_done_key_is_not_released() {
        let mut l = ledger();
        assert!(matches!(l.admit("k", "f", "p"), Admission::New(_)));
        l.release("k");
        assert!(matches!(l.admit("k", "other", "p"), Admission::New(_)));
        l.charge("k", request(), None);
        l.release("k");
        assert!(matches!(l.admit("k", "other", "p"), Admission::Replay(_)));
    }

    #[test]
    fn charge_ids_count_up() {
        let mut l = ledger();
        for key in ["a", "b", "c"] {
            l.admit(key, "f", "p");
            l.charge(key, request(), None);
        }
        let ids: Vec<&str> = l.charges().iter().map(|c| c.id.as_str()).collect();
        assert_eq!(ids, ["ch_1", "ch_2", "ch_3"]);
    }
}
