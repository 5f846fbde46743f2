//! The layer's and the client's steps: an attempt sent and its claim, the handler's run, the completion, the release,
//! a crash, and time passing.

use sqsafe_idempotency::Status;
use sqsafe_idempotency::protocol::{self, ClaimRefused};

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
    /// `409`, `5xx`, `504`, `503`: retry.
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

    pub(super) fn run(&self, s: &mut HttpState, index: usize, fail: bool) {
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
    pub(super) fn release(&self, s: &mut HttpState, index: usize) {
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

    pub(super) fn tick(&self, s: &mut HttpState) {
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
}
