use std::path::PathBuf;

/// Why `cargo lambda watch` could not be started for a function.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum WatchError {
    /// `<venv_bin>/cargo-lambda` does not exist.
    #[error("cargo-lambda not found at {}: run `sqsafe local venv` (make local-watch and a project's make venv do) to install the pinned one", path.display())]
    NotInstalled {
        /// Where it was looked for.
        path: PathBuf,
    },
    /// The log file could not be created, or a process not started.
    #[error("{what}: {source}")]
    Io {
        /// What was being done.
        what: String,
        /// The operating system's error.
        #[source]
        source: std::io::Error,
    },
    /// `cargo lambda watch` exited before it listened (every attempt).
    #[error("{how} before listening for {function}; see {}", log.display())]
    Exited {
        /// The function.
        function: String,
        /// How it ended (its exit status).
        how: String,
        /// Its log.
        log: PathBuf,
    },
    /// It did not listen in time; it was stopped.
    #[error("cargo lambda watch for {function} did not listen within {waited:?}; see {}", log.display())]
    NotListening {
        /// The function.
        function: String,
        /// How long it was given.
        waited: std::time::Duration,
        /// Its log.
        log: PathBuf,
    },
}

impl WatchError {
    pub(crate) fn io(what: impl Into<String>) -> impl FnOnce(std::io::Error) -> Self {
        let what = what.into();
        move |source| Self::Io { what, source }
    }
}
