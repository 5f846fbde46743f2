//! The downstream API: an effect's request sent, and applied (or failed, or refused) when it lands.

use sqsafe_idempotency::Status;
use sqsafe_idempotency::protocol;

use super::world::ProtocolModel;
use crate::config::Mutation;
use crate::state::{End, Phase, Request, State};

impl ProtocolModel {
    pub(super) fn send(state: &mut State, i: usize) {
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

    pub(super) fn land(&self, state: &mut State, index: usize, fail: bool) {
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
}
