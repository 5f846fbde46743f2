//! Without a region or credentials, `sqsafe dlq` says in one line what to set, before any call, instead of the SDK's
//! error chain. The instance metadata service is disabled and the endpoint is a closed loopback port, so nothing
//! leaves the machine whatever happens.

use std::process::Command;

fn sqsafe_without_aws(region: Option<&str>) -> (i32, String) {
    let mut command = Command::new(env!("CARGO_BIN_EXE_sqsafe"));
    command
        .env_clear()
        .env("PATH", std::env::var("PATH").unwrap_or_default())
        .env("HOME", std::env::temp_dir().join("sqsafe-setup-test-home"))
        .env("AWS_EC2_METADATA_DISABLED", "true")
        .env("AWS_CONFIG_FILE", "/nonexistent/sqsafe-test/config")
        .env(
            "AWS_SHARED_CREDENTIALS_FILE",
            "/nonexistent/sqsafe-test/credentials",
        )
        .env("AWS_ENDPOINT_URL", "http://127.0.0.1:9")
        .args([
            "dlq",
            "inspect",
            "--queue",
            "http://127.0.0.1:9/123456789012/orders-dlq",
        ]);
    if let Some(region) = region {
        command.env("AWS_REGION", region);
    }
    let output = command.output().expect("the sqsafe binary runs");
    (
        output.status.code().unwrap_or(-1),
        String::from_utf8(output.stderr).expect("UTF-8"),
    )
}

#[test]
fn without_credentials_one_line_says_what_to_set() {
    let (code, stderr) = sqsafe_without_aws(Some("us-east-1"));
    assert_eq!(code, 2, "{stderr}");
    assert_eq!(stderr.lines().count(), 1, "one line: {stderr}");
    assert!(
        stderr.starts_with("sqsafe: no AWS credentials: set AWS_PROFILE"),
        "{stderr}"
    );
    assert!(
        stderr.contains("AWS_ENDPOINT_URL"),
        "the local pipeline's way too: {stderr}"
    );
    assert!(
        !stderr.contains("Dispatch") && !stderr.contains("IMDS"),
        "{stderr}"
    );
}

#[test]
fn without_a_region_one_line_says_what_to_set() {
    let (code, stderr) = sqsafe_without_aws(None);
    assert_eq!(code, 2, "{stderr}");
    assert_eq!(stderr.lines().count(), 1, "one line: {stderr}");
    assert!(stderr.starts_with("sqsafe: no AWS region: set"), "{stderr}");
}
