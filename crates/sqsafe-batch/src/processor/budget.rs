//! The invocation's deadline: what is still started, and how long each call may take.

use std::future::Future;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use aws_lambda_events::sqs::SqsMessage;

use sqsafe_idempotency::BoxError;

use super::config::BatchProcessor;
use crate::error::RecordError;
use crate::record::receive_count;
use crate::visibility::MAX_VISIBILITY;

impl BatchProcessor {
    /// The invocation's deadline as [`usable_deadline`] reads it.
    pub(super) fn usable_deadline(&self, deadline: SystemTime) -> Option<SystemTime> {
        usable_deadline(deadline, self.clock.now())
    }

    /// A `deadline` error when less than the reserve is left before `deadline`.
    pub(super) fn too_late(&self, deadline: Option<SystemTime>) -> Option<RecordError> {
        let left = deadline?
            .duration_since(self.clock.now())
            .unwrap_or(Duration::ZERO);
        (left < self.deadline_reserve).then(|| {
            RecordError::transient(
                RecordError::DEADLINE,
                format!(
                    "not started: {} ms left before the invocation's deadline, less than the {} ms reserve",
                    left.as_millis(),
                    self.deadline_reserve.as_millis()
                ),
            )
        })
    }

    /// How long a call made while disposing of a record (the DLQ send, the backoff's visibility change) may take:
    /// until [`REPORT_MARGIN`] before the deadline, kept to return the batch's response. `None` when the deadline
    /// is unknown (the SDK's own timeouts bound the call then). Unlike starting a record, which stops at the whole
    /// reserve, a failed record's last calls may use the reserve: a record on its last attempt (a deferred one
    /// included) should reach the DLQ with its context rather than come back to SQS's own redrive without it.
    pub(super) fn call_budget(&self, deadline: Option<SystemTime>) -> Option<Duration> {
        let end = deadline?.checked_sub(REPORT_MARGIN)?;
        Some(
            end.duration_since(self.clock.now())
                .unwrap_or(Duration::ZERO),
        )
    }

    /// The earliest a record reported with `error` is due again, when its visibility is changed for it: the end of
    /// the lease it waits for, or the shortest delay of its backoff. `None`: the queue's visibility timeout applies.
    pub(super) fn retry_floor(
        &self,
        message: &SqsMessage,
        error: &RecordError,
    ) -> Option<Duration> {
        self.visibility.as_ref()?;
        message.receipt_handle.as_ref()?;
        match error.retry_not_before() {
            Some(at) => Some(visibility_until(at, self.clock.now())),
            None => self
                .backoff
                .as_ref()
                .map(|b| b.min_delay(receive_count(message))),
        }
    }
}

/// The invocation's deadline, unless it has passed already at `now` (when the batch or request arrives): Lambda never
/// hands over such an invocation, but emulators do. Such a deadline is unknown, not "no time left": the records run
/// (and a request of `sqsafe::api` is handled as outside Lambda), their leases take the idempotency layer's default,
/// and the deadline reserve does not apply.
///
/// A deadline within a day of the epoch is no clock's reading but an emulator's constant (`cargo lambda watch` sends
/// `Lambda-Runtime-Deadline-Ms: 600000` with every invocation) or a default `Context`'s 0: unknown, and said nothing
/// about. A real point in time already passed (a clock set wrong, an emulator that queued the invocation past its
/// deadline) is warned about, once per process.
pub fn usable_deadline(deadline: SystemTime, now: SystemTime) -> Option<SystemTime> {
    if deadline > now {
        return Some(deadline);
    }
    if deadline <= UNIX_EPOCH + NOT_A_POINT_IN_TIME {
        return None;
    }
    // Said once per process, not per batch.
    static SAID: AtomicBool = AtomicBool::new(false);
    if !SAID.swap(true, Ordering::Relaxed) {
        tracing::warn!(
            deadline_ms = epoch_millis(deadline),
            "the invocation's deadline has already passed: treated as unknown (an emulator's Runtime API?); \
             said once per process"
        );
    }
    None
}

/// Time kept before the invocation's deadline to return the batch's response: a DLQ send or a visibility change
/// still running then is cut (`BatchProcessor::call_budget`).
/// The same margin the span export keeps before the answer (`sqsafe_telemetry::traces::ANSWER_MARGIN`).
pub(super) const REPORT_MARGIN: Duration = sqsafe_telemetry::traces::ANSWER_MARGIN;
/// Deadlines before one day after the epoch are durations or placeholders, not points in time (Lambda's deadline is
/// the invocation's start plus at most 15 minutes).
pub(super) const NOT_A_POINT_IN_TIME: Duration = Duration::from_secs(86_400);

/// Runs `call` within `budget` (see `BatchProcessor::call_budget`): not at all when none is left, cut when it runs
/// out. Either is an error of the call, as if the service had failed it.
pub(super) async fn within(
    budget: Option<Duration>,
    call: impl Future<Output = Result<(), BoxError>>,
) -> Result<(), BoxError> {
    match budget {
        None => call.await,
        Some(left) if left.is_zero() => {
            Err("not made: the invocation's deadline is too near to wait for an answer".into())
        }
        Some(left) => tokio::time::timeout(left, call).await.unwrap_or_else(|_| {
            Err(format!(
                "cut after {} ms, before the invocation's deadline",
                left.as_millis()
            )
            .into())
        }),
    }
}

/// Visibility that makes a message come back just after `at`: whole seconds rounded up, plus one (SQS counts in
/// seconds, and the other attempt's clock may lag ours a little), at most [`MAX_VISIBILITY`].
pub(super) fn visibility_until(at: SystemTime, now: SystemTime) -> Duration {
    let wait = at.duration_since(now).unwrap_or(Duration::ZERO);
    let seconds = wait.as_secs() + u64::from(wait.subsec_nanos() > 0) + 1;
    Duration::from_secs(seconds).min(MAX_VISIBILITY)
}

pub(super) fn epoch_millis(t: SystemTime) -> u64 {
    t.duration_since(UNIX_EPOCH)
        .map(|d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX))
        .unwrap_or(0)
}
