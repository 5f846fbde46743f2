//! The layer's and the client's steps: an attempt sent and its claim, the handler's run, the completion, the release,
//! a crash, and time passing (with the claims' extensions and the `504`s).

use sqsafe_idempotency::Status;
use sqsafe_idempotency::protocol::{self, ClaimRefused, FencedRefused};

use super::config::HttpMutation;
use super::state::{AnswerId, Attempt, HttpRecord, HttpState, ScopeGhost, Stage};
use super::world::HttpModel;
use crate::config::ms;

/// What the client gets.
enum Reply {
    /// The handler's answer, just produced.
    Fresh(AnswerId),
    /// A stored answer, `Idempotent-Replayed: true`.
    Replay(AnswerId),
    /// `422`: other content under the key.
    Mismatch,
    /// `409`, `5xx`, `504`, `503`: retry (nothing changes for the client: it may retry in any case).
    Retry,
}

impl HttpModel {
    /// An attempt arrives and its instance claims the key, as the layer does (`Idempotency::claim`): one
    /// conditional write, or its refusal judged from the old record.
    pub(super) fn send(&self, s: &mut HttpState, request: u8, skew: i8) {
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
            let new_life = new_life && !ghost.carried;
            ghost.carried = false;
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
                claimed_at: s.now,
                lease_ms,
                deadline_ms,
                timed_out: false,
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
                if client.outlived {
                    s.ghost.outlived_then_replayed = true;
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

    pub(super) fn run(&self, s: &mut HttpState, index: usize, fail: bool) {
        let attempt = s.attempts[index].clone();
        if fail {
            s.handler_failures -= 1;
            s.attempts[index].stage = Stage::Release { timed_out: false };
            return;
        }
        self.took_effect(s, &attempt);
        let client = &s.clients[usize::from(attempt.request)];
        if client.crashed {
            s.ghost.ran_after_crash = true;
        }
        if client.released {
            s.ghost.ran_after_release = true;
        }
        s.attempts[index].stage = Stage::Complete;
    }

    /// The handler of `attempt` ran, or was stopped after it may have taken its effect: one run of its scope's
    /// current lifetime.
    fn took_effect(&self, s: &mut HttpState, attempt: &Attempt) {
        let (caller, fp) = self.request(attempt);
        let ghost = &mut s.ghost.scopes[self.scope(caller)];
        if attempt.life == ghost.life {
            ghost.runs = ghost.runs.saturating_add(1);
            if ghost.life_fp != Some(fp) {
                s.ghost.mismatch_ran = true;
            }
        }
    }

    /// The layer's `guard.complete(&stored)`: fenced by the token. Refused (the claim was lost, which the heartbeat
    /// prevents), the answer still goes to the client, unstored. A client that got `504` gets nothing now: its retry
    /// finds the stored answer.
    pub(super) fn complete(&self, s: &mut HttpState, index: usize, lost: bool) {
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
            s.ghost.claim_lost = true;
        }
        if attempt.timed_out {
            s.clients[usize::from(attempt.request)].outlived = true;
        } else if lost {
            s.lost_answers -= 1;
            s.clients[usize::from(attempt.request)].lost = true;
        } else {
            self.reply(s, usize::from(attempt.request), Reply::Fresh(answer));
        }
    }

    /// The layer's release after a `5xx` (fenced by the token; refused, its lease ends by itself), or after the old
    /// layer's timeout ([`HttpMutation::ReleaseAtLease`]).
    pub(super) fn release(&self, s: &mut HttpState, index: usize) {
        let attempt = s.attempts.remove(index);
        let (caller, _) = self.request(&attempt);
        let scope = self.scope(caller);
        let seen = s.records[scope]
            .as_ref()
            .map(|r| r.seen_by(attempt.token, r.fp));
        if protocol::owns(seen.as_ref()) {
            s.records[scope] = None;
            if attempt.stage == (Stage::Release { timed_out: true }) {
                s.ghost.scopes[scope].carried = true;
            }
        } else {
            s.ghost.claim_lost = true;
        }
        let request = usize::from(attempt.request);
        s.clients[request].released = true;
        self.reply(s, request, Reply::Retry);
    }

    /// The instance handling attempt `index` dies, its claim left to its lease. The layer's cut under Lambda (the
    /// handler stopped at the invocation's deadline less the completion's reserve, its claim left) is this step too.
    pub(super) fn crash(&self, s: &mut HttpState, index: usize) {
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

    /// True time moves one tick. Each running handler's instance first extends its claim, as the layer's heartbeat
    /// does (`Guard::extend`), so a lease never passes while its handler runs unless its instance crashed. The
    /// extension is part of the tick, not a step of its own: under the timing assumption (a beat lands before the
    /// lease it extends passes) it is always in time, and the moment within a tick at which it lands changes nothing
    /// another step reads (a live lease refuses a claim either way). Only ticks move a lease, so one extension per
    /// tick holds it at the latest a beat could put it: a crashed instance's claim frees as late as it can.
    ///
    /// Ticks wait for a handler that has run its longest ([`HttpConfig::handler_ticks`]) and for a completion or a
    /// release in flight (a write gets its answer within the tick it is sent), so time never passes a lease held by a
    /// live attempt: [`P9_CLAIM_HELD`](super::properties::P9_CLAIM_HELD) checks the consequence.
    ///
    /// [`HttpConfig::handler_ticks`]: super::config::HttpConfig::handler_ticks
    pub(super) fn tick(&self, s: &mut HttpState) {
        s.now += 1;
        let c = &self.config;
        let mut stopped = Vec::new();
        for i in 0..s.attempts.len() {
            if s.attempts[i].stage != Stage::Handler {
                continue;
            }
            let attempt = s.attempts[i].clone();
            let now_ms = Self::local_ms(s.now, attempt.skew);
            if now_ms >= attempt.deadline_ms {
                if c.mutation == Some(HttpMutation::ReleaseAtLease) {
                    // The old layer: tokio's timeout drops the handler, which may have taken its effect already.
                    self.took_effect(s, &attempt);
                    s.attempts[i].stage = Stage::Release { timed_out: true };
                    continue;
                }
                if !attempt.timed_out {
                    // The client gets `504`; the handler runs on, its claim held.
                    s.attempts[i].timed_out = true;
                    self.reply(s, usize::from(attempt.request), Reply::Retry);
                }
            }
            let beats = !matches!(
                c.mutation,
                Some(HttpMutation::NoLeaseExtension | HttpMutation::ReleaseAtLease)
            );
            if beats && !self.extend(s, i, now_ms) {
                stopped.push(i);
            }
        }
        for i in stopped.into_iter().rev() {
            // The claim was lost: the layer stops the handler (its effect perhaps taken) and answers `503`.
            let attempt = s.attempts.remove(i);
            self.took_effect(s, &attempt);
            self.reply(s, usize::from(attempt.request), Reply::Retry);
        }
    }

    /// The heartbeat of attempt `i` at `now_ms` (its instance's clock): `Guard::extend`, fenced by the token, moves the
    /// lease to now + `lease` (never shorter) and the record's expiry past it. `false`: the claim is lost.
    fn extend(&self, s: &mut HttpState, i: usize, now_ms: u64) -> bool {
        let c = &self.config;
        let attempt = &mut s.attempts[i];
        let (caller, _) = c.requests[usize::from(attempt.request)];
        let lease_ms = now_ms + ms(c.lease);
        let record = s.records[self.scope(caller)].as_mut();
        let seen = record.as_ref().map(|r| r.seen_by(attempt.token, r.fp));
        if let Some(r) = record
            && protocol::extend_lands(seen.as_ref(), lease_ms)
        {
            r.lease_ms = Some(lease_ms);
            r.expiration_s =
                protocol::in_progress_expiration_s(now_ms, ms(c.window), lease_ms, ms(c.margin));
            attempt.lease_ms = lease_ms;
            return true;
        }
        match protocol::extend_refused(seen.as_ref()) {
            // Its own lease already ends later (a claim made without the layer's deadline).
            FencedRefused::Done => true,
            FencedRefused::LeaseLost | FencedRefused::Inconsistent => {
                s.ghost.claim_lost = true;
                false
            }
        }
    }
}
