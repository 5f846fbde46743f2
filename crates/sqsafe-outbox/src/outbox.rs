//! The producer's side: the business write and the outbox item in one `TransactWriteItems`.

use std::collections::HashMap;
use std::fmt;
use std::sync::Arc;
use std::time::{Duration, UNIX_EPOCH};

use aws_sdk_dynamodb::error::SdkError;
use aws_sdk_dynamodb::operation::transact_write_items::builders::TransactWriteItemsFluentBuilder;
use aws_sdk_dynamodb::operation::transact_write_items::{
    TransactWriteItemsError, TransactWriteItemsOutput,
};
use aws_sdk_dynamodb::types::{
    AttributeValue, Put, ReturnValuesOnConditionCheckFailure, TransactWriteItem,
};
use sqsafe_idempotency::{Clock, SystemClock};

use crate::error::{Error, Result};
use crate::event::OutboxEvent;
use crate::item::{OutboxRecord, new_item, reservation_item, reservation_matches};

/// DynamoDB allows 100 items per transaction; the outbox event takes two: its item and its id's reservation.
pub const MAX_BUSINESS_WRITES: usize = 98;

/// What a write did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum Written {
    /// The business writes and the outbox item were committed together.
    Recorded,
    /// The outbox item of this event already exists with the same content: an earlier try of this write committed
    /// (its answer was lost, or the producer retried). Nothing was written this time; the earlier try's business
    /// writes are there, since they committed with the item.
    AlreadyRecorded,
}

/// Writes outbox items into one table, each in the same transaction as the business writes it announces.
///
/// The item's key is `pk = outbox#<message group id>` (or `outbox#<event id>` without a group) and
/// `sk = event#<event id>`: the events of one group share a partition key, so the table's stream (and the relay,
/// which keeps the stream's order) sees them in the order they were written.
///
/// **An event id keeps its meaning.** Beside the event's item, the same transaction writes a reservation of its id
/// (`pk = outbox-id#<event id>`, `sk = id`; the event's type, destination, group and a SHA-256 of its payload),
/// conditional on none existing, that the table's TTL removes only after [`id_reservation`](Outbox::id_reservation)
/// (30 days by default, the consumers' default idempotency window), long after a `SENT` item expires (7 days). So
/// within that window the same id with other content is [`Error::EventIdReused`], also under another message group
/// (whose item would have another partition key), and a late retry of a write whose `SENT` item has expired is
/// [`Written::AlreadyRecorded`], not a second event.
///
/// # Default
/// Key attributes `pk` and `sk` (both strings), ids reserved 30 days, the system clock.
#[derive(Clone)]
pub struct Outbox {
    table: String,
    partition_key: String,
    sort_key: String,
    id_reservation: Duration,
    clock: Arc<dyn Clock>,
}

impl fmt::Debug for Outbox {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Outbox")
            .field("table", &self.table)
            .field("partition_key", &self.partition_key)
            .field("sort_key", &self.sort_key)
            .finish_non_exhaustive()
    }
}

impl Outbox {
    /// Outbox items go into `table` (partition key `pk`, sort key `sk`, both strings).
    pub fn new(table: impl Into<String>) -> Self {
        Self {
            table: table.into(),
            partition_key: "pk".into(),
            sort_key: "sk".into(),
            id_reservation: Duration::from_secs(30 * 86_400),
            clock: Arc::new(SystemClock),
        }
    }

    /// How long an event id stays reserved for its event (see [`Outbox`]): keep it at least as long as the
    /// idempotency window of the consumers the events reach.
    pub fn id_reservation(mut self, window: Duration) -> Self {
        self.id_reservation = window;
        self
    }

    /// Other names for the table's partition and sort key (both strings), e.g. in a single-table design.
    pub fn key_attributes(
        mut self,
        partition_key: impl Into<String>,
        sort_key: impl Into<String>,
    ) -> Self {
        self.partition_key = partition_key.into();
        self.sort_key = sort_key.into();
        self
    }

    /// The clock that stamps `created_at` (tests pass a fixed one).
    pub fn clock(mut self, clock: impl Clock) -> Self {
        self.clock = Arc::new(clock);
        self
    }

    /// The table.
    pub fn table(&self) -> &str {
        &self.table
    }

    /// The key of the event's outbox item.
    pub fn key(&self, event: &OutboxEvent) -> HashMap<String, AttributeValue> {
        let partition = event.message_group_id().unwrap_or_else(|| event.event_id());
        HashMap::from([
            (
                self.partition_key.clone(),
                AttributeValue::S(format!("outbox#{partition}")),
            ),
            (
                self.sort_key.clone(),
                AttributeValue::S(format!("event#{}", event.event_id())),
            ),
        ])
    }

    /// The key of the event id's reservation item.
    pub fn reservation_key(&self, event_id: &str) -> HashMap<String, AttributeValue> {
        HashMap::from([
            (
                self.partition_key.clone(),
                AttributeValue::S(format!("outbox-id#{event_id}")),
            ),
            (self.sort_key.clone(), AttributeValue::S("id".to_owned())),
        ])
    }

    /// The event's two `Put`s, for a transaction the caller builds, in this order: the outbox item (validated,
    /// `PENDING`) and the reservation of its id, each conditional on no item with its key existing, so that a
    /// retried producer call cannot create a second event.
    ///
    /// # Errors
    /// [`Error::InvalidEvent`] or [`Error::MissingGroupId`] (see [`OutboxEvent::validate`]).
    pub fn items(&self, event: &OutboxEvent) -> Result<[TransactWriteItem; 2]> {
        event.validate()?;
        let now = self
            .clock
            .now()
            .duration_since(UNIX_EPOCH)
            .unwrap_or_default();
        let created_at = u64::try_from(now.as_millis()).unwrap_or(u64::MAX);
        let invalid = |e: aws_sdk_dynamodb::error::BuildError| Error::InvalidEvent {
            event_id: event.event_id().to_owned(),
            reason: e.to_string(),
        };
        // First try: no item, the Put lands with the business writes. A retry after a lost answer or a producer
        // restart meets that item: the whole transaction is cancelled, and ALL_OLD hands back the item to compare.
        let put = Put::builder()
            .table_name(&self.table)
            .set_item(Some(new_item(event, self.key(event), created_at)))
            .condition_expression("attribute_not_exists(#pk)")
            .expression_attribute_names("#pk", &self.partition_key)
            .return_values_on_condition_check_failure(ReturnValuesOnConditionCheckFailure::AllOld)
            .build()
            .map_err(invalid)?;
        let expires = now.as_secs().saturating_add(self.id_reservation.as_secs());
        let reserve = Put::builder()
            .table_name(&self.table)
            .set_item(Some(reservation_item(
                event,
                self.reservation_key(event.event_id()),
                created_at,
                expires,
            )))
            .condition_expression("attribute_not_exists(#pk)")
            .expression_attribute_names("#pk", &self.partition_key)
            .return_values_on_condition_check_failure(ReturnValuesOnConditionCheckFailure::AllOld)
            .build()
            .map_err(invalid)?;
        Ok([
            TransactWriteItem::builder().put(put).build(),
            TransactWriteItem::builder().put(reserve).build(),
        ])
    }

    /// Appends the event's two `Put`s ([`items`](Outbox::items)) to a transaction the caller builds; they go last, so
    /// the outbox item's index is the number of items before them. Send the transaction, then read its answer with
    /// [`outcome`](Outbox::outcome).
    ///
    /// ```no_run
    /// # async fn f(dynamodb: aws_sdk_dynamodb::Client, order: aws_sdk_dynamodb::types::TransactWriteItem)
    /// # -> Result<(), sqsafe_outbox::Error> {
    /// use sqsafe_outbox::{Outbox, OutboxEvent};
    ///
    /// let outbox = Outbox::new("outbox");
    /// let event = OutboxEvent::new("OrderPlaced", r#"{"order_id":"o-1"}"#, "https://sqs.eu-west-1.amazonaws.com/1/orders");
    /// let tx = outbox.add_to(dynamodb.transact_write_items().transact_items(order), &event)?;
    /// let index = tx.get_transact_items().as_ref().map_or(0, |items| items.len() - 2);
    /// let written = outbox.outcome(tx.send().await, index, &event)?;
    /// # let _ = written; Ok(()) }
    /// ```
    ///
    /// # Errors
    /// As [`items`](Outbox::items).
    pub fn add_to(
        &self,
        transaction: TransactWriteItemsFluentBuilder,
        event: &OutboxEvent,
    ) -> Result<TransactWriteItemsFluentBuilder> {
        let [item, reservation] = self.items(event)?;
        Ok(transaction.transact_items(item).transact_items(reservation))
    }

    /// What a transaction holding the event's two items ([`items`](Outbox::items): the outbox item at
    /// `outbox_index`, its id's reservation after it) did.
    ///
    /// # Errors
    /// - [`Error::EventIdReused`]: the item or the id's reservation exists with other content (the id names
    ///   another event).
    /// - [`Error::BusinessRefused`]: another item's condition failed (`index` counts every item of the
    ///   transaction); nothing was written.
    /// - [`Error::Aws`]: a conflict with another transaction, throttling, a timeout (retryable), or a refused
    ///   request.
    pub fn outcome(
        &self,
        sent: std::result::Result<
            TransactWriteItemsOutput,
            SdkError<TransactWriteItemsError, aws_sdk_dynamodb::config::http::HttpResponse>,
        >,
        outbox_index: usize,
        event: &OutboxEvent,
    ) -> Result<Written> {
        let error = match sent {
            Ok(_) => return Ok(Written::Recorded),
            Err(e) => e,
        };
        let event_id = event.event_id();
        let Some(TransactWriteItemsError::TransactionCanceledException(cancelled)) =
            error.as_service_error()
        else {
            return Err(Error::aws("TransactWriteItems", event_id, error));
        };
        let reasons = cancelled.cancellation_reasons();
        let refused =
            |i: usize| reasons.get(i).and_then(|r| r.code()) == Some("ConditionalCheckFailed");
        if refused(outbox_index) {
            // The outbox item exists: committed by an earlier try of this write (with its business writes), or
            // another event under the same id.
            let old = reasons[outbox_index]
                .item()
                .ok_or_else(|| Error::Inconsistent {
                    event_id: event_id.to_owned(),
                    detail: "outbox item refused without the old item (ALL_OLD)".into(),
                })?;
            let existing = OutboxRecord::from_item(HashMap::new(), old)?;
            return match existing {
                Some(record) if record.event().same_content(event) => Ok(Written::AlreadyRecorded),
                _ => Err(Error::EventIdReused {
                    event_id: event_id.to_owned(),
                }),
            };
        }
        if refused(outbox_index + 1) {
            // The id is reserved: by an earlier try of this write whose item has since been sent and expired, or by
            // another event (another group's, whose item has another key).
            let old = reasons[outbox_index + 1]
                .item()
                .ok_or_else(|| Error::Inconsistent {
                    event_id: event_id.to_owned(),
                    detail: "reservation refused without the old item (ALL_OLD)".into(),
                })?;
            return if reservation_matches(old, event) {
                Ok(Written::AlreadyRecorded)
            } else {
                Err(Error::EventIdReused {
                    event_id: event_id.to_owned(),
                })
            };
        }
        if let Some(index) = (0..reasons.len()).find(|&i| refused(i)) {
            return Err(Error::BusinessRefused {
                event_id: event_id.to_owned(),
                index,
                item: reasons[index].item().cloned(),
            });
        }
        Err(Error::aws("TransactWriteItems", event_id, error))
    }

    /// Writes `business` (a `Put` of the item the event announces) and the event's outbox item in one transaction.
    ///
    /// # Errors
    /// As [`write_items`](Outbox::write_items).
    pub async fn write(
        &self,
        dynamodb: &aws_sdk_dynamodb::Client,
        business: Put,
        event: &OutboxEvent,
    ) -> Result<Written> {
        let item = TransactWriteItem::builder().put(business).build();
        self.write_items(dynamodb, vec![item], event).await
    }

    /// Writes the business writes and the event's two items (last) in one transaction. Retry with the same
    /// `event` (same id): a try that meets the item an earlier try committed returns
    /// [`Written::AlreadyRecorded`] and writes nothing.
    ///
    /// # Errors
    /// [`Error::TooManyWrites`] for more than [`MAX_BUSINESS_WRITES`], the event's validation errors (before any
    /// call), and those of [`outcome`](Outbox::outcome).
    pub async fn write_items(
        &self,
        dynamodb: &aws_sdk_dynamodb::Client,
        business: Vec<TransactWriteItem>,
        event: &OutboxEvent,
    ) -> Result<Written> {
        if business.len() > MAX_BUSINESS_WRITES {
            return Err(Error::TooManyWrites {
                count: business.len(),
                max: MAX_BUSINESS_WRITES,
            });
        }
        let index = business.len();
        let mut items = business;
        items.extend(self.items(event)?);
        let sent = dynamodb
            .transact_write_items()
            .set_transact_items(Some(items))
            .send()
            .await;
        let written = self.outcome(sent, index, event);
        match &written {
            Ok(w) => tracing::debug!(
                event_id = event.event_id(),
                table = self.table,
                outcome = ?w,
                "outbox event written"
            ),
            Err(e) => tracing::warn!(
                event_id = event.event_id(),
                table = self.table,
                kind = e.kind(),
                error = %e,
                "outbox write failed"
            ),
        }
        written
    }
}

#[cfg(test)]
mod tests {
    use std::time::{Duration, SystemTime};

    use super::*;
    use crate::item::RESERVATION_ENTITY;

    fn event(group: Option<&str>) -> OutboxEvent {
        let e = OutboxEvent::new("T", "{}", "https://q/x").with_event_id("e-1");
        match group {
            Some(g) => e.with_message_group_id(g),
            None => e,
        }
    }

    #[test]
    fn a_group_shares_one_partition_key_and_each_event_has_its_own_item() {
        let outbox = Outbox::new("outbox");
        let s = |v: &str| AttributeValue::S(v.to_owned());
        assert_eq!(
            outbox.key(&event(Some("acct-A"))),
            HashMap::from([
                ("pk".to_owned(), s("outbox#acct-A")),
                ("sk".to_owned(), s("event#e-1"))
            ])
        );
        assert_eq!(outbox.key(&event(None))["pk"], s("outbox#e-1"));
        let renamed = Outbox::new("t").key_attributes("PK", "SK");
        assert!(renamed.key(&event(None)).contains_key("PK"));
    }

    #[test]
    fn the_put_is_conditional_pending_and_stamped_by_the_clock() {
        let at = SystemTime::UNIX_EPOCH + Duration::from_millis(1_700_000_000_123);
        let outbox = Outbox::new("outbox").clock(move || at);
        let [item, reservation] = outbox.items(&event(None)).expect("items");
        let put = item.put().expect("a Put");
        let reserve = reservation.put().expect("a Put");
        assert_eq!(
            reserve.item()["pk"],
            AttributeValue::S("outbox-id#e-1".into())
        );
        assert_eq!(
            reserve.item()["entity"],
            AttributeValue::S(RESERVATION_ENTITY.into())
        );
        assert_eq!(
            reserve.item()["expiration"],
            AttributeValue::N((1_700_000_000 + 30 * 86_400).to_string()),
            "reserved 30 days"
        );
        assert_eq!(
            reserve.condition_expression(),
            Some("attribute_not_exists(#pk)")
        );
        assert_eq!(
            put.condition_expression(),
            Some("attribute_not_exists(#pk)")
        );
        assert_eq!(
            put.return_values_on_condition_check_failure(),
            Some(&ReturnValuesOnConditionCheckFailure::AllOld)
        );
        assert_eq!(put.item()["status"], AttributeValue::S("PENDING".into()));
        assert_eq!(
            put.item()["created_at"],
            AttributeValue::N("1700000000123".into())
        );
    }

    #[test]
    fn an_invalid_event_gives_no_put() {
        let fifo = OutboxEvent::new("T", "{}", "https://q/x.fifo");
        assert!(matches!(
            Outbox::new("outbox").items(&fifo),
            Err(Error::MissingGroupId { .. })
        ));
    }
}
