//! SQS and the clock: a message received (or dead-lettered after `max_receives`), and time passing.

use super::world::ProtocolModel;
use crate::config::Mutation;
use crate::state::{End, Job, Phase, State};

impl ProtocolModel {
    pub(super) fn tick(&self, state: &mut State) {
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

    pub(super) fn receive(&self, state: &mut State, i: usize, msg: u8) {
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
