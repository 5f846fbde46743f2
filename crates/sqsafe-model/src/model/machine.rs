//! The state machine the checker drives: the initial states, the actions enabled in a state, and the state each
//! leads to.

use sqsafe_idempotency::Status;
use sqsafe_idempotency::protocol;
use stateright::{Model, Property};

use super::action::Action;
use super::world::{BASE_MS, ProtocolModel};
use crate::config::{LEFTOVER_TOKEN, ms};
use crate::properties;
use crate::state::{Ghost, Instance, Message, Phase, Record, State};

impl ProtocolModel {
    /// `state` with [`Config::leftover_claim`](crate::config::Config::leftover_claim)'s record in the table (and,
    /// when `applied`, its call applied downstream, the named case of a second application: its attempt died between
    /// the effect and the completion).
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
