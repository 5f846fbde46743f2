//! The outbox sweeper, run on a schedule (template.yaml: an EventBridge rule every minute): publishes every outbox
//! event still `PENDING` after `SWEEP_AFTER_SECONDS`, whatever became of its stream record, with the relay's own
//! publish-then-mark; reports how many it published and how old the oldest pending event is (EMF, for the
//! outbox-age alarm).

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use lambda_runtime::LambdaEvent;
use serde::Serialize;
use sqsafe::{ConfigError, Env};
use sqsafe_outbox::{PENDING_INDEX, Relay, Sweeper};
use tracing::Instrument;

use crate::settings::Settings;

/// The name the sweeper's metrics carry (dimension `consumer`) and its binary's.
pub const SWEEPER_NAME: &str = "outbox-sweeper";

/// What the sweeper reads beside the relay's [`Settings`].
///
/// # Default
/// | variable | default | meaning |
/// |---|---|---|
/// | `OUTBOX_PENDING_INDEX` | `PendingByAge` | the table's sparse index on pending items |
/// | `SWEEP_AFTER_SECONDS` | 300 (60..=86400) | an event pending this long is published by the sweeper |
/// | `SWEEP_MAX_EVENTS` | 100 (1..=1000) | at most this many events per run |
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SweeperSettings {
    /// The relay's settings: the table, the allowed destinations, the retention of sent items.
    pub relay: Settings,
    /// `OUTBOX_PENDING_INDEX`.
    pub index: String,
    /// `SWEEP_AFTER_SECONDS`, as a duration.
    pub after: Duration,
    /// `SWEEP_MAX_EVENTS`.
    pub max_events: u32,
}

impl SweeperSettings {
    /// Reads and checks every setting.
    pub fn from_env(env: &Env) -> Result<Self, ConfigError> {
        Ok(Self {
            relay: Settings::from_env(env)?,
            index: env
                .get("OUTBOX_PENDING_INDEX")
                .unwrap_or_else(|| PENDING_INDEX.to_owned()),
            after: env.seconds("SWEEP_AFTER_SECONDS", 300, 60..=86_400)?,
            max_events: env.number("SWEEP_MAX_EVENTS", 100u32, 1..=1000)?,
        })
    }
}

/// What one run did (the invocation's result, also logged).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct SweepSummary {
    /// Events published and marked sent.
    pub published: usize,
    /// Due events that could not be published or marked (they stay `PENDING`).
    pub failed: usize,
    /// Seconds since the oldest pending event was written, when the run began (0: none pending).
    pub oldest_pending_seconds: u64,
    /// More events were due than one run takes.
    pub more: bool,
}

/// The sweeper as a Lambda handler.
#[derive(Debug, Clone)]
pub struct OutboxSweeper {
    sweeper: Sweeper,
}

/// Why a run failed: the pending index could not be read (nothing was published).
#[derive(Debug, thiserror::Error)]
#[error(transparent)]
pub struct SweepError(#[from] sqsafe_outbox::Error);

impl From<SweepError> for lambda_runtime::Diagnostic {
    fn from(e: SweepError) -> Self {
        lambda_runtime::Diagnostic {
            error_type: format!("sqsafe.outbox.{}", e.0.kind()),
            error_message: e.to_string(),
        }
    }
}

impl OutboxSweeper {
    /// A handler around a configured [`Sweeper`].
    pub fn new(sweeper: Sweeper) -> Self {
        Self { sweeper }
    }

    /// As deployed: the relay and the sweeper built from the environment.
    ///
    /// # Errors
    /// A missing or invalid setting, named.
    pub fn from_clients(clients: &sqsafe::Clients) -> Result<Self, sqsafe::Error> {
        let settings = SweeperSettings::from_env(&clients.env)?;
        let relay = Relay::new(
            clients.sqs.clone(),
            clients.dynamodb.clone(),
            settings.relay.table,
        )
        .destinations(settings.relay.destinations)
        .sent_retention(settings.relay.sent_retention);
        Ok(Self::new(
            Sweeper::new(relay)
                .index(settings.index)
                .older_than(settings.after)
                .max_per_sweep(settings.max_events),
        ))
    }

    /// One scheduled run (the event's content is not used).
    ///
    /// # Errors
    /// [`SweepError`] when the pending index cannot be read.
    pub async fn handle(
        &self,
        event: LambdaEvent<serde_json::Value>,
    ) -> Result<SweepSummary, SweepError> {
        let span = sqsafe_telemetry::invocation_span(&event.context);
        let started = SystemTime::now();
        let deadline = UNIX_EPOCH + Duration::from_millis(event.context.deadline);
        let summary = self.run().instrument(span).await;
        // Its spans, cut before the deadline: a slow collector costs spans, never the run's answer.
        sqsafe_telemetry::traces::flush(known_deadline(deadline, started), SystemTime::now()).await;
        summary
    }

    /// One sweep: publishes what is due, logs each event, emits the metrics.
    ///
    /// # Errors
    /// [`SweepError`] when the pending index cannot be read.
    pub async fn run(&self) -> Result<SweepSummary, SweepError> {
        let swept =
            self.sweeper.sweep().await.inspect_err(
                |e| tracing::error!(kind = e.kind(), error = %e, "outbox sweep failed"),
            )?;
        for (event_id, relayed) in &swept.published {
            tracing::warn!(
                event_id,
                sqs_message_id = relayed.message_id,
                marked = ?relayed.marked,
                "outbox event published by the sweeper: it was still PENDING past the threshold"
            );
        }
        for (event_id, error) in &swept.failed {
            tracing::error!(
                event_id,
                kind = error.kind(),
                retryable = error.is_retryable(),
                error = %error,
                "outbox event still PENDING: the sweeper could not publish it (next run tries again)"
            );
        }
        let summary = SweepSummary {
            published: swept.published.len(),
            failed: swept.failed.len(),
            oldest_pending_seconds: swept.oldest_pending.map_or(0, |d| d.as_secs()),
            more: swept.more,
        };
        let now_ms = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map_or(0, |d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX));
        let emf = sqsafe_telemetry::metrics::outbox_sweep_emf(
            "sqsafe",
            SWEEPER_NAME,
            now_ms,
            summary.published as u64,
            summary.failed as u64,
            Duration::from_secs(summary.oldest_pending_seconds),
        );
        // Metrics must never fail a run: a closed stdout loses the line.
        let _ =
            std::io::Write::write_all(&mut std::io::stdout().lock(), format!("{emf}\n").as_bytes());
        tracing::info!(
            published = summary.published,
            failed = summary.failed,
            oldest_pending_seconds = summary.oldest_pending_seconds,
            more = summary.more,
            "outbox sweep done"
        );
        Ok(summary)
    }
}

/// An invocation's deadline as Lambda gave it, unless it had passed already when the invocation `started`: Lambda
/// never hands over such an invocation, emulators do (a placeholder, or a queued invocation), and it is unknown then.
fn known_deadline(deadline: SystemTime, started: SystemTime) -> Option<SystemTime> {
    (deadline > started).then_some(deadline)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn settings_default_and_bounds() {
        let base = [
            ("OUTBOX_TABLE", "t"),
            (
                "OUTBOX_DESTINATIONS",
                "https://sqs.us-east-1.amazonaws.com/1/q",
            ),
        ];
        let s = SweeperSettings::from_env(&Env::from_pairs(base)).expect("defaults");
        assert_eq!(s.index, "PendingByAge");
        assert_eq!(s.after, Duration::from_secs(300));
        assert_eq!(s.max_events, 100);
        let mut short = base.to_vec();
        short.push(("SWEEP_AFTER_SECONDS", "10"));
        let err = SweeperSettings::from_env(&Env::from_pairs(short)).expect_err("below 60");
        assert_eq!(err.variable, "SWEEP_AFTER_SECONDS");
    }
}
