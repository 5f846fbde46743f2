//! `sqsafe local venv` and `sqsafe local moto`: the project's pinned Python tools and a local AWS for its tests, so
//! that a project carries no scripts of its own for them.
//!
//! - `venv` creates (or brings up to date) the project's `.venv` with the tools sqsafe pins: moto server, SAM CLI,
//!   cfn-lint, cargo-lambda and its zig ([`REQUIREMENTS`], sqsafe's own `requirements/test.txt`, compiled in). It
//!   does nothing when `.venv` already holds exactly these pins for this Python.
//! - `moto` runs moto server (from `.venv`, through sqsafe's launcher: see [`crate::moto`]) on a free loopback port:
//!   `sqsafe local moto -- cargo test` runs the command against it, with the environment that points AWS clients at
//!   it, then stops it and exits as the command did; `sqsafe local moto` alone runs it until Ctrl-C or SIGTERM and
//!   prints the lines to export in another terminal.

use std::path::{Path, PathBuf};
use std::process::Stdio;

use tokio::process::Command;

use super::hints::export_lines;
use super::up::StopSignal;
use crate::moto::{MotoServer, venv_bin};
use crate::stack::project_dir;

/// The Python tools a project's `.venv` holds, each pinned (sqsafe's `requirements/test.txt`).
pub(super) const REQUIREMENTS: &str = include_str!("../../../../requirements/test.txt");
/// The pinned `uv` that installs them (sqsafe's `requirements/uv.txt`).
pub(super) const UV_REQUIREMENTS: &str = include_str!("../../../../requirements/uv.txt");

/// Where `.venv` records what it was made from: a `.venv` made from the same pins for the same Python is kept as it is.
const STAMP: &str = ".requirements.sha256";

/// What a `.venv` made for `python_version` records: the SHA-256, in hex, of both requirement files and the Python
/// version (`cat test.txt uv.txt; echo python=X.Y.Z`), with a newline.
fn stamp_text(python_version: &str) -> String {
    use sha2::{Digest, Sha256};
    let mut hash = Sha256::new();
    hash.update(REQUIREMENTS);
    hash.update(UV_REQUIREMENTS);
    hash.update(format!("python={python_version}\n"));
    let hex: String = hash.finalize().iter().map(|b| format!("{b:02x}")).collect();
    format!("{hex}\n")
}

/// `sqsafe local venv`: the project's `.venv` with the pinned tools.
pub(super) async fn venv() -> Result<(), String> {
    let venv = project_dir().join(".venv");
    let python = std::env::var("PYTHON").unwrap_or_else(|_| "python3".to_owned());
    let version = python_version(Path::new(&python)).await.map_err(|e| {
        format!("{python}: {e} (sqsafe local venv needs Python 3.10 or later as python3, or PYTHON=/path/to/python)")
    })?;
    let want = stamp_text(&version);
    let stamp = venv.join(STAMP);
    let venv_python = venv.join("bin").join("python");
    let have = python_version(&venv_python).await.ok();
    if have.as_deref() == Some(version.as_str())
        && std::fs::read_to_string(&stamp).is_ok_and(|text| text == want)
    {
        println!("{}: the pinned tools are installed", venv.display());
        return Ok(());
    }
    if have.as_deref() != Some(version.as_str()) {
        println!("creating {} (Python {version})", venv.display());
        if venv.exists() {
            std::fs::remove_dir_all(&venv)
                .map_err(|e| format!("remove {}: {e}", venv.display()))?;
        }
        run(Command::new(&python).arg("-m").arg("venv").arg(&venv)).await?;
    }
    let _ = std::fs::remove_file(&stamp);
    let started = std::time::Instant::now();
    println!(
        "installing the pinned tools into {} (moto, SAM CLI, cfn-lint, cargo-lambda: a minute or two the first time)",
        venv.display()
    );
    let files = write_requirements(&venv)?;
    run(Command::new(&venv_python)
        .args([
            "-m",
            "pip",
            "install",
            "--quiet",
            "--disable-pip-version-check",
            "--no-input",
            "-r",
        ])
        .arg(&files[0]))
    .await?;
    run(Command::new(venv.join("bin").join("uv"))
        .args(["pip", "install", "--quiet", "--python"])
        .arg(&venv_python)
        .arg("-r")
        .arg(&files[1])
        .env("UV_LINK_MODE", "copy"))
    .await?;
    std::fs::write(&stamp, want).map_err(|e| format!("write {}: {e}", stamp.display()))?;
    println!("done in {:.0} s", started.elapsed().as_secs_f64());
    Ok(())
}

/// The requirement files, written into the venv for pip and uv to read: `[uv.txt, test.txt]`.
fn write_requirements(venv: &Path) -> Result<[PathBuf; 2], String> {
    let dir = venv.join("sqsafe-requirements");
    std::fs::create_dir_all(&dir).map_err(|e| format!("create {}: {e}", dir.display()))?;
    let uv = dir.join("uv.txt");
    let test = dir.join("test.txt");
    for (path, text) in [(&uv, UV_REQUIREMENTS), (&test, REQUIREMENTS)] {
        std::fs::write(path, text).map_err(|e| format!("write {}: {e}", path.display()))?;
    }
    Ok([uv, test])
}

/// `X.Y.Z` of the Python at `python`.
async fn python_version(python: &Path) -> Result<String, String> {
    let output = Command::new(python)
        .args(["-c", "import sys; print(sys.version.split()[0])"])
        .stdin(Stdio::null())
        .output()
        .await
        .map_err(|e| e.to_string())?;
    if !output.status.success() {
        return Err(format!("exited with {}", output.status));
    }
    Ok(String::from_utf8_lossy(&output.stdout).trim().to_owned())
}

/// Runs `command` with the terminal's output; an error names it and how it ended.
async fn run(command: &mut Command) -> Result<(), String> {
    let shown = format!("{:?}", command.as_std());
    let status = command
        .stdin(Stdio::null())
        .status()
        .await
        .map_err(|e| format!("{shown}: {e}"))?;
    if status.success() {
        Ok(())
    } else {
        Err(format!("{shown} failed ({status})"))
    }
}

/// The environment that points AWS clients (the SDK, the AWS CLI v2, sqsafe's tests) at moto at `endpoint`: set, and
/// removed.
pub(super) fn moto_env(endpoint: &str) -> ([(&'static str, String); 6], [&'static str; 3]) {
    (
        [
            ("AWS_ENDPOINT_URL", endpoint.to_owned()),
            ("SQSAFE_TEST_ENDPOINT", endpoint.to_owned()),
            ("AWS_ACCESS_KEY_ID", "testing".to_owned()),
            ("AWS_SECRET_ACCESS_KEY", "testing".to_owned()),
            ("AWS_REGION", "us-east-1".to_owned()),
            ("AWS_DEFAULT_REGION", "us-east-1".to_owned()),
        ],
        ["AWS_PROFILE", "AWS_DEFAULT_PROFILE", "AWS_SESSION_TOKEN"],
    )
}

/// `sqsafe local moto [-- COMMAND...]`.
pub(super) async fn moto(command: &[String]) -> Result<(), String> {
    let mut stop = StopSignal::new()?;
    let moto = MotoServer::start(&venv_bin())
        .await
        .map_err(|e| e.to_string())?;
    let endpoint = moto.endpoint();
    let Some((program, args)) = command.split_first() else {
        println!(
            "moto server      {endpoint}   (Ctrl-C or SIGTERM stops it)\n\nExport in another terminal:"
        );
        for line in export_lines(&endpoint) {
            println!("  {line}");
        }
        let stopped = stop.recv().await;
        moto.shutdown().await;
        return stopped;
    };
    let (set, unset) = moto_env(&endpoint);
    let mut child = Command::new(program);
    child.args(args).envs(set);
    for name in unset {
        child.env_remove(name);
    }
    let mut child = child.spawn().map_err(|e| format!("{program}: {e}"))?;
    let ended = tokio::select! {
        status = child.wait() => status.map_err(|e| format!("{program}: {e}")),
        stopped = stop.recv() => {
            stop_child(&mut child).await;
            stopped.and(Err(format!("{program}: stopped by a signal")))
        }
    };
    moto.shutdown().await;
    let status = ended?;
    if status.success() {
        Ok(())
    } else {
        Err(format!(
            "{} failed ({status}), against moto server at {endpoint}",
            command.join(" ")
        ))
    }
}

/// How long the command is given to end after SIGTERM before the SIGKILL.
const STOP_GRACE: std::time::Duration = std::time::Duration::from_secs(10);

/// Ctrl-C or SIGTERM while the command runs: the command gets SIGTERM (a Ctrl-C in the terminal reached it already)
/// and [`STOP_GRACE`] to end, so that its own cleanup runs (a test suite stops what it started in the background);
/// then SIGKILL. Moto stops after it either way.
async fn stop_child(child: &mut tokio::process::Child) {
    if let Some(pid) = child.id() {
        let _ = Command::new("kill")
            .args(["-s", "TERM", "--", &pid.to_string()])
            .stderr(Stdio::null())
            .status()
            .await;
        if tokio::time::timeout(STOP_GRACE, child.wait()).await.is_ok() {
            return;
        }
    }
    let _ = child.kill().await;
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_pins_are_sqsafe_s_own_and_the_stamp_names_the_python() {
        for pin in [
            "moto[server]==",
            "aws-sam-cli==",
            "cfn-lint==",
            "cargo-lambda==",
        ] {
            assert!(REQUIREMENTS.contains(pin), "{pin} is pinned");
        }
        assert!(UV_REQUIREMENTS.contains("uv=="), "uv is pinned");
        assert_ne!(stamp_text("3.11.7"), stamp_text("3.12.1"));
        assert_eq!(stamp_text("3.11.7").len(), 65, "hex SHA-256 and a newline");
    }

    #[test]
    fn the_moto_env_points_every_client_at_the_endpoint_and_drops_profiles() {
        let (set, unset) = moto_env("http://127.0.0.1:5");
        let get = |name: &str| {
            set.iter()
                .find(|(n, _)| *n == name)
                .map(|(_, v)| v.as_str())
        };
        assert_eq!(get("AWS_ENDPOINT_URL"), Some("http://127.0.0.1:5"));
        assert_eq!(get("SQSAFE_TEST_ENDPOINT"), Some("http://127.0.0.1:5"));
        assert_eq!(get("AWS_REGION"), Some("us-east-1"));
        assert!(unset.contains(&"AWS_PROFILE") && unset.contains(&"AWS_SESSION_TOKEN"));
    }
}
