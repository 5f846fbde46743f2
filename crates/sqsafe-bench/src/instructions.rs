//! Instructions per message, counted by valgrind's callgrind: what sqsafe's function does per message under each
//! network setting, in a unit that does not depend on what else the machine is doing. CPU time per message grows
//! when the process sleeps between answers and shares its cores with moto; the instruction count shows whether
//! that is more work or the same work run slower.
//!
//! The function runs under `valgrind --tool=callgrind` (about fifty times slower, so on fewer batches than the
//! timed runs); before each network setting its counters are zeroed and after it they are dumped
//! (`callgrind_control`), so each dump holds that setting's batches only. valgrind's CPU model has no SHA
//! extensions, so SHA-256 (request signing, fingerprints) runs the portable code there: its share is larger than
//! on the machine itself, which uses SHA-NI when it has them.

use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::Duration;

use serde::Serialize;
use tokio::process::Command;

use crate::bed::Peer;
use crate::proxy::Backend;

/// Named parts of the work, for the breakdown: a label and a symbol whose inclusive count (itself and what it calls)
/// is that part.
const PARTS: [(&str, &str); 7] = [
    (
        "the records: sqsafe's batch processor, idempotency layer and effect, their I/O included",
        "sqsafe_batch::processor::run::<impl sqsafe_batch::processor::config::BatchProcessor>::run_record",
    ),
    (
        "AWS SDK requests (DynamoDB PutItem, UpdateItem), signing included",
        "aws_smithy_runtime::client::orchestrator::try_op",
    ),
    (
        "SigV4 signing of those requests",
        "aws_sigv4::http_request::sign::sign",
    ),
    (
        "SHA-256, all callers (portable code under valgrind)",
        "sha2::sha256::compress256",
    ),
    (
        "the payments API call (reqwest)",
        "reqwest::async_impl::client::Pending",
    ),
    (
        "lambda_runtime reading the event (serde_path_to_error)",
        "lambda_runtime::deserializer::deserialize",
    ),
    ("JSON log lines", "sqsafe_telemetry::json::JsonLayer"),
];

/// One network setting's count.
#[derive(Debug, Clone, Serialize)]
pub(crate) struct Count {
    /// The function counted (the claim mode in `make bench`; either mode in `scripts/bench-compare.sh`).
    pub(crate) peer: Peer,
    pub(crate) backend: Backend,
    pub(crate) latency_ms: u64,
    pub(crate) messages: usize,
    pub(crate) per_message: f64,
    /// Per [`PARTS`]: label, instructions per message (inclusive).
    pub(crate) parts: Vec<(String, f64)>,
    /// The callgrind dump counted (for `callgrind_annotate`, or a per-function comparison).
    pub(crate) file: PathBuf,
}

/// Whether valgrind and callgrind_control can be run here.
pub(crate) fn available() -> bool {
    ["valgrind", "callgrind_control"].iter().all(|tool| {
        std::process::Command::new(tool)
            .arg("--version")
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status()
            .is_ok_and(|s| s.success())
    })
}

/// A script in `dir` that runs `binary` under callgrind, its dumps in `dir`; the Runtime API emulator runs it as
/// the function.
pub(crate) fn wrapper(dir: &Path, binary: &Path) -> Result<PathBuf, String> {
    use std::os::unix::fs::PermissionsExt as _;
    std::fs::create_dir_all(dir).map_err(|e| format!("{}: {e}", dir.display()))?;
    let script = dir.join("callgrind-function.sh");
    let text = format!(
        "#!/bin/sh\nexec valgrind --tool=callgrind --callgrind-out-file='{dir}/callgrind.%p' \
         --log-file='{dir}/valgrind.%p.log' '{binary}' \"$@\"\n",
        dir = dir.display(),
        binary = binary.display()
    );
    std::fs::write(&script, text).map_err(|e| format!("{}: {e}", script.display()))?;
    std::fs::set_permissions(&script, std::fs::Permissions::from_mode(0o755))
        .map_err(|e| format!("{}: {e}", script.display()))?;
    Ok(script)
}

async fn control(args: &[&str]) -> Result<(), String> {
    let status = Command::new("callgrind_control")
        .args(args)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .await
        .map_err(|e| format!("callgrind_control: {e}"))?;
    if status.success() {
        Ok(())
    } else {
        Err(format!("callgrind_control {args:?}: {status}"))
    }
}

/// Zeroes the counters of the process `pid`.
pub(crate) async fn zero(pid: u32) -> Result<(), String> {
    control(&["--zero", &pid.to_string()]).await
}

/// Dumps the counters of `pid` (its `n`th dump, from 1) and reads the count and its parts, per message.
pub(crate) async fn dump(
    dir: &Path,
    pid: u32,
    n: usize,
    messages: usize,
    peer: Peer,
    backend: Backend,
    latency_ms: u64,
) -> Result<Count, String> {
    control(&["--dump", &pid.to_string()]).await?;
    let file = dir.join(format!("callgrind.{pid}.{n}"));
    // callgrind writes the dump after the command returns.
    for _ in 0..50 {
        if std::fs::metadata(&file).is_ok_and(|m| m.len() > 0) {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let text = std::fs::read_to_string(&file).map_err(|e| format!("{}: {e}", file.display()))?;
    let total: f64 = text
        .lines()
        .find_map(|l| l.strip_prefix("summary: "))
        .or_else(|| text.lines().find_map(|l| l.strip_prefix("totals: ")))
        .and_then(|v| v.trim().parse().ok())
        .ok_or_else(|| format!("{}: no summary line", file.display()))?;
    let annotated = Command::new("callgrind_annotate")
        .arg("--inclusive=yes")
        .arg(&file)
        .output()
        .await
        .map_err(|e| format!("callgrind_annotate: {e}"))?;
    let annotated = String::from_utf8_lossy(&annotated.stdout);
    let per = |count: f64| count / messages.max(1) as f64;
    let parts = PARTS
        .iter()
        .map(|(label, symbol)| ((*label).to_owned(), per(inclusive(&annotated, symbol))))
        .collect();
    Ok(Count {
        peer,
        backend,
        latency_ms,
        messages,
        per_message: per(total),
        parts,
        file,
    })
}

/// The inclusive count of the first (largest) line of `callgrind_annotate --inclusive=yes` naming `symbol`.
fn inclusive(annotated: &str, symbol: &str) -> f64 {
    annotated
        .lines()
        .find(|line| line.contains(&format!(":{symbol}")) || line.contains(&format!(":<{symbol}")))
        .and_then(|line| line.split_whitespace().next())
        .and_then(|count| count.replace(',', "").parse().ok())
        .unwrap_or(0.0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_inclusive_count_is_read_from_the_first_line_naming_the_symbol() {
        let annotated = "\
1,110,079,664 (100.0%)  ???:main [/bin/f]
  690,457,275 (62.20%)  ???:aws_smithy_runtime::client::orchestrator::try_op::{{closure}}::{{closure}} [/bin/f]
   15,423,000 ( 1.39%)  ???:<sqsafe_telemetry::json::JsonLayer<W,C> as tracing_subscriber::layer::Layer<S>>::on_event [/bin/f]
    1,000,000 ( 0.09%)  ???:aws_smithy_runtime::client::orchestrator::try_op::{{closure}} [/bin/f]
";
        assert_eq!(
            inclusive(
                annotated,
                "aws_smithy_runtime::client::orchestrator::try_op"
            ),
            690_457_275.0
        );
        assert_eq!(
            inclusive(annotated, "sqsafe_telemetry::json::JsonLayer"),
            15_423_000.0
        );
        assert_eq!(inclusive(annotated, "absent::symbol"), 0.0);
    }
}
