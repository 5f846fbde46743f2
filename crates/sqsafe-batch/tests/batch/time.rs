//! Time rules on pure logic (a manual clock, recording doubles): the invocation deadline, and in-progress duplicates
//! that wait for the other attempt's lease instead of spending receives.

use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use sqsafe_batch::{
    Backoff, BatchProcessor, DEFAULT_DEADLINE_RESERVE, Disposition, MAX_VISIBILITY, Processed,
    Record, RecordError,
};
use sqsafe_idempotency::{Claim, Idempotency, InMemoryStore, KeyBuilder, ManualClock};
use sqsafe_telemetry::Metric;

use crate::common::*;

const T0_MS: u64 = 1_714_564_800_000;

fn at(offset: Duration) -> SystemTime {
    UNIX_EPOCH + Duration::from_millis(T0_MS) + offset
}

fn reported(report: &sqsafe_batch::BatchReport) -> Vec<&str> {
    report
        .response
        .batch_item_failures
        .iter()
        .map(|f| f.item_identifier.as_str())
        .collect()
}

/// Message ids of the records a handler ran, in order.
type Ran = Arc<Mutex<Vec<String>>>;

/// A handler that takes `each` of the manual clock's time and notes which records ran.
fn slow_handler(
    clock: &ManualClock,
    each: Duration,
) -> (
    Ran,
    impl Fn(Record) -> std::future::Ready<Result<Processed, RecordError>>,
) {
    let ran = Arc::new(Mutex::new(Vec::new()));
    let (clock, notes) = (clock.clone(), Arc::clone(&ran));
    let handler = move |record: Record| {
        clock.advance(each);
        notes
            .lock()
            .expect("lock")
            .push(record.message_id().to_owned());
        std::future::ready(Ok(Processed::Applied))
    };
    (ran, handler)
}

#[tokio::test]
async fn records_not_started_within_the_deadline_reserve_are_reported_without_running() {
    let clock = ManualClock::at_millis(T0_MS);
    let (ran, handler) = slow_handler(&clock, Duration::from_secs(3));
    let processor = BatchProcessor::builder("c", 1)
        .max_concurrency(1)
        .deadline_reserve(Duration::from_secs(2))
        .clock(clock.clone())
        .build()
        .expect("config");
    let batch = event(vec![
        message("m1", "{}"),
        message("m2", "{}"),
        message("m3", "{}"),
        message("m4", "{}"),
        message("m5", "{}"),
    ]);
    // 10 s left at the start; each record takes 3 s: m4 would start with 1 s left, under the 2 s reserve.
    let report = processor
        .process(batch, Some(at(Duration::from_secs(10))), &handler)
        .await
        .expect("batch");
    assert_eq!(*ran.lock().expect("lock"), ["m1", "m2", "m3"]);
    assert_eq!(reported(&report), ["m4", "m5"]);
    for r in &report.records[3..] {
        assert!(
            matches!(&r.disposition, Disposition::Retry(e)
                if e.kind() == RecordError::DEADLINE && e.is_retryable()),
            "{:?}",
            r.disposition
        );
    }
    assert_eq!(report.metrics.get(Metric::Deferred), 2);
    assert_eq!(report.metrics.get(Metric::FailedTransient), 2);
    assert_eq!(report.metrics.get(Metric::Processed), 3);
}

#[tokio::test]
async fn the_default_reserve_is_two_seconds_and_applies_only_with_a_deadline() {
    assert_eq!(DEFAULT_DEADLINE_RESERVE, Duration::from_secs(2));
    let clock = ManualClock::at_millis(T0_MS);
    let (ran, handler) = slow_handler(&clock, Duration::ZERO);
    let processor = BatchProcessor::builder("c", 1)
        .clock(clock.clone())
        .build()
        .expect("config");
    let late = processor
        .process(
            event(vec![message("m1", "{}")]),
            Some(at(Duration::from_millis(1_999))),
            &handler,
        )
        .await
        .expect("batch");
    assert_eq!(reported(&late), ["m1"]);
    let in_time = processor
        .process(
            event(vec![message("m2", "{}")]),
            Some(at(Duration::from_secs(2))),
            &handler,
        )
        .await
        .expect("batch");
    assert!(reported(&in_time).is_empty());
    let no_deadline = processor
        .process(event(vec![message("m3", "{}")]), None, &handler)
        .await
        .expect("batch");
    assert!(reported(&no_deadline).is_empty());
    assert_eq!(*ran.lock().expect("lock"), ["m2", "m3"]);
}

#[tokio::test]
async fn fifo_a_deferred_record_holds_back_the_rest_of_its_group() {
    let clock = ManualClock::at_millis(T0_MS);
    let (ran, handler) = slow_handler(&clock, Duration::from_secs(7));
    let processor = BatchProcessor::builder("c", 1)
        .max_concurrency(1)
        .clock(clock.clone())
        .build()
        .expect("config");
    let batch = event(vec![
        in_group(message("a", "{}"), "g"),
        in_group(message("b", "{}"), "g"),
        in_group(message("c", "{}"), "g"),
        in_group(message("d", "{}"), "h"),
    ]);
    // 8 s left: `a` runs and leaves 1 s, so `b` is deferred, `c` is held back behind it, and group h's `d` is
    // deferred too.
    let report = processor
        .process(batch, Some(at(Duration::from_secs(8))), &handler)
        .await
        .expect("batch");
    assert_eq!(*ran.lock().expect("lock"), ["a"]);
    assert_eq!(reported(&report), ["b", "c", "d"]);
    assert!(
        matches!(&report.records[1].disposition, Disposition::Retry(e) if e.kind() == "deadline")
    );
    assert!(matches!(
        report.records[2].disposition,
        Disposition::SkippedAfterGroupFailure
    ));
    assert_eq!(report.metrics.get(Metric::Deferred), 2);
    assert_eq!(report.metrics.get(Metric::HeldBack), 1);
}

#[tokio::test]
async fn a_deferred_record_on_its_last_attempt_goes_to_the_dlq_with_the_deadline_as_context() {
    let clock = ManualClock::at_millis(T0_MS);
    let (ran, handler) = slow_handler(&clock, Duration::ZERO);
    let dlq = RecordingDlq::default();
    let processor = BatchProcessor::builder("c", 1)
        .max_attempts(3)
        .dead_letter_queue(dlq.clone())
        .clock(clock.clone())
        .build()
        .expect("config");
    let report = processor
        .process(
            event(vec![with_receive_count(message("m1", "{}"), 3)]),
            Some(at(Duration::from_millis(500))),
            &handler,
        )
        .await
        .expect("batch");
    assert!(ran.lock().expect("lock").is_empty());
    assert!(reported(&report).is_empty(), "dead-lettered, not lost");
    let sent = dlq.sent.lock().expect("lock");
    assert_eq!(sent[0].1.error_kind, "deadline");
}

/// Visibility changes made for `m1`.
fn changes(visibility: &RecordingVisibility) -> Vec<Duration> {
    visibility
        .changes
        .lock()
        .expect("lock")
        .iter()
        .map(|(_, d)| *d)
        .collect()
}

#[tokio::test]
async fn an_in_progress_duplicate_stays_invisible_until_the_other_lease_ends() {
    let clock = ManualClock::at_millis(T0_MS);
    let idem = Idempotency::builder(InMemoryStore::new(), "c", 1)
        .clock(clock.clone())
        .build()
        .expect("idempotency");
    let key = KeyBuilder::new("c", 1)
        .intent("payment", "p-1")
        .build()
        .expect("key");
    // Another attempt holds the key (its effect is still running).
    let request = idem.request(key.clone(), "payload").expect("request");
    let held = idem.claim::<()>(&request).await.expect("claim");
    assert!(matches!(held, Claim::Acquired(_)));

    let visibility = RecordingVisibility::default();
    let processor = BatchProcessor::builder("c", 1)
        .visibility(visibility.clone())
        .backoff(
            Backoff::new(Duration::from_secs(2), Duration::from_secs(4))
                .expect("backoff")
                .seed(1),
        )
        .clock(clock.clone())
        .build()
        .expect("config");
    let handler = |record: Record| {
        let (idem, key) = (&idem, key.clone());
        async move {
            let (processed, _) = record
                .run_idempotent(idem, key, "payload", || async { Ok::<_, RecordError>(()) })
                .await?;
            Ok(processed)
        }
    };
    clock.advance(Duration::from_millis(10_300));
    let report = processor
        .process(event(vec![message("m1", "{}")]), None, &handler)
        .await
        .expect("batch");
    let Disposition::Retry(error) = &report.records[0].disposition else {
        panic!("reported: {:?}", report.records[0].disposition);
    };
    assert_eq!(error.kind(), RecordError::IN_PROGRESS);
    let until = error
        .retry_not_before()
        .expect("an in-progress error carries the lease end");
    let wait = until
        .duration_since(at(Duration::from_millis(10_300)))
        .expect("in the future");
    assert!(
        wait > Duration::from_secs(4),
        "longer than any backoff here"
    );
    // Rounded up to whole seconds, plus one.
    let expected = Duration::from_secs(wait.as_secs() + u64::from(wait.subsec_nanos() > 0) + 1);
    assert_eq!(changes(&visibility), [expected]);
}

#[tokio::test]
async fn retry_not_before_wins_over_the_backoff_and_is_capped_at_twelve_hours() {
    let clock = ManualClock::at_millis(T0_MS);
    let visibility = RecordingVisibility::default();
    let processor = BatchProcessor::builder("c", 1)
        .visibility(visibility.clone())
        .backoff(Backoff::default().seed(1))
        .clock(clock.clone())
        .build()
        .expect("config");
    let handler = |record: Record| async move {
        let wait = match record.body()? {
            "soon" => Duration::from_millis(90_500),
            "past" => Duration::ZERO,
            _ => Duration::from_secs(2 * 24 * 3600),
        };
        Err::<Processed, _>(
            RecordError::transient("busy", "held elsewhere")
                .with_retry_not_before(at(Duration::ZERO) + wait),
        )
    };
    processor
        .process(
            event(vec![
                message("m1", "soon"),
                message("m2", "past"),
                message("m3", "days"),
            ]),
            None,
            &handler,
        )
        .await
        .expect("batch");
    let mut got = visibility.changes.lock().expect("lock").clone();
    got.sort();
    assert_eq!(
        got,
        [
            ("rh-m1".to_owned(), Duration::from_secs(92)),
            ("rh-m2".to_owned(), Duration::from_secs(1)),
            ("rh-m3".to_owned(), MAX_VISIBILITY),
        ]
    );
}

#[tokio::test]
async fn without_a_visibility_control_retry_not_before_changes_nothing() {
    let processor = BatchProcessor::builder("c", 1).build().expect("config");
    let handler = |_record: Record| async move {
        Err::<Processed, _>(
            RecordError::transient("busy", "held elsewhere")
                .with_retry_not_before(SystemTime::now()),
        )
    };
    let report = processor
        .process(event(vec![message("m1", "x")]), None, &handler)
        .await
        .expect("batch");
    assert_eq!(reported(&report), ["m1"]);
}

/// An emulator's Runtime API may send a deadline that has already passed (`cargo lambda watch` 1.9 sends 600000, a
/// duration, where Lambda sends a point in time): that is an unknown deadline, not "no time left". The records run.
#[tokio::test]
async fn a_deadline_already_past_when_the_batch_arrives_is_treated_as_unknown() {
    let clock = ManualClock::at_millis(T0_MS);
    let (ran, handler) = slow_handler(&clock, Duration::ZERO);
    let processor = BatchProcessor::builder("c", 1)
        .clock(clock.clone())
        .build()
        .expect("config");
    let mut context = lambda_runtime::Context::default();
    context.request_id = "req-watch".to_owned();
    context.deadline = 600_000;
    let response = processor
        .handle(
            lambda_runtime::LambdaEvent::new(event(vec![message("m1", "{}")]), context),
            &handler,
        )
        .await
        .expect("batch");
    assert!(response.batch_item_failures.is_empty(), "{response:?}");
    assert_eq!(*ran.lock().expect("lock"), ["m1"]);
}

/// A handler that fails every record: permanently for a body `permanent`, else transiently.
fn failing(record: Record) -> std::future::Ready<Result<Processed, RecordError>> {
    std::future::ready(Err(if record.body().ok() == Some("permanent") {
        RecordError::permanent("precondition", "refused")
    } else {
        RecordError::transient("downstream_unavailable", "503")
    }))
}

#[tokio::test(start_paused = true)]
async fn a_dead_letter_send_that_hangs_is_cut_before_the_deadline_and_the_record_comes_back() {
    let clock = ManualClock::at_millis(T0_MS);
    // An SQS that takes a minute to answer (the SDK's own timeouts are 10 s an operation, and a retry can follow).
    let dlq = RecordingDlq {
        delay: Duration::from_secs(60),
        ..RecordingDlq::default()
    };
    let processor = BatchProcessor::builder("c", 1)
        .deadline_reserve(Duration::from_secs(2))
        .dead_letter_queue(dlq.clone())
        .clock(clock.clone())
        .build()
        .expect("config");
    let started = tokio::time::Instant::now();
    // 6 s left: the send may run until just before the deadline (250 ms are kept to return the response).
    let report = processor
        .process(
            event(vec![message("m1", "permanent")]),
            Some(at(Duration::from_secs(6))),
            &failing,
        )
        .await
        .expect("batch");
    let took = started.elapsed();
    assert!(
        took < Duration::from_secs(6),
        "the batch took {took:?}, past its deadline"
    );
    assert_eq!(*dlq.started.lock().expect("lock"), 1, "the send was tried");
    assert!(
        dlq.sent.lock().expect("lock").is_empty(),
        "and never answered"
    );
    assert!(
        matches!(&report.records[0].disposition, Disposition::Retry(e) if e.kind() == "precondition"),
        "not dead-lettered, so it comes back: {:?}",
        report.records[0].disposition
    );
    assert_eq!(reported(&report), ["m1"]);
}

#[tokio::test(start_paused = true)]
async fn no_dead_letter_send_starts_when_the_deadline_is_too_near_to_wait_for_its_answer() {
    let clock = ManualClock::at_millis(T0_MS);
    let dlq = RecordingDlq::default();
    let processor = BatchProcessor::builder("c", 1)
        .deadline_reserve(Duration::from_secs(2))
        .dead_letter_queue(dlq.clone())
        .clock(clock.clone())
        .build()
        .expect("config");
    // The record starts with 2.5 s left (past the reserve check) and its handler takes 2.4 s: 100 ms are left when
    // it fails, less than the time kept to return the response.
    let handler = {
        let clock = clock.clone();
        move |record: Record| {
            clock.advance(Duration::from_millis(2_400));
            failing(record)
        }
    };
    let report = processor
        .process(
            event(vec![message("m1", "permanent")]),
            Some(at(Duration::from_millis(2_500))),
            &handler,
        )
        .await
        .expect("batch");
    assert_eq!(*dlq.started.lock().expect("lock"), 0, "no send started");
    assert_eq!(reported(&report), ["m1"], "the record comes back");
}

#[tokio::test(start_paused = true)]
async fn a_backoff_visibility_change_that_hangs_is_cut_before_the_deadline() {
    let clock = ManualClock::at_millis(T0_MS);
    let visibility = RecordingVisibility {
        delay: Duration::from_secs(60),
        ..RecordingVisibility::default()
    };
    let processor = BatchProcessor::builder("c", 1)
        .deadline_reserve(Duration::from_secs(2))
        .visibility(visibility.clone())
        .backoff(Backoff::new(Duration::from_secs(30), Duration::from_secs(900)).expect("backoff"))
        .clock(clock.clone())
        .build()
        .expect("config");
    let started = tokio::time::Instant::now();
    let report = processor
        .process(
            event(vec![message("m1", "transient")]),
            Some(at(Duration::from_secs(6))),
            &failing,
        )
        .await
        .expect("batch");
    let took = started.elapsed();
    assert!(
        took < Duration::from_secs(6),
        "the batch took {took:?}, past its deadline"
    );
    assert!(
        visibility.changes.lock().expect("lock").is_empty(),
        "the change never answered"
    );
    assert_eq!(
        reported(&report),
        ["m1"],
        "the record comes back after the queue's own timeout"
    );
}
