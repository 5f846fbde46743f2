//! The processor, its builder and its settings.

use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use sqsafe_idempotency::{Clock, SystemClock};
use sqsafe_telemetry::CorrelationSource;

use crate::dlq::{DeadLetterQueue, DynDeadLetterQueue};
use crate::envelope::Envelope;
use crate::error::{BatchError, RecordError};
use crate::record::{Processed, Record};
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
    pub(super) consumer: String,
    pub(super) consumer_version: u32,
    pub(super) max_concurrency: usize,
    pub(super) fifo: FifoMode,
    pub(super) max_attempts: u32,
    pub(super) all_failed: AllFailedPolicy,
    pub(super) dlq: Option<Arc<dyn DynDeadLetterQueue>>,
    pub(super) visibility: Option<Arc<dyn DynVisibilityControl>>,
    pub(super) backoff: Option<Backoff>,
    pub(super) heartbeat: Option<VisibilityHeartbeat>,
    pub(super) deadline_reserve: Duration,
    pub(super) correlation: CorrelationSource,
    pub(super) envelope: Envelope,
    pub(super) metrics_namespace: String,
    pub(super) metrics_out: Arc<MetricsOut>,
    pub(super) clock: Arc<dyn Clock>,
    /// The queue's `maxReceiveCount`, read once (the receive-count rule for FIFO batches above 1).
    pub(super) max_receive_count: Arc<tokio::sync::OnceCell<Option<u32>>>,
    /// The largest FIFO batch checked against it so far.
    pub(super) receive_count_checked: Arc<std::sync::atomic::AtomicUsize>,
}

/// Where [`BatchProcessor::handle`] writes each invocation's EMF line.
pub(super) type MetricsOut = dyn Fn(&[u8]) + Send + Sync;

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
