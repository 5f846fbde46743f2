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

/// A template whose function's environment uses a parameter without a Default.
const NEEDS_A_PARAMETER: &str = "\
Parameters:
  InvoiceApiUrl: {Type: String}
Resources:
  Queue: {Type: AWS::SQS::Queue}
  SendInvoice:
    Type: AWS::Serverless::Function
    Metadata: {BuildProperties: {Binary: send-invoice}}
    Properties:
      Environment: {Variables: {INVOICE_API_URL: !Ref InvoiceApiUrl}}
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
        "sqsafe: send-invoice's INVOICE_API_URL is !Ref InvoiceApiUrl: a parameter without a Default in the \
         template; pass --parameter InvoiceApiUrl=VALUE"
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
