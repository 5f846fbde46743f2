//! The local stack reads template.yaml and creates its tables and queues in moto server (started by `make test`).

use std::collections::BTreeMap;
use std::time::Duration;

use aws_sdk_sqs::types::QueueAttributeName;
use sqsafe_local::stack::{EnvSource, LocalStack, StackOptions, TemplateSpec, template_path};
use sqsafe_testkit::{RequestCounter, unique_name};

#[test]
fn the_template_is_read_as_deployed() {
    let spec = TemplateSpec::read(&template_path()).expect("template.yaml");
    let charge = spec
        .function_by_binary("charge-payment")
        .expect("charge-payment");
    let ledger = spec
        .function_by_binary("apply-ledger")
        .expect("apply-ledger");
    let charge_queue = &spec.queues[&charge.queue];
    let ledger_queue = &spec.queues[&ledger.queue];
    assert!(!charge_queue.fifo && ledger_queue.fifo);
    for queue in [charge_queue, ledger_queue] {
        let (dlq, max) = queue.redrive.clone().expect("redrive");
        assert!(max >= 5);
        assert_eq!(
            spec.queues[&dlq].fifo, queue.fifo,
            "a FIFO queue's DLQ is FIFO"
        );
    }
    let idem = charge.env.get("IDEMPOTENCY_TABLE").expect("env");
    let EnvSource::Ref(table) = idem else {
        panic!("IDEMPOTENCY_TABLE is a !Ref: {idem:?}")
    };
    assert_eq!(spec.tables[table].partition_key, "pk");
    assert_eq!(
        spec.tables[table].ttl_attribute.as_deref(),
        Some("expiration")
    );
}

#[test]
fn a_function_without_its_queue_is_refused() {
    let broken = r#"
Resources:
  F:
    Type: AWS::Serverless::Function
    Metadata: { BuildProperties: { Binary: f } }
    Properties:
      Events: { Q: { Type: SQS, Properties: { Queue: !GetAtt Missing.Arn } } }
"#;
    let err = TemplateSpec::parse(broken).expect_err("missing queue");
    assert!(err.to_string().contains("Missing"), "{err}");
}

#[tokio::test]
async fn the_stack_is_created_in_moto_with_the_template_settings() {
    let sqs = sqsafe_testkit::sqs().await;
    let dynamodb = sqsafe_testkit::dynamodb(&RequestCounter::default()).await;
    let spec = TemplateSpec::read(&template_path()).expect("template.yaml");
    let options = StackOptions {
        prefix: unique_name("stack"),
        visibility_timeout: Some(Duration::from_secs(3)),
        parameters: BTreeMap::from([(
            "PaymentsApiUrl".to_owned(),
            "http://127.0.0.1:1".to_owned(),
        )]),
        max_receive_count: None,
    };
    let stack = LocalStack::create(&sqs, &dynamodb, spec, options)
        .await
        .expect("stack");

    for binary in ["charge-payment", "apply-ledger"] {
        let queue = stack.source_queue(binary).expect("queue");
        let dlq = stack.dead_letter_queue(binary).expect("dlq");
        let attrs = sqs
            .get_queue_attributes()
            .queue_url(&queue.url)
            .attribute_names(QueueAttributeName::All)
            .send()
            .await
            .expect("attributes")
            .attributes
            .expect("attributes");
        let redrive: serde_json::Value =
            serde_json::from_str(&attrs[&QueueAttributeName::RedrivePolicy]).expect("redrive JSON");
        assert_eq!(redrive["deadLetterTargetArn"], dlq.arn.as_str());
        assert_eq!(
            attrs[&QueueAttributeName::VisibilityTimeout],
            "3",
            "the test override"
        );
        let env: BTreeMap<String, String> = stack.function_env(binary).into_iter().collect();
        assert_eq!(env["DLQ_URL"], dlq.url);
        assert_eq!(env["QUEUE_URL"], queue.url, "the queue it consumes");
        assert_eq!(env["IDEMPOTENCY_TABLE"], stack.tables["IdempotencyTable"]);
        assert!(
            env.contains_key("MAX_ATTEMPTS") && env.contains_key("IDEMPOTENCY_WINDOW_DAYS"),
            "{env:?}"
        );
    }
    let charge_env: BTreeMap<String, String> =
        stack.function_env("charge-payment").into_iter().collect();
    assert_eq!(
        charge_env["PAYMENTS_API_URL"], "http://127.0.0.1:1",
        "parameter override"
    );
    let ledger_env: BTreeMap<String, String> =
        stack.function_env("apply-ledger").into_iter().collect();
    let table = dynamodb
        .describe_table()
        .table_name(&ledger_env["LEDGER_TABLE"])
        .send()
        .await
        .expect("describe");
    let keys: Vec<String> = table
        .table()
        .map(|t| {
            t.key_schema()
                .iter()
                .map(|k| k.attribute_name().to_owned())
                .collect()
        })
        .unwrap_or_default();
    assert_eq!(keys, ["pk", "sk"]);
    assert!(
        stack
            .source_queue("apply-ledger")
            .expect("q")
            .url
            .ends_with(".fifo")
    );
    assert_eq!(stack.batch_size("charge-payment"), 10);
}
