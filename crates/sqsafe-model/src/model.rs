//! The protocol as a state machine: every step of every actor (SQS, the consumer instances, the table, the downstream
//! API, the clock) is an action, and the checker tries them in every order.

use sqsafe_idempotency::Status;
use sqsafe_idempotency::protocol::{self, ClaimRefused, FencedRefused, KeyedRead, Seen};
use stateright::{Model, Property};

use crate::config::{Config, LEFTOVER_TOKEN, Mutation, TICK_MS, ms};
use crate::properties;
use crate::state::{
    Cached, End, Ghost, Instance, Job, Message, Phase, Record, Request, State, Write,
};

/// Epoch ms of tick 0, so that clocks running behind stay positive.
pub(crate) const BASE_MS: u64 = 100 * TICK_MS;

/// One step of one actor.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum Action {
    /// True time moves one tick; Lambda kills invocations whose deadline passed.
    Tick,
    /// SQS delivers a visible message to an idle instance (or moves it to the DLQ after `max_receives`).
    Receive {
        /// The instance.
        instance: u8,
        /// The message.
        msg: u8,
    },
    /// The instance claims (one conditional `PutItem`, `ALL_OLD`). `lost`: its answer is lost and the SDK retries.
    Claim {
        /// The instance.
        instance: u8,
        /// The answer is lost.
        lost: bool,
    },
    /// The keyed mode: the instance reads the record (strongly consistent) and judges it.
    Read {
        /// The instance.
        instance: u8,
    },
    /// The instance sends the effect's request downstream.
    Send {
        /// The instance.
        instance: u8,
    },
    /// The downstream applies a request (or it fails, `fail`), and answers its sender if it is still there.
    Land {
        /// Index in the requests in flight.
        request: u8,
        /// The effect fails.
        fail: bool,
    },
    /// A heartbeat extends the lease.
    Beat {
        /// The instance.
        instance: u8,
        /// The answer is lost.
        lost: bool,
    },
    /// The instance completes (fenced by its token).
    Complete {
        /// The instance.
        instance: u8,
        /// The answer is lost.
        lost: bool,
    },
    /// The instance releases the key after a failed effect (fenced by its token).
    Release {
        /// The instance.
        instance: u8,
        /// The answer is lost.
        lost: bool,
    },
    /// The instance crashes, whatever it was doing.
    Crash {
        /// The instance.
        instance: u8,
    },
    /// A write whose answer was lost lands now.
    Deliver {
        /// Index in the pending writes.
        write: u8,
    },
    /// DynamoDB's TTL deletes the expired record.
    TtlDelete,
}

/// What the table answers a write.
enum Answer {
    /// The condition held.
    Written,
    /// The condition failed; the old record (`ALL_OLD`).
    Refused(Option<Record>),
}

/// The protocol model for one [`Config`].
#[derive(Debug, Clone)]
pub struct ProtocolModel {
    /// What it explores.
    pub config: Config,
}

impl ProtocolModel {
    /// A model of `config`.
    pub fn new(config: Config) -> Self {
        Self { config }
    }

    /// An instance's clock, epoch ms.
    pub(crate) fn local_ms(state: &State, instance: usize) -> u64 {
        let ticks = i64::from(state.now) + i64::from(state.instances[instance].skew);
        let offset = ticks * i64::try_from(TICK_MS).unwrap_or(i64::MAX);
        BASE_MS.saturating_add_signed(offset)
    }

    /// True time, epoch ms (DynamoDB's TTL and the Lambda service go by it).
    pub(crate) fn true_ms(state: &State) -> u64 {
        BASE_MS + ms(state.now)
    }

    /// Epoch ms of a tick.
    pub(crate) fn tick_ms(tick: u8) -> u64 {
        BASE_MS + ms(tick)
    }

    /// The table evaluates one conditional write atomically.
    fn table(&self, state: &mut State, write: &Write) -> Answer {
        let c = &self.config;
        let margin_ms = c.takeover_margin_ms();
        match write {
            Write::Claim { record, now_ms } => {
                let old = state.record.clone();
                let seen = old.as_ref().map(|r| r.seen_by(record.token, record.fp));
                if !protocol::claim_lands(seen.as_ref(), *now_ms, margin_ms) {
                    return Answer::Refused(old);
                }
                let new_life = old
                    .as_ref()
                    .is_none_or(|r| protocol::is_expired(r.expiration_s, *now_ms));
                if let Some(r) = &old
                    && !new_life
                    && r.status == Status::Completed
                {
                    state.ghost.ran_after_completed = true;
                }
                if new_life {
                    state.ghost = Ghost {
                        life: state.ghost.life + 1,
                        life_fp: Some(record.fp),
                        applied_fp: state.ghost.applied_fp,
                        ran_after_completed: state.ghost.ran_after_completed,
                        mismatch_applied: state.ghost.mismatch_applied,
                        unfair: state.ghost.unfair,
                        ..Ghost::default()
                    };
                }
                state.record = Some(record.clone());
                Answer::Written
            }
            Write::Complete {
                token,
                expiration_s,
            } => {
                let old = state.record.clone();
                let lands = match (c.mutation, &old) {
                    (Some(Mutation::CompleteIgnoresToken), Some(r)) => {
                        r.status == Status::InProgress
                    }
                    _ => protocol::owns(old.as_ref().map(|r| r.seen_by(*token, r.fp)).as_ref()),
                };
                if !lands {
                    return Answer::Refused(old);
                }
                if let Some(r) = state.record.as_mut() {
                    r.status = Status::Completed;
                    r.expiration_s = *expiration_s;
                    r.lease_ms = None;
                }
                state.ghost.completed = true;
                Answer::Written
            }
            Write::Extend {
                token,
                lease_ms,
                expiration_s,
            } => {
                let old = state.record.clone();
                let seen = old.as_ref().map(|r| r.seen_by(*token, r.fp));
                let lands = match c.mutation {
                    Some(Mutation::LeaseMayShrink) => protocol::owns(seen.as_ref()),
                    _ => protocol::extend_lands(seen.as_ref(), *lease_ms),
                };
                if !lands {
                    return Answer::Refused(old);
                }
                if let Some(r) = state.record.as_mut() {
                    r.lease_ms = Some(*lease_ms);
                    r.expiration_s = *expiration_s;
                }
                Answer::Written
            }
            Write::Release { token } => {
                let old = state.record.clone();
                if !protocol::owns(old.as_ref().map(|r| r.seen_by(*token, r.fp)).as_ref()) {
                    return Answer::Refused(old);
                }
                state.record = None;
                Answer::Written
            }
            Write::KeyedPut { record, now_ms } => {
                let old = state.record.clone();
                let seen = old.as_ref().map(|r| r.seen_by(record.token, record.fp));
                let lands = match c.mutation {
                    Some(Mutation::KeyedCompletionUnconditional) => true,
                    _ => protocol::keyed_completion_lands(seen.as_ref(), *now_ms),
                };
                if !lands {
                    return Answer::Refused(old);
                }
                if let Some(r) = &old
                    && r.status == Status::Completed
                    && r.token != record.token
                    && !protocol::is_expired(r.expiration_s, *now_ms)
                {
                    // Another delivery's live completed record replaced.
                    state.ghost.ran_after_completed = true;
                }
                state.record = Some(record.clone());
                state.ghost.completed = true;
                Answer::Written
            }
        }
    }

    /// The record as a keyed delivery of content `fp` judges it (under [`Mutation::KeyedIgnoresFingerprint`], as if
    /// it were of the same content).
    fn keyed_seen(
        &self,
        record: &Record,
        token: crate::state::Token,
        fp: crate::config::Fp,
    ) -> Seen {
        let mut seen = record.seen_by(token, fp);
        if self.config.mutation == Some(Mutation::KeyedIgnoresFingerprint) {
            seen.same_fingerprint = true;
        }
        seen
    }

    /// The local cache answers a completed key (replay, or a mismatch for other content) and the job ends; `false`
    /// when the cache is off, empty or expired at `now_ms`. The claim and the keyed read both ask it first.
    fn answered_from_cache(
        &self,
        state: &mut State,
        i: usize,
        msg: u8,
        fp: crate::config::Fp,
        now_ms: u64,
    ) -> bool {
        let Some(hit) = state.instances[i].cache.filter(|_| self.config.cache) else {
            return false;
        };
        if protocol::is_expired(hit.expiration_s, now_ms) {
            return false;
        }
        let end = if hit.fp == fp {
            End::Replayed
        } else {
            End::DeadLetterWithContext
        };
        Self::finish(state, msg, end);
        Self::end_job(state, i, false);
        true
    }

    /// `state` with [`Config::leftover_claim`]'s record in the table (and, when `applied`, its call applied
    /// downstream, the named case of a second application: its attempt died between the effect and the completion).
    fn leftover(&self, applied: bool, mut state: State) -> State {
        let c = &self.config;
        let Some(fp) = c.leftover_claim else {
            return state;
        };
        // Claimed at tick 0 on the true clock, its lease to tick 1.
        let lease_ms = BASE_MS + ms(1);
        state.record = Some(Record {
            status: Status::InProgress,
            expiration_s: protocol::in_progress_expiration_s(
                BASE_MS,
                ms(c.window),
                lease_ms,
                ms(c.margin),
            ),
            lease_ms: Some(lease_ms),
            token: LEFTOVER_TOKEN,
            fp,
        });
        state.ghost.life = 1;
        state.ghost.life_fp = Some(fp);
        if applied {
            state.downstream_fp = Some(fp);
            state.ghost.applied = 1;
            state.ghost.excused = true;
            state.ghost.applied_fp[usize::from(fp.min(1))] = 1;
        }
        state
    }

    /// The keyed mode's read: replay a completed record of the same content, refuse other content, or go on to the
    /// effect. What the record says is fixed here; the effect may be sent much later.
    fn read(&self, state: &mut State, i: usize) {
        let Some(job) = state.instances[i].job.clone() else {
            return;
        };
        let fp = state.messages[usize::from(job.msg)].fp;
        let now_ms = Self::local_ms(state, i);
        if self.answered_from_cache(state, i, job.msg, fp, now_ms) {
            return;
        }
        let old = state.record.clone();
        let seen = old.as_ref().map(|r| self.keyed_seen(r, job.token, fp));
        let decision = protocol::keyed_read(seen.as_ref(), now_ms);
        if let Some(r) = &old
            && r.status == Status::Completed
            && r.fp == fp
            && !protocol::is_expired(r.expiration_s, now_ms)
            && decision != KeyedRead::Replay
        {
            state.ghost.ran_after_completed = true;
        }
        match decision {
            KeyedRead::Replay => {
                let expiration_s = old.map_or(0, |r| r.expiration_s);
                state.instances[i].cache = Some(Cached { fp, expiration_s });
                Self::finish(state, job.msg, End::Replayed);
                Self::end_job(state, i, false);
            }
            KeyedRead::PayloadMismatch => {
                Self::finish(state, job.msg, End::DeadLetterWithContext);
                Self::end_job(state, i, false);
            }
            // No lease in the keyed mode: nothing to outlive.
            KeyedRead::Run => Self::own(state, i, Phase::Effect { sent: false }, u64::MAX),
        }
    }

    /// The keyed mode's completion: one conditional `PutItem` of the completed record (first try, or the SDK's retry
    /// of one whose answer was lost), and what the engine makes of the answer.
    fn keyed_complete(&self, state: &mut State, i: usize, lost: bool) {
        let Some(job) = state.instances[i].job.clone() else {
            return;
        };
        let fp = state.messages[usize::from(job.msg)].fp;
        let write = match job.retry.clone() {
            Some(retry @ Write::KeyedPut { .. }) => retry,
            _ => {
                let now_ms = Self::local_ms(state, i);
                Write::KeyedPut {
                    record: Record {
                        status: Status::Completed,
                        expiration_s: protocol::completed_expiration_s(
                            now_ms,
                            ms(self.config.window),
                        ),
                        lease_ms: None,
                        token: job.token,
                        fp,
                    },
                    now_ms,
                }
            }
        };
        let Write::KeyedPut { record, now_ms } = &write else {
            return;
        };
        let (expiration_s, now_ms) = (record.expiration_s, *now_ms);
        if lost {
            state.lost_writes -= 1;
            state.pending.push(write.clone());
            if let Some(job) = state.instances[i].job.as_mut() {
                job.retry = Some(write);
            }
            return;
        }
        let end = match self.table(state, &write) {
            Answer::Written => Some((End::Applied, expiration_s)),
            // Its own first try landed (the answer was lost): this delivery's completion.
            Answer::Refused(Some(old)) if old.token == job.token => {
                Some((End::Applied, old.expiration_s))
            }
            Answer::Refused(Some(old)) => {
                let seen = self.keyed_seen(&old, job.token, fp);
                match protocol::keyed_completion_refused(&seen, now_ms) {
                    ClaimRefused::Replay => Some((End::Replayed, old.expiration_s)),
                    ClaimRefused::PayloadMismatch => {
                        Some((End::DeadLetterWithContext, old.expiration_s))
                    }
                    // The store disagrees with the rules: an error, the message comes back.
                    _ => None,
                }
            }
            Answer::Refused(None) => None,
        };
        let done = matches!(end, Some((End::Applied, _)));
        if let Some((end, expiration_s)) = end {
            if end != End::DeadLetterWithContext {
                state.instances[i].cache = Some(Cached { fp, expiration_s });
            }
            Self::finish(state, job.msg, end);
        }
        Self::end_job(state, i, done);
    }

    /// The invocation on `instance` ends: done, failed, crashed, killed, or its claim lost. One that had sent its
    /// effect and ends without its completion is the book's named case for a second application
    /// (book/src/how-it-works.md, "What can still go wrong").
    fn end_job(state: &mut State, instance: usize, completed: bool) {
        if let Some(job) = state.instances[instance].job.take()
            && !completed
            && matches!(job.phase, Phase::Effect { sent: true } | Phase::Complete)
        {
            state.ghost.excused = true;
        }
    }

    /// The message leaves the queue.
    fn finish(state: &mut State, msg: u8, end: End) {
        state.messages[usize::from(msg)].end = Some(end);
    }

    fn claim(&self, state: &mut State, i: usize, lost: bool) {
        let c = &self.config;
        let Some(job) = state.instances[i].job.clone() else {
            return;
        };
        let fp = state.messages[usize::from(job.msg)].fp;
        // The SDK's retry of a claim whose answer was lost resends the same request, `:now_ms` included.
        if let Some(retry @ Write::Claim { .. }) = job.retry.clone() {
            return self.send_claim(state, i, retry, lost);
        }
        let now_ms = Self::local_ms(state, i);
        if self.answered_from_cache(state, i, job.msg, fp, now_ms) {
            return;
        }
        let deadline_ms = Self::tick_ms(job.deadline);
        let deadline_ms = c.deadline_lease.then_some(deadline_ms);
        let lease_ms = match c.mutation {
            Some(Mutation::LeaseNeverEnds) => u64::from(u32::MAX),
            _ => {
                protocol::lease_until_ms(now_ms, deadline_ms, ms(c.min_lease), ms(c.default_lease))
            }
        };
        let expiration_s = match c.mutation {
            Some(Mutation::ExpiryIgnoresLease) => {
                protocol::completed_expiration_s(now_ms, ms(c.window))
            }
            _ => protocol::in_progress_expiration_s(now_ms, ms(c.window), lease_ms, ms(c.margin)),
        };
        let write = Write::Claim {
            record: Record {
                status: Status::InProgress,
                expiration_s,
                lease_ms: Some(lease_ms),
                token: job.token,
                fp,
            },
            now_ms,
        };
        self.send_claim(state, i, write, lost);
    }

    /// The claim's `PutItem` (first try or the SDK's retry) and what the engine makes of the answer.
    fn send_claim(&self, state: &mut State, i: usize, write: Write, lost: bool) {
        let Some(job) = state.instances[i].job.clone() else {
            return;
        };
        let Write::Claim { record, now_ms } = &write else {
            return;
        };
        let (fp, lease_ms, now_ms) = (record.fp, record.lease_ms.unwrap_or(0), *now_ms);
        let margin_ms = self.config.takeover_margin_ms();
        if lost {
            state.lost_writes -= 1;
            state.pending.push(write.clone());
            if let Some(job) = state.instances[i].job.as_mut() {
                job.retry = Some(write);
            }
            return;
        }
        if let Some(job) = state.instances[i].job.as_mut() {
            job.retry = None;
        }
        let old = match self.table(state, &write) {
            Answer::Written => {
                Self::own(state, i, Phase::Effect { sent: false }, lease_ms);
                return;
            }
            Answer::Refused(Some(old)) => old,
            Answer::Refused(None) => return,
        };
        let seen = old.seen_by(job.token, fp);
        let decision = protocol::claim_refused(&seen, now_ms, margin_ms);
        let completed_live = old.status == Status::Completed
            && seen.same_fingerprint
            && !protocol::is_expired(old.expiration_s, now_ms);
        if completed_live && decision != ClaimRefused::Replay {
            state.ghost.ran_after_completed = true;
        }
        match decision {
            ClaimRefused::OwnRetry => {
                Self::own(
                    state,
                    i,
                    Phase::Effect { sent: false },
                    old.lease_ms.unwrap_or(lease_ms),
                );
            }
            ClaimRefused::Replay => {
                state.instances[i].cache = Some(Cached {
                    fp,
                    expiration_s: old.expiration_s,
                });
                Self::finish(state, job.msg, End::Replayed);
                Self::end_job(state, i, false);
            }
            ClaimRefused::PayloadMismatch => {
                Self::finish(state, job.msg, End::DeadLetterWithContext);
                Self::end_job(state, i, false);
            }
            ClaimRefused::InProgress { claimable_after_ms } => {
                // ChangeMessageVisibility: back when the lease has passed by the margin, on this instance's clock.
                let wait_ms = claimable_after_ms.unwrap_or(now_ms).saturating_sub(now_ms);
                let wait = u8::try_from(wait_ms.div_ceil(TICK_MS))
                    .unwrap_or(u8::MAX)
                    .max(1);
                let m = &mut state.messages[usize::from(job.msg)];
                m.visible_at = state.now.saturating_add(wait);
                Self::end_job(state, i, false);
            }
            ClaimRefused::Inconsistent => Self::end_job(state, i, false),
        }
    }

    fn own(state: &mut State, i: usize, phase: Phase, lease_ms: u64) {
        if let Some(job) = state.instances[i].job.as_mut() {
            job.phase = phase;
            job.lease_ms = lease_ms;
        }
    }

    fn send(state: &mut State, i: usize) {
        let Some(job) = state.instances[i].job.as_mut() else {
            return;
        };
        job.phase = Phase::Effect { sent: true };
        let (token, msg, lease_ms) = (job.token, job.msg, job.lease_ms);
        let fp = state.messages[usize::from(msg)].fp;
        let now_ms = Self::true_ms(state);
        // The keyed mode has no claim to run under: a delivery that read before the completion sends its effect after
        // it, and property 1 (the downstream key) is what holds then; property 5 is judged where the effect applies.
        let keyed = Self::is_keyed(state, i);
        if !keyed && lease_ms < now_ms {
            // The effect starts after its lease passed: the book's lost-lease case (book/src/how-it-works.md).
            state.ghost.excused = true;
        } else if !keyed
            && let Some(r) = &state.record
            && r.status == Status::Completed
            && !protocol::is_expired(r.expiration_s, now_ms)
        {
            state.ghost.ran_after_completed = true;
        }
        if !keyed && state.ghost.life_fp.is_some_and(|life_fp| life_fp != fp) {
            state.ghost.mismatch_applied = true;
        }
        state.requests.push(Request {
            token,
            instance: u8::try_from(i).unwrap_or(u8::MAX),
            fp,
            life: state.ghost.life,
        });
    }

    fn land(&self, state: &mut State, index: usize, fail: bool) {
        let request = state.requests.remove(index);
        let sender = usize::from(request.instance);
        let waiting = state.instances[sender]
            .job
            .as_ref()
            .is_some_and(|j| j.token == request.token && j.phase == (Phase::Effect { sent: true }));
        if fail {
            state.effect_failures -= 1;
        } else {
            let honours_key = self.config.downstream_key
                && self.config.mutation != Some(Mutation::KeyedWithoutDownstreamKey);
            let applied = !honours_key || state.downstream_fp.is_none();
            // A key it saw with other content is refused (the IETF draft's 422; Stripe's 400): a permanent error for
            // the sender, which dead-letters the message with its context.
            let refused = honours_key
                && state.downstream_fp.is_some_and(|first| first != request.fp)
                && !(self.config.keyed
                    && self.config.mutation == Some(Mutation::KeyedRefusalTakenForSuccess));
            state.downstream_fp.get_or_insert(request.fp);
            if refused {
                let job = state.instances[sender].job.as_ref().filter(|_| waiting);
                if let Some(msg) = job.map(|j| j.msg) {
                    Self::finish(state, msg, End::DeadLetterWithContext);
                    if self.config.keyed {
                        Self::end_job(state, sender, false);
                    } else if let Some(job) = state.instances[sender].job.as_mut() {
                        // The claim mode releases the key after a failed effect, a permanent one too.
                        job.phase = Phase::Release;
                    }
                }
                return;
            }
            if applied {
                let g = &mut state.ghost;
                if request.life == g.life {
                    g.applied = g.applied.saturating_add(1);
                }
                let slot = usize::from(request.fp.min(1));
                g.applied_fp[slot] = g.applied_fp[slot].saturating_add(1);
                if self.config.keyed && g.applied_fp.iter().all(|n| *n > 0) {
                    g.mismatch_applied = true;
                }
            }
        }
        if waiting && fail && self.config.keyed {
            // The keyed mode writes nothing for a failed effect: the message comes back after its visibility timeout.
            Self::end_job(state, sender, false);
            return;
        }
        if waiting && let Some(job) = state.instances[sender].job.as_mut() {
            job.phase = if fail {
                Phase::Release
            } else {
                Phase::Complete
            };
        }
    }

    fn beat(&self, state: &mut State, i: usize, lost: bool) {
        let Some(job) = state.instances[i].job.clone() else {
            return;
        };
        let Some(lease) = self.config.heartbeat_lease else {
            return;
        };
        let now_ms = Self::local_ms(state, i);
        let lease_ms = now_ms + ms(lease);
        let c = &self.config;
        let expiration_s = match c.mutation {
            Some(Mutation::ExpiryIgnoresLease) => {
                protocol::completed_expiration_s(now_ms, ms(c.window))
            }
            _ => protocol::in_progress_expiration_s(now_ms, ms(c.window), lease_ms, ms(c.margin)),
        };
        let write = Write::Extend {
            token: job.token,
            lease_ms,
            expiration_s,
        };
        if lost {
            state.lost_writes -= 1;
            state.pending.push(write);
            return;
        }
        match self.table(state, &write) {
            Answer::Written => Self::own(state, i, job.phase, job.lease_ms.max(lease_ms)),
            Answer::Refused(found) => {
                let fp = state.messages[usize::from(job.msg)].fp;
                let seen = found.as_ref().map(|r| r.seen_by(job.token, fp));
                match protocol::extend_refused(seen.as_ref()) {
                    FencedRefused::Done => {
                        let stored = found.and_then(|r| r.lease_ms).unwrap_or(0);
                        Self::own(state, i, job.phase, job.lease_ms.max(stored));
                    }
                    // The effect's future is dropped; a request already sent still lands.
                    FencedRefused::LeaseLost | FencedRefused::Inconsistent => {
                        Self::end_job(state, i, false)
                    }
                }
            }
        }
    }

    /// The invocation on `instance` is a keyed delivery (its lease is none: `u64::MAX`).
    fn is_keyed(state: &State, i: usize) -> bool {
        state.instances[i]
            .job
            .as_ref()
            .is_some_and(|j| j.lease_ms == u64::MAX)
    }

    fn complete(&self, state: &mut State, i: usize, lost: bool) {
        if self.config.keyed {
            return self.keyed_complete(state, i, lost);
        }
        let Some(job) = state.instances[i].job.clone() else {
            return;
        };
        // The completion is computed once; the SDK's and the engine's retries resend it.
        let write = match job.retry.clone() {
            Some(retry @ Write::Complete { .. }) => retry,
            _ => {
                let now_ms = Self::local_ms(state, i);
                Write::Complete {
                    token: job.token,
                    expiration_s: protocol::completed_expiration_s(now_ms, ms(self.config.window)),
                }
            }
        };
        let Write::Complete { expiration_s, .. } = write else {
            return;
        };
        if lost {
            state.lost_writes -= 1;
            state.pending.push(write.clone());
            if let Some(job) = state.instances[i].job.as_mut() {
                job.retry = Some(write);
            }
            return;
        }
        let fp = state.messages[usize::from(job.msg)].fp;
        let done = match self.table(state, &write) {
            Answer::Written => true,
            Answer::Refused(found) => {
                let seen = found.as_ref().map(|r| r.seen_by(job.token, fp));
                protocol::complete_refused(seen.as_ref()) == FencedRefused::Done
            }
        };
        if done {
            state.instances[i].cache = Some(Cached { fp, expiration_s });
            Self::finish(state, job.msg, End::Applied);
        }
        // Refused otherwise: LeaseLost, a transient failure; the message comes back after its visibility timeout.
        Self::end_job(state, i, done);
    }

    fn release(&self, state: &mut State, i: usize, lost: bool) {
        let Some(job) = state.instances[i].job.clone() else {
            return;
        };
        state.instances[i].cache = None;
        let write = Write::Release { token: job.token };
        if lost {
            state.lost_writes -= 1;
            state.pending.push(write);
            return;
        }
        // Released, already gone, or lost: the effect failed either way and the message comes back.
        let _ = self.table(state, &write);
        Self::end_job(state, i, false);
    }

    /// An idle instance could receive a visible message now.
    fn receivable(&self, state: &State) -> bool {
        state.now <= self.config.last_receive + self.config.drain
            && state.instances.iter().any(|i| i.job.is_none())
            && state.messages.iter().enumerate().any(|(m, msg)| {
                msg.end.is_none()
                    && msg.visible_at <= state.now
                    && !state
                        .instances
                        .iter()
                        .any(|i| i.job.as_ref().is_some_and(|j| usize::from(j.msg) == m))
            })
    }

    fn tick(&self, state: &mut State) {
        // Only a drain judges fairness: without one, the ghost stays clear and the state space as it was.
        if self.config.drain > 0 && self.receivable(state) {
            state.ghost.unfair = true;
        }
        state.now += 1;
        let now = state.now;
        for i in 0..state.instances.len() {
            if state.instances[i]
                .job
                .as_ref()
                .is_some_and(|j| j.deadline < now)
            {
                // Lambda's timeout ends the execution environment, its cache with it.
                state.instances[i].cache = None;
                Self::end_job(state, i, false);
            }
        }
        // A lease that passed on the true clock while its owner ran the effect (or was about to) and before its
        // completion landed: an effect that outlived its lease.
        let now_ms = Self::true_ms(state);
        if state
            .instances
            .iter()
            .filter_map(|inst| inst.job.as_ref())
            .any(|j| {
                matches!(j.phase, Phase::Effect { .. } | Phase::Complete) && j.lease_ms < now_ms
            })
        {
            state.ghost.excused = true;
        }
    }

    fn receive(&self, state: &mut State, i: usize, msg: u8) {
        let c = &self.config;
        let now = state.now;
        let m = &mut state.messages[usize::from(msg)];
        if m.receives >= c.max_receives {
            m.end = Some(End::DeadLetterBySqs);
            return;
        }
        m.receives += 1;
        m.visible_at = match c.mutation {
            Some(Mutation::NoRedelivery) => u8::MAX,
            _ => now.saturating_add(c.visibility),
        };
        state.instances[i].job = Some(Job {
            msg,
            token: state.next_token,
            deadline: now.saturating_add(c.timeout),
            phase: if c.keyed { Phase::Read } else { Phase::Claim },
            lease_ms: 0,
            retry: None,
        });
        state.next_token += 1;
    }
}

impl Model for ProtocolModel {
    type State = State;
    type Action = Action;

    fn init_states(&self) -> Vec<State> {
        let c = &self.config;
        let skew = i8::try_from(c.skew).unwrap_or(i8::MAX);
        let choices: Vec<i8> = if skew == 0 {
            vec![0]
        } else {
            vec![0, skew, -skew]
        };
        // Instance 0 keeps true time; every other instance takes each skew.
        let mut skews: Vec<Vec<i8>> = vec![vec![0]];
        for _ in 1..c.instances {
            skews = skews
                .into_iter()
                .flat_map(|prefix| {
                    choices.iter().map(move |&s| {
                        let mut v = prefix.clone();
                        v.push(s);
                        v
                    })
                })
                .collect();
        }
        // A leftover claim-mode record: its call never sent, or applied downstream before its attempt died.
        let leftover_applied: &[bool] = if c.leftover_claim.is_some() {
            &[false, true]
        } else {
            &[false]
        };
        skews
            .into_iter()
            .flat_map(|skews| {
                leftover_applied
                    .iter()
                    .map(move |&applied| (skews.clone(), applied))
            })
            .map(|(skews, applied)| {
                self.leftover(
                    applied,
                    State {
                        now: 0,
                        instances: skews
                            .into_iter()
                            .map(|skew| Instance {
                                skew,
                                job: None,
                                cache: None,
                            })
                            .collect(),
                        messages: c
                            .messages
                            .iter()
                            .map(|&fp| Message {
                                fp,
                                receives: 0,
                                visible_at: 0,
                                end: None,
                            })
                            .collect(),
                        record: None,
                        pending: Vec::new(),
                        requests: Vec::new(),
                        downstream_fp: None,
                        next_token: LEFTOVER_TOKEN + 1,
                        crashes: c.crashes,
                        lost_writes: c.lost_writes,
                        effect_failures: c.effect_failures,
                        ghost: Ghost::default(),
                    },
                )
            })
            .collect()
    }

    fn actions(&self, state: &State, actions: &mut Vec<Action>) {
        let c = &self.config;
        let lost_choices: &[bool] = if state.lost_writes > 0 {
            &[false, true]
        } else {
            &[false]
        };
        for (i, inst) in state.instances.iter().enumerate() {
            let instance = u8::try_from(i).unwrap_or(u8::MAX);
            let Some(job) = &inst.job else {
                if state.now <= c.last_receive + c.drain {
                    for (m, msg) in state.messages.iter().enumerate() {
                        let busy = state.instances.iter().any(|other| {
                            other.job.as_ref().is_some_and(|j| usize::from(j.msg) == m)
                        });
                        if msg.end.is_none() && msg.visible_at <= state.now && !busy {
                            let msg = u8::try_from(m).unwrap_or(u8::MAX);
                            actions.push(Action::Receive { instance, msg });
                        }
                    }
                }
                continue;
            };
            for &lost in lost_choices {
                match job.phase {
                    Phase::Read => {
                        if !lost {
                            actions.push(Action::Read { instance });
                        }
                    }
                    Phase::Claim => actions.push(Action::Claim { instance, lost }),
                    Phase::Effect { sent } => {
                        if !sent && !lost {
                            actions.push(Action::Send { instance });
                        }
                        if c.heartbeat_lease.is_some() {
                            actions.push(Action::Beat { instance, lost });
                        }
                    }
                    Phase::Complete => actions.push(Action::Complete { instance, lost }),
                    Phase::Release => actions.push(Action::Release { instance, lost }),
                }
            }
            if state.crashes > 0 {
                actions.push(Action::Crash { instance });
            }
        }
        for r in 0..state.requests.len() {
            let request = u8::try_from(r).unwrap_or(u8::MAX);
            actions.push(Action::Land {
                request,
                fail: false,
            });
            if state.effect_failures > 0 {
                actions.push(Action::Land {
                    request,
                    fail: true,
                });
            }
        }
        for w in 0..state.pending.len() {
            let write = u8::try_from(w).unwrap_or(u8::MAX);
            actions.push(Action::Deliver { write });
        }
        if let Some(r) = &state.record
            && protocol::is_expired(r.expiration_s, Self::true_ms(state))
        {
            actions.push(Action::TtlDelete);
        }
        // During the drain, SQS delivers before time moves.
        if state.now < c.horizon() && !(state.now > c.last_receive && self.receivable(state)) {
            actions.push(Action::Tick);
        }
    }

    fn next_state(&self, last: &State, action: Action) -> Option<State> {
        let mut state = last.clone();
        match action {
            Action::Tick => self.tick(&mut state),
            Action::Receive { instance, msg } => {
                self.receive(&mut state, usize::from(instance), msg)
            }
            Action::Claim { instance, lost } => self.claim(&mut state, usize::from(instance), lost),
            Action::Read { instance } => self.read(&mut state, usize::from(instance)),
            Action::Send { instance } => Self::send(&mut state, usize::from(instance)),
            Action::Land { request, fail } => self.land(&mut state, usize::from(request), fail),
            Action::Beat { instance, lost } => self.beat(&mut state, usize::from(instance), lost),
            Action::Complete { instance, lost } => {
                self.complete(&mut state, usize::from(instance), lost);
            }
            Action::Release { instance, lost } => {
                self.release(&mut state, usize::from(instance), lost)
            }
            Action::Crash { instance } => {
                state.crashes -= 1;
                state.instances[usize::from(instance)].cache = None;
                Self::end_job(&mut state, usize::from(instance), false);
            }
            Action::Deliver { write } => {
                let write = state.pending.remove(usize::from(write));
                let _ = self.table(&mut state, &write);
            }
            Action::TtlDelete => state.record = None,
        }
        Some(state)
    }

    fn format_action(&self, action: &Action) -> String {
        crate::trace::describe_action(action)
    }

    fn properties(&self) -> Vec<Property<Self>> {
        properties::all()
    }
}
