//! One batch of the outbox table's stream, run by sqsafe's stream processor (`sqsafe_batch::BatchProcessor`, the
//! engine sqsafe's Kinesis and DynamoDB-stream consumers run on): the records in the shard's order, each new outbox
//! item published to its queue and marked sent. A retryable failure is retried within the invocation, then stops the
//! shard: that record is reported and nothing after it runs. A permanent one goes to the failure queue (its details,
//! never its payload) and the shard moves on.

use std::collections::{BTreeSet, HashMap};
use std::fmt;
use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use aws_lambda_events::dynamodb::Event;
use aws_lambda_events::sqs::SqsMessage;
use aws_lambda_events::streams::DynamoDbEventResponse;
use aws_sdk_dynamodb::types::AttributeValue;
use lambda_runtime::LambdaEvent;
use serde_json::{Map, Value};
use sqsafe::layers::batch::{
    BatchError, BatchProcessor, DeadLetterQueue, Disposition, FailureContext, Processed, Record,
    RecordHandler, StreamBatch,
};
use sqsafe::{Change, ChangeKind, RecordError, StreamOrigin};
use sqsafe_outbox::{OutboxRecord, Relay};
use tracing::Instrument;
use tracing::field::Empty;

use crate::settings::Settings;

/// The name the relay's batches carry in their metrics and dead-letter context.
const NAME: &str = "outbox-relay";

/// The error kind of an event sent to the failure queue because an earlier event of its FIFO message group was.
const HELD_BEHIND: &str = "held_behind";

/// The relay function: publishes the outbox events a DynamoDB stream batch carries.
#[derive(Clone)]
pub struct OutboxRelay {
    relay: Relay,
    retry: RetryPolicy,
    processor: Arc<BatchProcessor>,
}

impl fmt::Debug for OutboxRelay {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("OutboxRelay")
            .field("relay", &self.relay)
            .field("retry", &self.retry)
            .finish_non_exhaustive()
    }
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

/// Why a stream record was acknowledged without publishing anything.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Ignored {
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
    /// The event could not be read as a batch whose records can each be reported (a record without a
    /// `SequenceNumber` or with an unknown `eventName`, an event without records): nothing in the batch was run.
    #[error("{0}; nothing in the batch was run")]
    Refused(#[source] BatchError),
}

impl From<HandlerError> for lambda_runtime::Diagnostic {
    fn from(e: HandlerError) -> Self {
        let error_type = match &e {
            HandlerError::Refused(batch) => batch.error_type(),
        };
        lambda_runtime::Diagnostic {
            error_type: error_type.to_owned(),
            error_message: e.to_string(),
        }
    }
}

impl OutboxRelay {
    /// A relay function over `relay`, with the default [`RetryPolicy`] and no failure queue: without one, a
    /// permanent failure is reported like a retryable one (it then blocks its shard until the mapping gives up).
    pub fn new(relay: Relay) -> Self {
        let processor = Arc::new(processor(None));
        Self {
            relay,
            retry: RetryPolicy::default(),
            processor,
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
        self.processor = Arc::new(processor(Some(FailureLetters {
            sqs,
            url: url.into(),
            table: self.relay.table().to_owned(),
        })));
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

    /// Handles one invocation on sqsafe's stream processor: the records in order, until the first failure that
    /// outlives its retries.
    ///
    /// **Retryable failures** are retried within the invocation ([`RetryPolicy`], never past the deadline's
    /// reserve). **Partial batch failures on a stream.** Lambda resumes a shard from the lowest sequence number
    /// reported, so a record after a failed one must not be published ahead of it: the batch stops at the first
    /// failure that is still retryable (or a record there is no time left to start), and that record's
    /// `SequenceNumber` is reported as `itemIdentifier`. Lambda redelivers it and every later record, in order; the
    /// records before it are done and are not sent again. The mapping retries them as long as the stream holds them
    /// (template.yaml: `MaximumRetryAttempts: -1`). **Permanent failures** (a destination not allowed, a malformed
    /// item, a refused payload) go to the failure queue at once ([`failure_queue`](OutboxRelay::failure_queue)) and
    /// the batch goes on; their items stay `PENDING` for the sweeper. A panic is a retryable failure of its record.
    ///
    /// # Errors
    /// [`HandlerError::Refused`] before running anything, when a record could not be reported.
    pub async fn handle(
        &self,
        event: LambdaEvent<Event>,
    ) -> Result<DynamoDbEventResponse, HandlerError> {
        let deadline = UNIX_EPOCH + Duration::from_millis(event.context.deadline);
        let request_id = event.context.request_id.clone();
        let batch = match StreamBatch::dynamodb(event.payload) {
            Ok(batch) => batch,
            Err(e) => {
                return Err(HandlerError::Refused(
                    self.processor.refuse(event.context, e).await,
                ));
            }
        };
        let invocation = Invocation {
            relay: &self.relay,
            retry: self.retry,
            deadline,
            held: Mutex::new(BTreeSet::new()),
        };
        let report = self
            .processor
            .handle_stream_report(LambdaEvent::new(batch, event.context), &invocation)
            .await
            .map_err(HandlerError::Refused)?;
        let (mut relayed, mut ignored, mut diverted) = (0usize, 0usize, 0usize);
        for record in &report.records {
            match record.disposition {
                Disposition::Succeeded(Processed::Ignored) => ignored += 1,
                Disposition::Succeeded(_) => relayed += 1,
                Disposition::DeadLettered(_) => diverted += 1,
                Disposition::Retry(_) | Disposition::SkippedAfterGroupFailure => {}
            }
        }
        let response = report.dynamodb_response();
        // After the invocation's span has closed: the request id is this line's own.
        tracing::info!(
            request_id,
            records = report.records.len(),
            relayed,
            ignored,
            diverted,
            reported = response.batch_item_failures.len(),
            "batch done"
        );
        Ok(response)
    }
}

/// The processor the relay's batches run on: one record at a time per shard (a DynamoDB stream's batch is one
/// shard's), the failure letters when there is a failure queue.
fn processor(failures: Option<FailureLetters>) -> BatchProcessor {
    let builder = BatchProcessor::builder(NAME, 1);
    let builder = match failures {
        Some(letters) => builder.dead_letter_queue(letters),
        None => builder,
    };
    builder
        .build()
        .expect("the relay's processor settings are valid")
}

/// One invocation's records: the deadline as Lambda gave it (the retries' bound) and the FIFO groups with an event
/// sent to the failure queue in this batch.
struct Invocation<'a> {
    relay: &'a Relay,
    retry: RetryPolicy,
    deadline: SystemTime,
    held: Mutex<BTreeSet<(String, String)>>,
}

impl RecordHandler for Invocation<'_> {
    async fn handle(&self, record: Record) -> Result<Processed, RecordError> {
        let change: Change<Map<String, Value>> = record.parse()?;
        let origin = record.stream_origin();
        let span = tracing::info_span!(
            "outbox_record",
            sequence_number = origin.as_ref().map(|o| o.sequence_number.as_str()),
            event_name = ?change.event_name,
            event_id = Empty,
            correlation_id = Empty,
            event_type = Empty,
            destination = Empty,
        );
        // Boxed: the SDK's futures nest deep enough to overflow the compiler's layout query otherwise.
        Box::pin(self.record(change).instrument(span)).await
    }
}

impl Invocation<'_> {
    async fn record(&self, change: Change<Map<String, Value>>) -> Result<Processed, RecordError> {
        if change.event_name != ChangeKind::Insert {
            tracing::debug!(reason = ?Ignored::NotAnInsert, "stream record ignored");
            return Ok(Processed::Ignored);
        }
        let image = change.new_image.unwrap_or_default();
        let Some(group) = OutboxGroup::of(&image) else {
            tracing::debug!(reason = ?Ignored::NotAnOutboxItem, "stream record ignored");
            return Ok(Processed::Ignored);
        };
        if group.fifo().is_some_and(|g| self.held().contains(&g)) {
            // Behind an event of its group sent to the failure queue: published ahead of it, it would break the
            // group's order.
            tracing::warn!(
                "outbox event held behind its group: it goes to the failure queue, its item stays PENDING"
            );
            return Err(RecordError::permanent(
                HELD_BEHIND,
                "an earlier event of its message group went to the failure queue",
            ));
        }
        let result = self.relay_with_retries(&change.keys, &image).await;
        if let Err(e) = &result
            && !e.is_retryable()
            && let Some(held) = group.fifo()
        {
            // Its later events in this batch follow it to the failure queue. (Should the queue refuse it, the
            // processor reports it and runs nothing after it: the hold is then moot.)
            self.held().insert(held);
        }
        result
    }

    fn held(&self) -> std::sync::MutexGuard<'_, BTreeSet<(String, String)>> {
        self.held
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// Publishes and marks the event, a retryable failure tried again after a growing wait while the deadline
    /// allows.
    async fn relay_with_retries(
        &self,
        keys: &Map<String, Value>,
        image: &Map<String, Value>,
    ) -> Result<Processed, RecordError> {
        let keys = item(keys)?;
        let image = item(image)?;
        let Some(outbox) = OutboxRecord::from_item(keys, &image).map_err(outbox_error)? else {
            // `OutboxGroup::of` read the same entity attribute: not reached.
            return Ok(Processed::Ignored);
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
            return Err(outbox_error(sqsafe_outbox::Error::MalformedItem(format!(
                "event {}: the stream record has no Keys to mark the item by",
                event.event_id()
            ))));
        }
        let mut delay = self.retry.first_delay;
        let mut tries = 1u32;
        loop {
            match self.relay.relay(&outbox).await {
                Ok(relayed) => {
                    // The event id and correlation id are on the record's span; `message_id` names SQS records'
                    // own ids in sqsafe's logs (here the stream record's sequence number), so this one is the
                    // published copy's.
                    tracing::info!(
                        sqs_message_id = relayed.message_id,
                        marked = ?relayed.marked,
                        "outbox event relayed"
                    );
                    return Ok(Processed::Applied);
                }
                Err(e) if e.is_retryable() => {
                    let wake = SystemTime::now() + delay;
                    if wake + self.retry.reserve > self.deadline {
                        return Err(outbox_error(e));
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
                Err(e) => return Err(outbox_error(e)),
            }
        }
    }
}

/// An outbox error as the processor's record error: retryable ones come back, the others go to the failure queue.
fn outbox_error(e: sqsafe_outbox::Error) -> RecordError {
    let kind = e.kind();
    if e.is_retryable() {
        RecordError::transient(kind, &e)
    } else {
        RecordError::permanent(kind, &e)
    }
}

/// A change's image or keys (plain JSON, as the processor reads a DynamoDB stream record) as a DynamoDB item again:
/// strings, numbers, booleans, maps and lists keep their types, which is all an outbox item and its keys hold.
fn item(json: &Map<String, Value>) -> Result<HashMap<String, AttributeValue>, RecordError> {
    serde_dynamo::to_item(json).map_err(|e| {
        outbox_error(sqsafe_outbox::Error::MalformedItem(format!(
            "the stream record's image is not a DynamoDB item: {e}"
        )))
    })
}

/// What an `INSERT`ed outbox item says of its FIFO message group, read from its attributes as they are, so that a
/// malformed item that names its group still holds the group's later events.
struct OutboxGroup {
    destination: Option<String>,
    message_group_id: Option<String>,
}

impl OutboxGroup {
    /// `None` for an item that is not an outbox event.
    fn of(image: &Map<String, Value>) -> Option<Self> {
        let text = |name: &str| image.get(name).and_then(Value::as_str).map(str::to_owned);
        (text(sqsafe_outbox::attributes::ENTITY).as_deref() == Some(sqsafe_outbox::ENTITY)).then(
            || Self {
                destination: text(sqsafe_outbox::attributes::DESTINATION),
                message_group_id: text(sqsafe_outbox::attributes::MESSAGE_GROUP_ID),
            },
        )
    }

    /// The (destination, message group) of a FIFO event.
    fn fifo(&self) -> Option<(String, String)> {
        Some((self.destination.clone()?, self.message_group_id.clone()?))
    }
}

/// The failure queue's letters: a failed event's details, never its payload (the item stays `PENDING` in the table,
/// and the sweeper publishes it once the cause is fixed).
struct FailureLetters {
    sqs: aws_sdk_sqs::Client,
    url: String,
    table: String,
}

impl DeadLetterQueue for FailureLetters {
    async fn send(
        &self,
        message: &SqsMessage,
        failure: &FailureContext,
    ) -> Result<(), sqsafe::BoxError> {
        let body = letter(&self.table, message, failure);
        self.sqs
            .send_message()
            .queue_url(&self.url)
            .message_body(body.to_string())
            .send()
            .await
            .map(|_| ())
            .map_err(|e| {
                aws_sdk_sqs::error::DisplayErrorContext(e)
                    .to_string()
                    .into()
            })
    }
}

/// A failure letter's body: the event's id, type, destination, group, correlation id and item keys, the stream
/// record's ids, the error.
fn letter(table: &str, message: &SqsMessage, failure: &FailureContext) -> Value {
    let change = message
        .body
        .as_deref()
        .and_then(|b| serde_json::from_str::<Change<Map<String, Value>>>(b).ok());
    let origin = StreamOrigin::of(message);
    let event = change.as_ref().and_then(|c| {
        let image = item(c.new_image.as_ref()?).ok()?;
        let keys = item(&c.keys).ok()?;
        OutboxRecord::from_item(keys, &image)
            .ok()
            .flatten()
            .map(|r| r.event().clone())
    });
    serde_json::json!({
        "source": NAME,
        "error_kind": failure.error_kind,
        "error": failure.error_message,
        "table": table,
        "keys": change.as_ref().map(|c| Value::Object(c.keys.clone())),
        "sequence_number": origin.as_ref().map(|o| o.sequence_number.as_str()),
        "stream_event_id": origin.as_ref().map(|o| o.event_id.as_str()),
        "event_id": event.as_ref().map(|e| e.event_id().to_owned()),
        "event_type": event.as_ref().map(|e| e.event_type().to_owned()),
        "destination": event.as_ref().map(|e| e.destination().to_owned()),
        "message_group_id": event.as_ref().and_then(|e| e.message_group_id().map(str::to_owned)),
        "correlation_id": event.as_ref().map(|e| e.correlation_id()),
    })
}
