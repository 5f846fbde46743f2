//! Property 8: the outbox relay's publish-then-mark, model-checked.
//!
//! The producer commits each event with its business item in one transaction; the table's stream hands the relay the
//! new outbox items in order; the relay publishes an event, then marks it `SENT` (conditional on `PENDING`). A
//! failure (a publish error, a crash before or after publishing) fails the stream batch from that record on, and the
//! mapping retries it up to `max_retries` times, then sends the record's pointer to its on-failure queue and moves
//! on. The consumer is idempotent (properties 1-3 of the claim model): a copy of an event it already applied replays.

use stateright::{Model, Property};

/// The relay model's sizes and faults.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct OutboxConfig {
    /// Events the producer writes.
    pub events: u8,
    /// The stream mapping's `MaximumRetryAttempts`.
    pub max_retries: u8,
    /// Relay failures (publish errors, crashes before or after publishing), in all.
    pub failures: u8,
    /// A sweeper republishes items left `PENDING` (sqsafe has none today; `true` shows what one would add).
    pub sweeper: bool,
}

impl OutboxConfig {
    /// The bounded check: 2 events, 2 retries, 2 failures, no sweeper.
    pub fn bounded() -> Self {
        Self {
            events: 2,
            max_retries: 2,
            failures: 2,
            sweeper: false,
        }
    }
}

/// One event's outbox item and what became of it.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Event {
    /// Committed with its business item.
    pub written: bool,
    /// Marked `SENT`.
    pub sent: bool,
    /// Copies published to the queue.
    pub published: u8,
    /// Times the consumer applied it.
    pub applied: u8,
}

/// The relay model's world.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct OutboxState {
    /// The outbox items.
    pub events: Vec<Event>,
    /// Index of the next stream record the relay is to process.
    pub position: u8,
    /// Failed attempts at the current record.
    pub attempts: u8,
    /// The relay published the current record and has not marked it yet.
    pub published_current: bool,
    /// Stream records given up on (their pointers in the on-failure queue).
    pub on_failure: Vec<u8>,
    /// Copies in the consumer's queue, by event.
    pub queue: Vec<u8>,
    /// Failures left.
    pub failures: u8,
}

/// One step of the producer, the relay, the stream mapping, the sweeper or the consumer.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum OutboxAction {
    /// The producer commits an event with its business item.
    Write(u8),
    /// The relay publishes the current record's event.
    Publish,
    /// The relay marks it `SENT`.
    Mark,
    /// The relay fails (a publish error or a crash, before or after publishing): the mapping retries the batch, or
    /// gives up after `max_retries`.
    Fail,
    /// The sweeper republishes a `PENDING` item.
    Sweep(u8),
    /// The consumer takes a copy from the queue.
    Consume(u8),
}

/// The relay model for one [`OutboxConfig`].
#[derive(Debug, Clone)]
pub struct OutboxModel {
    /// What it explores.
    pub config: OutboxConfig,
}

/// 8a: at the end, every event written was published at least once.
pub const P8_PUBLISHED: &str = "8. outbox: every event written is published at least once";
/// 8b: the consumer applies each event at most once, and at the end exactly once if it was published.
pub const P8_APPLIED_ONCE: &str = "8. outbox: consumers apply each published event once";

impl OutboxModel {
    fn settled(&self, s: &OutboxState) -> bool {
        let mut actions = Vec::new();
        self.actions(s, &mut actions);
        actions.is_empty()
    }
}

impl Model for OutboxModel {
    type State = OutboxState;
    type Action = OutboxAction;

    fn init_states(&self) -> Vec<OutboxState> {
        let event = Event {
            written: false,
            sent: false,
            published: 0,
            applied: 0,
        };
        vec![OutboxState {
            events: vec![event; usize::from(self.config.events)],
            position: 0,
            attempts: 0,
            published_current: false,
            on_failure: Vec::new(),
            queue: Vec::new(),
            failures: self.config.failures,
        }]
    }

    fn actions(&self, s: &OutboxState, actions: &mut Vec<OutboxAction>) {
        // The producer writes events in order; the stream shows them in the same order.
        if let Some(next) = s.events.iter().position(|e| !e.written) {
            actions.push(OutboxAction::Write(u8::try_from(next).unwrap_or(u8::MAX)));
        }
        if let Some(current) = s.events.get(usize::from(s.position))
            && current.written
        {
            if s.published_current {
                actions.push(OutboxAction::Mark);
            } else {
                actions.push(OutboxAction::Publish);
            }
            if s.failures > 0 {
                actions.push(OutboxAction::Fail);
            }
        }
        if self.config.sweeper && s.position >= self.config.events {
            for (i, e) in s.events.iter().enumerate() {
                if e.written && !e.sent {
                    actions.push(OutboxAction::Sweep(u8::try_from(i).unwrap_or(u8::MAX)));
                }
            }
        }
        for (i, _) in s.queue.iter().enumerate() {
            actions.push(OutboxAction::Consume(u8::try_from(i).unwrap_or(u8::MAX)));
        }
    }

    fn next_state(&self, last: &OutboxState, action: OutboxAction) -> Option<OutboxState> {
        let mut s = last.clone();
        let current = usize::from(s.position);
        match action {
            OutboxAction::Write(e) => s.events[usize::from(e)].written = true,
            OutboxAction::Publish => {
                s.events[current].published += 1;
                s.queue.push(s.position);
                s.published_current = true;
            }
            OutboxAction::Mark => {
                s.events[current].sent = true;
                s.position += 1;
                s.attempts = 0;
                s.published_current = false;
            }
            OutboxAction::Fail => {
                s.failures -= 1;
                s.published_current = false;
                s.attempts += 1;
                if s.attempts > self.config.max_retries {
                    s.on_failure.push(s.position);
                    s.position += 1;
                    s.attempts = 0;
                }
            }
            OutboxAction::Sweep(e) => {
                let event = &mut s.events[usize::from(e)];
                event.published += 1;
                event.sent = true;
                s.queue.push(e);
            }
            OutboxAction::Consume(i) => {
                let e = s.queue.remove(usize::from(i));
                let event = &mut s.events[usize::from(e)];
                // Idempotent consumer: a copy of an applied event replays.
                if event.applied == 0 {
                    event.applied = 1;
                }
            }
        }
        Some(s)
    }

    fn properties(&self) -> Vec<Property<Self>> {
        vec![
            Property::always(P8_PUBLISHED, |m: &OutboxModel, s: &OutboxState| {
                !m.settled(s) || s.events.iter().all(|e| !e.written || e.published > 0)
            }),
            Property::always(P8_APPLIED_ONCE, |m: &OutboxModel, s: &OutboxState| {
                s.events.iter().all(|e| e.applied <= 1)
                    && (!m.settled(s)
                        || s.events
                            .iter()
                            .all(|e| e.applied == u8::from(e.published > 0)))
            }),
        ]
    }
}

/// What one run of the relay model found: states, depth, time, and each property broken with its numbered trace.
#[derive(Debug, Clone)]
pub struct OutboxReport {
    /// The configuration checked.
    pub config: OutboxConfig,
    /// States generated (with repeats).
    pub states: usize,
    /// Distinct states.
    pub unique_states: usize,
    /// Longest path explored.
    pub max_depth: usize,
    /// Wall time.
    pub elapsed: std::time::Duration,
    /// Each property broken: its name, the trace's steps and the trace in words.
    pub violations: Vec<(&'static str, usize, String)>,
}

/// Checks the relay model exhaustively, breadth first; each property broken comes with a shortest trace.
pub fn check_outbox(config: OutboxConfig) -> OutboxReport {
    let found = crate::explore::explore(OutboxModel {
        config: config.clone(),
    });
    OutboxReport {
        config,
        states: found.states,
        unique_states: found.unique_states,
        max_depth: found.max_depth,
        elapsed: found.elapsed,
        violations: found.violations,
    }
}
