//! One batch of the outbox table's stream: each new outbox item published to its queue and marked sent, in the
//! shard's order. A retryable failure is retried within the invocation, then stops the batch: it and every later
//! record are reported. A permanent one goes to the failure queue at once and the shard moves on.

use std::collections::{BTreeSet, HashMap};
use std::panic::AssertUnwindSafe;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use aws_lambda_events::dynamodb::{Event, EventRecord};
use aws_lambda_events::streams::{DynamoDbBatchItemFailure, DynamoDbEventResponse};
use aws_sdk_dynamodb::types::AttributeValue;
use futures::FutureExt;
use lambda_runtime::LambdaEvent;
use sqsafe_outbox::{Marked, OutboxRecord, Relay};
use tracing::Instrument;
use tracing::field::Empty;

use crate::settings::Settings;

/// The relay function: publishes the outbox events a DynamoDB stream batch carries.
#[derive(Debug, Clone)]
pub struct OutboxRelay {
    relay: Relay,
    retry: RetryPolicy,
    failures: Option<FailureQueue>,
}

/// How a retryable failure (throttling, a timeout, a 5xx, a queue briefly gone) is retried inside one invocation,
/// before the record is reported to the stream mapping (which retries it as long as the stream holds it).
///
/// # Default
/// 100 ms before the second try, doubling up to 2 s, and no try started less than 3 s before the invocation's
/// deadline (the time kept to report the batch).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RetryPolicy {
    /// The wait before the second try.
    pub first_delay: Duration,
    /// The longest wait between two tries.
    pub max_delay: Duration,
    /// No try starts, and no wait ends, later than this before the deadline.
    pub reserve: Duration,
}

impl Default for RetryPolicy {
    fn default() -> Self {
        Self {
            first_delay: Duration::from_millis(100),
            max_delay: Duration::from_secs(2),
            reserve: Duration::from_secs(3),
        }
    }
}

/// Where a permanent failure's details go (template.yaml: the stream mapping's on-failure queue).
#[derive(Debug, Clone)]
struct FailureQueue {
    sqs: aws_sdk_sqs::Client,
    url: String,
}

/// What happened to one stream record.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RecordOutcome {
    /// An outbox event, published and then marked.
    Relayed {
        /// The event id.
        event_id: String,
        /// The SQS message id of this publication.
        message_id: String,
        /// What marking the item found.
        marked: Marked,
    },
    /// Not the relay's business; nothing was sent.
    Ignored(Ignored),
}

/// Why a stream record was ignored.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Ignored {
    /// A `MODIFY` (the relay's own mark, or any update) or `REMOVE` (a delete, or TTL removing a sent item): only
    /// the `INSERT` of an outbox item is an event to publish.
    NotAnInsert,
    /// An `INSERT` of an item that is not an outbox event (a table shared with business items).
    NotAnOutboxItem,
}

/// Why a whole invocation fails (the stream then retries the whole batch, bisecting it on repeated failures).
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum HandlerError {
    /// A record has no `SequenceNumber`, so it cannot be reported on its own (reporting an empty identifier would
    /// fail the batch anyway): nothing in the batch was run.
    #[error(
        "stream record {index} (eventID {event_id:?}) has no SequenceNumber; nothing in the batch was run"
    )]
    MissingSequenceNumber {
        /// Its position in the batch.
        index: usize,
        /// Its `eventID`.
        event_id: String,
    },
}

impl From<HandlerError> for lambda_runtime::Diagnostic {
    fn from(e: HandlerError) -> Self {
        let error_type = match e {
            HandlerError::MissingSequenceNumber { .. } => "sqsafe.MissingSequenceNumber",
        };
        lambda_runtime::Diagnostic {
            error_type: error_type.to_owned(),
            error_message: e.to_string(),
        }
    }
}

/// Why one record failed.
#[derive(Debug, thiserror::Error)]
enum RecordFailure {
    #[error(transparent)]
    Outbox(#[from] sqsafe_outbox::Error),
    #[error("the record's handling panicked: {0}")]
    Panic(String),
}

impl RecordFailure {
    fn kind(&self) -> &'static str {
        match self {
            RecordFailure::Outbox(e) => e.kind(),
            RecordFailure::Panic(_) => "panic",
        }
    }

    fn is_retryable(&self) -> bool {
        match self {
            RecordFailure::Outbox(e) => e.is_retryable(),
            RecordFailure::Panic(_) => true,
        }
    }
}

impl OutboxRelay {
    /// A relay function over `relay`, with the default [`RetryPolicy`] and no failure queue: without one, a
    /// permanent failure is reported like a retryable one (it then blocks its shard until the mapping gives up).
    pub fn new(relay: Relay) -> Self {
        Self {
            relay,
            retry: RetryPolicy::default(),
            failures: None,
        }
    }

    /// How retryable failures are retried within an invocation.
    pub fn retry(mut self, policy: RetryPolicy) -> Self {
        self.retry = policy;
        self
    }

    /// Sends a permanent failure's details (event id, type, destination, group, keys, error; not the payload) to
    /// `url` and goes on with the batch, instead of reporting it: a poison event does not block its shard. The item
    /// stays `PENDING`; the sweeper publishes it once the cause is fixed. Later events of the same FIFO message
    /// group in the batch go the same way, so the group's order holds.
    pub fn failure_queue(mut self, sqs: aws_sdk_sqs::Client, url: impl Into<String>) -> Self {
        self.failures = Some(FailureQueue {
            sqs,
            url: url.into(),
        });
        self
    }

    /// Reads [`Settings`] from `clients.env` and builds the relay with its clients (`FAILURE_QUEUE_URL` required).
    pub fn from_clients(clients: &sqsafe::Clients) -> Result<Self, sqsafe::Error> {
        let settings = Settings::from_env(&clients.env)?;
        let failure_queue = clients.env.required("FAILURE_QUEUE_URL")?;
        Ok(Self::new(
            Relay::new(
                clients.sqs.clone(),
                clients.dynamodb.clone(),
                settings.table,
            )
            .destinations(settings.destinations)
            .sent_retention(settings.sent_retention),
        )
        .failure_queue(clients.sqs.clone(), failure_queue))
    }

    /// Handles one invocation: the records in order, until the first failure that outlives its retries.
    ///
    /// **Retryable failures** are retried within the invocation ([`RetryPolicy`], never past the deadline's
    /// reserve). **Partial batch failures on a stream.** Lambda resumes a shard from the lowest sequence number
    /// reported, so a record after a failed one must not be published ahead of it: the batch stops at the first
    /// failure that is still retryable, and that record and every later one are reported (their `SequenceNumber` as
    /// `itemIdentifier`). They come back in order; the records before the failure are done and are not sent again.
    /// The mapping retries them as long as the stream holds them (template.yaml: `MaximumRetryAttempts: -1`).
    /// **Permanent failures** (a destination not allowed, a malformed item, a refused payload) go to the failure
    /// queue at once ([`failure_queue`](OutboxRelay::failure_queue)) and the batch goes on; their items stay
    /// `PENDING` for the sweeper.
    ///
    /// # Errors
    /// [`HandlerError::MissingSequenceNumber`] before running anything, when a record could not be reported.
    pub async fn handle(
        &self,
        event: LambdaEvent<Event>,
    ) -> Result<DynamoDbEventResponse, HandlerError> {
        let span = sqsafe_telemetry::invocation_span(&event.context);
        let deadline = UNIX_EPOCH + Duration::from_millis(event.context.deadline);
        let started = SystemTime::now();
        let answer = self
            .batch(&event.payload.records, deadline)
            .instrument(span)
            .await;
        // The spans of this invocation (its own, each publish), when exported: before Lambda freezes the process,
        // and cut before the deadline (a deadline already passed when the batch came is an emulator's: unknown).
        sqsafe_telemetry::traces::flush(known_deadline(deadline, started), SystemTime::now()).await;
        answer
    }

    async fn batch(
        &self,
        records: &[EventRecord],
        deadline: SystemTime,
    ) -> Result<DynamoDbEventResponse, HandlerError> {
        // Every record must be reportable before any runs: a batch cut short by a missing id would be half done.
        let sequence_numbers = records
            .iter()
            .enumerate()
            .map(|(index, r)| {
                r.change
                    .sequence_number
                    .clone()
                    .filter(|s| !s.trim().is_empty())
                    .ok_or_else(|| HandlerError::MissingSequenceNumber {
                        index,
                        event_id: r.event_id.clone(),
                    })
            })
            .collect::<Result<Vec<_>, _>>()
            .inspect_err(|e| tracing::error!(error = %e, "batch refused"))?;

        let (mut relayed, mut ignored, mut diverted) = (0usize, 0usize, 0usize);
        let mut failed_at = None;
        // FIFO groups (destination, group) with an event sent to the failure queue in this batch.
        let mut held: BTreeSet<(String, String)> = BTreeSet::new();
        for (index, (record, sequence_number)) in records.iter().zip(&sequence_numbers).enumerate()
        {
            let span = record_span(record, sequence_number);
            // Only once a group is held: reading the group copies the record's image.
            if !held.is_empty()
                && let Some(group) = fifo_group(record)
                && held.contains(&group)
            {
                // Behind a diverted event of its group: published ahead of it, it would break the group's order.
                let _entered = span.enter();
                let why = "an earlier event of its message group went to the failure queue";
                match self
                    .divert(record, sequence_number, "held_behind", why)
                    .await
                {
                    Ok(()) => {
                        diverted += 1;
                        tracing::warn!(
                            "outbox event held behind its group: sent to the failure queue, item PENDING"
                        );
                        continue;
                    }
                    Err(e) => {
                        tracing::error!(error = %e, "the failure queue refused it: it and every later record are reported");
                        failed_at = Some(index);
                        break;
                    }
                }
            }
            // Boxed: the SDK's futures nest deep enough to overflow the compiler's layout query otherwise.
            let work = Box::pin(
                self.record_with_retries(record, deadline)
                    .instrument(span.clone()),
            );
            let result = AssertUnwindSafe(work)
                .catch_unwind()
                .await
                .unwrap_or_else(|panic| Err(RecordFailure::Panic(panic_message(&*panic))));
            let _entered = span.enter();
            match result {
                Ok(RecordOutcome::Relayed {
                    message_id, marked, ..
                }) => {
                    relayed += 1;
                    // The event id and correlation id are on the record's span; `message_id` names SQS records'
                    // own ids in sqsafe's logs, so this one is the published copy's.
                    tracing::info!(sqs_message_id = message_id, marked = ?marked, "outbox event relayed");
                }
                Ok(RecordOutcome::Ignored(why)) => {
                    ignored += 1;
                    tracing::debug!(reason = ?why, "stream record ignored");
                }
                Err(e) if !e.is_retryable() && self.failures.is_some() => {
                    tracing::error!(
                        kind = e.kind(),
                        error = %e,
                        "outbox event failed permanently: its details go to the failure queue and the batch goes on; \
                         the item stays PENDING for the sweeper"
                    );
                    match self
                        .divert(record, sequence_number, e.kind(), &e.to_string())
                        .await
                    {
                        Ok(()) => {
                            diverted += 1;
                            if let Some(group) = fifo_group(record) {
                                held.insert(group);
                            }
                        }
                        Err(send) => {
                            tracing::error!(error = %send, "the failure queue refused it: it and every later record are reported");
                            failed_at = Some(index);
                            break;
                        }
                    }
                }
                Err(e) => {
                    tracing::error!(
                        kind = e.kind(),
                        retryable = e.is_retryable(),
                        error = %e,
                        "outbox record failed: it and every later record of the batch are reported"
                    );
                    failed_at = Some(index);
                    break;
                }
            }
        }
        let mut response = DynamoDbEventResponse::default();
        if let Some(first) = failed_at {
            response.batch_item_failures = sequence_numbers[first..]
                .iter()
                .map(|sequence_number| {
                    let mut failure = DynamoDbBatchItemFailure::default();
                    failure.item_identifier = Some(sequence_number.clone());
                    failure
                })
                .collect();
        }
        tracing::info!(
            records = records.len(),
            relayed,
            ignored,
            diverted,
            reported = response.batch_item_failures.len(),
            "batch done"
        );
        Ok(response)
    }

    /// [`record`](Self::record), a retryable failure tried again after a growing wait while the deadline allows.
    async fn record_with_retries(
        &self,
        record: &EventRecord,
        deadline: SystemTime,
    ) -> Result<RecordOutcome, RecordFailure> {
        let mut delay = self.retry.first_delay;
        let mut tries = 1u32;
        loop {
            match self.record(record).await {
                Err(e) if e.is_retryable() => {
                    let wake = SystemTime::now() + delay;
                    if wake + self.retry.reserve > deadline {
                        return Err(e);
                    }
                    tracing::warn!(
                        kind = e.kind(),
                        error = %e,
                        tries,
                        retry_in_ms = u64::try_from(delay.as_millis()).unwrap_or(u64::MAX),
                        "outbox record failed, retrying within the invocation"
                    );
                    tokio::time::sleep(delay).await;
                    delay = (delay * 2).min(self.retry.max_delay);
                    tries += 1;
                }
                other => return other,
            }
        }
    }

    /// Sends a failed record's details to the failure queue (never its payload): the event's id, type,
    /// destination, group, correlation id and item keys, the stream record's ids, the error.
    async fn divert(
        &self,
        record: &EventRecord,
        sequence_number: &str,
        kind: &str,
        error: &str,
    ) -> Result<(), String> {
        let Some(queue) = &self.failures else {
            return Err("no failure queue".to_owned());
        };
        let keys: HashMap<String, AttributeValue> = record.change.keys.clone().into();
        let image: HashMap<String, AttributeValue> = record.change.new_image.clone().into();
        let event = OutboxRecord::from_item(keys.clone(), &image)
            .ok()
            .flatten()
            .map(|r| r.event().clone());
        let body = serde_json::json!({
            "source": "outbox-relay",
            "error_kind": kind,
            "error": error,
            "table": self.relay.table(),
            "keys": keys
                .iter()
                .map(|(k, v)| (k.clone(), serde_json::Value::from(v.as_s().ok().cloned())))
                .collect::<serde_json::Map<_, _>>(),
            "sequence_number": sequence_number,
            "stream_event_id": record.event_id,
            "event_id": event.as_ref().map(|e| e.event_id().to_owned()),
            "event_type": event.as_ref().map(|e| e.event_type().to_owned()),
            "destination": event.as_ref().map(|e| e.destination().to_owned()),
            "message_group_id": event.as_ref().and_then(|e| e.message_group_id().map(str::to_owned)),
            "correlation_id": event.as_ref().map(|e| e.correlation_id()),
        });
        queue
            .sqs
            .send_message()
            .queue_url(&queue.url)
            .message_body(body.to_string())
            .send()
            .await
            .map(|_| ())
            .map_err(|e| aws_sdk_sqs::error::DisplayErrorContext(e).to_string())
    }

    /// One record: an `INSERT` of an outbox item is published and marked; anything else is ignored.
    async fn record(&self, record: &EventRecord) -> Result<RecordOutcome, RecordFailure> {
        if record.event_name != "INSERT" {
            return Ok(RecordOutcome::Ignored(Ignored::NotAnInsert));
        }
        let image: HashMap<String, AttributeValue> = record.change.new_image.clone().into();
        let keys: HashMap<String, AttributeValue> = record.change.keys.clone().into();
        let Some(outbox) = OutboxRecord::from_item(keys, &image)? else {
            return Ok(RecordOutcome::Ignored(Ignored::NotAnOutboxItem));
        };
        let event = outbox.event();
        let span = tracing::Span::current();
        span.record("event_id", event.event_id());
        span.record("correlation_id", event.correlation_id());
        span.record("event_type", event.event_type());
        span.record(
            "destination",
            event.destination().rsplit('/').next().unwrap_or_default(),
        );
        if outbox.keys().is_empty() {
            return Err(sqsafe_outbox::Error::MalformedItem(format!(
                "event {}: the stream record has no Keys to mark the item by",
                event.event_id()
            ))
            .into());
        }
        let relayed = self.relay.relay(&outbox).await?;
        Ok(RecordOutcome::Relayed {
            event_id: event.event_id().to_owned(),
            message_id: relayed.message_id,
            marked: relayed.marked,
        })
    }
}

/// The (destination, message group) of a FIFO outbox event, for keeping its group's order: read from the item's
/// attributes as they are, so that a malformed item that names its group still holds the group's later events.
/// An invocation's deadline as Lambda gave it, unless it had passed already when the invocation `started`: Lambda
/// never hands over such an invocation, emulators do (a placeholder, or a queued invocation), and it is unknown then.
pub(crate) fn known_deadline(deadline: SystemTime, started: SystemTime) -> Option<SystemTime> {
    (deadline > started).then_some(deadline)
}

fn fifo_group(record: &EventRecord) -> Option<(String, String)> {
    if record.event_name != "INSERT" {
        return None;
    }
    let image: HashMap<String, AttributeValue> = record.change.new_image.clone().into();
    let text = |name: &str| image.get(name).and_then(|v| v.as_s().ok()).cloned();
    if text(sqsafe_outbox::attributes::ENTITY).as_deref() != Some(sqsafe_outbox::ENTITY) {
        return None;
    }
    Some((
        text(sqsafe_outbox::attributes::DESTINATION)?,
        text(sqsafe_outbox::attributes::MESSAGE_GROUP_ID)?,
    ))
}

/// The span of one stream record; the event's fields are filled in once its image is read.
fn record_span(record: &EventRecord, sequence_number: &str) -> tracing::Span {
    tracing::info_span!(
        "stream_record",
        sequence_number,
        event_name = record.event_name.as_str(),
        event_id = Empty,
        correlation_id = Empty,
        event_type = Empty,
        destination = Empty,
    )
}

fn panic_message(panic: &(dyn std::any::Any + Send)) -> String {
    panic
        .downcast_ref::<&str>()
        .map(|s| (*s).to_owned())
        .or_else(|| panic.downcast_ref::<String>().cloned())
        .unwrap_or_else(|| "a non-string panic".to_owned())
}
