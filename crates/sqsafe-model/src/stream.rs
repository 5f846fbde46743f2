//! Property 10: a stream consumer under Lambda's checkpoint-and-retry delivery, model-checked.
//!
//! One shard of records, each with a partition key. The event source mapping hands the function a batch from its
//! checkpoint; the function runs the batch's records in order and answers with the sequence numbers that must come
//! back; the mapping moves its checkpoint to the lowest one named (past the batch when none is), or leaves it where
//! it was when the invocation fails as a whole (a crash mid-batch), and retries up to `max_retries` times before it
//! gives the records up (to its on-failure destination). A record's handler may fail transiently. The consumer is
//! idempotent on the record's identity (the claim model's properties 1-3): a record it already applied replays.
//!
//! With the stop rule (sqsafe's stream processor), the function stops a batch at its first failed record and runs
//! nothing after it. Without it (a processor that runs every record whatever failed before it), records after a
//! failed one are applied before it is retried: [`StreamConfig::stop_rule`] `false` shows the checker finds that.

use stateright::{Model, Property};

/// The stream model's sizes and faults.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct StreamConfig {
    /// Each record's partition key, in the shard's order.
    pub keys: Vec<u8>,
    /// Records per invocation at most (`BatchSize`).
    pub batch_size: u8,
    /// `MaximumRetryAttempts` of the mapping.
    pub max_retries: u8,
    /// Transient failures of a record's handler, in all.
    pub failures: u8,
    /// Invocations that crash mid-batch (after some records applied), in all.
    pub crashes: u8,
    /// The function stops a batch at its first failed record (sqsafe); `false`: it runs every record.
    pub stop_rule: bool,
}

impl StreamConfig {
    /// The bounded check: 4 records (keys A, A, B, A), batches of 3, 2 retries, 2 failures, 1 crash, the stop rule.
    pub fn bounded() -> Self {
        Self {
            keys: vec![0, 0, 1, 0],
            batch_size: 3,
            max_retries: 2,
            failures: 2,
            crashes: 1,
            stop_rule: true,
        }
    }
}

/// The invocation under way.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Invocation {
    /// The batch's first record (the checkpoint when it was handed over).
    pub start: u8,
    /// One past its last record.
    pub end: u8,
    /// The next record the function runs.
    pub next: u8,
    /// Records the answer will name.
    pub failed: Vec<u8>,
}

/// The stream model's world.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct StreamState {
    /// The next record the mapping hands over.
    pub checkpoint: u8,
    /// Failed invocations of the batch at the checkpoint.
    pub attempts: u8,
    /// The invocation under way, if any.
    pub invocation: Option<Invocation>,
    /// Times each record's effect was applied.
    pub applied: Vec<u8>,
    /// Records given up on (in the on-failure destination).
    pub given_up: Vec<bool>,
    /// A record was applied while an earlier record of its key was neither applied nor given up.
    pub out_of_order: bool,
    /// Failures and crashes left.
    pub failures: u8,
    /// Crashes left.
    pub crashes: u8,
}

/// One step of the mapping or the function.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum StreamAction {
    /// The mapping hands over a batch from its checkpoint.
    Deliver,
    /// The function runs the next record; its effect applies (or replays).
    Apply,
    /// The next record's handler fails transiently.
    Fail,
    /// The function crashes: the invocation fails as a whole.
    Crash,
    /// The function answers, naming its failed records.
    Answer,
}

/// The stream model for one [`StreamConfig`].
#[derive(Debug, Clone)]
pub struct StreamModel {
    /// What it explores.
    pub config: StreamConfig,
}

/// 10a: each record's effect applies at most once, and at the end exactly once unless it was given up on.
pub const P10_ONCE: &str = "10. streams: each record applied once (or given up on)";
/// 10b: no record is applied while an earlier record of its partition key is neither applied nor given up on.
pub const P10_IN_ORDER: &str = "10. streams: records applied in order per partition key";

impl StreamModel {
    fn records(&self) -> u8 {
        u8::try_from(self.config.keys.len()).unwrap_or(u8::MAX)
    }

    fn settled(&self, s: &StreamState) -> bool {
        let mut actions = Vec::new();
        self.actions(s, &mut actions);
        actions.is_empty()
    }

    /// The invocation failed as a whole, or its answer names the batch's first record: a retry of the same batch.
    fn retry(&self, s: &mut StreamState, start: u8, end: u8) {
        s.attempts += 1;
        if s.attempts > self.config.max_retries {
            for r in start..end {
                if s.applied[usize::from(r)] == 0 {
                    s.given_up[usize::from(r)] = true;
                }
            }
            s.checkpoint = end;
            s.attempts = 0;
        }
    }
}

impl Model for StreamModel {
    type State = StreamState;
    type Action = StreamAction;

    fn init_states(&self) -> Vec<StreamState> {
        let n = self.config.keys.len();
        vec![StreamState {
            checkpoint: 0,
            attempts: 0,
            invocation: None,
            applied: vec![0; n],
            given_up: vec![false; n],
            out_of_order: false,
            failures: self.config.failures,
            crashes: self.config.crashes,
        }]
    }

    fn actions(&self, s: &StreamState, actions: &mut Vec<StreamAction>) {
        match &s.invocation {
            None if s.checkpoint < self.records() => actions.push(StreamAction::Deliver),
            None => {}
            Some(inv) if inv.next < inv.end => {
                actions.push(StreamAction::Apply);
                if s.failures > 0 {
                    actions.push(StreamAction::Fail);
                }
                if s.crashes > 0 {
                    actions.push(StreamAction::Crash);
                }
            }
            Some(_) => actions.push(StreamAction::Answer),
        }
    }

    fn next_state(&self, last: &StreamState, action: StreamAction) -> Option<StreamState> {
        let mut s = last.clone();
        match action {
            StreamAction::Deliver => {
                let end = s
                    .checkpoint
                    .saturating_add(self.config.batch_size)
                    .min(self.records());
                s.invocation = Some(Invocation {
                    start: s.checkpoint,
                    end,
                    next: s.checkpoint,
                    failed: Vec::new(),
                });
            }
            StreamAction::Apply => {
                let inv = s.invocation.as_mut()?;
                let r = usize::from(inv.next);
                inv.next += 1;
                // Idempotent on the record's identity: a record already applied replays.
                if s.applied[r] == 0 {
                    let key = self.config.keys[r];
                    let behind = (0..r).any(|earlier| {
                        self.config.keys[earlier] == key
                            && s.applied[earlier] == 0
                            && !s.given_up[earlier]
                    });
                    s.out_of_order |= behind;
                    s.applied[r] = 1;
                }
            }
            StreamAction::Fail => {
                s.failures -= 1;
                let stop = self.config.stop_rule;
                let inv = s.invocation.as_mut()?;
                inv.failed.push(inv.next);
                // With the stop rule nothing after it runs: the answer names it alone.
                inv.next = if stop { inv.end } else { inv.next + 1 };
            }
            StreamAction::Crash => {
                s.crashes -= 1;
                let inv = s.invocation.take()?;
                self.retry(&mut s, inv.start, inv.end);
            }
            StreamAction::Answer => {
                let inv = s.invocation.take()?;
                match inv.failed.iter().min() {
                    None => {
                        s.checkpoint = inv.end;
                        s.attempts = 0;
                    }
                    Some(&lowest) if lowest > inv.start => {
                        s.checkpoint = lowest;
                        s.attempts = 0;
                    }
                    Some(_) => self.retry(&mut s, inv.start, inv.end),
                }
            }
        }
        Some(s)
    }

    fn properties(&self) -> Vec<Property<Self>> {
        vec![
            Property::always(P10_ONCE, |m: &StreamModel, s: &StreamState| {
                s.applied.iter().all(|a| *a <= 1)
                    && (!m.settled(s)
                        || s.applied
                            .iter()
                            .zip(&s.given_up)
                            .all(|(a, gone)| *a == 1 || *gone))
            }),
            Property::always(P10_IN_ORDER, |_: &StreamModel, s: &StreamState| {
                !s.out_of_order
            }),
        ]
    }
}

/// What one run of the stream model found.
#[derive(Debug, Clone)]
pub struct StreamReport {
    /// The configuration checked.
    pub config: StreamConfig,
    /// States generated (with repeats), distinct states, longest path, wall time and each property broken.
    pub found: crate::explore::Found,
}

/// Checks the stream model exhaustively, breadth first; each property broken comes with a shortest trace.
pub fn check_stream(config: StreamConfig) -> StreamReport {
    StreamReport {
        found: crate::explore::explore(StreamModel {
            config: config.clone(),
        }),
        config,
    }
}
