//! Event builders and recording test doubles for the batch processor's pure logic.
#![allow(dead_code, unreachable_pub, missing_docs)]

use std::sync::{Arc, Mutex};
use std::time::Duration;

use aws_lambda_events::sqs::{SqsEvent, SqsMessage, SqsMessageAttribute};
use sqsafe_batch::{DeadLetterQueue, FailureContext, VisibilityControl};
use sqsafe_idempotency::BoxError;

pub const STANDARD_ARN: &str = "arn:aws:sqs:us-east-1:123456789012:payments";
pub const FIFO_ARN: &str = "arn:aws:sqs:us-east-1:123456789012:ledger.fifo";

pub fn message(id: &str, body: &str) -> SqsMessage {
    let mut m = SqsMessage::default();
    m.message_id = Some(id.to_owned());
    m.receipt_handle = Some(format!("rh-{id}"));
    m.body = Some(body.to_owned());
    m.event_source_arn = Some(STANDARD_ARN.to_owned());
    m.attributes
        .insert("ApproximateReceiveCount".into(), "1".into());
    m
}

pub fn with_receive_count(mut m: SqsMessage, n: u32) -> SqsMessage {
    m.attributes
        .insert("ApproximateReceiveCount".into(), n.to_string());
    m
}

pub fn in_group(mut m: SqsMessage, group: &str) -> SqsMessage {
    m.attributes
        .insert("MessageGroupId".into(), group.to_owned());
    m.event_source_arn = Some(FIFO_ARN.to_owned());
    m
}

pub fn with_attribute(mut m: SqsMessage, name: &str, value: &str) -> SqsMessage {
    let mut a = SqsMessageAttribute::default();
    a.string_value = Some(value.to_owned());
    a.data_type = Some("String".to_owned());
    m.message_attributes.insert(name.to_owned(), a);
    m
}

pub fn event(records: Vec<SqsMessage>) -> SqsEvent {
    let mut e = SqsEvent::default();
    e.records = records;
    e
}

/// Records what would have been dead-lettered; can be told to fail.
#[derive(Clone, Default)]
pub struct RecordingDlq {
    pub sent: Arc<Mutex<Vec<(String, FailureContext)>>>,
    pub fail: bool,
    /// How long each send takes to answer (an SQS that accepts the connection and is slow, or never answers).
    pub delay: Duration,
    /// Sends started, answered or not.
    pub started: Arc<Mutex<u32>>,
}

impl DeadLetterQueue for RecordingDlq {
    async fn send(&self, message: &SqsMessage, failure: &FailureContext) -> Result<(), BoxError> {
        *self.started.lock().expect("lock") += 1;
        tokio::time::sleep(self.delay).await;
        if self.fail {
            return Err("DLQ unavailable".into());
        }
        let body = message.body.clone().unwrap_or_default();
        self.sent
            .lock()
            .expect("lock")
            .push((body, failure.clone()));
        Ok(())
    }
}

/// Records visibility changes.
#[derive(Clone, Default)]
pub struct RecordingVisibility {
    pub changes: Arc<Mutex<Vec<(String, Duration)>>>,
    /// How long each change takes to answer (a slow SQS).
    pub delay: Duration,
    /// The queue's `maxReceiveCount`, as its redrive policy would say.
    pub max_receive: Option<u32>,
}

impl VisibilityControl for RecordingVisibility {
    async fn set_visibility(
        &self,
        receipt_handle: &str,
        timeout: Duration,
    ) -> Result<(), BoxError> {
        tokio::time::sleep(self.delay).await;
        self.changes
            .lock()
            .expect("lock")
            .push((receipt_handle.to_owned(), timeout));
        Ok(())
    }

    async fn max_receive_count(&self) -> Result<Option<u32>, BoxError> {
        Ok(self.max_receive)
    }
}

/// JSON log lines written through `sqsafe_telemetry`'s layer, captured for assertions.
#[derive(Clone, Default)]
pub struct Logs(Arc<Mutex<Vec<u8>>>);

impl Logs {
    /// Captures every `info` and above line of this thread until the guard drops (tests run on a current-thread
    /// runtime, so the whole test is covered).
    pub fn capture() -> (Self, tracing::subscriber::DefaultGuard) {
        Self::capture_at("info")
    }

    /// The same at `level` (a filter as `LOG_LEVEL` takes it, e.g. `trace`).
    pub fn capture_at(level: &str) -> (Self, tracing::subscriber::DefaultGuard) {
        use tracing_subscriber::layer::SubscriberExt;
        let logs = Self::default();
        let config = sqsafe_telemetry::LogConfig {
            level: level.into(),
            format: sqsafe_telemetry::LogFormat::Json,
            function_name: None,
            ..Default::default()
        };
        let subscriber = tracing_subscriber::registry()
            .with(sqsafe_telemetry::layer_with_writer(&config, logs.clone()));
        let guard = tracing::subscriber::set_default(subscriber);
        (logs, guard)
    }

    pub fn text(&self) -> String {
        let bytes = self.0.lock().unwrap_or_else(|p| p.into_inner()).clone();
        String::from_utf8(bytes).expect("UTF-8 lines")
    }

    pub fn lines(&self) -> Vec<serde_json::Value> {
        self.text()
            .lines()
            .map(|l| serde_json::from_str(l).expect("one JSON object per line"))
            .collect()
    }
}

impl std::io::Write for Logs {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        // A test that panicked while writing poisons the lock; the bytes are still worth keeping for the next one.
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

impl<'a> tracing_subscriber::fmt::MakeWriter<'a> for Logs {
    type Writer = Logs;

    fn make_writer(&'a self) -> Self::Writer {
        self.clone()
    }
}

/// The line itself when it was logged inside a record's span: the span's keys (`message_id`, `correlation_id`,
/// `idempotency_key`, ...) are top-level keys of the line.
pub fn in_record(line: &serde_json::Value) -> Option<&serde_json::Value> {
    line.get("message_id").map(|_| line)
}

/// Runs a one-record batch (applied) through a processor whose clock stands at `now_secs` after the epoch, once per
/// `(request id, deadline)` (the deadline as Lambda's epoch milliseconds); returns what was logged, as plain text.
/// For the deadline warning, which is said once per process: each caller is a test binary of its own.
pub async fn deadline_logs(now_secs: u64, invocations: &[(&str, u64)]) -> String {
    use sqsafe_batch::{BatchProcessor, Processed, Record, RecordError};
    let logs = Logs::default();
    let subscriber = tracing_subscriber::fmt()
        .with_writer(logs.clone())
        .with_ansi(false)
        .finish();
    let _guard = tracing::subscriber::set_default(subscriber);
    let now = std::time::SystemTime::UNIX_EPOCH + Duration::from_secs(now_secs);
    let processor = BatchProcessor::builder("c", 1)
        .clock(move || now)
        .build()
        .expect("config");
    let handler = |_record: Record| async { Ok::<_, RecordError>(Processed::Applied) };
    for (request, deadline) in invocations {
        let mut context = lambda_runtime::Context::default();
        context.request_id = (*request).to_owned();
        context.deadline = *deadline;
        let batch = event(vec![message("m1", "{}")]);
        let response = processor
            .handle(lambda_runtime::LambdaEvent::new(batch, context), &handler)
            .await
            .expect("batch");
        assert!(response.batch_item_failures.is_empty(), "{response:?}");
    }
    logs.text()
}
