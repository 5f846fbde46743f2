//! Where a process's CPU goes, by sampling it with `perf record` (Linux perf, when installed) during an extra run
//! whose figures are not kept: the sampling costs the process a little CPU of its own.

use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::Duration;

use tokio::process::{Child, Command};

/// Samples per second: a few thousand samples over the second or so of CPU a profiled run takes.
const FREQUENCY: &str = "4999";

/// Whether `perf` can be run here.
pub(crate) fn available() -> bool {
    std::process::Command::new("perf")
        .arg("--version")
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success())
}

/// `perf record` attached to one process.
pub(crate) struct Profiler {
    child: Child,
    data: PathBuf,
}

/// The text reports of one profile.
#[derive(Debug, Clone, serde::Serialize)]
pub(crate) struct Reports {
    /// Samples by thread name and shared object (`perf report --sort comm,dso`).
    pub(crate) by_thread: PathBuf,
    /// Samples by symbol (`perf report --sort dso,sym`).
    pub(crate) by_symbol: PathBuf,
}

impl Profiler {
    /// Starts sampling `pid` into `<stem>.perf.data`, and gives perf a moment to attach.
    pub(crate) async fn start(pid: u32, stem: &Path) -> Result<Self, String> {
        let data = stem.with_extension("perf.data");
        let child = Command::new("perf")
            .args([
                "record",
                "--quiet",
                "-F",
                FREQUENCY,
                "-p",
                &pid.to_string(),
                "-o",
            ])
            .arg(&data)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .kill_on_drop(true)
            .spawn()
            .map_err(|e| format!("perf record: {e}"))?;
        tokio::time::sleep(Duration::from_millis(300)).await;
        Ok(Self { child, data })
    }

    /// Stops sampling (SIGINT, as perf expects, so it writes its data) and writes the reports next to the data.
    pub(crate) async fn finish(mut self) -> Result<Reports, String> {
        let pid = self.child.id().ok_or("perf record ended early")?;
        let _ = Command::new("kill")
            .args(["-INT", &pid.to_string()])
            .status()
            .await;
        let _ = tokio::time::timeout(Duration::from_secs(30), self.child.wait()).await;
        let by_thread = self.data.with_extension("by-thread.txt");
        let by_symbol = self.data.with_extension("by-symbol.txt");
        report(&self.data, "comm,dso", &by_thread, "0.2").await?;
        // Every symbol: most are small, and only all of them add up to where the time goes by crate.
        report(&self.data, "dso,sym", &by_symbol, "0").await?;
        Ok(Reports {
            by_thread,
            by_symbol,
        })
    }
}

async fn report(data: &Path, sort: &str, out: &Path, percent_limit: &str) -> Result<(), String> {
    let output = Command::new("perf")
        .args([
            "report",
            "--stdio",
            "--no-children",
            "--percent-limit",
            percent_limit,
            "--sort",
            sort,
            "-i",
        ])
        .arg(data)
        .output()
        .await
        .map_err(|e| format!("perf report: {e}"))?;
    if !output.status.success() {
        return Err(format!(
            "perf report failed: {}",
            String::from_utf8_lossy(&output.stderr)
        ));
    }
    std::fs::write(out, &output.stdout).map_err(|e| format!("{}: {e}", out.display()))
}
