//! The idempotency table: each conditional write evaluated atomically, as DynamoDB does.

use sqsafe_idempotency::Status;
use sqsafe_idempotency::protocol;

use super::world::ProtocolModel;
use crate::config::Mutation;
use crate::state::{Ghost, Record, State, Write};

/// What the table answers a write.
pub(super) enum Answer {
    /// The condition held.
    Written,
    /// The condition failed; the old record (`ALL_OLD`).
    Refused(Option<Record>),
}

impl ProtocolModel {
    /// The table evaluates one conditional write atomically.
    pub(super) fn table(&self, state: &mut State, write: &Write) -> Answer {
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
}
