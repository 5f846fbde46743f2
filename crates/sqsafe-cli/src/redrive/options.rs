//! What `redrive` moves and how.

use jiff::SignedDuration;

use crate::scan::ScanOptions;

/// What `redrive` moves and how.
///
/// # Default
/// at most 10, every kind, no dry run, each dead letter to its recorded source queue, refusals kept, no fallback
/// window, a margin of 1 day, correlation id attribute `correlationId`, [`ScanOptions::default`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RedriveOptions {
    /// The most dead letters moved (copies of one original count once).
    pub max: usize,
    /// Only these error kinds (`no_context` for messages without sqsafe's context); empty: every kind.
    pub kinds: Vec<String>,
    /// Say what would move; send and delete nothing.
    pub dry_run: bool,
    /// The queue to send to (URL, name or ARN) instead of each dead letter's recorded source queue.
    pub to: Option<String>,
    /// Move dead letters that may have outlived their idempotency window too (their effect may apply again).
    pub force: bool,
    /// The consumer's idempotency window, for dead letters that do not record it.
    pub window: Option<SignedDuration>,
    /// Time kept before the end of the idempotency window for the consumer to take the redriven message: a dead
    /// letter whose window ends sooner is refused like an expired one.
    pub margin: SignedDuration,
    /// The attribute that carries the correlation id.
    pub correlation_attribute: String,
    /// The SQS endpoint the client is configured with (`AWS_ENDPOINT_URL_SQS` or `AWS_ENDPOINT_URL`, for local
    /// work): a target URL on it is allowed, besides the SQS endpoints of the client's region and loopback.
    pub endpoint: Option<String>,
    /// How the DLQ is received.
    pub scan: ScanOptions,
}

impl Default for RedriveOptions {
    fn default() -> Self {
        Self {
            max: 10,
            kinds: Vec::new(),
            dry_run: false,
            to: None,
            force: false,
            window: None,
            margin: SignedDuration::from_hours(24),
            correlation_attribute: "correlationId".to_owned(),
            endpoint: None,
            scan: ScanOptions::default(),
        }
    }
}
