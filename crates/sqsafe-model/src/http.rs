//! Property 9: the idempotent HTTP layer (`sqsafe::api::IdempotencyLayer`, issue #41), model-checked.
//!
//! Clients send requests under one `Idempotency-Key`, each with its caller and its content, and retry: while an
//! earlier attempt is still in flight (a client-side timeout), after a `409`, a `5xx` or a `504`, and after an answer
//! lost on the way back. Each attempt is handled by a server instance with its own clock (skewed), which does what
//! the layer does: one conditional write claims the caller's key (its lease the layer's deadline), the handler runs
//! (or answers `5xx`, or runs past the lease and is stopped), the answer is stored by the completion fenced by the
//! claim's token, and a `5xx` or a timeout releases the key. A refused claim is judged from the old record the write
//! returned: a replay of the stored answer, `422` for other content, `409` in flight. An instance may crash at any
//! step.
//!
//! As in the claim model ([`crate::ProtocolModel`]), the table's condition, the lease, the expiry and the meaning of
//! every refused write come from [`sqsafe_idempotency::protocol`]; this model adds the layer's own rules (the key
//! scoped by caller, the answer stored and replayed, the handler bounded by the lease) and the client's retries.
//! Writes here always get their answer (the SDK's retries of a write are the claim model's subject), and a record past
//! its expiry is not deleted by TTL (every condition treats it as absent already).

use std::collections::BTreeSet;
use std::time::{Duration, Instant};

use sqsafe_idempotency::Status;
use sqsafe_idempotency::protocol::{self, ClaimRefused, Seen};
use stateright::{Checker, Expectation, HasDiscoveries, Model, Property};

use crate::config::{Fp, TICK_MS, ms};
use crate::state::Token;

/// Epoch ms of tick 0, so that clocks running behind stay positive.
const BASE_MS: u64 = 100 * TICK_MS;

/// A guard of the layer reverted, to show the check catches its loss.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum HttpMutation {
    /// The key is not scoped by the caller: two callers that send one key share one record.
    NoCallerScope,
    /// A completed record is replayed without comparing its fingerprint: other content under the key gets the
    /// stored answer instead of `422`.
    ReplayIgnoresFingerprint,
    /// The handler is not stopped at the lease (no timeout around it): it may still run after another attempt took
    /// the key over.
    HandlerOutlivesLease,
    /// The claim takes over a passed lease of other content (`claim_lands` without its fingerprint clause): the
    /// crashed attempt's handler may have run.
    MismatchTakesOverPassedLease,
    /// The claim is made without the layer's deadline, so its lease is the engine's default (longer than any
    /// horizon here) instead of the time the handler may run: a crashed attempt holds the key long after.
    ClaimWithoutDeadline,
}

impl HttpMutation {
    /// Every mutant of the layer, in the order they are checked.
    pub const ALL: [HttpMutation; 5] = [
        HttpMutation::NoCallerScope,
        HttpMutation::ReplayIgnoresFingerprint,
        HttpMutation::HandlerOutlivesLease,
        HttpMutation::MismatchTakesOverPassedLease,
        HttpMutation::ClaimWithoutDeadline,
    ];

    /// The guard reverted, in words.
    pub fn describe(self) -> &'static str {
        match self {
            HttpMutation::NoCallerScope => "the key scoped by the caller",
            HttpMutation::ReplayIgnoresFingerprint => "the fingerprint compared before a replay",
            HttpMutation::HandlerOutlivesLease => "the handler stopped at the lease",
            HttpMutation::MismatchTakesOverPassedLease => {
                "no takeover of a passed lease of other content"
            }
            HttpMutation::ClaimWithoutDeadline => "the claim's lease the layer's deadline",
        }
    }
}

/// What one check of the layer explores. Times are in ticks ([`TICK_MS`]).
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct HttpConfig {
    /// The requests made under the one `Idempotency-Key`, each `(caller, content)`: `[(0, 0)]` is one request and its
    /// retries; `[(0, 0), (0, 1)]` the same caller with other content; `[(0, 0), (1, 0)]` two callers.
    pub requests: Vec<(u8, Fp)>,
    /// Attempts per request: the first and its retries.
    pub attempts: u8,
    /// The layer's lease (`ApiSettings::lease`, or the Lambda deadline): the claim's lease, and how long the handler
    /// may run before it is stopped and the key released.
    pub lease: u8,
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
    /// answer and a handler that answers `5xx` once.
    pub fn bounded() -> Self {
        Self {
            requests: vec![(0, 0)],
            attempts: 3,
            lease: 2,
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
            HttpMutation::HandlerOutlivesLease | HttpMutation::ClaimWithoutDeadline => {
                Self::bounded()
            }
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

    /// The last tick checked: the last send, then long enough for its handler to be stopped at its lease and for
    /// the lease (with skew) and the margin to pass.
    pub fn horizon(&self) -> u8 {
        self.last_send + self.lease.max(self.min_lease) + self.skew + self.margin + 1
    }
}

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

/// The record of one scope (a caller's key, or the key alone under [`HttpMutation::NoCallerScope`]).
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
    fn seen_by(&self, token: Token, fp: Fp) -> Seen {
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
    /// The key is claimed; the handler is running.
    Handler,
    /// The handler answered; storing its answer (completing).
    Complete,
    /// The handler answered `5xx` (`timed_out`: it ran past the lease and was stopped); releasing the key.
    Release {
        /// Stopped at the lease (`504`) rather than answered `5xx`.
        timed_out: bool,
    },
}

/// One attempt being handled by the layer.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Attempt {
    /// The request it is an attempt of (index in [`HttpConfig::requests`]).
    pub request: u8,
    /// Its claim token.
    pub token: Token,
    /// Its instance's clock offset, in ticks.
    pub skew: i8,
    /// Where it stands.
    pub stage: Stage,
    /// The lease it claimed (epoch ms, true time).
    pub lease_ms: u64,
    /// When the layer stops the handler, on its instance's clock (epoch ms).
    pub deadline_ms: u64,
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
    /// An attempt of its released the key (`5xx` or timeout).
    pub released: bool,
}

/// What the properties read about one scope's past.
#[derive(Debug, Clone, Default, PartialEq, Eq, Hash)]
pub struct ScopeGhost {
    /// Record lifetimes so far: a claim that lands where no live record was starts a new one.
    pub life: u8,
    /// The content the current lifetime was first claimed with.
    pub life_fp: Option<Fp>,
    /// Handler runs (answers other than `5xx`) in the current lifetime.
    pub runs: u8,
    /// An attempt whose handler ran crashed, or lost its lease, before its answer was stored: the named case of a
    /// second run (book/src/how-it-works.md, "What can still go wrong").
    pub excused: bool,
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
    /// Example: a retry ran the handler after a release (`5xx` or timeout).
    pub ran_after_release: bool,
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
    /// True time moves one tick; the layer stops handlers that ran past their lease (the key is to be released).
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
    /// The layer stores the answer (completion fenced by the claim's token) and sends it (`lost`: it never arrives).
    Complete {
        /// Index in the attempts in flight.
        attempt: u8,
        /// The answer is lost on the way back.
        lost: bool,
    },
    /// The layer releases the key (fenced by the token) and answers `5xx` or `504`.
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

/// What the client gets.
enum Reply {
    /// The handler's answer, just produced.
    Fresh(AnswerId),
    /// A stored answer, `Idempotent-Replayed: true`.
    Replay(AnswerId),
    /// `422`: other content under the key.
    Mismatch,
    /// `409`, `5xx`, `504`, `503`: retry.
    Retry,
}

/// The layer model for one [`HttpConfig`].
#[derive(Debug, Clone)]
pub struct HttpModel {
    /// What it explores.
    pub config: HttpConfig,
}

/// 9a: the handler's effect at most once per caller and key while the record lives.
pub const P9_HANDLER_AT_MOST_ONCE: &str = "9. api: the handler runs at most once per caller and key while its record lives, but after a crash or lost lease between its answer and the stored completion";
/// 9b: a replay is the stored answer of the request's own caller and content.
pub const P9_REPLAY_IS_STORED: &str = "9. api: a replay is the answer stored for the same caller and content, the one the client already got";
/// 9c: other content under a live key never runs the handler.
pub const P9_OTHER_CONTENT_NEVER_RUNS: &str =
    "9. api: other content under a live key never runs the handler";
/// 9d: once nothing is in flight at the end of the horizon, every key is free, completed or claimable: a retry after a
/// release or after a lease ended runs (bounded, as property 4).
pub const P9_RETRY_RUNS: &str =
    "9. api: no key stays in progress once its lease ended: a retry runs (bounded)";
/// Example: the named case, a handler run twice for one caller and key.
pub const EXAMPLE_HTTP_SECOND_RUN: &str =
    "example: a handler run twice (a crash or lost lease between answer and store)";
/// Example: an answer lost on the way back reaches the client by a replay.
pub const EXAMPLE_LOST_ANSWER_REPLAYED: &str = "example: a lost answer replayed to the retry";
/// Example: after a crash mid-handler, the lease ends and a retry runs the handler.
pub const EXAMPLE_RETRY_AFTER_CRASH: &str =
    "example: a retry runs the handler after a crash mid-handler";
/// Example: after a `5xx` or a timeout released the key, a retry runs the handler.
pub const EXAMPLE_RETRY_AFTER_RELEASE: &str = "example: a retry runs the handler after a release";

impl HttpModel {
    /// A model of `config`.
    pub fn new(config: HttpConfig) -> Self {
        Self { config }
    }

    /// The record a request of `caller` claims: the caller's own, or the key's alone under
    /// [`HttpMutation::NoCallerScope`].
    fn scope(&self, caller: u8) -> usize {
        match self.config.mutation {
            Some(HttpMutation::NoCallerScope) => 0,
            _ => usize::from(caller),
        }
    }

    fn scopes(&self) -> usize {
        self.config
            .requests
            .iter()
            .map(|&(caller, _)| usize::from(caller) + 1)
            .max()
            .unwrap_or(1)
    }

    fn local_ms(now: u8, skew: i8) -> u64 {
        let ticks = i64::from(now) + i64::from(skew);
        BASE_MS.saturating_add_signed(ticks * i64::try_from(TICK_MS).unwrap_or(i64::MAX))
    }

    fn true_ms(now: u8) -> u64 {
        BASE_MS + ms(now)
    }

    fn request(&self, attempt: &Attempt) -> (u8, Fp) {
        self.config.requests[usize::from(attempt.request)]
    }

    /// An attempt arrives and its instance claims the key, as the layer does (`Idempotency::claim`): one
    /// conditional write, or its refusal judged from the old record.
    fn send(&self, s: &mut HttpState, request: u8, skew: i8) {
        let c = &self.config;
        let (caller, fp) = c.requests[usize::from(request)];
        let scope = self.scope(caller);
        let client = &mut s.clients[usize::from(request)];
        client.attempts_left -= 1;
        let token = s.next_token;
        s.next_token += 1;
        let now_ms = Self::local_ms(s.now, skew);
        let margin_ms = ms(c.margin);
        // The layer's deadline: the lease setting from now (or the invocation's deadline); the lease runs to it.
        let deadline_ms = now_ms + ms(c.lease);
        let lease_ms = match c.mutation {
            Some(HttpMutation::ClaimWithoutDeadline) => {
                protocol::lease_until_ms(now_ms, None, ms(c.min_lease), u64::from(u32::MAX))
            }
            _ => protocol::lease_until_ms(now_ms, Some(deadline_ms), ms(c.min_lease), ms(c.lease)),
        };
        let old = s.records[scope].clone();
        let mut seen = old.as_ref().map(|r| r.seen_by(token, fp));
        if c.mutation == Some(HttpMutation::MismatchTakesOverPassedLease)
            && let Some(seen) = seen.as_mut()
            && seen.status == Status::InProgress
        {
            seen.same_fingerprint = true;
        }
        if protocol::claim_lands(seen.as_ref(), now_ms, margin_ms) {
            let new_life = old
                .as_ref()
                .is_none_or(|r| protocol::is_expired(r.expiration_s, now_ms));
            let ghost = &mut s.ghost.scopes[scope];
            if new_life {
                *ghost = ScopeGhost {
                    life: ghost.life + 1,
                    life_fp: Some(fp),
                    ..ScopeGhost::default()
                };
            }
            let life = ghost.life;
            s.records[scope] = Some(HttpRecord {
                status: Status::InProgress,
                expiration_s: protocol::in_progress_expiration_s(
                    now_ms,
                    ms(c.window),
                    lease_ms,
                    margin_ms,
                ),
                lease_ms: Some(lease_ms),
                token,
                fp,
                caller,
                answer: None,
            });
            s.attempts.push(Attempt {
                request,
                token,
                skew,
                stage: Stage::Handler,
                lease_ms,
                deadline_ms,
                life,
            });
            return;
        }
        let Some(old) = old else {
            return;
        };
        let mut seen = old.seen_by(token, fp);
        if c.mutation == Some(HttpMutation::ReplayIgnoresFingerprint) {
            seen.same_fingerprint = true;
        }
        let reply = match protocol::claim_refused(&seen, now_ms, margin_ms) {
            ClaimRefused::Replay => old.answer.map_or(Reply::Retry, Reply::Replay),
            ClaimRefused::PayloadMismatch => Reply::Mismatch,
            // 409 in flight; an own retry or a disagreeing store cannot happen here (every write gets its answer),
            // and would be a 503.
            ClaimRefused::InProgress { .. }
            | ClaimRefused::OwnRetry
            | ClaimRefused::Inconsistent => Reply::Retry,
        };
        self.reply(s, usize::from(request), reply);
    }

    /// The client gets `reply`.
    fn reply(&self, s: &mut HttpState, request: usize, reply: Reply) {
        let (caller, fp) = self.config.requests[request];
        let excused = s.ghost.scopes[self.scope(caller)].excused;
        let client = &mut s.clients[request];
        match reply {
            Reply::Fresh(answer) => {
                client.got.get_or_insert(answer);
                client.done = true;
            }
            Reply::Replay(answer) => {
                let own = answer.caller == caller && answer.fp == fp;
                let same = client.got.is_none_or(|got| got == answer) || excused;
                if !own || !same {
                    s.ghost.bad_replay = true;
                }
                if client.lost {
                    s.ghost.lost_then_replayed = true;
                }
                client.got.get_or_insert(answer);
                client.done = true;
            }
            Reply::Mismatch => {
                client.refused = true;
                client.done = true;
            }
            Reply::Retry => {}
        }
    }

    fn run(&self, s: &mut HttpState, index: usize, fail: bool) {
        let attempt = s.attempts[index].clone();
        let (caller, fp) = self.request(&attempt);
        let scope = self.scope(caller);
        if fail {
            s.handler_failures -= 1;
            s.attempts[index].stage = Stage::Release { timed_out: false };
            return;
        }
        let ghost = &mut s.ghost.scopes[scope];
        if attempt.life == ghost.life {
            ghost.runs = ghost.runs.saturating_add(1);
            if ghost.life_fp != Some(fp) {
                s.ghost.mismatch_ran = true;
            }
        }
        let client = &s.clients[usize::from(attempt.request)];
        if client.crashed {
            s.ghost.ran_after_crash = true;
        }
        if client.released {
            s.ghost.ran_after_release = true;
        }
        s.attempts[index].stage = Stage::Complete;
    }

    /// The layer's `guard.complete(&stored)`: fenced by the token. Refused (the claim was lost), the answer still
    /// goes to the client, unstored: the named case.
    fn complete(&self, s: &mut HttpState, index: usize, lost: bool) {
        let attempt = s.attempts.remove(index);
        let (caller, fp) = self.request(&attempt);
        let scope = self.scope(caller);
        let answer = AnswerId {
            caller,
            fp,
            token: attempt.token,
        };
        let now_ms = Self::local_ms(s.now, attempt.skew);
        let seen = s.records[scope]
            .as_ref()
            .map(|r| r.seen_by(attempt.token, r.fp));
        if protocol::owns(seen.as_ref()) {
            if let Some(r) = s.records[scope].as_mut() {
                r.status = Status::Completed;
                r.expiration_s = protocol::completed_expiration_s(now_ms, ms(self.config.window));
                r.lease_ms = None;
                r.answer = Some(answer);
            }
        } else {
            s.ghost.scopes[scope].excused = true;
        }
        if lost {
            s.lost_answers -= 1;
            s.clients[usize::from(attempt.request)].lost = true;
        } else {
            self.reply(s, usize::from(attempt.request), Reply::Fresh(answer));
        }
    }

    /// The layer's release after a `5xx` or a timeout (fenced by the token; refused, its lease ends by itself).
    fn release(&self, s: &mut HttpState, index: usize) {
        let attempt = s.attempts.remove(index);
        let (caller, _) = self.request(&attempt);
        let scope = self.scope(caller);
        let seen = s.records[scope]
            .as_ref()
            .map(|r| r.seen_by(attempt.token, r.fp));
        if protocol::owns(seen.as_ref()) {
            s.records[scope] = None;
        }
        let request = usize::from(attempt.request);
        s.clients[request].released = true;
        self.reply(s, request, Reply::Retry);
    }

    fn crash(&self, s: &mut HttpState, index: usize) {
        s.crashes -= 1;
        let attempt = s.attempts.remove(index);
        let (caller, _) = self.request(&attempt);
        match attempt.stage {
            Stage::Handler => s.clients[usize::from(attempt.request)].crashed = true,
            // The handler answered and its answer is not stored: a retry may run it again.
            Stage::Complete => s.ghost.scopes[self.scope(caller)].excused = true,
            Stage::Release { .. } => {}
        }
    }

    fn tick(&self, s: &mut HttpState) {
        s.now += 1;
        let now = s.now;
        let true_ms = Self::true_ms(now);
        for i in 0..s.attempts.len() {
            let attempt = &mut s.attempts[i];
            // tokio's timeout on the instance's clock: the handler is stopped at the deadline.
            if attempt.stage == Stage::Handler
                && self.config.mutation != Some(HttpMutation::HandlerOutlivesLease)
                && Self::local_ms(now, attempt.skew) >= attempt.deadline_ms
            {
                attempt.stage = Stage::Release { timed_out: true };
            }
            // The handler answered and its lease passed before the answer was stored: another attempt may take the
            // key over and run it again.
            if attempt.stage == Stage::Complete && attempt.lease_ms < true_ms {
                let (caller, _) = self.request(attempt);
                let scope = self.scope(caller);
                s.ghost.scopes[scope].excused = true;
            }
        }
    }

    /// The end of the horizon with nothing in flight.
    fn settled(&self, s: &HttpState) -> bool {
        s.now == self.config.horizon() && s.attempts.is_empty()
    }
}

impl Model for HttpModel {
    type State = HttpState;
    type Action = HttpAction;

    fn init_states(&self) -> Vec<HttpState> {
        let c = &self.config;
        let client = Client {
            attempts_left: c.attempts,
            done: false,
            got: None,
            refused: false,
            lost: false,
            crashed: false,
            released: false,
        };
        vec![HttpState {
            now: 0,
            clients: vec![client; c.requests.len()],
            attempts: Vec::new(),
            records: vec![None; self.scopes()],
            next_token: 1,
            crashes: c.crashes,
            lost_answers: c.lost_answers,
            handler_failures: c.handler_failures,
            ghost: HttpGhost {
                scopes: vec![ScopeGhost::default(); self.scopes()],
                ..HttpGhost::default()
            },
        }]
    }

    fn actions(&self, s: &HttpState, actions: &mut Vec<HttpAction>) {
        let c = &self.config;
        let skew = i8::try_from(c.skew).unwrap_or(i8::MAX);
        // Only the offset between two clocks matters to the claims: one runs on true time, the other ahead.
        let skews: &[i8] = if skew == 0 { &[0] } else { &[0, skew] };
        if s.now <= c.last_send {
            for (r, client) in s.clients.iter().enumerate() {
                if !client.done && client.attempts_left > 0 {
                    let request = u8::try_from(r).unwrap_or(u8::MAX);
                    for &skew in skews {
                        actions.push(HttpAction::Send { request, skew });
                    }
                }
            }
        }
        for (i, attempt) in s.attempts.iter().enumerate() {
            let index = u8::try_from(i).unwrap_or(u8::MAX);
            match attempt.stage {
                Stage::Handler => {
                    actions.push(HttpAction::Run {
                        attempt: index,
                        fail: false,
                    });
                    if s.handler_failures > 0 {
                        actions.push(HttpAction::Run {
                            attempt: index,
                            fail: true,
                        });
                    }
                }
                Stage::Complete => {
                    actions.push(HttpAction::Complete {
                        attempt: index,
                        lost: false,
                    });
                    if s.lost_answers > 0 {
                        actions.push(HttpAction::Complete {
                            attempt: index,
                            lost: true,
                        });
                    }
                }
                Stage::Release { .. } => actions.push(HttpAction::Release { attempt: index }),
            }
            if s.crashes > 0 {
                actions.push(HttpAction::Crash { attempt: index });
            }
        }
        if s.now < c.horizon() {
            actions.push(HttpAction::Tick);
        }
    }

    fn next_state(&self, last: &HttpState, action: HttpAction) -> Option<HttpState> {
        let mut s = last.clone();
        match action {
            HttpAction::Tick => self.tick(&mut s),
            HttpAction::Send { request, skew } => self.send(&mut s, request, skew),
            HttpAction::Run { attempt, fail } => self.run(&mut s, usize::from(attempt), fail),
            HttpAction::Complete { attempt, lost } => {
                self.complete(&mut s, usize::from(attempt), lost)
            }
            HttpAction::Release { attempt } => self.release(&mut s, usize::from(attempt)),
            HttpAction::Crash { attempt } => self.crash(&mut s, usize::from(attempt)),
        }
        Some(s)
    }

    fn properties(&self) -> Vec<Property<Self>> {
        vec![
            Property::always(P9_HANDLER_AT_MOST_ONCE, |_: &HttpModel, s: &HttpState| {
                s.ghost.scopes.iter().all(|g| g.runs <= 1 || g.excused)
            }),
            Property::always(P9_REPLAY_IS_STORED, |_: &HttpModel, s: &HttpState| {
                !s.ghost.bad_replay
            }),
            Property::always(
                P9_OTHER_CONTENT_NEVER_RUNS,
                |_: &HttpModel, s: &HttpState| !s.ghost.mismatch_ran,
            ),
            Property::always(P9_RETRY_RUNS, |m: &HttpModel, s: &HttpState| {
                let now_ms = HttpModel::true_ms(s.now);
                !m.settled(s)
                    || s.records.iter().flatten().all(|r| {
                        r.status == Status::Completed
                            || protocol::is_claimable(
                                &r.seen_by(0, r.fp),
                                now_ms,
                                ms(m.config.margin),
                            )
                    })
            }),
            Property::sometimes(EXAMPLE_HTTP_SECOND_RUN, |_: &HttpModel, s: &HttpState| {
                s.ghost.scopes.iter().any(|g| g.runs >= 2)
            }),
            Property::sometimes(
                EXAMPLE_LOST_ANSWER_REPLAYED,
                |_: &HttpModel, s: &HttpState| s.ghost.lost_then_replayed,
            ),
            Property::sometimes(EXAMPLE_RETRY_AFTER_CRASH, |_: &HttpModel, s: &HttpState| {
                s.ghost.ran_after_crash
            }),
            Property::sometimes(
                EXAMPLE_RETRY_AFTER_RELEASE,
                |_: &HttpModel, s: &HttpState| s.ghost.ran_after_release,
            ),
        ]
    }
}

/// What one run of the layer model found.
#[derive(Debug, Clone)]
pub struct HttpReport {
    /// The configuration checked.
    pub config: HttpConfig,
    /// States generated (with repeats).
    pub states: usize,
    /// Distinct states.
    pub unique_states: usize,
    /// Longest path explored.
    pub max_depth: usize,
    /// Wall time.
    pub elapsed: Duration,
    /// Each property broken: its name, the trace's steps and the trace.
    pub violations: Vec<(&'static str, usize, String)>,
    /// The examples found (each reachable in this configuration), by name.
    pub examples: Vec<&'static str>,
}

impl HttpReport {
    /// A summary line: states, depth, time.
    pub fn summary(&self) -> String {
        format!(
            "{} states ({} distinct), depth {}, {:.1?}",
            self.states, self.unique_states, self.max_depth, self.elapsed
        )
    }
}

/// Checks the layer model breadth first on `threads` threads (exhaustively, or up to the first violation for a
/// mutant); each property broken comes with a shortest trace, looked for again alone.
pub fn check_http(config: HttpConfig, first_failure: bool, threads: usize) -> HttpReport {
    let model = HttpModel::new(config.clone());
    let started = Instant::now();
    let finish = if first_failure {
        HasDiscoveries::AnyFailures
    } else {
        HasDiscoveries::All
    };
    let checker = model
        .clone()
        .checker()
        .threads(threads)
        .finish_when(finish)
        .spawn_bfs()
        .join();
    let elapsed = started.elapsed();
    let mut violations = Vec::new();
    let mut examples = Vec::new();
    for property in model.properties() {
        if checker.discovery(property.name).is_none() {
            continue;
        }
        if property.expectation == Expectation::Sometimes {
            examples.push(property.name);
            continue;
        }
        let only = HasDiscoveries::AnyOf(BTreeSet::from([property.name]));
        let alone = model.clone().checker().finish_when(only).spawn_bfs().join();
        if let Some(path) = alone.discovery(property.name) {
            let mut steps = path.into_vec();
            // Cut at the first violating state.
            if let Some(first) = steps
                .iter()
                .position(|(state, _)| !(property.condition)(&model, state))
            {
                steps.truncate(first + 1);
            }
            let mut trace = String::new();
            for (n, (state, action)) in steps.iter().enumerate() {
                if n + 1 == steps.len() {
                    trace.push_str(&format!("      -> {state:?}\n"));
                } else if let Some(action) = action {
                    trace.push_str(&format!("  {:>2}. {action:?}\n", n + 1));
                }
            }
            violations.push((property.name, steps.len().saturating_sub(1), trace));
        }
    }
    HttpReport {
        config,
        states: checker.state_count(),
        unique_states: checker.unique_state_count(),
        max_depth: checker.max_depth(),
        elapsed,
        violations,
        examples,
    }
}
