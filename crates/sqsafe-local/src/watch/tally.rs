//! The function's batch metrics lines as they pass through watch's output, for the invoker's per-batch reports.

use std::sync::{Mutex, PoisonError};
use std::time::Duration;

use tokio::sync::Notify;

use crate::lambda::BatchOutcomes;

/// What the batch metrics lines in watch's output counted since the last take.
#[derive(Debug, Default)]
pub(crate) struct Tally {
    counts: Mutex<Option<BatchOutcomes>>,
    seen: Notify,
}

impl Tally {
    /// A line of watch's output (cargo's, or the function's through watch).
    pub(crate) fn observe(&self, line: &str) {
        if let Some(counts) = BatchOutcomes::from_line(line) {
            self.lock().get_or_insert_default().add(counts);
            self.seen.notify_one();
        }
    }

    /// What was counted since the last take.
    pub(crate) fn take(&self) -> Option<BatchOutcomes> {
        self.lock().take()
    }

    /// What was counted since the last take, waiting up to `limit` for a first line: the function prints it before
    /// it answers, but it reaches the pipe through watch, which may pass it on a moment after the answer.
    pub(crate) async fn take_within(&self, limit: Duration) -> Option<BatchOutcomes> {
        let deadline = tokio::time::Instant::now() + limit;
        loop {
            if let Some(counts) = self.take() {
                return Some(counts);
            }
            if tokio::time::timeout_at(deadline, self.seen.notified())
                .await
                .is_err()
            {
                return self.take();
            }
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Option<BatchOutcomes>> {
        self.counts.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const BATCH: &str = r#"{"_aws":{"CloudWatchMetrics":[{"Dimensions":[["consumer"]],"Metrics":[{"Name":"RecordsReceived"},{"Name":"RecordsReplayed"}]}]},"RecordsReceived":1,"RecordsReplayed":1}"#;

    #[tokio::test]
    async fn a_line_already_seen_is_taken_at_once_and_only_once() {
        let tally = Tally::default();
        tally.observe("   Compiling send-invoice v0.1.0");
        tally.observe(BATCH);
        let taken = tally.take_within(Duration::from_secs(1)).await;
        assert_eq!(taken.map(|c| c.replayed), Some(1));
        // A limit already past: nothing more comes, and nothing sleeps.
        assert_eq!(tally.take_within(Duration::ZERO).await, None);
    }
}
