//! The relay's side: publish an outbox event to its queue, then mark its item sent.

use std::collections::{BTreeSet, HashMap};
use std::fmt;
use std::sync::Arc;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use aws_sdk_dynamodb::operation::update_item::UpdateItemError;
use aws_sdk_dynamodb::types::{AttributeValue, ReturnValuesOnConditionCheckFailure};
use aws_sdk_sqs::types::MessageAttributeValue;
use sqsafe_idempotency::{Clock, SystemClock};
use sqsafe_telemetry::correlation;
use sqsafe_telemetry::{CorrelationId, TraceContext};
use tracing::Instrument as _;

use crate::error::{Error, Result};
use crate::item::{OutboxRecord, Status, attributes};

/// The message attribute that carries the event id.
pub const EVENT_ID_ATTRIBUTE: &str = "eventId";

/// The message attribute that carries the event type.
pub const EVENT_TYPE_ATTRIBUTE: &str = "eventType";

/// The message attribute that carries the trace context on (W3C), which sqsafe's consumers read first.
pub const TRACEPARENT_ATTRIBUTE: &str = sqsafe_telemetry::trace::TRACEPARENT_ATTRIBUTE;

/// What [`Relay::mark_sent`] found.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum Marked {
    /// The item went from `PENDING` to `SENT`.
    Sent,
    /// The item was already `SENT`: an earlier relay of this record marked it (the stream delivered it again).
    AlreadySent,
    /// The item is gone (deleted by an operator, or expired): nothing to mark.
    Gone,
}

/// What [`Relay::relay`] did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Relayed {
    /// The SQS message id of this publication.
    pub message_id: String,
    /// What marking the item found.
    pub marked: Marked,
}

/// Publishes outbox events to SQS and marks their items sent.
///
/// **At least once.** [`relay`](Relay::relay) publishes first and marks second. A crash (or a failed mark) between
/// the two leaves the item `PENDING`; the stream delivers the record again and the event is published again, under
/// the same event id and correlation id. On a FIFO queue SQS drops the copy within its 5-minute deduplication window
/// (the event id is the deduplication id); after it, and on a standard queue, the consumer's idempotency absorbs it
/// (its key names the intent in the payload, not the message).
///
/// # Default
/// Every destination allowed, `SENT` items kept 7 days before their `expiration`, the system clock.
#[derive(Clone)]
pub struct Relay {
    sqs: aws_sdk_sqs::Client,
    dynamodb: aws_sdk_dynamodb::Client,
    table: String,
    destinations: Option<BTreeSet<String>>,
    sent_retention: Duration,
    clock: Arc<dyn Clock>,
}

impl fmt::Debug for Relay {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Relay")
            .field("table", &self.table)
            .field("destinations", &self.destinations)
            .field("sent_retention", &self.sent_retention)
            .finish_non_exhaustive()
    }
}

impl Relay {
    /// A relay that publishes with `sqs` and marks items in `table` with `dynamodb`.
    pub fn new(
        sqs: aws_sdk_sqs::Client,
        dynamodb: aws_sdk_dynamodb::Client,
        table: impl Into<String>,
    ) -> Self {
        Self {
            sqs,
            dynamodb,
            table: table.into(),
            destinations: None,
            sent_retention: Duration::from_secs(7 * 86_400),
            clock: Arc::new(SystemClock),
        }
    }

    /// Publishes only to these queue URLs; an event for any other is refused ([`Error::DestinationNotAllowed`])
    /// before anything is sent.
    pub fn destinations<S: Into<String>>(mut self, allowed: impl IntoIterator<Item = S>) -> Self {
        self.destinations = Some(allowed.into_iter().map(Into::into).collect());
        self
    }

    /// How long a `SENT` item is kept: its `expiration` (the table's TTL attribute) is set this far past `sent_at`.
    pub fn sent_retention(mut self, retention: Duration) -> Self {
        self.sent_retention = retention;
        self
    }

    /// The clock that stamps `sent_at` and `expiration`.
    pub fn clock(mut self, clock: impl Clock) -> Self {
        self.clock = Arc::new(clock);
        self
    }

    /// The table whose items it marks.
    pub fn table(&self) -> &str {
        &self.table
    }

    /// The DynamoDB client it marks items with.
    pub(crate) fn dynamodb(&self) -> &aws_sdk_dynamodb::Client {
        &self.dynamodb
    }

    /// Publishes and then marks sent (see [`Relay`] for what a crash between the two does).
    ///
    /// # Errors
    /// Those of [`publish`](Relay::publish) (nothing was marked) and [`mark_sent`](Relay::mark_sent) (the event
    /// was published: the retry publishes it again).
    pub async fn relay(&self, record: &OutboxRecord) -> Result<Relayed> {
        let message_id = self.publish(record).await?;
        let marked = self.mark_sent(record, &message_id).await?;
        Ok(Relayed { message_id, marked })
    }

    /// Sends the event to its destination: the payload as the body, the event id, event type and correlation id
    /// as message attributes (`eventId`, `eventType`, `correlationId`, the one sqsafe's consumers read), and the
    /// trace context as `traceparent` (the stored one continued; with traces exported, from this publish's own
    /// span, `outbox publish`, a child of the stored one); on a FIFO
    /// queue the event id as `MessageDeduplicationId` and the event's group as `MessageGroupId`. Returns the SQS
    /// message id.
    ///
    /// # Errors
    /// [`Error::DestinationNotAllowed`], [`Error::MissingGroupId`] and [`Error::InvalidEvent`] before sending;
    /// [`Error::Aws`] when SQS refuses or fails.
    pub async fn publish(&self, record: &OutboxRecord) -> Result<String> {
        let event = record.event();
        let event_id = event.event_id();
        if let Some(allowed) = &self.destinations
            && !allowed.contains(event.destination())
        {
            return Err(Error::DestinationNotAllowed {
                event_id: event_id.to_owned(),
                destination: event.destination().to_owned(),
            });
        }
        event.validate()?;
        let span = tracing::info_span!(
            target: "sqsafe_outbox::relay",
            "outbox publish",
            event_id,
            destination = event.destination(),
        );
        let trace = match event.trace_context() {
            Some(parent) => Some(sqsafe_telemetry::traces::continue_from(&span, &parent)),
            None => sqsafe_telemetry::traces::span_context(&span),
        };
        let correlation_id = CorrelationId::new(event.correlation_id());
        let mut send = self
            .sqs
            .send_message()
            .queue_url(event.destination())
            .message_body(event.payload())
            .message_attributes(EVENT_ID_ATTRIBUTE, string_attribute(event_id))
            .message_attributes(EVENT_TYPE_ATTRIBUTE, string_attribute(event.event_type()))
            .message_attributes(
                correlation::DEFAULT_ATTRIBUTE,
                correlation::sqs_attribute(&correlation_id),
            );
        if let Some(traceparent) = trace.as_ref().and_then(TraceContext::traceparent) {
            send = send.message_attributes(TRACEPARENT_ATTRIBUTE, string_attribute(&traceparent));
        }
        if event.is_fifo() {
            send = send
                .message_deduplication_id(event_id)
                .set_message_group_id(event.message_group_id().map(str::to_owned));
        }
        let sent = send
            .send()
            .instrument(span)
            .await
            .map_err(|e| Error::aws("SendMessage", event_id, e))?;
        sent.message_id
            .filter(|id| !id.is_empty())
            .ok_or_else(|| Error::Inconsistent {
                event_id: event_id.to_owned(),
                detail: "SendMessage answered without a message id".into(),
            })
    }

    /// Marks the item `SENT` (with `sent_at`, `sent_message_id` and its `expiration`), only if it is still this
    /// event's `PENDING` item.
    ///
    /// # Errors
    /// [`Error::Aws`] when DynamoDB fails (retryable ones are throttling and timeouts); [`Error::Inconsistent`]
    /// when the key holds another event.
    pub async fn mark_sent(&self, record: &OutboxRecord, message_id: &str) -> Result<Marked> {
        let event_id = record.event().event_id();
        let now = self.clock.now();
        let n = |v: u64| AttributeValue::N(v.to_string());
        let s = |v: &str| AttributeValue::S(v.to_owned());
        // PENDING -> SENT, once. A record delivered again after an earlier relay marked it finds SENT (AlreadySent);
        // one whose item was deleted finds nothing (Gone). Neither is a failure: the event was published.
        let updated = self
            .dynamodb
            .update_item()
            .table_name(&self.table)
            .set_key(Some(record.keys().clone()))
            // Out of the sparse pending index (attributes::PENDING) as it becomes SENT.
            .update_expression(
                "SET #status = :sent, #sent_at = :now, #message_id = :message_id, #expiration = :expiration \
                 REMOVE #pending",
            )
            .condition_expression("#event_id = :event_id AND #status = :pending")
            .expression_attribute_names("#status", attributes::STATUS)
            .expression_attribute_names("#pending", attributes::PENDING)
            .expression_attribute_names("#sent_at", attributes::SENT_AT)
            .expression_attribute_names("#message_id", attributes::SENT_MESSAGE_ID)
            .expression_attribute_names("#expiration", attributes::EXPIRATION)
            .expression_attribute_names("#event_id", attributes::EVENT_ID)
            .expression_attribute_values(":sent", s(Status::Sent.as_str()))
            .expression_attribute_values(":pending", s(Status::Pending.as_str()))
            .expression_attribute_values(":now", n(epoch_millis(now)))
            .expression_attribute_values(":message_id", s(message_id))
            .expression_attribute_values(
                ":expiration",
                n(epoch_secs(now).saturating_add(self.sent_retention.as_secs())),
            )
            .expression_attribute_values(":event_id", s(event_id))
            .return_values_on_condition_check_failure(ReturnValuesOnConditionCheckFailure::AllOld)
            .send()
            .await;
        let error = match updated {
            Ok(_) => return Ok(Marked::Sent),
            Err(e) => e,
        };
        let Some(UpdateItemError::ConditionalCheckFailedException(refused)) =
            error.as_service_error()
        else {
            return Err(Error::aws("UpdateItem", event_id, error));
        };
        let Some(old) = refused.item() else {
            return Ok(Marked::Gone);
        };
        match OutboxRecord::from_item(HashMap::new(), old)? {
            Some(existing)
                if existing.event().event_id() == event_id && existing.status() == Status::Sent =>
            {
                Ok(Marked::AlreadySent)
            }
            _ => Err(Error::Inconsistent {
                event_id: event_id.to_owned(),
                detail: "the item's key holds another event".into(),
            }),
        }
    }
}

fn string_attribute(value: &str) -> MessageAttributeValue {
    MessageAttributeValue::builder()
        .data_type("String")
        .string_value(value)
        .build()
        // `build` fails only when `data_type` is missing, and it is set just above.
        .unwrap_or_else(|_| unreachable!("data_type is set"))
}

pub(crate) fn epoch_millis(t: SystemTime) -> u64 {
    t.duration_since(UNIX_EPOCH)
        .map(|d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX))
        .unwrap_or(0)
}

fn epoch_secs(t: SystemTime) -> u64 {
    t.duration_since(UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or(0)
}
