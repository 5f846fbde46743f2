//! The outbox writer and the relay's two steps against DynamoDB's and SQS's real APIs (moto server, started by
//! `make test`; these tests fail when it is not running).

use std::collections::HashMap;
use std::time::Duration;

use aws_sdk_dynamodb::types::{AttributeValue, Put};
use aws_sdk_sqs::types::{Message, MessageSystemAttributeName};
use sqsafe_outbox::{
    Error, ManualClock, Marked, Outbox, OutboxEvent, OutboxRecord, Relay, Status, Written,
};
use sqsafe_testkit::{LostAnswer, RequestCounter, create_queue, create_table, unique_name};

/// 2023-11-14T22:13:20Z
const NOW_MS: u64 = 1_700_000_000_000;

struct Fixture {
    dynamodb: aws_sdk_dynamodb::Client,
    sqs: aws_sdk_sqs::Client,
    counter: RequestCounter,
    lost: LostAnswer,
    orders: String,
    outbox: Outbox,
    clock: ManualClock,
}

async fn fixture() -> Fixture {
    let counter = RequestCounter::default();
    let lost = LostAnswer::default();
    let dynamodb = sqsafe_testkit::dynamodb_losing(&counter, &lost).await;
    let orders = unique_name("orders");
    let outbox_table = unique_name("outbox");
    create_table(&dynamodb, &orders, "pk", None).await;
    create_table(&dynamodb, &outbox_table, "pk", Some("sk")).await;
    let clock = ManualClock::at_millis(NOW_MS);
    counter.take();
    Fixture {
        sqs: sqsafe_testkit::sqs().await,
        outbox: Outbox::new(&outbox_table).clock(clock.clone()),
        dynamodb,
        counter,
        lost,
        orders,
        clock,
    }
}

impl Fixture {
    fn order(&self, id: &str, try_no: u32) -> Put {
        Put::builder()
            .table_name(&self.orders)
            .item("pk", AttributeValue::S(format!("order#{id}")))
            .item("try", AttributeValue::N(try_no.to_string()))
            .build()
            .expect("put")
    }

    async fn scan(&self, table: &str) -> Vec<HashMap<String, AttributeValue>> {
        self.dynamodb
            .scan()
            .table_name(table)
            .send()
            .await
            .expect("scan")
            .items
            .unwrap_or_default()
    }

    /// The outbox events' items (not their ids' reservations).
    async fn outbox_items(&self) -> Vec<HashMap<String, AttributeValue>> {
        self.scan(self.outbox.table())
            .await
            .into_iter()
            .filter(|i| s(i, "entity") == sqsafe_outbox::ENTITY)
            .collect()
    }

    /// The event's outbox item as the relay would get it.
    async fn record(&self, event: &OutboxEvent) -> OutboxRecord {
        let key = self.outbox.key(event);
        let item = self
            .dynamodb
            .get_item()
            .table_name(self.outbox.table())
            .set_key(Some(key.clone()))
            .consistent_read(true)
            .send()
            .await
            .expect("get")
            .item
            .expect("the outbox item");
        OutboxRecord::from_item(key, &item)
            .expect("valid")
            .expect("outbox item")
    }

    fn relay(&self) -> Relay {
        Relay::new(self.sqs.clone(), self.dynamodb.clone(), self.outbox.table())
            .clock(self.clock.clone())
            .sent_retention(Duration::from_secs(86_400))
    }

    async fn receive(&self, queue: &str) -> Vec<Message> {
        self.sqs
            .receive_message()
            .queue_url(queue)
            .max_number_of_messages(10)
            .message_attribute_names("All")
            .message_system_attribute_names(MessageSystemAttributeName::All)
            .send()
            .await
            .expect("receive")
            .messages
            .unwrap_or_default()
    }
}

fn s(item: &HashMap<String, AttributeValue>, name: &str) -> String {
    sqsafe_testkit::item_string(item, name)
}

fn n(item: &HashMap<String, AttributeValue>, name: &str) -> String {
    item.get(name)
        .and_then(|v| v.as_n().ok())
        .cloned()
        .unwrap_or_default()
}

fn attribute(message: &Message, name: &str) -> String {
    sqsafe_testkit::message_attribute(message, name).unwrap_or_default()
}

fn event(queue: &str) -> OutboxEvent {
    OutboxEvent::new("OrderPlaced", r#"{"order_id":"o-1"}"#, queue)
        .with_event_id("order-o-1/placed")
        .with_correlation_id("checkout-7")
}

const QUEUE: &str = "http://127.0.0.1:9/123456789012/orders";

#[tokio::test]
async fn the_business_item_and_the_outbox_item_commit_together() {
    let fx = fixture().await;
    let written = fx
        .outbox
        .write(&fx.dynamodb, fx.order("o-1", 1), &event(QUEUE))
        .await
        .expect("write");
    assert_eq!(written, Written::Recorded);
    assert_eq!(fx.counter.take(), ["TransactWriteItems"], "one call");
    assert_eq!(fx.scan(&fx.orders).await.len(), 1);
    let items = fx.outbox_items().await;
    assert_eq!(items.len(), 1);
    let item = &items[0];
    assert_eq!(s(item, "pk"), "outbox#order-o-1/placed");
    assert_eq!(s(item, "sk"), "event#order-o-1/placed");
    assert_eq!(s(item, "entity"), "sqsafe.outbox-event");
    assert_eq!(s(item, "event_type"), "OrderPlaced");
    assert_eq!(s(item, "payload"), r#"{"order_id":"o-1"}"#);
    assert_eq!(s(item, "destination"), QUEUE);
    assert_eq!(s(item, "correlation_id"), "checkout-7");
    assert_eq!(s(item, "status"), "PENDING");
    assert_eq!(n(item, "created_at"), NOW_MS.to_string());
    assert!(
        !item.contains_key("expiration"),
        "a pending event never expires"
    );
}

#[tokio::test]
async fn a_retried_write_of_the_same_event_writes_nothing_twice() {
    let fx = fixture().await;
    let e = event(QUEUE);
    let first = fx
        .outbox
        .write(&fx.dynamodb, fx.order("o-1", 1), &e)
        .await
        .expect("first try");
    fx.clock.advance(Duration::from_secs(5));
    // The producer retries (it never saw the first answer) with the same event and a business item built anew.
    let retry = fx
        .outbox
        .write(&fx.dynamodb, fx.order("o-1", 2), &e)
        .await
        .expect("retry");
    assert_eq!(
        (first, retry),
        (Written::Recorded, Written::AlreadyRecorded)
    );
    assert_eq!(fx.outbox_items().await.len(), 1, "one outbox item");
    let orders = fx.scan(&fx.orders).await;
    assert_eq!(
        n(&orders[0], "try"),
        "1",
        "the retry's transaction was cancelled as a whole"
    );
    assert_eq!(
        n(&fx.outbox_items().await[0], "created_at"),
        NOW_MS.to_string()
    );
}

#[tokio::test]
async fn a_write_whose_answer_was_lost_is_recognised_on_the_sdk_retry() {
    let fx = fixture().await;
    // The transaction commits, its answer is lost (500), the SDK retries the same request.
    fx.lost.arm("TransactWriteItems");
    let written = fx
        .outbox
        .write(&fx.dynamodb, fx.order("o-1", 1), &event(QUEUE))
        .await
        .expect("write");
    assert!(fx.lost.pending().is_empty(), "the answer was lost");
    assert_eq!(
        fx.counter.take(),
        ["TransactWriteItems", "TransactWriteItems"]
    );
    assert_eq!(written, Written::AlreadyRecorded, "not an error");
    assert_eq!(fx.outbox_items().await.len(), 1);
}

#[tokio::test]
async fn an_event_id_reused_for_another_event_is_refused() {
    let fx = fixture().await;
    fx.outbox
        .write(&fx.dynamodb, fx.order("o-1", 1), &event(QUEUE))
        .await
        .expect("first");
    let other = OutboxEvent::new("OrderPlaced", r#"{"order_id":"o-2"}"#, QUEUE)
        .with_event_id("order-o-1/placed");
    let err = fx
        .outbox
        .write(&fx.dynamodb, fx.order("o-2", 1), &other)
        .await
        .expect_err("same id, other payload");
    assert!(
        matches!(err, Error::EventIdReused { ref event_id } if event_id == "order-o-1/placed"),
        "{err}"
    );
    assert!(!err.is_retryable());
    assert_eq!(fx.scan(&fx.orders).await.len(), 1, "o-2 was not written");
}

#[tokio::test]
async fn an_event_id_reused_with_another_fifo_group_is_refused_not_a_second_event() {
    let fx = fixture().await;
    let fifo = "http://127.0.0.1:9/123456789012/ledger.fifo";
    let first = OutboxEvent::new("Credited", r#"{"n":1}"#, fifo)
        .with_event_id("entry-7")
        .with_message_group_id("acct-A");
    fx.outbox
        .write(&fx.dynamodb, fx.order("o-1", 1), &first)
        .await
        .expect("first");
    // The same id, the same payload, another group: its item would land under another partition key.
    let other_group = first.clone().with_message_group_id("acct-B");
    let err = fx
        .outbox
        .write(&fx.dynamodb, fx.order("o-2", 1), &other_group)
        .await
        .expect_err("the id names the acct-A event");
    assert!(
        matches!(err, Error::EventIdReused { ref event_id } if event_id == "entry-7"),
        "{err}"
    );
    let events: Vec<_> = fx
        .outbox_items()
        .await
        .into_iter()
        .filter(|i| s(i, "entity") == "sqsafe.outbox-event")
        .collect();
    assert_eq!(events.len(), 1, "one event under the id");
    assert_eq!(fx.scan(&fx.orders).await.len(), 1, "o-2 was not written");
}

#[tokio::test]
async fn an_event_id_keeps_its_meaning_after_its_sent_item_expired() {
    let fx = fixture().await;
    let e = event(QUEUE);
    fx.outbox
        .write(&fx.dynamodb, fx.order("o-1", 1), &e)
        .await
        .expect("first");
    // Published, marked SENT, then removed by the table's TTL after the relay's retention (7 days).
    fx.clock.advance(Duration::from_secs(8 * 86_400));
    for item in fx.outbox_items().await {
        if s(&item, "entity") == "sqsafe.outbox-event" {
            fx.dynamodb
                .delete_item()
                .table_name(fx.outbox.table())
                .key("pk", item["pk"].clone())
                .key("sk", item["sk"].clone())
                .send()
                .await
                .expect("expire the SENT item");
        }
    }
    // A late retry of the same write is still recognised: nothing is written, nothing published again.
    let retry = fx
        .outbox
        .write(&fx.dynamodb, fx.order("o-1", 2), &e)
        .await
        .expect("retry");
    assert_eq!(retry, Written::AlreadyRecorded);
    assert!(
        fx.outbox_items()
            .await
            .iter()
            .all(|i| s(i, "entity") != "sqsafe.outbox-event"),
        "no second outbox event"
    );
    // And the id with other content is still refused.
    let other =
        OutboxEvent::new("OrderPlaced", r#"{"order_id":"o-9"}"#, QUEUE).with_event_id(e.event_id());
    let err = fx
        .outbox
        .write(&fx.dynamodb, fx.order("o-9", 1), &other)
        .await
        .expect_err("reused");
    assert!(matches!(err, Error::EventIdReused { .. }), "{err}");
}

#[tokio::test]
async fn an_event_of_300_kb_is_written_and_relayed_to_a_1_mib_queue_and_the_cap_is_dynamodbs_item_size()
 {
    let fx = fixture().await;
    // SQS takes messages of up to 1 MiB; the outbox item must still fit DynamoDB's 400 KB.
    let queue = fx
        .sqs
        .create_queue()
        .queue_name(unique_name("outbox-big"))
        .attributes(
            aws_sdk_sqs::types::QueueAttributeName::MaximumMessageSize,
            "1048576",
        )
        .send()
        .await
        .expect("queue")
        .queue_url
        .expect("url");
    let payload = format!(r#"{{"blob":"{}"}}"#, "x".repeat(300_000));
    let e = OutboxEvent::new("Big", payload.clone(), &queue).with_event_id("big-1");
    let written = fx
        .outbox
        .write(&fx.dynamodb, fx.order("o-big", 1), &e)
        .await
        .expect("a 300 KB event is written");
    assert_eq!(written, Written::Recorded);
    let relayed = fx.relay().relay(&fx.record(&e).await).await.expect("relay");
    assert_eq!(relayed.marked, Marked::Sent);
    let messages = fx.receive(&queue).await;
    assert_eq!(messages[0].body().map(str::len), Some(payload.len()));

    // The largest payload still fits the item with the longest ids a FIFO event can carry; one byte more is
    // refused before any call.
    let fifo = "http://127.0.0.1:9/123456789012/big.fifo";
    let largest = OutboxEvent::new(
        "T".repeat(sqsafe_outbox::MAX_EVENT_TYPE_CHARS),
        "y".repeat(sqsafe_outbox::MAX_PAYLOAD_BYTES),
        fifo,
    )
    .with_event_id("e".repeat(sqsafe_outbox::MAX_ID_CHARS))
    .with_message_group_id("g".repeat(sqsafe_outbox::MAX_ID_CHARS))
    .with_correlation_id("c".repeat(sqsafe_outbox::MAX_ID_CHARS));
    let written = fx
        .outbox
        .write(&fx.dynamodb, fx.order("o-largest", 1), &largest)
        .await
        .expect("the largest event is written");
    assert_eq!(written, Written::Recorded);
    // moto checks the item size on PutItem (not inside a transaction): put the written item again under another key.
    let mut copy = fx
        .outbox_items()
        .await
        .into_iter()
        .find(|i| s(i, "event_id") == largest.event_id())
        .expect("the largest item");
    copy.insert("pk".into(), AttributeValue::S("size-probe".into()));
    fx.dynamodb
        .put_item()
        .table_name(fx.outbox.table())
        .set_item(Some(copy))
        .send()
        .await
        .expect("the largest outbox item fits DynamoDB's item size");
    let too_big = OutboxEvent::new(
        "T",
        "y".repeat(sqsafe_outbox::MAX_PAYLOAD_BYTES + 1),
        &queue,
    );
    fx.counter.take();
    let err = fx
        .outbox
        .write(&fx.dynamodb, fx.order("o-2", 1), &too_big)
        .await
        .expect_err("too big");
    assert!(matches!(err, Error::InvalidEvent { .. }), "{err}");
    assert!(fx.counter.take().is_empty(), "refused before any call");
}

#[tokio::test]
async fn a_refused_business_condition_writes_neither_item() {
    let fx = fixture().await;
    fx.outbox
        .write(&fx.dynamodb, fx.order("o-1", 1), &event(QUEUE))
        .await
        .expect("first");
    // A second order under the same id, conditional on there being none: refused with the order as it was.
    let conditional = Put::builder()
        .table_name(&fx.orders)
        .item("pk", AttributeValue::S("order#o-1".into()))
        .item("try", AttributeValue::N("9".into()))
        .condition_expression("attribute_not_exists(pk)")
        .return_values_on_condition_check_failure(
            aws_sdk_dynamodb::types::ReturnValuesOnConditionCheckFailure::AllOld,
        )
        .build()
        .expect("put");
    let another = event(QUEUE).with_event_id("order-o-1/placed-again");
    let err = fx
        .outbox
        .write(&fx.dynamodb, conditional, &another)
        .await
        .expect_err("refused");
    let Error::BusinessRefused { index, item, .. } = err else {
        panic!("expected BusinessRefused, got {err:?}");
    };
    assert_eq!(index, 0);
    assert_eq!(item.as_ref().map(|i| n(i, "try")).as_deref(), Some("1"));
    assert_eq!(fx.outbox_items().await.len(), 1, "no outbox item for it");
}

#[tokio::test]
async fn a_fifo_event_without_a_group_is_refused_before_any_call() {
    let fx = fixture().await;
    let fifo = OutboxEvent::new("T", "{}", format!("{QUEUE}.fifo"));
    let err = fx
        .outbox
        .write(&fx.dynamodb, fx.order("o-1", 1), &fifo)
        .await
        .expect_err("no group");
    assert!(matches!(err, Error::MissingGroupId { .. }), "{err}");
    assert!(fx.counter.take().is_empty(), "nothing was sent");
}

/// The trace an event was written in goes on with it: the item stores its traceparent, and the relayed message
/// carries it as the `traceparent` attribute, which the next consumer reads as its producer's context. An event
/// written without one is published without one (with traces off, the relay starts none).
#[tokio::test]
async fn the_relay_carries_the_writers_trace_on() {
    let fx = fixture().await;
    let queue = create_queue(&fx.sqs, "outbox-trace", false).await;
    let writer = sqsafe_telemetry::TraceContext::from_traceparent(
        "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",
    )
    .expect("valid");
    let traced = event(&queue).with_trace_context(&writer);
    fx.outbox
        .write(&fx.dynamodb, fx.order("o-1", 1), &traced)
        .await
        .expect("write");
    let record = fx.record(&traced).await;
    assert_eq!(record.event().trace_context(), Some(writer.clone()));
    fx.relay().relay(&record).await.expect("relay");
    let messages = fx.receive(&queue).await;
    assert_eq!(
        attribute(&messages[0], sqsafe_outbox::TRACEPARENT_ATTRIBUTE),
        writer.traceparent().expect("a parent")
    );

    let untraced = event(&queue).with_event_id("order-o-2/placed");
    fx.outbox
        .write(&fx.dynamodb, fx.order("o-2", 1), &untraced)
        .await
        .expect("write");
    let record = fx.record(&untraced).await;
    fx.relay().relay(&record).await.expect("relay");
    let messages = fx.receive(&queue).await;
    assert!(
        messages[0]
            .message_attributes()
            .is_none_or(|a| !a.contains_key(sqsafe_outbox::TRACEPARENT_ATTRIBUTE)),
        "{messages:?}"
    );
}

#[tokio::test]
async fn the_relay_publishes_with_the_ids_and_marks_the_item_sent_once() {
    let fx = fixture().await;
    let queue = create_queue(&fx.sqs, "outbox-dest", false).await;
    let e = event(&queue);
    fx.outbox
        .write(&fx.dynamodb, fx.order("o-1", 1), &e)
        .await
        .expect("write");
    let record = fx.record(&e).await;
    assert_eq!(record.status(), Status::Pending);
    fx.clock.advance(Duration::from_secs(2));

    let relayed = fx.relay().relay(&record).await.expect("relay");
    assert_eq!(relayed.marked, Marked::Sent);
    let messages = fx.receive(&queue).await;
    assert_eq!(messages.len(), 1);
    let m = &messages[0];
    assert_eq!(m.body(), Some(r#"{"order_id":"o-1"}"#), "the payload as is");
    assert_eq!(m.message_id(), Some(relayed.message_id.as_str()));
    assert_eq!(attribute(m, "eventId"), "order-o-1/placed");
    assert_eq!(attribute(m, "eventType"), "OrderPlaced");
    assert_eq!(
        attribute(m, sqsafe_telemetry::correlation::DEFAULT_ATTRIBUTE),
        "checkout-7",
        "the attribute sqsafe's consumers read"
    );

    let item = &fx.outbox_items().await[0];
    assert_eq!(s(item, "status"), "SENT");
    assert_eq!(n(item, "sent_at"), (NOW_MS + 2_000).to_string());
    assert_eq!(s(item, "sent_message_id"), relayed.message_id);
    assert_eq!(
        n(item, "expiration"),
        (NOW_MS / 1000 + 2 + 86_400).to_string(),
        "sent_at + the retention, in seconds"
    );

    // The stream delivers the INSERT again (the relay's answer was lost): published again, the mark finds SENT.
    let again = fx.relay().relay(&record).await.expect("again");
    assert_eq!(again.marked, Marked::AlreadySent);
    assert_eq!(fx.receive(&queue).await.len(), 1, "the second copy");
    let item = &fx.outbox_items().await[0];
    assert_eq!(
        s(item, "sent_message_id"),
        relayed.message_id,
        "the first mark stays"
    );
}

#[tokio::test]
async fn a_fifo_publication_carries_the_event_id_as_deduplication_id_and_the_group() {
    let fx = fixture().await;
    let queue = create_queue(&fx.sqs, "outbox-dest", true).await;
    let e = OutboxEvent::new("LedgerEntryRequested", r#"{"entry_id":"e-1"}"#, &queue)
        .with_event_id("entry-e-1")
        .with_message_group_id("acct-A");
    fx.outbox
        .write(&fx.dynamodb, fx.order("o-1", 1), &e)
        .await
        .expect("write");
    let items = fx.outbox_items().await;
    assert_eq!(
        s(&items[0], "pk"),
        "outbox#acct-A",
        "the group's partition key"
    );
    let record = fx.record(&e).await;
    fx.relay().relay(&record).await.expect("relay");
    // A republication inside SQS's deduplication window is dropped by the queue.
    fx.relay().publish(&record).await.expect("republish");
    let messages = fx.receive(&queue).await;
    assert_eq!(messages.len(), 1, "deduplicated by the event id");
    let system = |name: MessageSystemAttributeName| {
        messages[0]
            .attributes()
            .and_then(|a| a.get(&name))
            .cloned()
            .unwrap_or_default()
    };
    assert_eq!(
        system(MessageSystemAttributeName::MessageDeduplicationId),
        "entry-e-1"
    );
    assert_eq!(system(MessageSystemAttributeName::MessageGroupId), "acct-A");
    assert_eq!(
        attribute(&messages[0], "correlationId"),
        "entry-e-1",
        "no correlation id set: the event id"
    );
}

#[tokio::test]
async fn a_destination_outside_the_allowed_list_is_refused_before_sending() {
    let fx = fixture().await;
    let queue = create_queue(&fx.sqs, "outbox-dest", false).await;
    let e = event(&queue);
    fx.outbox
        .write(&fx.dynamodb, fx.order("o-1", 1), &e)
        .await
        .expect("write");
    let record = fx.record(&e).await;
    fx.counter.take();
    let err = fx
        .relay()
        .destinations(["http://127.0.0.1:9/123456789012/elsewhere"])
        .relay(&record)
        .await
        .expect_err("not allowed");
    assert!(matches!(err, Error::DestinationNotAllowed { .. }), "{err}");
    assert!(fx.receive(&queue).await.is_empty());
    assert!(fx.counter.take().is_empty(), "nothing marked");
}

#[tokio::test]
async fn marking_an_item_that_is_gone_is_not_a_failure() {
    let fx = fixture().await;
    let queue = create_queue(&fx.sqs, "outbox-dest", false).await;
    let e = event(&queue);
    fx.outbox
        .write(&fx.dynamodb, fx.order("o-1", 1), &e)
        .await
        .expect("write");
    let record = fx.record(&e).await;
    fx.dynamodb
        .delete_item()
        .table_name(fx.outbox.table())
        .set_key(Some(fx.outbox.key(&e)))
        .send()
        .await
        .expect("delete");
    let marked = fx
        .relay()
        .mark_sent(&record, "m-1")
        .await
        .expect("no failure");
    assert_eq!(marked, Marked::Gone);
    assert!(
        fx.outbox_items().await.is_empty(),
        "the mark did not create an item"
    );
}
