//! What a delivery and a DLQ show a consumer's test.

use sqsafe::{BatchReport, Disposition, Processed};

/// What became of each record of one invocation ([`Harness::deliver`](super::Harness::deliver)): the batch's
/// report, with the questions a test asks of it. Its `Debug` shows each record's disposition.
#[derive(Debug)]
pub struct Delivery {
    /// The report: the response Lambda would get and each record's disposition, in the event's order.
    pub report: BatchReport,
}

impl Delivery {
    /// Each record's disposition, in the event's order: `matches!(d.dispositions()[..], [Disposition::Retry(_)])`.
    pub fn dispositions(&self) -> Vec<&Disposition> {
        self.report.records.iter().map(|r| &r.disposition).collect()
    }

    /// `true` when there were records and every one succeeded as `processed` (none is in `batchItemFailures`, none
    /// went to the DLQ).
    pub fn all_succeeded(&self, processed: Processed) -> bool {
        self.all(|d| matches!(d, Disposition::Succeeded(p) if *p == processed))
    }

    /// `true` when there were records and every one is returned for redelivery ([`Disposition::Retry`]).
    pub fn all_retried(&self) -> bool {
        self.all(|d| matches!(d, Disposition::Retry(_)))
    }

    /// `true` when there were records and every one went to the DLQ ([`Disposition::DeadLettered`]).
    pub fn all_dead_lettered(&self) -> bool {
        self.all(|d| matches!(d, Disposition::DeadLettered(_)))
    }

    /// The identifiers the answer names in `batchItemFailures`, in order: message ids of an SQS batch, the sequence
    /// number a stream's shard stopped at (only the first record that must come back: Lambda checkpoints there).
    pub fn reported(&self) -> Vec<&str> {
        self.report
            .response
            .batch_item_failures
            .iter()
            .map(|f| f.item_identifier.as_str())
            .collect()
    }

    fn all(&self, f: impl Fn(&Disposition) -> bool) -> bool {
        !self.report.records.is_empty() && self.report.records.iter().all(|r| f(&r.disposition))
    }
}

impl From<BatchReport> for Delivery {
    fn from(report: BatchReport) -> Self {
        Self { report }
    }
}

impl std::ops::Deref for Delivery {
    type Target = BatchReport;

    fn deref(&self) -> &BatchReport {
        &self.report
    }
}

/// A message of the consumer's DLQ ([`Harness::dead_letters`](super::Harness::dead_letters)).
#[derive(Debug, Clone)]
pub struct DeadLetter {
    /// Its body: the record's original body when sqsafe sent it there.
    pub body: String,
    /// The message as received, with its attributes.
    pub message: aws_sdk_sqs::types::Message,
}

impl DeadLetter {
    /// A field of the context sqsafe sent with it (`error_kind`, `original_message_id`, `consumer`, ...): see
    /// [`sqsafe_testkit::dlq_context`]. `None` when the message has no context (SQS's redrive policy moved it there)
    /// or the context lacks the field.
    pub fn context(&self, field: &str) -> Option<String> {
        sqsafe_testkit::dlq_context(&self.message, field)
    }
}

impl From<aws_sdk_sqs::types::Message> for DeadLetter {
    fn from(message: aws_sdk_sqs::types::Message) -> Self {
        Self {
            body: message.body().unwrap_or_default().to_owned(),
            message,
        }
    }
}
