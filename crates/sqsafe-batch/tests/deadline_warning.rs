//! An emulator's Runtime API (`cargo lambda watch` 1.9) sends a deadline that has already passed with every invocation:
//! the warning about it is said once per process, not once per invocation. Its own test binary: the warning is
//! per process, and other tests would have said it first.

use std::io::Write;
use std::sync::{Arc, Mutex};

use aws_lambda_events::sqs::{SqsEvent, SqsMessage};
use sqsafe_batch::{BatchProcessor, Processed, Record, RecordError};

/// Everything the subscriber writes.
#[derive(Clone, Default)]
struct Captured(Arc<Mutex<Vec<u8>>>);

impl Write for Captured {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.0
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .extend_from_slice(buf);
        Ok(buf.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

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
    let captured = Captured::default();
    let writer = captured.clone();
    let subscriber = tracing_subscriber::fmt()
        .with_writer(move || writer.clone())
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
    let text = String::from_utf8_lossy(&captured.0.lock().expect("lock")).into_owned();
    let warnings = text.matches("deadline has already passed").count();
    assert_eq!(warnings, 1, "one warning for three invocations:\n{text}");
}
