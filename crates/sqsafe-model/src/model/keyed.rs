//! The keyed mode (no claim): the read that judges the record, and the one conditional put of the completed record.

use sqsafe_idempotency::Status;
use sqsafe_idempotency::protocol::{self, ClaimRefused, KeyedRead};

use super::table::Answer;
use super::world::ProtocolModel;
use crate::config::ms;
use crate::state::{Cached, End, Phase, Record, State, Write};

impl ProtocolModel {
    /// The keyed mode's read: replay a completed record of the same content, refuse other content, or go on to the
    /// effect. What the record says is fixed here; the effect may be sent much later.
    pub(super) fn read(&self, state: &mut State, i: usize) {
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
    pub(super) fn keyed_complete(&self, state: &mut State, i: usize, lost: bool) {
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
}
