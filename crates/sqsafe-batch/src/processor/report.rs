//! How each record ended, and what that does: acknowledged, reported, dead-lettered, delayed.

use std::time::SystemTime;

use aws_lambda_events::sqs::{SqsBatchResponse, SqsMessage};
use aws_lambda_events::streams::{
    DynamoDbBatchItemFailure, DynamoDbEventResponse, KinesisBatchItemFailure, KinesisEventResponse,
};

use sqsafe_telemetry::{BatchMetrics, Metric};

use super::budget::{visibility_until, within};
use super::config::BatchProcessor;
use crate::dlq::FailureContext;
use crate::error::{RecordError, class_name};
use crate::record::{Processed, receive_count};

/// What happened to one record.
#[derive(Debug)]
pub enum Disposition {
    /// Handled: acknowledged (deleted by the event source mapping).
    Succeeded(Processed),
    /// Reported in `batchItemFailures`: it comes back after its visibility timeout.
    Retry(RecordError),
    /// Sent to the dead-letter queue with its context, then acknowledged.
    DeadLettered(RecordError),
    /// FIFO: an earlier record of its group was reported (it failed, or was not started for lack of time), so this
    /// one was not run and is reported too ("held back"), keeping the group's order on redelivery.
    SkippedAfterGroupFailure,
}

impl Disposition {
    /// `true` when the record is in `batchItemFailures`.
    pub fn is_reported(&self) -> bool {
        matches!(
            self,
            Disposition::Retry(_) | Disposition::SkippedAfterGroupFailure
        )
    }
}

/// One record's result.
#[derive(Debug)]
pub struct RecordReport {
    /// Its message id.
    pub message_id: String,
    /// What happened.
    pub disposition: Disposition,
}

/// A processed batch: the response for Lambda, each record's disposition, and the counters.
#[derive(Debug)]
pub struct BatchReport {
    /// What to return to Lambda.
    pub response: SqsBatchResponse,
    /// Per record, in the event's order.
    pub records: Vec<RecordReport>,
    /// The batch's counters.
    pub metrics: BatchMetrics,
}

impl BatchReport {
    /// The answer to a Kinesis invocation: each reported record by its sequence number (its message id).
    pub fn kinesis_response(&self) -> KinesisEventResponse {
        let mut response = KinesisEventResponse::default();
        response.batch_item_failures = self
            .reported()
            .map(|id| {
                let mut item = KinesisBatchItemFailure::default();
                item.item_identifier = Some(id);
                item
            })
            .collect();
        response
    }

    /// The answer to a DynamoDB Streams invocation: each reported record by its sequence number.
    pub fn dynamodb_response(&self) -> DynamoDbEventResponse {
        let mut response = DynamoDbEventResponse::default();
        response.batch_item_failures = self
            .reported()
            .map(|id| {
                let mut item = DynamoDbBatchItemFailure::default();
                item.item_identifier = Some(id);
                item
            })
            .collect();
        response
    }

    fn reported(&self) -> impl Iterator<Item = String> + '_ {
        self.response
            .batch_item_failures
            .iter()
            .map(|f| f.item_identifier.clone())
    }
}

impl BatchProcessor {
    /// Decides where a failed record goes, and logs it once. The calls it makes end before the deadline
    /// ([`call_budget`](Self::call_budget)): a DLQ send cut there leaves the record to come back (reported, not
    /// lost), a visibility change cut there leaves the queue's own timeout.
    pub(super) async fn dispose(
        &self,
        message: &SqsMessage,
        message_id: &str,
        correlation_id: &str,
        error: RecordError,
        deadline: Option<SystemTime>,
        metrics: &BatchMetrics,
    ) -> Disposition {
        let attempts = receive_count(message);
        // A stream record has no receive count: its retries are the event source mapping's (`MaximumRetryAttempts`),
        // never counted here.
        let exhausted = error.is_retryable()
            && attempts >= self.max_attempts
            && !crate::stream::is_stream(message);
        metrics.incr(if error.is_retryable() {
            Metric::FailedTransient
        } else {
            Metric::FailedPermanent
        });
        if error.kind() == RecordError::LEASE_LOST {
            metrics.incr(Metric::LeaseLost);
        }
        let class = class_name(error.class());
        if !error.is_retryable() || exhausted {
            if let Some(dlq) = &self.dlq {
                let failure = FailureContext {
                    message_id: message_id.to_owned(),
                    error_kind: error.kind().to_owned(),
                    error_class: error.class(),
                    error_message: error.message().to_owned(),
                    attempts,
                    consumer: self.consumer.clone(),
                    consumer_version: self.consumer_version,
                    correlation_id: correlation_id.to_owned(),
                };
                match within(
                    self.call_budget(deadline),
                    dlq.send_boxed(message, &failure),
                )
                .await
                {
                    Ok(()) => {
                        metrics.dead_lettered(error.kind());
                        tracing::error!(
                            error_kind = error.kind(),
                            error_class = class,
                            attempts,
                            exhausted,
                            error = error.message(),
                            disposition = "dead_lettered",
                            "record failed"
                        );
                        return Disposition::DeadLettered(error);
                    }
                    Err(send_error) => {
                        tracing::error!(error_kind = error.kind(), error_class = class, attempts,
                            error = error.message(), dlq_error = %send_error, disposition = "retry",
                            "record failed and could not be dead-lettered; reporting it so it comes back");
                        return Disposition::Retry(error);
                    }
                }
            }
        } else if let (Some(control), Some(receipt)) =
            (&self.visibility, message.receipt_handle.as_deref())
        {
            // A key held elsewhere comes back when its lease ends (not sooner: that would spend a receive for
            // nothing); other failures after the backoff, when one is set.
            let delay = match error.retry_not_before() {
                Some(at) => Some(visibility_until(at, self.clock.now())),
                None => self.backoff.as_ref().map(|b| b.delay(attempts)),
            };
            if let Some(delay) = delay
                && let Err(e) = within(
                    self.call_budget(deadline),
                    control.set_visibility_boxed(receipt, delay),
                )
                .await
            {
                tracing::warn!(error = %e, delay_s = delay.as_secs(),
                    "could not change the message's visibility; the queue's timeout applies");
            }
        }
        if error.kind() == RecordError::LEASE_LOST {
            tracing::error!(
                error_kind = error.kind(),
                error_class = class,
                attempts,
                error = error.message(),
                disposition = "retry",
                "record failed: another attempt took its idempotency key over while it ran (its lease had passed: \
                 a slow effect, or clocks that disagree between instances)"
            );
        } else {
            tracing::warn!(
                error_kind = error.kind(),
                error_class = class,
                attempts,
                error = error.message(),
                disposition = "retry",
                "record failed"
            );
        }
        Disposition::Retry(error)
    }
}
