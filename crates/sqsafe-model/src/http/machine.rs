//! The layer model's state machine: the initial state, the actions enabled in a state, and the state each leads to.

use stateright::{Model, Property};

use super::properties;
use super::state::{Client, HttpAction, HttpGhost, HttpState, ScopeGhost, Stage};
use super::world::HttpModel;

impl Model for HttpModel {
    type State = HttpState;
    type Action = HttpAction;

    fn init_states(&self) -> Vec<HttpState> {
        let c = &self.config;
        let client = Client {
            attempts_left: c.attempts,
            done: false,
            got: None,
            refused: false,
            lost: false,
            crashed: false,
            released: false,
            outlived: false,
        };
        vec![HttpState {
            now: 0,
            clients: vec![client; c.requests.len()],
            attempts: Vec::new(),
            records: vec![None; self.scopes()],
            next_token: 1,
            crashes: c.crashes,
            lost_answers: c.lost_answers,
            handler_failures: c.handler_failures,
            ghost: HttpGhost {
                scopes: vec![ScopeGhost::default(); self.scopes()],
                ..HttpGhost::default()
            },
        }]
    }

    fn actions(&self, s: &HttpState, actions: &mut Vec<HttpAction>) {
        let c = &self.config;
        let skew = i8::try_from(c.skew).unwrap_or(i8::MAX);
        // Only the offset between two clocks matters to the claims: one runs on true time, the other ahead.
        let skews: &[i8] = if skew == 0 { &[0] } else { &[0, skew] };
        if s.now <= c.last_send {
            for (r, client) in s.clients.iter().enumerate() {
                if !client.done && client.attempts_left > 0 {
                    let request = u8::try_from(r).unwrap_or(u8::MAX);
                    for &skew in skews {
                        actions.push(HttpAction::Send { request, skew });
                    }
                }
            }
        }
        for (i, attempt) in s.attempts.iter().enumerate() {
            let index = u8::try_from(i).unwrap_or(u8::MAX);
            match attempt.stage {
                Stage::Handler => {
                    actions.push(HttpAction::Run {
                        attempt: index,
                        fail: false,
                    });
                    if s.handler_failures > 0 {
                        actions.push(HttpAction::Run {
                            attempt: index,
                            fail: true,
                        });
                    }
                }
                Stage::Complete => {
                    actions.push(HttpAction::Complete {
                        attempt: index,
                        lost: false,
                    });
                    // An answer after a `504` is not sent: there is nothing to lose.
                    if s.lost_answers > 0 && !attempt.timed_out {
                        actions.push(HttpAction::Complete {
                            attempt: index,
                            lost: true,
                        });
                    }
                }
                Stage::Release { .. } => actions.push(HttpAction::Release { attempt: index }),
            }
            if s.crashes > 0 {
                actions.push(HttpAction::Crash { attempt: index });
            }
        }
        // Time waits for a handler that ran its longest, and for a completion or a release (a write is answered
        // within its tick): see `tick`.
        let time_may_pass = s
            .attempts
            .iter()
            .all(|a| a.stage == Stage::Handler && s.now - a.claimed_at < c.handler_ticks);
        if s.now < c.horizon() && time_may_pass {
            actions.push(HttpAction::Tick);
        }
    }

    fn next_state(&self, last: &HttpState, action: HttpAction) -> Option<HttpState> {
        let mut s = last.clone();
        match action {
            HttpAction::Tick => self.tick(&mut s),
            HttpAction::Send { request, skew } => self.send(&mut s, request, skew),
            HttpAction::Run { attempt, fail } => self.run(&mut s, usize::from(attempt), fail),
            HttpAction::Complete { attempt, lost } => {
                self.complete(&mut s, usize::from(attempt), lost)
            }
            HttpAction::Release { attempt } => self.release(&mut s, usize::from(attempt)),
            HttpAction::Crash { attempt } => self.crash(&mut s, usize::from(attempt)),
        }
        Some(s)
    }

    fn properties(&self) -> Vec<Property<Self>> {
        properties::all()
    }
}
