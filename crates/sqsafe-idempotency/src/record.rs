use std::time::{Duration, SystemTime};

use crate::clock::{duration_millis, epoch_millis, from_millis};
use crate::fingerprint::Fingerprint;
use crate::key::IdempotencyKey;
use crate::protocol::{self, Seen, Status};

/// A stored outcome, as kept for replay.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum StoredResult {
    /// The result as JSON text.
    Json(String),
    /// The result was larger than the configured cap: only its SHA-256 and size were kept.
    Omitted {
        /// Lower-case hex SHA-256 of the JSON text.
        digest: String,
        /// Size of the JSON text in bytes.
        size: u64,
    },
}

/// One idempotency record: what a store keeps per key.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct IdempotencyRecord {
    /// The key.
    pub key: IdempotencyKey,
    /// In progress or completed.
    pub status: Status,
    /// Epoch seconds after which the record no longer counts (also the table's TTL attribute).
    pub expiration: u64,
    /// Epoch milliseconds at which an in-progress claim may be taken over.
    pub lease_expires_at: Option<u64>,
    /// The claim attempt's token; completing, extending and releasing must present it.
    pub token: String,
    /// Fingerprint of the intent's content.
    pub fingerprint: Fingerprint,
    /// The stored result of a completed record.
    pub result: Option<StoredResult>,
    /// Consumer that claimed (for operators).
    pub consumer: String,
    /// Consumer's effect version (for operators).
    pub consumer_version: u32,
    /// Delivery attempt that made the claim, e.g. SQS `ApproximateReceiveCount` (for operators).
    pub attempt: u32,
    /// Epoch milliseconds of the claim (for operators).
    pub created_at: u64,
    /// Correlation id of the claiming message (for operators).
    pub correlation_id: Option<String>,
}

impl IdempotencyRecord {
    /// `true` when the record no longer counts at `now`: TTL deletion lags, so every read checks this.
    pub fn is_expired(&self, now: SystemTime) -> bool {
        protocol::is_expired(self.expiration, epoch_millis(now))
    }

    /// `true` when an in-progress claim's lease passed more than `margin` before `now`.
    pub fn is_lease_passed(&self, now: SystemTime, margin: Duration) -> bool {
        protocol::is_lease_passed(
            self.status,
            self.lease_expires_at,
            epoch_millis(now),
            duration_millis(margin),
        )
    }

    /// `true` when a new claim may replace this record at `now`, allowing `takeover_margin` for clock skew between
    /// instances ([`protocol::is_claimable`]).
    pub fn is_claimable(&self, now: SystemTime, takeover_margin: Duration) -> bool {
        self.is_expired(now) || self.is_lease_passed(now, takeover_margin)
    }

    /// The record as the attempt holding `token`, with content `fingerprint`, sees it: what the protocol's
    /// conditions and decisions look at.
    pub fn seen_by(&self, token: &str, fingerprint: &Fingerprint) -> Seen {
        Seen {
            status: self.status,
            expiration_s: self.expiration,
            lease_ms: self.lease_expires_at,
            own_token: self.token == token,
            same_fingerprint: self.fingerprint == *fingerprint,
        }
    }

    /// When a claim by another attempt can first take this in-progress record over: the lease end plus the margin.
    pub fn claimable_after(&self, takeover_margin: Duration) -> Option<SystemTime> {
        protocol::claimable_after_ms(self.lease_expires_at, duration_millis(takeover_margin))
            .map(from_millis)
    }

    /// The lease end as a time.
    pub fn lease_expires(&self) -> Option<SystemTime> {
        self.lease_expires_at.map(from_millis)
    }
}

/// A lease that ended before this instant (epoch ms) may be taken over at `now`.
#[cfg(feature = "dynamodb")]
pub(crate) fn takeover_cutoff_ms(now: SystemTime, margin: Duration) -> u64 {
    protocol::takeover_cutoff_ms(epoch_millis(now), duration_millis(margin))
}

/// What [`IdempotencyStore::complete`](crate::IdempotencyStore::complete) writes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Completion {
    /// The result to keep, if any.
    pub result: Option<StoredResult>,
    /// New expiration, epoch seconds (the window starts when the effect completes).
    pub expiration: u64,
}
