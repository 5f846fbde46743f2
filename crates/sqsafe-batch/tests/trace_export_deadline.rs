//! The span export never delays a batch's answer past the invocation's deadline (issue 40, item 1). With
//! `SQSAFE_TRACES=otlp`, the spans are sent after the batch, before the answer: a collector that accepts the
//! connection and never answers once held the answer for the export's full 2 s, past a deadline 1.2 s away (Lambda
//! then times the invocation out and every message comes back). Its own test binary: the exporter is the process's.

mod common;

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use sqsafe_batch::{BatchProcessor, Processed, Record, RecordError};
use sqsafe_telemetry::{LogConfig, Traces};
use tokio::net::TcpListener;

/// A collector that accepts every connection and never answers; counts the connections.
async fn black_hole() -> (String, Arc<AtomicUsize>) {
    let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let endpoint = format!("http://{}/v1/traces", listener.local_addr().expect("addr"));
    let accepted = Arc::new(AtomicUsize::new(0));
    let counted = Arc::clone(&accepted);
    tokio::spawn(async move {
        let mut held = Vec::new();
        while let Ok((stream, _)) = listener.accept().await {
            counted.fetch_add(1, Ordering::SeqCst);
            held.push(stream);
        }
    });
    (endpoint, accepted)
}

/// One applied record through `handle`, its deadline `left` from now; how long the answer took.
async fn answer_within(processor: &BatchProcessor, request: &str, left: Duration) -> Duration {
    let mut context = lambda_runtime::Context::default();
    context.request_id = request.to_owned();
    let deadline = SystemTime::now() + left;
    context.deadline = deadline
        .duration_since(UNIX_EPOCH)
        .expect("after the epoch")
        .as_millis()
        .try_into()
        .expect("milliseconds");
    let handler = |_record: Record| async { Ok::<_, RecordError>(Processed::Applied) };
    let batch = common::event(vec![common::message(request, "{}")]);
    let started = Instant::now();
    let response = processor
        .handle(lambda_runtime::LambdaEvent::new(batch, context), &handler)
        .await
        .expect("batch");
    let took = started.elapsed();
    // Records stop starting 2 s before the deadline: with less left the record is a `deadline` failure, which is
    // fine here: what matters is when the answer came.
    let _ = response;
    took
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_collector_that_never_answers_costs_spans_not_the_answers_deadline() {
    let (endpoint, accepted) = black_hole().await;
    sqsafe_telemetry::init_with(LogConfig {
        traces: Traces::Otlp {
            endpoint,
            service_name: Some("trace-export-deadline".into()),
        },
        ..LogConfig::default()
    })
    .expect("subscriber installed");
    let processor = BatchProcessor::builder("c", 1)
        .deadline_reserve(Duration::ZERO)
        .build()
        .expect("config");

    // 1.2 s left (the case): the export is cut 250 ms before the deadline, not after its own 2 s.
    let took = answer_within(&processor, "m-1200", Duration::from_millis(1_200)).await;
    assert!(
        took < Duration::from_millis(1_100),
        "the answer came {} ms after the batch started, its deadline 1,200 ms away",
        took.as_millis()
    );
    assert_eq!(accepted.load(Ordering::SeqCst), 1, "the export was tried");

    // 200 ms left, less than the answer's margin: nothing is sent, the answer comes at once.
    let took = answer_within(&processor, "m-200", Duration::from_millis(200)).await;
    assert!(
        took < Duration::from_millis(150),
        "the answer came {} ms after the batch started, its deadline 200 ms away",
        took.as_millis()
    );
    assert_eq!(
        accepted.load(Ordering::SeqCst),
        1,
        "no export was tried with no time left"
    );
}
