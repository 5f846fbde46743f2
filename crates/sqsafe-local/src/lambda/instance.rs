use std::net::SocketAddr;
use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, SystemTime};

use bytes::Bytes;
use serde_json::Value;
use tokio::sync::mpsc;
use tokio::time::Instant;

use super::api::{ApiEvent, Invocation, RuntimeApi};
use super::error::InvokeError;
use super::ids::{function_arn, request_id, trace_id};
use super::logs::LogSink;
use super::outcomes::BatchOutcomes;
use super::process::{Process, lambda_env, memory_mb, region};
use super::spec::FunctionSpec;
use super::stats::InstanceStats;
use crate::error::Error;

/// How long a new process may take to ask for its first event, as Lambda limits its Init phase: the default of
/// [`FunctionSpec::init_timeout`].
pub const INIT_TIMEOUT: Duration = Duration::from_secs(10);

/// One execution environment: at most one function process at a time, its own Runtime API server, one invocation
/// at a time.
///
/// Dropping it kills the process (`kill_on_drop`) and stops the server; [`shutdown`](Self::shutdown) does the same
/// and also waits until both are gone.
#[derive(Debug)]
pub struct FunctionInstance {
    spec: FunctionSpec,
    instance_id: usize,
    function_arn: String,
    api: RuntimeApi,
    events: mpsc::UnboundedReceiver<ApiEvent>,
    sink: Arc<LogSink>,
    process: Option<Process>,
    counters: Counters,
    /// Invocations queued so far: the last part of each request id.
    sequence: u64,
    /// An invocation is queued and its `invoke` has not finished: if that future is dropped, the process is left
    /// busy with it, and the next invoke replaces the process.
    busy: bool,
}

#[derive(Debug, Default, Clone, Copy)]
struct Counters {
    invocations: u64,
    cold_starts: u64,
    crashes: u64,
    timeouts: u64,
    function_errors: u64,
    init_failures: u64,
}

/// How waiting for an invocation ended.
#[derive(Debug)]
enum Outcome {
    Response(Bytes),
    FunctionError { error_type: String, message: String },
    InitError { error_type: String, message: String },
    Exited(String),
    TimedOut,
}

impl FunctionInstance {
    /// Starts the Runtime API server on `127.0.0.1` (a free port). The process is not spawned yet: the first
    /// [`invoke`](Self::invoke) does that, a cold start, as in Lambda.
    ///
    /// # Errors
    ///
    /// [`Error::Bind`] when no loopback port can be bound.
    pub async fn start(spec: FunctionSpec, instance_id: usize) -> Result<Self, Error> {
        let function_arn = function_arn(region(&spec), &spec.name);
        let (api, events) = RuntimeApi::start(function_arn.clone()).await?;
        let sink = Arc::new(LogSink::new(spec.log_path(instance_id)));
        tracing::debug!(function = spec.name, instance_id, runtime_api = %api.addr(), "function instance ready");
        Ok(Self {
            spec,
            instance_id,
            function_arn,
            api,
            events,
            sink,
            process: None,
            counters: Counters::default(),
            sequence: 0,
            busy: false,
        })
    }

    /// Invokes the function with `event` and waits for the first of: its response (`Ok`), an error it posts, its
    /// process exiting, the timeout.
    ///
    /// Spawns the process first if none is running (a cold start). Once this returns, every line the process wrote
    /// before it answered or ended is in the log file and in [`stats`](Self::stats).
    ///
    /// A response that is not JSON is returned as a JSON string, an empty one as `null`.
    ///
    /// # Errors
    ///
    /// See [`InvokeError`]: after a crash, a timeout (the process is killed with SIGKILL) or a failed init, the
    /// process is gone and the next invoke starts a new one.
    ///
    /// # Cancellation
    ///
    /// Dropping the future mid-invocation leaves the process busy with that event; the next invoke then kills it
    /// and cold-starts a new one rather than mix up two invocations.
    pub async fn invoke(&mut self, event: Value) -> Result<Value, InvokeError> {
        self.counters.invocations += 1;
        if self.busy {
            self.busy = false;
            self.replace_busy_process().await;
        }
        self.notice_idle_exit();
        if self.process.is_none() {
            self.cold_start()?;
        }
        let Some(process) = self.process.as_mut() else {
            return Err(InvokeError::Spawn(
                "no process after a cold start".to_owned(),
            ));
        };
        let cold = !process.initialised;

        self.sequence += 1;
        let id = request_id(self.instance_id, self.sequence);
        self.sink
            .platform_line(&format!("START RequestId: {id} Version: $LATEST"));
        self.api.queue(Invocation {
            id: id.clone(),
            event: Bytes::from(event.to_string()),
            trace_id: trace_id(SystemTime::now(), self.instance_id, self.sequence),
            timeout: self.spec.timeout,
        });
        self.busy = true;
        let queued_at = Instant::now();
        let (outcome, delivered) = wait_for(&mut self.events, process, &id, &self.spec).await;
        self.busy = false;
        if delivered.is_some() {
            process.initialised = true;
        }

        let started = delivered.unwrap_or(queued_at);
        let init = cold.then(|| started.saturating_duration_since(process.spawned_at));
        self.conclude(&id, outcome, started, init).await
    }

    /// Turns an outcome into the invoke's result: counters, log lines, the process's end where it ends.
    async fn conclude(
        &mut self,
        id: &str,
        outcome: Outcome,
        started: Instant,
        init: Option<Duration>,
    ) -> Result<Value, InvokeError> {
        match outcome {
            Outcome::Response(body) => {
                self.drain();
                self.report(id, started, init);
                Ok(parse_response(&body))
            }
            Outcome::FunctionError {
                error_type,
                message,
            } => {
                self.drain();
                self.counters.function_errors += 1;
                self.report(id, started, init);
                Err(InvokeError::FunctionError {
                    error_type,
                    message,
                })
            }
            Outcome::InitError {
                error_type,
                message,
            } => {
                self.kill_process().await;
                self.counters.init_failures += 1;
                self.sink.platform_line(&format!(
                    "INIT_REPORT Status: error\tError Type: {error_type}"
                ));
                Err(InvokeError::InitFailed(format!("{error_type}: {message}")))
            }
            Outcome::Exited(exit) => {
                let initialised = self.process.as_ref().is_some_and(|p| p.initialised);
                self.drain();
                self.process = None;
                if initialised {
                    self.counters.crashes += 1;
                    self.sink.platform_line(&format!(
                        "RequestId: {id} Error: Runtime exited with error: {exit}\nRuntime.ExitError"
                    ));
                    self.report(id, started, init);
                    Err(InvokeError::Crashed { exit })
                } else {
                    self.counters.init_failures += 1;
                    self.sink.platform_line(&format!(
                        "INIT_REPORT Status: error\tError Type: Runtime.ExitError ({exit})"
                    ));
                    Err(InvokeError::InitFailed(format!(
                        "Runtime.ExitError: the runtime exited during init ({exit})"
                    )))
                }
            }
            Outcome::TimedOut => {
                let initialised = self.process.as_ref().is_some_and(|p| p.initialised);
                self.kill_process().await;
                if initialised {
                    self.counters.timeouts += 1;
                    self.sink.platform_line(&format!(
                        "{id} Task timed out after {:.2} seconds",
                        self.spec.timeout.as_secs_f64()
                    ));
                    self.report(id, started, init);
                    Err(InvokeError::Timeout)
                } else {
                    self.counters.init_failures += 1;
                    self.sink.platform_line("INIT_REPORT Status: timeout");
                    Err(InvokeError::InitFailed(format!(
                        "Sandbox.Timedout: the runtime did not ask for an event within {:?}",
                        self.spec.init_timeout
                    )))
                }
            }
        }
    }

    /// The counters so far, including what was scanned from the function's output.
    pub fn stats(&self) -> InstanceStats {
        let c = self.counters;
        InstanceStats {
            invocations: c.invocations,
            cold_starts: c.cold_starts,
            crashes: c.crashes,
            timeouts: c.timeouts,
            function_errors: c.function_errors,
            init_failures: c.init_failures,
            fault_markers: self.sink.fault_markers(),
            emf: self.sink.emf(),
        }
    }

    /// What the function's batch metrics lines counted since the last call (after an `invoke`: that invocation's
    /// records); `None` when it printed none (not an `sqsafe-batch` consumer, or it crashed first).
    pub fn take_outcomes(&self) -> Option<BatchOutcomes> {
        self.sink.take_outcomes()
    }

    /// Kills the process, if one is running, and stops the Runtime API server; waits until both are gone.
    pub async fn shutdown(mut self) {
        if self.process.is_some() {
            self.kill_process().await;
            self.sink.platform_line("SHUTDOWN");
        }
        self.api.shutdown().await;
    }

    /// What this instance runs.
    pub fn spec(&self) -> &FunctionSpec {
        &self.spec
    }

    /// The id given at start (`SQSAFE_INSTANCE` in the process).
    pub fn instance_id(&self) -> usize {
        self.instance_id
    }

    /// The Runtime API's address (`AWS_LAMBDA_RUNTIME_API` in the process).
    pub fn runtime_api(&self) -> SocketAddr {
        self.api.addr()
    }

    /// `arn:aws:lambda:<region>:123456789012:function:<name>`, as sent in `Lambda-Runtime-Invoked-Function-Arn`.
    pub fn function_arn(&self) -> &str {
        &self.function_arn
    }

    /// The log file: `<log_dir>/<name>-<instance_id>.log`.
    pub fn log_path(&self) -> &Path {
        self.sink.path()
    }

    /// The running process's id; `None` before the first invoke and after a crash, a timeout or a failed init.
    pub fn pid(&self) -> Option<u32> {
        self.process.as_ref().and_then(Process::pid)
    }

    fn cold_start(&mut self) -> Result<(), InvokeError> {
        let cold_start = self.counters.cold_starts + 1;
        let env = lambda_env(
            &self.spec,
            self.instance_id,
            cold_start,
            self.api.addr(),
            SystemTime::now(),
        )
        .map_err(InvokeError::Spawn)?;
        // A new generation: whatever the previous process left (a long poll on a connection nobody closed, an
        // answer in the channel) cannot reach this one.
        self.api.reset();
        while self.events.try_recv().is_ok() {}
        let process = Process::spawn(&self.spec, env, &self.sink).map_err(InvokeError::Spawn)?;
        self.counters.cold_starts = cold_start;
        let seed = process
            .crash_seed
            .as_deref()
            .map(|s| format!(" crash_seed={s}"))
            .unwrap_or_default();
        self.sink.platform_line(&format!(
            "INIT_START Runtime Version: sqsafe-local instance={} cold_start={cold_start} pid={}{seed}",
            self.instance_id,
            process.pid().map(|p| p.to_string()).unwrap_or_default(),
        ));
        tracing::debug!(
            function = self.spec.name,
            instance_id = self.instance_id,
            cold_start,
            pid = process.pid(),
            "cold start"
        );
        self.process = Some(process);
        Ok(())
    }

    /// A process that died while idle (between invocations) is replaced by the next cold start; no invocation
    /// failed, so no counter moves.
    fn notice_idle_exit(&mut self) {
        let Some(process) = self.process.as_mut() else {
            return;
        };
        if let Some(exit) = process.try_exited() {
            process.drain();
            self.sink
                .platform_line(&format!("the runtime exited between invocations ({exit})"));
            tracing::warn!(
                function = self.spec.name,
                instance_id = self.instance_id,
                exit,
                "function process exited while idle"
            );
            self.process = None;
        }
    }

    async fn replace_busy_process(&mut self) {
        tracing::warn!(
            function = self.spec.name,
            instance_id = self.instance_id,
            "an earlier invoke was cancelled while its process was busy; replacing the process"
        );
        self.kill_process().await;
    }

    /// SIGKILL and wait, then read its last lines. The Runtime API is reset at the next cold start.
    async fn kill_process(&mut self) {
        if let Some(mut process) = self.process.take() {
            process.kill().await;
            process.drain();
        }
    }

    fn drain(&self) {
        if let Some(process) = &self.process {
            process.drain();
        }
    }

    /// `END` and `REPORT`, as Lambda writes them after each invocation.
    fn report(&self, id: &str, started: Instant, init: Option<Duration>) {
        let duration = started.elapsed();
        let ms = duration.as_secs_f64() * 1e3;
        let init = init
            .map(|d| format!("\tInit Duration: {:.2} ms", d.as_secs_f64() * 1e3))
            .unwrap_or_default();
        self.sink.platform_line(&format!("END RequestId: {id}"));
        self.sink.platform_line(&format!(
            "REPORT RequestId: {id}\tDuration: {ms:.2} ms\tBilled Duration: {} ms\tMemory Size: {} MB{init}",
            ms.ceil(),
            memory_mb(&self.spec),
        ));
    }
}

/// Waits for the first of: an answer to `id`, an init error, the process's exit, the limit. The limit is
/// the spec's init timeout while a new process has not asked for an event yet (its timeout once warm), and the
/// invocation's deadline once the event is taken. Returns when the event was taken, if it was.
async fn wait_for(
    events: &mut mpsc::UnboundedReceiver<ApiEvent>,
    process: &mut Process,
    id: &str,
    spec: &FunctionSpec,
) -> (Outcome, Option<Instant>) {
    let limit = tokio::time::sleep(if process.initialised {
        spec.timeout
    } else {
        spec.init_timeout
    });
    tokio::pin!(limit);
    let mut delivered = None;
    let outcome = loop {
        tokio::select! {
            // An answer posted just before the process exited, or just at the deadline, still counts.
            biased;
            Some(event) = events.recv() => match event {
                ApiEvent::Delivered { id: got, at, deadline } if got == id => {
                    delivered = Some(at);
                    limit.as_mut().reset(deadline);
                }
                ApiEvent::Response { id: got, body } if got == id => break Outcome::Response(body),
                ApiEvent::Error { id: got, error_type, message } if got == id => {
                    break Outcome::FunctionError { error_type, message };
                }
                ApiEvent::InitError { error_type, message } => break Outcome::InitError { error_type, message },
                stale => tracing::debug!(?stale, "runtime API event for another invocation"),
            },
            exit = process.exited() => break Outcome::Exited(exit),
            () = &mut limit => break Outcome::TimedOut,
        }
    };
    (outcome, delivered)
}

/// The response body as JSON; `null` if empty, a JSON string if it is not JSON.
fn parse_response(body: &[u8]) -> Value {
    if body.iter().all(u8::is_ascii_whitespace) {
        return Value::Null;
    }
    serde_json::from_slice(body)
        .unwrap_or_else(|_| Value::String(String::from_utf8_lossy(body).into_owned()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn responses_are_json_or_a_string_or_null() {
        assert_eq!(parse_response(br#"{"a":1}"#), serde_json::json!({"a": 1}));
        assert_eq!(parse_response(b""), Value::Null);
        assert_eq!(parse_response(b"ok"), Value::String("ok".into()));
    }

    #[test]
    fn an_instance_can_move_to_another_task() {
        fn assert_send<T: Send>(_: &T) {}
        fn check(instance: &mut FunctionInstance) {
            assert_send(&instance.invoke(Value::Null));
        }
        let _ = check;
    }
}
