//! One function process: its environment, its spawn, its output pipes and its end.

use std::net::SocketAddr;
use std::process::{ExitStatus, Stdio};
use std::sync::Arc;
use std::time::SystemTime;

use tokio::process::{Child, Command};
use tokio::task::JoinHandle;
use tokio::time::Instant;

use super::ids::{derive_crash_seed, log_stream_name};
use super::logs::{LogSink, Pipe};
use super::spec::FunctionSpec;

/// Set by the function's environment to turn on crash points; replaced per process by a derived seed.
pub(crate) const CRASH_SEED: &str = "SQSAFE_CRASH_SEED";
/// The instance id, for the function's logs.
pub(crate) const INSTANCE: &str = "SQSAFE_INSTANCE";
const REGION: &str = "AWS_REGION";
const MEMORY_SIZE: &str = "AWS_LAMBDA_FUNCTION_MEMORY_SIZE";
const DEFAULT_REGION: &str = "us-east-1";
const DEFAULT_MEMORY_MB: &str = "128";
/// Variables of the parent's environment that would change how the runtime behaves.
const NOT_INHERITED: [&str; 3] = [
    "AWS_LAMBDA_MAX_CONCURRENCY",
    "_X_AMZN_TRACE_ID",
    "AWS_LAMBDA_INITIALIZATION_TYPE",
];

/// The region the function runs in: its `AWS_REGION` if the spec sets one, else `us-east-1`.
pub(crate) fn region(spec: &FunctionSpec) -> &str {
    spec_var(spec, REGION).unwrap_or(DEFAULT_REGION)
}

/// The memory size the function is told: its `AWS_LAMBDA_FUNCTION_MEMORY_SIZE` if set, else 128.
pub(crate) fn memory_mb(spec: &FunctionSpec) -> &str {
    spec_var(spec, MEMORY_SIZE).unwrap_or(DEFAULT_MEMORY_MB)
}

fn spec_var<'a>(spec: &'a FunctionSpec, name: &str) -> Option<&'a str> {
    spec.env
        .iter()
        .rev()
        .find(|(key, _)| key == name)
        .map(|(_, value)| value.as_str())
}

/// The environment of the `cold_start`-th process of an instance, on top of the inherited one: Lambda's reserved
/// variables, then the spec's own (which may override the defaults), then the emulator's, which always win.
pub(crate) fn lambda_env(
    spec: &FunctionSpec,
    instance_id: usize,
    cold_start: u64,
    runtime_api: SocketAddr,
    now: SystemTime,
) -> Result<Vec<(String, String)>, String> {
    let task_root = spec
        .binary
        .parent()
        .map(|dir| dir.display().to_string())
        .unwrap_or_default();
    let region = region(spec);
    let mut env: Vec<(String, String)> = [
        ("AWS_LAMBDA_FUNCTION_NAME", spec.name.clone()),
        ("AWS_LAMBDA_FUNCTION_VERSION", "$LATEST".to_owned()),
        (MEMORY_SIZE, DEFAULT_MEMORY_MB.to_owned()),
        (
            "AWS_LAMBDA_LOG_GROUP_NAME",
            format!("/aws/lambda/{}", spec.name),
        ),
        (
            "AWS_LAMBDA_LOG_STREAM_NAME",
            log_stream_name(now, instance_id, cold_start),
        ),
        ("AWS_LAMBDA_INITIALIZATION_TYPE", "on-demand".to_owned()),
        ("AWS_EXECUTION_ENV", "AWS_Lambda_provided.al2023".to_owned()),
        (REGION, region.to_owned()),
        ("AWS_DEFAULT_REGION", region.to_owned()),
        ("LAMBDA_TASK_ROOT", task_root),
        ("_HANDLER", "bootstrap".to_owned()),
    ]
    .into_iter()
    .map(|(name, value)| (name.to_owned(), value))
    .collect();
    env.extend(spec.env.iter().cloned());
    env.push((
        "AWS_LAMBDA_RUNTIME_API".to_owned(),
        runtime_api_value(runtime_api),
    ));
    env.push((INSTANCE.to_owned(), instance_id.to_string()));
    if let Some(base) = spec_var(spec, CRASH_SEED) {
        let base: u64 = base.trim().parse().map_err(|_| {
            format!("{CRASH_SEED} must be an unsigned 64-bit integer, not {base:?}")
        })?;
        let seed = derive_crash_seed(base, instance_id, cold_start);
        env.push((CRASH_SEED.to_owned(), seed.to_string()));
    }
    Ok(env)
}

/// `AWS_LAMBDA_RUNTIME_API` as Lambda sets it: `host:port`, no scheme. `lambda_runtime` 1.5 accepts this and
/// `http://host:port` alike (it parses the value as a URI and defaults the scheme to `http`).
fn runtime_api_value(addr: SocketAddr) -> String {
    addr.to_string()
}

/// A running function process.
#[derive(Debug)]
pub(crate) struct Process {
    child: Child,
    pid: Option<u32>,
    pub(crate) spawned_at: Instant,
    /// The runtime has taken an event: it is past init.
    pub(crate) initialised: bool,
    pub(crate) crash_seed: Option<String>,
    pipes: Vec<Arc<Pipe>>,
    pumps: Vec<JoinHandle<()>>,
}

impl Process {
    /// Starts the binary in its own process group, stdin closed, stdout and stderr into `sink`. The child is killed
    /// if this value is dropped.
    pub(crate) fn spawn(
        spec: &FunctionSpec,
        env: Vec<(String, String)>,
        sink: &Arc<LogSink>,
    ) -> Result<Self, String> {
        sink.open()
            .map_err(|e| format!("cannot open {}: {e}", sink.path().display()))?;
        let crash_seed = env
            .iter()
            .rev()
            .find(|(name, _)| name == CRASH_SEED)
            .map(|(_, value)| value.clone());
        let mut command = Command::new(&spec.binary);
        for name in NOT_INHERITED {
            command.env_remove(name);
        }
        command
            .envs(env)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .kill_on_drop(true)
            // Its own group, so a Ctrl-C at the terminal (sent to the foreground group) does not reach it before
            // the instance has ended it and read its last lines.
            .process_group(0);
        let mut child = command
            .spawn()
            .map_err(|e| format!("cannot start {}: {e}", spec.binary.display()))?;
        let pid = child.id();
        let mut pipes = Vec::with_capacity(2);
        let stdout = child.stdout.take().map(|out| out.into_owned_fd());
        let stderr = child.stderr.take().map(|err| err.into_owned_fd());
        for fd in [stdout, stderr].into_iter().flatten() {
            let fd = fd.map_err(|e| format!("cannot take the output pipe: {e}"))?;
            let pipe = Pipe::new(fd, sink.clone())
                .map_err(|e| format!("cannot watch the output pipe: {e}"))?;
            pipes.push(pipe);
        }
        let pumps = pipes
            .iter()
            .map(|pipe| tokio::spawn(pipe.clone().pump()))
            .collect();
        Ok(Self {
            child,
            pid,
            spawned_at: Instant::now(),
            initialised: false,
            crash_seed,
            pipes,
            pumps,
        })
    }

    pub(crate) fn pid(&self) -> Option<u32> {
        self.pid
    }

    /// Waits until the process exits on its own.
    pub(crate) async fn exited(&mut self) -> String {
        describe(self.child.wait().await)
    }

    /// Whether it has exited already, without waiting.
    pub(crate) fn try_exited(&mut self) -> Option<String> {
        match self.child.try_wait() {
            Ok(Some(status)) => Some(status.to_string()),
            Ok(None) => None,
            Err(e) => Some(format!("unknown (cannot wait for it: {e})")),
        }
    }

    /// SIGKILL, then waits for it to be gone. Returns how it ended (it may have exited just before).
    pub(crate) async fn kill(&mut self) -> String {
        if let Err(e) = self.child.start_kill() {
            // Already reaped; `wait` below returns its status.
            tracing::debug!(pid = self.pid, error = %e, "kill failed");
        }
        self.exited().await
    }

    /// Reads what the process wrote so far into the log and the counters.
    pub(crate) fn drain(&self) {
        for pipe in &self.pipes {
            pipe.drain();
        }
    }
}

impl Drop for Process {
    fn drop(&mut self) {
        // A pipe still held open by a grandchild would keep its pump waiting; the child itself is killed by
        // `kill_on_drop`.
        for pump in &self.pumps {
            pump.abort();
        }
    }
}

fn describe(status: std::io::Result<ExitStatus>) -> String {
    match status {
        Ok(status) => status.to_string(),
        Err(e) => format!("unknown (cannot wait for it: {e})"),
    }
}

#[cfg(test)]
mod tests {
    use std::net::Ipv4Addr;
    use std::path::PathBuf;
    use std::time::{Duration, UNIX_EPOCH};

    use super::*;
    use crate::lambda::INIT_TIMEOUT;

    fn spec(env: &[(&str, &str)]) -> FunctionSpec {
        FunctionSpec {
            name: "charge-payment".into(),
            binary: PathBuf::from("/opt/fns/charge-payment"),
            env: env
                .iter()
                .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
                .collect(),
            timeout: Duration::from_secs(3),
            log_dir: PathBuf::from("/tmp/logs"),
            init_timeout: INIT_TIMEOUT,
        }
    }

    fn env_of(spec: &FunctionSpec, cold_start: u64) -> Result<Vec<(String, String)>, String> {
        let addr = SocketAddr::from((Ipv4Addr::LOCALHOST, 9001));
        lambda_env(spec, 2, cold_start, addr, UNIX_EPOCH)
    }

    /// The last value wins, as with `Command::envs`.
    fn get<'a>(env: &'a [(String, String)], name: &str) -> Option<&'a str> {
        env.iter()
            .rev()
            .find(|(k, _)| k == name)
            .map(|(_, v)| v.as_str())
    }

    #[test]
    fn the_environment_has_what_lambda_runtime_needs() {
        let env = env_of(&spec(&[]), 1).expect("env");
        assert_eq!(get(&env, "AWS_LAMBDA_RUNTIME_API"), Some("127.0.0.1:9001"));
        assert_eq!(
            get(&env, "AWS_LAMBDA_FUNCTION_NAME"),
            Some("charge-payment")
        );
        assert_eq!(get(&env, "AWS_LAMBDA_FUNCTION_MEMORY_SIZE"), Some("128"));
        assert_eq!(get(&env, "AWS_LAMBDA_FUNCTION_VERSION"), Some("$LATEST"));
        assert_eq!(
            get(&env, "AWS_LAMBDA_LOG_GROUP_NAME"),
            Some("/aws/lambda/charge-payment")
        );
        assert_eq!(
            get(&env, "AWS_LAMBDA_LOG_STREAM_NAME"),
            Some("1970/01/01/[$LATEST]00000002000000000000000000000001")
        );
        assert_eq!(get(&env, "AWS_REGION"), Some("us-east-1"));
        assert_eq!(get(&env, "LAMBDA_TASK_ROOT"), Some("/opt/fns"));
        assert_eq!(get(&env, "SQSAFE_INSTANCE"), Some("2"));
        assert_eq!(get(&env, "SQSAFE_CRASH_SEED"), None);
    }

    #[test]
    fn the_spec_overrides_defaults_but_not_the_runtime_api() {
        let spec = spec(&[
            ("AWS_REGION", "eu-west-1"),
            ("AWS_LAMBDA_FUNCTION_MEMORY_SIZE", "512"),
            ("AWS_LAMBDA_RUNTIME_API", "elsewhere:1"),
        ]);
        let env = env_of(&spec, 1).expect("env");
        assert_eq!(get(&env, "AWS_REGION"), Some("eu-west-1"));
        assert_eq!(get(&env, "AWS_DEFAULT_REGION"), Some("eu-west-1"));
        assert_eq!(get(&env, "AWS_LAMBDA_FUNCTION_MEMORY_SIZE"), Some("512"));
        assert_eq!(get(&env, "AWS_LAMBDA_RUNTIME_API"), Some("127.0.0.1:9001"));
        assert_eq!(region(&spec), "eu-west-1");
        assert_eq!(memory_mb(&spec), "512");
    }

    #[test]
    fn each_process_gets_its_own_crash_seed() {
        let spec = spec(&[("SQSAFE_CRASH_SEED", "42")]);
        let first = env_of(&spec, 1).expect("env");
        let second = env_of(&spec, 2).expect("env");
        let seed = |env: &[(String, String)]| get(env, "SQSAFE_CRASH_SEED").map(str::to_owned);
        assert_eq!(seed(&first), Some(derive_crash_seed(42, 2, 1).to_string()));
        assert_eq!(seed(&second), Some(derive_crash_seed(42, 2, 2).to_string()));
        assert_ne!(seed(&first), seed(&second));
    }

    #[test]
    fn a_malformed_crash_seed_is_refused() {
        let error = env_of(&spec(&[("SQSAFE_CRASH_SEED", "forty-two")]), 1).expect_err("refused");
        assert!(error.contains("SQSAFE_CRASH_SEED"), "{error}");
    }
}
