//! One trace from a producer to the effect, across a relay hop, as a local OTLP receiver (the ADOT collector's
//! place) gets it: a consumer writes an outbox event inside a message's trace, the relay publishes it from moto's
//! stream, and the real `charge-payment` charges from the published message. Spans are exported
//! (`SQSAFE_TRACES=otlp`); each handler sends its spans before it answers. Its own test binary: it installs the
//! process's subscriber.

mod stream;

use aws_lambda_events::dynamodb::Event;
use aws_lambda_events::sqs::{SqsEvent, SqsMessage, SqsMessageAttribute};
use aws_sdk_dynamodb::types::TransactWriteItem;
use lambda_runtime::LambdaEvent;
use serde::Deserialize;

use outbox_relay::OutboxRelay;
use sqsafe::{Clients, Consumer, Context, Effect, Env, Intent, RecordError, Setup};
use sqsafe_outbox::{Outbox, OutboxEvent};
use sqsafe_telemetry::{LogConfig, Traces};
use sqsafe_testkit::{
    OtlpReceiver, ReceivedSpan, create_queue, create_table, event_file, invocation, queue_arn,
    receive, sdk_config, unique_name,
};
use stream::{Stream, create_outbox_table};

/// The producer's context, as an OpenTelemetry producer sets it on the message.
const PRODUCER_TRACE: &str = "4bf92f3577b34da6a3ce929d0e0e4736";
const PRODUCER_SPAN: &str = "00f067aa0ba902b7";

#[derive(Deserialize)]
struct Order {
    order_id: String,
}

/// A consumer whose effect is an outbox event (a payment to request), written in the record's trace.
struct OrderWriter {
    outbox: Outbox,
    payments_queue: String,
    payment: String,
}

impl Consumer for OrderWriter {
    const NAME: &'static str = "order-writer";
    const EFFECT_VERSION: u32 = 1;
    const INTENT_FIELDS: &'static [&'static str] = &["/order_id"];
    type Payload = Order;
    type Output = String;

    fn new(setup: &Setup) -> Result<Self, sqsafe::Error> {
        Ok(Self {
            outbox: Outbox::new(setup.env.required("OUTBOX_TABLE")?),
            payments_queue: setup.env.required("PAYMENTS_QUEUE_URL")?,
            payment: setup.env.required("PAYMENT_BODY")?,
        })
    }

    fn intent(o: &Order) -> Intent {
        Intent::untenanted("order", &o.order_id)
    }

    fn effect<'a>(
        &'a self,
        o: Order,
        cx: &'a Context<'a>,
    ) -> Result<Effect<'a, String>, RecordError> {
        let event = OutboxEvent::new(
            "PaymentRequested",
            self.payment.clone(),
            &self.payments_queue,
        )
        .with_event_id(format!("order-{}/payment", o.order_id))
        .with_trace_context(cx.trace_context());
        let writes: Vec<TransactWriteItem> = self
            .outbox
            .items(&event)
            .map_err(|e| RecordError::permanent("outbox_event", e.to_string()))?
            .into();
        Ok(Effect::writes(writes, event.event_id().to_owned()))
    }
}

fn one<'a>(
    spans: &'a [ReceivedSpan],
    what: &str,
    pick: impl Fn(&ReceivedSpan) -> bool,
) -> &'a ReceivedSpan {
    let found: Vec<&ReceivedSpan> = spans.iter().filter(|s| pick(s)).collect();
    assert_eq!(found.len(), 1, "one {what} span: {spans:#?}");
    found[0]
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_trace_from_the_producer_through_the_relay_to_the_payment() {
    let receiver = OtlpReceiver::start().await;
    sqsafe_telemetry::init_with(LogConfig {
        traces: Traces::Otlp {
            endpoint: receiver.traces_endpoint(),
            service_name: Some("traces-test".into()),
        },
        ..LogConfig::default()
    })
    .expect("the subscriber, exporting spans");

    let aws = sdk_config().await;
    let dynamodb = aws_sdk_dynamodb::Client::new(&aws);
    let sqs = aws_sdk_sqs::Client::new(&aws);
    let idempotency = unique_name("idem");
    let outbox_table = unique_name("outbox");
    create_table(&dynamodb, &idempotency, "pk", None).await;
    create_outbox_table(&dynamodb, &outbox_table).await;
    let mut stream = Stream::of_table(
        &dynamodb,
        aws_sdk_dynamodbstreams::Client::new(&aws),
        &outbox_table,
    )
    .await;
    let payments_queue = create_queue(&sqs, "charge-payment", false).await;
    let orders_queue = create_queue(&sqs, "orders", false).await;
    let dlq = create_queue(&sqs, "traces-dlq", false).await;
    let failures = create_queue(&sqs, "outbox-relay-failures", false).await;
    let payments = sqsafe_test_servers::PaymentsApi::builder()
        .keys_in_new_table(dynamodb.clone())
        .await
        .start("127.0.0.1:0".parse().expect("addr"))
        .await
        .expect("payments API");
    let payment = event_file("charge-payment-batch.json").records[0]
        .body
        .clone()
        .expect("body");

    // 1. The writer, on a message that carries its producer's traceparent.
    let writer = sqsafe::consumer::<OrderWriter>()
        .build(
            &Setup::new(
                Env::from_pairs([
                    ("IDEMPOTENCY_TABLE", idempotency.clone()),
                    ("DLQ_URL", dlq.clone()),
                    ("QUEUE_URL", orders_queue),
                    ("OUTBOX_TABLE", outbox_table.clone()),
                    ("PAYMENTS_QUEUE_URL", payments_queue.clone()),
                    ("PAYMENT_BODY", payment),
                ]),
                aws.clone(),
            )
            .expect("setup"),
        )
        .expect("writer");
    let mut message = SqsMessage::default();
    message.message_id = Some(unique_name("m"));
    message.body = Some(r#"{"order_id":"o-1"}"#.to_owned());
    message.event_source_arn = Some("arn:aws:sqs:us-east-1:123456789012:orders".to_owned());
    let mut traceparent = SqsMessageAttribute::default();
    traceparent.string_value = Some(format!("00-{PRODUCER_TRACE}-{PRODUCER_SPAN}-01"));
    traceparent.data_type = Some("String".to_owned());
    message
        .message_attributes
        .insert("traceparent".to_owned(), traceparent);
    let mut orders = SqsEvent::default();
    orders.records = vec![message];
    let answer = writer
        .handle(invocation(orders, "req-writer"))
        .await
        .expect("batch");
    assert!(answer.batch_item_failures.is_empty());

    // 2. The relay, on what moto's stream holds.
    let relay = OutboxRelay::from_clients(&Clients::new(
        Env::from_pairs([
            ("OUTBOX_TABLE", outbox_table.clone()),
            ("OUTBOX_DESTINATIONS", payments_queue.clone()),
            ("FAILURE_QUEUE_URL", failures),
        ]),
        aws.clone(),
    ))
    .expect("relay");
    let batch: Event = stream.next_batch().await;
    let mut context = lambda_runtime::Context::default();
    context.request_id = "req-relay".into();
    let relayed = relay
        .handle(LambdaEvent::new(batch, context))
        .await
        .expect("relay batch");
    assert!(relayed.batch_item_failures.is_empty());

    // 3. charge-payment, on the published message as the event source mapping hands it over.
    let received = receive(&sqs, &payments_queue).await;
    assert_eq!(received.len(), 1);
    let arn = queue_arn(&sqs, &payments_queue).await;
    let charge_payment = sqsafe::consumer::<charge_payment::ChargePayment>()
        .build(
            &Setup::new(
                Env::from_pairs([
                    ("IDEMPOTENCY_TABLE", idempotency),
                    ("PAYMENTS_API_URL", payments.base_url()),
                    ("DLQ_URL", dlq),
                    ("QUEUE_URL", payments_queue.clone()),
                ]),
                aws.clone(),
            )
            .expect("setup"),
        )
        .expect("charge-payment");
    let event: SqsEvent =
        serde_json::from_value(sqsafe_local::esm::sqs_event(&received, &arn)).expect("event");
    let answer = charge_payment
        .handle(invocation(event, "req-charge"))
        .await
        .expect("batch");
    assert!(answer.batch_item_failures.is_empty());
    assert_eq!(payments.charges().len(), 1);

    // Every handler sent its spans before answering: nothing is left to flush.
    let spans = receiver.spans();
    let in_trace: Vec<ReceivedSpan> = spans
        .iter()
        .filter(|s| s.trace_id == PRODUCER_TRACE)
        .cloned()
        .collect();
    let writer_record = one(&in_trace, "writer record", |s| {
        s.name == "record" && s.attributes.get("queue").map(String::as_str) == Some("orders")
    });
    assert_eq!(
        writer_record.parent_span_id.as_deref(),
        Some(PRODUCER_SPAN),
        "the record is a child of its producer's span"
    );
    assert_eq!(
        writer_record.links,
        vec![(PRODUCER_TRACE.to_owned(), PRODUCER_SPAN.to_owned())],
        "and linked to it"
    );
    let publish = one(&in_trace, "outbox publish", |s| s.name == "outbox publish");
    assert_eq!(
        publish.parent_span_id.as_deref(),
        Some(writer_record.span_id.as_str()),
        "the relay's publish continues the trace the event was written in"
    );
    let payment_record = one(&in_trace, "charge-payment record", |s| {
        s.name == "record" && s.span_id != writer_record.span_id
    });
    assert_eq!(
        payment_record.parent_span_id.as_deref(),
        Some(publish.span_id.as_str()),
        "the relayed message's consumer span is in the same trace, under the publish"
    );
    assert_eq!(
        payment_record.links,
        vec![(PRODUCER_TRACE.to_owned(), publish.span_id.clone())]
    );
    let call = one(&in_trace, "http call", |s| s.name == "http call");
    assert_eq!(
        call.parent_span_id.as_deref(),
        Some(payment_record.span_id.as_str()),
        "the payment call is the effect of that record"
    );
    let invocations = spans.iter().filter(|s| s.name == "invocation").count();
    assert_eq!(invocations, 3, "one span per invocation: {spans:#?}");
    assert!(
        spans
            .iter()
            .all(|s| s.service_name.as_deref() == Some("traces-test")),
        "{spans:#?}"
    );
}
