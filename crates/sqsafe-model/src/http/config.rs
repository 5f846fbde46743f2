//! What one check of the layer explores, and the guards a mutant reverts.

use crate::config::Fp;

/// A guard of the layer reverted, to show the check catches its loss.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum HttpMutation {
    /// The key is not scoped by the caller: two callers that send one key share one record.
    NoCallerScope,
    /// A completed record is replayed without comparing its fingerprint: other content under the key gets the
    /// stored answer instead of `422`.
    ReplayIgnoresFingerprint,
    /// The old layer: no extension, and the handler is stopped at the lease and its key released at once. A handler
    /// past its lease may already have taken its effect (issue #47), so the client's retry runs it again with no crash
    /// anywhere.
    ReleaseAtLease,
    /// The claim is not extended while the handler runs (no heartbeat): the handler runs on past its lease, and a retry
    /// takes the key over and runs it too.
    NoLeaseExtension,
    /// The claim takes over a passed lease of other content (`claim_lands` without its fingerprint clause): the
    /// crashed attempt's handler may have run.
    MismatchTakesOverPassedLease,
    /// The claim is made without the layer's deadline, so its lease is the engine's default (longer than any
    /// horizon here) instead of the time the handler may run: a crashed attempt holds the key long after.
    ClaimWithoutDeadline,
}

impl HttpMutation {
    /// Every mutant of the layer, in the order they are checked.
    pub const ALL: [HttpMutation; 6] = [
        HttpMutation::NoCallerScope,
        HttpMutation::ReplayIgnoresFingerprint,
        HttpMutation::ReleaseAtLease,
        HttpMutation::NoLeaseExtension,
        HttpMutation::MismatchTakesOverPassedLease,
        HttpMutation::ClaimWithoutDeadline,
    ];

    /// The guard reverted, in words.
    pub fn describe(self) -> &'static str {
        match self {
            HttpMutation::NoCallerScope => "the key scoped by the caller",
            HttpMutation::ReplayIgnoresFingerprint => "the fingerprint compared before a replay",
            HttpMutation::ReleaseAtLease => "the key kept by a handler that runs past its lease",
            HttpMutation::NoLeaseExtension => "the claim extended while the handler runs",
            HttpMutation::MismatchTakesOverPassedLease => {
                "no takeover of a passed lease of other content"
            }
            HttpMutation::ClaimWithoutDeadline => "the claim's lease the layer's deadline",
        }
    }
}

/// What one check of the layer explores. Times are in ticks ([`TICK_MS`](crate::config::TICK_MS)).
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct HttpConfig {
    /// The requests made under the one `Idempotency-Key`, each `(caller, content)`: `[(0, 0)]` is one request and its
    /// retries; `[(0, 0), (0, 1)]` the same caller with other content; `[(0, 0), (1, 0)]` two callers.
    pub requests: Vec<(u8, Fp)>,
    /// Attempts per request: the first and its retries.
    pub attempts: u8,
    /// The layer's lease (`ApiSettings::lease`): the claim's lease, each extension's (now + `lease`, on the instance's
    /// clock), and how long the client waits (`ApiSettings::answer_within`, by default the lease): past it while the
    /// handler runs, the client gets `504` and the handler runs on.
    pub lease: u8,
    /// The longest a handler runs, counted from its claim: it answers at any tick up to this many after it (time does
    /// not pass it while it runs). Longer than `lease`, a handler outlives its first lease.
    pub handler_ticks: u8,
    /// The engine's shortest lease.
    pub min_lease: u8,
    /// The takeover margin.
    pub margin: u8,
    /// The idempotency window.
    pub window: u8,
    /// The largest clock skew between two instances: each attempt's instance runs on true time or `skew` ahead.
    pub skew: u8,
    /// Instance crashes (at any step of an attempt).
    pub crashes: u8,
    /// Answers lost on the way back to the client after the handler ran and its answer was stored.
    pub lost_answers: u8,
    /// Handler runs that answer `5xx`.
    pub handler_failures: u8,
    /// No attempt is sent after this tick.
    pub last_send: u8,
    /// A guard reverted, or none.
    pub mutation: Option<HttpMutation>,
}

impl HttpConfig {
    /// The bounded check `cargo test` runs: one request and its concurrent retries (3 attempts), a crash, a lost
    /// answer, a handler that answers `5xx` once, and handlers that run a tick past their first lease.
    pub fn bounded() -> Self {
        Self {
            requests: vec![(0, 0)],
            attempts: 3,
            lease: 2,
            handler_ticks: 3,
            min_lease: 1,
            margin: 1,
            window: 4,
            skew: 1,
            crashes: 1,
            lost_answers: 1,
            handler_failures: 1,
            last_send: 4,
            mutation: None,
        }
    }

    /// Two requests under one key (`a`, `b`: caller and content), two attempts each, a crash and a lost answer.
    pub fn two(a: (u8, Fp), b: (u8, Fp)) -> Self {
        Self {
            requests: vec![a, b],
            attempts: 2,
            handler_failures: 0,
            skew: 0,
            last_send: 3,
            ..Self::bounded()
        }
    }

    /// The configuration each mutant is checked with: the one where its guard matters.
    pub fn for_mutant(mutation: HttpMutation) -> Self {
        let base = match mutation {
            HttpMutation::NoCallerScope => Self::two((0, 0), (1, 0)),
            HttpMutation::ReplayIgnoresFingerprint => Self::two((0, 0), (0, 1)),
            HttpMutation::ReleaseAtLease
            | HttpMutation::NoLeaseExtension
            | HttpMutation::ClaimWithoutDeadline => Self::bounded(),
            HttpMutation::MismatchTakesOverPassedLease => Self {
                last_send: 4,
                ..Self::two((0, 0), (0, 1))
            },
        };
        Self {
            mutation: Some(mutation),
            ..base
        }
    }

    /// The last tick checked: the last send, then long enough for its handler to run its longest and crash (the
    /// claim extended until then), and for the lease from there (with skew) and the margin to pass.
    pub fn horizon(&self) -> u8 {
        self.last_send
            + self.handler_ticks
            + self.lease.max(self.min_lease)
            + self.skew
            + self.margin
            + 1
    }
}
