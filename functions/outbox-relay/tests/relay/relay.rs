//! The relay against DynamoDB's, DynamoDB Streams' and SQS's real APIs (moto server, started by `make test`; these
//! tests fail when it is not running). Each batch is what moto's stream holds (see `tests/stream/mod.rs`), and the
//! consumers that receive what the relay publishes are the real `charge-payment` and `apply-ledger`, through their
//! libraries.

use std::collections::HashMap;

use aws_lambda_events::dynamodb::Event;
use aws_lambda_events::sqs::SqsEvent;
use aws_sdk_dynamodb::types::{AttributeValue, Put};
use aws_sdk_sqs::types::{Message, MessageSystemAttributeName};
use lambda_runtime::LambdaEvent;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use outbox_relay::{OutboxRelay, RetryPolicy};
use sqsafe::{Clients, Env, Setup};
use sqsafe_outbox::{Outbox, OutboxEvent, Relay, Written};
use sqsafe_testkit::{create_queue, create_table, event_file, invocation, sdk_config, unique_name};

use crate::stream::{Stream, create_outbox_table};

struct Fixture {
    aws: aws_config::SdkConfig,
    dynamodb: aws_sdk_dynamodb::Client,
    sqs: aws_sdk_sqs::Client,
    orders: String,
    outbox: Outbox,
    stream: Stream,
    /// The relay's failure queue (template.yaml: the mapping's on-failure queue, FAILURE_QUEUE_URL).
    failures: String,
}

async fn fixture() -> Fixture {
    let aws = sdk_config().await;
    let dynamodb = aws_sdk_dynamodb::Client::new(&aws);
    let orders = unique_name("orders");
    let outbox_table = unique_name("outbox");
    create_table(&dynamodb, &orders, "pk", None).await;
    create_outbox_table(&dynamodb, &outbox_table).await;
    let stream = Stream::of_table(
        &dynamodb,
        aws_sdk_dynamodbstreams::Client::new(&aws),
        &outbox_table,
    )
    .await;
    let sqs = aws_sdk_sqs::Client::new(&aws);
    let failures = create_queue(&sqs, "outbox-relay-failures", false).await;
    Fixture {
        sqs,
        failures,
        outbox: Outbox::new(&outbox_table),
        aws,
        dynamodb,
        orders,
        stream,
    }
}

impl Fixture {
    /// The relay as deployed: built from its environment.
    async fn relay(&self, destinations: &[&str]) -> OutboxRelay {
        let env = Env::from_pairs([
            ("OUTBOX_TABLE", self.outbox.table().to_owned()),
            ("OUTBOX_DESTINATIONS", destinations.join(",")),
            ("FAILURE_QUEUE_URL", self.failures.clone()),
        ]);
        OutboxRelay::from_clients(&Clients::new(env, self.aws.clone())).expect("relay")
    }

    /// The failure queue's messages, as JSON.
    async fn failure_reports(&self) -> Vec<serde_json::Value> {
        self.receive(&self.failures)
            .await
            .iter()
            .map(|m| serde_json::from_str(m.body().unwrap_or_default()).expect("JSON"))
            .collect()
    }

    /// A relay that dies between publishing and marking: its mark goes to a table that does not exist, so the
    /// event is on its queue and its item still `PENDING`, exactly as after a crash there.
    fn crashing_relay(&self) -> OutboxRelay {
        OutboxRelay::new(Relay::new(
            self.sqs.clone(),
            self.dynamodb.clone(),
            "no-such-table",
        ))
    }

    /// The producer: an order and its event in one transaction.
    async fn place_order(&self, order_id: &str, event: &OutboxEvent) {
        let order = Put::builder()
            .table_name(&self.orders)
            .item("pk", AttributeValue::S(format!("order#{order_id}")))
            .build()
            .expect("put");
        let written = self
            .outbox
            .write(&self.dynamodb, order, event)
            .await
            .expect("write");
        assert_eq!(written, Written::Recorded);
    }

    async fn outbox_items(&self) -> Vec<HashMap<String, AttributeValue>> {
        self.dynamodb
            .scan()
            .table_name(self.outbox.table())
            .consistent_read(true)
            .send()
            .await
            .expect("scan")
            .items
            .unwrap_or_default()
    }

    async fn status_of(&self, event_id: &str) -> String {
        self.outbox_items()
            .await
            .iter()
            .find(|i| s(i, "event_id") == event_id)
            .map(|i| s(i, "status"))
            .unwrap_or_default()
    }

    async fn receive(&self, queue: &str) -> Vec<Message> {
        sqsafe_testkit::receive(&self.sqs, queue).await
    }

    async fn queue_arn(&self, queue: &str) -> String {
        sqsafe_testkit::queue_arn(&self.sqs, queue).await
    }
}

fn s(item: &HashMap<String, AttributeValue>, name: &str) -> String {
    sqsafe_testkit::item_string(item, name)
}

fn attribute(message: &Message, name: &str) -> String {
    sqsafe_testkit::message_attribute(message, name).unwrap_or_default()
}

fn invoke(event: Event) -> LambdaEvent<Event> {
    let mut context = lambda_runtime::Context::default();
    context.request_id = "req-relay".into();
    LambdaEvent::new(event, context)
}

async fn reported(relay: &OutboxRelay, event: Event) -> Vec<String> {
    relay
        .handle(invoke(event))
        .await
        .expect("batch")
        .batch_item_failures
        .into_iter()
        .map(|f| f.item_identifier.unwrap_or_default())
        .collect()
}

fn sequence_numbers(event: &Event) -> Vec<String> {
    event
        .records
        .iter()
        .map(|r| r.change.sequence_number.clone().unwrap_or_default())
        .collect()
}

fn event_names(event: &Event) -> Vec<&str> {
    event
        .records
        .iter()
        .map(|r| r.event_name.as_str())
        .collect()
}

/// The body of the first record of a sample event in `events/`.
fn sample_body(file: &str) -> String {
    event_file(file).records[0].body.clone().expect("body")
}

#[tokio::test]
async fn an_outbox_insert_is_published_and_marked_and_everything_else_is_ignored() {
    let mut fx = fixture().await;
    let queue = create_queue(&fx.sqs, "orders-placed", false).await;
    let event = OutboxEvent::new("OrderPlaced", r#"{"order_id":"o-1"}"#, &queue)
        .with_event_id("order-o-1/placed")
        .with_correlation_id("checkout-7");
    fx.place_order("o-1", &event).await;
    // Another item in the same table (a table shared with business items): not an outbox event; nor is the
    // reservation of the event's id.
    fx.dynamodb
        .put_item()
        .table_name(fx.outbox.table())
        .item("pk", AttributeValue::S("customer#c-1".into()))
        .item("sk", AttributeValue::S("profile".into()))
        .send()
        .await
        .expect("put");
    let relay = fx.relay(&[&queue]).await;

    let batch = fx.stream.next_batch().await;
    // The event, its id's reservation, the business item.
    assert_eq!(event_names(&batch), ["INSERT", "INSERT", "INSERT"]);
    assert!(
        batch.records[0]
            .event_source_arn
            .as_deref()
            .is_some_and(|a| a == fx.stream.arn())
    );
    assert!(reported(&relay, batch).await.is_empty());
    let messages = fx.receive(&queue).await;
    assert_eq!(messages.len(), 1, "only the outbox event");
    assert_eq!(messages[0].body(), Some(r#"{"order_id":"o-1"}"#));
    assert_eq!(attribute(&messages[0], "eventId"), "order-o-1/placed");
    assert_eq!(attribute(&messages[0], "eventType"), "OrderPlaced");
    assert_eq!(attribute(&messages[0], "correlationId"), "checkout-7");
    assert_eq!(fx.status_of("order-o-1/placed").await, "SENT");

    // The mark (MODIFY) and a delete (REMOVE) come through the stream too: nothing is published for them.
    fx.dynamodb
        .delete_item()
        .table_name(fx.outbox.table())
        .key("pk", AttributeValue::S("customer#c-1".into()))
        .key("sk", AttributeValue::S("profile".into()))
        .send()
        .await
        .expect("delete");
    let batch = fx.stream.next_batch().await;
    assert_eq!(event_names(&batch), ["MODIFY", "REMOVE"]);
    assert!(reported(&relay, batch).await.is_empty());
    assert!(fx.receive(&queue).await.is_empty(), "nothing more sent");
}

#[tokio::test]
async fn a_permanent_failure_goes_to_the_failure_queue_and_the_shard_moves_on() {
    let mut fx = fixture().await;
    let allowed = create_queue(&fx.sqs, "allowed", false).await;
    let other = create_queue(&fx.sqs, "not-allowed", false).await;
    for (id, queue) in [("e-1", &allowed), ("e-2", &other), ("e-3", &allowed)] {
        let event = OutboxEvent::new("T", format!(r#"{{"n":"{id}","secret":"s3cr3t"}}"#), queue)
            .with_event_id(id)
            .with_correlation_id(format!("c-{id}"));
        fx.place_order(id, &event).await;
    }
    let batch = fx.stream.next_batch().await;
    let e2 = batch
        .records
        .iter()
        .find(|r| {
            let keys: HashMap<String, AttributeValue> = r.change.keys.clone().into();
            keys.get("sk")
                .and_then(|v| v.as_s().ok())
                .map(String::as_str)
                == Some("event#e-2")
        })
        .and_then(|r| r.change.sequence_number.clone())
        .expect("e-2's record");

    // e-2's destination is not allowed, which no retry changes: its details go to the failure queue at once, and e-3
    // is published (nothing is reported, so the shard does not wait on a poison event).
    let failures = reported(&fx.relay(&[&allowed]).await, batch).await;
    assert!(failures.is_empty(), "{failures:?}");
    let bodies: Vec<String> = fx
        .receive(&allowed)
        .await
        .iter()
        .filter_map(|m| m.body().map(str::to_owned))
        .collect();
    assert_eq!(bodies.len(), 2, "e-1 and e-3: {bodies:?}");
    let reports = fx.failure_reports().await;
    assert_eq!(reports.len(), 1, "{reports:?}");
    let r = &reports[0];
    assert_eq!(r["event_id"], "e-2");
    assert_eq!(r["error_kind"], "destination_not_allowed");
    assert_eq!(r["destination"], other.as_str());
    assert_eq!(r["correlation_id"], "c-e-2");
    assert_eq!(r["sequence_number"], e2.as_str());
    assert_eq!(r["keys"]["sk"], "event#e-2");
    assert!(
        !r.to_string().contains("s3cr3t"),
        "the payload stays in the table: {r}"
    );
    assert_eq!(fx.status_of("e-1").await, "SENT");
    assert_eq!(fx.status_of("e-2").await, "PENDING", "left for the sweeper");
    assert_eq!(fx.status_of("e-3").await, "SENT");
}

#[tokio::test]
async fn a_fifo_event_behind_a_diverted_one_of_its_group_is_diverted_too() {
    let mut fx = fixture().await;
    let queue = create_queue(&fx.sqs, "ledger", true).await;
    // g-1's first event is malformed (written by something else, no type, payload or created_at): permanent. Its second must not be
    // published ahead of it; g-2's event goes on.
    fx.dynamodb
        .put_item()
        .table_name(fx.outbox.table())
        .item("pk", AttributeValue::S("outbox#g-1".into()))
        .item("sk", AttributeValue::S("event#e-1".into()))
        .item("entity", AttributeValue::S(sqsafe_outbox::ENTITY.into()))
        .item("event_id", AttributeValue::S("e-1".into()))
        .item("destination", AttributeValue::S(queue.clone()))
        .item("message_group_id", AttributeValue::S("g-1".into()))
        .item("status", AttributeValue::S("PENDING".into()))
        .send()
        .await
        .expect("put");
    for (id, group) in [("e-2", "g-1"), ("e-3", "g-2")] {
        let event = OutboxEvent::new("T", format!(r#"{{"n":"{id}"}}"#), &queue)
            .with_event_id(id)
            .with_message_group_id(group);
        fx.place_order(id, &event).await;
    }
    let batch = fx.stream.next_batch().await;
    assert_eq!(
        batch.records.len(),
        5,
        "e-1; e-2 and e-3, each with its id's reservation"
    );
    let failures = reported(&fx.relay(&[&queue]).await, batch).await;
    assert!(failures.is_empty(), "{failures:?}");
    let published: Vec<String> = fx
        .receive(&queue)
        .await
        .iter()
        .map(|m| attribute(m, "eventId"))
        .collect();
    assert_eq!(published, ["e-3"]);
    let reports = fx.failure_reports().await;
    let kinds: Vec<(String, String)> = reports
        .iter()
        .map(|r| {
            (
                r["keys"]["sk"].as_str().unwrap_or_default().to_owned(),
                r["error_kind"].as_str().unwrap_or_default().to_owned(),
            )
        })
        .collect();
    assert_eq!(
        kinds,
        [
            ("event#e-1".to_owned(), "malformed_item".to_owned()),
            ("event#e-2".to_owned(), "held_behind".to_owned())
        ]
    );
    assert_eq!(fx.status_of("e-2").await, "PENDING");
}

#[tokio::test]
async fn a_retryable_failure_is_retried_within_the_invocation_and_stops_the_batch_when_time_runs_out()
 {
    let mut fx = fixture().await;
    let queue = create_queue(&fx.sqs, "orders-placed", false).await;
    for id in ["e-1", "e-2"] {
        let event = OutboxEvent::new("T", format!(r#"{{"n":"{id}"}}"#), &queue).with_event_id(id);
        fx.place_order(id, &event).await;
    }
    let batch = fx.stream.next_batch().await;
    let sequence = sequence_numbers(&batch);
    // DynamoDB throttles every mark (UpdateItem) until the proxy's faults are turned off: retryable.
    let proxy = sqsafe_test_servers::proxy::FaultProxyConfig {
        throttle_rate: 1.0,
        operations: Some(vec!["UpdateItem".into()]),
        ..sqsafe_test_servers::proxy::FaultProxyConfig::new(sqsafe_testkit::endpoint())
    }
    .start()
    .await
    .expect("proxy");
    let throttled =
        aws_sdk_dynamodb::Client::new(&sqsafe_testkit::sdk_config_at(&proxy.endpoint()).await);
    let relay = OutboxRelay::new(Relay::new(fx.sqs.clone(), throttled, fx.outbox.table()))
        .failure_queue(fx.sqs.clone(), fx.failures.clone())
        .retry(RetryPolicy {
            first_delay: Duration::from_millis(20),
            max_delay: Duration::from_millis(100),
            reserve: Duration::ZERO,
        });

    // No time left (the deadline has passed): one try, then e-1 is reported (Lambda redelivers it and every later
    // record), nothing after it runs, and nothing goes to the failure queue: a retryable failure is never given up on.
    let failures = reported(&relay, batch.clone()).await;
    assert_eq!(
        failures,
        sequence[..1],
        "the failed record, the first of the batch"
    );
    assert_eq!(fx.status_of("e-2").await, "PENDING", "nothing after it ran");
    assert_eq!(fx.receive(&queue).await.len(), 1, "e-1 only was published");
    assert!(fx.failure_reports().await.is_empty());
    assert_eq!(fx.status_of("e-1").await, "PENDING");

    // Time left, and DynamoDB recovers while the relay retries within the invocation: nothing is reported.
    let mut context = lambda_runtime::Context::default();
    context.request_id = "req-relay-retry".into();
    context.deadline = u64::try_from(
        (SystemTime::now() + Duration::from_secs(30))
            .duration_since(UNIX_EPOCH)
            .expect("epoch")
            .as_millis(),
    )
    .expect("millis");
    let (response, ()) = tokio::join!(relay.handle(LambdaEvent::new(batch, context)), async {
        tokio::time::sleep(Duration::from_millis(300)).await;
        proxy.set_enabled(false);
    });
    let response = response.expect("batch");
    assert!(
        response.batch_item_failures.is_empty(),
        "retried until DynamoDB answered"
    );
    for id in ["e-1", "e-2"] {
        assert_eq!(fx.status_of(id).await, "SENT", "{id}");
    }
    assert!(proxy.stats().faults() > 0, "the marks were throttled");
    proxy.shutdown().await;
}

#[tokio::test]
async fn a_record_without_a_sequence_number_fails_the_batch_before_anything_runs() {
    let mut fx = fixture().await;
    let queue = create_queue(&fx.sqs, "orders-placed", false).await;
    for id in ["e-1", "e-2"] {
        fx.place_order(id, &OutboxEvent::new("T", "{}", &queue).with_event_id(id))
            .await;
    }
    let mut batch = fx.stream.next_batch().await;
    batch.records[1].change.sequence_number = None;
    let err = fx
        .relay(&[&queue])
        .await
        .handle(invoke(batch))
        .await
        .expect_err("cannot be reported");
    assert!(err.to_string().contains("SequenceNumber"), "{err}");
    assert!(fx.receive(&queue).await.is_empty(), "nothing was published");
}

#[tokio::test]
async fn a_crash_between_publishing_and_marking_republishes_and_charge_payment_charges_once() {
    let mut fx = fixture().await;
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
    let setup = Setup::new(
        Env::from_pairs([
            ("IDEMPOTENCY_TABLE", idempotency),
            ("PAYMENTS_API_URL", payments.base_url()),
            ("DLQ_URL", dlq.clone()),
            ("QUEUE_URL", queue.clone()),
        ]),
        fx.aws.clone(),
    )
    .expect("setup");
    let consumer = sqsafe::consumer::<charge_payment::ChargePayment>()
        .build(&setup)
        .expect("charge-payment");

    // The producer records the order and its PaymentRequested event together.
    let event = OutboxEvent::new(
        "PaymentRequested",
        sample_body("charge-payment-batch.json"),
        &queue,
    )
    .with_event_id("order-o-1/payment")
    .with_correlation_id("checkout-7");
    fx.place_order("o-1", &event).await;
    let batch = fx.stream.next_batch().await;

    // The relay publishes, then dies before its mark: the record is reported, the item stays PENDING.
    let failures = reported(&fx.crashing_relay(), batch.clone()).await;
    assert_eq!(failures, sequence_numbers(&batch)[..1]);
    assert_eq!(fx.status_of("order-o-1/payment").await, "PENDING");

    // The stream delivers the record again: published a second time, then marked.
    assert!(reported(&fx.relay(&[&queue]).await, batch).await.is_empty());
    assert_eq!(fx.status_of("order-o-1/payment").await, "SENT");
    let messages = fx.receive(&queue).await;
    assert_eq!(messages.len(), 2, "two copies of the event on the queue");
    assert_ne!(messages[0].message_id(), messages[1].message_id());
    for m in &messages {
        assert_eq!(attribute(m, "eventId"), "order-o-1/payment");
        assert_eq!(attribute(m, "correlationId"), "checkout-7");
    }

    // charge-payment receives both copies (one invocation each, as a redelivery later would): one charge.
    let arn = fx.queue_arn(&queue).await;
    for (i, m) in messages.iter().enumerate() {
        let event: SqsEvent =
            serde_json::from_value(sqsafe_local::esm::sqs_event(std::slice::from_ref(m), &arn))
                .expect("an SQS event");
        let response = consumer
            .handle(invocation(event, &format!("req-{i}")))
            .await
            .expect("batch");
        assert!(response.batch_item_failures.is_empty(), "copy {i}");
    }
    let charges = payments.charges();
    assert_eq!(charges.len(), 1, "one effect: {charges:?}");
    assert!(
        fx.receive(&dlq).await.is_empty(),
        "the copy was replayed, not refused"
    );
}

#[tokio::test]
async fn a_fifo_event_reaches_apply_ledger_once_with_its_group_and_deduplication_id() {
    let mut fx = fixture().await;
    let idempotency = unique_name("idem");
    let ledger = unique_name("ledger");
    create_table(&fx.dynamodb, &idempotency, "pk", None).await;
    create_table(&fx.dynamodb, &ledger, "pk", Some("sk")).await;
    let queue = create_queue(&fx.sqs, "apply-ledger", true).await;
    let dlq = create_queue(&fx.sqs, "apply-ledger-dlq", true).await;
    let setup = Setup::new(
        Env::from_pairs([
            ("IDEMPOTENCY_TABLE", idempotency),
            ("LEDGER_TABLE", ledger.clone()),
            ("DLQ_URL", dlq),
            ("QUEUE_URL", queue.clone()),
        ]),
        fx.aws.clone(),
    )
    .expect("setup");
    let consumer = sqsafe::consumer::<apply_ledger::ApplyLedger>()
        .build(&setup)
        .expect("apply-ledger");

    // e-1 of the sample: acct-A, credit 1000.
    let event = OutboxEvent::new(
        "LedgerEntryRequested",
        sample_body("apply-ledger-fifo.json"),
        &queue,
    )
    .with_event_id("entry-e-1")
    .with_message_group_id("acct-A");
    fx.place_order("o-1", &event).await;
    let batch = fx.stream.next_batch().await;
    assert!(
        !reported(&fx.crashing_relay(), batch.clone())
            .await
            .is_empty()
    );
    assert!(reported(&fx.relay(&[&queue]).await, batch).await.is_empty());

    // Within SQS's 5-minute window the republished copy is dropped by the queue (deduplication id = event id).
    let messages = fx.receive(&queue).await;
    assert_eq!(messages.len(), 1);
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

    // After the window a republished copy is a new message with the same body and attributes: the consumer's
    // idempotency record replays it.
    let arn = fx.queue_arn(&queue).await;
    let received: SqsEvent = serde_json::from_value(sqsafe_local::esm::sqs_event(&messages, &arn))
        .expect("an SQS event");
    let mut late_copy = received.clone();
    late_copy.records[0].message_id = Some("republished-after-the-window".into());
    for (i, event) in [received, late_copy].into_iter().enumerate() {
        let response = consumer
            .handle(invocation(event, &format!("req-{i}")))
            .await
            .expect("batch");
        assert!(response.batch_item_failures.is_empty(), "copy {i}");
    }
    let balance = fx
        .dynamodb
        .get_item()
        .table_name(&ledger)
        .key("pk", AttributeValue::S("acct-A".into()))
        .key("sk", AttributeValue::S(apply_ledger::BALANCE_SK.into()))
        .send()
        .await
        .expect("get")
        .item
        .and_then(|i| i.get("balance").and_then(|b| b.as_n().ok()).cloned());
    assert_eq!(balance.as_deref(), Some("1000"), "credited once");
}
