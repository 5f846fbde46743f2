use std::path::Path;
use std::process::{ExitStatus, Stdio};

use tokio::process::Command;

use super::error::WatchError;

/// Builds `binary` in `workspace` the way `cargo lambda watch` will run it (`cargo run --bin <binary>` there: the same
/// package selection, so the same features and the same artifacts), with cargo's progress on this process's stderr.
/// The first build of a workspace takes minutes on 2 cores; done before polling starts, it keeps that wait out of the
/// first delivery, and watch's own build on the first invocation finds everything fresh.
///
/// A failed build is not an error here: watch shows the compiler's messages in its log and builds again when a
/// file is saved. Cargo runs in this process's group, so a Ctrl-C in the terminal stops it too.
pub async fn prebuild(workspace: &Path, binary: &str) -> Result<ExitStatus, WatchError> {
    let cargo = std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into());
    Command::new(cargo)
        .args(["build", "--bin", binary])
        .current_dir(workspace)
        .stdin(Stdio::null())
        .stdout(Stdio::inherit())
        .stderr(Stdio::inherit())
        .kill_on_drop(true)
        .status()
        .await
        .map_err(WatchError::io(format!("cargo build --bin {binary}")))
}
