/// What stops a command as a whole. A single dead letter that cannot move is not an error: it is reported on its
/// own line and stays in the DLQ.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// An argument does not make sense.
    #[error("{0}")]
    Usage(String),
    /// A queue could not be found or named.
    #[error("queue {queue}: {reason}")]
    Queue {
        /// The queue as given.
        queue: String,
        /// Why.
        reason: String,
    },
    /// An SQS call failed.
    #[error("SQS {operation} failed: {message}")]
    Sqs {
        /// The operation, e.g. `ReceiveMessage`.
        operation: &'static str,
        /// The SDK's error, with its causes.
        message: String,
    },
    /// `sqsafe new` refused (a name, the workspace, the template, a clash); nothing was written.
    #[error("{0}")]
    New(#[from] crate::ScaffoldError),
    /// `sqsafe check` could not read the template or the workspace's function crates.
    #[error("{0}")]
    Template(#[from] crate::check::TemplateError),
    /// The AWS configuration lacks a region or credentials: one line says what to set, before any call.
    #[error("{0}")]
    Setup(String),
    /// `sqsafe local` could not start or stopped (one line: what went wrong, what to do).
    #[error("{0}")]
    Local(#[from] sqsafe_local::Error),
    /// Writing the output failed.
    #[error("writing the output: {0}")]
    Io(#[from] std::io::Error),
}

impl Error {
    /// An SQS call's error, with the SDK's whole chain of causes (its `Display` alone says only "service error").
    pub(crate) fn sqs(operation: &'static str, error: impl std::error::Error) -> Self {
        Error::Sqs {
            operation,
            message: aws_sdk_sqs::error::DisplayErrorContext(error).to_string(),
        }
    }
}
