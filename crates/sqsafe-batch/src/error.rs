use std::borrow::Cow;
use std::fmt;
use std::time::SystemTime;

pub use sqsafe_idempotency::ErrorClass;
use sqsafe_idempotency::{BoxError, RunError};

/// Why one record failed, and whether it should come back.
///
/// `kind` is a short stable label (`bad_payload`, `payload_mismatch`, `downstream_5xx`, …) for logs, metrics and the
/// dead-letter context (`error_kind`); `message` is for people. Neither ever quotes the message body.
///
/// A transient error may say when a retry can first succeed ([`RecordError::retry_not_before`]): the batch processor
/// then keeps the message invisible until that time instead of applying its backoff.
#[derive(Debug)]
pub struct RecordError {
    class: ErrorClass,
    kind: Cow<'static, str>,
    message: String,
    retry_not_before: Option<SystemTime>,
    source: Option<BoxError>,
}

impl RecordError {
    /// Kind of a record that was not run because too little time was left before the invocation's deadline
    /// (transient).
    pub const DEADLINE: &'static str = "deadline";
    /// Kind of a body that does not parse into the consumer's payload type (permanent).
    pub const BAD_PAYLOAD: &'static str = "bad_payload";
    /// Kind of a message without a body (permanent).
    pub const MISSING_BODY: &'static str = "missing_body";
    /// Kind of a body that is not the envelope the consumer declared (permanent); see [`Envelope`](crate::Envelope).
    pub const BAD_ENVELOPE: &'static str = "bad_envelope";
    /// Kind of a key that another attempt holds (transient); see [`sqsafe_idempotency::Error::InProgress`].
    pub const IN_PROGRESS: &'static str = "in_progress";
    /// Kind of a claim lost to a takeover (transient); see [`sqsafe_idempotency::Error::LeaseLost`].
    pub const LEASE_LOST: &'static str = "lease_lost";
    /// Kind of a handler that panicked (transient).
    pub const PANIC: &'static str = "panic";
    /// Kind of a Kinesis record aggregated by the Kinesis Producer Library (permanent): sqsafe does not take
    /// aggregates apart, so the record goes whole (base64) to the failure queue before the handler runs.
    pub const KPL_AGGREGATED: &'static str = "kpl_aggregated";

    /// A failure that a later delivery can get past (throttling, timeouts, a downstream 5xx, a key in progress).
    pub fn transient(kind: impl Into<Cow<'static, str>>, message: impl fmt::Display) -> Self {
        Self {
            class: ErrorClass::Transient,
            kind: kind.into(),
            message: message.to_string(),
            retry_not_before: None,
            source: None,
        }
    }

    /// A failure that no later delivery can get past (bad schema, unknown version, a failed business precondition).
    pub fn permanent(kind: impl Into<Cow<'static, str>>, message: impl fmt::Display) -> Self {
        Self {
            class: ErrorClass::Permanent,
            kind: kind.into(),
            message: message.to_string(),
            retry_not_before: None,
            source: None,
        }
    }

    /// Says that a retry cannot succeed before `at` (e.g. another attempt's lease ends then). When the record is
    /// reported and the processor has a visibility control, the message stays invisible until then (rounded up to
    /// whole seconds, plus one, at most 12 h) instead of the backoff delay. Ignored for permanent errors.
    pub fn with_retry_not_before(mut self, at: SystemTime) -> Self {
        self.retry_not_before = Some(at);
        self
    }

    /// When a retry can first succeed, if known.
    pub fn retry_not_before(&self) -> Option<SystemTime> {
        self.retry_not_before
    }

    /// Attaches the underlying error.
    pub fn with_source(mut self, source: impl Into<BoxError>) -> Self {
        self.source = Some(source.into());
        self
    }

    /// Transient or permanent.
    pub fn class(&self) -> ErrorClass {
        self.class
    }

    /// `true` when the record should come back.
    pub fn is_retryable(&self) -> bool {
        self.class == ErrorClass::Transient
    }

    /// The short label.
    pub fn kind(&self) -> &str {
        &self.kind
    }

    /// The human-readable message.
    pub fn message(&self) -> &str {
        &self.message
    }
}

impl fmt::Display for RecordError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{} ({}): {}",
            self.kind,
            class_name(self.class),
            self.message
        )
    }
}

impl std::error::Error for RecordError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        self.source
            .as_deref()
            .map(|e| e as &(dyn std::error::Error + 'static))
    }
}

pub(crate) fn class_name(class: ErrorClass) -> &'static str {
    match class {
        ErrorClass::Transient => "transient",
        ErrorClass::Permanent => "permanent",
    }
}

impl From<sqsafe_idempotency::Error> for RecordError {
    fn from(e: sqsafe_idempotency::Error) -> Self {
        let kind = e.kind();
        Self {
            class: e.class(),
            kind: kind.into(),
            message: e.to_string(),
            retry_not_before: e.retry_not_before(),
            source: Some(Box::new(e)),
        }
    }
}

impl From<RunError<RecordError>> for RecordError {
    fn from(e: RunError<RecordError>) -> Self {
        match e {
            RunError::Idempotency(e) => e.into(),
            RunError::Effect(e) => e,
        }
    }
}

/// An error for the whole invocation: Lambda retries the whole batch (nothing is acknowledged).
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum BatchError {
    /// The event is not a usable batch (no records, a record without a message id or a sequence number, a stream
    /// record that cannot be read). Reporting such records in
    /// `batchItemFailures` is impossible (an empty or unknown id fails the whole batch anyway), so the invocation fails.
    #[error("malformed event: {0}")]
    MalformedEvent(String),
    /// Every record failed and the processor is set to fail the invocation in that case.
    #[error("all {0} records of the batch failed")]
    AllFailed(usize),
    /// A builder setting is not acceptable.
    #[error("invalid batch processor configuration: {0}")]
    Config(String),
}

impl BatchError {
    /// A stable error type for Lambda's error report.
    pub fn error_type(&self) -> &'static str {
        match self {
            BatchError::MalformedEvent(_) => "sqsafe.MalformedEvent",
            BatchError::AllFailed(_) => "sqsafe.AllRecordsFailed",
            BatchError::Config(_) => "sqsafe.Config",
        }
    }
}

impl From<BatchError> for lambda_runtime::Diagnostic {
    fn from(e: BatchError) -> Self {
        lambda_runtime::Diagnostic {
            error_type: e.error_type().to_owned(),
            error_message: e.to_string(),
        }
    }
}
