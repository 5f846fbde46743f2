//! One invocation's batch: checked, run (in parallel, or through the FIFO path), its metrics written.

use std::sync::Arc;
use std::time::{Instant, SystemTime};

use aws_lambda_events::sqs::{BatchItemFailure, SqsBatchResponse, SqsEvent, SqsMessage};

use futures::{FutureExt, StreamExt, stream};
use lambda_runtime::LambdaEvent;
use serde::de::DeserializeOwned;

use sqsafe_telemetry::{BatchMetrics, Metric};
use tracing::Instrument;

use super::budget::epoch_millis;
use super::config::{AllFailedPolicy, BatchProcessor, FifoMode, RecordHandler};
use super::report::{BatchReport, Disposition, RecordReport};

use crate::envelope::{BadEnvelope, Opened};
use crate::error::{BatchError, RecordError};
use crate::stream::StreamBatch;

impl BatchProcessor {
    /// Handles a Lambda invocation: one span for it (request id, cold start), the deadline from its context, the
    /// batch metrics written as one EMF line at the end, whether the batch succeeded or was refused.
    pub async fn handle<H: RecordHandler>(
        &self,
        event: LambdaEvent<SqsEvent>,
        handler: &H,
    ) -> Result<SqsBatchResponse, BatchError> {
        self.handle_report(event, handler)
            .await
            .map(|report| report.response)
    }

    /// [`handle`](Self::handle), returning each record's disposition with the response: what a test of a consumer
    /// asserts (applied, replayed, dead-lettered), where the response alone cannot tell a dead letter from a success.
    pub async fn handle_report<H: RecordHandler>(
        &self,
        event: LambdaEvent<SqsEvent>,
        handler: &H,
    ) -> Result<BatchReport, BatchError> {
        self.invoke(event.context, Input::Sqs(event.payload), handler)
            .await
    }

    /// [`handle_report`](Self::handle_report) for a stream's batch (Kinesis or DynamoDB Streams, see
    /// [`StreamBatch`]): each shard's records run one at a time, in order. The first record of a shard that must
    /// come back (a transient failure, a failure queue out of reach, no time left to start it) is named in
    /// `batchItemFailures` by its sequence number, and no later record of that shard runs in this invocation
    /// ([`Disposition::SkippedAfterGroupFailure`](crate::Disposition::SkippedAfterGroupFailure), not named: Lambda
    /// checkpoints at the lowest sequence number it is given and redelivers everything from there). A permanent
    /// failure goes to the dead-letter queue with the record's content and its [`StreamOrigin`](crate::StreamOrigin),
    /// and the shard goes on. A transient failure is never dead-lettered by counting: a stream record has no receive
    /// count (the mapping's `MaximumRetryAttempts` and `MaximumRecordAgeInSeconds` bound its retries).
    pub async fn handle_stream_report<H: RecordHandler>(
        &self,
        event: LambdaEvent<StreamBatch>,
        handler: &H,
    ) -> Result<BatchReport, BatchError> {
        self.invoke(event.context, Input::Stream(event.payload), handler)
            .await
    }

    /// Refuses an invocation whose event could not be read as a batch ([`StreamBatch::kinesis`] or
    /// [`StreamBatch::dynamodb`] refused it): logged and counted as a refused batch, as a malformed SQS event is.
    /// Returns the error, for the invocation's answer.
    pub async fn refuse(&self, context: lambda_runtime::Context, error: BatchError) -> BatchError {
        match self
            .invoke(context, Input::Refused(error), &|_: crate::Record| async {
                Ok(crate::Processed::Ignored)
            })
            .await
        {
            Err(error) => error,
            Ok(_) => BatchError::MalformedEvent("refused".into()),
        }
    }

    /// One invocation: its span, its deadline, its metrics line (also for a refused batch), its traces flushed.
    async fn invoke<H: RecordHandler>(
        &self,
        context: lambda_runtime::Context,
        input: Input,
        handler: &H,
    ) -> Result<BatchReport, BatchError> {
        let span = sqsafe_telemetry::invocation_span(&context);
        let deadline = self.usable_deadline(context.deadline());
        let report = async move {
            let started = Instant::now();
            let metrics = self.new_metrics();
            let outcome = match input {
                Input::Sqs(event) => self.process_into(event, deadline, handler, &metrics).await,
                Input::Stream(batch) => {
                    self.process_stream_into(batch, deadline, handler, &metrics)
                        .await
                }
                Input::Refused(error) => Err(error),
            };
            if let Err(e) = &outcome {
                metrics.incr(Metric::BatchRefused);
                tracing::error!(error = %e, "batch refused");
            }
            let mut line = Vec::with_capacity(1024);
            if metrics
                .write_to(&mut line, epoch_millis(self.clock.now()), started.elapsed())
                .is_ok()
            {
                (self.metrics_out)(&line);
            }
            outcome.map(|(response, records)| BatchReport {
                response,
                records,
                metrics,
            })
        }
        .instrument(span)
        .await;
        // After the invocation's span has closed, so it goes too; Lambda may freeze the process once we answer. Cut
        // before the deadline: a slow collector costs spans, never the batch's answer.
        sqsafe_telemetry::traces::flush(deadline, self.clock.now()).await;
        report
    }

    /// Parses a message's payload as a record of this processor would ([`Record::parse_with_raw`](crate::Record::parse_with_raw), behind the
    /// envelope): for a handler that reads a batch's payloads before its records run (the keyed mode keys them all
    /// to read their idempotency records in one request). `Ok(None)`: not an event for the handler. Errors are the
    /// record's own (`bad_envelope`, `bad_payload`, `missing_body`), which it reports again when it runs.
    pub fn parse_message<T: DeserializeOwned>(
        &self,
        message: &SqsMessage,
    ) -> Result<Option<(T, serde_json::Value)>, RecordError> {
        let body = || {
            message.body.as_deref().ok_or_else(|| {
                RecordError::permanent(RecordError::MISSING_BODY, "the message has no body")
            })
        };
        match self
            .envelope
            .open(body()?, self.correlation.attribute_name())
        {
            Ok(None) => crate::record::parse_with_raw(None, body).map(Some),
            Ok(Some(Opened::Payload { payload, .. })) => {
                crate::record::parse_with_raw(Some(&payload), body).map(Some)
            }
            Ok(Some(Opened::NotAnEvent(_))) => Ok(None),
            Err(BadEnvelope(why)) => Err(RecordError::permanent(RecordError::BAD_ENVELOPE, why)),
        }
    }

    pub(super) fn new_metrics(&self) -> BatchMetrics {
        BatchMetrics::new(self.metrics_namespace.clone(), self.consumer.clone())
    }

    /// Processes a batch.
    pub async fn process<H: RecordHandler>(
        &self,
        event: SqsEvent,
        deadline: Option<SystemTime>,
        handler: &H,
    ) -> Result<BatchReport, BatchError> {
        let metrics = self.new_metrics();
        let (response, records) = self
            .process_into(event, deadline, handler, &metrics)
            .await?;
        Ok(BatchReport {
            response,
            records,
            metrics,
        })
    }

    /// Processes a stream's batch (see [`handle_stream_report`](Self::handle_stream_report)).
    pub async fn process_stream<H: RecordHandler>(
        &self,
        batch: StreamBatch,
        deadline: Option<SystemTime>,
        handler: &H,
    ) -> Result<BatchReport, BatchError> {
        let metrics = self.new_metrics();
        let (response, records) = self
            .process_stream_into(batch, deadline, handler, &metrics)
            .await?;
        Ok(BatchReport {
            response,
            records,
            metrics,
        })
    }

    /// Processes a batch, counting into `metrics` (so that a refused batch is counted too).
    pub(super) async fn process_into<H: RecordHandler>(
        &self,
        event: SqsEvent,
        deadline: Option<SystemTime>,
        handler: &H,
        metrics: &BatchMetrics,
    ) -> Result<(SqsBatchResponse, Vec<RecordReport>), BatchError> {
        metrics.add(Metric::Received, event.records.len() as u64);
        let messages = validate(event)?;
        let fifo = match self.fifo {
            FifoMode::Always => true,
            FifoMode::Never => false,
            FifoMode::Auto => messages.iter().any(|(_, m)| {
                m.event_source_arn
                    .as_deref()
                    .is_some_and(|arn| arn.ends_with(".fifo"))
            }),
        };
        let total = messages.len();
        if fifo {
            self.check_receive_count(total, deadline).await;
        }
        let results: Vec<(usize, RecordReport)> = if fifo {
            self.run_fifo(messages, deadline, handler, metrics, false)
                .await
        } else {
            stream::iter(messages.into_iter().enumerate())
                .map(|(i, (id, m))| {
                    self.run_record(m, id, deadline, handler, metrics)
                        .map(move |r| (i, r))
                })
                .buffer_unordered(self.max_concurrency)
                .collect()
                .await
        };
        self.answer(results, total, |_| true)
    }

    /// Processes a stream's batch (see [`handle_stream_report`](Self::handle_stream_report)), counting into
    /// `metrics`.
    pub(super) async fn process_stream_into<H: RecordHandler>(
        &self,
        batch: StreamBatch,
        deadline: Option<SystemTime>,
        handler: &H,
        metrics: &BatchMetrics,
    ) -> Result<(SqsBatchResponse, Vec<RecordReport>), BatchError> {
        let messages = batch.into_messages();
        metrics.add(Metric::Received, messages.len() as u64);
        let total = messages.len();
        // Ids were checked when the batch was built (a sequence number each).
        let messages = messages
            .into_iter()
            .map(|m| (m.message_id.clone().unwrap_or_default(), Arc::new(m)))
            .collect();
        let results = self
            .run_fifo(messages, deadline, handler, metrics, true)
            .await;
        // Each shard's first record that must come back, and only it: the stream redelivers from there.
        self.answer(results, total, |r| {
            !matches!(r.disposition, Disposition::SkippedAfterGroupFailure)
        })
    }

    /// The records in the event's order and the answer: the reported records that `named` keeps, by id. Every
    /// record reported (named or not) fails the invocation instead under [`AllFailedPolicy::FailInvocation`].
    fn answer(
        &self,
        mut results: Vec<(usize, RecordReport)>,
        total: usize,
        named: impl Fn(&RecordReport) -> bool,
    ) -> Result<(SqsBatchResponse, Vec<RecordReport>), BatchError> {
        results.sort_by_key(|(i, _)| *i);
        let records: Vec<RecordReport> = results.into_iter().map(|(_, r)| r).collect();
        let mut response = SqsBatchResponse::default();
        let mut reported = 0;
        for r in records.iter().filter(|r| r.disposition.is_reported()) {
            reported += 1;
            if named(r) {
                let mut failure = BatchItemFailure::default();
                failure.item_identifier = r.message_id.clone();
                response.batch_item_failures.push(failure);
            }
        }
        if reported == total && self.all_failed == AllFailedPolicy::FailInvocation {
            return Err(BatchError::AllFailed(total));
        }
        Ok((response, records))
    }
}

/// What an invocation hands the processor.
enum Input {
    Sqs(SqsEvent),
    Stream(StreamBatch),
    /// An event that could not be read as a batch.
    Refused(BatchError),
}

/// Every record must have a non-empty message id; an empty batch is not a batch.
pub(super) fn validate(event: SqsEvent) -> Result<Vec<(String, Arc<SqsMessage>)>, BatchError> {
    if event.records.is_empty() {
        return Err(BatchError::MalformedEvent(
            "the event has no records".into(),
        ));
    }
    event
        .records
        .into_iter()
        .enumerate()
        // Blank is missing; anything else is reported exactly as it came (Lambda matches it byte for byte).
        .map(|(i, m)| match m.message_id.as_deref() {
            Some(id) if !id.trim().is_empty() => Ok((id.to_owned(), Arc::new(m))),
            _ => Err(BatchError::MalformedEvent(format!(
                "record {i} has no messageId"
            ))),
        })
        .collect()
}
