//! The claim protocol's decisions, as plain functions: when a conditional write lands, what a refused write means
//! given the old record it returned (`ALL_OLD`), and the lease and expiry a claim writes.
//!
//! Pure: no I/O and no clock reads. Times come in as epoch milliseconds (the record's `expiration` is epoch seconds,
//! as stored). The engine, the in-memory store and the model checker (`crates/sqsafe-model`) all call these, so a
//! guard changed here changes all three; the DynamoDB store states the same conditions as expressions, and
//! `tests/idempotency/protocol_cases.rs` checks the in-memory store against these functions case by case, naming the
//! expression each case exercises.
//!
//! ```
//! use sqsafe_idempotency::protocol::{self, Seen};
//! use sqsafe_idempotency::Status;
//!
//! // A claim made at t = 10 s with the Lambda deadline at 40 s and a 2 s takeover margin:
//! let lease = protocol::lease_until_ms(10_000, Some(40_000), 1_000, 60_000);
//! assert_eq!(lease, 40_000);
//! // The record outlives its lease plus the margin even with a 30 s idempotency window.
//! assert!(protocol::in_progress_expiration_s(10_000, 30_000, lease, 2_000) * 1_000 >= lease + 2_000);
//!
//! // Another attempt at t = 41 s finds it live (41 s is not past 40 s + 2 s).
//! let seen = Seen { status: Status::InProgress, expiration_s: 42, lease_ms: Some(lease), own_token: false, same_fingerprint: true };
//! assert!(!protocol::claim_lands(Some(&seen), 41_000, 2_000));
//! ```

/// The stored state of a key. Expired is derived from [`IdempotencyRecord::expiration`](crate::IdempotencyRecord::expiration), never stored.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Status {
    /// Claimed; the claimer's effect may be running. Valid while the lease lasts.
    InProgress,
    /// The effect ran; the record holds its result for replay.
    Completed,
}

impl Status {
    /// The stored spelling: `IN_PROGRESS` or `COMPLETED`.
    pub fn as_str(self) -> &'static str {
        match self {
            Status::InProgress => "IN_PROGRESS",
            Status::Completed => "COMPLETED",
        }
    }

    /// Parses the stored spelling.
    pub fn parse(s: &str) -> Option<Self> {
        match s {
            "IN_PROGRESS" => Some(Status::InProgress),
            "COMPLETED" => Some(Status::Completed),
            _ => None,
        }
    }
}

/// A stored record as one claim attempt sees it: what its conditions and decisions look at.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Seen {
    /// In progress or completed.
    pub status: Status,
    /// Epoch seconds after which the record no longer counts.
    pub expiration_s: u64,
    /// Epoch milliseconds at which an in-progress lease ends.
    pub lease_ms: Option<u64>,
    /// The record carries this attempt's claim token.
    pub own_token: bool,
    /// The record's fingerprint is this attempt's.
    pub same_fingerprint: bool,
}

/// What a refused claim means, from the old record the same write returned.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ClaimRefused {
    /// The record is this attempt's own: a retried claim whose first try landed. The attempt owns the key.
    OwnRetry,
    /// Same key, other content: a permanent error, no effect.
    PayloadMismatch,
    /// Completed with the same content: replay the stored result.
    Replay,
    /// Claimed elsewhere and live: retry once the lease has passed by the margin (epoch ms).
    InProgress {
        /// When a claim can first take the record over: the lease end plus the margin.
        claimable_after_ms: Option<u64>,
    },
    /// The store refused although the record is claimable: it disagrees with these rules.
    Inconsistent,
}

/// What a refused fenced write (complete, extend, release) means, from the old record it returned.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum FencedRefused {
    /// A retried write whose first try landed: done.
    Done,
    /// Another attempt holds the key now (or nobody does where someone should): the claim is lost.
    LeaseLost,
    /// The record still carries this claim's token yet the write was refused: the store disagrees with these rules.
    Inconsistent,
}

/// A lease that ended before this instant (epoch ms) may be taken over at `now_ms`.
pub fn takeover_cutoff_ms(now_ms: u64, margin_ms: u64) -> u64 {
    now_ms.saturating_sub(margin_ms)
}

/// `true` when a record with this `expiration` (epoch s) no longer counts at `now_ms`. TTL deletion lags, so every
/// condition and read checks this.
pub fn is_expired(expiration_s: u64, now_ms: u64) -> bool {
    expiration_s < now_ms / 1_000
}

/// `true` when an in-progress lease passed more than `margin_ms` before `now_ms`.
pub fn is_lease_passed(status: Status, lease_ms: Option<u64>, now_ms: u64, margin_ms: u64) -> bool {
    status == Status::InProgress
        && lease_ms.is_some_and(|lease| lease < takeover_cutoff_ms(now_ms, margin_ms))
}

/// `true` when a record no longer stands in a new claim's way: expired, or an in-progress lease passed by more than
/// the margin.
pub fn is_claimable(seen: &Seen, now_ms: u64, margin_ms: u64) -> bool {
    is_expired(seen.expiration_s, now_ms)
        || is_lease_passed(seen.status, seen.lease_ms, now_ms, margin_ms)
}

/// The claim's condition: does a claim write made at `now_ms` land over `existing`? No record, an expired one, or an
/// in-progress claim of the same content whose lease passed by more than the margin. A passed claim of other
/// content is not taken over: its effect may have run, so the other content is a payload mismatch (found by the
/// model checker, property 5).
///
/// DynamoDB: `CLAIM_CONDITION` in `store/dynamodb/item.rs`.
pub fn claim_lands(existing: Option<&Seen>, now_ms: u64, margin_ms: u64) -> bool {
    existing.is_none_or(|seen| {
        is_expired(seen.expiration_s, now_ms)
            || (seen.same_fingerprint
                && is_lease_passed(seen.status, seen.lease_ms, now_ms, margin_ms))
    })
}

/// What a refused claim means. The order matters: a retried claim meets its own record first; other content is a
/// mismatch whatever the record's state; then a completed record replays and a live one is in progress.
pub fn claim_refused(existing: &Seen, now_ms: u64, margin_ms: u64) -> ClaimRefused {
    if existing.own_token && existing.status == Status::InProgress {
        return ClaimRefused::OwnRetry;
    }
    if !existing.same_fingerprint {
        return ClaimRefused::PayloadMismatch;
    }
    match existing.status {
        Status::Completed if !is_expired(existing.expiration_s, now_ms) => ClaimRefused::Replay,
        Status::InProgress if !is_claimable(existing, now_ms, margin_ms) => {
            ClaimRefused::InProgress {
                claimable_after_ms: claimable_after_ms(existing.lease_ms, margin_ms),
            }
        }
        _ => ClaimRefused::Inconsistent,
    }
}

/// When a claim by another attempt can first take an in-progress record over: the lease end plus the margin.
pub fn claimable_after_ms(lease_ms: Option<u64>, margin_ms: u64) -> Option<u64> {
    lease_ms.map(|lease| lease.saturating_add(margin_ms))
}

/// The fence of complete and release: the record is still in progress under this attempt's token.
///
/// DynamoDB: `OWNED_BY_TOKEN` in `store/dynamodb/item.rs`.
pub fn owns(existing: Option<&Seen>) -> bool {
    existing.is_some_and(|seen| seen.own_token && seen.status == Status::InProgress)
}

/// The fence of extend: owned, and the new lease ends later than the stored one (a lease only grows).
///
/// DynamoDB: `OWNED_AND_LEASE_EARLIER` in `store/dynamodb/item.rs`.
pub fn extend_lands(existing: Option<&Seen>, new_lease_ms: u64) -> bool {
    owns(existing) && existing.is_some_and(|seen| seen.lease_ms.is_none_or(|l| l < new_lease_ms))
}

/// The condition of a keyed completion (the mode for effects behind a downstream key: no claim, one `PutItem` of the
/// completed record after the effect): does it land over `existing`? No record, an expired one, or an in-progress
/// record of the same content (an older attempt's claim, whose effect went under the same downstream key). A live
/// completed record, or a live record of other content, is left alone: the write is refused and
/// [`keyed_completion_refused`] says what the old record means.
///
/// DynamoDB: `KEYED_COMPLETION_CONDITION` in `store/dynamodb/item.rs`.
pub fn keyed_completion_lands(existing: Option<&Seen>, now_ms: u64) -> bool {
    existing.is_none_or(|seen| {
        is_expired(seen.expiration_s, now_ms)
            || (seen.same_fingerprint && seen.status == Status::InProgress)
    })
}

/// What the keyed mode does with the record it read (strongly consistent, before the effect): run the effect with
/// the downstream key, replay a completed record of the same content, or refuse other content.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum KeyedRead {
    /// No record that counts, or an older attempt's in-progress claim of the same content (its effect went under the
    /// same downstream key): run the effect, then write the completion.
    Run,
    /// Completed with the same content: replay the stored result, no write.
    Replay,
    /// Same key, other content, in a record that still counts: a permanent error, no effect.
    PayloadMismatch,
}

/// What the keyed mode does with the record it read at `now_ms` (`None`: there was none). A live record of other
/// content, completed or in progress, is a mismatch whatever its lease says, as with a claim
/// ([`claim_lands`] does not take over a passed claim of other content either).
pub fn keyed_read(existing: Option<&Seen>, now_ms: u64) -> KeyedRead {
    match existing {
        None => KeyedRead::Run,
        Some(seen) if is_expired(seen.expiration_s, now_ms) => KeyedRead::Run,
        Some(seen) if !seen.same_fingerprint => KeyedRead::PayloadMismatch,
        Some(seen) if seen.status == Status::Completed => KeyedRead::Replay,
        Some(_) => KeyedRead::Run,
    }
}

/// What a refused keyed completion means, from the old record the same write returned: other content is a payload
/// mismatch; the same content completed (by a concurrent delivery, or by this write's own first try) is a replay of
/// its stored result; anything else means the store disagrees with [`keyed_completion_lands`].
pub fn keyed_completion_refused(existing: &Seen, now_ms: u64) -> ClaimRefused {
    if keyed_completion_lands(Some(existing), now_ms) {
        ClaimRefused::Inconsistent
    } else if !existing.same_fingerprint {
        ClaimRefused::PayloadMismatch
    } else {
        ClaimRefused::Replay
    }
}

/// What a refused completion means: already completed under this token (a retried write whose first try landed) is
/// done; anything else is a lost claim.
pub fn complete_refused(found: Option<&Seen>) -> FencedRefused {
    match found {
        Some(seen) if seen.own_token && seen.status == Status::Completed => FencedRefused::Done,
        _ => FencedRefused::LeaseLost,
    }
}

/// What a refused extension means: our own record, already extended as far (or completed), is done.
pub fn extend_refused(found: Option<&Seen>) -> FencedRefused {
    match found {
        Some(seen) if seen.own_token => FencedRefused::Done,
        _ => FencedRefused::LeaseLost,
    }
}

/// What a refused release means: nothing there is done (a retried delete whose first try landed); our own record
/// still there is inconsistent; another attempt's record is a lost claim.
pub fn release_refused(found: Option<&Seen>) -> FencedRefused {
    match found {
        None => FencedRefused::Done,
        Some(seen) if seen.own_token => FencedRefused::Inconsistent,
        Some(_) => FencedRefused::LeaseLost,
    }
}

/// The lease a claim at `now_ms` takes: until the deadline, never shorter than `min_lease_ms`; without a deadline,
/// `default_lease_ms`.
pub fn lease_until_ms(
    now_ms: u64,
    deadline_ms: Option<u64>,
    min_lease_ms: u64,
    default_lease_ms: u64,
) -> u64 {
    let floor = now_ms.saturating_add(min_lease_ms);
    match deadline_ms {
        Some(deadline) => deadline.max(floor),
        None => now_ms.saturating_add(default_lease_ms),
    }
}

/// The `expiration` (epoch s) of an in-progress record: the idempotency window from now, but never before the lease
/// and the takeover margin end (rounded up to the second): a record gone while its claim is live would let a
/// redelivery take the key over.
pub fn in_progress_expiration_s(now_ms: u64, window_ms: u64, lease_ms: u64, margin_ms: u64) -> u64 {
    let lease_end_s = lease_ms.saturating_add(margin_ms).div_ceil(1_000);
    completed_expiration_s(now_ms, window_ms).max(lease_end_s)
}

/// The `expiration` (epoch s) of a record completed at `now_ms`: the idempotency window starts at completion.
pub fn completed_expiration_s(now_ms: u64, window_ms: u64) -> u64 {
    now_ms.saturating_add(window_ms) / 1_000
}

#[cfg(test)]
mod tests {
    use super::*;

    fn in_progress(lease_ms: u64, own_token: bool) -> Seen {
        Seen {
            status: Status::InProgress,
            expiration_s: 100,
            lease_ms: Some(lease_ms),
            own_token,
            same_fingerprint: true,
        }
    }

    #[test]
    fn a_lease_is_taken_over_only_past_the_margin() {
        let seen = in_progress(10_000, false);
        assert!(!claim_lands(Some(&seen), 12_000, 2_000));
        assert!(claim_lands(Some(&seen), 12_001, 2_000));
        assert_eq!(
            claim_refused(&seen, 12_000, 2_000),
            ClaimRefused::InProgress {
                claimable_after_ms: Some(12_000)
            }
        );
    }

    #[test]
    fn a_passed_lease_of_other_content_is_a_mismatch_not_a_takeover() {
        let seen = Seen {
            same_fingerprint: false,
            ..in_progress(10_000, false)
        };
        assert!(!claim_lands(Some(&seen), 20_000, 2_000));
        assert_eq!(
            claim_refused(&seen, 20_000, 2_000),
            ClaimRefused::PayloadMismatch
        );
    }

    #[test]
    fn expiry_covers_lease_and_margin() {
        // A 1 s window with a 30 s deadline lease: the lease wins.
        assert_eq!(in_progress_expiration_s(0, 1_000, 30_000, 2_000), 32);
        assert_eq!(in_progress_expiration_s(0, 60_000, 30_000, 2_000), 60);
        assert_eq!(in_progress_expiration_s(0, 1_000, 30_001, 2_000), 33);
    }

    #[test]
    fn leases_only_grow() {
        let seen = in_progress(10_000, true);
        assert!(!extend_lands(Some(&seen), 10_000));
        assert!(extend_lands(Some(&seen), 10_001));
        assert!(!extend_lands(Some(&in_progress(1, false)), 10_001));
    }

    #[test]
    fn a_keyed_read_runs_on_nothing_the_expired_and_an_older_claim_replays_the_completed_and_refuses_other_content()
     {
        let now_ms = 50_000;
        let seen = |status, expiration_s, same_fingerprint| Seen {
            status,
            expiration_s,
            lease_ms: (status == Status::InProgress).then_some(10_000),
            own_token: false,
            same_fingerprint,
        };
        assert_eq!(keyed_read(None, now_ms), KeyedRead::Run);
        for status in [Status::InProgress, Status::Completed] {
            for same in [true, false] {
                // Expired at 49 s: it no longer counts, whatever it says.
                assert_eq!(
                    keyed_read(Some(&seen(status, 49, same)), now_ms),
                    KeyedRead::Run
                );
                // At 50 s exactly it still counts (expiry is strictly after).
                let live = keyed_read(Some(&seen(status, 50, same)), now_ms);
                let expected = match (status, same) {
                    (_, false) => KeyedRead::PayloadMismatch,
                    (Status::Completed, true) => KeyedRead::Replay,
                    (Status::InProgress, true) => KeyedRead::Run,
                };
                assert_eq!(live, expected, "{status:?} same={same}");
            }
        }
        // The read and the completion agree: what the read runs, the completion lands on; what it replays or
        // refuses, the completion is refused for, with the same meaning.
        for status in [Status::InProgress, Status::Completed] {
            for expiration_s in [49, 50] {
                for same in [true, false] {
                    let s = seen(status, expiration_s, same);
                    match keyed_read(Some(&s), now_ms) {
                        KeyedRead::Run => assert!(keyed_completion_lands(Some(&s), now_ms)),
                        KeyedRead::Replay => {
                            assert_eq!(keyed_completion_refused(&s, now_ms), ClaimRefused::Replay);
                        }
                        KeyedRead::PayloadMismatch => assert_eq!(
                            keyed_completion_refused(&s, now_ms),
                            ClaimRefused::PayloadMismatch
                        ),
                    }
                }
            }
        }
    }

    #[test]
    fn a_keyed_completion_lands_on_nothing_the_expired_and_an_older_claim_of_its_content() {
        let now_ms = 1_000_000;
        let seen = |status, expiration_s, same_fingerprint| Seen {
            status,
            expiration_s,
            lease_ms: None,
            own_token: false,
            same_fingerprint,
        };
        let live = now_ms / 1000 + 60;
        let expired = now_ms / 1000 - 1;
        assert!(keyed_completion_lands(None, now_ms));
        assert!(keyed_completion_lands(
            Some(&seen(Status::Completed, expired, false)),
            now_ms
        ));
        assert!(keyed_completion_lands(
            Some(&seen(Status::InProgress, live, true)),
            now_ms
        ));
        for (refused, meaning) in [
            (seen(Status::Completed, live, true), ClaimRefused::Replay),
            (
                seen(Status::Completed, live, false),
                ClaimRefused::PayloadMismatch,
            ),
            (
                seen(Status::InProgress, live, false),
                ClaimRefused::PayloadMismatch,
            ),
        ] {
            assert!(
                !keyed_completion_lands(Some(&refused), now_ms),
                "{refused:?}"
            );
            assert_eq!(
                keyed_completion_refused(&refused, now_ms),
                meaning,
                "{refused:?}"
            );
        }
        assert_eq!(
            keyed_completion_refused(&seen(Status::InProgress, live, true), now_ms),
            ClaimRefused::Inconsistent
        );
    }
}
