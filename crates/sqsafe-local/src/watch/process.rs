//! One `cargo lambda watch` process per function: its spawn on a free port, its output (to the log file and into
//! [`Status`]) and its end.

use std::fs::{File, OpenOptions};
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

use tokio::io::{AsyncBufReadExt, AsyncRead, BufReader};
use tokio::process::{Child, Command};
use tokio::sync::watch;
use tokio::task::JoinHandle;

use super::error::WatchError;
use super::invoker::WatchInvoker;
use super::status::{Phase, Status};
use super::tally::Tally;

/// How long [`WatchFunction::start`] waits for watch to listen.
const LISTEN_TIMEOUT: Duration = Duration::from_secs(60);
/// How often it tries.
const LISTEN_POLL: Duration = Duration::from_millis(100);
/// Watch processes started in a row when one exits at once (another process took its free port first).
const START_ATTEMPTS: u32 = 3;
/// How long a SIGTERM is given before the SIGKILL: cargo-lambda stops its function (and a build in progress) first.
const STOP_GRACE: Duration = Duration::from_secs(10);

/// What to run under `cargo lambda watch`, and where.
///
/// # Default
///
/// [`WatchSpec::new`]: no extra environment, cargo-lambda from the project's venv ([`crate::moto::venv_bin`]).
/// Watch runs one process of the function at a time (its default `--concurrency 1`): the phases in [`Status`] are
/// those of that one process.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WatchSpec {
    /// The function's cargo binary (template.yaml's `Metadata.BuildProperties.Binary`): watch runs
    /// `cargo run --bin <binary>` and serves it at `/2015-03-31/functions/<binary>/invocations`.
    pub binary: String,
    /// The cargo workspace it is built in (where template.yaml is): watch's working directory, the tree it watches.
    pub workspace: PathBuf,
    /// The function's environment. Watch's process gets it, and passes it on to every process of the function it
    /// starts (on top of the variables it sets itself: `AWS_LAMBDA_RUNTIME_API`, `AWS_LAMBDA_FUNCTION_NAME`, ...).
    pub env: Vec<(String, String)>,
    /// Where watch's output (cargo's and the function's) is appended.
    pub log_path: PathBuf,
    /// The folder holding `cargo-lambda`.
    pub venv_bin: PathBuf,
}

impl WatchSpec {
    /// `binary` built in `workspace`, logging to `log_path`, with the defaults above.
    pub fn new(
        binary: impl Into<String>,
        workspace: impl Into<PathBuf>,
        log_path: impl Into<PathBuf>,
    ) -> Self {
        Self {
            binary: binary.into(),
            workspace: workspace.into(),
            env: Vec::new(),
            log_path: log_path.into(),
            venv_bin: crate::moto::venv_bin(),
        }
    }

    /// Adds environment variables (a later one with the same name wins).
    pub fn with_env(mut self, env: impl IntoIterator<Item = (String, String)>) -> Self {
        self.env.extend(env);
        self
    }
}

/// A running `cargo lambda watch` for one function, on its own loopback port, in its own process group.
///
/// Stop it with [`shutdown`](Self::shutdown); dropping it kills its process group and those of the processes it
/// started. A process killed with SIGKILL cannot clean up: its watch processes outlive it.
#[derive(Debug)]
pub struct WatchFunction {
    binary: String,
    port: u16,
    pid: u32,
    log_path: PathBuf,
    status: watch::Receiver<Status>,
    tally: Arc<Tally>,
    tasks: Vec<JoinHandle<()>>,
    stopped: bool,
}

impl WatchFunction {
    /// Starts `cargo lambda watch` for `spec.binary` on a free loopback port and waits until it listens (at most
    /// 60 s). Watch builds and starts the function on its first invocation, not before.
    pub async fn start(spec: WatchSpec) -> Result<Self, WatchError> {
        let program = spec.venv_bin.join("cargo-lambda");
        if !program.is_file() {
            return Err(WatchError::NotInstalled { path: program });
        }
        let log = open_log(&spec.log_path)?;
        let mut attempt = 1;
        loop {
            // Another process may take the port before watch binds it: watch then exits and the loop retries.
            let port = sqsafe_aws::free_port().map_err(WatchError::io("a free loopback port"))?;
            let mut function = spawn(&spec, &program, port, &log)?;
            match function.wait_listening().await {
                Ok(()) => return Ok(function),
                Err(WatchError::Exited { .. }) if attempt < START_ATTEMPTS => attempt += 1,
                Err(e) => {
                    function.kill_all().await;
                    return Err(e);
                }
            }
        }
    }

    /// The function's name (its binary).
    pub fn binary(&self) -> &str {
        &self.binary
    }

    /// The port watch listens on (127.0.0.1).
    pub fn port(&self) -> u16 {
        self.port
    }

    /// Where the function is invoked: `http://127.0.0.1:<port>/2015-03-31/functions/<binary>/invocations`.
    pub fn invoke_url(&self) -> String {
        format!(
            "http://127.0.0.1:{}/2015-03-31/functions/{}/invocations",
            self.port, self.binary
        )
    }

    /// Watch's log: cargo's output and the function's.
    pub fn log_path(&self) -> &Path {
        &self.log_path
    }

    /// The function's status, updated as watch's output arrives.
    pub fn status(&self) -> watch::Receiver<Status> {
        self.status.clone()
    }

    /// An [`Invoker`](crate::esm::Invoker) for an event source mapping; it gives up waiting when `stop` turns true.
    pub fn invoker(&self, stop: watch::Receiver<bool>) -> WatchInvoker {
        WatchInvoker::new(
            self.binary.clone(),
            self.invoke_url(),
            self.status.clone(),
            stop,
            Arc::clone(&self.tally),
        )
    }

    async fn wait_listening(&mut self) -> Result<(), WatchError> {
        let started = Instant::now();
        let addr = std::net::SocketAddr::from(([127, 0, 0, 1], self.port));
        loop {
            if self.status.borrow().phase == Phase::Stopped {
                return Err(self.exited_error());
            }
            if tokio::net::TcpStream::connect(addr).await.is_ok() {
                return Ok(());
            }
            if started.elapsed() >= LISTEN_TIMEOUT {
                return Err(WatchError::NotListening {
                    function: self.binary.clone(),
                    waited: LISTEN_TIMEOUT,
                    log: self.log_path.clone(),
                });
            }
            // Polling a process that takes its time to bind: nothing else tells when it listens.
            tokio::time::sleep(LISTEN_POLL).await;
        }
    }

    fn exited_error(&self) -> WatchError {
        let how = self.status.borrow().exit.clone().unwrap_or_default();
        WatchError::Exited {
            function: self.binary.clone(),
            how,
            log: self.log_path.clone(),
        }
    }

    /// Stops watch and everything it started: SIGTERM to its process group (watch then stops the function's process
    /// and a build in progress), then after 10 s SIGKILL to its group and to the groups of the processes it
    /// started. Returns how watch ended.
    pub async fn shutdown(mut self) -> String {
        let children = child_groups(self.pid);
        signal_group(self.pid, "TERM").await;
        if !self.wait_stopped(STOP_GRACE).await {
            signal_group(self.pid, "KILL").await;
            self.wait_stopped(Duration::from_secs(2)).await;
        }
        // Normally gone with watch; a group whose leader died may still hold members (a build's rustc processes).
        for group in children.into_iter().chain(child_groups(self.pid)) {
            signal_group(group, "KILL").await;
        }
        self.stopped = true;
        for task in self.tasks.drain(..) {
            // Output pumps end when the last writer of the pipe is gone, which it now is.
            let _ = tokio::time::timeout(Duration::from_secs(2), task).await;
        }
        let how = self.status.borrow().exit.clone();
        how.unwrap_or_else(|| "still running after SIGKILL".to_owned())
    }

    async fn wait_stopped(&mut self, limit: Duration) -> bool {
        let stopped = self.status.wait_for(|s| s.phase == Phase::Stopped);
        matches!(tokio::time::timeout(limit, stopped).await, Ok(Ok(_)))
    }

    /// For a failed start: SIGKILL, no grace.
    async fn kill_all(&mut self) {
        let children = child_groups(self.pid);
        signal_group(self.pid, "KILL").await;
        for group in children {
            signal_group(group, "KILL").await;
        }
        self.stopped = true;
    }
}

impl Drop for WatchFunction {
    fn drop(&mut self) {
        if self.stopped {
            return;
        }
        // Not shut down (a panic, an early return): no grace, but nothing left behind either.
        let mut groups = child_groups(self.pid);
        groups.push(self.pid);
        for group in groups {
            let _ = std::process::Command::new("kill")
                .args(["-s", "KILL", "--", &format!("-{group}")])
                .stderr(Stdio::null())
                .status();
        }
    }
}

fn open_log(path: &Path) -> Result<Arc<Mutex<File>>, WatchError> {
    if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
        std::fs::create_dir_all(dir).map_err(WatchError::io(dir.display().to_string()))?;
    }
    let file = OpenOptions::new()
        .create(true)
        .append(true)
        .open(path)
        .map_err(WatchError::io(path.display().to_string()))?;
    Ok(Arc::new(Mutex::new(file)))
}

fn spawn(
    spec: &WatchSpec,
    program: &Path,
    port: u16,
    log: &Arc<Mutex<File>>,
) -> Result<WatchFunction, WatchError> {
    let mut command = Command::new(program);
    command
        .args(["lambda", "watch", "--invoke-address", "127.0.0.1"])
        .args(["--invoke-port", &port.to_string()])
        // Plain status lines: they are parsed (see status.rs) and kept in a file.
        .args(["--color", "never"])
        // Otherwise this process's environment, as `prebuild` had it (plus the function's variables, which no build
        // reads): cargo finds the prebuilt artifacts fresh.
        .current_dir(&spec.workspace)
        .env("CARGO_TERM_COLOR", "never")
        .envs(spec.env.iter().map(|(k, v)| (k, v)))
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .kill_on_drop(true)
        // Its own group: a Ctrl-C in the terminal reaches `sqsafe local up`, which then stops watch with SIGTERM.
        .process_group(0);
    let mut child = command
        .spawn()
        .map_err(WatchError::io(format!("cannot run {}", program.display())))?;
    let pid = child.id().ok_or_else(|| WatchError::Io {
        what: format!("{} exited at once", program.display()),
        source: std::io::Error::other("no pid"),
    })?;
    let (tx, status) = watch::channel(Status::new(Instant::now()));
    let tx = Arc::new(tx);
    let tally = Arc::new(Tally::default());
    let mut tasks = Vec::new();
    if let Some(out) = child.stdout.take() {
        let pipe = Pipe::new(log, &tx, &tally);
        tasks.push(tokio::spawn(pump(out, pipe)));
    }
    if let Some(err) = child.stderr.take() {
        let pipe = Pipe::new(log, &tx, &tally);
        tasks.push(tokio::spawn(pump(err, pipe)));
    }
    tasks.push(tokio::spawn(monitor(child, tx)));
    Ok(WatchFunction {
        binary: spec.binary.clone(),
        port,
        pid,
        log_path: spec.log_path.clone(),
        status,
        tally,
        tasks,
        stopped: false,
    })
}

/// Where the lines of one of watch's pipes go: the log, the status, the tally of batch metrics lines.
struct Pipe {
    log: Arc<Mutex<File>>,
    status: Arc<watch::Sender<Status>>,
    tally: Arc<Tally>,
}

impl Pipe {
    fn new(
        log: &Arc<Mutex<File>>,
        status: &Arc<watch::Sender<Status>>,
        tally: &Arc<Tally>,
    ) -> Self {
        Self {
            log: Arc::clone(log),
            status: Arc::clone(status),
            tally: Arc::clone(tally),
        }
    }
}

/// Copies one pipe to the log line by line and feeds each line to the status and the tally.
async fn pump(pipe: impl AsyncRead + Unpin, to: Pipe) {
    let Pipe { log, status, tally } = to;
    let mut reader = BufReader::new(pipe);
    let mut line = Vec::new();
    loop {
        line.clear();
        match reader.read_until(b'\n', &mut line).await {
            Ok(0) | Err(_) => return,
            Ok(_) => {}
        }
        {
            let mut file = log.lock().unwrap_or_else(PoisonError::into_inner);
            let _ = file.write_all(&line);
            if !line.ends_with(b"\n") {
                let _ = file.write_all(b"\n");
            }
        }
        // The function's output need not be UTF-8.
        let text = String::from_utf8_lossy(&line);
        let text = text.trim_end_matches(['\n', '\r']);
        status.send_if_modified(|s| s.observe(text, Instant::now()));
        tally.observe(text);
    }
}

/// Waits for watch itself to end and records it.
async fn monitor(mut child: Child, status: Arc<watch::Sender<Status>>) {
    let how = match child.wait().await {
        Ok(exit) => format!("cargo lambda watch ended ({exit})"),
        Err(e) => format!("cargo lambda watch could not be waited for: {e}"),
    };
    status.send_modify(|s| s.stopped(how, Instant::now()));
}

/// `kill -s SIGNAL -- -GROUP`. Errors mean the group is gone already.
async fn signal_group(group: u32, signal: &str) {
    let _ = Command::new("kill")
        .args(["-s", signal, "--", &format!("-{group}")])
        .stderr(Stdio::null())
        .status()
        .await;
}

/// The process groups of `parent`'s children: watch runs each command (cargo, then the function it execs) in a
/// group of its own, which a signal to watch's group does not reach. Read from /proc; empty elsewhere.
fn child_groups(parent: u32) -> Vec<u32> {
    let Ok(entries) = std::fs::read_dir("/proc") else {
        return Vec::new();
    };
    let mut groups: Vec<u32> = entries
        .filter_map(|e| e.ok())
        .filter(|e| {
            e.file_name()
                .to_string_lossy()
                .bytes()
                .all(|b| b.is_ascii_digit())
        })
        .filter_map(|e| std::fs::read_to_string(e.path().join("stat")).ok())
        .filter_map(|stat| parent_and_group(&stat))
        .filter(|(ppid, _)| *ppid == parent)
        .map(|(_, group)| group)
        .filter(|group| *group != parent)
        .collect();
    groups.sort_unstable();
    groups.dedup();
    groups
}

/// `(ppid, pgrp)` from a `/proc/<pid>/stat` line: `pid (comm) state ppid pgrp ...`, where `comm` may hold spaces
/// and parentheses, so the fields are counted from the last `)`.
fn parent_and_group(stat: &str) -> Option<(u32, u32)> {
    let rest = &stat[stat.rfind(')')? + 1..];
    let mut fields = rest.split_whitespace();
    let _state = fields.next()?;
    let ppid = fields.next()?.parse().ok()?;
    let pgrp = fields.next()?.parse().ok()?;
    Some((ppid, pgrp))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stat_lines_give_parent_and_group() {
        assert_eq!(
            parent_and_group("20692 (cargo) S 20618 20692 20692 0 -1 4194560"),
            Some((20618, 20692))
        );
        assert_eq!(
            parent_and_group("7 (a (b) c) R 1 7 7 0"),
            Some((1, 7)),
            "comm with spaces and parentheses"
        );
        assert_eq!(parent_and_group("garbage"), None);
    }

    #[test]
    fn a_child_in_its_own_group_is_found() {
        use std::os::unix::process::CommandExt;
        let mut child = std::process::Command::new("sleep")
            .arg("30")
            .process_group(0)
            .spawn()
            .expect("spawn sleep");
        let groups = child_groups(std::process::id());
        let _ = child.kill();
        let _ = child.wait();
        assert!(
            groups.contains(&child.id()),
            "{groups:?} lacks {}",
            child.id()
        );
    }
}
