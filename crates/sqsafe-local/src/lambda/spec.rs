use std::path::PathBuf;
use std::time::Duration;

/// What to run, and how: a function as it would be configured in Lambda.
///
/// # Default
///
/// [`FunctionSpec::new`] starts from Lambda's defaults: no extra environment, a 3 s timeout, and
/// [`INIT_TIMEOUT`](super::INIT_TIMEOUT) (10 s, Lambda's limit on the Init phase) for a new process to ask for its
/// first event.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FunctionSpec {
    /// The function name: `AWS_LAMBDA_FUNCTION_NAME`, the last part of its ARN, and the log file's prefix.
    pub name: String,
    /// The compiled function (`target/debug/charge-payment`, a `bootstrap`).
    pub binary: PathBuf,
    /// Variables set in the process on top of the inherited environment and Lambda's reserved variables; they may
    /// override `AWS_REGION` and `AWS_LAMBDA_FUNCTION_MEMORY_SIZE`. `SQSAFE_CRASH_SEED` here is a base seed, replaced
    /// per process by a derived one (see [`derive_crash_seed`](super::derive_crash_seed)).
    pub env: Vec<(String, String)>,
    /// The invocation timeout, from the moment the runtime takes the event; also in `Lambda-Runtime-Deadline-Ms`.
    pub timeout: Duration,
    /// How long a new process may take to ask for its first event before the invocation fails with
    /// `Sandbox.Timedout` ([`InvokeError::InitFailed`](super::InvokeError::InitFailed)).
    pub init_timeout: Duration,
    /// Where `<name>-<instance id>.log` is appended to (created if missing).
    pub log_dir: PathBuf,
}

impl FunctionSpec {
    /// Lambda's default timeout.
    pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(3);

    /// A function named `name` running `binary`, logging under `log_dir`, with the defaults above.
    pub fn new(
        name: impl Into<String>,
        binary: impl Into<PathBuf>,
        log_dir: impl Into<PathBuf>,
    ) -> Self {
        Self {
            name: name.into(),
            binary: binary.into(),
            env: Vec::new(),
            timeout: Self::DEFAULT_TIMEOUT,
            init_timeout: super::INIT_TIMEOUT,
            log_dir: log_dir.into(),
        }
    }

    /// Sets the invocation timeout.
    pub fn with_timeout(mut self, timeout: Duration) -> Self {
        self.timeout = timeout;
        self
    }

    /// Sets how long a new process may take to ask for its first event. Lambda's limit is
    /// [`INIT_TIMEOUT`](super::INIT_TIMEOUT); a longer one suits a harness that measures or checks counts on a loaded
    /// machine, where an interpreter's imports alone can take longer.
    pub fn with_init_timeout(mut self, init_timeout: Duration) -> Self {
        self.init_timeout = init_timeout;
        self
    }

    /// Adds one environment variable (a later one with the same name wins).
    pub fn with_env(mut self, name: impl Into<String>, value: impl Into<String>) -> Self {
        self.env.push((name.into(), value.into()));
        self
    }

    /// `<log_dir>/<name>-<instance_id>.log`.
    pub fn log_path(&self, instance_id: usize) -> PathBuf {
        self.log_dir
            .join(format!("{}-{instance_id}.log", self.name))
    }
}
