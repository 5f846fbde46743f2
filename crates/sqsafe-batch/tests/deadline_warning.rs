//! An emulator's Runtime API (`cargo lambda watch` 1.9) sends a deadline that has already passed with every invocation:
//! the warning about it is said once per process, not once per invocation. Its own test binary: the warning is
//! per process, and other tests would have said it first.

mod common;

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
async fn a_deadline_already_past_is_warned_about_once_per_process() {
    let logs = Logs::default();
    let subscriber = tracing_subscriber::fmt()
        .with_writer(logs.clone())
        .with_ansi(false)
        .finish();
    let _guard = tracing::subscriber::set_default(subscriber);
    let processor = BatchProcessor::builder("c", 1).build().expect("config");
    let handler = |_record: Record| async { Ok::<_, RecordError>(Processed::Applied) };
    for request in ["req-1", "req-2", "req-3"] {
        let mut context = lambda_runtime::Context::default();
        context.request_id = request.to_owned();
        context.deadline = 600_000;
        let response = processor
            .handle(lambda_runtime::LambdaEvent::new(event(), context), &handler)
            .await
            .expect("batch");
        assert!(response.batch_item_failures.is_empty(), "{response:?}");
    }
    let text = logs.text();
    let warnings = text.matches("deadline has already passed").count();
    assert_eq!(warnings, 1, "one warning for three invocations:\n{text}");
}
