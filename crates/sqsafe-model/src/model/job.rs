//! What every step shares: an invocation's job starting its effect, ending, and its message leaving the queue; the
//! local cache; how a keyed delivery sees the record.

use sqsafe_idempotency::protocol::{self, Seen};

use super::world::ProtocolModel;
use crate::config::Mutation;
use crate::state::{End, Phase, Record, State};

impl ProtocolModel {
    /// The record as a keyed delivery of content `fp` judges it (under [`Mutation::KeyedIgnoresFingerprint`], as if
    /// it were of the same content).
    pub(super) fn keyed_seen(
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
    pub(super) fn answered_from_cache(
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

    /// The invocation on `instance` ends: done, failed, crashed, killed, or its claim lost. One that had sent its
    /// effect and ends without its completion is the book's named case for a second application
    /// (book/src/how-it-works.md, "What can still go wrong").
    pub(super) fn end_job(state: &mut State, instance: usize, completed: bool) {
        if let Some(job) = state.instances[instance].job.take()
            && !completed
            && matches!(job.phase, Phase::Effect { sent: true } | Phase::Complete)
        {
            state.ghost.excused = true;
        }
    }

    /// The message leaves the queue.
    pub(super) fn finish(state: &mut State, msg: u8, end: End) {
        state.messages[usize::from(msg)].end = Some(end);
    }

    pub(super) fn own(state: &mut State, i: usize, phase: Phase, lease_ms: u64) {
        if let Some(job) = state.instances[i].job.as_mut() {
            job.phase = phase;
            job.lease_ms = lease_ms;
        }
    }

    /// The invocation on `instance` is a keyed delivery (its lease is none: `u64::MAX`).
    pub(super) fn is_keyed(state: &State, i: usize) -> bool {
        state.instances[i]
            .job
            .as_ref()
            .is_some_and(|j| j.lease_ms == u64::MAX)
    }

    /// An idle instance could receive a visible message now.
    pub(super) fn receivable(&self, state: &State) -> bool {
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
}
