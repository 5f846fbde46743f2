use std::time::SystemTime;

/// The crate's result type.
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// Boxed source error from a storage backend (for DynamoDB: the SDK error).
pub type BoxError = Box<dyn std::error::Error + Send + Sync + 'static>;

/// Whether a failed record should come back (transient) or go to the dead-letter queue (permanent).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ErrorClass {
    /// Retrying later can succeed: the record should be redelivered.
    Transient,
    /// Retrying cannot succeed: the record should reach the DLQ with its context, with no side effect.
    Permanent,
}

/// Everything that can go wrong while claiming, completing or replaying an idempotency key.
///
/// The variants mirror the state machine; [`Error::class`] says what a batch processor should do with each.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// No intent key could be derived from the message (and no fallback was explicitly allowed).
    #[error("missing idempotency key: {what} is missing or empty")]
    MissingKey {
        /// Which part of the key was missing.
        what: &'static str,
    },
    /// A key part, or a builder setting, is not acceptable.
    #[error("invalid configuration: {0}")]
    Config(String),
    /// The key was already used with different content. No effect was run.
    #[error(
        "payload mismatch for idempotency key `{key}`: stored fingerprint {stored}, this message {actual}; \
         the same key must carry the same intent"
    )]
    PayloadMismatch {
        /// The key.
        key: String,
        /// Fingerprint stored with the key by the first claim.
        stored: String,
        /// Fingerprint of this message.
        actual: String,
    },
    /// Another attempt holds a live lease on the key.
    #[error(
        "idempotency key `{key}` is in progress elsewhere (can be taken over {} ms after the epoch)",
        crate::clock::epoch_millis(*.lease_expires_at)
    )]
    InProgress {
        /// When the key can first be taken over: the other attempt's lease end plus the takeover margin.
        lease_expires_at: SystemTime,
        /// The key.
        key: String,
    },
    /// This attempt no longer owns the key: its lease passed and another attempt took it over (or the record was
    /// removed). The write was refused, so the other attempt's record is intact.
    #[error("lost the claim on idempotency key `{key}`: another attempt took it over")]
    LeaseLost {
        /// The key.
        key: String,
    },
    /// The effect ran, but its record could not be marked completed, even after retrying within the time the
    /// invocation had left. The key stays `IN_PROGRESS` until its lease passes; a delivery after that runs the effect
    /// again, unless the downstream honours the `Idempotency-Key` (or the effect is transactional).
    #[error(
        "the effect for idempotency key `{key}` ran, but its completion failed after {attempts} tries: {source}; \
         the key stays in progress until its lease ends"
    )]
    CompletionFailed {
        /// The key.
        key: String,
        /// Completion writes tried.
        attempts: u32,
        /// The last store error.
        #[source]
        source: Box<Error>,
    },
    /// The store answered something that the state machine cannot explain (e.g. a failed condition without the old item).
    #[error("inconsistent idempotency record for key `{key}`: {detail}")]
    Inconsistent {
        /// The key.
        key: String,
        /// What was wrong.
        detail: String,
    },
    /// The storage backend failed (throttling, timeout, missing table, network). The key's state is unknown.
    #[error("idempotency store failed during {operation} of key `{key}`: {detail}")]
    Store {
        /// The primitive that failed: claim, complete, extend, release, get or transact.
        operation: &'static str,
        /// The key.
        key: String,
        /// What happened, e.g. the service's error code and message (`ThrottlingException: ...`) or `timed out`.
        detail: String,
        /// The backend's error (for DynamoDB, the SDK error).
        #[source]
        source: BoxError,
    },
}

impl Error {
    /// Transient or permanent.
    pub fn class(&self) -> ErrorClass {
        match self {
            Error::InProgress { .. }
            | Error::LeaseLost { .. }
            | Error::CompletionFailed { .. }
            | Error::Store { .. }
            | Error::Inconsistent { .. } => ErrorClass::Transient,
            Error::MissingKey { .. } | Error::Config(_) | Error::PayloadMismatch { .. } => {
                ErrorClass::Permanent
            }
        }
    }

    /// A short stable label for logs, metrics and dead-letter context: `missing_key`, `config`, `payload_mismatch`,
    /// `in_progress`, `lease_lost`, `completion_failed`, `inconsistent_record` or `idempotency_store`.
    pub fn kind(&self) -> &'static str {
        match self {
            Error::MissingKey { .. } => "missing_key",
            Error::Config(_) => "config",
            Error::PayloadMismatch { .. } => "payload_mismatch",
            Error::InProgress { .. } => "in_progress",
            Error::LeaseLost { .. } => "lease_lost",
            Error::CompletionFailed { .. } => "completion_failed",
            Error::Inconsistent { .. } => "inconsistent_record",
            Error::Store { .. } => "idempotency_store",
        }
    }

    /// `true` when redelivering the message later can succeed.
    pub fn is_retryable(&self) -> bool {
        self.class() == ErrorClass::Transient
    }

    /// `true` for [`Error::PayloadMismatch`].
    pub fn is_payload_mismatch(&self) -> bool {
        matches!(self, Error::PayloadMismatch { .. })
    }

    /// `true` for [`Error::InProgress`].
    pub fn is_in_progress(&self) -> bool {
        matches!(self, Error::InProgress { .. })
    }

    /// `true` for [`Error::Store`].
    pub fn is_store(&self) -> bool {
        matches!(self, Error::Store { .. })
    }

    /// `true` for [`Error::LeaseLost`].
    pub fn is_lease_lost(&self) -> bool {
        matches!(self, Error::LeaseLost { .. })
    }

    /// When a delivery refused with [`Error::InProgress`] can first take the key over (the other attempt's lease end
    /// plus the takeover margin). A batch processor keeps the message invisible until then.
    pub fn retry_not_before(&self) -> Option<SystemTime> {
        match self {
            Error::InProgress {
                lease_expires_at, ..
            } => Some(*lease_expires_at),
            _ => None,
        }
    }

    /// A store error, for [`IdempotencyStore`](crate::IdempotencyStore) implementations: `operation` is the
    /// primitive (`claim`, `complete`, ...), `source` the backend's error, whose text becomes the detail.
    pub fn store(operation: &'static str, key: &str, source: impl Into<BoxError>) -> Self {
        let source = source.into();
        Error::store_with_detail(operation, key, source.to_string(), source)
    }

    pub(crate) fn store_with_detail(
        operation: &'static str,
        key: &str,
        detail: String,
        source: BoxError,
    ) -> Self {
        Error::Store {
            operation,
            key: key.to_owned(),
            detail,
            source,
        }
    }
}

/// The error of [`Idempotency::run`](crate::Idempotency::run): either the idempotency machinery or the effect failed.
#[derive(Debug, thiserror::Error)]
pub enum RunError<E> {
    /// Claiming, completing or replaying failed; the effect did not run (or, for [`Error::LeaseLost`] on completion,
    /// ran but could not be recorded).
    #[error(transparent)]
    Idempotency(#[from] Error),
    /// The effect itself failed; the key was released so a retry can run it.
    #[error("effect failed: {0}")]
    Effect(#[source] E),
}

impl<E> RunError<E> {
    /// The idempotency error, if that is what failed.
    pub fn idempotency(&self) -> Option<&Error> {
        match self {
            RunError::Idempotency(e) => Some(e),
            RunError::Effect(_) => None,
        }
    }

    /// The effect's error, if that is what failed.
    pub fn into_effect(self) -> Option<E> {
        match self {
            RunError::Effect(e) => Some(e),
            RunError::Idempotency(_) => None,
        }
    }
}
