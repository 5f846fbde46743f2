//! One line per batch: how each record of an invocation ended, for the terminal of `sqsafe local up`.
//!
//! The answer says which records come back (`batchItemFailures`, or all of them when the invocation failed); the
//! function's batch metrics line ([`BatchOutcomes`], when the invoker reads the function's output) says how the others
//! ended: applied, replayed, ignored or dead-lettered. A stand-in API's call counter, read before and after the
//! invocation, adds the calls the batch made.
//!
//! ```text
//! charge-payment   4 records: 2 applied, 1 dead-lettered, 1 returned for retry (0.16 s)
//! send-invoice     2 records: 1 applied, 1 replayed; stand-in API 1 call (0.05 s)
//! charge-payment   2 records: invocation failed (the invocation timed out; the function process was killed), all 2 returned for retry (30.00 s)
//! ```

use std::fmt;
use std::sync::Arc;
use std::time::Duration;

use crate::lambda::BatchOutcomes;

/// The longest reason of a failed invocation shown in a line; the whole one is in the function's log.
const MAX_REASON: usize = 80;

/// What one invocation did with its batch.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub struct BatchReport {
    /// The consumer (its function's binary).
    pub consumer: String,
    /// Records in the batch.
    pub records: usize,
    /// How the invocation ended.
    pub ended: Ended,
    /// Calls the consumer's stand-in API received meanwhile, when it has one.
    pub api_calls: Option<usize>,
    /// From the invocation to its answer.
    pub took: Duration,
}

/// How an invocation ended.
#[derive(Debug, Clone, PartialEq)]
pub enum Ended {
    /// The function answered, naming `returned` records in `batchItemFailures`: they come back after their
    /// visibility timeout, the others are deleted.
    Answered {
        /// Records named in `batchItemFailures`.
        returned: usize,
        /// What the function's batch metrics line counted, when read.
        outcomes: Option<BatchOutcomes>,
    },
    /// The invocation failed as a whole (a crash, a timeout, a function error, an identifier not in the batch):
    /// every record comes back.
    Failed(String),
}

impl BatchReport {
    /// A report of an invocation of `records` records.
    pub fn new(consumer: impl Into<String>, records: usize, ended: Ended, took: Duration) -> Self {
        Self {
            consumer: consumer.into(),
            records,
            ended,
            api_calls: None,
            took,
        }
    }

    /// With the calls the consumer's stand-in API received.
    pub fn with_api_calls(mut self, calls: usize) -> Self {
        self.api_calls = Some(calls);
        self
    }

    /// How the records ended, as `(count, what)` in the order printed; counts of zero are left out.
    pub fn parts(&self) -> Vec<(usize, &'static str)> {
        let (returned, outcomes) = match &self.ended {
            Ended::Failed(_) => return vec![(self.records, "returned for retry")],
            Ended::Answered { returned, outcomes } => (*returned, outcomes),
        };
        let acknowledged = self.records.saturating_sub(returned);
        let mut parts = Vec::new();
        let mut told = 0;
        if let Some(o) = outcomes {
            for (n, what) in [
                (o.applied, "applied"),
                (o.replayed, "replayed"),
                (o.ignored, "ignored"),
                (o.dead_lettered, "dead-lettered"),
            ] {
                let n = usize::try_from(n).unwrap_or(usize::MAX);
                parts.push((n, what));
                told += n;
            }
        }
        // Deleted records the function's own counts do not cover (or all of them, without counts).
        let other = if outcomes.is_some() {
            "acknowledged otherwise"
        } else {
            "acknowledged"
        };
        parts.push((acknowledged.saturating_sub(told), other));
        parts.push((returned, "returned for retry"));
        parts.retain(|(n, _)| *n > 0);
        parts
    }
}

impl fmt::Display for BatchReport {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{:<16} {} record{}: ",
            self.consumer,
            self.records,
            plural(self.records)
        )?;
        let parts: Vec<String> = self
            .parts()
            .into_iter()
            .map(|(n, what)| format!("{n} {what}"))
            .collect();
        match &self.ended {
            Ended::Failed(reason) => write!(
                f,
                "invocation failed ({}), all {} returned for retry",
                short(reason),
                self.records
            )?,
            Ended::Answered { .. } if parts.is_empty() => f.write_str("none")?,
            Ended::Answered { .. } => f.write_str(&parts.join(", "))?,
        }
        if let Some(calls) = self.api_calls {
            write!(f, "; stand-in API {calls} call{}", plural(calls))?;
        }
        write!(f, " ({:.2} s)", self.took.as_secs_f64())
    }
}

/// Where a mapping's reports go, and the stand-in API whose calls they count.
#[derive(Clone)]
pub struct Reports {
    consumer: String,
    sink: Arc<dyn Fn(&BatchReport) + Send + Sync>,
    calls: Option<Arc<dyn Fn() -> usize + Send + Sync>>,
}

impl fmt::Debug for Reports {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Reports")
            .field("consumer", &self.consumer)
            .field("calls", &self.calls.is_some())
            .finish_non_exhaustive()
    }
}

impl Reports {
    /// Reports of `consumer`'s batches, each given to `sink`.
    pub fn new(
        consumer: impl Into<String>,
        sink: impl Fn(&BatchReport) + Send + Sync + 'static,
    ) -> Self {
        Self {
            consumer: consumer.into(),
            sink: Arc::new(sink),
            calls: None,
        }
    }

    /// Reports printed on stdout, a line each.
    pub fn printed(consumer: impl Into<String>) -> Self {
        Self::new(consumer, |report| println!("{report}"))
    }

    /// With the calls counted by `counter` (the calls a stand-in API has received so far) during each invocation.
    /// Mappings that share the counter (several pollers of one consumer) may count each other's calls.
    pub fn with_calls(mut self, counter: impl Fn() -> usize + Send + Sync + 'static) -> Self {
        self.calls = Some(Arc::new(counter));
        self
    }

    /// The consumer named in the reports.
    pub fn consumer(&self) -> &str {
        &self.consumer
    }

    /// The call counter now, when there is one.
    pub(super) fn calls_now(&self) -> Option<usize> {
        self.calls.as_ref().map(|count| count())
    }

    /// Gives `report` to the sink, with the calls made since `calls_before`.
    pub(super) fn send(&self, report: BatchReport, calls_before: Option<usize>) {
        let report = match (calls_before, self.calls_now()) {
            (Some(before), Some(after)) => report.with_api_calls(after.saturating_sub(before)),
            _ => report,
        };
        (self.sink)(&report);
    }
}

fn plural(n: usize) -> &'static str {
    if n == 1 { "" } else { "s" }
}

/// The first line of `reason`, cut to [`MAX_REASON`] characters.
fn short(reason: &str) -> String {
    let line = reason.lines().next().unwrap_or_default().trim();
    if line.chars().count() <= MAX_REASON {
        return line.to_owned();
    }
    let cut: String = line.chars().take(MAX_REASON).collect();
    format!("{cut}…")
}

#[cfg(test)]
mod tests {
    use std::sync::Mutex;

    use super::*;

    fn outcomes(applied: u64, replayed: u64, dead_lettered: u64) -> Option<BatchOutcomes> {
        Some(BatchOutcomes {
            received: applied + replayed + dead_lettered,
            applied,
            replayed,
            dead_lettered,
            ..BatchOutcomes::default()
        })
    }

    fn answered(records: usize, returned: usize, outcomes: Option<BatchOutcomes>) -> BatchReport {
        BatchReport::new(
            "charge-payment",
            records,
            Ended::Answered { returned, outcomes },
            Duration::from_millis(160),
        )
    }

    #[test]
    fn each_record_is_told_once_with_what_the_function_counted() {
        let report = answered(4, 1, outcomes(2, 0, 1));
        assert_eq!(
            report.to_string(),
            "charge-payment   4 records: 2 applied, 1 dead-lettered, 1 returned for retry (0.16 s)"
        );
        assert_eq!(
            answered(2, 0, outcomes(1, 1, 0)).to_string(),
            "charge-payment   2 records: 1 applied, 1 replayed (0.16 s)"
        );
    }

    #[test]
    fn without_the_functions_counts_the_answer_still_tells_deleted_from_returned() {
        assert_eq!(
            answered(3, 1, None).to_string(),
            "charge-payment   3 records: 2 acknowledged, 1 returned for retry (0.16 s)"
        );
        assert_eq!(
            answered(1, 0, None).to_string(),
            "charge-payment   1 record: 1 acknowledged (0.16 s)"
        );
    }

    #[test]
    fn deleted_records_the_counts_miss_are_told_too() {
        // The function counted one of the two records it acknowledged.
        assert_eq!(
            answered(3, 1, outcomes(1, 0, 0)).parts(),
            [
                (1, "applied"),
                (1, "acknowledged otherwise"),
                (1, "returned for retry")
            ]
        );
    }

    #[test]
    fn a_failed_invocation_returns_every_record_with_a_short_reason() {
        let long = format!(
            "Crashed {{ exit: \"signal 9\" }} {}\nsecond line",
            "x".repeat(200)
        );
        let report = BatchReport::new(
            "apply-ledger",
            3,
            Ended::Failed(long),
            Duration::from_millis(20),
        );
        let line = report.to_string();
        assert!(
            line.starts_with(
                "apply-ledger     3 records: invocation failed (Crashed { exit: \"signal 9\" } xxx"
            ),
            "{line}"
        );
        assert!(
            line.ends_with("…), all 3 returned for retry (0.02 s)"),
            "{line}"
        );
        assert!(!line.contains("second line"), "{line}");
        assert_eq!(report.parts(), [(3, "returned for retry")]);
    }

    #[test]
    fn the_calls_are_those_made_during_the_batch() {
        let seen = Arc::new(Mutex::new(Vec::new()));
        let calls = Arc::new(Mutex::new(5));
        let reports = {
            let seen = Arc::clone(&seen);
            let calls = Arc::clone(&calls);
            Reports::new("send-invoice", move |r: &BatchReport| {
                seen.lock().expect("lock").push(r.to_string());
            })
            .with_calls(move || *calls.lock().expect("lock"))
        };
        let before = reports.calls_now();
        *calls.lock().expect("lock") += 2;
        reports.send(
            BatchReport::new(
                reports.consumer(),
                2,
                Ended::Answered {
                    returned: 0,
                    outcomes: outcomes(1, 1, 0),
                },
                Duration::from_millis(50),
            ),
            before,
        );
        assert_eq!(
            *seen.lock().expect("lock"),
            ["send-invoice     2 records: 1 applied, 1 replayed; stand-in API 2 calls (0.05 s)"]
        );
    }
}
