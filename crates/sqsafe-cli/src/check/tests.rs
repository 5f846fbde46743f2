//! The checker on the repository's template.yaml: it passes, and a few ways of breaking it are each caught by the
//! rule they break, on the resource that breaks it. (tests/template/test_rules.py runs every mutation of its table,
//! one for each rule, against the built `sqsafe check`.)

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use serde_norway::Value;

use super::*;

fn workspace() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// template.yaml as `sqsafe check` reads it: its consumers' nested applications (sqsafe/consumer.yaml,
/// consumer-fifo.yaml) inlined, their resources named ChargePaymentQueue, ChargePaymentDeadLetterQueue, ...
fn template() -> Value {
    let text = std::fs::read_to_string(workspace().join("template.yaml")).expect("template.yaml");
    let doc = parse(&text).expect("template.yaml parses");
    flatten(doc, &workspace()).expect("template.yaml's nested applications inline")
}

fn crates() -> BTreeMap<String, String> {
    function_crate_binaries(&workspace()).expect("functions/*/Cargo.toml")
}

fn caught(doc: &Value, rule: &str, resource: &str) {
    caught_with(doc, &crates(), rule, resource);
}

fn caught_with(doc: &Value, crates: &BTreeMap<String, String>, rule: &str, resource: &str) {
    let found = check(doc, crates);
    assert!(
        found
            .iter()
            .any(|v| v.rule == rule && v.resource == resource),
        "expected [{rule}] {resource}; found:\n{}",
        found
            .iter()
            .map(ToString::to_string)
            .collect::<Vec<_>>()
            .join("\n")
    );
}

/// Any YAML value, short forms made long.
fn yaml(text: &str) -> Value {
    sqsafe_local::stack::cfn::long_form(serde_norway::from_str(text).expect("test YAML parses"))
}

#[test]
fn the_rule_names_are_forty_four_and_distinct() {
    let names: std::collections::BTreeSet<&str> = RULES.iter().map(|(n, _)| *n).collect();
    assert_eq!(names.len(), 44);
}

#[test]
fn the_repository_template_keeps_every_rule() {
    let crates = crates();
    assert!(crates.len() >= 4, "the function crates: {crates:?}");
    assert_eq!(
        crates.get("charge-payment").map(String::as_str),
        Some("functions/charge-payment")
    );
    let found = check(&template(), &crates);
    assert!(
        found.is_empty(),
        "{}",
        found
            .iter()
            .map(ToString::to_string)
            .collect::<Vec<_>>()
            .join("\n")
    );
}

#[test]
fn a_low_max_receive_count_is_caught() {
    let mut doc = template();
    doc["Resources"]["ChargePaymentQueue"]["Properties"]["RedrivePolicy"]["maxReceiveCount"] =
        Value::from(2);
    caught(&doc, "max-receive-count", "ChargePaymentQueue");
}

#[test]
fn a_parameter_is_checked_at_its_bound() {
    // The default timeout still fits the visibility timeout; the largest one a deployer may pass does not.
    let mut doc = template();
    doc["Parameters"]["FunctionTimeout"]["MaxValue"] = Value::from(300);
    caught(&doc, "visibility-timeout", "ChargePaymentQueue");

    let mut doc = template();
    doc["Parameters"]["IdempotencyWindowDays"]["MinValue"] = Value::from(7);
    caught(&doc, "idempotency-window", "ChargePaymentFunction");

    let mut doc = template();
    doc["Parameters"]["FunctionTimeout"]
        .as_mapping_mut()
        .expect("a parameter")
        .remove("MaxValue");
    caught(&doc, "visibility-timeout", "ApplyLedgerQueue");
}

#[test]
fn change_message_visibility_on_the_dlq_is_caught() {
    let mut doc = template();
    let statements = doc["Resources"]["ChargePaymentRole"]["Properties"]["Policies"][0]["PolicyDocument"]["Statement"]
        .as_sequence_mut()
        .expect("statements");
    let own = statements
        .iter_mut()
        .find(|s| s["Sid"] == "OwnMessageVisibility")
        .expect("OwnMessageVisibility");
    own["Resource"] =
        yaml("[!GetAtt ChargePaymentQueue.Arn, !GetAtt ChargePaymentDeadLetterQueue.Arn]");
    caught(&doc, "change-message-visibility", "ChargePaymentRole");
}

#[test]
fn a_metric_the_code_never_writes_is_caught() {
    let mut doc = template();
    let body = &mut doc["Resources"]["ChargePaymentDashboard"]["Properties"]["DashboardBody"]["Fn::Sub"]
        [0];
    let text = body
        .as_str()
        .expect("the body")
        .replace("\"RecordsReplayed\"", "\"RecordsDuplicated\"");
    *body = Value::from(text);
    caught(&doc, "dashboard-metrics", "ChargePaymentDashboard");
    caught(&doc, "dashboard", "ChargePaymentFunction");
}

#[test]
fn a_crate_without_a_function_and_a_function_without_a_crate_are_caught() {
    let mut crates = crates();
    crates.insert("send-receipt".into(), "functions/send-receipt".into());
    caught_with(
        &template(),
        &crates,
        "function-crates",
        "functions/send-receipt",
    );

    let mut crates = self::crates();
    crates.remove("charge-payment");
    caught_with(
        &template(),
        &crates,
        "function-crates",
        "ChargePaymentFunction",
    );
}

#[test]
fn a_stream_mapping_that_gives_up_is_caught() {
    let mut doc = template();
    doc["Resources"]["OutboxRelayFunction"]["Properties"]["Events"]["Stream"]["Properties"]["MaximumRetryAttempts"] =
        Value::from(10);
    caught(&doc, "stream-mapping", "OutboxRelayFunction.Events.Stream");
}

#[test]
fn a_dlq_alarm_removed_is_caught() {
    let mut doc = template();
    doc["Resources"]
        .as_mapping_mut()
        .expect("resources")
        .remove("ApplyLedgerDeadLetterAlarm");
    caught(&doc, "alarm-dlq", "ApplyLedgerDeadLetterQueue");
}

/// The statements of a role of template.yaml, to add to.
fn statements<'a>(doc: &'a mut Value, role: &str) -> &'a mut Vec<Value> {
    doc["Resources"][role]["Properties"]["Policies"][0]["PolicyDocument"]["Statement"]
        .as_sequence_mut()
        .expect("statements")
}

/// The environment variables of a function of template.yaml.
fn variables<'a>(doc: &'a mut Value, function: &str) -> &'a mut Value {
    &mut doc["Resources"][function]["Properties"]["Environment"]["Variables"]
}

/// template.yaml with a table added by hand (keeping every table rule) that ChargePaymentFunction's environment
/// names.
fn with_prices_table() -> Value {
    let mut doc = template();
    doc["Resources"]["PricesTable"] = yaml(
        r#"
Type: AWS::DynamoDB::Table
Properties:
  BillingMode: PAY_PER_REQUEST
  AttributeDefinitions: [{AttributeName: pk, AttributeType: S}]
  KeySchema: [{AttributeName: pk, KeyType: HASH}]
  SSESpecification: {SSEEnabled: true}
  PointInTimeRecoverySpecification: {PointInTimeRecoveryEnabled: true}
"#,
    );
    variables(&mut doc, "ChargePaymentFunction")["PRICES_TABLE"] = yaml("!Ref PricesTable");
    doc
}

#[test]
fn a_table_the_environment_names_without_its_grant_is_caught_with_the_fix() {
    let doc = with_prices_table();
    let found: Vec<String> = check(&doc, &crates())
        .iter()
        .map(ToString::to_string)
        .collect();
    assert_eq!(
        found,
        [
            "[environment-grants] ChargePaymentRole: grants nothing on PricesTable, which ChargePaymentFunction's \
             PRICES_TABLE names: add a statement allowing the DynamoDB actions its code calls (for example \
             dynamodb:GetItem) on !GetAtt PricesTable.Arn"
        ]
    );

    let mut doc = with_prices_table();
    statements(&mut doc, "ChargePaymentRole").push(yaml(
        "{Effect: Allow, Action: dynamodb:GetItem, Resource: !GetAtt PricesTable.Arn}",
    ));
    assert_eq!(check(&doc, &crates()), []);
}

#[test]
fn a_queue_the_environment_names_without_its_grant_is_caught() {
    let mut doc = template();
    variables(&mut doc, "ChargePaymentFunction")["RECEIPTS_QUEUE_URL"] =
        yaml("!Sub ${ApplyLedgerQueue}");
    caught(&doc, "environment-grants", "ChargePaymentRole");

    statements(&mut doc, "ChargePaymentRole").push(yaml(
        "{Effect: Allow, Action: sqs:SendMessage, Resource: !GetAtt ApplyLedgerQueue.Arn}",
    ));
    assert_eq!(check(&doc, &crates()), []);
}

#[test]
fn another_stacks_table_in_the_environment_is_not_checked() {
    let mut doc = template();
    doc["Parameters"]["PricesTableName"] = yaml("{Type: String, Default: prices}");
    variables(&mut doc, "ChargePaymentFunction")["PRICES_TABLE"] = yaml("!Ref PricesTableName");
    variables(&mut doc, "ApplyLedgerFunction")["RATES_TABLE"] = Value::from("rates-prod");
    assert_eq!(check(&doc, &crates()), []);

    // Its role may reach it through the parameter its environment uses; a role whose environment does not use it
    // may not.
    let prices = yaml(
        "{Effect: Allow, Action: dynamodb:GetItem, Resource: !Sub 'arn:${AWS::Partition}:dynamodb:${AWS::Region}:${AWS::AccountId}:table/${PricesTableName}'}",
    );
    statements(&mut doc, "ChargePaymentRole").push(prices.clone());
    assert_eq!(check(&doc, &crates()), []);
    statements(&mut doc, "ApplyLedgerRole").push(prices);
    caught(&doc, "least-privilege", "ApplyLedgerRole");
}

#[test]
fn a_minimal_template_reports_what_it_lacks() {
    let doc = yaml(
        r#"
Resources:
  Queue:
    Type: AWS::SQS::Queue
  Fn:
    Type: AWS::Serverless::Function
    Properties:
      Runtime: provided.al2
      Events:
        Q:
          Type: SQS
          Properties: {Queue: !GetAtt Queue.Arn}
"#,
    );
    let found = check(&doc, &BTreeMap::new());
    let rules: std::collections::BTreeSet<(&str, &str)> = found
        .iter()
        .map(|v| (v.rule, v.resource.as_str()))
        .collect();
    for expected in [
        ("runtime", "Fn"),
        ("architecture", "Fn"),
        ("build-method", "Fn"),
        ("log-group", "Fn"),
        ("report-batch-item-failures", "Fn.Events.Q"),
        ("maximum-concurrency", "Fn.Events.Q"),
        ("dlq-required", "Queue"),
        ("sse", "Queue"),
        ("queue-url", "Fn"),
        ("idempotency-window", "Fn"),
        ("idempotency-table", "Fn"),
        ("least-privilege", "Fn"),
        ("alarm-queue-age", "Queue"),
        ("alarm-dead-letters", "Fn"),
        ("alarm-function-errors", "Fn"),
        ("dashboard", "Fn"),
    ] {
        assert!(rules.contains(&expected), "{expected:?} not in {rules:?}");
    }
    assert!(
        found
            .iter()
            .all(|v| !v.message.is_empty() && RULES.iter().any(|(n, _)| *n == v.rule)),
        "{found:?}"
    );
}

#[test]
fn a_violation_reads_rule_resource_message() {
    let v = Violation {
        rule: "max-receive-count",
        resource: "ChargePaymentQueue".into(),
        message: "maxReceiveCount is 2, needs >= 5".into(),
    };
    assert_eq!(
        v.to_string(),
        "[max-receive-count] ChargePaymentQueue: maxReceiveCount is 2, needs >= 5"
    );
}

// ------------------------------------------------------------------------------------------------ nested applications

/// A folder of template files for one test (removed when dropped).
struct Files(PathBuf);

impl Files {
    fn new(test: &str, files: &[(&str, &str)]) -> Self {
        let root =
            std::env::temp_dir().join(format!("sqsafe-nested-{test}-{}", std::process::id()));
        for (path, text) in files {
            let path = root.join(path);
            std::fs::create_dir_all(path.parent().expect("a folder")).expect("mkdir");
            std::fs::write(path, text).expect("write");
        }
        Self(root)
    }

    fn flatten(&self, parent: &str) -> Result<Value, TemplateError> {
        flatten(parse(parent).expect("the parent parses"), &self.0)
    }
}

impl Drop for Files {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

const CHILD: &str = r#"
Parameters:
  Name: {Type: String}
  TopicArn: {Type: String}
  Size: {Type: Number, Default: 262144}
Resources:
  Queue:
    Type: AWS::SQS::Queue
    Properties:
      QueueName: !Sub "${AWS::StackName}-${Name}"
      MaximumMessageSize: !Ref Size
      RedrivePolicy: {deadLetterTargetArn: !GetAtt DeadLetterQueue.Arn, maxReceiveCount: 5}
  DeadLetterQueue:
    Type: AWS::SQS::Queue
    DependsOn: [Queue]
    Properties:
      RedriveAllowPolicy:
        sourceQueueArns: [!Sub "${Queue.Arn}", !Sub ["${Q}/${!Literal}/${Topic}", {Q: !Ref Queue}]]
  Alarm:
    Type: AWS::CloudWatch::Alarm
    Properties:
      AlarmActions: [!Ref TopicArn]
      AlarmDescription: !Sub "${TopicArn} in ${AWS::Region}"
Outputs:
  QueueArn: {Value: !GetAtt Queue.Arn}
  QueueUrl: {Value: !Ref Queue}
  Named: {Value: !Ref Name}
"#;

const PARENT: &str = r#"
Resources:
  Topic: {Type: AWS::SNS::Topic}
  Orders:
    Type: AWS::Serverless::Application
    Properties:
      Location: nested/child.yaml
      Parameters: {Name: orders, TopicArn: !Ref Topic}
  Function:
    Type: AWS::Serverless::Function
    Properties:
      Events: {Q: {Type: SQS, Properties: {Queue: !GetAtt Orders.Outputs.QueueArn}}}
      Environment:
        Variables:
          QUEUE_URL: {"Fn::GetAtt": [Orders, Outputs.QueueUrl]}
          NAME: !GetAtt Orders.Outputs.Named
          ARN: !Sub "${Orders.Outputs.QueueArn}/x"
"#;

#[test]
fn a_local_nested_application_is_inlined_renamed_with_its_parameters_and_outputs() {
    let files = Files::new("inline", &[("nested/child.yaml", CHILD)]);
    let flat = files.flatten(PARENT).expect("flattens");
    let expected = yaml(
        r#"
Resources:
  Topic: {Type: AWS::SNS::Topic}
  OrdersQueue:
    Type: AWS::SQS::Queue
    Properties:
      QueueName: !Sub "${AWS::StackName}-orders"
      MaximumMessageSize: 262144
      RedrivePolicy: {deadLetterTargetArn: !GetAtt OrdersDeadLetterQueue.Arn, maxReceiveCount: 5}
  OrdersDeadLetterQueue:
    Type: AWS::SQS::Queue
    DependsOn: [OrdersQueue]
    Properties:
      RedriveAllowPolicy:
        sourceQueueArns: [!Sub "${OrdersQueue.Arn}", !Sub ["${Q}/${!Literal}/${Topic}", {Q: !Ref OrdersQueue}]]
  OrdersAlarm:
    Type: AWS::CloudWatch::Alarm
    Properties:
      AlarmActions: [!Ref Topic]
      AlarmDescription: !Sub "${Topic} in ${AWS::Region}"
  Function:
    Type: AWS::Serverless::Function
    Properties:
      Events: {Q: {Type: SQS, Properties: {Queue: !GetAtt OrdersQueue.Arn}}}
      Environment:
        Variables:
          QUEUE_URL: !Ref OrdersQueue
          NAME: orders
          ARN: !Sub "${OrdersQueue.Arn}/x"
"#,
    );
    assert_eq!(flat, expected);
}

#[test]
fn nested_applications_nest() {
    let outer = r#"
Parameters:
  Name: {Type: String}
Resources:
  Inner:
    Type: AWS::CloudFormation::Stack
    Properties:
      TemplateURL: inner/child.yaml
      Parameters: {Name: !Sub "${Name}-inner", TopicArn: arn:aws:sns:us-east-1:123456789012:t}
Outputs:
  QueueArn: {Value: !GetAtt Inner.Outputs.QueueArn}
"#;
    let files = Files::new(
        "nest",
        &[("outer.yaml", outer), ("inner/child.yaml", CHILD)],
    );
    let parent = "Resources:\n  App:\n    Type: AWS::Serverless::Application\n    Properties:\n      \
                  Location: outer.yaml\n      Parameters: {Name: a}\n  Use:\n    Type: X\n    Properties: \
                  {Arn: !GetAtt App.Outputs.QueueArn}\n";
    let flat = files.flatten(parent).expect("flattens");
    let t = template::Template::new(&flat);
    let ids: Vec<&str> = t.resources().map(|(id, _)| id).collect();
    assert_eq!(
        ids,
        [
            "AppInnerQueue",
            "AppInnerDeadLetterQueue",
            "AppInnerAlarm",
            "Use"
        ]
    );
    assert_eq!(
        t.prop("AppInnerQueue", "QueueName"),
        // The inner Name was a Sub of the outer's parameter when it was put in: it stays a variable.
        Some(&yaml(
            r#"!Sub ["${AWS::StackName}-${Name}", {Name: !Sub "a-inner"}]"#
        ))
    );
    assert_eq!(
        t.prop("Use", "Arn"),
        Some(&yaml("!GetAtt AppInnerQueue.Arn"))
    );
}

fn refused(test: &str, child: &str, parent: &str) -> String {
    let files = Files::new(test, &[("nested/child.yaml", child)]);
    match files.flatten(parent) {
        Ok(flat) => panic!("flattened: {flat:?}"),
        Err(e) => e.0,
    }
}

#[test]
fn what_cannot_be_inlined_is_refused_by_name() {
    let no_name = PARENT.replace("Name: orders, ", "");
    assert!(
        refused("param", CHILD, &no_name)
            .starts_with("nested application Orders: parameter Name of "),
        "{}",
        refused("param", CHILD, &no_name)
    );
    let conditions = format!("Conditions:\n  Yes: !Equals [a, a]\n{CHILD}");
    assert_eq!(
        refused("cond", &conditions, PARENT).split(" (").next(),
        Some("nested application Orders: Conditions are not supported by sqsafe check")
    );
    let missing = PARENT.replace("nested/child.yaml", "nested/gone.yaml");
    let said = refused("missing", CHILD, &missing);
    assert!(
        said.starts_with("nested application Orders: cannot read its template ")
            && said.contains("gone.yaml"),
        "{said}"
    );
    let no_output = CHILD.replace("QueueUrl: {Value: !Ref Queue}", "");
    assert!(
        refused("output", &no_output, PARENT)
            .starts_with("nested application Orders has no output QueueUrl"),
    );
    let unknown = PARENT.replace("Name: orders,", "Name: orders, Colour: blue,");
    assert!(refused("unknown", CHILD, &unknown).contains("passes parameter Colour"));
    let itself = CHILD.replacen(
        "Resources:\n",
        "Resources:\n  Again: {Type: AWS::Serverless::Application, Properties: {Location: child.yaml}}\n",
        1,
    );
    assert!(refused("itself", &itself, PARENT).contains("nests itself"));
}

#[test]
fn an_application_elsewhere_is_left_in_place_and_reported() {
    for location in [
        "https://s3.amazonaws.com/bucket/child.yaml",
        "{ApplicationId: 'arn:aws:serverlessrepo:us-east-1:123456789012:applications/x', SemanticVersion: 1.0.0}",
    ] {
        let parent = PARENT.replace("nested/child.yaml", location);
        let files = Files::new("elsewhere", &[]);
        let flat = files.flatten(&parent).expect("left in place");
        assert!(template::Template::new(&flat).is_type("Orders", "AWS::Serverless::Application"));
        let found = check(&flat, &BTreeMap::new());
        let nested: Vec<String> = found
            .iter()
            .filter(|v| v.rule == "nested-application")
            .map(ToString::to_string)
            .collect();
        assert_eq!(nested.len(), 1, "{found:?}");
        assert!(
            nested[0].starts_with(
                "[nested-application] Orders: cannot check nested application Orders at "
            ) && nested[0].ends_with(": only local template files are read"),
            "{nested:?}"
        );
    }
}

/// template.yaml with a Kinesis consumer, ship-order, wired as the stream-consumer rule wants it
/// (testdata/stream_consumers.yaml), and the crates with ship-order's.
fn with_stream_consumer() -> (Value, BTreeMap<String, String>) {
    let mut doc = template();
    let added = yaml(include_str!("testdata/stream_consumers.yaml"));
    let resources = doc["Resources"].as_mapping_mut().expect("resources");
    for (id, resource) in added.as_mapping().expect("resources to add") {
        resources.insert(id.clone(), resource.clone());
    }
    let mut crates = crates();
    crates.insert("ship-order".into(), "functions/ship-order".into());
    (doc, crates)
}

fn violations(doc: &Value, crates: &BTreeMap<String, String>) -> String {
    let found = check(doc, crates);
    found
        .iter()
        .map(ToString::to_string)
        .collect::<Vec<_>>()
        .join("\n")
}

const SHIP_ORDER_MAPPING: &str = "ShipOrderFunction.Events.Stream";

fn stream_event(doc: &mut Value) -> &mut Value {
    &mut doc["Resources"]["ShipOrderFunction"]["Properties"]["Events"]["Stream"]["Properties"]
}

#[test]
fn a_kinesis_consumer_wired_as_the_rule_wants_it_passes() {
    let (doc, crates) = with_stream_consumer();
    let found = violations(&doc, &crates);
    assert!(found.is_empty(), "{found}");
}

#[test]
fn each_way_a_stream_consumer_can_block_or_lose_records_is_caught() {
    type Break = fn(&mut Value);
    let breaks: [(&str, Break, &str, &str); 12] = [
        (
            "no ReportBatchItemFailures",
            |d| {
                stream_event(d)
                    .as_mapping_mut()
                    .expect("event")
                    .remove("FunctionResponseTypes");
            },
            "stream-consumer",
            SHIP_ORDER_MAPPING,
        ),
        (
            "no bisection",
            |d| stream_event(d)["BisectBatchOnFunctionError"] = Value::from(false),
            "stream-consumer",
            SHIP_ORDER_MAPPING,
        ),
        (
            "retries forever",
            |d| stream_event(d)["MaximumRetryAttempts"] = Value::from(-1),
            "stream-consumer",
            SHIP_ORDER_MAPPING,
        ),
        (
            "retries unset (infinite)",
            |d| {
                stream_event(d)
                    .as_mapping_mut()
                    .expect("event")
                    .remove("MaximumRetryAttempts");
            },
            "stream-consumer",
            SHIP_ORDER_MAPPING,
        ),
        (
            "records kept forever",
            |d| stream_event(d)["MaximumRecordAgeInSeconds"] = Value::from(-1),
            "stream-consumer",
            SHIP_ORDER_MAPPING,
        ),
        (
            "no on-failure destination",
            |d| {
                stream_event(d)
                    .as_mapping_mut()
                    .expect("event")
                    .remove("DestinationConfig");
            },
            "stream-consumer",
            SHIP_ORDER_MAPPING,
        ),
        (
            "dead letters in the on-failure queue",
            |d| {
                d["Resources"]["ShipOrderFunction"]["Properties"]["Environment"]["Variables"]["DLQ_URL"] =
                    yaml("!Ref ShipOrderOnFailureQueue");
            },
            "stream-consumer",
            "ShipOrderFunction",
        ),
        (
            "a window shorter than a record's retries",
            |d| {
                d["Resources"]["ShipOrderFunction"]["Properties"]["Environment"]["Variables"]["IDEMPOTENCY_WINDOW_DAYS"] =
                    Value::from("1");
            },
            "stream-consumer",
            "ShipOrderFunction",
        ),
        (
            "no IteratorAge alarm",
            |d| {
                d["Resources"]
                    .as_mapping_mut()
                    .expect("resources")
                    .remove("ShipOrderIteratorAgeAlarm");
            },
            "alarm-stream-age",
            "ShipOrderFunction",
        ),
        (
            "no alarm on the failure queue",
            |d| {
                d["Resources"]
                    .as_mapping_mut()
                    .expect("resources")
                    .remove("ShipOrderFailureQueueAlarm");
            },
            "alarm-dlq",
            "ShipOrderFailureQueue",
        ),
        (
            "the poller's GetRecords not granted",
            |d| {
                statements(d, "ShipOrderRole")[1]["Action"] = yaml(
                    "[kinesis:DescribeStream, kinesis:DescribeStreamSummary, kinesis:GetShardIterator, \
                     kinesis:ListShards]",
                );
            },
            "permissions",
            "ShipOrderRole",
        ),
        (
            "the stream's actions on every stream",
            |d| statements(d, "ShipOrderRole")[1]["Resource"] = Value::from("*"),
            "least-privilege",
            "ShipOrderRole",
        ),
    ];
    for (how, broken, rule, resource) in breaks {
        let (mut doc, crates) = with_stream_consumer();
        broken(&mut doc);
        let found = check(&doc, &crates);
        assert!(
            found
                .iter()
                .any(|v| v.rule == rule && v.resource == resource),
            "{how}: expected [{rule}] {resource}; found:\n{}",
            violations(&doc, &crates)
        );
    }
}

#[test]
fn a_dynamodb_stream_consumer_is_held_to_the_consumer_rule_not_the_relays() {
    let (mut doc, crates) = with_stream_consumer();
    let resources = doc["Resources"].as_mapping_mut().expect("resources");
    resources.insert(
        Value::from("OrdersTable"),
        yaml(
            "Type: AWS::DynamoDB::Table\n\
             Properties:\n  BillingMode: PAY_PER_REQUEST\n  \
             AttributeDefinitions: [{ AttributeName: pk, AttributeType: S }]\n  \
             KeySchema: [{ AttributeName: pk, KeyType: HASH }]\n  \
             StreamSpecification: { StreamViewType: NEW_AND_OLD_IMAGES }\n  \
             SSESpecification: { SSEEnabled: true }\n  \
             PointInTimeRecoverySpecification: { PointInTimeRecoveryEnabled: true }\n",
        ),
    );
    resources.remove("OrdersStream");
    let event = &mut doc["Resources"]["ShipOrderFunction"]["Properties"]["Events"]["Stream"];
    event["Type"] = Value::from("DynamoDB");
    event["Properties"]["Stream"] = yaml("!GetAtt OrdersTable.StreamArn");
    statements(&mut doc, "ShipOrderRole")[1] = yaml(
        "Effect: Allow\n\
         Action: [dynamodb:DescribeStream, dynamodb:GetRecords, dynamodb:GetShardIterator, dynamodb:ListStreams]\n\
         Resource: !GetAtt OrdersTable.StreamArn\n",
    );
    // Ten retries and a day's age: the relay's rule would want -1 for both; a consumer's wants them bounded.
    let found = violations(&doc, &crates);
    assert!(found.is_empty(), "{found}");

    stream_event(&mut doc)["MaximumRetryAttempts"] = Value::from(-1);
    caught_with(&doc, &crates, "stream-consumer", SHIP_ORDER_MAPPING);
}

#[test]
fn a_raw_kinesis_mapping_is_held_to_the_stream_consumer_rule() {
    let (mut doc, crates) = with_stream_consumer();
    let mut mapping = stream_event(&mut doc).clone();
    let props = mapping.as_mapping_mut().expect("mapping");
    let stream = props.remove("Stream").expect("Stream");
    props.insert(Value::from("EventSourceArn"), stream);
    props.insert(Value::from("FunctionName"), yaml("!Ref ShipOrderFunction"));
    props.remove("BisectBatchOnFunctionError");
    doc["Resources"]
        .as_mapping_mut()
        .expect("resources")
        .insert(
            Value::from("RawKinesisMapping"),
            yaml("Type: AWS::Lambda::EventSourceMapping"),
        );
    doc["Resources"]["RawKinesisMapping"]["Properties"] = mapping;
    caught_with(&doc, &crates, "stream-consumer", "RawKinesisMapping");
    // Not read as an SQS mapping (which would want ScalingConfig.MaximumConcurrency).
    assert!(
        !check(&doc, &crates)
            .iter()
            .any(|v| v.resource == "RawKinesisMapping" && v.rule != "stream-consumer"),
        "{}",
        violations(&doc, &crates)
    );
}
