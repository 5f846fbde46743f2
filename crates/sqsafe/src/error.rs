use sqsafe_batch::BatchError;

use crate::settings::ConfigError;

/// Boxed error from a consumer's own setup.
pub type BoxError = Box<dyn std::error::Error + Send + Sync + 'static>;

/// What can stop a consumer before or outside its records: every record's own failures are
/// [`RecordError`](crate::RecordError)s, reported per record.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// A setting is missing or invalid (names the variable and the reason).
    #[error(transparent)]
    Config(#[from] ConfigError),
    /// Logging could not be set up.
    #[error(transparent)]
    Telemetry(#[from] sqsafe_telemetry::Error),
    /// The idempotency layer refused its settings.
    #[error(transparent)]
    Idempotency(#[from] sqsafe_idempotency::Error),
    /// The idempotent HTTP layer (`sqsafe::api`) refused its settings.
    #[cfg(feature = "api")]
    #[error(transparent)]
    Api(#[from] crate::api::ApiConfigError),
    /// The batch processor refused its settings.
    #[error(transparent)]
    Batch(#[from] BatchError),
    /// The consumer's own setup failed (an HTTP client, a setting of its own).
    #[error("consumer setup: {0}")]
    Setup(#[source] BoxError),
    /// The Lambda runtime stopped with an error.
    #[error("lambda runtime: {0}")]
    Runtime(#[source] BoxError),
}

impl Error {
    /// Wraps an error of the consumer's own setup.
    pub fn setup(e: impl Into<BoxError>) -> Self {
        Error::Setup(e.into())
    }
}
