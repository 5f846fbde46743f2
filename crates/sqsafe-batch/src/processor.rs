use std::collections::HashMap;
use std::future::Future;
use std::panic::AssertUnwindSafe;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use aws_lambda_events::sqs::{BatchItemFailure, SqsBatchResponse, SqsEvent, SqsMessage};
use futures::future::FusedFuture;
use futures::{FutureExt, StreamExt, stream};
use lambda_runtime::LambdaEvent;
use serde::de::DeserializeOwned;
use sqsafe_idempotency::{BoxError, Clock, SystemClock};
use sqsafe_telemetry::{
    BatchMetrics, CorrelationId, CorrelationSource, Metric, RecordFields, TraceContext,
};
use tracing::{Instrument, Span};

use crate::dlq::{DeadLetterQueue, DynDeadLetterQueue, FailureContext};
use crate::envelope::{BadEnvelope, Envelope, Opened};
use crate::error::{BatchError, RecordError, class_name};
use crate::record::{Processed, Record, group_id, receive_count};
use crate::visibility::{Backoff, DynVisibilityControl, MAX_VISIBILITY, VisibilityControl};

/// Handles one record. Closures `Fn(Record) -> impl Future<Output = Result<Processed, RecordError>>` are handlers.
pub trait RecordHandler: Send + Sync {
    /// Processes the record: `Ok` acknowledges it; `Err` reports it (transient) or dead-letters it (permanent).
    fn handle(&self, record: Record)
    -> impl Future<Output = Result<Processed, RecordError>> + Send;
}

impl<F, Fut> RecordHandler for F
where
    F: Fn(Record) -> Fut + Send + Sync,
    Fut: Future<Output = Result<Processed, RecordError>> + Send,
{
    fn handle(
        &self,
        record: Record,
    ) -> impl Future<Output = Result<Processed, RecordError>> + Send {
        self(record)
    }
}

/// Whether records run in `MessageGroupId` order.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum FifoMode {
    /// FIFO when the event source ARN names a `.fifo` queue. The default.
    #[default]
    Auto,
    /// Always group by `MessageGroupId` (records without one form a group of their own each).
    Always,
    /// Never: all records run concurrently.
    Never,
}

/// What to do when every record of a batch failed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum AllFailedPolicy {
    /// Report every record in `batchItemFailures` (the invocation succeeds). The default: the ESM's retry and the
    /// redrive policy work per message.
    #[default]
    ReportItems,
    /// Fail the invocation with [`BatchError::AllFailed`]; Lambda's event source mapping counts it as a failed
    /// batch (this can back off the mapping's polling when a dependency is down).
    FailInvocation,
}

/// Keeps a long-running record invisible: every `every`, its visibility timeout is set to `extend_to` from now.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct VisibilityHeartbeat {
    /// Interval between extensions.
    pub every: Duration,
    /// Visibility timeout set at each extension; must exceed `every`.
    pub extend_to: Duration,
}

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

/// Runs the records of an SQS batch through a handler and says which must come back.
///
/// ```
/// use sqsafe_batch::{BatchProcessor, Processed, Record, RecordError};
///
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
/// let processor = BatchProcessor::builder("greeter", 1).build()?;
/// let event: aws_lambda_events::sqs::SqsEvent = serde_json::from_str(
///     r#"{"Records":[{"messageId":"m1","body":"{\"name\":\"Zoë\"}"},{"messageId":"m2","body":"not json"}]}"#,
/// )?;
/// #[derive(serde::Deserialize)]
/// struct Greet { name: String }
/// let handler = |record: Record| async move {
///     let greet: Greet = record.parse()?; // bad body: permanent error, before any effect
///     println!("hello {}", greet.name);
///     Ok::<_, RecordError>(Processed::Applied)
/// };
/// let report = processor.process(event, None, &handler).await?;
/// // No DLQ configured: the poison record is reported, and the queue's redrive policy takes it to the DLQ.
/// assert_eq!(report.response.batch_item_failures.len(), 1);
/// assert_eq!(report.response.batch_item_failures[0].item_identifier, "m2");
/// # Ok(()) }
/// ```
pub struct BatchProcessor {
    consumer: String,
    consumer_version: u32,
    max_concurrency: usize,
    fifo: FifoMode,
    max_attempts: u32,
    all_failed: AllFailedPolicy,
    dlq: Option<Arc<dyn DynDeadLetterQueue>>,
    visibility: Option<Arc<dyn DynVisibilityControl>>,
    backoff: Option<Backoff>,
    heartbeat: Option<VisibilityHeartbeat>,
    deadline_reserve: Duration,
    correlation: CorrelationSource,
    envelope: Envelope,
    metrics_namespace: String,
    metrics_out: Arc<MetricsOut>,
    clock: Arc<dyn Clock>,
    /// The queue's `maxReceiveCount`, read once (the receive-count rule for FIFO batches above 1).
    max_receive_count: Arc<tokio::sync::OnceCell<Option<u32>>>,
    /// The largest FIFO batch checked against it so far.
    receive_count_checked: Arc<std::sync::atomic::AtomicUsize>,
}

/// Where [`BatchProcessor::handle`] writes each invocation's EMF line.
type MetricsOut = dyn Fn(&[u8]) + Send + Sync;

/// Default of [`BatchProcessorBuilder::deadline_reserve`].
pub const DEFAULT_DEADLINE_RESERVE: Duration = Duration::from_secs(2);

/// Builds a [`BatchProcessor`].
///
/// # Default
/// up to 10 records at once; FIFO detected from the event source ARN; 5 attempts before a transient failure is
/// dead-lettered (when a DLQ is set: keep it at or below the queue's `maxReceiveCount`); no DLQ (failures are reported
/// and the queue's redrive policy applies); no backoff; no visibility heartbeat; records not started when less than
/// 2 s ([`DEFAULT_DEADLINE_RESERVE`]) are left before the invocation's deadline; all-failed batches reported item by
/// item; bodies are the payload ([`Envelope::Sqs`]); correlation id from the `correlationId` attribute, else
/// generated; metrics namespace `sqsafe`; system clock.
pub struct BatchProcessorBuilder {
    processor: BatchProcessor,
}

impl BatchProcessor {
    /// Starts building a processor for `consumer` at `consumer_version` (both go into DLQ context and metrics).
    pub fn builder(consumer: impl Into<String>, consumer_version: u32) -> BatchProcessorBuilder {
        BatchProcessorBuilder {
            processor: BatchProcessor {
                consumer: consumer.into(),
                consumer_version,
                max_concurrency: 10,
                fifo: FifoMode::Auto,
                max_attempts: 5,
                all_failed: AllFailedPolicy::ReportItems,
                dlq: None,
                visibility: None,
                backoff: None,
                heartbeat: None,
                deadline_reserve: DEFAULT_DEADLINE_RESERVE,
                correlation: CorrelationSource::new(),
                envelope: Envelope::Sqs,
                metrics_namespace: "sqsafe".to_owned(),
                metrics_out: Arc::new(|line: &[u8]| {
                    use std::io::Write;
                    // Metrics must never fail a batch: a closed stdout loses the line instead of panicking.
                    let _ = std::io::stdout().lock().write_all(line);
                }),
                clock: Arc::new(SystemClock),
                max_receive_count: Arc::new(tokio::sync::OnceCell::new()),
                receive_count_checked: Arc::new(std::sync::atomic::AtomicUsize::new(1)),
            },
        }
    }
}

impl BatchProcessorBuilder {
    /// Most records (standard) or groups (FIFO) in flight at once.
    pub fn max_concurrency(mut self, n: usize) -> Self {
        self.processor.max_concurrency = n;
        self
    }

    /// FIFO detection.
    pub fn fifo(mut self, mode: FifoMode) -> Self {
        self.processor.fifo = mode;
        self
    }

    /// Deliveries after which a transient failure goes to the DLQ instead of coming back.
    pub fn max_attempts(mut self, n: u32) -> Self {
        self.processor.max_attempts = n;
        self
    }

    /// All-failed policy.
    pub fn all_failed(mut self, policy: AllFailedPolicy) -> Self {
        self.processor.all_failed = policy;
        self
    }

    /// Where permanent failures (and exhausted transient ones) go, with their context.
    pub fn dead_letter_queue(mut self, dlq: impl DeadLetterQueue) -> Self {
        self.processor.dlq = Some(Arc::new(dlq));
        self
    }

    /// How to change a message's visibility (needed by [`backoff`](Self::backoff) and
    /// [`visibility_heartbeat`](Self::visibility_heartbeat)).
    pub fn visibility(mut self, control: impl VisibilityControl) -> Self {
        self.processor.visibility = Some(Arc::new(control));
        self
    }

    /// Transient failures come back after a jittered exponential backoff instead of the queue's visibility timeout.
    pub fn backoff(mut self, backoff: Backoff) -> Self {
        self.processor.backoff = Some(backoff);
        self
    }

    /// Keeps long-running records invisible while their handler runs.
    pub fn visibility_heartbeat(mut self, heartbeat: VisibilityHeartbeat) -> Self {
        self.processor.heartbeat = Some(heartbeat);
        self
    }

    /// Time kept free before the invocation's deadline: a record that has not started when less than this is left
    /// is not run. It is reported as a transient `deadline` failure ([`RecordError::DEADLINE`]), so it comes back
    /// (or, on its last attempt, goes to the DLQ with that context) and the invocation ends in time with every record
    /// accounted for; in FIFO, the rest of its group is held back. Counted as `RecordsDeferred`.
    ///
    /// Records already running are not interrupted: keep the reserve above what one record takes when its
    /// dependencies are slow (SDK calls are bounded by `sqsafe_aws::Timeouts`). Applies when the deadline is known
    /// ([`BatchProcessor::handle`], or a deadline given to [`BatchProcessor::process`]); time comes from the
    /// processor's [`clock`](Self::clock).
    ///
    /// # Default
    /// 2 s ([`DEFAULT_DEADLINE_RESERVE`]).
    pub fn deadline_reserve(mut self, reserve: Duration) -> Self {
        self.processor.deadline_reserve = reserve;
        self
    }

    /// Where correlation ids come from.
    pub fn correlation(mut self, source: CorrelationSource) -> Self {
        self.processor.correlation = source;
        self
    }

    /// What the message bodies wrap (an SNS notification, an EventBridge event, an S3 notification): each record's
    /// payload is taken out before the handler runs ([`Record::parse`] reads it), the correlation id the envelope
    /// carries is used when the message has no `correlationId` attribute, and a body that is not this envelope is a
    /// permanent `bad_envelope` error. See [`Envelope`].
    pub fn envelope(mut self, envelope: Envelope) -> Self {
        self.processor.envelope = envelope;
        self
    }

    /// CloudWatch namespace of the batch metrics.
    pub fn metrics_namespace(mut self, namespace: impl Into<String>) -> Self {
        self.processor.metrics_namespace = namespace.into();
        self
    }

    /// Where each invocation's EMF line goes (one JSON document and a newline).
    ///
    /// # Default
    /// Standard output, where CloudWatch Logs picks it up (tests capture it here).
    pub fn metrics_output(mut self, out: impl Fn(&[u8]) + Send + Sync + 'static) -> Self {
        self.processor.metrics_out = Arc::new(out);
        self
    }

    /// Replaces the clock (the deadline reserve, visibility until a lease ends, metric timestamps).
    pub fn clock(mut self, clock: impl Clock) -> Self {
        self.processor.clock = Arc::new(clock);
        self
    }

    /// Checks the settings and builds.
    pub fn build(self) -> Result<BatchProcessor, BatchError> {
        let p = self.processor;
        let fail = |m: &str| Err(BatchError::Config(m.to_owned()));
        if p.consumer.trim().is_empty() {
            return fail("consumer name is empty");
        }
        if p.max_concurrency == 0 {
            return fail("max_concurrency must be at least 1");
        }
        if p.max_attempts == 0 {
            return fail("max_attempts must be at least 1");
        }
        if (p.backoff.is_some() || p.heartbeat.is_some()) && p.visibility.is_none() {
            return fail(
                "backoff and visibility_heartbeat need a visibility control (.visibility(SqsVisibility::new(..)))",
            );
        }
        if let Some(h) = p.heartbeat
            && (h.every.is_zero() || h.extend_to <= h.every || h.extend_to > MAX_VISIBILITY)
        {
            return fail("visibility heartbeat needs 0 < every < extend_to <= 12 h");
        }
        Ok(p)
    }
}

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
        let span = sqsafe_telemetry::invocation_span(&event.context);
        let deadline = self.usable_deadline(event.context.deadline());
        let report = async move {
            let started = Instant::now();
            let metrics = self.new_metrics();
            let outcome = self
                .process_into(event.payload, deadline, handler, &metrics)
                .await;
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

    /// Parses a message's payload as a record of this processor would ([`Record::parse_with_raw`], behind the
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

    fn new_metrics(&self) -> BatchMetrics {
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

    /// Processes a batch, counting into `metrics` (so that a refused batch is counted too).
    async fn process_into<H: RecordHandler>(
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
        let mut results: Vec<(usize, RecordReport)> = if fifo {
            self.run_fifo(messages, deadline, handler, metrics).await
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
        results.sort_by_key(|(i, _)| *i);
        let records: Vec<RecordReport> = results.into_iter().map(|(_, r)| r).collect();
        let mut response = SqsBatchResponse::default();
        for r in records.iter().filter(|r| r.disposition.is_reported()) {
            let mut failure = BatchItemFailure::default();
            failure.item_identifier = r.message_id.clone();
            response.batch_item_failures.push(failure);
        }
        let reported = response.batch_item_failures.len();
        if reported == total && self.all_failed == AllFailedPolicy::FailInvocation {
            return Err(BatchError::AllFailed(total));
        }
        Ok((response, records))
    }

    async fn run_fifo<H: RecordHandler>(
        &self,
        messages: Vec<(String, Arc<SqsMessage>)>,
        deadline: Option<SystemTime>,
        handler: &H,
        metrics: &BatchMetrics,
    ) -> Vec<(usize, RecordReport)> {
        // Groups in order of first appearance; records in event order within a group.
        let mut groups: Vec<Vec<(usize, String, Arc<SqsMessage>)>> = Vec::new();
        let mut index: HashMap<String, usize> = HashMap::new();
        for (i, (id, m)) in messages.into_iter().enumerate() {
            match group_id(&m).map(str::to_owned) {
                Some(g) => {
                    let slot = *index.entry(g).or_insert_with(|| {
                        groups.push(Vec::new());
                        groups.len() - 1
                    });
                    groups[slot].push((i, id, m));
                }
                None => groups.push(vec![(i, id, m)]),
            }
        }
        let per_group = groups.into_iter().map(|group| async move {
            let mut out = Vec::with_capacity(group.len());
            // The reported record the rest of the group waits behind, and when it is due again at the earliest.
            let mut blocked: Option<(String, Option<Duration>)> = None;
            for (i, id, m) in group {
                if let Some((first, due)) = &blocked {
                    metrics.incr(Metric::HeldBack);
                    // Not opened (its envelope is read when it runs): the span has the SQS attribute's id, else a
                    // new one.
                    let (span, _, _) = self.record_span(&m, &id, receive_count(&m), None);
                    span.in_scope(|| {
                        tracing::warn!(blocked_by = %first, disposition = "held_back",
                            "not run: an earlier message of its group was reported; reported too, to keep the group's order");
                    });
                    // Due with the failed record, not after the queue's visibility timeout: the group resumes when
                    // it does (SQS delivers no later message of a group while an earlier one is in flight).
                    if let (Some(due), Some(control), Some(receipt)) =
                        (due, &self.visibility, m.receipt_handle.as_deref())
                        && let Err(e) = within(
                            self.call_budget(deadline),
                            control.set_visibility_boxed(receipt, *due),
                        )
                        .instrument(span.clone())
                        .await
                    {
                        span.in_scope(|| {
                            tracing::warn!(error = %e, delay_s = due.as_secs(),
                                "could not change the held-back message's visibility; the queue's timeout applies");
                        });
                    }
                    out.push((i, RecordReport { message_id: id, disposition: Disposition::SkippedAfterGroupFailure }));
                    continue;
                }
                let kept = Arc::clone(&m);
                let report = self.run_record(m, id, deadline, handler, metrics).await;
                if report.disposition.is_reported() {
                    let due = match &report.disposition {
                        Disposition::Retry(error) => self.retry_floor(&kept, error),
                        _ => None,
                    };
                    blocked = Some((report.message_id.clone(), due));
                }
                out.push((i, report));
            }
            out
        });
        stream::iter(per_group)
            .buffer_unordered(self.max_concurrency)
            .flat_map(stream::iter)
            .collect()
            .await
    }

    /// The invocation's deadline, unless it has passed already when the batch arrives: Lambda never hands over such
    /// an invocation, but emulators do. Such a deadline is unknown, not "no time left": the records run, their
    /// leases take the idempotency layer's default, and the deadline reserve does not apply.
    ///
    /// A deadline within [`NOT_A_POINT_IN_TIME`] of the epoch is no clock's reading but an emulator's constant
    /// (`cargo lambda watch` sends `Lambda-Runtime-Deadline-Ms: 600000` with every invocation) or a default
    /// `Context`'s 0: unknown, and said nothing about. A real point in time already passed (a clock set wrong, an
    /// emulator that queued the invocation past its deadline) is warned about, once per process.
    fn usable_deadline(&self, deadline: SystemTime) -> Option<SystemTime> {
        if deadline > self.clock.now() {
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

    /// The record's span, with its correlation id (`carried`: the one the envelope carried) and its producer's trace
    /// context, when the message carried one.
    fn record_span(
        &self,
        message: &SqsMessage,
        message_id: &str,
        receive_count: u32,
        carried: Option<&str>,
    ) -> (Span, CorrelationId, Option<TraceContext>) {
        let correlation = self.correlation.extract_with(message, carried);
        let arn = message.event_source_arn.as_deref().unwrap_or_default();
        let trace = TraceContext::of_message(message);
        let span = sqsafe_telemetry::record_span(&RecordFields {
            message_id,
            correlation_id: correlation.as_str(),
            receive_count,
            queue: sqsafe_telemetry::queue_name(arn).unwrap_or_default(),
            group_id: group_id(message),
            producer_trace_id: trace.as_ref().map(TraceContext::trace_id),
        });
        (span, correlation, trace)
    }

    /// A `deadline` error when less than the reserve is left before `deadline`.
    fn too_late(&self, deadline: Option<SystemTime>) -> Option<RecordError> {
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

    async fn run_record<H: RecordHandler>(
        &self,
        message: Arc<SqsMessage>,
        message_id: String,
        deadline: Option<SystemTime>,
        handler: &H,
        metrics: &BatchMetrics,
    ) -> RecordReport {
        let receive_count = receive_count(&message);
        // The envelope is opened once, here: its correlation id goes on the span, its payload to the handler.
        let opened = match message.body.as_deref() {
            Some(body) => self.envelope.open(body, self.correlation.attribute_name()),
            None => Ok(None),
        };
        let carried = match &opened {
            Ok(Some(Opened::Payload { correlation_id, .. })) => correlation_id.as_deref(),
            _ => None,
        };
        let (span, correlation, trace) =
            self.record_span(&message, &message_id, receive_count, carried);
        let (payload, not_run) = match opened {
            Ok(None) => (None, None),
            Ok(Some(Opened::Payload { payload, .. })) => (Some(Arc::new(payload)), None),
            Ok(Some(Opened::NotAnEvent(what))) => (None, Some(Ok(what))),
            Err(BadEnvelope(why)) => (
                None,
                Some(Err(RecordError::permanent(RecordError::BAD_ENVELOPE, why))),
            ),
        };
        let record = Record::new(
            Arc::clone(&message),
            message_id.clone(),
            correlation,
            receive_count,
            deadline,
            span.clone(),
            trace,
        )
        .with_payload(payload);
        async move {
            let correlation_id = record.correlation_id().as_str().to_owned();
            // Checked when the record starts (not when the batch does): earlier records may have used the time up.
            let outcome = match (not_run, self.too_late(deadline)) {
                (Some(Ok(what)), _) => {
                    tracing::info!(
                        event = what,
                        "not an event: acknowledged, the handler not run"
                    );
                    Ok(Processed::Ignored)
                }
                (Some(Err(bad)), _) => Err(bad),
                (None, Some(late)) => {
                    metrics.incr(Metric::Deferred);
                    Err(late)
                }
                // Boxed, here and for `dispose`: the record's future stays small, so it is cheap to move into
                // the batch's set of running records (the handler's future and a DLQ send are kilobytes).
                (None, None) => Box::pin(self.run_handler(&message, record, handler)).await,
            };
            let disposition = match outcome {
                Ok(processed) => {
                    metrics.incr(match processed {
                        Processed::Applied => Metric::Processed,
                        Processed::Replayed => Metric::Replayed,
                        Processed::SkippedByCache => Metric::SkippedByCache,
                        Processed::Ignored => Metric::Ignored,
                    });
                    Disposition::Succeeded(processed)
                }
                Err(error) => {
                    Box::pin(self.dispose(
                        &message,
                        &message_id,
                        &correlation_id,
                        error,
                        deadline,
                        metrics,
                    ))
                    .await
                }
            };
            RecordReport {
                message_id,
                disposition,
            }
        }
        .instrument(span)
        .await
    }

    /// Runs the handler; a panic becomes a transient `panic` failure of this record only.
    async fn run_handler<H: RecordHandler>(
        &self,
        message: &SqsMessage,
        record: Record,
        handler: &H,
    ) -> Result<Processed, RecordError> {
        let work = AssertUnwindSafe(handler.handle(record)).catch_unwind();
        let caught = match (
            self.heartbeat,
            &self.visibility,
            message.receipt_handle.as_deref(),
        ) {
            (Some(heartbeat), Some(control), Some(receipt)) => {
                // A beat's call runs beside the work, not instead of it: the work is polled while the call is in
                // flight, and work that finishes meanwhile is reported at once. The next beat is timed from the end
                // of the last one.
                let mut work = std::pin::pin!(work);
                let mut beat = std::pin::pin!(futures::future::Fuse::terminated());
                let mut wait = std::pin::pin!(tokio::time::sleep(heartbeat.every));
                loop {
                    tokio::select! {
                        biased;
                        out = &mut work => break out,
                        changed = &mut beat, if !beat.is_terminated() => {
                            let changed: Result<(), BoxError> = changed;
                            if let Err(e) = changed {
                                tracing::warn!(error = %e, "visibility heartbeat failed");
                            }
                            wait.as_mut().reset(tokio::time::Instant::now() + heartbeat.every);
                        }
                        () = &mut wait, if beat.is_terminated() => {
                            beat.set(control.set_visibility_boxed(receipt, heartbeat.extend_to).fuse());
                        }
                    }
                }
            }
            _ => work.await,
        };
        caught.unwrap_or_else(|panic| {
            let what = panic
                .downcast_ref::<&str>()
                .map(|s| (*s).to_owned())
                .or_else(|| panic.downcast_ref::<String>().cloned())
                .unwrap_or_else(|| "non-string panic payload".to_owned());
            Err(RecordError::transient(
                RecordError::PANIC,
                format!("handler panicked: {what}"),
            ))
        })
    }

    /// The book's receive-count rule (book/src/deploy.md, FIFO queues) for a FIFO batch of `size` records, checked
    /// once per larger size: a record held back behind failing ones of its group spends a receive each time, so the
    /// queue's `maxReceiveCount` must be at least `size × (max_attempts − 1) + 1` for every record to get its
    /// `max_attempts` real tries. Read from the queue when the visibility control can (SQS: its redrive policy),
    /// within the call budget; a warning names the numbers. Nothing else changes.
    async fn check_receive_count(&self, size: usize, deadline: Option<SystemTime>) {
        if self
            .receive_count_checked
            .fetch_max(size, Ordering::Relaxed)
            >= size
        {
            return;
        }
        let Some(control) = &self.visibility else {
            return;
        };
        let budget = self.call_budget(deadline).unwrap_or(Duration::from_secs(5));
        let read = self
            .max_receive_count
            .get_or_init(|| async {
                match tokio::time::timeout(budget, control.max_receive_count_boxed()).await {
                    Ok(Ok(count)) => count,
                    Ok(Err(e)) => {
                        tracing::debug!(error = %e, "the queue's maxReceiveCount could not be read");
                        None
                    }
                    Err(_) => None,
                }
            })
            .await;
        let Some(max_receive_count) = *read else {
            return;
        };
        let needed = u64::try_from(size)
            .unwrap_or(u64::MAX)
            .saturating_mul(u64::from(self.max_attempts.saturating_sub(1)))
            .saturating_add(1);
        if u64::from(max_receive_count) < needed {
            tracing::warn!(
                batch_size = size,
                max_attempts = self.max_attempts,
                max_receive_count,
                needed,
                "FIFO batch of {size} records: a record held back behind failing ones of its group spends a receive \
                 each time, so with max attempts {} the queue's maxReceiveCount ({max_receive_count}) should be at \
                 least {needed} (batch size x (max attempts - 1) + 1), or the mapping's BatchSize 1; otherwise \
                 held-back records reach the DLQ before their real tries (said once per batch size)",
                self.max_attempts
            );
        }
    }

    /// The earliest a record reported with `error` is due again, when its visibility is changed for it: the end of
    /// the lease it waits for, or the shortest delay of its backoff. `None`: the queue's visibility timeout applies.
    fn retry_floor(&self, message: &SqsMessage, error: &RecordError) -> Option<Duration> {
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

    /// How long a call made while disposing of a record (the DLQ send, the backoff's visibility change) may take:
    /// until [`REPORT_MARGIN`] before the deadline, kept to return the batch's response. `None` when the deadline
    /// is unknown (the SDK's own timeouts bound the call then). Unlike starting a record, which stops at the whole
    /// reserve, a failed record's last calls may use the reserve: a record on its last attempt (a deferred one
    /// included) should reach the DLQ with its context rather than come back to SQS's own redrive without it.
    fn call_budget(&self, deadline: Option<SystemTime>) -> Option<Duration> {
        let end = deadline?.checked_sub(REPORT_MARGIN)?;
        Some(
            end.duration_since(self.clock.now())
                .unwrap_or(Duration::ZERO),
        )
    }

    /// Decides where a failed record goes, and logs it once. The calls it makes end before the deadline
    /// ([`call_budget`](Self::call_budget)): a DLQ send cut there leaves the record to come back (reported, not
    /// lost), a visibility change cut there leaves the queue's own timeout.
    async fn dispose(
        &self,
        message: &SqsMessage,
        message_id: &str,
        correlation_id: &str,
        error: RecordError,
        deadline: Option<SystemTime>,
        metrics: &BatchMetrics,
    ) -> Disposition {
        let attempts = receive_count(message);
        let exhausted = error.is_retryable() && attempts >= self.max_attempts;
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

/// Time kept before the invocation's deadline to return the batch's response: a DLQ send or a visibility change
/// still running then is cut (`BatchProcessor::call_budget`).
/// The same margin the span export keeps before the answer (`sqsafe_telemetry::traces::ANSWER_MARGIN`).
const REPORT_MARGIN: Duration = sqsafe_telemetry::traces::ANSWER_MARGIN;
/// Deadlines before one day after the epoch are durations or placeholders, not points in time (Lambda's deadline is
/// the invocation's start plus at most 15 minutes).
const NOT_A_POINT_IN_TIME: Duration = Duration::from_secs(86_400);

/// Runs `call` within `budget` (see `BatchProcessor::call_budget`): not at all when none is left, cut when it runs
/// out. Either is an error of the call, as if the service had failed it.
async fn within(
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

/// Every record must have a non-empty message id; an empty batch is not a batch.
fn validate(event: SqsEvent) -> Result<Vec<(String, Arc<SqsMessage>)>, BatchError> {
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

/// Visibility that makes a message come back just after `at`: whole seconds rounded up, plus one (SQS counts in
/// seconds, and the other attempt's clock may lag ours a little), at most [`MAX_VISIBILITY`].
fn visibility_until(at: SystemTime, now: SystemTime) -> Duration {
    let wait = at.duration_since(now).unwrap_or(Duration::ZERO);
    let seconds = wait.as_secs() + u64::from(wait.subsec_nanos() > 0) + 1;
    Duration::from_secs(seconds).min(MAX_VISIBILITY)
}

fn epoch_millis(t: SystemTime) -> u64 {
    t.duration_since(UNIX_EPOCH)
        .map(|d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX))
        .unwrap_or(0)
}
