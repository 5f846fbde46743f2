//! The sizes, times and faults of one check, and the guard a mutant reverts.

/// Milliseconds per model tick: every time in the model is a whole number of ticks.
pub const TICK_MS: u64 = 1_000;

/// One of the protocol's guards, reverted in the model's table or engine to show the checker catches its loss.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Mutation {
    /// `complete` lands on any in-progress record, whatever its token (`OWNED_BY_TOKEN` without `#token = :token`).
    CompleteIgnoresToken,
    /// `extend` lands even when it shortens the lease (`OWNED_AND_LEASE_EARLIER` without `#lease < :lease`).
    LeaseMayShrink,
    /// A claim takes over a lease as soon as it passed on the claimer's clock (no takeover margin).
    NoTakeoverMargin,
    /// An in-progress record expires one window after its claim, even before its lease and margin end.
    ExpiryIgnoresLease,
    /// SQS never makes a received message visible again: a failed attempt's message is not redelivered.
    NoRedelivery,
    /// A claim's lease ignores the Lambda deadline and the engine's leases and never ends: a crashed owner holds the
    /// key for good (no liveness).
    LeaseNeverEnds,
    /// The keyed mode judges every record read, and every refusal of its completion, as if it were of the same
    /// content (`keyed_read` and `keyed_completion_refused` without the fingerprint).
    KeyedIgnoresFingerprint,
    /// The keyed mode's `PutItem` of the completed record lands whatever the table holds (no
    /// `KEYED_COMPLETION_CONDITION`).
    KeyedCompletionUnconditional,
    /// The keyed mode for a downstream that does not honour the `Idempotency-Key`: the mode's assumption dropped.
    KeyedWithoutDownstreamKey,
    /// The keyed mode takes the downstream's refusal of a key it saw with other content (422) for success, and puts
    /// its own content's completed record: the table then disagrees with what the downstream applied.
    KeyedRefusalTakenForSuccess,
}

impl Mutation {
    /// Every mutant, in the order they are checked.
    pub const ALL: [Mutation; 10] = [
        Mutation::CompleteIgnoresToken,
        Mutation::LeaseMayShrink,
        Mutation::NoTakeoverMargin,
        Mutation::ExpiryIgnoresLease,
        Mutation::LeaseNeverEnds,
        Mutation::NoRedelivery,
        Mutation::KeyedIgnoresFingerprint,
        Mutation::KeyedCompletionUnconditional,
        Mutation::KeyedWithoutDownstreamKey,
        Mutation::KeyedRefusalTakenForSuccess,
    ];

    /// The guard reverted, in words.
    pub fn describe(self) -> &'static str {
        match self {
            Mutation::CompleteIgnoresToken => "the token condition on complete",
            Mutation::LeaseMayShrink => "the lease-only-grows condition on extend",
            Mutation::NoTakeoverMargin => "the takeover margin",
            Mutation::ExpiryIgnoresLease => "expiry >= lease + margin",
            Mutation::LeaseNeverEnds => "a lease that ends",
            Mutation::NoRedelivery => "redelivery after a failed attempt",
            Mutation::KeyedIgnoresFingerprint => "the keyed mode's fingerprint check",
            Mutation::KeyedCompletionUnconditional => "the condition of the keyed completion",
            Mutation::KeyedWithoutDownstreamKey => {
                "the keyed mode's downstream key (its assumption)"
            }
            Mutation::KeyedRefusalTakenForSuccess => {
                "the keyed mode's reading of the downstream's refusal of other content"
            }
        }
    }
}

/// A payload's fingerprint: the model's messages carry one of a few contents.
pub type Fp = u8;

/// What one check explores. Times are in ticks ([`TICK_MS`]).
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Config {
    /// Consumer instances (Lambda execution environments).
    pub instances: usize,
    /// The messages in the queue, all for the same key, by payload fingerprint: `[0, 0]` is a message and its
    /// duplicate; a `1` is the same key with other content.
    pub messages: Vec<Fp>,
    /// The downstream honours an `Idempotency-Key` (derived from the key), as the IETF draft says: a request with a
    /// key it saw is not applied again; with the content it first saw under the key it answers as the first time,
    /// with other content it refuses the request (422, a permanent error for the sender). Its key retention is longer
    /// than the checked horizon.
    pub downstream_key: bool,
    /// The keyed mode instead of the claim protocol: no claim and no in-progress record; a delivery reads the record
    /// (`protocol::keyed_read`), replays a completed one, refuses other content, or sends the effect under the
    /// downstream key and then puts the completed record with one conditional write
    /// (`protocol::keyed_completion_lands`, its refusal judged by `protocol::keyed_completion_refused`). Its
    /// assumption is `downstream_key`; other steps may run between the read and the effect (the batch's read is made
    /// before its records run).
    pub keyed: bool,
    /// The function timeout: Lambda kills an invocation this long after it starts. Requests carry it as their
    /// deadline, so the lease runs to it.
    pub timeout: u8,
    /// The takeover margin.
    pub margin: u8,
    /// The idempotency window.
    pub window: u8,
    /// Shortest lease (the engine's `min_lease`).
    pub min_lease: u8,
    /// Requests carry the Lambda deadline, so a claim's lease runs to it; otherwise the lease is `default_lease`
    /// (shorter than the timeout: the case a heartbeat is for).
    pub deadline_lease: bool,
    /// The engine's `default_lease`, for requests without a deadline.
    pub default_lease: u8,
    /// The queue's visibility timeout.
    pub visibility: u8,
    /// SQS moves a message to the DLQ on the receive after this many.
    pub max_receives: u8,
    /// A heartbeat's lease length, or no heartbeat. Beats happen at any moment of the effect (their timer is not
    /// modelled), so every spacing of beats is explored.
    pub heartbeat_lease: Option<u8>,
    /// The local cache of completed keys.
    pub cache: bool,
    /// The largest clock skew: instance 0 runs on true time, each other instance is `-skew`, `0` or `+skew` off.
    pub skew: u8,
    /// Instance crashes (at any step).
    pub crashes: u8,
    /// Writes whose answer is lost: the write lands now or later, and the SDK retries it.
    pub lost_writes: u8,
    /// Effects that fail downstream (the key is released).
    pub effect_failures: u8,
    /// No message is received after this tick. The horizon ([`Config::horizon`]) leaves every lease after it time
    /// to pass (fairness).
    pub last_receive: u8,
    /// Ticks after `last_receive` during which SQS still delivers, promptly: time does not move while an idle
    /// instance could receive a visible message. With a drain, property 7 also checks that every message ends (a
    /// drain of 0 does not, and changes nothing else).
    pub drain: u8,
    /// The table starts with a crashed claim-mode attempt's `IN_PROGRESS` record of this content (token
    /// [`LEFTOVER_TOKEN`], its lease ending at tick 1): a function moved to the keyed mode meets what the claim mode
    /// left. Two starts are explored: its effect's request never left, or the downstream applied it (under the same
    /// key) before the attempt died. Its message is among `messages` (it comes back).
    pub leftover_claim: Option<Fp>,
    /// A guard reverted, or none.
    pub mutation: Option<Mutation>,
}

/// The token of [`Config::leftover_claim`]'s record: no instance of the check holds it (theirs start at 1).
pub const LEFTOVER_TOKEN: u8 = 0;

impl Config {
    /// The bounded check `make test` runs: 2 instances, a message and its duplicate, one fault of each kind.
    pub fn bounded() -> Self {
        Self {
            instances: 2,
            messages: vec![0, 0],
            downstream_key: false,
            keyed: false,
            timeout: 2,
            margin: 1,
            window: 4,
            min_lease: 1,
            deadline_lease: true,
            default_lease: 1,
            visibility: 3,
            max_receives: 2,
            heartbeat_lease: None,
            cache: false,
            skew: 1,
            crashes: 1,
            lost_writes: 1,
            effect_failures: 0,
            last_receive: 2,
            drain: 0,
            leftover_claim: None,
            mutation: None,
        }
    }

    /// A long effect kept alive by a heartbeat: requests without a deadline take a 1-tick lease, a beat moves it to
    /// now + 2 ticks, and Lambda's timeout is 3 ticks. No crash: the timeout kills. The window is the shortest the
    /// builder accepts (a beat's lease plus the margin), so the effect outlives it and each extension must carry the
    /// record's expiry along.
    pub fn heartbeat() -> Self {
        Self {
            deadline_lease: false,
            default_lease: 1,
            heartbeat_lease: Some(2),
            timeout: 3,
            window: 3,
            crashes: 0,
            last_receive: 1,
            ..Self::bounded()
        }
    }

    /// A window shorter than the lease a Lambda deadline gives (the case the builder cannot check): the claim must
    /// stretch the record's expiry past the lease and the margin.
    pub fn short_window() -> Self {
        Self {
            window: 1,
            timeout: 2,
            last_receive: 1,
            ..Self::bounded()
        }
    }

    /// Every message must end: receives at t=0, then SQS keeps redelivering promptly for 10 ticks, long enough for
    /// each message to use up its receives (a delivery, a timeout, a redelivery after the visibility timeout or an
    /// in-progress wait, then the move to the DLQ). One crash, no lost answer: a lost answer's write landing at any
    /// moment of that drain does not fit the state budget.
    pub fn settling() -> Self {
        Self {
            last_receive: 0,
            drain: 10,
            lost_writes: 0,
            ..Self::bounded()
        }
    }

    /// The keyed mode on the bounded check's world: a downstream that honours the key, 2 instances, a message and its
    /// duplicate, a crash and a lost answer, clock skew.
    pub fn keyed() -> Self {
        Self {
            keyed: true,
            downstream_key: true,
            ..Self::bounded()
        }
    }

    /// The keyed mode over a claim-mode attempt that crashed (its `IN_PROGRESS` record of content 0 left in the
    /// table, its call applied downstream or never sent), the message and its duplicate, and another content under the
    /// key: reaches the `IN_PROGRESS` branches of `keyed_read` and `keyed_completion_lands`. No crash of its own.
    pub fn keyed_over_leftover_claim() -> Self {
        Self {
            messages: vec![0, 1],
            leftover_claim: Some(0),
            crashes: 0,
            ..Self::keyed()
        }
    }

    /// The configuration each mutant is checked with: the bounded one, or the one where its guard matters.
    pub fn for_mutant(mutation: Mutation) -> Self {
        let base = match mutation {
            Mutation::KeyedIgnoresFingerprint | Mutation::KeyedRefusalTakenForSuccess => Self {
                messages: vec![0, 1],
                ..Self::keyed()
            },
            Mutation::KeyedCompletionUnconditional | Mutation::KeyedWithoutDownstreamKey => {
                Self::keyed()
            }
            Mutation::CompleteIgnoresToken
            | Mutation::NoTakeoverMargin
            | Mutation::LeaseNeverEnds => Self::bounded(),
            Mutation::LeaseMayShrink => Self::heartbeat(),
            Mutation::ExpiryIgnoresLease => Self::short_window(),
            Mutation::NoRedelivery => Self::settling(),
        };
        base.with_mutation(mutation)
    }

    /// With `mutation` reverted.
    pub fn with_mutation(mut self, mutation: Mutation) -> Self {
        self.mutation = Some(mutation);
        self
    }

    /// The last tick checked: the last receive, then long enough for its invocation to time out and for any lease
    /// it took (with skew, the minimum lease or a heartbeat's) and the margin to pass.
    pub fn horizon(&self) -> u8 {
        let lease = self
            .min_lease
            .max(self.default_lease)
            .max(self.heartbeat_lease.unwrap_or(0));
        self.last_receive + self.drain + self.timeout + self.skew + lease + self.margin + 1
    }

    /// The takeover margin the protocol applies (none under [`Mutation::NoTakeoverMargin`]), in ms.
    pub(crate) fn takeover_margin_ms(&self) -> u64 {
        match self.mutation {
            Some(Mutation::NoTakeoverMargin) => 0,
            _ => ms(self.margin),
        }
    }
}

/// Ticks as milliseconds.
pub(crate) fn ms(ticks: u8) -> u64 {
    u64::from(ticks) * TICK_MS
}
