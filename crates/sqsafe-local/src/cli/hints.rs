//! What `up` prints for the user's next steps: the `export` lines for the AWS CLI and `sqsafe dlq`, the form the
//! AWS CLI v1 needs, and a `sqsafe local send` line per consumer that sends its sample event.

use std::path::Path;

use super::send::sample_file;

/// The shell lines that point the AWS CLI v2, the SDKs and `sqsafe dlq` at the local endpoint (moto takes any
/// credentials; these are test values, never real ones).
pub(super) fn export_lines(endpoint: &str) -> [String; 4] {
    [
        format!("export AWS_ENDPOINT_URL={endpoint}"),
        "export AWS_ACCESS_KEY_ID=testing AWS_SECRET_ACCESS_KEY=testing".to_owned(),
        "export AWS_REGION=us-east-1 AWS_DEFAULT_REGION=us-east-1".to_owned(),
        "unset AWS_PROFILE AWS_SESSION_TOKEN".to_owned(),
    ]
}

/// An AWS CLI command that works with v1 too: v1 ignores `AWS_ENDPOINT_URL` (aws-cli 1.45 tried
/// https://queue.amazonaws.com/ with it set), so the endpoint goes on the command line. It shows a DLQ's depth
/// when there is one, which reads nothing off the queues the mappings poll.
pub(super) fn cli_v1_line(endpoint: &str, dlq: Option<&str>) -> String {
    match dlq {
        Some(dlq) => format!(
            "aws --endpoint-url {endpoint} sqs get-queue-attributes --queue-url {dlq} --attribute-names \
             ApproximateNumberOfMessages"
        ),
        None => format!("aws --endpoint-url {endpoint} sqs list-queues"),
    }
}

/// The command that sends `binary`'s sample event (`events/<binary>.json` or `events/<binary>-*.json`), and a note
/// naming the file and its records; `Err` says why there is no sample to send.
pub(super) fn send_hint(
    binary: &str,
    events: &Path,
    consumers: &[&str],
) -> Result<(String, String), String> {
    let sample = sample_file(events, binary, consumers)
        .ok_or_else(|| format!("no events/{binary}.json or events/{binary}-*.json"))?;
    let text =
        std::fs::read_to_string(&sample).map_err(|e| format!("{}: {e}", sample.display()))?;
    let event: serde_json::Value =
        serde_json::from_str(&text).map_err(|e| format!("{}: {e}", sample.display()))?;
    let records = event["Records"].as_array().map_or(0, Vec::len);
    let name = sample
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    Ok((
        format!("sqsafe local send {binary}"),
        format!("events/{name}, {records} record(s)"),
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_v1_line_carries_the_endpoint() {
        assert_eq!(
            cli_v1_line("http://127.0.0.1:5000", None),
            "aws --endpoint-url http://127.0.0.1:5000 sqs list-queues"
        );
        assert!(
            cli_v1_line("http://127.0.0.1:5000", Some("http://127.0.0.1:5000/1/dlq"))
                .starts_with("aws --endpoint-url http://127.0.0.1:5000 sqs get-queue-attributes --queue-url http://127.0.0.1:5000/1/dlq ")
        );
    }
}
