//! One table of cases, two evaluations: the in-memory store's conditional writes and the protocol's functions
//! ([`sqsafe_idempotency::protocol`]) must agree on every case. Each case names the DynamoDB condition expression
//! (`store/dynamodb/item.rs`) and the clause of it that decides, so the DynamoDB store's tests (against moto) and this
//! table cover the same ground; the model checker (`crates/sqsafe-model`) calls the same functions.

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use sqsafe_idempotency::protocol::{self, Seen};
use sqsafe_idempotency::{
    ClaimAttempt, Completion, FencedWrite, Fingerprint, IdempotencyKey, IdempotencyRecord,
    IdempotencyStore, InMemoryStore, Status,
};

const NOW_MS: u64 = 1_000_000;
const MARGIN_MS: u64 = 2_000;
const OURS: &str = "tok-ours";
const THEIRS: &str = "tok-theirs";

fn at(ms: u64) -> SystemTime {
    UNIX_EPOCH + Duration::from_millis(ms)
}

fn key() -> IdempotencyKey {
    IdempotencyKey::from_raw("cases#v1#k").expect("key")
}

fn fp(content: &str) -> Fingerprint {
    Fingerprint::from_stored(content)
}

/// The stored record of a case.
#[derive(Clone, Copy)]
struct Stored {
    status: Status,
    expiration_s: u64,
    lease_ms: Option<u64>,
    token: &'static str,
    content: &'static str,
}

fn record(s: &Stored) -> IdempotencyRecord {
    IdempotencyRecord {
        key: key(),
        status: s.status,
        expiration: s.expiration_s,
        lease_expires_at: s.lease_ms,
        token: s.token.to_owned(),
        fingerprint: fp(s.content),
        result: None,
        consumer: "cases".into(),
        consumer_version: 1,
        attempt: 1,
        created_at: 0,
        correlation_id: None,
    }
}

/// A store holding `stored` (written by a claim on an empty store, which always lands).
async fn store_with(stored: Option<Stored>) -> InMemoryStore {
    let store = InMemoryStore::new();
    if let Some(s) = stored {
        let claimed = store
            .claim(&record(&s), at(0), Duration::ZERO)
            .await
            .expect("seed");
        assert_eq!(claimed, ClaimAttempt::Claimed);
    }
    store
}

fn seen(stored: Option<Stored>, token: &str, content: &str) -> Option<Seen> {
    stored.map(|s| record(&s).seen_by(token, &fp(content)))
}

const LIVE_S: u64 = NOW_MS / 1_000 + 100;
const EXPIRED_S: u64 = NOW_MS / 1_000 - 1;

fn in_progress(lease_ms: u64, token: &'static str) -> Stored {
    Stored {
        status: Status::InProgress,
        expiration_s: LIVE_S,
        lease_ms: Some(lease_ms),
        token,
        content: "a",
    }
}

fn completed(expiration_s: u64, token: &'static str) -> Stored {
    Stored {
        status: Status::Completed,
        expiration_s,
        lease_ms: None,
        token,
        content: "a",
    }
}

/// `CLAIM_CONDITION`: `attribute_not_exists(#pk) OR #expiration < :now_s OR (#status = :in_progress AND
/// #lease < :now_ms AND #fingerprint = :fingerprint)`, with `:now_ms` = now - margin.
#[tokio::test]
async fn claim_condition() {
    let cases: Vec<(&str, Option<Stored>, &str)> = vec![
        ("attribute_not_exists(#pk): no record", None, "a"),
        (
            "#expiration < :now_s: completed, expired",
            Some(completed(EXPIRED_S, THEIRS)),
            "a",
        ),
        (
            "none holds: completed, live",
            Some(completed(LIVE_S, THEIRS)),
            "a",
        ),
        (
            "none holds: completed, live, other content",
            Some(completed(LIVE_S, THEIRS)),
            "b",
        ),
        (
            "none holds: in progress, lease live",
            Some(in_progress(NOW_MS + 1, THEIRS)),
            "a",
        ),
        (
            "none holds: lease passed, within the margin",
            Some(in_progress(NOW_MS - MARGIN_MS, THEIRS)),
            "a",
        ),
        (
            "#lease < :now_ms AND #fingerprint = :fingerprint: lease passed by more than the margin",
            Some(in_progress(NOW_MS - MARGIN_MS - 1, THEIRS)),
            "a",
        ),
        (
            "none holds (#fingerprint = :fingerprint fails): lease passed by more than the margin, other content",
            Some(in_progress(NOW_MS - MARGIN_MS - 1, THEIRS)),
            "b",
        ),
        (
            "#expiration < :now_s: in progress, lease live, expired",
            Some(Stored {
                expiration_s: EXPIRED_S,
                ..in_progress(NOW_MS + 1, THEIRS)
            }),
            "a",
        ),
        (
            "none holds: our own record (a retried claim)",
            Some(in_progress(NOW_MS + 1, OURS)),
            "a",
        ),
    ];
    for (case, stored, content) in cases {
        let store = store_with(stored).await;
        let mut attempt = record(&in_progress(NOW_MS + 10_000, OURS));
        attempt.fingerprint = fp(content);
        let answer = store
            .claim(&attempt, at(NOW_MS), Duration::from_millis(MARGIN_MS))
            .await
            .expect("claim");
        let expected =
            protocol::claim_lands(seen(stored, OURS, content).as_ref(), NOW_MS, MARGIN_MS);
        assert_eq!(answer == ClaimAttempt::Claimed, expected, "claim: {case}");
        if let ClaimAttempt::Existing(old) = answer {
            let old_seen = stored.map(|s| record(&s).seen_by(OURS, &fp(content)));
            assert_eq!(
                Some(old.seen_by(OURS, &fp(content))),
                old_seen,
                "ALL_OLD: {case}"
            );
        }
    }
}

/// `OWNED_BY_TOKEN` (complete and release): `#token = :token AND #status = :in_progress`.
#[tokio::test]
async fn owned_by_token() {
    let cases: Vec<(&str, Option<Stored>)> = vec![
        (
            "holds: ours, in progress",
            Some(in_progress(NOW_MS + 1, OURS)),
        ),
        (
            "#token = :token fails: theirs",
            Some(in_progress(NOW_MS + 1, THEIRS)),
        ),
        (
            "#status = :in_progress fails: ours, completed",
            Some(completed(LIVE_S, OURS)),
        ),
        ("no item", None),
        (
            "holds: ours, lease passed (the token decides, not the clock)",
            Some(in_progress(1, OURS)),
        ),
    ];
    for (case, stored) in cases {
        let expected = protocol::owns(seen(stored, OURS, "a").as_ref());
        let completion = Completion {
            result: None,
            expiration: LIVE_S,
        };
        let store = store_with(stored).await;
        let completed = store
            .complete(&key(), OURS, &completion)
            .await
            .expect("complete");
        assert_eq!(
            completed == FencedWrite::Written,
            expected,
            "complete: {case}"
        );
        let store = store_with(stored).await;
        let released = store.release(&key(), OURS).await.expect("release");
        assert_eq!(
            released == FencedWrite::Written,
            expected,
            "release: {case}"
        );
        if let FencedWrite::Refused(found) = released {
            assert_eq!(
                found.map(|r| r.seen_by(OURS, &fp("a"))),
                seen(stored, OURS, "a"),
                "ALL_OLD: {case}"
            );
        }
    }
}

/// `OWNED_AND_LEASE_EARLIER` (extend): `#token = :token AND #status = :in_progress AND #lease < :lease`.
#[tokio::test]
async fn owned_and_lease_earlier() {
    let lease = NOW_MS + 5_000;
    let cases: Vec<(&str, Option<Stored>, u64)> = vec![
        (
            "holds: ours, a longer lease",
            Some(in_progress(lease, OURS)),
            lease + 1,
        ),
        (
            "#lease < :lease fails: the same lease",
            Some(in_progress(lease, OURS)),
            lease,
        ),
        (
            "#lease < :lease fails: a shorter lease (a late heartbeat)",
            Some(in_progress(lease, OURS)),
            lease - 1,
        ),
        (
            "#token = :token fails: theirs",
            Some(in_progress(lease, THEIRS)),
            lease + 1,
        ),
        (
            "#status = :in_progress fails: completed",
            Some(completed(LIVE_S, OURS)),
            lease + 1,
        ),
        ("no item", None, lease + 1),
    ];
    for (case, stored, new_lease) in cases {
        let expected = protocol::extend_lands(seen(stored, OURS, "a").as_ref(), new_lease);
        let store = store_with(stored).await;
        let extended = store
            .extend(&key(), OURS, new_lease, LIVE_S + 1)
            .await
            .expect("extend");
        assert_eq!(extended == FencedWrite::Written, expected, "extend: {case}");
        let after = store.get(&key()).await.expect("get");
        let lease_now = after.and_then(|r| r.lease_expires_at);
        let want = if expected {
            Some(new_lease)
        } else {
            stored.and_then(|s| s.lease_ms)
        };
        assert_eq!(lease_now, want, "stored lease: {case}");
    }
}
