//! `sqsafe local`: its subcommands as a user runs them. `resources` needs moto server (started by `make test`); `up`
//! end to end is in tests/sqsafe-e2e (tests/local_watch.rs) and scripts/project-check.py.

use std::path::PathBuf;
use std::process::Command;

/// This repository's template.yaml.
fn workspace_template() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../template.yaml")
}

#[test]
fn sqsafe_local_help_lists_up_and_resources() {
    let out = Command::new(env!("CARGO_BIN_EXE_sqsafe"))
        .args(["local", "--help"])
        .output()
        .expect("run sqsafe local --help");
    let help = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{help}");
    for command in ["up", "resources"] {
        assert!(
            help.lines()
                .any(|l| l.split_whitespace().next() == Some(command)),
            "sqsafe local --help lists {command}:\n{help}"
        );
    }
}

#[test]
fn local_up_names_a_parameter_the_template_does_not_declare_before_starting_anything() {
    let out = Command::new(env!("CARGO_BIN_EXE_sqsafe"))
        .args(["local", "up", "--template"])
        .arg(workspace_template())
        .args(["--parameter", "NoSuchParameter=1"])
        .output()
        .expect("run sqsafe local up");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    assert_eq!(
        stderr.trim_end(),
        "sqsafe: --parameter NoSuchParameter: the template declares no such parameter"
    );
}

/// A template whose function's environment uses a parameter without a Default (not an API's URL, `*ApiUrl`, which
/// `up` would give a local stand-in).
const NEEDS_A_PARAMETER: &str = "\
Parameters:
  InvoiceTopicArn: {Type: String}
Resources:
  Queue: {Type: AWS::SQS::Queue}
  SendInvoice:
    Type: AWS::Serverless::Function
    Metadata: {BuildProperties: {Binary: send-invoice}}
    Properties:
      Environment: {Variables: {INVOICE_TOPIC_ARN: !Ref InvoiceTopicArn}}
      Events: {Sqs: {Type: SQS, Properties: {Queue: !GetAtt Queue.Arn}}}
";

#[test]
fn local_up_says_in_one_line_which_parameter_to_give_before_starting_anything() {
    let dir = std::env::temp_dir().join(sqsafe_testkit::unique_name("local-up-parameter"));
    std::fs::create_dir_all(&dir).expect("scratch folder");
    std::fs::write(dir.join("template.yaml"), NEEDS_A_PARAMETER).expect("template");
    let out = Command::new(env!("CARGO_BIN_EXE_sqsafe"))
        // As in a team's project: the template found from the current folder, not from this crate.
        .current_dir(&dir)
        .env_remove("CARGO_MANIFEST_DIR")
        .env_remove("SQSAFE_PROJECT_ROOT")
        .args(["local", "up", "--watch"])
        .output()
        .expect("run sqsafe local up");
    let _ = std::fs::remove_dir_all(&dir);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    assert_eq!(
        stderr.trim_end(),
        "sqsafe: send-invoice's INVOICE_TOPIC_ARN is !Ref InvoiceTopicArn: a parameter without a Default in the \
         template; pass --parameter InvoiceTopicArn=VALUE"
    );
    assert!(
        out.stdout.is_empty(),
        "nothing built or started: {}",
        String::from_utf8_lossy(&out.stdout)
    );
}

/// `sqsafe local resources` on this repository's template.yaml (what `make local-resources` runs), as a user runs it.
fn resources_command(endpoint: &str) -> std::process::Command {
    resources_command_for(&workspace_template(), endpoint)
}

/// `sqsafe local resources` on `template`, as a user runs it.
fn resources_command_for(template: &std::path::Path, endpoint: &str) -> std::process::Command {
    let mut command = std::process::Command::new(env!("CARGO_BIN_EXE_sqsafe"));
    command
        .args(["local", "resources", "--template"])
        .arg(template)
        .env("AWS_ENDPOINT_URL", endpoint)
        .env("AWS_ACCESS_KEY_ID", "testing")
        .env("AWS_SECRET_ACCESS_KEY", "testing")
        .env("AWS_REGION", "us-east-1");
    command
}

#[test]
fn local_resources_creates_the_template_names_and_can_run_twice() {
    let endpoint = sqsafe_testkit::endpoint();
    for run in ["first", "second"] {
        let out = resources_command(&endpoint)
            .output()
            .expect("run sqsafe local resources");
        let stdout = String::from_utf8_lossy(&out.stdout);
        assert!(
            out.status.success(),
            "{run} run: {stdout}{}",
            String::from_utf8_lossy(&out.stderr)
        );
        for line in [
            "table  idempotency  (IdempotencyTable)",
            "table  ledger  (LedgerTable)",
            "table  outbox  (OutboxTable)",
        ] {
            assert!(stdout.contains(line), "{run} run lacks {line:?}:\n{stdout}");
        }
        for (queue, logical) in [
            ("/charge-payment", "ChargePaymentQueue"),
            ("/charge-payment-dlq", "ChargePaymentDeadLetterQueue"),
            ("/apply-ledger.fifo", "ApplyLedgerQueue"),
        ] {
            assert!(
                stdout
                    .lines()
                    .any(|l| l.starts_with("queue  ")
                        && l.ends_with(&format!("{queue}  ({logical})"))),
                "{run} run lacks the queue {queue}:\n{stdout}"
            );
        }
    }
}

#[test]
fn local_resources_refuses_an_endpoint_that_is_not_local() {
    let out = resources_command("https://dynamodb.us-east-1.amazonaws.com")
        .output()
        .expect("run sqsafe local resources");
    assert_eq!(out.status.code(), Some(1));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("AWS_ENDPOINT_URL must point at the local moto server"),
        "{stderr}"
    );
}

#[test]
fn local_resources_creates_the_queues_of_a_nested_application() {
    // sqsafe-local's fixture: the consumers' queues are in nested applications (sqsafe/consumer.yaml and its FIFO
    // variant), found from the parent's folder.
    let template = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../sqsafe-local/tests/fixtures/nested/template.yaml");
    let out = resources_command_for(&template, &sqsafe_testkit::endpoint())
        .output()
        .expect("run sqsafe local resources");
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{stdout}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    for (queue, logical) in [
        ("/send-invoice", "SendInvoiceQueue"),
        ("/send-invoice-dlq", "SendInvoiceDeadLetterQueue"),
        ("/apply-ledger.fifo", "ApplyLedgerQueue"),
        ("/apply-ledger-dlq.fifo", "ApplyLedgerDeadLetterQueue"),
    ] {
        assert!(
            stdout
                .lines()
                .any(|l| l.starts_with("queue  ") && l.ends_with(&format!("{queue}  ({logical})"))),
            "lacks the queue {queue}:\n{stdout}"
        );
    }
}

/// A project folder with a template and `events/`, and, when `endpoint` is given, the state file `sqsafe local up`
/// writes while it runs (target/sqsafe-local/pipeline.json) naming it and `consumers` (name, queue URL, FIFO).
fn send_project(name: &str, endpoint: Option<&str>, consumers: &[(&str, &str, bool)]) -> PathBuf {
    let dir = std::env::temp_dir().join(sqsafe_testkit::unique_name(name));
    std::fs::create_dir_all(dir.join("events")).expect("events folder");
    std::fs::write(dir.join("template.yaml"), "Resources: {}\n").expect("template");
    if let Some(endpoint) = endpoint {
        let consumers: serde_json::Map<String, serde_json::Value> = consumers
            .iter()
            .map(|(name, url, fifo)| {
                (
                    (*name).to_owned(),
                    serde_json::json!({"url": url, "fifo": fifo, "content_based_deduplication": false}),
                )
            })
            .collect();
        let state = serde_json::json!({
            "pid": 1,
            "endpoint": endpoint,
            "events": dir.join("events"),
            "consumers": consumers,
        });
        std::fs::create_dir_all(dir.join("target/sqsafe-local")).expect("state folder");
        std::fs::write(
            dir.join("target/sqsafe-local/pipeline.json"),
            state.to_string(),
        )
        .expect("state file");
    }
    dir
}

/// `sqsafe local send ARGS` in `project`, as a user runs it: no AWS variables, the project found from the folder.
fn local_send(project: &std::path::Path, args: &[&str]) -> std::process::Output {
    Command::new(env!("CARGO_BIN_EXE_sqsafe"))
        .current_dir(project)
        .env_remove("CARGO_MANIFEST_DIR")
        .env_remove("CARGO_TARGET_DIR")
        .env_remove("SQSAFE_PROJECT_ROOT")
        .env_remove("AWS_ENDPOINT_URL")
        .args(["local", "send"])
        .args(args)
        .output()
        .expect("run sqsafe local send")
}

/// An SQS event's record, as the samples in events/ hold them.
fn sample_record(body: &str, correlation: &str, fifo: Option<(&str, &str)>) -> serde_json::Value {
    let mut attributes = serde_json::json!({"ApproximateReceiveCount": "1"});
    if let Some((group, dedup)) = fifo {
        attributes["MessageGroupId"] = group.into();
        attributes["MessageDeduplicationId"] = dedup.into();
    }
    serde_json::json!({
        "messageId": "m", "receiptHandle": "r", "body": body, "attributes": attributes,
        "messageAttributes": {"correlationId": {"stringValue": correlation, "dataType": "String"}},
        "eventSource": "aws:sqs", "eventSourceARN": "arn:aws:sqs:us-east-1:123456789012:q", "awsRegion": "us-east-1",
    })
}

#[tokio::test]
async fn local_send_sends_every_record_of_the_sample_with_its_attributes_and_fifo_group() {
    let sqs = sqsafe_testkit::sqs().await;
    let standard = sqsafe_testkit::create_queue(&sqs, "send-standard", false).await;
    let fifo = sqsafe_testkit::create_queue(&sqs, "send-fifo", true).await;
    let project = send_project(
        "local-send",
        Some(&sqsafe_testkit::endpoint()),
        &[("ship-order", &standard, false), ("ship", &fifo, true)],
    );
    let events = project.join("events");
    let write = |name: &str, records: Vec<serde_json::Value>| {
        std::fs::write(
            events.join(name),
            serde_json::json!({"Records": records}).to_string(),
        )
        .expect("sample");
    };
    write(
        "ship-order.json",
        vec![
            sample_record("o-1", "corr-1", None),
            sample_record("o-2", "corr-2", None),
        ],
    );
    // `ship`'s sample, beside `ship-order`'s (whose name starts with `ship-`).
    write(
        "ship-fifo.json",
        vec![
            sample_record("s-1", "corr-s1", Some(("acct-A", "d-1"))),
            sample_record("s-2", "corr-s2", Some(("acct-B", "d-2"))),
        ],
    );

    let out = local_send(&project, &["ship-order", "--times", "2"]);
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{stdout}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        stdout.starts_with("sent 2 record(s) ×2 of ")
            && stdout.contains("ship-order.json to ship-order ("),
        "{stdout}"
    );
    let mut got: Vec<(String, String)> = received(&sqs, &standard).await;
    got.sort();
    assert_eq!(
        got,
        [
            ("o-1", "corr-1"),
            ("o-1", "corr-1"),
            ("o-2", "corr-2"),
            ("o-2", "corr-2")
        ]
        .map(|(b, c)| (b.to_owned(), c.to_owned())),
        "a standard queue delivers each copy"
    );

    let out = local_send(&project, &["ship", "--times", "2"]);
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{stdout}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(stdout.contains("ship-fifo.json to ship ("), "{stdout}");
    assert!(
        stdout.contains("a FIFO queue delivers one of the copies with the same deduplication id"),
        "{stdout}"
    );
    let groups: Vec<String> = sqs
        .receive_message()
        .queue_url(&fifo)
        .max_number_of_messages(10)
        .message_system_attribute_names(
            aws_sdk_sqs::types::MessageSystemAttributeName::MessageGroupId,
        )
        .send()
        .await
        .expect("receive")
        .messages()
        .iter()
        .map(|m| {
            let group = m
                .attributes()
                .and_then(|a| {
                    a.get(&aws_sdk_sqs::types::MessageSystemAttributeName::MessageGroupId)
                })
                .cloned()
                .unwrap_or_default();
            format!("{}:{group}", m.body().unwrap_or_default())
        })
        .collect();
    assert_eq!(
        groups,
        ["s-1:acct-A", "s-2:acct-B"],
        "one copy each, in order, in its group"
    );
    let _ = std::fs::remove_dir_all(&project);
}

/// Every message in `url` (body, correlationId), deleted.
async fn received(sqs: &aws_sdk_sqs::Client, url: &str) -> Vec<(String, String)> {
    let mut out = Vec::new();
    loop {
        let got = sqs
            .receive_message()
            .queue_url(url)
            .max_number_of_messages(10)
            .message_attribute_names("All")
            .send()
            .await
            .expect("receive");
        if got.messages().is_empty() {
            return out;
        }
        for m in got.messages() {
            out.push((
                m.body().unwrap_or_default().to_owned(),
                sqsafe_testkit::message_attribute(m, "correlationId").unwrap_or_default(),
            ));
            sqs.delete_message()
                .queue_url(url)
                .receipt_handle(m.receipt_handle().unwrap_or_default())
                .send()
                .await
                .expect("delete");
        }
    }
}

#[test]
fn local_send_says_what_is_missing_in_one_line() {
    let stderr = |out: std::process::Output| {
        assert_eq!(out.status.code(), Some(1), "{out:?}");
        String::from_utf8_lossy(&out.stderr).trim_end().to_owned()
    };
    let none = send_project("local-send-none", None, &[]);
    let said = stderr(local_send(&none, &["ship-order"]));
    assert!(
        said.starts_with("sqsafe: no local pipeline is running for this project (")
            && said.ends_with(
                "target/sqsafe-local/pipeline.json is missing): start one with `sqsafe local up --watch` (make \
                 local-watch) in another terminal"
            ),
        "{said}"
    );
    let _ = std::fs::remove_dir_all(&none);

    // A state file left by an `up` killed with SIGKILL: its endpoint no longer answers.
    let closed = format!(
        "http://127.0.0.1:{}",
        sqsafe_aws::free_port().expect("port")
    );
    let stale = send_project(
        "local-send-stale",
        Some(&closed),
        &[
            ("ship-order", "http://q", false),
            ("apply-ledger", "http://q.fifo", true),
        ],
    );
    let events = stale.join("events");
    std::fs::write(
        events.join("ship-order.json"),
        r#"{"Records": [{"body": "x"}]}"#,
    )
    .expect("sample");
    std::fs::write(
        events.join("stream.json"),
        r#"{"Records": [{"eventSource": "aws:dynamodb"}]}"#,
    )
    .expect("not sqs");
    let said = stderr(local_send(&stale, &["ship-order"]));
    assert!(
        said.starts_with(&format!(
            "sqsafe: no local pipeline answers at {closed} (named by "
        )),
        "{said}"
    );
    assert_eq!(
        stderr(local_send(&stale, &["ship"])),
        "sqsafe: no consumer ship in the local pipeline; its consumers: apply-ledger, ship-order"
    );
    let said = stderr(local_send(&stale, &["apply-ledger"]));
    assert!(
        said.starts_with("sqsafe: no sample event for apply-ledger: neither "),
        "{said}"
    );
    let said = stderr(local_send(&stale, &["ship-order", "events/missing.json"]));
    assert!(
        said.starts_with("sqsafe: events/missing.json: No such file"),
        "{said}"
    );
    assert_eq!(
        stderr(local_send(&stale, &["ship-order", "events/stream.json"])),
        "sqsafe: events/stream.json is not an SQS event: record 1: its eventSource is \"aws:dynamodb\", not \"aws:sqs\""
    );
    let _ = std::fs::remove_dir_all(&stale);
}
