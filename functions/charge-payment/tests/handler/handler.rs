//! charge-payment against DynamoDB's and SQS's real APIs (moto server, started by `make test`) and the local payments
//! API, driven by the sample events in `events/`, on the tables and queues template.yaml defines for it
//! (sqsafe_local's `Harness`).

use aws_lambda_events::sqs::SqsEvent;
use aws_sdk_sqs::types::{MessageSystemAttributeName, QueueAttributeName};
use charge_payment::{Charge, ChargePayment, PaymentV1};
use serde::Deserialize;
use sqsafe::{App, Consumer, Context, Effect, Intent, RecordError, Setup};
use sqsafe_idempotency::KeyBuilder;
use sqsafe_local::harness::{DeadLetter, Harness};
use sqsafe_test_servers::{Fault, PaymentsApi, RunningPayments};
use sqsafe_testkit::{RequestCounter, event_file, invocation, sdk_config};

/// charge-payment on its template's resources (sqsafe_local's `Harness`), calling the local payments API.
struct Fixture {
    h: Harness<ChargePayment>,
    next: App<NextBuild>,
    payments: RunningPayments,
    /// The DynamoDB requests the function sent, by operation.
    requests: RequestCounter,
    /// The test's own clients (not counted), the idempotency table, the function's queue.
    dynamodb: aws_sdk_dynamodb::Client,
    sqs: aws_sdk_sqs::Client,
    idempotency_table: String,
    queue_url: String,
}

async fn fixture() -> Fixture {
    fixture_in("claim").await
}

/// charge-payment with `SQSAFE_IDEMPOTENCY_MODE` = `mode`.
async fn fixture_in(mode: &str) -> Fixture {
    let aws = sdk_config().await;
    let dynamodb = aws_sdk_dynamodb::Client::new(&aws);
    let payments = PaymentsApi::builder()
        .keys_in_new_table(dynamodb.clone())
        .await
        .start("127.0.0.1:0".parse().expect("addr"))
        .await
        .expect("payments API");
    let requests = RequestCounter::default();
    let h = Harness::builder()
        .parameter("PaymentsApiUrl", payments.base_url())
        .env("SQSAFE_IDEMPOTENCY_MODE", mode)
        .dynamodb(sqsafe_testkit::dynamodb(&requests).await)
        .sample("charge-payment-batch.json")
        .start()
        .await
        .expect("charge-payment on its template's resources");
    let setup = h.setup();
    Fixture {
        next: sqsafe::consumer::<NextBuild>()
            .build(setup)
            .expect("next build"),
        idempotency_table: setup.settings.idempotency_table.clone(),
        queue_url: setup.env.required("QUEUE_URL").expect("QUEUE_URL"),
        sqs: setup.sqs.clone(),
        dynamodb,
        h,
        payments,
        requests,
    }
}

impl Fixture {
    async fn invoke(&self, event: SqsEvent) -> Vec<String> {
        failures(self.h.app().handle(invocation(event, "req-test")).await)
    }

    /// Invokes the next build of the consumer, whose event type has gained an optional field.
    async fn invoke_as_next(&self, event: SqsEvent) -> Vec<String> {
        failures(self.next.handle(invocation(event, "req-next")).await)
    }

    /// (error kind, original message id) of every dead-lettered message.
    async fn dead_letters(&self) -> Vec<(String, String)> {
        let get = |letter: &DeadLetter, field| letter.context(field).unwrap_or_default();
        self.h
            .dead_letters()
            .await
            .iter()
            .map(|m| (get(m, "error_kind"), get(m, "original_message_id")))
            .collect()
    }
}

fn downstream_key(payment_id: &str) -> String {
    KeyBuilder::new("charge-payment", 1)
        .tenant("acme")
        .intent("payment", payment_id)
        .build()
        .expect("key")
        .downstream_key()
}

fn failures(
    response: Result<aws_lambda_events::sqs::SqsBatchResponse, sqsafe::layers::batch::BatchError>,
) -> Vec<String> {
    response
        .expect("batch")
        .batch_item_failures
        .into_iter()
        .map(|f| f.item_identifier)
        .collect()
}

fn only(event: SqsEvent, message_id: &str) -> SqsEvent {
    let mut event = event;
    event
        .records
        .retain(|r| r.message_id.as_deref() == Some(message_id));
    event
}

/// `PaymentRequested` as a later build reads it: version 1 with an optional field added.
#[derive(Debug, Deserialize)]
#[serde(tag = "version")]
enum PaymentRequestedNext {
    #[serde(rename = "1")]
    V1 {
        #[serde(flatten)]
        payment: PaymentV1Fields,
        /// Read by the next build (for a receipt, say); not part of the intent.
        #[serde(default)]
        #[allow(dead_code)]
        note: Option<String>,
    },
}

#[derive(Debug, Deserialize)]
struct PaymentV1Fields {
    payment_id: String,
    tenant: String,
    amount: u64,
    currency: String,
    customer_id: String,
}

impl PaymentRequestedNext {
    fn payment(&self) -> PaymentV1 {
        let PaymentRequestedNext::V1 {
            payment: p,
            note: _,
        } = self;
        PaymentV1 {
            payment_id: p.payment_id.clone(),
            tenant: p.tenant.clone(),
            amount: p.amount,
            currency: p.currency.clone(),
            customer_id: p.customer_id.clone(),
        }
    }
}

/// The next build of charge-payment: the same consumer (name, version, intent fields, effect) reading the new event
/// type.
struct NextBuild(ChargePayment);

impl Consumer for NextBuild {
    const NAME: &'static str = ChargePayment::NAME;
    const EFFECT_VERSION: u32 = ChargePayment::EFFECT_VERSION;
    const INTENT_FIELDS: &'static [&'static str] = ChargePayment::INTENT_FIELDS;
    const DOWNSTREAM_KEYED: bool = ChargePayment::DOWNSTREAM_KEYED;
    type Payload = PaymentRequestedNext;
    type Output = Charge;

    fn new(setup: &Setup) -> Result<Self, sqsafe::Error> {
        ChargePayment::new(setup).map(NextBuild)
    }

    fn intent(event: &PaymentRequestedNext) -> Intent {
        let p = event.payment();
        Intent::new(&p.tenant, "payment", &p.payment_id)
    }

    fn effect<'a>(
        &'a self,
        event: PaymentRequestedNext,
        cx: &'a Context<'a>,
    ) -> Result<Effect<'a, Charge>, RecordError> {
        Ok(Effect::call(async move {
            self.0.charge(&event.payment(), cx).await
        }))
    }
}

/// `event` with each record's body changed by `edit` and its message id replaced by `message_id`.
fn edited(event: &SqsEvent, message_id: &str, edit: impl Fn(&mut serde_json::Value)) -> SqsEvent {
    let mut event = event.clone();
    for record in &mut event.records {
        let mut body: serde_json::Value =
            serde_json::from_str(record.body.as_deref().unwrap_or_default()).expect("json body");
        edit(&mut body);
        record.body = Some(body.to_string());
        record.message_id = Some(message_id.to_owned());
    }
    event
}

const FIRST: &str = "0b1e6c4a-0001-4e7a-9c1d-000000000001";
const SECOND: &str = "0b1e6c4a-0002-4e7a-9c1d-000000000002";
const DUPLICATE: &str = "0b1e6c4a-0003-4e7a-9c1d-000000000003";
const POISON: &str = "0b1e6c4a-0004-4e7a-9c1d-000000000004";

#[tokio::test]
async fn the_sample_batch_charges_each_payment_once_and_dead_letters_the_poison() {
    sample_batch(fixture().await).await;
}

#[tokio::test]
async fn the_sample_batch_charges_each_payment_once_and_dead_letters_the_poison_in_the_keyed_mode()
{
    sample_batch(fixture_in("keyed").await).await;
}

/// In the keyed mode a fresh payment costs the batch's one read and one write; a redelivery after the charge is the
/// read alone, no write and no call; other content under the same payment is refused before any call.
#[tokio::test]
async fn the_keyed_mode_reads_the_batch_once_writes_once_per_payment_and_replays_without_a_write() {
    let fx = fixture_in("keyed").await;
    let fresh = || {
        let mut event = event_file("charge-payment-batch.json");
        event
            .records
            .retain(|r| [Some(FIRST), Some(SECOND)].contains(&r.message_id.as_deref()));
        event
    };
    let dynamodb_requests = || {
        let mut sent = fx.requests.take();
        sent.sort();
        sent
    };
    dynamodb_requests();
    let report =
        fx.h.app()
            .handle_report(invocation(fresh(), "req-keyed-1"))
            .await
            .expect("batch");
    assert!(report.response.batch_item_failures.is_empty());
    assert!(
        report.records.iter().all(|r| matches!(
            r.disposition,
            sqsafe::Disposition::Succeeded(sqsafe::Processed::Applied)
        )),
        "{:?}",
        report.records
    );
    assert_eq!(
        dynamodb_requests(),
        ["BatchGetItem", "PutItem", "PutItem"],
        "one read for the batch, one write per payment"
    );
    assert_eq!(fx.payments.charges().len(), 2);
    let completed = sqsafe_testkit::completed_records(&fx.dynamodb, &fx.idempotency_table).await;
    assert_eq!(completed.len(), 2, "{completed:?}");
    assert!(
        completed
            .iter()
            .all(|item| !item.contains_key("lease_expires_at")),
        "no lease in the keyed mode: {completed:?}"
    );
    dynamodb_requests();

    // The same batch again (SQS redelivered it): replayed from the read, no write, no call.
    let report =
        fx.h.app()
            .handle_report(invocation(fresh(), "req-keyed-2"))
            .await
            .expect("batch");
    assert!(
        report.records.iter().all(|r| matches!(
            r.disposition,
            sqsafe::Disposition::Succeeded(sqsafe::Processed::Replayed)
        )),
        "{:?}",
        report.records
    );
    assert_eq!(dynamodb_requests(), ["BatchGetItem"], "the read alone");
    assert_eq!(fx.payments.stats().requests, 2, "no call for a replay");

    // Another amount for p-1001: refused from the read, before any call, and dead-lettered.
    let failed = fx.invoke(event_file("charge-payment-mismatch.json")).await;
    assert!(
        failed.is_empty(),
        "permanent: acknowledged after the DLQ took it"
    );
    assert_eq!(dynamodb_requests(), ["BatchGetItem"], "the read alone");
    assert_eq!(
        fx.payments.stats().requests,
        2,
        "the payments API was not called"
    );
    assert_eq!(
        fx.dead_letters().await,
        [(
            "payload_mismatch".to_owned(),
            "0b1e6c4a-0005-4e7a-9c1d-000000000005".to_owned()
        )]
    );
}

/// Two contents under one payment in one batch, in the keyed mode: neither read finds a record, so both may call the
/// payments API with the same `Idempotency-Key`. The API charges the first and refuses the other content (422), and
/// the record completes with the content charged, never with the other (what the model checker found the keyed mode
/// needs of its downstream: book, How it works). The other is dead-lettered: as `downstream_key_reused` when its call
/// was refused, as `payload_mismatch` when it read the completed record; a record answered `409` (the first call still
/// in flight) comes back and is sent again until it settles.
#[tokio::test]
async fn the_keyed_mode_completes_only_the_content_the_api_charged() {
    let fx = fixture_in("keyed").await;
    let mut event = event_file("charge-payment-batch.json");
    event
        .records
        .retain(|r| r.message_id.as_deref() == Some(FIRST));
    event
        .records
        .extend(event_file("charge-payment-mismatch.json").records);
    let mut pending = event;
    for round in 1..=5 {
        let failed = fx.invoke(pending.clone()).await;
        if failed.is_empty() {
            break;
        }
        assert!(round < 5, "still failing after 5 rounds: {failed:?}");
        pending.records.retain(|r| {
            r.message_id
                .as_deref()
                .is_some_and(|id| failed.iter().any(|f| f == id))
        });
    }
    let charges = fx.payments.charges();
    assert_eq!(charges.len(), 1, "one charge for p-1001: {charges:?}");
    let charged = charges[0].amount;
    let dead = fx.dead_letters().await;
    assert_eq!(
        dead.len(),
        1,
        "the other content is dead-lettered: {dead:?}"
    );
    assert!(
        ["downstream_key_reused", "payload_mismatch"].contains(&dead[0].0.as_str()),
        "{dead:?}"
    );
    let completed = sqsafe_testkit::completed_records(&fx.dynamodb, &fx.idempotency_table).await;
    assert_eq!(completed.len(), 1, "{completed:?}");
    let stored = completed[0]
        .get("result")
        .and_then(|r| r.as_s().ok())
        .expect("a stored result");
    let stored: serde_json::Value = serde_json::from_str(stored).expect("json result");
    assert_eq!(
        stored["amount"].as_u64(),
        Some(charged),
        "the record holds the charge the API made: {stored}"
    );
    // The message whose content was charged was applied; the other one is the dead letter.
    let charged_message = if charged == 1250 {
        FIRST
    } else {
        "0b1e6c4a-0005-4e7a-9c1d-000000000005"
    };
    assert_ne!(dead[0].1, charged_message, "{dead:?}");
}

async fn sample_batch(fx: Fixture) {
    let failed = fx.invoke(event_file("charge-payment-batch.json")).await;
    // p-1001 arrives twice in one batch. Records run concurrently, so one copy either replays the completed charge
    // or loses the claim race, finds the key in progress (transient) and comes back: never a second charge.
    assert!(
        failed.len() <= 1
            && failed
                .iter()
                .all(|f| [FIRST, DUPLICATE].contains(&f.as_str())),
        "{failed:?}"
    );
    for loser in &failed {
        let again = fx
            .invoke(only(event_file("charge-payment-batch.json"), loser))
            .await;
        assert!(again.is_empty(), "replayed");
    }
    let charges = fx.payments.charges();
    let mut paid: Vec<(&str, u64)> = charges
        .iter()
        .map(|c| (c.payment_id.as_str(), c.amount))
        .collect();
    paid.sort();
    assert_eq!(
        paid,
        [("p-1001", 1250), ("p-1002", 990)],
        "one charge per payment"
    );
    for charge in &charges {
        assert_eq!(
            charge.idempotency_key,
            downstream_key(&charge.payment_id),
            "derived from the intent, not the attempt"
        );
    }
    let correlation: Vec<_> = charges
        .iter()
        .filter_map(|c| c.correlation_id.as_deref())
        .collect();
    assert!(
        correlation.contains(&"corr-a1") && correlation.contains(&"corr-a2"),
        "propagated: {correlation:?}"
    );
    assert_eq!(
        fx.dead_letters().await,
        [("bad_payload".to_owned(), POISON.to_owned())]
    );
}

#[tokio::test]
async fn the_same_key_with_another_amount_is_refused_and_dead_lettered() {
    let fx = fixture().await;
    fx.invoke(only(
        event_file("charge-payment-batch.json"),
        "0b1e6c4a-0001-4e7a-9c1d-000000000001",
    ))
    .await;
    let failed = fx.invoke(event_file("charge-payment-mismatch.json")).await;
    assert!(
        failed.is_empty(),
        "permanent: acknowledged after the DLQ took it"
    );
    assert_eq!(fx.payments.charges().len(), 1, "no second charge");
    assert_eq!(
        fx.payments.stats().requests,
        1,
        "the payments API was not even called"
    );
    assert_eq!(
        fx.dead_letters().await,
        [(
            "payload_mismatch".to_owned(),
            "0b1e6c4a-0005-4e7a-9c1d-000000000005".to_owned()
        )]
    );
}

#[tokio::test]
async fn a_charge_made_but_answered_503_is_not_made_again_on_redelivery() {
    let fx = fixture().await;
    let first = only(
        event_file("charge-payment-batch.json"),
        "0b1e6c4a-0002-4e7a-9c1d-000000000002",
    );
    fx.payments.force_next(Fault::After);
    assert_eq!(
        fx.invoke(first.clone()).await,
        ["0b1e6c4a-0002-4e7a-9c1d-000000000002"],
        "transient: comes back"
    );
    assert_eq!(
        fx.payments.charges().len(),
        1,
        "the money moved although the answer was 503"
    );
    assert!(fx.invoke(first).await.is_empty(), "the redelivery succeeds");
    assert_eq!(
        fx.payments.charges().len(),
        1,
        "the downstream Idempotency-Key made the retry a replay"
    );
    assert_eq!(fx.payments.stats().replays, 1);
}

#[tokio::test]
async fn a_503_before_charging_comes_back_and_the_retry_charges_once() {
    let fx = fixture().await;
    let first = only(
        event_file("charge-payment-batch.json"),
        "0b1e6c4a-0002-4e7a-9c1d-000000000002",
    );
    fx.payments.force_next(Fault::Before);
    assert_eq!(fx.invoke(first.clone()).await.len(), 1);
    assert!(fx.payments.charges().is_empty());
    assert!(fx.invoke(first).await.is_empty());
    assert_eq!(fx.payments.charges().len(), 1);
    assert!(fx.dead_letters().await.is_empty());
}

#[tokio::test]
async fn a_downstream_422_is_permanent() {
    let fx = fixture().await;
    // Someone else used this payment's downstream key with another body: the payments API refuses with 422.
    let _ = rustls::crypto::ring::default_provider().install_default();
    let other = reqwest::Client::new()
        .post(format!("{}/v1/charges", fx.payments.base_url()))
        .header("Idempotency-Key", downstream_key("p-1002"))
        .json(&serde_json::json!({"payment_id":"p-1002","amount":1,"currency":"EUR","customer_id":"x"}))
        .send()
        .await
        .expect("send");
    assert_eq!(other.status(), 201);
    let failed = fx
        .invoke(only(
            event_file("charge-payment-batch.json"),
            "0b1e6c4a-0002-4e7a-9c1d-000000000002",
        ))
        .await;
    assert!(failed.is_empty());
    assert_eq!(fx.dead_letters().await[0].0, "downstream_key_reused");
}

#[tokio::test]
async fn a_build_whose_event_gains_an_optional_field_replays_what_the_previous_build_charged() {
    let fx = fixture().await;
    let p1002 = only(event_file("charge-payment-batch.json"), SECOND);
    assert!(fx.invoke(p1002.clone()).await.is_empty(), "charged by v1");
    // The next build (version 1 plus an optional `note`) gets the redelivery as it was, and a copy republished by a
    // producer that already sends the new field.
    assert!(
        fx.invoke_as_next(p1002.clone()).await.is_empty(),
        "the redelivery is a replay"
    );
    let noted = edited(&p1002, "republished-with-note", |b| {
        b["note"] = "birthday gift".into();
    });
    assert!(
        fx.invoke_as_next(noted).await.is_empty(),
        "the copy with the new field is a replay"
    );
    assert_eq!(fx.payments.charges().len(), 1, "charged once");
    assert_eq!(
        fx.payments.stats().requests,
        1,
        "both duplicates were answered from the record, without calling the payments API"
    );
    // What defines the payment still counts: another amount under the same payment id is refused.
    let changed = edited(&p1002, "another-amount", |b| b["amount"] = 991.into());
    assert!(
        fx.invoke_as_next(changed).await.is_empty(),
        "permanent: dead-lettered"
    );
    assert_eq!(fx.payments.charges().len(), 1, "no second charge");
    assert_eq!(
        fx.dead_letters().await,
        [("payload_mismatch".to_owned(), "another-amount".to_owned())],
        "only the changed amount is a mismatch"
    );
}

#[tokio::test]
async fn a_transient_failure_comes_back_after_a_backoff_set_on_the_function_s_own_queue() {
    let fx = fixture().await;
    // A queue that makes a received message visible again at once: only the function's backoff can hide it.
    fx.sqs
        .set_queue_attributes()
        .queue_url(&fx.queue_url)
        .attributes(QueueAttributeName::VisibilityTimeout, "0")
        .send()
        .await
        .expect("visibility 0");
    let sample = only(event_file("charge-payment-batch.json"), SECOND);
    let body = sample.records[0].body.clone().expect("body");
    fx.sqs
        .send_message()
        .queue_url(&fx.queue_url)
        .message_body(&body)
        .send()
        .await
        .expect("send");
    let received = fx
        .sqs
        .receive_message()
        .queue_url(&fx.queue_url)
        .message_system_attribute_names(MessageSystemAttributeName::All)
        .send()
        .await
        .expect("receive")
        .messages
        .unwrap_or_default();
    let [message] = received.as_slice() else {
        panic!("expected the message once: {received:?}");
    };
    let event: SqsEvent = serde_json::from_value(serde_json::json!({"Records": [{
        "messageId": message.message_id(),
        "receiptHandle": message.receipt_handle(),
        "body": body,
        "attributes": {"ApproximateReceiveCount": "1"},
        "messageAttributes": {},
        "eventSource": "aws:sqs",
        "eventSourceARN": "arn:aws:sqs:us-east-1:123456789012:charge-payment",
    }]}))
    .expect("event");

    fx.payments.force_next(Fault::Before);
    assert_eq!(fx.invoke(event).await.len(), 1, "transient: reported");
    let again = fx
        .sqs
        .receive_message()
        .queue_url(&fx.queue_url)
        .send()
        .await
        .expect("receive")
        .messages
        .unwrap_or_default();
    assert!(
        again.is_empty(),
        "the backoff (30 s or more on the first delivery) keeps it invisible: {again:?}"
    );
    let hidden = fx
        .sqs
        .get_queue_attributes()
        .queue_url(&fx.queue_url)
        .attribute_names(QueueAttributeName::ApproximateNumberOfMessagesNotVisible)
        .send()
        .await
        .expect("attributes")
        .attributes
        .unwrap_or_default();
    assert_eq!(
        hidden
            .get(&QueueAttributeName::ApproximateNumberOfMessagesNotVisible)
            .map(String::as_str),
        Some("1"),
        "still in the queue, waiting for its retry"
    );
}

/// What a completed record of charge-payment costs, by DynamoDB's sizing rules (`sqsafe_idempotency::size`): its
/// bytes, names and values, and the write units one write of it consumes. Printed (`--nocapture`) and held: at most
/// 1 KB, one write unit (a record that grows past it costs a second unit on every write of it).
#[tokio::test]
async fn a_completed_record_is_measured_by_dynamodbs_sizing_rules() {
    use sqsafe_idempotency::size;
    let fx = fixture().await;
    let mut event = event_file("charge-payment-batch.json");
    event.records.truncate(1);
    assert!(fx.invoke(event).await.is_empty());
    let completed = sqsafe_testkit::completed_records(&fx.dynamodb, &fx.idempotency_table).await;
    assert_eq!(completed.len(), 1, "{completed:?}");
    let item = &completed[0];
    let bytes = size::item_bytes(item);
    let mut parts: Vec<(usize, &str)> = item
        .iter()
        .map(|(name, value)| {
            (
                size::item_bytes(&std::collections::HashMap::from([(
                    name.clone(),
                    value.clone(),
                )])),
                name.as_str(),
            )
        })
        .collect();
    parts.sort_unstable_by(|a, b| b.cmp(a));
    println!(
        "charge-payment's completed record: {bytes} bytes, {} write unit(s), {} read unit(s) consistent; by attribute (name and value): {parts:?}",
        size::write_units(bytes),
        size::consistent_read_units(bytes)
    );
    assert!(
        bytes > 100,
        "a record has its key, token, fingerprint and result: {bytes}"
    );
    assert_eq!(
        size::write_units(bytes),
        1,
        "one write unit: {bytes} bytes, {parts:?}"
    );
}

/// The records of p-1001 and p-1002, as the sample batch has them.
fn first_and_second() -> SqsEvent {
    let mut event = event_file("charge-payment-batch.json");
    event
        .records
        .retain(|r| [Some(FIRST), Some(SECOND)].contains(&r.message_id.as_deref()));
    event
}

/// A stored item that does not parse fails its own record only (issue 40, item 3). The batch's read fails once on
/// it and is not tried again for the invocation: each record reads its own key instead, so p-1001 is charged and
/// p-1002, whose item is unreadable, comes back. (Before: the whole read failed for every record, each record read
/// the whole batch again, and no payment of any batch holding p-1002 was ever charged.)
#[tokio::test]
async fn the_keyed_mode_fails_only_the_record_whose_stored_item_does_not_parse() {
    let fx = fixture_in("keyed").await;
    let unreadable = KeyBuilder::new("charge-payment", 1)
        .tenant("acme")
        .intent("payment", "p-1002")
        .build()
        .expect("key");
    fx.dynamodb
        .put_item()
        .table_name(&fx.idempotency_table)
        .item(
            "pk",
            aws_sdk_dynamodb::types::AttributeValue::S(unreadable.as_str().to_owned()),
        )
        .item(
            "status",
            aws_sdk_dynamodb::types::AttributeValue::S("NOT_A_STATUS".to_owned()),
        )
        .send()
        .await
        .expect("a malformed item");
    fx.requests.take();
    let failed = fx.invoke(first_and_second()).await;
    assert_eq!(failed, [SECOND], "only the record of the unreadable item");
    let charges = fx.payments.charges();
    assert_eq!(
        charges
            .iter()
            .map(|c| c.payment_id.as_str())
            .collect::<Vec<_>>(),
        ["p-1001"]
    );
    let mut sent = fx.requests.take();
    sent.sort();
    assert_eq!(
        sent,
        ["BatchGetItem", "BatchGetItem", "BatchGetItem", "PutItem"],
        "the batch's read once, then each record's own key, and p-1001's completion"
    );
}

/// Two records of a hand-built event that share one `messageId` each run their own payload in the keyed mode (issue
/// 40, item 5: the batch's parse kept one payload per id, so the first record ran the second's, and p-1001 was
/// never charged while p-1002's second copy replayed).
#[tokio::test]
async fn the_keyed_mode_runs_each_records_own_payload_when_two_share_a_message_id() {
    let fx = fixture_in("keyed").await;
    let mut event = first_and_second();
    event.records[1].message_id = Some(FIRST.to_owned());
    let failed = fx.invoke(event).await;
    assert!(failed.is_empty(), "{failed:?}");
    let mut paid: Vec<(String, u64)> = fx
        .payments
        .charges()
        .iter()
        .map(|c| (c.payment_id.clone(), c.amount))
        .collect();
    paid.sort();
    assert_eq!(
        paid,
        [("p-1001".to_owned(), 1250), ("p-1002".to_owned(), 990)]
    );
}
