//! `cargo lambda watch` (1.9) answers every `GET /next` with `Lambda-Runtime-Deadline-Ms: 600000`, a constant (its
//! `functions_router.rs`), where Lambda sends a point in time: 600000 ms after the epoch. That is not a deadline that
//! passed but no point in time at all; treated as unknown, it is not warned about (it was: a WARN at every process
//! start under watch). Its own test binary: the warning is said once per process.

mod common;

use std::time::{Duration, SystemTime};

use aws_lambda_events::sqs::{SqsEvent, SqsMessage};
use common::Logs;
use sqsafe_batch::{BatchProcessor, Processed, Record, RecordError};

fn event() -> SqsEvent {
    let mut message = SqsMessage::default();
    message.message_id = Some("m1".to_owned());
    message.body = Some("{}".to_owned());
    let mut event = SqsEvent::default();
    event.records = vec![message];
    event
}

#[tokio::test(flavor = "current_thread")]
async fn cargo_lambda_watch_constant_deadline_is_not_warned_about() {
    let logs = Logs::default();
    let subscriber = tracing_subscriber::fmt()
        .with_writer(logs.clone())
        .with_ansi(false)
        .finish();
    let _guard = tracing::subscriber::set_default(subscriber);
    let now = SystemTime::UNIX_EPOCH + Duration::from_secs(1_796_000_000);
    let processor = BatchProcessor::builder("c", 1)
        .clock(move || now)
        .build()
        .expect("config");
    let handler = |_record: Record| async { Ok::<_, RecordError>(Processed::Applied) };
    // cargo lambda watch's constant, and a default Context's 0.
    for deadline in [600_000, 0] {
        let mut context = lambda_runtime::Context::default();
        context.request_id = format!("req-{deadline}");
        context.deadline = deadline;
        let response = processor
            .handle(lambda_runtime::LambdaEvent::new(event(), context), &handler)
            .await
            .expect("batch");
        assert!(response.batch_item_failures.is_empty(), "{response:?}");
    }
    let text = logs.text();
    assert!(!text.contains("WARN"), "no warning:\n{text}");
}
