//! The layer model's world (clients, attempts, records, ghost facts) and its actions.

use sqsafe_idempotency::Status;
use sqsafe_idempotency::protocol::Seen;

use crate::config::Fp;
use crate::state::Token;

/// A handler's answer: which run produced it (its claim token), for which caller and content.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct AnswerId {
    /// The caller of the request the handler ran for.
    pub caller: u8,
    /// Its content.
    pub fp: Fp,
    /// The claim token of the attempt that ran it.
    pub token: Token,
}

/// The record of one scope (a caller's key, or the key alone under
/// [`HttpMutation::NoCallerScope`](super::config::HttpMutation::NoCallerScope)).
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct HttpRecord {
    /// In progress or completed.
    pub status: Status,
    /// Epoch seconds.
    pub expiration_s: u64,
    /// Epoch ms, while in progress.
    pub lease_ms: Option<u64>,
    /// The claim's token.
    pub token: Token,
    /// The content claimed (the layer's fingerprint of method, route, body and the named headers).
    pub fp: Fp,
    /// The caller whose request claimed it (a ghost: the real record knows it only through its key).
    pub caller: u8,
    /// The stored answer, once completed.
    pub answer: Option<AnswerId>,
}

impl HttpRecord {
    pub(super) fn seen_by(&self, token: Token, fp: Fp) -> Seen {
        Seen {
            status: self.status,
            expiration_s: self.expiration_s,
            lease_ms: self.lease_ms,
            own_token: self.token == token,
            same_fingerprint: self.fp == fp,
        }
    }
}

/// Where an attempt stands on the server.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Stage {
    /// The key is claimed; the handler is running, its claim extended as time passes.
    Handler,
    /// The handler answered; storing its answer (completing).
    Complete,
    /// The handler answered `5xx` (or another status a client retries); releasing the key.
    Release {
        /// Stopped at the lease instead, its effect perhaps taken: only under
        /// [`HttpMutation::ReleaseAtLease`](super::config::HttpMutation::ReleaseAtLease).
        timed_out: bool,
    },
}

/// One attempt being handled by the layer.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Attempt {
    /// The request it is an attempt of (index in [`HttpConfig::requests`](super::config::HttpConfig::requests)).
    pub request: u8,
    /// Its claim token.
    pub token: Token,
    /// Its instance's clock offset, in ticks.
    pub skew: i8,
    /// Where it stands.
    pub stage: Stage,
    /// The tick its claim landed (true time).
    pub claimed_at: u8,
    /// Its lease as last claimed or extended (epoch ms, on its instance's clock).
    pub lease_ms: u64,
    /// How long the client waits (`ApiSettings::answer_within`, here the lease), on its instance's clock (epoch ms):
    /// past it, the client gets `504`.
    pub deadline_ms: u64,
    /// The client got `504` while the handler ran on: its answer is stored, not sent.
    pub timed_out: bool,
    /// The record lifetime it claimed in.
    pub life: u8,
}

/// One client's request and what it got.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Client {
    /// Attempts it may still send.
    pub attempts_left: u8,
    /// It got a final answer (the handler's, fresh or replayed, or `422`) and stops.
    pub done: bool,
    /// The first handler answer it got (fresh or replayed).
    pub got: Option<AnswerId>,
    /// Got `422`.
    pub refused: bool,
    /// An answer of its was lost.
    pub lost: bool,
    /// An attempt of its crashed while its handler ran.
    pub crashed: bool,
    /// An attempt of its released the key (`5xx`, or the old layer's timeout under
    /// [`HttpMutation::ReleaseAtLease`](super::config::HttpMutation::ReleaseAtLease)).
    pub released: bool,
    /// An answer of its was stored after its attempt got `504` (the handler outlived its first lease).
    pub outlived: bool,
}

/// What the properties read about one scope's past.
#[derive(Debug, Clone, Default, PartialEq, Eq, Hash)]
pub struct ScopeGhost {
    /// Record lifetimes so far: a claim that lands where no live record was starts a new one, unless the record is
    /// absent because a handler that may have taken its effect released it (`carried`).
    pub life: u8,
    /// The content the current lifetime was first claimed with.
    pub life_fp: Option<Fp>,
    /// Handler runs (answers other than `5xx`, and handlers stopped after they may have taken their effect) in the
    /// current lifetime. A handler cut by a crash is not counted: the crash is the named case.
    pub runs: u8,
    /// An instance whose handler answered crashed before the answer was stored: the named case of a second run
    /// (book/src/how-it-works.md, "What can still go wrong").
    pub excused: bool,
    /// The record was deleted by the release of a handler stopped at its lease
    /// ([`HttpMutation::ReleaseAtLease`](super::config::HttpMutation::ReleaseAtLease)): its effect may be taken, so
    /// the next claim continues this lifetime rather than starting one.
    pub carried: bool,
}

/// What the properties read: facts about the past that the world does not keep.
#[derive(Debug, Clone, Default, PartialEq, Eq, Hash)]
pub struct HttpGhost {
    /// Per scope.
    pub scopes: Vec<ScopeGhost>,
    /// A replay was not the stored answer of the request's own caller and content, or differed from an answer the
    /// client already got (outside the named case).
    pub bad_replay: bool,
    /// A handler ran for content other than the one its scope's current lifetime was claimed with.
    pub mismatch_ran: bool,
    /// Example: a client whose answer was lost got it by a replay.
    pub lost_then_replayed: bool,
    /// Example: a retry ran the handler after an attempt crashed mid-handler (its lease ended).
    pub ran_after_crash: bool,
    /// Example: a retry ran the handler after a release (`5xx`).
    pub ran_after_release: bool,
    /// Example: a client that got `504` while its handler ran on got that handler's answer by a replay.
    pub outlived_then_replayed: bool,
    /// An attempt in flight lost its claim: an extension, a completion or a release of it was refused.
    pub claim_lost: bool,
}

/// The layer model's world.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct HttpState {
    /// True time, in ticks.
    pub now: u8,
    /// The clients, one per request.
    pub clients: Vec<Client>,
    /// The attempts in flight on the server.
    pub attempts: Vec<Attempt>,
    /// Each scope's record.
    pub records: Vec<Option<HttpRecord>>,
    /// Next claim token.
    pub next_token: Token,
    /// Crashes left.
    pub crashes: u8,
    /// Lost answers left.
    pub lost_answers: u8,
    /// Handler failures left.
    pub handler_failures: u8,
    /// Ghost facts.
    pub ghost: HttpGhost,
}

/// One step of a client, the layer, an instance or the clock.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum HttpAction {
    /// True time moves one tick; each running handler's instance extends its claim (the heartbeat), and a client
    /// whose handler ran past the layer's deadline gets `504`.
    Tick,
    /// A client sends an attempt, which an instance with clock offset `skew` takes and claims the key for (one
    /// conditional write: the claim lands, or its refusal is answered at once).
    Send {
        /// The request.
        request: u8,
        /// The instance's clock offset.
        skew: i8,
    },
    /// The handler runs: answers (`fail`: with a `5xx`).
    Run {
        /// Index in the attempts in flight.
        attempt: u8,
        /// It answers `5xx`.
        fail: bool,
    },
    /// The layer stores the answer (completion fenced by the claim's token) and sends it (`lost`: it never arrives),
    /// unless the client got `504` already.
    Complete {
        /// Index in the attempts in flight.
        attempt: u8,
        /// The answer is lost on the way back.
        lost: bool,
    },
    /// The layer releases the key (fenced by the token) and answers the handler's `5xx`.
    Release {
        /// Index in the attempts in flight.
        attempt: u8,
    },
    /// The instance handling an attempt crashes: the client gets no answer.
    Crash {
        /// Index in the attempts in flight.
        attempt: u8,
    },
}
