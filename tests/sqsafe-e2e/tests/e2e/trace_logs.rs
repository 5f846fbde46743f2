//! No message body in the logs at TRACE: charge-payment and the outbox relay as processes under the Lambda Runtime
//! API emulator, with `AWS_LAMBDA_LOG_LEVEL=TRACE`, through an HTTP effect (a payment charged), a DLQ send (a poison
//! message) and a relay publish (an outbox event sent to its queue), against moto and the local payments API. Every
//! body carries a value that exists nowhere else; none may reach a log line.
//!
//! The binaries are the dev profile's by default (what `make test` has built). Logging is the same in a release
//! binary (no `tracing` max-level feature is set anywhere, which this test checks through `cargo tree`);
//! `SQSAFE_TRACE_LOGS_PROFILE=release` runs the release binaries instead (built here, minutes on 2 cores).

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use serde_json::{Value, json};
use sqsafe_e2e::harness::depth;
use sqsafe_e2e::workspace_root;
use sqsafe_local::lambda::{FunctionInstance, FunctionSpec, INIT_TIMEOUT};
use sqsafe_test_servers::PaymentsApi;
use sqsafe_testkit::{create_queue, create_table, endpoint, unique_name};

const TIMEOUT: Duration = Duration::from_secs(30);

fn aws_env() -> Vec<(String, String)> {
    [
        ("AWS_ENDPOINT_URL", endpoint()),
        ("AWS_REGION", "us-east-1".into()),
        ("AWS_ACCESS_KEY_ID", "testing".into()),
        ("AWS_SECRET_ACCESS_KEY", "testing".into()),
        ("AWS_LAMBDA_LOG_LEVEL", "TRACE".into()),
        ("AWS_LAMBDA_LOG_FORMAT", "JSON".into()),
    ]
    .into_iter()
    .map(|(k, v)| (k.to_owned(), v))
    .collect()
}

/// Builds charge-payment and the relay in `profile` and copies them aside (another test's build may overwrite
/// target/debug meanwhile).
fn build(profile: &str) -> PathBuf {
    // make test's debug builds, built before the tests run (sqsafe_e2e::harness::PREBUILT_BINARIES).
    if profile == "dev"
        && let Some(dir) = sqsafe_e2e::harness::prebuilt_folder(
            sqsafe_e2e::harness::PREBUILT_BINARIES,
            &["charge-payment", "outbox-relay"],
        )
    {
        return dir;
    }
    let root = workspace_root();
    let mut command = Command::new(env!("CARGO"));
    command.current_dir(&root).args([
        "build",
        "-q",
        "-p",
        "charge-payment",
        "-p",
        "outbox-relay",
        "--bin",
        "charge-payment",
        "--bin",
        "outbox-relay",
    ]);
    if profile == "release" {
        command.arg("--release");
    }
    let output = command.output().expect("run cargo build");
    assert!(
        output.status.success(),
        "cargo build failed:\n{}",
        String::from_utf8_lossy(&output.stderr)
    );
    let built = root.join("target").join(if profile == "release" {
        "release"
    } else {
        "debug"
    });
    let dir = root.join(format!("target/trace-logs-bin/{profile}"));
    std::fs::create_dir_all(&dir).expect("binary folder");
    for name in ["charge-payment", "outbox-relay"] {
        std::fs::copy(built.join(name), dir.join(name)).expect("copy the binary");
    }
    dir
}

fn sqs_record(message_id: &str, body: &str, queue_arn: &str) -> Value {
    json!({
        "messageId": message_id,
        "receiptHandle": format!("rh-{message_id}"),
        "body": body,
        "attributes": {
            "ApproximateReceiveCount": "1",
            "SentTimestamp": "1796025600000",
            "SenderId": "AIDAEXAMPLE",
            "ApproximateFirstReceiveTimestamp": "1796025600050"
        },
        "messageAttributes": {},
        "md5OfBody": "00000000000000000000000000000000",
        "eventSource": "aws:sqs",
        "eventSourceARN": queue_arn,
        "awsRegion": "us-east-1"
    })
}

fn logs(path: &Path) -> String {
    std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

#[test]
fn no_tracing_max_level_feature_makes_release_logs_differ() {
    let output = Command::new(env!("CARGO"))
        .current_dir(workspace_root())
        .args([
            "tree",
            "-q",
            "-e",
            "features",
            "-i",
            "tracing",
            "-p",
            "charge-payment",
            "-p",
            "outbox-relay",
        ])
        .output()
        .expect("cargo tree");
    assert!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    let tree = String::from_utf8_lossy(&output.stdout);
    assert!(tree.contains("tracing feature"), "{tree}");
    assert!(
        !tree.contains("max_level"),
        "a tracing max-level feature would make a release binary log otherwise than the debug one this test runs:\n{tree}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn at_trace_no_body_value_reaches_the_logs() {
    let profile = std::env::var("SQSAFE_TRACE_LOGS_PROFILE").unwrap_or_else(|_| "dev".into());
    let seed = fastrand::u64(..);
    println!("seed {seed:#x}; profile {profile}");
    let binaries = tokio::task::spawn_blocking(move || build(&profile))
        .await
        .expect("build");
    // Values that exist only in bodies.
    let customer = format!("cus-SECRET-{seed:x}");
    let card = format!("card-SECRET-{seed:x}");
    let relayed_customer = format!("cus-RELAYED-{seed:x}");

    let dynamodb = sqsafe_testkit::dynamodb(&sqsafe_testkit::RequestCounter::default()).await;
    let sqs = sqsafe_testkit::sqs().await;
    let table = unique_name("idem");
    create_table(&dynamodb, &table, "pk", None).await;
    let outbox = unique_name("outbox");
    create_table(&dynamodb, &outbox, "pk", Some("sk")).await;
    let queue = create_queue(&sqs, "charge-payment", false).await;
    let dlq = create_queue(&sqs, "charge-payment-dlq", false).await;
    let destination = create_queue(&sqs, "relayed", false).await;
    let failures = create_queue(&sqs, "relay-failures", false).await;
    let payments = PaymentsApi::builder()
        .keys_in_new_table(dynamodb.clone())
        .await
        .start("127.0.0.1:0".parse().expect("addr"))
        .await
        .expect("payments API");
    let log_dir = workspace_root().join(format!("target/trace-logs/{seed:x}"));

    // charge-payment: one payment (an HTTP effect) and one poison message (a DLQ send).
    let mut spec = FunctionSpec::new("charge-payment", binaries.join("charge-payment"), &log_dir)
        .with_timeout(TIMEOUT)
        .with_init_timeout(INIT_TIMEOUT);
    spec.env = aws_env();
    spec.env.extend([
        ("IDEMPOTENCY_TABLE".to_owned(), table),
        ("PAYMENTS_API_URL".to_owned(), payments.base_url()),
        ("DLQ_URL".to_owned(), dlq.clone()),
        ("QUEUE_URL".to_owned(), queue),
    ]);
    let mut charge = FunctionInstance::start(spec, 0)
        .await
        .expect("charge-payment");
    let arn = "arn:aws:sqs:us-east-1:123456789012:charge-payment";
    let payment = json!({
        "type": "PaymentRequested", "version": "1", "payment_id": format!("p-{seed:x}"), "tenant": "acme",
        "amount": 1250, "currency": "EUR", "customer_id": customer,
    });
    let poison = json!({
        "type": "PaymentRequested", "version": "1", "payment_id": format!("p-poison-{seed:x}"), "tenant": "acme",
        "amount": "twelve", "currency": "EUR", "customer_id": "cus-1", "card": card,
    });
    let answer = charge
        .invoke(json!({ "Records": [
            sqs_record("m-1", &payment.to_string(), arn),
            sqs_record("m-2", &poison.to_string(), arn),
        ]}))
        .await
        .expect("charge-payment answered");
    assert_eq!(answer["batchItemFailures"], json!([]), "{answer}");
    assert_eq!(payments.charges().len(), 1, "the HTTP effect happened");
    assert_eq!(
        depth(&sqs, &dlq).await,
        1,
        "the poison message was sent to the DLQ"
    );
    let charge_log = charge.log_path().to_owned();
    charge.shutdown().await;

    // The relay: one outbox event published to its queue.
    let mut spec = FunctionSpec::new("outbox-relay", binaries.join("outbox-relay"), &log_dir)
        .with_timeout(TIMEOUT)
        .with_init_timeout(INIT_TIMEOUT);
    spec.env = aws_env();
    spec.env.extend([
        ("OUTBOX_TABLE".to_owned(), outbox),
        ("OUTBOX_DESTINATIONS".to_owned(), destination.clone()),
        ("FAILURE_QUEUE_URL".to_owned(), failures),
    ]);
    let mut relay = FunctionInstance::start(spec, 0).await.expect("relay");
    let mut stream: Value = serde_json::from_str(
        &std::fs::read_to_string(workspace_root().join("events/outbox-relay-stream.json"))
            .expect("sample stream event"),
    )
    .expect("JSON");
    let records = stream["Records"].as_array_mut().expect("records");
    records.truncate(1);
    let image = &mut records[0]["dynamodb"]["NewImage"];
    image["destination"]["S"] = json!(destination);
    image["payload"]["S"] = json!(
        json!({
            "type": "PaymentRequested", "version": "1", "payment_id": "p-2001", "tenant": "acme",
            "amount": 4200, "currency": "EUR", "customer_id": relayed_customer,
        })
        .to_string()
    );
    let answer = relay.invoke(stream).await.expect("the relay answered");
    assert_eq!(answer["batchItemFailures"], json!([]), "{answer}");
    assert_eq!(depth(&sqs, &destination).await, 1, "the relay published");
    let relay_log = relay.log_path().to_owned();
    relay.shutdown().await;

    for (name, path) in [
        ("charge-payment", &charge_log),
        ("outbox-relay", &relay_log),
    ] {
        let text = logs(path);
        let traced = text
            .lines()
            .filter(|l| l.contains(r#""level":"TRACE""#) || l.contains(r#""level":"DEBUG""#))
            .count();
        assert!(
            traced > 0,
            "{name} ran at TRACE: its DEBUG and TRACE lines are there ({})",
            path.display()
        );
        for secret in [&customer, &card, &relayed_customer] {
            assert!(
                !text.contains(secret.as_str()),
                "{name}'s logs carry a body value ({secret}): {}",
                path.display()
            );
        }
        println!(
            "{name}: {} lines, {traced} of them DEBUG or TRACE, no body value ({})",
            text.lines().count(),
            path.display()
        );
    }
}
