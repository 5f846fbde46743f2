//! What `up` prints for the user's next steps: the `export` lines for the AWS CLI and `sqsafe dlq`, and a ready
//! command per function that sends its sample event.

use std::path::{Path, PathBuf};

/// The shell lines that point the AWS CLI, the SDKs and `sqsafe dlq` at the local endpoint (moto takes any
/// credentials; these are test values, never real ones).
pub(super) fn export_lines(endpoint: &str) -> [String; 4] {
    [
        format!("export AWS_ENDPOINT_URL={endpoint}"),
        "export AWS_ACCESS_KEY_ID=testing AWS_SECRET_ACCESS_KEY=testing".to_owned(),
        "export AWS_REGION=us-east-1 AWS_DEFAULT_REGION=us-east-1".to_owned(),
        "unset AWS_PROFILE AWS_SESSION_TOKEN".to_owned(),
    ]
}

/// A ready command that sends the first record of the function's first sample event (`events/<binary>*.json`), with
/// its correlation id and, on a FIFO queue, its message group. The body is written beside the run's logs. Relative
/// paths in the command are relative to the workspace root.
pub(super) fn send_hint(
    endpoint: &str,
    queue_url: &str,
    binary: &str,
    events: &Path,
    log_dir: &Path,
) -> Result<Option<String>, String> {
    let mut samples: Vec<PathBuf> = std::fs::read_dir(events)
        .map_err(|e| format!("{}: {e}", events.display()))?
        .filter_map(|entry| entry.ok().map(|e| e.path()))
        .filter(|p| {
            p.extension().is_some_and(|x| x == "json")
                && p.file_name()
                    .and_then(|n| n.to_str())
                    .is_some_and(|n| n.starts_with(binary))
        })
        .collect();
    samples.sort();
    let Some(sample) = samples.first() else {
        return Ok(None);
    };
    let text = std::fs::read_to_string(sample).map_err(|e| format!("{}: {e}", sample.display()))?;
    let event: serde_json::Value =
        serde_json::from_str(&text).map_err(|e| format!("{}: {e}", sample.display()))?;
    let record = &event["Records"][0];
    let body = record["body"]
        .as_str()
        .ok_or("its first record has no body")?;
    std::fs::create_dir_all(log_dir).map_err(|e| e.to_string())?;
    let body_file = log_dir.join(format!("sample-{binary}.json"));
    std::fs::write(&body_file, body).map_err(|e| e.to_string())?;
    let mut command = format!(
        ".venv/bin/python scripts/send-message.py --endpoint {endpoint} --queue {queue_url} --body {}",
        body_file.display()
    );
    if let Some(group) = record["attributes"]["MessageGroupId"].as_str() {
        command.push_str(&format!(" --group {group}"));
    }
    if let Some(id) = record["messageAttributes"]["correlationId"]["stringValue"].as_str() {
        command.push_str(&format!(" --correlation-id {id}"));
    }
    Ok(Some(command))
}
