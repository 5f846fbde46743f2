/// Why an invocation did not return a response, in the terms Lambda reports it.
///
/// After [`Crashed`](Self::Crashed), [`Timeout`](Self::Timeout) and [`InitFailed`](Self::InitFailed) the process is
/// gone and the next invoke cold-starts a new one; after [`FunctionError`](Self::FunctionError) it stays warm.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum InvokeError {
    /// The process exited (a panic that aborted, `abort()`, SIGKILL from a fault point) while it held the invocation
    /// (Lambda: `Runtime.ExitError`).
    #[error("the function process exited during the invocation ({exit})")]
    Crashed {
        /// How it ended, as [`std::process::ExitStatus`] prints it: `signal: 6 (SIGABRT) (core dumped)`,
        /// `exit status: 1`.
        exit: String,
    },
    /// No answer within the function's timeout; the process was killed with SIGKILL, as Lambda does
    /// (`Task timed out after N seconds`).
    #[error("the invocation timed out; the function process was killed")]
    Timeout,
    /// The runtime posted `/invocation/{id}/error`: the handler returned an error (or panicked and the runtime caught
    /// it), or the response was over 6 MB (`Function.ResponseSizeTooLarge`).
    #[error("the function returned an error: {error_type}: {message}")]
    FunctionError {
        /// `errorType` of the posted error (for `lambda_runtime`, the Rust type name of the error).
        error_type: String,
        /// `errorMessage` of the posted error.
        message: String,
    },
    /// The runtime never got ready: it posted `/init/error`, exited before asking for its first event, or took longer
    /// than the init limit (10 s, as in Lambda). The message says which.
    #[error("the function failed to initialise: {0}")]
    InitFailed(String),
    /// The process could not be started (no such binary, not executable, the log file cannot be opened, a malformed
    /// `SQSAFE_CRASH_SEED`). Nothing ran.
    #[error("the function process could not be started: {0}")]
    Spawn(String),
}

impl InvokeError {
    /// `true` for [`InvokeError::Crashed`].
    pub fn is_crashed(&self) -> bool {
        matches!(self, InvokeError::Crashed { .. })
    }

    /// `true` for [`InvokeError::Timeout`].
    pub fn is_timeout(&self) -> bool {
        matches!(self, InvokeError::Timeout)
    }

    /// `true` for [`InvokeError::FunctionError`].
    pub fn is_function_error(&self) -> bool {
        matches!(self, InvokeError::FunctionError { .. })
    }

    /// `true` when the execution environment is gone and the next invoke cold-starts: a crash, a timeout, a failed
    /// init.
    pub fn ends_environment(&self) -> bool {
        matches!(
            self,
            InvokeError::Crashed { .. } | InvokeError::Timeout | InvokeError::InitFailed(_)
        )
    }
}
