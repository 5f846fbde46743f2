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

/// Every attribute of the queue at `url`.
async fn queue_attributes(
    sqs: &aws_sdk_sqs::Client,
    url: &str,
) -> std::collections::HashMap<QueueAttributeName, String> {
    sqs.get_queue_attributes()
        .queue_url(url)
        .attribute_names(QueueAttributeName::All)
        .send()
        .await
        .expect("attributes")
        .attributes
        .expect("attributes")
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
        ..StackOptions::default()
    };
    let stack = LocalStack::create(&sqs, &dynamodb, spec, options)
        .await
        .expect("stack");

    for binary in ["charge-payment", "apply-ledger"] {
        let queue = stack.source_queue(binary).expect("queue");
        let dlq = stack.dead_letter_queue(binary).expect("dlq");
        let attrs = queue_attributes(&sqs, &queue.url).await;
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

#[test]
fn a_function_gets_only_its_own_resources() {
    let spec = TemplateSpec::read(&template_path()).expect("template.yaml");
    let keys = |s: &TemplateSpec| {
        (
            s.tables.keys().cloned().collect::<Vec<_>>(),
            s.queues.keys().cloned().collect::<Vec<_>>(),
        )
    };
    let charge = spec.only_for("charge-payment").expect("charge-payment");
    assert_eq!(
        keys(&charge),
        (
            vec!["IdempotencyTable".to_owned()],
            vec![
                "ChargePaymentDeadLetterQueue".to_owned(),
                "ChargePaymentQueue".to_owned()
            ]
        )
    );
    let ledger = spec.only_for("apply-ledger").expect("apply-ledger");
    assert_eq!(
        keys(&ledger).0,
        ["IdempotencyTable".to_owned(), "LedgerTable".to_owned()]
    );
    assert_eq!(ledger.functions.len(), 1);
    assert!(spec.only_for("no-such-binary").is_none());
}

/// A template of its own (unique logical ids and queue names), so that reruns against one moto server never meet
/// another test's resources.
fn probe_template(n: &str) -> String {
    format!(
        r#"
Resources:
  Probe{n}Table:
    Type: AWS::DynamoDB::Table
    Properties:
      BillingMode: PAY_PER_REQUEST
      AttributeDefinitions: [{{ AttributeName: pk, AttributeType: S }}, {{ AttributeName: sk, AttributeType: S }}]
      KeySchema: [{{ AttributeName: pk, KeyType: HASH }}, {{ AttributeName: sk, KeyType: RANGE }}]
      StreamSpecification: {{ StreamViewType: NEW_IMAGE }}
      TimeToLiveSpecification: {{ AttributeName: expiration, Enabled: true }}
  ProbeDeadLetterQueue:
    Type: AWS::SQS::Queue
    Properties:
      QueueName: !Sub "${{AWS::StackName}}-probe-{n}-dlq.fifo"
      FifoQueue: true
  ProbeQueue:
    Type: AWS::SQS::Queue
    Properties:
      QueueName: !Sub "${{AWS::StackName}}-probe-{n}.fifo"
      FifoQueue: true
      VisibilityTimeout: 120
      RedrivePolicy: {{ deadLetterTargetArn: !GetAtt ProbeDeadLetterQueue.Arn, maxReceiveCount: 4 }}
"#
    )
}

#[tokio::test]
async fn template_names_are_the_deployed_ones_and_a_second_run_keeps_what_exists() {
    let sqs = sqsafe_testkit::sqs().await;
    let dynamodb = sqsafe_testkit::dynamodb(&RequestCounter::default()).await;
    let n = unique_name("n").replace('-', "");
    let spec = TemplateSpec::parse(&probe_template(&n)).expect("probe template");
    let options = StackOptions {
        template_names: true,
        ..StackOptions::default()
    };
    let first = LocalStack::create(&sqs, &dynamodb, spec.clone(), options.clone())
        .await
        .expect("first run");
    let table = format!("probe{}", n.to_lowercase());
    assert_eq!(first.tables[&format!("Probe{n}Table")], table);
    let queue = &first.queues["ProbeQueue"];
    assert!(
        queue.url.ends_with(&format!("/probe-{n}.fifo")),
        "the QueueName without the stack name: {}",
        queue.url
    );
    assert!(
        first.queues["ProbeDeadLetterQueue"]
            .url
            .ends_with(&format!("/probe-{n}-dlq.fifo"))
    );

    let described = dynamodb
        .describe_table()
        .table_name(&table)
        .send()
        .await
        .expect("describe");
    let stream = described
        .table()
        .and_then(|t| t.stream_specification())
        .expect("the template's stream");
    assert!(stream.stream_enabled());
    assert_eq!(
        stream.stream_view_type().map(|v| v.as_str()),
        Some("NEW_IMAGE")
    );
    let attrs = queue_attributes(&sqs, &queue.url).await;
    assert_eq!(attrs[&QueueAttributeName::VisibilityTimeout], "120");
    let redrive: serde_json::Value =
        serde_json::from_str(&attrs[&QueueAttributeName::RedrivePolicy]).expect("redrive JSON");
    assert_eq!(
        redrive["maxReceiveCount"].to_string().trim_matches('"'),
        "4"
    );

    // An item written between the runs survives the second run: what exists is kept, not recreated.
    let kept = std::collections::HashMap::from([
        (
            "pk".to_owned(),
            aws_sdk_dynamodb::types::AttributeValue::S("kept".into()),
        ),
        (
            "sk".to_owned(),
            aws_sdk_dynamodb::types::AttributeValue::S("1".into()),
        ),
    ]);
    dynamodb
        .put_item()
        .table_name(&table)
        .set_item(Some(kept.clone()))
        .send()
        .await
        .expect("put");
    let second = LocalStack::create(&sqs, &dynamodb, spec, options)
        .await
        .expect("second run on the same names");
    assert_eq!(second.queues["ProbeQueue"].url, queue.url);
    let item = dynamodb
        .get_item()
        .table_name(&table)
        .set_key(Some(kept))
        .send()
        .await
        .expect("get");
    assert!(item.item().is_some(), "the table was kept with its item");
}

/// A template with one table that names a seed file, written with the file into a scratch folder.
fn seeded_template(name: &str, seed: &str) -> std::path::PathBuf {
    let dir = std::env::temp_dir().join(unique_name(name));
    std::fs::create_dir_all(dir.join("seeds")).expect("scratch folder");
    std::fs::write(dir.join("seeds").join("prices.json"), seed).expect("seed file");
    std::fs::write(
        dir.join("template.yaml"),
        "Resources:\n  PricesTable:\n    Type: AWS::DynamoDB::Table\n    Metadata:\n      SqsafeLocalSeed: seeds/prices.json\n    Properties:\n      KeySchema:\n        - AttributeName: sku\n          KeyType: HASH\n",
    )
    .expect("template");
    dir.join("template.yaml")
}

#[tokio::test]
async fn a_table_whose_resource_names_a_seed_file_is_created_with_its_items() {
    let aws = sqsafe_testkit::sdk_config().await;
    let dynamodb = aws_sdk_dynamodb::Client::new(&aws);
    let sqs = aws_sdk_sqs::Client::new(&aws);
    let template = seeded_template(
        "seed",
        r#"[{"sku": "tea", "cents": 350, "tags": ["hot"]}, {"sku": "cake", "cents": 420, "vegan": false}]"#,
    );
    let spec = TemplateSpec::read(&template).expect("template");
    let seed = spec.tables["PricesTable"]
        .seed
        .clone()
        .expect("the seed file is named");
    assert_eq!(
        seed,
        template.parent().expect("folder").join("seeds/prices.json"),
        "resolved beside the template"
    );
    let options = StackOptions {
        prefix: unique_name("seed"),
        ..StackOptions::default()
    };
    let stack = LocalStack::create(&sqs, &dynamodb, spec, options)
        .await
        .expect("stack");
    let table = &stack.tables["PricesTable"];
    let items = dynamodb
        .scan()
        .table_name(table)
        .send()
        .await
        .expect("scan")
        .items
        .unwrap_or_default();
    let mut seen: Vec<(String, String)> = items
        .iter()
        .map(|item| {
            let text = |k: &str| {
                item.get(k)
                    .and_then(|v| v.as_s().ok())
                    .cloned()
                    .unwrap_or_default()
            };
            let cents = item
                .get("cents")
                .and_then(|v| v.as_n().ok())
                .cloned()
                .unwrap_or_default();
            (text("sku"), cents)
        })
        .collect();
    seen.sort();
    assert_eq!(
        seen,
        [
            ("cake".to_owned(), "420".to_owned()),
            ("tea".to_owned(), "350".to_owned())
        ]
    );
    let tea = items
        .iter()
        .find(|i| i.get("sku").and_then(|v| v.as_s().ok()).map(String::as_str) == Some("tea"));
    assert!(
        tea.and_then(|i| i.get("tags")).is_some_and(|t| t.is_l()),
        "arrays become lists"
    );
}

#[tokio::test]
async fn a_seed_item_without_the_key_is_refused_naming_the_file_and_item_and_nothing_is_created() {
    let aws = sqsafe_testkit::sdk_config().await;
    let dynamodb = aws_sdk_dynamodb::Client::new(&aws);
    let sqs = aws_sdk_sqs::Client::new(&aws);
    for (seed, expected) in [
        (r#"[{"sku": "tea"}, {"cents": 1}]"#, "item 1 has no `sku`"),
        (r#"{"sku": "tea"}"#, "expected a JSON array of objects"),
    ] {
        let template = seeded_template("bad-seed", seed);
        let spec = TemplateSpec::read(&template).expect("template");
        let prefix = unique_name("bad-seed");
        let options = StackOptions {
            prefix: prefix.clone(),
            ..StackOptions::default()
        };
        let error = LocalStack::create(&sqs, &dynamodb, spec, options)
            .await
            .expect_err("refused");
        let message = error.to_string();
        assert!(
            message.contains("prices.json") && message.contains(expected),
            "{message}"
        );
        let tables = dynamodb
            .list_tables()
            .send()
            .await
            .expect("list")
            .table_names
            .unwrap_or_default();
        assert!(
            !tables.iter().any(|t| t.starts_with(&prefix)),
            "no table created: {tables:?}"
        );
    }
}

/// A parent whose consumers' queues are in nested applications with a local template (tests/fixtures/nested).
fn nested_template() -> std::path::PathBuf {
    std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/nested/template.yaml")
}

#[tokio::test]
async fn the_queues_of_a_nested_application_are_created_with_their_redrive() {
    let sqs = sqsafe_testkit::sqs().await;
    let dynamodb = sqsafe_testkit::dynamodb(&RequestCounter::default()).await;
    let spec = TemplateSpec::read(&nested_template()).expect("the nested fixture");
    let options = StackOptions {
        prefix: unique_name("nested"),
        ..StackOptions::default()
    };
    let stack = LocalStack::create(&sqs, &dynamodb, spec, options)
        .await
        .expect("stack");
    for (binary, queue_id, dlq_id, fifo, visibility) in [
        (
            "send-invoice",
            "SendInvoiceQueue",
            "SendInvoiceDeadLetterQueue",
            false,
            "400",
        ),
        (
            "apply-ledger",
            "ApplyLedgerQueue",
            "ApplyLedgerDeadLetterQueue",
            true,
            "180",
        ),
    ] {
        let queue = stack.source_queue(binary).expect("its queue");
        let dlq = stack.dead_letter_queue(binary).expect("its DLQ");
        assert_eq!(
            (queue.spec.logical_id.as_str(), dlq.spec.logical_id.as_str()),
            (queue_id, dlq_id)
        );
        let attrs = queue_attributes(&sqs, &queue.url).await;
        let redrive: serde_json::Value =
            serde_json::from_str(&attrs[&QueueAttributeName::RedrivePolicy]).expect("redrive JSON");
        assert_eq!(redrive["deadLetterTargetArn"], dlq.arn.as_str());
        assert_eq!(redrive["maxReceiveCount"], 5);
        assert_eq!(attrs[&QueueAttributeName::VisibilityTimeout], visibility);
        assert_eq!(
            attrs
                .get(&QueueAttributeName::FifoQueue)
                .map(String::as_str),
            fifo.then_some("true"),
            "{binary}"
        );
        let dlq_attrs = queue_attributes(&sqs, &dlq.url).await;
        assert_eq!(
            dlq_attrs[&QueueAttributeName::MessageRetentionPeriod],
            "1209600"
        );
        let env: BTreeMap<String, String> = stack.function_env(binary).into_iter().collect();
        assert_eq!(env["QUEUE_URL"], queue.url, "!GetAtt App.Outputs.QueueUrl");
        assert_eq!(
            env["DLQ_URL"], dlq.url,
            "!GetAtt App.Outputs.DeadLetterQueueUrl"
        );
    }
    let env: BTreeMap<String, String> = stack.function_env("send-invoice").into_iter().collect();
    assert_eq!(env["IDEMPOTENCY_TABLE"], stack.tables["IdempotencyTable"]);
    // A queue's attributes through !GetAtt: its ARN and its name, as the created queue has them.
    let send_queue = &stack.queues["SendInvoiceQueue"];
    let send_dlq = &stack.queues["SendInvoiceDeadLetterQueue"];
    assert_eq!(
        env.get("QUEUE_ARN"),
        Some(&send_queue.arn),
        "!GetAtt App.Outputs.QueueArn: {env:?}"
    );
    assert_eq!(
        env.get("DLQ_NAME").map(String::as_str),
        send_dlq.url.rsplit('/').next(),
        "!GetAtt App.Outputs.DeadLetterQueueName: {env:?}"
    );
    assert_eq!(stack.batch_size("send-invoice"), 5);
}

const KINESIS_TEMPLATE: &str = r#"
Parameters:
  Shards: { Type: Number, Default: 3 }
Resources:
  Orders:
    Type: AWS::Kinesis::Stream
    Properties: { Name: !Sub "${AWS::StackName}-orders-NAME", ShardCount: !Ref Shards }
  Failures: { Type: AWS::SQS::Queue, Properties: { QueueName: !Sub "${AWS::StackName}-failures-NAME" } }
  ShipOrder:
    Type: AWS::Serverless::Function
    Metadata: { BuildProperties: { Binary: ship-order } }
    Properties:
      Environment:
        Variables:
          DLQ_URL: !Ref Failures
          STREAM: !Ref Orders
          STREAM_ARN: !GetAtt Orders.Arn
          MODE: strict
          JOINED: !Join [",", [!GetAtt Failures.QueueUrl, !Ref Orders, "x"]]
          UNRESOLVED: !Join [",", [!Ref Nowhere, "x"]]
          SUBSTITUTED: !Sub "${AWS::Region}-x"
      Events:
        Stream:
          Type: Kinesis
          Properties: { Stream: !GetAtt Orders.Arn, StartingPosition: TRIM_HORIZON }
"#;

/// A Kinesis stream of the template is created in moto with its shard count, and a stream consumer's environment
/// resolves against it (its name, its ARN) and the queues.
#[tokio::test]
async fn a_templates_kinesis_stream_is_created_and_its_consumer_gets_its_name_and_arn() {
    let sqs = sqsafe_testkit::sqs().await;
    let dynamodb = sqsafe_testkit::dynamodb(&RequestCounter::default()).await;
    let kinesis = aws_sdk_kinesis::Client::new(&sqsafe_testkit::sdk_config().await);
    let n = unique_name("k");
    let spec = TemplateSpec::parse(&KINESIS_TEMPLATE.replace("NAME", &n)).expect("template");
    let options = StackOptions {
        prefix: n.clone(),
        ..StackOptions::default()
    };
    let mut stack = LocalStack::create(&sqs, &dynamodb, spec, options)
        .await
        .expect("tables and queues");
    assert!(stack.kinesis_streams.is_empty(), "only when asked for");
    stack
        .create_kinesis_streams(&kinesis)
        .await
        .expect("streams");
    let orders = &stack.kinesis_streams["Orders"];
    assert_eq!(orders.name, format!("{n}-Orders"));
    let shards = kinesis
        .list_shards()
        .stream_name(&orders.name)
        .send()
        .await
        .expect("list shards");
    assert_eq!(shards.shards().len(), 3, "the parameter's default");
    let env: BTreeMap<String, String> = stack.function_env("ship-order").into_iter().collect();
    assert_eq!(env["STREAM"], orders.name);
    assert_eq!(env["STREAM_ARN"], orders.arn);
    assert!(
        orders.arn.ends_with(&format!(":stream/{}", orders.name)),
        "{}",
        orders.arn
    );
    assert_eq!(env["DLQ_URL"], stack.queues["Failures"].url);
    assert_eq!(env["MODE"], "strict");
    assert_eq!(
        env["JOINED"],
        format!("{},{},x", stack.queues["Failures"].url, orders.name),
        "a !Join of what resolves"
    );
    assert!(
        !env.contains_key("UNRESOLVED") && !env.contains_key("SUBSTITUTED"),
        "left out: the function names what it misses at start: {env:?}"
    );
}

/// With the template's own names, a second run keeps the stream the first created (and its records).
#[tokio::test]
async fn with_template_names_a_second_run_keeps_the_kinesis_stream() {
    let sqs = sqsafe_testkit::sqs().await;
    let dynamodb = sqsafe_testkit::dynamodb(&RequestCounter::default()).await;
    let kinesis = aws_sdk_kinesis::Client::new(&sqsafe_testkit::sdk_config().await);
    let n = unique_name("k");
    let spec = TemplateSpec::parse(&KINESIS_TEMPLATE.replace("NAME", &n)).expect("template");
    let options = StackOptions {
        template_names: true,
        ..StackOptions::default()
    };
    let mut first = LocalStack::create(&sqs, &dynamodb, spec.clone(), options.clone())
        .await
        .expect("first run");
    first
        .create_kinesis_streams(&kinesis)
        .await
        .expect("first streams");
    let name = first.kinesis_streams["Orders"].name.clone();
    assert_eq!(
        name,
        format!("orders-{n}"),
        "the Name without the stack name"
    );
    kinesis
        .put_record()
        .stream_name(&name)
        .partition_key("p")
        .data(aws_sdk_kinesis::primitives::Blob::new("kept"))
        .send()
        .await
        .expect("a record");
    let mut second = LocalStack::create(&sqs, &dynamodb, spec, options)
        .await
        .expect("second run");
    second
        .create_kinesis_streams(&kinesis)
        .await
        .expect("second streams");
    assert_eq!(
        second.kinesis_streams["Orders"].arn,
        first.kinesis_streams["Orders"].arn
    );
    // The record put after the first run is still there: the stream was kept, not made again.
    let mut kept = Vec::new();
    let shards = kinesis
        .list_shards()
        .stream_name(&name)
        .send()
        .await
        .expect("shards");
    for shard in shards.shards() {
        let iterator = kinesis
            .get_shard_iterator()
            .stream_name(&name)
            .shard_id(shard.shard_id())
            .shard_iterator_type(aws_sdk_kinesis::types::ShardIteratorType::TrimHorizon)
            .send()
            .await
            .expect("iterator")
            .shard_iterator
            .expect("an iterator");
        let records = kinesis
            .get_records()
            .shard_iterator(iterator)
            .send()
            .await
            .expect("records");
        kept.extend(records.records().iter().map(|r| r.data().as_ref().to_vec()));
    }
    assert_eq!(kept, vec![b"kept".to_vec()]);
}
