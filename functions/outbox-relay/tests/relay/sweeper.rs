//! The outbox sweeper against DynamoDB's, DynamoDB Streams' and SQS's real APIs (moto server, started by
//! `make test`): an event whose stream record the relay gave up on, or never received, is still published, once the
//! threshold has passed; the consumer that receives it applies it once.

use std::collections::HashMap;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use aws_lambda_events::dynamodb::Event;
use aws_lambda_events::sqs::SqsEvent;
use aws_sdk_dynamodb::types::{AttributeValue, Put};
use aws_sdk_sqs::types::{Message, QueueAttributeName};
use lambda_runtime::LambdaEvent;
use outbox_relay::{OutboxRelay, OutboxSweeper};
use sqsafe::{Clients, Env, Setup};
use sqsafe_outbox::{ManualClock, Outbox, OutboxEvent, Relay, Sweeper, Written};
use sqsafe_testkit::{create_queue, create_table, event_file, invocation, sdk_config, unique_name};

use crate::stream::{Stream, create_outbox_table};

struct Fixture {
    aws: aws_config::SdkConfig,
    dynamodb: aws_sdk_dynamodb::Client,
    sqs: aws_sdk_sqs::Client,
    orders: String,
    table: String,
}

async fn fixture() -> Fixture {
    let aws = sdk_config().await;
    let dynamodb = aws_sdk_dynamodb::Client::new(&aws);
    let orders = unique_name("orders");
    let table = unique_name("outbox");
    create_table(&dynamodb, &orders, "pk", None).await;
    create_outbox_table(&dynamodb, &table).await;
    Fixture {
        sqs: aws_sdk_sqs::Client::new(&aws),
        aws,
        dynamodb,
        orders,
        table,
    }
}

impl Fixture {
    /// The producer, stamping `created_at` with `clock`: an order and its event in one transaction.
    async fn place_order(&self, clock: &ManualClock, order_id: &str, event: &OutboxEvent) {
        let order = Put::builder()
            .table_name(&self.orders)
            .item("pk", AttributeValue::S(format!("order#{order_id}")))
            .build()
            .expect("put");
        let written = Outbox::new(&self.table)
            .clock(clock.clone())
            .write(&self.dynamodb, order, event)
            .await
            .expect("write");
        assert_eq!(written, Written::Recorded);
    }

    fn sweeper(&self, clock: &ManualClock, destinations: &[&str]) -> Sweeper {
        Sweeper::new(
            Relay::new(self.sqs.clone(), self.dynamodb.clone(), &self.table)
                .destinations(destinations.iter().copied())
                .clock(clock.clone()),
        )
        .clock(clock.clone())
    }

    /// Every outbox event's item by event id (not the ids' reservations).
    async fn items(&self) -> HashMap<String, HashMap<String, AttributeValue>> {
        self.dynamodb
            .scan()
            .table_name(&self.table)
            .consistent_read(true)
            .send()
            .await
            .expect("scan")
            .items
            .unwrap_or_default()
            .into_iter()
            .filter(|i| sqsafe_testkit::item_string(i, "entity") == sqsafe_outbox::ENTITY)
            .map(|i| (sqsafe_testkit::item_string(&i, "event_id"), i))
            .collect()
    }

    async fn receive_all(&self, queue: &str) -> Vec<Message> {
        let mut all = Vec::new();
        loop {
            let got = self
                .sqs
                .receive_message()
                .queue_url(queue)
                .max_number_of_messages(10)
                .message_attribute_names("All")
                .send()
                .await
                .expect("receive")
                .messages
                .unwrap_or_default();
            if got.is_empty() {
                return all;
            }
            all.extend(got);
        }
    }
}

fn now_ms() -> u64 {
    let now = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .expect("after the epoch")
        .as_millis();
    u64::try_from(now).expect("millis")
}

/// A clock standing `minutes_ago` minutes before now.
fn at(minutes_ago: u64) -> ManualClock {
    ManualClock::at_millis(now_ms() - minutes_ago * 60_000)
}

fn status(item: &HashMap<String, AttributeValue>) -> String {
    sqsafe_testkit::item_string(item, "status")
}

fn event_id_of(message: &Message) -> String {
    sqsafe_testkit::message_attribute(message, "eventId").unwrap_or_default()
}

#[tokio::test]
async fn events_whose_stream_records_never_arrive_are_published_once_due_oldest_first_bounded_per_sweep()
 {
    let fx = fixture().await;
    let queue = create_queue(&fx.sqs, "orders-placed", false).await;
    let clock = at(0);
    // Three events a minute apart; the stream is never read (the relay was down past the stream's 24 hours).
    for n in 1..=3 {
        let event = OutboxEvent::new("OrderPlaced", format!(r#"{{"order_id":"o-{n}"}}"#), &queue)
            .with_event_id(format!("order-o-{n}/placed"));
        fx.place_order(&clock, &format!("o-{n}"), &event).await;
        clock.advance(Duration::from_secs(60));
    }
    let sweeper = fx.sweeper(&clock, &[&queue]).max_per_sweep(2);

    // Two minutes after the last write, the oldest is 4 minutes old: nothing is due before 5 minutes.
    clock.advance(Duration::from_secs(60));
    let swept = sweeper.sweep().await.expect("sweep");
    assert!(
        swept.published.is_empty() && swept.failed.is_empty(),
        "{swept:?}"
    );
    assert_eq!(swept.oldest_pending, Some(Duration::from_secs(240)));
    assert!(fx.receive_all(&queue).await.is_empty());

    // 3 minutes later all three are due: the two oldest in one sweep (its bound), the third in the next.
    clock.advance(Duration::from_secs(180));
    let first = sweeper.sweep().await.expect("sweep");
    let ids: Vec<&str> = first.published.iter().map(|(id, _)| id.as_str()).collect();
    assert_eq!(ids, ["order-o-1/placed", "order-o-2/placed"]);
    assert_eq!(first.oldest_pending, Some(Duration::from_secs(420)));
    assert!(first.more, "a third event is due");
    let second = sweeper.sweep().await.expect("sweep");
    let ids: Vec<&str> = second.published.iter().map(|(id, _)| id.as_str()).collect();
    assert_eq!(ids, ["order-o-3/placed"]);
    let third = sweeper.sweep().await.expect("sweep");
    assert!(
        third.published.is_empty() && third.oldest_pending.is_none(),
        "{third:?}"
    );

    // Each published once, each item SENT and out of the pending index (no `pending` attribute).
    let mut published: Vec<String> = fx
        .receive_all(&queue)
        .await
        .iter()
        .map(event_id_of)
        .collect();
    published.sort();
    assert_eq!(
        published,
        ["order-o-1/placed", "order-o-2/placed", "order-o-3/placed"]
    );
    for (id, item) in fx.items().await {
        assert_eq!(status(&item), "SENT", "{id}");
        assert!(!item.contains_key("pending"), "{id} left the pending index");
    }
}

#[tokio::test]
async fn an_event_the_sweeper_may_not_publish_stays_pending_and_its_age_keeps_rising() {
    let fx = fixture().await;
    let allowed = create_queue(&fx.sqs, "allowed", false).await;
    let elsewhere = create_queue(&fx.sqs, "elsewhere", false).await;
    let written_at = now_ms();
    let clock = ManualClock::at_millis(written_at);
    let event = OutboxEvent::new("OrderPlaced", r#"{"order_id":"o-9"}"#, &elsewhere)
        .with_event_id("order-o-9/placed");
    fx.place_order(&clock, "o-9", &event).await;
    let sweeper = fx.sweeper(&clock, &[&allowed]);
    for minutes in [10u64, 20] {
        clock.set_millis(written_at + minutes * 60_000);
        let swept = sweeper.sweep().await.expect("sweep");
        assert!(swept.published.is_empty());
        assert_eq!(swept.failed.len(), 1);
        assert_eq!(swept.failed[0].1.kind(), "destination_not_allowed");
        let age = swept.oldest_pending.expect("pending").as_secs();
        assert_eq!(age, minutes * 60, "the age the alarm watches keeps rising");
    }
    assert_eq!(status(&fx.items().await["order-o-9/placed"]), "PENDING");
    assert!(fx.receive_all(&elsewhere).await.is_empty());
}

#[tokio::test]
async fn an_event_the_relay_gave_up_on_is_published_by_the_sweeper_and_charge_payment_charges_once()
{
    let fx = fixture().await;
    let mut stream = Stream::of_table(
        &fx.dynamodb,
        aws_sdk_dynamodbstreams::Client::new(&fx.aws),
        &fx.table,
    )
    .await;
    // charge-payment as deployed, with the local payments API.
    let payments = sqsafe_test_servers::PaymentsApi::builder()
        .keys_in_new_table(fx.dynamodb.clone())
        .await
        .start("127.0.0.1:0".parse().expect("addr"))
        .await
        .expect("payments API");
    let idempotency = unique_name("idem");
    create_table(&fx.dynamodb, &idempotency, "pk", None).await;
    let queue = create_queue(&fx.sqs, "charge-payment", false).await;
    let dlq = create_queue(&fx.sqs, "charge-payment-dlq", false).await;
    let consumer = sqsafe::consumer::<charge_payment::ChargePayment>()
        .build(
            &Setup::new(
                Env::from_pairs([
                    ("IDEMPOTENCY_TABLE", idempotency),
                    ("PAYMENTS_API_URL", payments.base_url()),
                    ("DLQ_URL", dlq.clone()),
                    ("QUEUE_URL", queue.clone()),
                ]),
                fx.aws.clone(),
            )
            .expect("setup"),
        )
        .expect("charge-payment");
    let queue_arn = fx
        .sqs
        .get_queue_attributes()
        .queue_url(&queue)
        .attribute_names(QueueAttributeName::QueueArn)
        .send()
        .await
        .expect("attributes")
        .attributes
        .and_then(|a| a.get(&QueueAttributeName::QueueArn).cloned())
        .expect("arn");

    // The destination refuses every send (it is gone): the relay gives up on the record (a missing queue is a
    // permanent failure: its details go to the failure queue), the item stays PENDING. Written 10 minutes ago, past
    // the sweeper's 5-minute threshold.
    fx.sqs
        .delete_queue()
        .queue_url(&queue)
        .send()
        .await
        .expect("delete");
    let event = OutboxEvent::new(
        "PaymentRequested",
        event_file("charge-payment-batch.json").records[0]
            .body
            .clone()
            .expect("body"),
        &queue,
    )
    .with_event_id("order-o-7/payment")
    .with_correlation_id("checkout-7");
    fx.place_order(&at(10), "o-7", &event).await;
    let batch: Event = stream.next_batch().await;
    let failures = create_queue(&fx.sqs, "outbox-relay-failures", false).await;
    let env = Env::from_pairs([
        ("OUTBOX_TABLE", fx.table.clone()),
        ("OUTBOX_DESTINATIONS", queue.clone()),
        ("FAILURE_QUEUE_URL", failures.clone()),
    ]);
    let clients = Clients::new(env, fx.aws.clone());
    let relay = OutboxRelay::from_clients(&clients).expect("relay");
    // Three deliveries of the record (say a retried batch): each gives up the same way.
    for attempt in 0..3 {
        let mut context = lambda_runtime::Context::default();
        context.request_id = format!("req-relay-{attempt}");
        let response = relay
            .handle(LambdaEvent::new(batch.clone(), context))
            .await
            .expect("batch");
        assert!(
            response.batch_item_failures.is_empty(),
            "attempt {attempt}: diverted, not reported"
        );
    }
    assert_eq!(
        fx.receive_all(&failures).await.len(),
        3,
        "each attempt's details on the failure queue"
    );
    assert_eq!(status(&fx.items().await["order-o-7/payment"]), "PENDING");

    // The destination recovers; the sweeper, as deployed (its environment, the system clock), publishes the event.
    let recreated = fx
        .sqs
        .create_queue()
        .queue_name(queue.rsplit('/').next().expect("name"))
        .send()
        .await
        .expect("recreate")
        .queue_url
        .expect("url");
    assert_eq!(recreated, queue);
    let sweeper = OutboxSweeper::from_clients(&clients).expect("sweeper");
    let summary = sweeper.run().await.expect("sweep");
    assert_eq!(summary.published, 1, "{summary:?}");
    assert!(summary.oldest_pending_seconds >= 600, "{summary:?}");
    assert_eq!(status(&fx.items().await["order-o-7/payment"]), "SENT");
    assert_eq!(
        sweeper.run().await.expect("sweep").published,
        0,
        "published once"
    );

    // charge-payment receives it, and a redelivery of it: one charge.
    let messages = fx.receive_all(&queue).await;
    assert_eq!(messages.len(), 1);
    assert_eq!(event_id_of(&messages[0]), "order-o-7/payment");
    for attempt in 0..2 {
        let event: SqsEvent = serde_json::from_value(sqsafe_local::esm::sqs_event(
            std::slice::from_ref(&messages[0]),
            &queue_arn,
        ))
        .expect("an SQS event");
        let response = consumer
            .handle(invocation(event, &format!("req-{attempt}")))
            .await
            .expect("batch");
        assert!(
            response.batch_item_failures.is_empty(),
            "delivery {attempt}"
        );
    }
    assert_eq!(payments.charges().len(), 1, "one charge");
}
