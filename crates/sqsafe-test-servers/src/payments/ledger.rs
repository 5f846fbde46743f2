use std::fmt;
use std::fs::{File, OpenOptions};
use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use super::fault::{Fault, FaultPlan};
use crate::error::{Error, Result};

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

/// Counters since the server started (a restarted server counts afresh; its ledger file, if any, keeps the charges).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct Stats {
    /// `POST /v1/charges` requests received, valid or not.
    pub requests: u64,
    /// Charges made (ledger entries), including those answered with an injected `503` after charging.
    pub charges: u64,
    /// Stored answers replayed by the idempotency layer to a repeat of the same key and content.
    pub replays: u64,
    /// Requests refused with `409` because the first request with their key was still in flight (or its claim, left
    /// by a process that died, had not yet run out).
    pub conflicts_409: u64,
    /// Requests refused with `422` because their key was first used with other content.
    pub mismatches_422: u64,
    /// Injected `503`s before charging (the layer released the key, nothing charged).
    pub failed_before: u64,
    /// Injected `503`s after charging (charge made and its `201` stored for replay).
    pub failed_after: u64,
    /// Requests refused with `400` or `413`: no usable key, unreadable or invalid body. No key is claimed for them.
    pub bad_requests: u64,
    /// `5xx` answers of the idempotency layer itself: its table failed (`503`, nothing charged), or a request ran past
    /// its lease (`504`, its key released).
    pub layer_errors: u64,
}

impl fmt::Display for Stats {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "requests={} charges={} replays={} conflicts_409={} mismatches_422={} failed_before={} failed_after={} \
             bad_requests={} layer_errors={}",
            self.requests,
            self.charges,
            self.replays,
            self.conflicts_409,
            self.mismatches_422,
            self.failed_before,
            self.failed_after,
            self.bad_requests,
            self.layer_errors
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
pub(crate) struct ChargeResponse<'a> {
    pub(crate) id: &'a str,
    pub(crate) payment_id: &'a str,
    pub(crate) amount: u64,
    pub(crate) currency: &'a str,
    pub(crate) status: &'static str,
}

/// The charges, the counters and the fault plan, under one lock never held across an await. Keys are not here: the
/// idempotency layer keeps them, in its table.
#[derive(Debug)]
pub(crate) struct Ledger {
    charges: Vec<Charge>,
    stats: Stats,
    faults: FaultPlan,
    /// Where each charge is appended as a JSON line, when the ledger must outlive the process.
    file: Option<(PathBuf, File)>,
}

impl Ledger {
    /// A ledger with the charges already in `file` (created when missing), each later charge appended to it.
    pub(crate) fn new(faults: FaultPlan, file: Option<&Path>) -> Result<Self> {
        let mut charges = Vec::new();
        let file = match file {
            None => None,
            Some(path) => {
                let ledger_error = |source| Error::Ledger {
                    path: path.to_owned(),
                    source,
                };
                let opened = OpenOptions::new()
                    .create(true)
                    .read(true)
                    .append(true)
                    .open(path)
                    .map_err(ledger_error)?;
                for line in BufReader::new(&opened).lines() {
                    let line = line.map_err(ledger_error)?;
                    if line.trim().is_empty() {
                        continue;
                    }
                    let charge = serde_json::from_str(&line).map_err(|e| {
                        ledger_error(std::io::Error::new(std::io::ErrorKind::InvalidData, e))
                    })?;
                    charges.push(charge);
                }
                Some((path.to_owned(), opened))
            }
        };
        Ok(Self {
            charges,
            stats: Stats::default(),
            faults,
            file,
        })
    }

    pub(crate) fn stats_mut(&mut self) -> &mut Stats {
        &mut self.stats
    }

    /// The fault for a new request of `payment_id` (its key just claimed).
    pub(crate) fn next_fault(&mut self, payment_id: &str) -> Fault {
        self.faults.next_for(payment_id)
    }

    /// Makes the charge: an entry of the ledger (and a line of its file), counted. Returns the `201` body.
    pub(crate) fn charge(
        &mut self,
        key: &str,
        request: ChargeRequest,
        correlation_id: Option<String>,
    ) -> Vec<u8> {
        let id = format!("ch_{}", self.charges.len() + 1);
        let body = ChargeResponse {
            id: &id,
            payment_id: &request.payment_id,
            amount: request.amount,
            currency: &request.currency,
            status: "succeeded",
        };
        // Five plain fields cannot fail to serialise; the fallback only keeps `unwrap` out.
        let body = serde_json::to_vec(&body).unwrap_or_default();
        let charge = Charge {
            id,
            idempotency_key: key.to_owned(),
            payment_id: request.payment_id,
            amount: request.amount,
            currency: request.currency,
            customer_id: request.customer_id,
            correlation_id,
        };
        if let Some((path, file)) = &mut self.file {
            // One write per line, to a file opened for appending: a process killed after it keeps the line.
            let mut line = serde_json::to_vec(&charge).unwrap_or_default();
            line.push(b'\n');
            if let Err(e) = file.write_all(&line) {
                tracing::error!(path = %path.display(), error = %e, "the charge could not be written to the ledger file");
            }
        }
        self.charges.push(charge);
        self.stats.charges += 1;
        body
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

    fn request(payment_id: &str) -> ChargeRequest {
        ChargeRequest {
            payment_id: payment_id.into(),
            amount: 1250,
            currency: "EUR".into(),
            customer_id: "c-1".into(),
        }
    }

    #[test]
    fn charge_ids_count_up_and_the_body_names_the_charge() {
        let mut l = Ledger::new(FaultPlan::new(0, 0.0, 0.0), None).expect("ledger");
        let mut bodies = Vec::new();
        for key in ["a", "b", "c"] {
            bodies.push(l.charge(key, request("p-1"), Some("corr".into())));
        }
        let ids: Vec<&str> = l.charges().iter().map(|c| c.id.as_str()).collect();
        assert_eq!(ids, ["ch_1", "ch_2", "ch_3"]);
        assert_eq!(
            String::from_utf8(bodies[1].clone()).expect("utf-8"),
            r#"{"id":"ch_2","payment_id":"p-1","amount":1250,"currency":"EUR","status":"succeeded"}"#
        );
        assert_eq!(l.stats().charges, 3);
    }

    #[test]
    fn a_ledger_file_outlives_its_ledger_and_its_ids_go_on() {
        let dir = std::env::temp_dir().join(format!(
            "sqsafe-ledger-{}-{}",
            std::process::id(),
            fastrand::u64(..)
        ));
        std::fs::create_dir_all(&dir).expect("dir");
        let path = dir.join("ledger.jsonl");
        let mut first = Ledger::new(FaultPlan::new(0, 0.0, 0.0), Some(&path)).expect("ledger");
        first.charge("k-1", request("p-1"), None);
        first.charge("k-2", request("p-2"), None);
        drop(first);
        let mut second = Ledger::new(FaultPlan::new(0, 0.0, 0.0), Some(&path)).expect("ledger");
        assert_eq!(
            second.charges().len(),
            2,
            "the first life's charges are read back"
        );
        assert_eq!(second.stats().charges, 0, "counters are this life's");
        second.charge("k-3", request("p-3"), None);
        let third = Ledger::new(FaultPlan::new(0, 0.0, 0.0), Some(&path)).expect("ledger");
        let ids: Vec<&str> = third.charges().iter().map(|c| c.id.as_str()).collect();
        assert_eq!(ids, ["ch_1", "ch_2", "ch_3"]);
        std::fs::write(&path, "not json\n").expect("write");
        let err = Ledger::new(FaultPlan::new(0, 0.0, 0.0), Some(&path)).expect_err("refused");
        assert!(err.to_string().contains("ledger.jsonl"), "{err}");
        let _ = std::fs::remove_dir_all(&dir);
    }
}
