//! Every batch rule, on pure logic: recording DLQ and visibility doubles, the in-memory idempotency store.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde::Deserialize;
use sqsafe_batch::{
    AllFailedPolicy, Backoff, BatchError, BatchProcessor, Disposition, ErrorClass, FifoMode,
    Processed, Record, RecordError, VisibilityHeartbeat,
};
use sqsafe_idempotency::{Idempotency, InMemoryStore, KeyBuilder};

use crate::common::*;

fn reported(report: &sqsafe_batch::BatchReport) -> Vec<&str> {
    report
        .response
        .batch_item_failures
        .iter()
        .map(|f| f.item_identifier.as_str())
        .collect()
}

/// A handler driven by the body: "ok", "transient", "permanent", "panic".
async fn by_body(record: Record) -> Result<Processed, RecordError> {
    match record.body()? {
        "ok" => Ok(Processed::Applied),
        "transient" => Err(RecordError::transient(
            "downstream_5xx",
            "503 from payments",
        )),
        "permanent" => Err(RecordError::permanent(
            "precondition",
            "insufficient balance",
        )),
        "panic" => panic!("bug in handler"),
        other => Err(RecordError::permanent("unexpected", other)),
    }
}

#[tokio::test]
async fn only_the_records_that_must_come_back_are_reported() {
    let processor = BatchProcessor::builder("c", 1).build().expect("config");
    let batch = event(vec![
        message("m1", "ok"),
        message("m2", "transient"),
        message("m3", "ok"),
        message("m4", "transient"),
    ]);
    let report = processor
        .process(batch, None, &by_body)
        .await
        .expect("batch");
    assert_eq!(reported(&report), ["m2", "m4"]);
    assert!(matches!(
        report.records[0].disposition,
        Disposition::Succeeded(Processed::Applied)
    ));
    assert!(
        matches!(report.records[1].disposition, Disposition::Retry(ref e) if e.kind() == "downstream_5xx")
    );
}

/// Lambda matches `itemIdentifier` against the batch's message ids exactly: an id reported trimmed is unknown to it,
/// and fails the whole batch. An id is reported as it came, whatever it holds.
#[tokio::test]
async fn a_message_id_is_reported_exactly_as_it_came() {
    let processor = BatchProcessor::builder("c", 1).build().expect("config");
    let report = processor
        .process(
            event(vec![message(" m1\t", "transient"), message("m2", "ok")]),
            None,
            &by_body,
        )
        .await
        .expect("batch");
    assert_eq!(reported(&report), [" m1\t"]);
    assert_eq!(report.records[0].message_id, " m1\t");
}

#[tokio::test]
async fn malformed_events_fail_the_invocation_never_an_empty_success() {
    let processor = BatchProcessor::builder("c", 1).build().expect("config");
    let empty = processor.process(event(vec![]), None, &by_body).await;
    assert!(
        matches!(empty, Err(BatchError::MalformedEvent(_))),
        "{empty:?}"
    );

    let mut no_id = message("x", "ok");
    no_id.message_id = None;
    let missing = processor
        .process(event(vec![message("m1", "ok"), no_id]), None, &by_body)
        .await;
    assert!(
        matches!(missing, Err(BatchError::MalformedEvent(ref m)) if m.contains("record 1")),
        "{missing:?}"
    );

    let blank = processor
        .process(event(vec![message("  ", "ok")]), None, &by_body)
        .await;
    assert!(matches!(blank, Err(BatchError::MalformedEvent(_))));

    // No `Records` at all is not an SQS event: it does not even deserialise.
    assert!(
        serde_json::from_str::<aws_lambda_events::sqs::SqsEvent>(r#"{"records": []}"#).is_err()
    );
}

#[tokio::test]
async fn a_bad_body_fails_one_record_permanently_before_any_effect() {
    #[derive(Deserialize)]
    #[serde(tag = "version")]
    enum Versioned {
        #[serde(rename = "1")]
        V1 { amount: u64 },
    }
    let effects = AtomicUsize::new(0);
    let handler = |record: Record| {
        let effects = &effects;
        async move {
            let Versioned::V1 { amount } = record.parse::<Versioned>()?;
            effects.fetch_add(usize::try_from(amount).unwrap_or(0), Ordering::SeqCst);
            Ok(Processed::Applied)
        }
    };
    let dlq = RecordingDlq::default();
    let processor = BatchProcessor::builder("c", 1)
        .dead_letter_queue(dlq.clone())
        .build()
        .expect("config");
    let batch = event(vec![
        message("good", r#"{"version":"1","amount":5}"#),
        message("not-json", "{oops"),
        message("unknown-version", r#"{"version":"9","amount":5}"#),
        message("wrong-shape", r#"{"version":"1","amount":"five"}"#),
    ]);
    let report = processor
        .process(batch, None, &handler)
        .await
        .expect("batch");
    assert!(
        reported(&report).is_empty(),
        "dead-lettered records are acknowledged"
    );
    assert_eq!(
        effects.load(Ordering::SeqCst),
        5,
        "only the good record had an effect"
    );
    let sent = dlq.sent.lock().expect("lock");
    let ids: Vec<_> = sent.iter().map(|(_, f)| f.message_id.as_str()).collect();
    assert_eq!(ids.len(), 3);
    for id in ["not-json", "unknown-version", "wrong-shape"] {
        assert!(ids.contains(&id), "{id} dead-lettered");
    }
    assert!(
        sent.iter()
            .all(|(_, f)| f.error_kind == "bad_payload" && f.error_class == ErrorClass::Permanent)
    );
}

#[tokio::test]
async fn permanent_failures_reach_the_dlq_with_their_context() {
    let dlq = RecordingDlq::default();
    let processor = BatchProcessor::builder("charge-payment", 3)
        .dead_letter_queue(dlq.clone())
        .build()
        .expect("config");
    let poison = with_attribute(
        with_receive_count(message("m9", "permanent"), 2),
        "correlationId",
        "corr-42",
    );
    let report = processor
        .process(event(vec![poison, message("m1", "ok")]), None, &by_body)
        .await
        .expect("batch");
    assert!(reported(&report).is_empty());
    assert!(matches!(
        report.records[0].disposition,
        Disposition::DeadLettered(_)
    ));
    let sent = dlq.sent.lock().expect("lock");
    let (body, failure) = &sent[0];
    assert_eq!(body, "permanent", "the body travels unchanged");
    assert_eq!(failure.message_id, "m9");
    assert_eq!(failure.error_kind, "precondition");
    assert_eq!(failure.error_message, "insufficient balance");
    assert_eq!(failure.attempts, 2);
    assert_eq!(
        (failure.consumer.as_str(), failure.consumer_version),
        ("charge-payment", 3)
    );
    assert_eq!(failure.correlation_id, "corr-42");
    assert_eq!(report.metrics.get(sqsafe_telemetry::Metric::SentToDlq), 1);
    assert_eq!(
        report
            .metrics
            .get(sqsafe_telemetry::Metric::FailedPermanent),
        1
    );
    assert_eq!(report.metrics.get(sqsafe_telemetry::Metric::Processed), 1);
}

#[tokio::test]
async fn when_the_dlq_cannot_be_reached_the_record_comes_back_instead_of_being_lost() {
    let dlq = RecordingDlq {
        fail: true,
        ..RecordingDlq::default()
    };
    let processor = BatchProcessor::builder("c", 1)
        .dead_letter_queue(dlq)
        .build()
        .expect("config");
    let report = processor
        .process(event(vec![message("m1", "permanent")]), None, &by_body)
        .await
        .expect("batch");
    assert_eq!(reported(&report), ["m1"]);
    assert!(matches!(
        report.records[0].disposition,
        Disposition::Retry(_)
    ));
}

#[tokio::test]
async fn without_a_dlq_permanent_failures_are_reported_for_the_redrive_policy() {
    let processor = BatchProcessor::builder("c", 1).build().expect("config");
    let report = processor
        .process(event(vec![message("m1", "permanent")]), None, &by_body)
        .await
        .expect("batch");
    assert_eq!(reported(&report), ["m1"]);
}

#[tokio::test]
async fn transient_failures_come_back_until_their_attempts_are_spent_then_go_to_the_dlq() {
    let dlq = RecordingDlq::default();
    let processor = BatchProcessor::builder("c", 1)
        .max_attempts(3)
        .dead_letter_queue(dlq.clone())
        .build()
        .expect("config");
    let batch = event(vec![
        with_receive_count(message("early", "transient"), 2),
        with_receive_count(message("spent", "transient"), 3),
    ]);
    let report = processor
        .process(batch, None, &by_body)
        .await
        .expect("batch");
    assert_eq!(reported(&report), ["early"]);
    let sent = dlq.sent.lock().expect("lock");
    assert_eq!(sent.len(), 1);
    assert_eq!(
        (sent[0].1.message_id.as_str(), sent[0].1.error_class),
        ("spent", ErrorClass::Transient)
    );
    assert_eq!(sent[0].1.attempts, 3);
}

#[tokio::test]
async fn a_panic_fails_its_record_only() {
    let processor = BatchProcessor::builder("c", 1).build().expect("config");
    let batch = event(vec![
        message("m1", "ok"),
        message("boom", "panic"),
        message("m3", "ok"),
    ]);
    let report = processor
        .process(batch, None, &by_body)
        .await
        .expect("the batch survives the panic");
    assert_eq!(reported(&report), ["boom"]);
    let Disposition::Retry(ref e) = report.records[1].disposition else {
        panic!("reported")
    };
    assert_eq!(e.kind(), "panic");
    assert!(e.message().contains("bug in handler"), "{e}");
}

#[tokio::test]
async fn all_failed_is_reported_per_item_or_fails_the_invocation_as_configured() {
    let batch = || event(vec![message("m1", "transient"), message("m2", "transient")]);
    let items = BatchProcessor::builder("c", 1).build().expect("config");
    assert_eq!(
        reported(&items.process(batch(), None, &by_body).await.expect("batch")),
        ["m1", "m2"]
    );
    let whole = BatchProcessor::builder("c", 1)
        .all_failed(AllFailedPolicy::FailInvocation)
        .build()
        .expect("config");
    assert!(matches!(
        whole.process(batch(), None, &by_body).await,
        Err(BatchError::AllFailed(2))
    ));
    // One success is enough for a partial response.
    let mixed = event(vec![message("m1", "transient"), message("m2", "ok")]);
    assert_eq!(
        reported(&whole.process(mixed, None, &by_body).await.expect("partial")),
        ["m1"]
    );
}

#[tokio::test]
async fn fifo_groups_run_in_order_and_stop_at_the_first_failure() {
    let order = Arc::new(Mutex::new(Vec::new()));
    let handler = {
        let order = Arc::clone(&order);
        move |record: Record| {
            let order = Arc::clone(&order);
            async move {
                order
                    .lock()
                    .expect("lock")
                    .push(record.message_id().to_owned());
                by_body(record).await
            }
        }
    };
    let processor = BatchProcessor::builder("c", 1).build().expect("config");
    let batch = event(vec![
        in_group(message("a1", "ok"), "A"),
        in_group(message("b1", "ok"), "B"),
        in_group(message("a2", "transient"), "A"),
        in_group(message("b2", "ok"), "B"),
        in_group(message("a3", "ok"), "A"),
        in_group(message("a4", "ok"), "A"),
    ]);
    let report = processor
        .process(batch, None, &handler)
        .await
        .expect("batch");
    assert_eq!(
        reported(&report),
        ["a2", "a3", "a4"],
        "the rest of group A comes back, in order"
    );
    assert!(matches!(
        report.records[4].disposition,
        Disposition::SkippedAfterGroupFailure
    ));
    let ran = order.lock().expect("lock").clone();
    assert!(
        !ran.contains(&"a3".to_owned()) && !ran.contains(&"a4".to_owned()),
        "skipped records never ran: {ran:?}"
    );
    let pos = |id: &str| ran.iter().position(|r| r == id).expect("ran");
    assert!(
        pos("a1") < pos("a2") && pos("b1") < pos("b2"),
        "in order within each group: {ran:?}"
    );
}

#[tokio::test]
async fn a_dead_lettered_fifo_record_does_not_block_its_group() {
    let processor = BatchProcessor::builder("c", 1)
        .dead_letter_queue(RecordingDlq::default())
        .build()
        .expect("config");
    let batch = event(vec![
        in_group(message("a1", "permanent"), "A"),
        in_group(message("a2", "ok"), "A"),
    ]);
    let report = processor
        .process(batch, None, &by_body)
        .await
        .expect("batch");
    assert!(
        reported(&report).is_empty(),
        "a1 is settled in the DLQ, so a2 may run"
    );
    assert!(matches!(
        report.records[1].disposition,
        Disposition::Succeeded(_)
    ));
}

#[tokio::test(start_paused = true)]
async fn fifo_groups_run_concurrently_with_each_other() {
    // Both groups' first records wait for each other: this only finishes if the groups run at the same time.
    let barrier = Arc::new(tokio::sync::Barrier::new(2));
    let handler = {
        let barrier = Arc::clone(&barrier);
        move |record: Record| {
            let barrier = Arc::clone(&barrier);
            async move {
                if record.message_id().ends_with('1') {
                    barrier.wait().await;
                }
                Ok(Processed::Applied)
            }
        }
    };
    let processor = BatchProcessor::builder("c", 1).build().expect("config");
    let batch = event(vec![
        in_group(message("a1", "ok"), "A"),
        in_group(message("b1", "ok"), "B"),
    ]);
    let run = tokio::time::timeout(
        Duration::from_secs(5),
        processor.process(batch, None, &handler),
    )
    .await;
    assert!(
        run.expect("groups ran concurrently (no deadlock)")
            .expect("batch")
            .response
            .batch_item_failures
            .is_empty()
    );
}

#[tokio::test]
async fn fifo_is_detected_from_the_arn_and_can_be_forced_off() {
    let batch = || {
        event(vec![
            in_group(message("a1", "transient"), "A"),
            in_group(message("a2", "ok"), "A"),
        ])
    };
    let auto = BatchProcessor::builder("c", 1).build().expect("config");
    assert_eq!(
        reported(&auto.process(batch(), None, &by_body).await.expect("batch")),
        ["a1", "a2"]
    );
    let never = BatchProcessor::builder("c", 1)
        .fifo(FifoMode::Never)
        .build()
        .expect("config");
    assert_eq!(
        reported(&never.process(batch(), None, &by_body).await.expect("batch")),
        ["a1"]
    );
    let mut standard = message("s1", "transient");
    standard
        .attributes
        .insert("MessageGroupId".into(), "A".into()); // a group id alone does not make it FIFO
    let batch = event(vec![standard, {
        let mut m = message("s2", "ok");
        m.attributes.insert("MessageGroupId".into(), "A".into());
        m
    }]);
    assert_eq!(
        reported(&auto.process(batch, None, &by_body).await.expect("batch")),
        ["s1"]
    );
}

#[tokio::test(start_paused = true)]
async fn concurrency_is_bounded() {
    let in_flight = Arc::new(AtomicUsize::new(0));
    let peak = Arc::new(AtomicUsize::new(0));
    let handler = {
        let (in_flight, peak) = (Arc::clone(&in_flight), Arc::clone(&peak));
        move |_record: Record| {
            let (in_flight, peak) = (Arc::clone(&in_flight), Arc::clone(&peak));
            async move {
                let now = in_flight.fetch_add(1, Ordering::SeqCst) + 1;
                peak.fetch_max(now, Ordering::SeqCst);
                tokio::time::sleep(Duration::from_millis(10)).await; // paused clock: no real wait
                in_flight.fetch_sub(1, Ordering::SeqCst);
                Ok(Processed::Applied)
            }
        }
    };
    let processor = BatchProcessor::builder("c", 1)
        .max_concurrency(3)
        .build()
        .expect("config");
    let batch = event((0..10).map(|i| message(&format!("m{i}"), "ok")).collect());
    processor
        .process(batch, None, &handler)
        .await
        .expect("batch");
    assert_eq!(peak.load(Ordering::SeqCst), 3);
}

#[tokio::test]
async fn transient_failures_get_a_jittered_backoff_from_their_receive_count() {
    let visibility = RecordingVisibility::default();
    let processor = BatchProcessor::builder("c", 1)
        .visibility(visibility.clone())
        .backoff(
            Backoff::new(Duration::from_secs(10), Duration::from_secs(600))
                .expect("backoff")
                .seed(1),
        )
        .build()
        .expect("config");
    let batch = event(vec![
        with_receive_count(message("m1", "transient"), 3),
        message("m2", "ok"),
    ]);
    processor
        .process(batch, None, &by_body)
        .await
        .expect("batch");
    let changes = visibility.changes.lock().expect("lock");
    assert_eq!(changes.len(), 1, "only the failed record");
    assert_eq!(changes[0].0, "rh-m1");
    let secs = changes[0].1.as_secs();
    assert!(
        (20..=40).contains(&secs),
        "third delivery: within [20, 40] s, got {secs}"
    );
}

#[tokio::test]
async fn fifo_records_held_back_behind_a_failed_one_come_back_with_it_not_after_the_queues_timeout()
{
    let visibility = RecordingVisibility::default();
    let processor = BatchProcessor::builder("c", 1)
        .visibility(visibility.clone())
        .backoff(
            Backoff::new(Duration::from_secs(10), Duration::from_secs(600))
                .expect("backoff")
                .seed(1),
        )
        .build()
        .expect("config");
    // A FIFO mapping with a batch size above 1 (a user's own template may allow it): g1's first record fails on its
    // third delivery; the two behind it are held back; g2 runs.
    let batch = event(vec![
        in_group(with_receive_count(message("a", "transient"), 3), "g1"),
        in_group(message("b", "ok"), "g1"),
        in_group(message("c", "ok"), "g1"),
        in_group(message("d", "ok"), "g2"),
    ]);
    let report = processor
        .process(batch, None, &by_body)
        .await
        .expect("batch");
    let reported: Vec<_> = report
        .response
        .batch_item_failures
        .iter()
        .map(|f| f.item_identifier.clone())
        .collect();
    assert_eq!(reported, ["a", "b", "c"]);
    let changes = visibility.changes.lock().expect("lock").clone();
    let failed = changes
        .iter()
        .find(|(r, _)| r == "rh-a")
        .expect("a's backoff")
        .1;
    assert!((20..=40).contains(&failed.as_secs()), "{failed:?}");
    // b and c: no later than a (so the group resumes when a is due), not the queue's visibility timeout.
    for held in ["rh-b", "rh-c"] {
        let (_, delay) = changes
            .iter()
            .find(|(r, _)| r == held)
            .unwrap_or_else(|| panic!("{held} keeps the queue's visibility timeout: {changes:?}"));
        assert!(*delay <= failed, "{held}: {delay:?} after a's {failed:?}");
        assert_eq!(
            delay.as_secs(),
            20,
            "{held}: the lower bound of a's jittered backoff"
        );
    }
    assert!(changes.iter().all(|(r, _)| r != "rh-d"), "d succeeded");
}

#[tokio::test(start_paused = true)]
async fn a_long_record_keeps_its_message_invisible() {
    let visibility = RecordingVisibility::default();
    let processor = BatchProcessor::builder("c", 1)
        .visibility(visibility.clone())
        .visibility_heartbeat(VisibilityHeartbeat {
            every: Duration::from_secs(20),
            extend_to: Duration::from_secs(60),
        })
        .build()
        .expect("config");
    let handler = |_record: Record| async {
        tokio::time::sleep(Duration::from_secs(70)).await;
        Ok(Processed::Applied)
    };
    processor
        .process(event(vec![message("m1", "ok")]), None, &handler)
        .await
        .expect("batch");
    let changes = visibility.changes.lock().expect("lock");
    assert_eq!(changes.len(), 3, "extended at 20, 40 and 60 s: {changes:?}");
    assert!(
        changes
            .iter()
            .all(|(rh, d)| rh == "rh-m1" && *d == Duration::from_secs(60))
    );
}

/// The visibility heartbeat runs beside the record's work: a slow ChangeMessageVisibility does not keep the handler's
/// future from being polled, so a record that is done is reported at once.
#[tokio::test(start_paused = true)]
async fn a_slow_visibility_heartbeat_does_not_pause_the_record() {
    let visibility = RecordingVisibility {
        delay: Duration::from_secs(5),
        ..RecordingVisibility::default()
    };
    let processor = BatchProcessor::builder("c", 1)
        .visibility(visibility.clone())
        .visibility_heartbeat(VisibilityHeartbeat {
            every: Duration::from_secs(1),
            extend_to: Duration::from_secs(60),
        })
        .build()
        .expect("config");
    let handler = |_record: Record| async {
        tokio::time::sleep(Duration::from_millis(1_500)).await;
        Ok(Processed::Applied)
    };
    let started = tokio::time::Instant::now();
    processor
        .process(event(vec![message("m1", "ok")]), None, &handler)
        .await
        .expect("batch");
    let spent = started.elapsed();
    assert!(
        spent < Duration::from_secs(2),
        "the record, done at 1.5 s, waited for the beat's 5 s call: {spent:?}"
    );
}

#[test]
fn settings_are_validated() {
    assert!(BatchProcessor::builder("", 1).build().is_err());
    assert!(
        BatchProcessor::builder("c", 1)
            .max_concurrency(0)
            .build()
            .is_err()
    );
    assert!(
        BatchProcessor::builder("c", 1)
            .max_attempts(0)
            .build()
            .is_err()
    );
    let err = BatchProcessor::builder("c", 1)
        .backoff(Backoff::default())
        .build()
        .err()
        .expect("needs visibility");
    assert!(err.to_string().contains("visibility control"), "{err}");
    let bad = VisibilityHeartbeat {
        every: Duration::from_secs(30),
        extend_to: Duration::from_secs(30),
    };
    assert!(
        BatchProcessor::builder("c", 1)
            .visibility(RecordingVisibility::default())
            .visibility_heartbeat(bad)
            .build()
            .is_err()
    );
}

#[tokio::test]
async fn duplicates_inside_one_batch_and_across_batches_apply_once() {
    let idem = Idempotency::builder(InMemoryStore::new(), "charge-payment", 1)
        .build()
        .expect("config");
    let charges = Arc::new(AtomicUsize::new(0));
    #[derive(Deserialize, serde::Serialize)]
    struct Payment {
        payment_id: String,
        amount: u64,
    }
    let handler = {
        let (idem, charges) = (idem.clone(), Arc::clone(&charges));
        move |record: Record| {
            let (idem, charges) = (idem.clone(), Arc::clone(&charges));
            async move {
                let payment: Payment = record.parse()?;
                let key = KeyBuilder::new("charge-payment", 1)
                    .intent("payment", &payment.payment_id)
                    .build()?;
                let (processed, _charge) = record
                    .run_idempotent(&idem, key, &payment, || async {
                        tokio::task::yield_now().await;
                        Ok::<_, RecordError>(charges.fetch_add(1, Ordering::SeqCst) + 1)
                    })
                    .await?;
                Ok(processed)
            }
        }
    };
    let processor = BatchProcessor::builder("charge-payment", 1)
        .dead_letter_queue(RecordingDlq::default())
        .build()
        .expect("config");
    let body = r#"{"payment_id":"p-1","amount":5}"#;
    let first = processor
        .process(
            event(vec![message("m1", body), message("m2", body)]),
            None,
            &handler,
        )
        .await
        .expect("batch");
    // Both copies race: one applies, the other finds the key in progress (transient) and comes back.
    assert_eq!(charges.load(Ordering::SeqCst), 1);
    assert_eq!(reported(&first).len(), 1);
    let again = processor
        .process(event(vec![message("m2", body)]), None, &handler)
        .await
        .expect("batch");
    assert!(matches!(
        again.records[0].disposition,
        Disposition::Succeeded(Processed::Replayed)
    ));
    let changed = processor
        .process(
            event(vec![message("m3", r#"{"payment_id":"p-1","amount":6}"#)]),
            None,
            &handler,
        )
        .await
        .expect("batch");
    assert!(
        matches!(changed.records[0].disposition, Disposition::DeadLettered(ref e) if e.kind() == "payload_mismatch")
    );
    assert_eq!(
        charges.load(Ordering::SeqCst),
        1,
        "one charge for the intent, whatever happened"
    );
}

/// EMF documents, as `BatchProcessor::handle` wrote them.
type Emf = Arc<Mutex<Vec<serde_json::Value>>>;

/// EMF lines captured from `BatchProcessor::handle`.
fn captured_metrics() -> (Emf, impl Fn(&[u8]) + Send + Sync + 'static) {
    let lines = Arc::new(Mutex::new(Vec::new()));
    let sink = Arc::clone(&lines);
    let out = move |text: &[u8]| {
        let text = std::str::from_utf8(text).expect("EMF is UTF-8");
        for line in text.lines() {
            let doc = serde_json::from_str(line).expect("one EMF JSON document per line");
            sink.lock().expect("lock").push(doc);
        }
    };
    (lines, out)
}

/// A refused invocation still counts what happened: an invocation whose batch is refused is when metrics matter.
#[tokio::test]
async fn metrics_are_written_when_the_invocation_fails_too() {
    let (lines, out) = captured_metrics();
    let processor = BatchProcessor::builder("c", 1)
        .all_failed(AllFailedPolicy::FailInvocation)
        .metrics_output(out)
        .build()
        .expect("config");
    let all_failed = event(vec![message("m1", "transient"), message("m2", "transient")]);
    let refused = processor
        .handle(sqsafe_testkit::invocation(all_failed, "req-1"), &by_body)
        .await;
    assert!(
        matches!(refused, Err(BatchError::AllFailed(2))),
        "{refused:?}"
    );
    let malformed = processor
        .handle(
            sqsafe_testkit::invocation(event(Vec::new()), "req-2"),
            &by_body,
        )
        .await;
    assert!(matches!(malformed, Err(BatchError::MalformedEvent(_))));
    let ok = processor
        .handle(
            sqsafe_testkit::invocation(event(vec![message("m3", "ok")]), "req-3"),
            &by_body,
        )
        .await;
    assert!(ok.is_ok());
    let lines = lines.lock().expect("lock");
    assert_eq!(
        lines.len(),
        3,
        "one EMF line per invocation, refused or not"
    );
    let count = |i: usize, name: &str| lines[i][name].as_u64();
    assert_eq!(
        (
            count(0, "RecordsFailedTransient"),
            count(0, "BatchesRefused")
        ),
        (Some(2), Some(1))
    );
    assert_eq!(
        (count(1, "BatchesRefused"), count(1, "RecordsProcessed")),
        (Some(1), Some(0))
    );
    assert_eq!(
        (count(2, "BatchesRefused"), count(2, "RecordsProcessed")),
        (Some(0), Some(1))
    );
}

/// The dashboard's "received" and "dead-lettered by kind": every record of the batch counts as received, and each
/// dead letter is counted under its error kind on a line of its own.
#[tokio::test]
async fn received_and_dead_letters_by_kind_are_counted() {
    let (lines, out) = captured_metrics();
    let processor = BatchProcessor::builder("c", 1)
        .dead_letter_queue(RecordingDlq::default())
        .metrics_output(out)
        .build()
        .expect("config");
    let batch = event(vec![
        message("m1", "ok"),
        message("m2", "permanent"),
        message("m3", "bogus"),
        message("m4", "permanent"),
    ]);
    processor
        .handle(sqsafe_testkit::invocation(batch, "req-1"), &by_body)
        .await
        .expect("batch");
    let lines = lines.lock().expect("lock");
    assert_eq!(lines.len(), 3, "{lines:?}");
    assert_eq!(lines[0]["RecordsReceived"], 4);
    assert_eq!(lines[0]["RecordsSentToDlq"], 3);
    let mut by_kind: Vec<(String, u64)> = lines[1..]
        .iter()
        .map(|doc| {
            assert_eq!(
                doc["_aws"]["CloudWatchMetrics"][0]["Dimensions"],
                serde_json::json!([["consumer", "error_kind"]])
            );
            assert_eq!(doc["consumer"], "c");
            (
                doc["error_kind"].as_str().unwrap_or_default().to_owned(),
                doc["RecordsSentToDlq"].as_u64().unwrap_or_default(),
            )
        })
        .collect();
    by_kind.sort();
    assert_eq!(
        by_kind,
        [("precondition".to_owned(), 2), ("unexpected".to_owned(), 1)]
    );
}
