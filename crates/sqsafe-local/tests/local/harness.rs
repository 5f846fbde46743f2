//! The harness a consumer's tests start from, on this workspace's template.yaml and moto server (started by
//! `make test`): a probe consumer built as the template's charge-payment function, whose effect keeps the payment id.

use sqsafe::{Consumer, Context, Disposition, Effect, Intent, Processed, RecordError, Setup};
use sqsafe_local::harness::Harness;

/// Reads any JSON body; the payment id is its intent and its output.
struct Probe;

impl Consumer for Probe {
    const NAME: &'static str = "charge-payment";
    const EFFECT_VERSION: u32 = 1;
    const INTENT_FIELDS: &'static [&'static str] = &["/payment_id"];
    type Payload = serde_json::Value;
    type Output = String;

    fn new(_: &Setup) -> Result<Self, sqsafe::Error> {
        Ok(Self)
    }

    fn intent(p: &serde_json::Value) -> Intent {
        Intent::untenanted("payment", p["payment_id"].as_str().unwrap_or_default())
    }

    fn effect<'a>(
        &'a self,
        p: serde_json::Value,
        _: &'a Context<'a>,
    ) -> Result<Effect<'a, String>, RecordError> {
        let id = p["payment_id"].as_str().unwrap_or_default().to_owned();
        Ok(Effect::call(async move { Ok(id) }))
    }
}

/// A consumer no function of the template is built as.
struct Stray;

impl Consumer for Stray {
    const NAME: &'static str = "no-such-function";
    const EFFECT_VERSION: u32 = 1;
    const INTENT_FIELDS: &'static [&'static str] = &[];
    type Payload = serde_json::Value;
    type Output = ();

    fn new(_: &Setup) -> Result<Self, sqsafe::Error> {
        Ok(Self)
    }

    fn intent(_: &serde_json::Value) -> Intent {
        Intent::untenanted("none", "none")
    }

    fn effect<'a>(
        &'a self,
        _: serde_json::Value,
        _: &'a Context<'a>,
    ) -> Result<Effect<'a, ()>, RecordError> {
        Ok(Effect::call(async { Ok(()) }))
    }
}

#[tokio::test]
async fn the_consumer_applies_replays_and_dead_letters_on_the_template_s_resources() {
    let h = Harness::<Probe>::builder()
        .fake_api("PaymentsApiUrl")
        .sample("charge-payment-batch.json")
        .start()
        .await
        .expect("harness");
    let url = h.setup().env.required("PAYMENTS_API_URL").expect("set");
    assert_eq!(url, h.api().url(), "the fake's URL reaches the function");

    let first = h.deliver(h.sample_first()).await;
    assert!(first.all_succeeded(Processed::Applied), "{first:?}");
    let stored = h.stored_results().await;
    assert_eq!(stored.len(), 1, "{stored:?}");
    let again = h.deliver(h.sample_first()).await;
    assert!(again.all_succeeded(Processed::Replayed), "{again:?}");
    assert_eq!(h.stored_results().await, stored);

    let report = h.deliver(h.sample_with_body("not json")).await;
    assert!(report.all_dead_lettered(), "{report:?}");
    let letter = h.dead_letter().await;
    assert_eq!(letter.body, "not json");
    assert_eq!(
        letter.context("consumer").as_deref(),
        Some("charge-payment")
    );
    assert!(h.dead_letters().await.is_empty(), "received once");
}

#[tokio::test]
async fn a_parameter_the_function_does_not_read_is_refused_by_name() {
    let refused = Harness::<Probe>::with_api("NoSuchApiUrl")
        .await
        .expect_err("no variable refers to it");
    let message = refused.to_string();
    assert!(
        message.contains("NoSuchApiUrl") && message.contains("charge-payment"),
        "{message}"
    );
}

#[tokio::test]
async fn a_consumer_the_template_does_not_build_is_refused_by_name() {
    let refused = Harness::<Stray>::start().await.expect_err("no function");
    assert!(refused.is_stack(), "{refused:?}");
    assert!(
        refused.to_string().contains("no-such-function"),
        "{refused}"
    );
}

/// A Kinesis consumer of a template of the test's own (`HarnessBuilder::template`): its failure queue is the queue its
/// `DLQ_URL` names, its effect keeps the id (and fails `b` once, transiently).
struct Tracker;

static TRACKED: std::sync::Mutex<Vec<String>> = std::sync::Mutex::new(Vec::new());
static FAILED_B: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);

impl Consumer for Tracker {
    const NAME: &'static str = "track-order";
    const EFFECT_VERSION: u32 = 1;
    const INTENT_FIELDS: &'static [&'static str] = &["/id"];
    type Payload = serde_json::Value;
    type Output = String;

    fn new(_: &Setup) -> Result<Self, sqsafe::Error> {
        Ok(Self)
    }

    fn intent(p: &serde_json::Value) -> Intent {
        Intent::untenanted("order", p["id"].as_str().unwrap_or_default())
    }

    fn validate(p: &serde_json::Value) -> Result<(), RecordError> {
        match p["id"].as_str() {
            Some(_) => Ok(()),
            None => Err(RecordError::permanent("no_id", "no id")),
        }
    }

    fn effect<'a>(
        &'a self,
        p: serde_json::Value,
        _: &'a Context<'a>,
    ) -> Result<Effect<'a, String>, RecordError> {
        let id = p["id"].as_str().unwrap_or_default().to_owned();
        Ok(Effect::call(async move {
            if id == "b" && !FAILED_B.swap(true, std::sync::atomic::Ordering::SeqCst) {
                return Err(RecordError::transient("downstream_5xx", "503"));
            }
            TRACKED.lock().expect("lock").push(id.clone());
            Ok(id)
        }))
    }
}

const KINESIS_TEMPLATE: &str = r#"
Resources:
  IdempotencyTable:
    Type: AWS::DynamoDB::Table
    Properties: { KeySchema: [{ AttributeName: pk, KeyType: HASH }] }
  TrackOrderStream: { Type: AWS::Kinesis::Stream, Properties: { ShardCount: 1 } }
  TrackOrderFailureQueue: { Type: AWS::SQS::Queue }
  TrackOrderOnFailureQueue: { Type: AWS::SQS::Queue }
  TrackOrderFunction:
    Type: AWS::Serverless::Function
    Metadata: { BuildProperties: { Binary: track-order } }
    Properties:
      Environment:
        Variables: { IDEMPOTENCY_TABLE: !Ref IdempotencyTable, DLQ_URL: !Ref TrackOrderFailureQueue }
      Events:
        Stream:
          Type: Kinesis
          Properties:
            Stream: !GetAtt TrackOrderStream.Arn
            StartingPosition: TRIM_HORIZON
            DestinationConfig: { OnFailure: { Destination: !GetAtt TrackOrderOnFailureQueue.Arn } }
"#;

/// The harness of a Kinesis consumer: records of one shard delivered, the shard stopped at the record that failed
/// (named alone in the answer, nothing after it run), the same records again applied in order, each once; a bad
/// record in the failure queue with its content, the shard going on.
#[tokio::test]
async fn a_kinesis_consumer_is_handed_shard_batches_and_its_failure_queue_is_read() {
    let dir = std::env::temp_dir().join(sqsafe_testkit::unique_name("kinesis-harness"));
    std::fs::create_dir_all(&dir).expect("folder");
    let template = dir.join("template.yaml");
    std::fs::write(&template, KINESIS_TEMPLATE).expect("template");
    let h = Harness::<Tracker>::builder()
        .template(&template)
        .start()
        .await
        .expect("harness");

    let batch = h.kinesis_records(&[r#"{"id":"a"}"#, r#"{"id":"b"}"#, r#"{"id":"c"}"#]);
    let first = h.deliver_kinesis(batch.clone()).await;
    assert_eq!(
        first.reported(),
        [batch.records[1].kinesis.sequence_number.as_str()],
        "{first:?}"
    );
    assert!(
        matches!(
            first.dispositions()[..],
            [
                Disposition::Succeeded(Processed::Applied),
                Disposition::Retry(_),
                Disposition::SkippedAfterGroupFailure
            ]
        ),
        "{first:?}"
    );
    assert_eq!(*TRACKED.lock().expect("lock"), ["a"], "nothing after b");
    let again = h.deliver_kinesis(batch).await;
    assert!(
        matches!(
            again.dispositions()[..],
            [
                Disposition::Succeeded(Processed::Replayed),
                Disposition::Succeeded(Processed::Applied),
                Disposition::Succeeded(Processed::Applied)
            ]
        ),
        "{again:?}"
    );
    assert_eq!(*TRACKED.lock().expect("lock"), ["a", "b", "c"]);

    let bad = r#"{"no":"id"}"#;
    let report = h
        .deliver_kinesis(h.kinesis_records(&[bad, r#"{"id":"d"}"#]))
        .await;
    assert!(report.reported().is_empty(), "{report:?}");
    let letter = h.dead_letter().await;
    assert_eq!(letter.body, bad);
    assert_eq!(letter.context("error_kind").as_deref(), Some("no_id"));
    assert_eq!(*TRACKED.lock().expect("lock"), ["a", "b", "c", "d"]);
    let _ = std::fs::remove_dir_all(&dir);
}

/// A DynamoDB-stream consumer: each change's new image as its payload, keyed by its record.
struct Auditor;

impl Consumer for Auditor {
    const NAME: &'static str = "audit-order";
    const EFFECT_VERSION: u32 = 1;
    const INTENT_FIELDS: &'static [&'static str] = &["/eventName", "/newImage"];
    type Payload = sqsafe::Change<serde_json::Value>;
    type Output = String;

    fn new(_: &Setup) -> Result<Self, sqsafe::Error> {
        Ok(Self)
    }

    fn intent(_: &sqsafe::Change<serde_json::Value>) -> Intent {
        Intent::of_record()
    }

    fn effect<'a>(
        &'a self,
        change: sqsafe::Change<serde_json::Value>,
        _: &'a Context<'a>,
    ) -> Result<Effect<'a, String>, RecordError> {
        let pk = change
            .new_image
            .as_ref()
            .and_then(|i| i["pk"].as_str())
            .unwrap_or_default()
            .to_owned();
        Ok(Effect::call(async move { Ok(pk) }))
    }
}

const DYNAMODB_TEMPLATE: &str = r#"
Resources:
  IdempotencyTable:
    Type: AWS::DynamoDB::Table
    Properties: { KeySchema: [{ AttributeName: pk, KeyType: HASH }] }
  AuditOrderSourceTable:
    Type: AWS::DynamoDB::Table
    Properties:
      KeySchema: [{ AttributeName: pk, KeyType: HASH }]
      StreamSpecification: { StreamViewType: NEW_AND_OLD_IMAGES }
  AuditOrderFailureQueue: { Type: AWS::SQS::Queue }
  AuditOrderFunction:
    Type: AWS::Serverless::Function
    Metadata: { BuildProperties: { Binary: audit-order } }
    Properties:
      Environment:
        Variables: { IDEMPOTENCY_TABLE: !Ref IdempotencyTable, DLQ_URL: !Ref AuditOrderFailureQueue }
      Events:
        Changes:
          Type: DynamoDB
          Properties: { Stream: !GetAtt AuditOrderSourceTable.StreamArn, StartingPosition: TRIM_HORIZON }
"#;

/// The harness of a DynamoDB-stream consumer: inserts of plain JSON items delivered as a table's stream would, each
/// change applied once and replayed by its record when the batch comes again.
#[tokio::test]
async fn a_dynamodb_stream_consumer_is_handed_inserts_keyed_by_their_records() {
    let dir = std::env::temp_dir().join(sqsafe_testkit::unique_name("dynamodb-harness"));
    std::fs::create_dir_all(&dir).expect("folder");
    let template = dir.join("template.yaml");
    std::fs::write(&template, DYNAMODB_TEMPLATE).expect("template");
    let h = Harness::<Auditor>::builder()
        .template(&template)
        .start()
        .await
        .expect("harness");
    let items = [
        serde_json::json!({ "pk": "acme#1", "amount": 5, "tags": ["a"] }),
        serde_json::json!({ "pk": "acme#2", "amount": 7 }),
    ];
    let batch = h.dynamodb_inserts(&items);
    assert_eq!(batch.records[1].event_id, "change-2");
    let first = h.deliver_dynamodb(batch.clone()).await;
    assert!(first.all_succeeded(Processed::Applied), "{first:?}");
    assert_eq!(
        h.stored_results().await,
        ["acme#1".to_owned(), "acme#2".to_owned()]
    );
    let again = h.deliver_dynamodb(batch).await;
    assert!(again.all_succeeded(Processed::Replayed), "{again:?}");
    let _ = std::fs::remove_dir_all(&dir);
}
