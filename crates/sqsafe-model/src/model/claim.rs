//! The claim mode's writes: the claim and what the engine makes of its answer, the heartbeat, the completion and the
//! release, each fenced by the claim's token.

use sqsafe_idempotency::Status;
use sqsafe_idempotency::protocol::{self, ClaimRefused, FencedRefused};

use super::table::Answer;
use super::world::ProtocolModel;
use crate::config::{Mutation, TICK_MS, ms};
use crate::state::{Cached, End, Phase, Record, State, Write};

impl ProtocolModel {
    pub(super) fn claim(&self, state: &mut State, i: usize, lost: bool) {
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
    pub(super) fn send_claim(&self, state: &mut State, i: usize, write: Write, lost: bool) {
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

    pub(super) fn beat(&self, state: &mut State, i: usize, lost: bool) {
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

    pub(super) fn complete(&self, state: &mut State, i: usize, lost: bool) {
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

    pub(super) fn release(&self, state: &mut State, i: usize, lost: bool) {
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
}
