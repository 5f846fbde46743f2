//! Starts and stops moto server (the local AWS) from the project's Python venv, one private server per caller.
//!
//! ```no_run
//! use sqsafe_local::moto::{self, MotoServer};
//!
//! # async fn run() -> Result<(), Box<dyn std::error::Error>> {
//! let moto = MotoServer::start(&moto::venv_bin()).await?;
//! // ... point the SDK at moto.endpoint() ...
//! moto.reset().await?; // wipe every table and queue
//! moto.shutdown().await;
//! # Ok(()) }
//! ```
//!
//! The server listens on 127.0.0.1 only, on a free port, in its own process group (so a Ctrl-C in the terminal
//! reaches the test, whose cleanup then stops the server, rather than the server first). Dropping a [`MotoServer`]
//! kills the process; [`MotoServer::shutdown`] also waits for it. A process killed with SIGKILL cannot clean up, so
//! its moto server outlives it.
//!
//! moto runs through a small launcher (`moto_server.py`, embedded here; `sqsafe local moto` and every test of sqsafe's
//! repository run moto through it) that applies DynamoDB's writes one at a time, in arrival order: moto checks a write's
//! condition and then applies it with nothing held between the two, so under CPU load two conditional claims of one
//! key could both win. DynamoDB evaluates a condition and its write atomically; with the launcher, moto does too.

use std::fs::{File, OpenOptions};
use std::io::{self, Read, Seek, SeekFrom};
use std::path::{Path, PathBuf};
use std::process::{ExitStatus, Stdio};
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use bytes::Bytes;
use http_body_util::Empty;
use hyper::{Method, Request, StatusCode};
use hyper_util::client::legacy::Client;
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::rt::TokioExecutor;
use tokio::process::{Child, Command};

/// How long [`MotoServer::start`] waits for the server to answer: a bound, not a wait (an idle machine answers in 2 to
/// 4 s). On 2 busy cores a Python server starting at normal priority beside `make test`'s release build, fault suite
/// and bench smoke once took over 20 s, six times in one run.
const READY_TIMEOUT: Duration = Duration::from_secs(60);
/// How often it asks.
const READY_POLL: Duration = Duration::from_millis(100);
/// How long one readiness or reset request may take.
const REQUEST_TIMEOUT: Duration = Duration::from_secs(10);
/// Servers started in a row when one exits at once (another process took its free port first).
const START_ATTEMPTS: u32 = 3;
/// Lines of the log quoted in start errors.
const LOG_TAIL_LINES: usize = 40;
/// moto_server with DynamoDB's writes serialised (see the module's documentation), run as `python -c`.
pub const LAUNCHER: &str = include_str!("moto_server.py");

/// Why moto server could not be started or reset.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// `<venv_bin>/moto_server` does not exist.
    #[error("moto_server not found at {}: run `sqsafe local venv` (make test and a project's make venv do) to install the pinned tools", path.display())]
    NotInstalled {
        /// Where it was looked for.
        path: PathBuf,
    },
    /// The log file could not be created.
    #[error("cannot create the moto log file {}: {source}", path.display())]
    Log {
        /// The log file.
        path: PathBuf,
        /// The operating system's error.
        #[source]
        source: io::Error,
    },
    /// No free loopback port could be found.
    #[error("cannot find a free port on 127.0.0.1: {source}")]
    Port {
        /// The operating system's error.
        #[source]
        source: io::Error,
    },
    /// The process could not be started or watched.
    #[error("cannot run {}: {source}", program.display())]
    Spawn {
        /// The venv's `python`, which runs the launcher.
        program: PathBuf,
        /// The operating system's error.
        #[source]
        source: io::Error,
    },
    /// The server exited before answering (every attempt).
    #[error("moto_server exited ({status}) before answering; tail of {}:\n{log_tail}", log_path.display())]
    Exited {
        /// Its exit status.
        status: ExitStatus,
        /// The log file.
        log_path: PathBuf,
        /// The log's last lines.
        log_tail: String,
    },
    /// The server did not answer `POST /moto-api/reset` with `200` in time; it was stopped.
    #[error("moto_server at {endpoint} not ready after {waited:?}; tail of {}:\n{log_tail}", log_path.display())]
    NotReady {
        /// Where it should have answered.
        endpoint: String,
        /// How long it was given.
        waited: Duration,
        /// The log file.
        log_path: PathBuf,
        /// The log's last lines.
        log_tail: String,
    },
    /// `POST /moto-api/reset` failed.
    #[error("moto reset at {endpoint} failed: {reason}")]
    Reset {
        /// The server's endpoint.
        endpoint: String,
        /// The status or transport error.
        reason: String,
    },
}

/// `<project root>/.venv/bin`, where `sqsafe local venv` installs `moto_server`: the project is the one of the test
/// or binary running (see [`sqsafe_testkit::project_root`]), not the folder this crate was compiled in.
/// [`MotoServer::start`] says clearly when `moto_server` is not there.
pub fn venv_bin() -> PathBuf {
    crate::stack::project_dir().join(".venv").join("bin")
}

/// A running moto server, private to its owner.
#[derive(Debug)]
pub struct MotoServer {
    child: Child,
    port: u16,
    log_path: PathBuf,
    /// Set when the log path was chosen here: a clean shutdown removes it.
    owns_log: bool,
    client: Client<HttpConnector, Empty<Bytes>>,
}

impl MotoServer {
    /// Starts moto server ([`LAUNCHER`] under `<venv_bin>/python`) on a free loopback port, logging to a new file
    /// under the system temp directory (removed by [`shutdown`](Self::shutdown), kept when the server fails or is
    /// dropped), and waits until it answers: `POST /moto-api/reset` with `200`, polled every 100 ms for up to 20 s.
    pub async fn start(venv_bin: &Path) -> Result<Self, Error> {
        static STARTED: AtomicU64 = AtomicU64::new(0);
        let log_path = std::env::temp_dir().join(format!(
            "sqsafe-moto-{}-{}.log",
            std::process::id(),
            STARTED.fetch_add(1, Ordering::Relaxed)
        ));
        Self::launch(venv_bin, log_path, true).await
    }

    /// [`start`](Self::start), with stdout and stderr going to `log_path` (created or truncated, its directory
    /// created if missing; kept after shutdown).
    pub async fn start_with_log(venv_bin: &Path, log_path: &Path) -> Result<Self, Error> {
        Self::launch(venv_bin, log_path.to_path_buf(), false).await
    }

    async fn launch(venv_bin: &Path, log_path: PathBuf, owns_log: bool) -> Result<Self, Error> {
        let installed = venv_bin.join("moto_server");
        if !installed.is_file() {
            return Err(Error::NotInstalled { path: installed });
        }
        // The launcher imports moto from the venv's own interpreter.
        let program = venv_bin.join("python");
        create_log(&log_path)?;
        let client = Client::builder(TokioExecutor::new()).build_http();
        let mut attempt = 1;
        loop {
            // Another process may take the port before moto binds it: the loop then retries.
            let port = sqsafe_aws::free_port().map_err(|source| Error::Port { source })?;
            let mut child = spawn(&program, port, &log_path)?;
            let endpoint = endpoint(port);
            match wait_ready(&mut child, &client, &endpoint)
                .await
                .map_err(|source| Error::Spawn {
                    program: program.clone(),
                    source,
                })? {
                Ready::Yes => {
                    tracing::info!(%endpoint, log = %log_path.display(), "moto server ready");
                    return Ok(Self {
                        child,
                        port,
                        log_path,
                        owns_log,
                        client,
                    });
                }
                Ready::Exited(status) if attempt < START_ATTEMPTS => {
                    tracing::warn!(%status, port, "moto_server exited at once, retrying on another port");
                    attempt += 1;
                }
                Ready::Exited(status) => {
                    return Err(Error::Exited {
                        status,
                        log_tail: log_tail(&log_path),
                        log_path,
                    });
                }
                Ready::TimedOut => {
                    stop(&mut child).await;
                    return Err(Error::NotReady {
                        endpoint,
                        waited: READY_TIMEOUT,
                        log_tail: log_tail(&log_path),
                        log_path,
                    });
                }
            }
        }
    }

    /// `http://127.0.0.1:PORT`, without a trailing slash.
    pub fn endpoint(&self) -> String {
        endpoint(self.port)
    }

    /// The port it listens on.
    pub fn port(&self) -> u16 {
        self.port
    }

    /// Its process id (the launcher's Python process, which serves every request), while it runs.
    pub fn pid(&self) -> Option<u32> {
        self.child.id()
    }

    /// The file its stdout and stderr go to.
    pub fn log_path(&self) -> &Path {
        &self.log_path
    }

    /// Wipes all state (tables, queues, everything): `POST /moto-api/reset`.
    pub async fn reset(&self) -> Result<(), Error> {
        let endpoint = self.endpoint();
        match post_reset(&self.client, &endpoint).await {
            Ok(StatusCode::OK) => Ok(()),
            Ok(status) => Err(Error::Reset {
                endpoint,
                reason: format!("answered {status}"),
            }),
            Err(reason) => Err(Error::Reset { endpoint, reason }),
        }
    }

    /// Kills the server and waits for it to exit; removes the log when [`start`](Self::start) chose its path.
    /// moto keeps everything in memory, so there is nothing to flush.
    pub async fn shutdown(mut self) {
        stop(&mut self.child).await;
        if self.owns_log {
            let _ = std::fs::remove_file(&self.log_path);
        }
    }
}

enum Ready {
    Yes,
    Exited(ExitStatus),
    TimedOut,
}

fn endpoint(port: u16) -> String {
    format!("http://127.0.0.1:{port}")
}

fn create_log(path: &Path) -> Result<(), Error> {
    let error = |source| Error::Log {
        path: path.to_path_buf(),
        source,
    };
    if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
        std::fs::create_dir_all(dir).map_err(error)?;
    }
    File::create(path).map(drop).map_err(error)
}

fn spawn(program: &Path, port: u16, log_path: &Path) -> Result<Child, Error> {
    let log_error = |source| Error::Log {
        path: log_path.to_path_buf(),
        source,
    };
    // Appended to, so that the log of a failed attempt stays above the next one.
    let stdout = OpenOptions::new()
        .append(true)
        .open(log_path)
        .map_err(log_error)?;
    let stderr = stdout.try_clone().map_err(log_error)?;
    let mut command = Command::new(program);
    command
        .args(["-c", LAUNCHER, "-H", "127.0.0.1", "-p", &port.to_string()])
        // Python buffers a redirected stdout; unbuffered, the log is current when quoted in an error.
        .env("PYTHONUNBUFFERED", "1")
        .stdin(Stdio::null())
        .stdout(stdout)
        .stderr(stderr)
        .kill_on_drop(true);
    #[cfg(unix)]
    command.process_group(0);
    command.spawn().map_err(|source| Error::Spawn {
        program: program.to_path_buf(),
        source,
    })
}

async fn wait_ready(
    child: &mut Child,
    client: &Client<HttpConnector, Empty<Bytes>>,
    endpoint: &str,
) -> io::Result<Ready> {
    let deadline = Instant::now() + READY_TIMEOUT;
    loop {
        if let Some(status) = child.try_wait()? {
            return Ok(Ready::Exited(status));
        }
        if let Ok(StatusCode::OK) = post_reset(client, endpoint).await {
            return Ok(Ready::Yes);
        }
        if Instant::now() >= deadline {
            return Ok(Ready::TimedOut);
        }
        // Polling a real process that takes its time to import moto: there is nothing to notify us.
        tokio::time::sleep(READY_POLL).await;
    }
}

async fn post_reset(
    client: &Client<HttpConnector, Empty<Bytes>>,
    endpoint: &str,
) -> Result<StatusCode, String> {
    let request = Request::builder()
        .method(Method::POST)
        .uri(format!("{endpoint}/moto-api/reset"))
        .body(Empty::new())
        .map_err(|e| e.to_string())?;
    match tokio::time::timeout(REQUEST_TIMEOUT, client.request(request)).await {
        Ok(Ok(response)) => Ok(response.status()),
        Ok(Err(e)) => Err(e.to_string()),
        Err(_) => Err(format!("no answer within {REQUEST_TIMEOUT:?}")),
    }
}

async fn stop(child: &mut Child) {
    // SIGKILL: moto holds nothing that needs a graceful exit. Errors mean it has already exited.
    let _ = child.start_kill();
    let _ = child.wait().await;
}

/// The last lines of the log, for error messages; empty when it cannot be read.
fn log_tail(path: &Path) -> String {
    const MAX_BYTES: u64 = 16 * 1024;
    let mut bytes = Vec::new();
    let read = File::open(path).and_then(|mut file| {
        let len = file.metadata()?.len();
        file.seek(SeekFrom::Start(len.saturating_sub(MAX_BYTES)))?;
        file.read_to_end(&mut bytes)
    });
    if read.is_err() {
        return String::new();
    }
    let text = String::from_utf8_lossy(&bytes);
    let lines: Vec<&str> = text.lines().collect();
    lines[lines.len().saturating_sub(LOG_TAIL_LINES)..].join("\n")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn venv_bin_is_under_the_workspace_root() {
        let bin = venv_bin();
        assert!(bin.ends_with(".venv/bin"), "{}", bin.display());
        let root = bin.ancestors().nth(2).expect("root");
        assert!(root.join("Cargo.toml").is_file(), "{}", root.display());
        assert!(root.join("crates").join("sqsafe-local").is_dir());
    }

    #[test]
    fn the_log_tail_is_the_last_lines() {
        let path =
            std::env::temp_dir().join(format!("sqsafe-moto-tail-{}.log", std::process::id()));
        let text: String = (1..=100).map(|i| format!("line {i}\n")).collect();
        std::fs::write(&path, text).expect("write");
        let tail = log_tail(&path);
        let _ = std::fs::remove_file(&path);
        assert!(tail.starts_with("line 61\n"), "{tail}");
        assert!(tail.ends_with("line 100"), "{tail}");
        assert_eq!(log_tail(Path::new("/nonexistent/sqsafe.log")), "");
    }
}
