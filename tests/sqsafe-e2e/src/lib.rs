//! End-to-end support: `cargo lambda` from the project's pinned venv, the local pipeline harness (functions under a
//! local Runtime API, event source mappings on moto's queues), the demo, and the comparison consumers.
#![forbid(unsafe_code)]

pub mod consumers;
pub mod demo;
pub mod harness;

use std::net::{SocketAddr, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// The `sqsafe` CLI as `make test` built it (`SQSAFE_E2E_SQSAFE_BIN`, built alone, so that no other package's
/// features reach it), else built now by `cargo build -p sqsafe-cli --bin sqsafe` (a no-op when fresh). A test that
/// must not see a later build replace it copies it out of the target folder.
pub fn sqsafe_cli() -> PathBuf {
    if let Some(bin) = std::env::var_os("SQSAFE_E2E_SQSAFE_BIN").filter(|b| !b.is_empty()) {
        return PathBuf::from(bin);
    }
    let output = Command::new(env!("CARGO"))
        .current_dir(workspace_root())
        .args(["build", "-q", "-p", "sqsafe-cli", "--bin", "sqsafe"])
        .output()
        .expect("run cargo build");
    assert!(
        output.status.success(),
        "cargo build of sqsafe failed:\n{}",
        String::from_utf8_lossy(&output.stderr)
    );
    sqsafe_local::stack::target_dir().join("debug/sqsafe")
}

/// A child's stdout, line by line, read on a thread of its own (ends when the child closes it or the receiver goes).
pub fn stdout_lines(stdout: std::process::ChildStdout) -> std::sync::mpsc::Receiver<String> {
    use std::io::{BufRead, BufReader};
    let (tx, lines) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        for line in BufReader::new(stdout).lines().map_while(Result::ok) {
            if tx.send(line).is_err() {
                return;
            }
        }
    });
    lines
}

/// The workspace root.
pub fn workspace_root() -> PathBuf {
    let root = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../..");
    root.canonicalize().unwrap_or(root)
}

/// `PATH` with the project's venv first, so `cargo lambda` is the pinned cargo-lambda.
///
/// # Panics
/// When the venv has no cargo-lambda: run `make test`, which installs it.
pub fn venv_path() -> String {
    let bin = workspace_root().join(".venv/bin");
    assert!(
        bin.join("cargo-lambda").exists(),
        "{} has no cargo-lambda: run `make test` (it installs the pinned tools into .venv)",
        bin.display()
    );
    format!(
        "{}:{}",
        bin.display(),
        std::env::var("PATH").unwrap_or_default()
    )
}

/// `cargo lambda watch` on `port` with `env`, in its own process group; stopped (with its function processes) on drop.
pub struct Watch {
    child: Child,
    port: u16,
    log: PathBuf,
}

impl Watch {
    /// Starts the emulator and waits until its port answers (at most 60 s).
    ///
    /// # Panics
    /// When it cannot start or does not listen in time (the log's tail is in the message).
    pub fn start(env: &[(&str, String)]) -> Self {
        use std::os::unix::process::CommandExt;
        let port = sqsafe_aws::free_port().expect("a free loopback port");
        let log = workspace_root().join(format!("target/cargo-lambda-watch-{port}.log"));
        let out = std::fs::File::create(&log).expect("log file");
        let mut command = Command::new("cargo");
        command
            .current_dir(workspace_root())
            .env("PATH", venv_path())
            .args([
                "lambda",
                "watch",
                "--invoke-address",
                "127.0.0.1",
                "--invoke-port",
                &port.to_string(),
            ])
            .stdin(Stdio::null())
            .stdout(out.try_clone().expect("log"))
            .stderr(out)
            .process_group(0);
        for (k, v) in env {
            command.arg("--env-var").arg(format!("{k}={v}"));
        }
        let child = command.spawn().expect("spawn cargo lambda watch");
        let watch = Self { child, port, log };
        watch.wait_listening(Duration::from_secs(60));
        watch
    }

    fn wait_listening(&self, limit: Duration) {
        let started = Instant::now();
        let addr = SocketAddr::from(([127, 0, 0, 1], self.port));
        while TcpStream::connect_timeout(&addr, Duration::from_millis(200)).is_err() {
            assert!(
                started.elapsed() < limit,
                "cargo lambda watch did not listen in {limit:?}:\n{}",
                self.log_tail()
            );
            std::thread::sleep(Duration::from_millis(100));
        }
    }

    /// Invokes `function` with `events/<event_file>` through `cargo lambda invoke`; returns its JSON answer.
    ///
    /// # Panics
    /// When the invocation fails (the log's tail is in the message).
    pub fn invoke(&self, function: &str, event_file: &str) -> serde_json::Value {
        let data = workspace_root().join("events").join(event_file);
        let output = Command::new("cargo")
            .current_dir(workspace_root())
            .env("PATH", venv_path())
            .args([
                "lambda",
                "invoke",
                function,
                "--invoke-address",
                "127.0.0.1",
                "--invoke-port",
                &self.port.to_string(),
            ])
            .arg("--data-file")
            .arg(&data)
            .output()
            .expect("run cargo lambda invoke");
        assert!(
            output.status.success(),
            "cargo lambda invoke {function} failed: {}\n{}",
            String::from_utf8_lossy(&output.stderr),
            self.log_tail()
        );
        let stdout = String::from_utf8_lossy(&output.stdout);
        serde_json::from_str(stdout.trim())
            .unwrap_or_else(|e| panic!("answer is not JSON ({e}): {stdout}\n{}", self.log_tail()))
    }

    /// The last lines of the emulator's log (with the functions' JSON logs).
    pub fn log_tail(&self) -> String {
        let text = std::fs::read_to_string(&self.log).unwrap_or_default();
        let lines: Vec<&str> = text.lines().collect();
        lines[lines.len().saturating_sub(30)..].join("\n")
    }

    /// The whole log.
    pub fn log(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }

    /// Where the log is.
    pub fn log_path(&self) -> &Path {
        &self.log
    }
}

impl Drop for Watch {
    fn drop(&mut self) {
        // The whole group: cargo-lambda, the `cargo run` it spawned, and the function binaries.
        let group = format!("-{}", self.child.id());
        let _ = Command::new("kill").args(["-TERM", "--", &group]).status();
        let _ = self.child.wait();
    }
}

/// The item identifiers of a `SqsBatchResponse` answer.
pub fn failures(answer: &serde_json::Value) -> Vec<String> {
    answer["batchItemFailures"]
        .as_array()
        .map(|items| {
            items
                .iter()
                .filter_map(|i| i["itemIdentifier"].as_str().map(str::to_owned))
                .collect()
        })
        .unwrap_or_default()
}
