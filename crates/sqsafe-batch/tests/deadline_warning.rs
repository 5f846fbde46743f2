//! A deadline that is a real point in time but already passed when the batch arrives (a clock set wrong, an emulator
//! that queued the invocation past it): the warning about it is said once per process, not once per invocation. Its
//! own test binary: the warning is per process, and other tests would have said it first. (`cargo lambda watch`'s
//! constant 600000 ms is no point in time and is not warned about: tests/emulator_deadline.rs.)

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
    let now = std::time::SystemTime::UNIX_EPOCH + std::time::Duration::from_secs(1_796_000_000);
    let processor = BatchProcessor::builder("c", 1)
        .clock(move || now)
        .build()
        .expect("config");
    let handler = |_record: Record| async { Ok::<_, RecordError>(Processed::Applied) };
    for request in ["req-1", "req-2", "req-3"] {
        let mut context = lambda_runtime::Context::default();
        context.request_id = request.to_owned();
        // Five seconds before the injected now, in Lambda's epoch milliseconds.
        context.deadline = 1_795_999_995_000;
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
