/// The crate's result type.
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// What can go wrong while setting up logging.
///
/// Correlation ids, spans and metrics never fail: a missing id is generated, and metrics are plain counters.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// A global `tracing` subscriber is already installed, by an earlier [`init`](crate::init) or by another library.
    /// The existing subscriber stays in place.
    #[error("a global tracing subscriber is already installed")]
    AlreadyInitialised,
    /// The log level is not a valid filter directive (for example a mistyped `RUST_LOG`).
    #[error("invalid log level `{directive}`: {source}")]
    InvalidLevel {
        /// The directive as configured.
        directive: String,
        /// Why `tracing-subscriber` refused it.
        #[source]
        source: tracing_subscriber::filter::ParseError,
    },
    /// `SQSAFE_TRACES` is neither `off` nor `otlp`.
    #[error("SQSAFE_TRACES={value:?}: expected `off` (the default) or `otlp`")]
    InvalidTraces {
        /// The value as configured.
        value: String,
    },
    /// Spans cannot be exported as configured: the OTLP endpoint is not an `http://` URL, or this build has no
    /// OpenTelemetry (`sqsafe-telemetry` without its `otel` feature).
    #[error("SQSAFE_TRACES=otlp: {reason}")]
    TracesUnavailable {
        /// Why, in words.
        reason: String,
    },
}

impl Error {
    /// `true` for [`Error::AlreadyInitialised`]: harmless when a test or a second entry point calls `init` again.
    pub fn is_already_initialised(&self) -> bool {
        matches!(self, Error::AlreadyInitialised)
    }
}
