//! One batch of the outbox table's stream: each new outbox item published to its queue and marked sent, in the
//! shard's order. The first record that fails stops the batch: it and every later record are reported.

use std::collections::HashMap;
use std::panic::AssertUnwindSafe;

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
    /// A relay function over `relay`.
    pub fn new(relay: Relay) -> Self {
        Self { relay }
    }

    /// Reads [`Settings`] from `clients.env` and builds the relay with its clients.
    pub fn from_clients(clients: &sqsafe::Clients) -> Result<Self, sqsafe::Error> {
        let settings = Settings::from_env(&clients.env)?;
        Ok(Self::new(
            Relay::new(
                clients.sqs.clone(),
                clients.dynamodb.clone(),
                settings.table,
            )
            .destinations(settings.destinations)
            .sent_retention(settings.sent_retention),
        ))
    }

    /// Handles one invocation: the records in order, until the first failure.
    ///
    /// **Partial batch failures on a stream.** Lambda resumes a shard from the lowest sequence number reported, so
    /// a record after a failed one must not be published ahead of it: the batch stops at the first failure, and
    /// that record and every later one are reported (their `SequenceNumber` as `itemIdentifier`). They come back
    /// in order; the records before the failure are done and are not sent again. A record that keeps failing is
    /// retried up to the mapping's `MaximumRetryAttempts` (bisecting the batch on the way), then its details go to
    /// the mapping's on-failure queue and the shard moves on; its item stays `PENDING` in the table.
    ///
    /// # Errors
    /// [`HandlerError::MissingSequenceNumber`] before running anything, when a record could not be reported.
    pub async fn handle(
        &self,
        event: LambdaEvent<Event>,
    ) -> Result<DynamoDbEventResponse, HandlerError> {
        let span = sqsafe_telemetry::invocation_span(&event.context);
        self.batch(&event.payload.records).instrument(span).await
    }

    async fn batch(&self, records: &[EventRecord]) -> Result<DynamoDbEventResponse, HandlerError> {
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

        let (mut relayed, mut ignored) = (0usize, 0usize);
        let mut failed_at = None;
        for (index, (record, sequence_number)) in records.iter().zip(&sequence_numbers).enumerate()
        {
            let span = record_span(record, sequence_number);
            // Boxed: the SDK's futures nest deep enough to overflow the compiler's layout query otherwise.
            let work = Box::pin(self.record(record).instrument(span.clone()));
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
            reported = response.batch_item_failures.len(),
            "batch done"
        );
        Ok(response)
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
