//! `sqsafe local up` with a Kinesis consumer: the real CLI on a template whose charge-payment reads a Kinesis stream,
//! records put with `sqsafe local send`. The issue's case: a shard's records in order, stopped at the first that
//! fails transiently (nothing after it applied in that invocation), handed over again from it, each applied once; a
//! poison record in the failure queue with its content, the shard going on; the same records sent again replayed.

use std::process::Command;
use std::time::Duration;

use base64::Engine as _;
use sqsafe_e2e::harness::build_functions;
use sqsafe_e2e::workspace_root;
use sqsafe_test_servers::{Fault, PaymentsApi};

use super::local_up::{LINE_LIMIT, START_LIMIT, Scratch, Up, build_cli, payment, totals};

/// A template with one function, charge-payment, fed by a one-shard Kinesis stream.
const TEMPLATE: &str = r#"
Parameters:
  PaymentsApiUrl: { Type: String }
Resources:
  IdempotencyTable:
    Type: AWS::DynamoDB::Table
    Properties:
      KeySchema: [{ AttributeName: pk, KeyType: HASH }]
      TimeToLiveSpecification: { AttributeName: expiration, Enabled: true }
  PaymentsStream:
    Type: AWS::Kinesis::Stream
    Properties: { ShardCount: 1 }
  FailureQueue: { Type: AWS::SQS::Queue }
  OnFailureQueue: { Type: AWS::SQS::Queue }
  ChargePaymentFunction:
    Type: AWS::Serverless::Function
    Metadata: { BuildProperties: { Binary: charge-payment } }
    Properties:
      Environment:
        Variables:
          IDEMPOTENCY_TABLE: !Ref IdempotencyTable
          PAYMENTS_API_URL: !Ref PaymentsApiUrl
          DLQ_URL: !Ref FailureQueue
      Events:
        Stream:
          Type: Kinesis
          Properties:
            Stream: !GetAtt PaymentsStream.Arn
            StartingPosition: TRIM_HORIZON
            BatchSize: 10
            FunctionResponseTypes: [ReportBatchItemFailures]
            BisectBatchOnFunctionError: true
            MaximumRetryAttempts: 3
            DestinationConfig: { OnFailure: { Destination: !GetAtt OnFailureQueue.Arn } }
"#;

#[test]
fn local_up_runs_a_kinesis_consumer_in_shard_order_stopped_at_its_first_failure() {
    let seed = std::env::var("SQSAFE_E2E_SEED")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(|| fastrand::u64(..));
    println!("seed {seed} (SQSAFE_E2E_SEED={seed} replays the payment ids)");
    let run = fastrand::Rng::with_seed(seed).u32(..);
    let scratch = Scratch::new(run);
    let cli = build_cli(&scratch);
    let functions = build_functions(false);
    let template = scratch.root.join("template.yaml");
    std::fs::write(&template, TEMPLATE).expect("template");

    let rt = tokio::runtime::Runtime::new().expect("runtime");
    let payments = rt
        .block_on(async {
            PaymentsApi::builder()
                .keys_in_memory()
                .build()?
                .start("127.0.0.1:0".parse().expect("address"))
                .await
        })
        .expect("the payments API");
    let ids: Vec<String> = (1..=3).map(|n| format!("p-{run}-{n}")).collect();
    // The second payment's first charge is answered 503 before charging: a transient failure.
    payments.force_for_payment(&ids[1], Fault::Before);

    let mut up = Up::start_with(&cli, &scratch, &functions, &template, &payments.base_url());
    let moto = up.wait_line(|l| l.starts_with("moto server "), START_LIMIT);
    let endpoint = moto
        .split_whitespace()
        .last()
        .expect("the endpoint")
        .to_owned();
    up.wait_line(|l| l.starts_with("Send a sample event"), START_LIMIT);

    // Four records of one partition key: three payments, the second failing once, then a poison record.
    let bodies = [
        payment(&ids[0]),
        payment(&ids[1]),
        payment(&ids[2]),
        "not a payment".to_owned(),
    ];
    let event = scratch.root.join("records.json");
    let records: Vec<serde_json::Value> = bodies
        .iter()
        .map(|body| {
            serde_json::json!({
                "eventSource": "aws:kinesis",
                "kinesis": {
                    "data": base64::engine::general_purpose::STANDARD.encode(body),
                    "partitionKey": "acct-1",
                },
            })
        })
        .collect();
    std::fs::write(
        &event,
        serde_json::json!({ "Records": records }).to_string(),
    )
    .expect("event file");
    scratch.send_to(&cli, "charge-payment", &event);
    // A name the pipeline does not know is refused, naming its stream consumer too.
    let unknown = Command::new(&cli)
        .current_dir(workspace_root())
        .env("CARGO_TARGET_DIR", &scratch.root)
        .args(["local", "send", "no-such-consumer"])
        .arg(&event)
        .output()
        .expect("run sqsafe local send");
    let said = String::from_utf8_lossy(&unknown.stderr);
    assert!(
        !unknown.status.success()
            && said.contains("no consumer no-such-consumer")
            && said.contains("charge-payment"),
        "an unknown consumer must be refused with the pipeline's consumers named:\n{said}"
    );

    // Until every record is done: the first applied, the shard stopped at the second (its first charge answered 503)
    // with nothing after it run, then the second and third applied and the poison record dead-lettered. How the
    // records are cut into invocations depends on when the mapping polled while they were put (as with Lambda): the
    // lines are added up, and the order of the charges says that nothing ran ahead of the failed record.
    let lines = lines_until(&mut up, |t| (t.applied, t.dead_lettered) == (3, 1));
    let stopped: Vec<&String> = lines
        .iter()
        .filter(|l| l.contains("; stopped at record "))
        .collect();
    assert_eq!(
        stopped.len(),
        1,
        "the shard stopped once, at the payment answered 503:\n{}",
        lines.join("\n")
    );
    let charged: Vec<String> = payments
        .charges()
        .iter()
        .map(|c| c.payment_id.clone())
        .collect();
    assert_eq!(
        charged,
        ids,
        "each once, in the shard's order: nothing after the failed record ran ahead of it:\n{}",
        lines.join("\n")
    );
    let t = totals(&lines.iter().map(|l| batch_part(l)).collect::<Vec<_>>());
    assert_eq!(
        (t.replayed, t.records - t.returned),
        (0, 4),
        "every record done once, none replayed:\n{}",
        lines.join("\n")
    );

    // The poison record is in the failure queue with its content.
    let letters = rt.block_on(async {
        let config = sqsafe_aws::local_config_loader(&endpoint).load().await;
        let sqs = aws_sdk_sqs::Client::new(&config);
        let url = sqs
            .get_queue_url()
            .queue_name("local-FailureQueue")
            .send()
            .await
            .expect("the failure queue")
            .queue_url
            .expect("a URL");
        sqs.receive_message()
            .queue_url(url)
            .max_number_of_messages(10)
            .wait_time_seconds(1)
            .send()
            .await
            .expect("receive")
            .messages
            .unwrap_or_default()
    });
    let bodies_there: Vec<&str> = letters.iter().filter_map(|m| m.body()).collect();
    assert_eq!(bodies_there, ["not a payment"], "the record's content");

    // The same records again (a replayed shard): the payments replayed, nothing charged twice.
    scratch.send_to(&cli, "charge-payment", &event);
    let again = lines_until(&mut up, |t| (t.replayed, t.dead_lettered) == (3, 1));
    let t = totals(&again.iter().map(|l| batch_part(l)).collect::<Vec<_>>());
    assert_eq!(
        (t.applied, t.returned, t.records),
        (0, 0, 4),
        "{}",
        again.join("\n")
    );
    assert_eq!(payments.charges().len(), 3, "no second charge");

    // The summary at the end counts every invocation and record the lines told.
    let invocations = lines.len() + again.len();
    let records: usize = lines
        .iter()
        .chain(&again)
        .map(|l| totals(&[batch_part(l)]).records)
        .sum();
    let output = up.terminate();
    let summary = format!(
        ": {invocations} invocations, {records} records, 0 failed invocations, 0 given up on;"
    );
    assert!(
        output
            .lines()
            .any(|l| l.starts_with("charge-payment#shardId-") && l.contains(&summary)),
        "the summary at the end counts every invocation and record ({summary}):\n{output}"
    );
}

/// charge-payment's invocation lines until what they add up to is `done`.
fn lines_until(up: &mut Up, done: impl Fn(&super::local_up::Totals) -> bool) -> Vec<String> {
    let mut lines = Vec::new();
    while !done(&totals(
        &lines
            .iter()
            .map(|l: &String| batch_part(l))
            .collect::<Vec<_>>(),
    )) {
        lines.push(stream_line(up));
    }
    lines
}

/// The next charge-payment invocation line.
fn stream_line(up: &mut Up) -> String {
    up.wait_line(
        |l| l.starts_with("charge-payment   ") && l.contains(" record"),
        LINE_LIMIT + Duration::from_secs(5),
    )
}

/// The part of a stream line that a queue's batch line has (up to its time), for `totals`.
fn batch_part(line: &str) -> String {
    line.split("; stopped at").next().unwrap_or(line).to_owned()
}
