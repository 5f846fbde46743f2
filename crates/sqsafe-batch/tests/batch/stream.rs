//! Stream batches (Kinesis, DynamoDB Streams) on pure logic: each shard in order, stopped at its first record that
//! must come back, only that record named; permanent failures dead-lettered with their origin, the shard going on.

use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime};

use aws_lambda_events::kinesis::KinesisEvent;
use base64::Engine as _;
use sqsafe_batch::{
    AllFailedPolicy, BatchError, BatchProcessor, Disposition, Processed, Record, RecordError,
    StreamBatch, StreamSource,
};
use sqsafe_idempotency::ManualClock;
use sqsafe_telemetry::Metric;

use crate::common::*;

const STREAM_ARN: &str = "arn:aws:kinesis:us-east-1:123456789012:stream/orders";

/// A Kinesis event: `(shard, data)` per record, sequence numbers 1, 2, … in the event's order.
fn kinesis(records: &[(&str, &str)]) -> StreamBatch {
    let records: Vec<_> = records
        .iter()
        .enumerate()
        .map(|(i, (shard, data))| {
            let sequence = format!("{:056}", i + 1);
            serde_json::json!({
                "kinesis": {
                    "kinesisSchemaVersion": "1.0",
                    "partitionKey": format!("pk-{shard}"),
                    "sequenceNumber": sequence,
                    "data": base64::engine::general_purpose::STANDARD.encode(data),
                    "approximateArrivalTimestamp": 1_750_000_000.123,
                },
                "eventSource": "aws:kinesis",
                "eventVersion": "1.0",
                "eventID": format!("{shard}:{sequence}"),
                "eventName": "aws:kinesis:record",
                "awsRegion": "us-east-1",
                "eventSourceARN": STREAM_ARN,
            })
        })
        .collect();
    let event: KinesisEvent =
        serde_json::from_value(serde_json::json!({ "Records": records })).expect("event");
    StreamBatch::kinesis(event).expect("batch")
}

fn seq(n: usize) -> String {
    format!("{n:056}")
}

fn reported(report: &sqsafe_batch::BatchReport) -> Vec<&str> {
    report
        .response
        .batch_item_failures
        .iter()
        .map(|f| f.item_identifier.as_str())
        .collect()
}

/// A handler driven by the data ("ok", "transient", "permanent"), noting the sequence numbers it ran, in order.
/// Sequence numbers a handler ran, in order.
type Ran = Arc<Mutex<Vec<String>>>;

fn noting() -> (
    Ran,
    impl Fn(Record) -> std::future::Ready<Result<Processed, RecordError>>,
) {
    let ran = Arc::new(Mutex::new(Vec::new()));
    let notes = Arc::clone(&ran);
    let handler = move |record: Record| {
        notes
            .lock()
            .expect("lock")
            .push(record.message_id().to_owned());
        std::future::ready(match record.body() {
            Ok("ok") => Ok(Processed::Applied),
            Ok("transient") => Err(RecordError::transient("downstream_5xx", "503")),
            Ok("permanent") => Err(RecordError::permanent("precondition", "no such account")),
            other => Err(RecordError::permanent("unexpected", format!("{other:?}"))),
        })
    };
    (ran, handler)
}

#[tokio::test]
async fn a_shard_stops_at_its_first_transient_failure_and_names_only_it() {
    let (ran, handler) = noting();
    let processor = BatchProcessor::builder("c", 1).build().expect("config");
    let mut records = vec![("shardId-0", "ok"); 10];
    records[3] = ("shardId-0", "transient");
    let report = processor
        .process_stream(kinesis(&records), None, &handler)
        .await
        .expect("batch");
    assert_eq!(reported(&report), [seq(4).as_str()], "the 4th, alone");
    assert_eq!(
        *ran.lock().expect("lock"),
        (1..=4).map(seq).collect::<Vec<_>>(),
        "1-4 ran, in order; 5-10 did not"
    );
    for r in &report.records[4..] {
        assert!(matches!(
            r.disposition,
            Disposition::SkippedAfterGroupFailure
        ));
    }
    assert_eq!(report.metrics.get(Metric::HeldBack), 6);
    assert_eq!(report.metrics.get(Metric::Processed), 3);
}

#[tokio::test]
async fn each_shard_stops_on_its_own() {
    let (ran, handler) = noting();
    let processor = BatchProcessor::builder("c", 1).build().expect("config");
    let batch = kinesis(&[
        ("shardId-0", "ok"),
        ("shardId-1", "transient"),
        ("shardId-0", "transient"),
        ("shardId-1", "ok"),
        ("shardId-0", "ok"),
        ("shardId-2", "ok"),
    ]);
    let report = processor
        .process_stream(batch, None, &handler)
        .await
        .expect("batch");
    assert_eq!(reported(&report), [seq(2).as_str(), seq(3).as_str()]);
    let mut ran = ran.lock().expect("lock").clone();
    ran.sort();
    assert_eq!(ran, [seq(1), seq(2), seq(3), seq(6)]);
}

#[tokio::test]
async fn a_permanent_failure_is_dead_lettered_with_its_content_and_origin_and_the_shard_goes_on() {
    let (ran, handler) = noting();
    let dlq = RecordingDlq::default();
    let processor = BatchProcessor::builder("c", 1)
        .dead_letter_queue(dlq.clone())
        .build()
        .expect("config");
    let batch = kinesis(&[
        ("shardId-0", "ok"),
        ("shardId-0", "permanent"),
        ("shardId-0", "ok"),
    ]);
    let report = processor
        .process_stream(batch, None, &handler)
        .await
        .expect("batch");
    assert!(reported(&report).is_empty());
    assert!(matches!(
        report.records[1].disposition,
        Disposition::DeadLettered(_)
    ));
    assert_eq!(ran.lock().expect("lock").len(), 3, "the shard went on");
    let sent = dlq.sent.lock().expect("lock");
    assert_eq!(sent.len(), 1);
    assert_eq!(sent[0].0, "permanent", "the record's content");
    assert_eq!(sent[0].1.message_id, seq(2));
    assert_eq!(sent[0].1.error_kind, "precondition");
}

#[tokio::test]
async fn a_transient_failure_is_never_dead_lettered_by_counting() {
    let (_, handler) = noting();
    let dlq = RecordingDlq::default();
    // One attempt: an SQS record failing transiently would be dead-lettered at once.
    let processor = BatchProcessor::builder("c", 1)
        .max_attempts(1)
        .dead_letter_queue(dlq.clone())
        .build()
        .expect("config");
    let batch = kinesis(&[("shardId-0", "transient"), ("shardId-0", "ok")]);
    let report = processor
        .process_stream(batch, None, &handler)
        .await
        .expect("batch");
    assert_eq!(reported(&report), [seq(1).as_str()]);
    assert!(dlq.sent.lock().expect("lock").is_empty());
    let sqs = processor
        .process(event(vec![message("m1", "transient")]), None, &handler)
        .await
        .expect("sqs batch");
    assert!(matches!(
        sqs.records[0].disposition,
        Disposition::DeadLettered(_)
    ));
}

#[tokio::test]
async fn a_record_the_failure_queue_refuses_stops_its_shard() {
    let (ran, handler) = noting();
    let dlq = RecordingDlq {
        fail: true,
        ..RecordingDlq::default()
    };
    let processor = BatchProcessor::builder("c", 1)
        .dead_letter_queue(dlq)
        .build()
        .expect("config");
    let batch = kinesis(&[
        ("shardId-0", "permanent"),
        ("shardId-0", "ok"),
        ("shardId-0", "ok"),
    ]);
    let report = processor
        .process_stream(batch, None, &handler)
        .await
        .expect("batch");
    assert_eq!(reported(&report), [seq(1).as_str()]);
    assert_eq!(ran.lock().expect("lock").len(), 1);
}

#[tokio::test]
async fn records_that_cannot_start_before_the_deadline_are_held_back_behind_the_first() {
    let clock = ManualClock::at_millis(1_750_000_000_000);
    let ran = Arc::new(Mutex::new(Vec::new()));
    let handler = {
        let (clock, ran) = (clock.clone(), Arc::clone(&ran));
        move |record: Record| {
            clock.advance(Duration::from_secs(3));
            ran.lock()
                .expect("lock")
                .push(record.message_id().to_owned());
            std::future::ready(Ok(Processed::Applied))
        }
    };
    let processor = BatchProcessor::builder("c", 1)
        .deadline_reserve(Duration::from_secs(2))
        .clock(clock.clone())
        .build()
        .expect("config");
    let deadline = SystemTime::UNIX_EPOCH + Duration::from_millis(1_750_000_000_000 + 10_000);
    let batch = kinesis(&[("shardId-0", "ok"); 5]);
    let report = processor
        .process_stream(batch, Some(deadline), &handler)
        .await
        .expect("batch");
    // 10 s, 3 s each, 2 s kept: the 4th would start with 1 s left.
    assert_eq!(*ran.lock().expect("lock"), [seq(1), seq(2), seq(3)]);
    assert_eq!(reported(&report), [seq(4).as_str()]);
    assert!(
        matches!(&report.records[3].disposition, Disposition::Retry(e) if e.kind() == RecordError::DEADLINE)
    );
    assert!(matches!(
        report.records[4].disposition,
        Disposition::SkippedAfterGroupFailure
    ));
}

#[tokio::test]
async fn a_kpl_aggregate_goes_whole_to_the_failure_queue_without_running() {
    let (ran, handler) = noting();
    let dlq = RecordingDlq::default();
    let processor = BatchProcessor::builder("c", 1)
        .dead_letter_queue(dlq.clone())
        .build()
        .expect("config");
    // The KPL's magic bytes, then a protobuf body: not a record sqsafe reads.
    let encoded = base64::engine::general_purpose::STANDARD
        .encode([0xF3u8, 0x89, 0x9A, 0xC2, 0x0A, 0x01, 0x61]);
    let json = serde_json::json!({"Records": [{
        "kinesis": {"partitionKey": "pk", "sequenceNumber": seq(1), "data": encoded,
                    "approximateArrivalTimestamp": 1_750_000_000.5},
        "eventSource": "aws:kinesis", "eventID": format!("shardId-0:{}", seq(1)),
        "eventSourceARN": STREAM_ARN}]});
    let batch = StreamBatch::kinesis(serde_json::from_value(json).expect("event")).expect("batch");
    assert_eq!(batch.source(), StreamSource::Kinesis);
    let report = processor
        .process_stream(batch, None, &handler)
        .await
        .expect("batch");
    assert!(
        ran.lock().expect("lock").is_empty(),
        "the handler never ran"
    );
    assert!(
        matches!(&report.records[0].disposition, Disposition::DeadLettered(e) if e.kind() == RecordError::KPL_AGGREGATED)
    );
    assert_eq!(dlq.sent.lock().expect("lock")[0].0, encoded);
}

#[tokio::test]
async fn an_all_failed_stream_batch_fails_the_invocation_when_told_to() {
    let (_, handler) = noting();
    let processor = BatchProcessor::builder("c", 1)
        .all_failed(AllFailedPolicy::FailInvocation)
        .build()
        .expect("config");
    let batch = kinesis(&[("shardId-0", "transient"), ("shardId-0", "ok")]);
    let err = processor
        .process_stream(batch, None, &handler)
        .await
        .expect_err("all failed");
    assert!(matches!(err, BatchError::AllFailed(2)));
}
