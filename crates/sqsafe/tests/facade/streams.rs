//! Stream consumers against DynamoDB's and SQS's real APIs (moto server): the same façade fed Kinesis and DynamoDB
//! Streams batches, each shard in order and stopped at its first record that must come back, redelivered from there
//! as Lambda does, every effect applied once and in order; poison in the failure queue with its content and origin.

use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, Ordering};

use aws_lambda_events::dynamodb::Event as DynamoDbEvent;
use aws_lambda_events::kinesis::KinesisEvent;
use base64::Engine as _;
use serde::Deserialize;
use sqsafe::{
    Change, ChangeKind, Consumer, Context, Disposition, Effect, Env, Intent, Processed,
    RecordError, Setup,
};
use sqsafe_testkit::{create_queue, create_table, invocation_of, sdk_config, unique_name};

const STREAM_ARN: &str = "arn:aws:kinesis:us-east-1:123456789012:stream/orders";
const TABLE_STREAM_ARN: &str =
    "arn:aws:dynamodb:us-east-1:123456789012:table/orders/stream/2026-12-06T00:00:00.000";

/// An idempotency table and a failure queue on moto; no `QUEUE_URL` (a stream consumer has none).
async fn setup(extra: &[(&str, &str)]) -> (Setup, String) {
    let aws = sdk_config().await;
    let table = unique_name("idem");
    create_table(&aws_sdk_dynamodb::Client::new(&aws), &table, "pk", None).await;
    let dlq = create_queue(&aws_sdk_sqs::Client::new(&aws), "stream-dlq", false).await;
    let mut pairs = vec![
        ("IDEMPOTENCY_TABLE".to_owned(), table),
        ("DLQ_URL".to_owned(), dlq.clone()),
    ];
    pairs.extend(
        extra
            .iter()
            .map(|(k, v)| ((*k).to_owned(), (*v).to_owned())),
    );
    (Setup::new(Env::from_pairs(pairs), aws).expect("setup"), dlq)
}

fn seq(n: u32) -> String {
    format!("{n:056}")
}

/// Kinesis records of one shard, `{"n": n}` with sequence number `n`.
fn kinesis(ns: impl IntoIterator<Item = u32>) -> KinesisEvent {
    let records: Vec<_> = ns
        .into_iter()
        .map(|n| {
            serde_json::json!({
                "kinesis": {
                    "kinesisSchemaVersion": "1.0",
                    "partitionKey": "order-7",
                    "sequenceNumber": seq(n),
                    "data": base64::engine::general_purpose::STANDARD.encode(format!(r#"{{"n":{n}}}"#)),
                    "approximateArrivalTimestamp": 1_780_000_000.123,
                },
                "eventSource": "aws:kinesis",
                "eventVersion": "1.0",
                "eventID": format!("shardId-000000000000:{}", seq(n)),
                "eventName": "aws:kinesis:record",
                "awsRegion": "us-east-1",
                "eventSourceARN": STREAM_ARN,
            })
        })
        .collect();
    serde_json::from_value(serde_json::json!({ "Records": records })).expect("Kinesis event")
}

#[derive(Deserialize)]
struct Numbered {
    n: u32,
}

/// What the Kinesis consumer applied, in order.
static APPLIED: Mutex<Vec<u32>> = Mutex::new(Vec::new());
/// Record 4 fails once, transiently.
static FAILED_ONCE: AtomicBool = AtomicBool::new(false);

struct Tally;

impl Consumer for Tally {
    const NAME: &'static str = "tally";
    const EFFECT_VERSION: u32 = 1;
    const INTENT_FIELDS: &'static [&'static str] = &["/n"];
    type Payload = Numbered;
    type Output = u32;

    fn new(_: &Setup) -> Result<Self, sqsafe::Error> {
        Ok(Tally)
    }

    fn intent(p: &Numbered) -> Intent {
        Intent::untenanted("n", p.n.to_string())
    }

    fn effect<'a>(
        &'a self,
        p: Numbered,
        cx: &'a Context<'a>,
    ) -> Result<Effect<'a, u32>, RecordError> {
        let origin = cx.stream_origin().expect("a stream record");
        assert_eq!(origin.sequence_number, seq(p.n));
        assert_eq!(origin.partition_key.as_deref(), Some("order-7"));
        Ok(Effect::call(async move {
            if p.n == 4 && !FAILED_ONCE.swap(true, Ordering::SeqCst) {
                return Err(RecordError::transient(
                    "downstream_5xx",
                    "503 from the ledger",
                ));
            }
            APPLIED.lock().expect("lock").push(p.n);
            Ok(p.n)
        }))
    }
}

/// The issue's case: 10 records of one partition key, the 4th failing once. Records 1-3 apply, 4-10 do not, the
/// answer names the 4th; redelivered from the 4th (Lambda's checkpoint), each applies once, in order; the whole
/// batch again (a bisect's retry, a replayed shard) applies nothing.
#[tokio::test]
async fn a_kinesis_batch_stops_at_its_failed_record_and_resumes_from_it_each_applied_once_in_order()
{
    let (setup, _) = setup(&[]).await;
    let app = sqsafe::consumer::<Tally>().build(&setup).expect("app");

    let first = app
        .handle_kinesis(invocation_of(kinesis(1..=10), "req-1"))
        .await
        .expect("batch");
    let named: Vec<_> = first
        .batch_item_failures
        .iter()
        .map(|f| f.item_identifier.clone().unwrap_or_default())
        .collect();
    assert_eq!(named, [seq(4)], "the 4th sequence number, alone");
    assert_eq!(
        *APPLIED.lock().expect("lock"),
        [1, 2, 3],
        "nothing after the 4th"
    );

    let resumed = app
        .handle_kinesis_report(invocation_of(kinesis(4..=10), "req-2"))
        .await
        .expect("batch");
    assert!(resumed.response.batch_item_failures.is_empty());
    assert_eq!(
        *APPLIED.lock().expect("lock"),
        (1..=10).collect::<Vec<_>>(),
        "each once, in order"
    );

    let replayed = app
        .handle_kinesis_report(invocation_of(kinesis(1..=10), "req-3"))
        .await
        .expect("batch");
    assert!(
        replayed
            .records
            .iter()
            .all(|r| matches!(r.disposition, Disposition::Succeeded(Processed::Replayed))),
        "{:?}",
        replayed.records
    );
    assert_eq!(APPLIED.lock().expect("lock").len(), 10);
}

#[derive(Debug, Deserialize)]
struct Order {
    id: String,
    amount: i64,
}

static LEDGER: Mutex<Vec<(String, i64)>> = Mutex::new(Vec::new());

/// A DynamoDB-stream consumer: its payload is the change, keyed by the record's identity (its eventID).
struct OrderChanges;

impl Consumer for OrderChanges {
    const NAME: &'static str = "order-changes";
    const EFFECT_VERSION: u32 = 1;
    const INTENT_FIELDS: &'static [&'static str] = &["/newImage"];
    type Payload = Change<Order>;
    type Output = ();

    fn new(_: &Setup) -> Result<Self, sqsafe::Error> {
        Ok(OrderChanges)
    }

    fn intent(_: &Change<Order>) -> Intent {
        Intent::of_record()
    }

    fn validate(change: &Change<Order>) -> Result<(), RecordError> {
        match &change.new_image {
            Some(order) if order.amount < 0 => Err(RecordError::permanent(
                "negative_amount",
                format!("order {} has amount {}", order.id, order.amount),
            )),
            _ => Ok(()),
        }
    }

    fn effect<'a>(
        &'a self,
        change: Change<Order>,
        cx: &'a Context<'a>,
    ) -> Result<Effect<'a, ()>, RecordError> {
        assert!(cx.idempotency_key().as_str().ends_with(&change.event_id));
        Ok(Effect::call(async move {
            if change.event_name != ChangeKind::Remove
                && let Some(order) = change.new_image
            {
                LEDGER.lock().expect("lock").push((order.id, order.amount));
            }
            Ok(())
        }))
    }
}

fn change(n: u32, amount: i64) -> serde_json::Value {
    serde_json::json!({
        "eventID": format!("event-{n}"),
        "eventName": "INSERT",
        "eventVersion": "1.1",
        "eventSource": "aws:dynamodb",
        "awsRegion": "us-east-1",
        "dynamodb": {
            "ApproximateCreationDateTime": 1_780_000_000,
            "Keys": {"id": {"S": format!("o-{n}")}},
            "NewImage": {"id": {"S": format!("o-{n}")}, "amount": {"N": amount.to_string()}},
            "SequenceNumber": format!("{}", 100 + n),
            "SizeBytes": 40,
            "StreamViewType": "NEW_IMAGE",
        },
        "eventSourceARN": TABLE_STREAM_ARN,
    })
}

#[tokio::test]
async fn a_dynamodb_change_is_typed_keyed_by_its_event_id_and_poison_goes_to_the_failure_queue_with_its_content()
 {
    let (setup, dlq) = setup(&[]).await;
    let app = sqsafe::consumer::<OrderChanges>()
        .build(&setup)
        .expect("app");
    let event: DynamoDbEvent = serde_json::from_value(serde_json::json!({
        "Records": [change(1, 1250), change(2, -5), change(3, 700)]
    }))
    .expect("DynamoDB Streams event");

    let report = app
        .handle_dynamodb_report(invocation_of(event.clone(), "req-1"))
        .await
        .expect("batch");
    assert!(report.response.batch_item_failures.is_empty());
    assert!(matches!(
        report.records[1].disposition,
        Disposition::DeadLettered(_)
    ));
    assert_eq!(
        *LEDGER.lock().expect("lock"),
        [("o-1".to_owned(), 1250), ("o-3".to_owned(), 700)],
        "the shard went on past the poison"
    );

    let letters = sqsafe_testkit::receive(&setup.sqs, &dlq).await;
    assert_eq!(letters.len(), 1);
    let body: serde_json::Value =
        serde_json::from_str(letters[0].body().expect("body")).expect("the change, as JSON");
    assert_eq!(
        body["newImage"],
        serde_json::json!({"id": "o-2", "amount": -5})
    );
    assert_eq!(
        sqsafe_testkit::dlq_context(&letters[0], "error_kind").as_deref(),
        Some("negative_amount")
    );
    assert_eq!(
        sqsafe_testkit::dlq_context(&letters[0], "original_message_id").as_deref(),
        Some("102")
    );
    let stream: serde_json::Value = serde_json::from_str(
        &sqsafe_testkit::dlq_context(&letters[0], "stream").expect("the record's origin"),
    )
    .expect("JSON");
    assert_eq!(stream["event_id"], "event-2");
    assert_eq!(stream["stream_arn"], TABLE_STREAM_ARN);
    assert_eq!(
        sqsafe_testkit::dlq_context(&letters[0], "source_queue"),
        None,
        "no queue to redrive it to"
    );

    // The same changes again (a replayed shard): keyed by their event ids, nothing applies twice.
    let again = app
        .handle_dynamodb(invocation_of(event, "req-2"))
        .await
        .expect("batch");
    assert!(again.batch_item_failures.is_empty());
    assert_eq!(LEDGER.lock().expect("lock").len(), 2);
}

#[tokio::test]
async fn a_stream_event_without_sequence_numbers_fails_the_invocation_by_name() {
    let (setup, _) = setup(&[]).await;
    let app = sqsafe::consumer::<Tally>().build(&setup).expect("app");
    let mut event = kinesis([1]);
    event.records[0].kinesis.sequence_number = String::new();
    let err = app
        .handle_kinesis(invocation_of(event, "req-1"))
        .await
        .expect_err("refused");
    assert_eq!(
        err.to_string(),
        "malformed event: Kinesis record 0 has no sequenceNumber"
    );
}

static KEYED_CALLS: Mutex<Vec<String>> = Mutex::new(Vec::new());

/// The keyed mode on a stream: records keyed by their identity, read for the batch at once.
struct KeyedTally;

impl Consumer for KeyedTally {
    const NAME: &'static str = "keyed-tally";
    const EFFECT_VERSION: u32 = 1;
    const INTENT_FIELDS: &'static [&'static str] = &["/n"];
    const DOWNSTREAM_KEYED: bool = true;
    type Payload = Numbered;
    type Output = u32;

    fn new(_: &Setup) -> Result<Self, sqsafe::Error> {
        Ok(KeyedTally)
    }

    fn intent(_: &Numbered) -> Intent {
        Intent::of_record()
    }

    fn effect<'a>(
        &'a self,
        p: Numbered,
        cx: &'a Context<'a>,
    ) -> Result<Effect<'a, u32>, RecordError> {
        let key = cx.downstream_key();
        Ok(Effect::call(async move {
            KEYED_CALLS.lock().expect("lock").push(key);
            Ok(p.n)
        }))
    }
}

#[tokio::test]
async fn the_keyed_mode_keys_a_stream_batch_by_its_records_identities() {
    let (setup, _) = setup(&[("SQSAFE_IDEMPOTENCY_MODE", "keyed")]).await;
    let app = sqsafe::consumer::<KeyedTally>().build(&setup).expect("app");
    let first = app
        .handle_kinesis_report(invocation_of(kinesis(1..=3), "req-1"))
        .await
        .expect("batch");
    assert!(
        first
            .records
            .iter()
            .all(|r| matches!(r.disposition, Disposition::Succeeded(Processed::Applied)))
    );
    let again = app
        .handle_kinesis_report(invocation_of(kinesis(1..=3), "req-2"))
        .await
        .expect("batch");
    assert!(
        again
            .records
            .iter()
            .all(|r| matches!(r.disposition, Disposition::Succeeded(Processed::Replayed))),
        "{:?}",
        again.records
    );
    let calls = KEYED_CALLS.lock().expect("lock").clone();
    assert_eq!(calls.len(), 3, "one call per record: {calls:?}");
    let distinct: std::collections::HashSet<_> = calls.iter().collect();
    assert_eq!(distinct.len(), 3, "a key per record");
}
