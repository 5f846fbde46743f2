//! A function fed by a DynamoDB stream (the outbox relay) is part of template.yaml but not of the SQS pipeline: it is
//! read as a stream function (`TemplateSpec::stream_functions`), never as a queue's. Its table and on-failure queue are
//! still created.

use sqsafe_local::stack::{TemplateSpec, template_path};

#[test]
fn the_stream_function_is_not_polled_and_its_resources_are_read() {
    let spec = TemplateSpec::read(&template_path()).expect("template.yaml");
    assert!(
        spec.function_by_binary("outbox-relay").is_none(),
        "no SQS mapping: nothing to poll for it"
    );
    assert!(spec.function_by_binary("charge-payment").is_some());
    let outbox = &spec.tables["OutboxTable"];
    assert_eq!(
        (outbox.partition_key.as_str(), outbox.sort_key.as_deref()),
        ("pk", Some("sk"))
    );
    assert_eq!(outbox.ttl_attribute.as_deref(), Some("expiration"));
    assert!(spec.queues.contains_key("OutboxRelayFailureQueue"));
}

#[test]
fn a_template_with_only_a_stream_function_has_no_function_to_run() {
    let template = r#"
Resources:
  T:
    Type: AWS::DynamoDB::Table
    Properties:
      KeySchema: [{ AttributeName: pk, KeyType: HASH }]
      StreamSpecification: { StreamViewType: NEW_IMAGE }
  F:
    Type: AWS::Serverless::Function
    Metadata: { BuildProperties: { Binary: relay } }
    Properties:
      Events: { Stream: { Type: DynamoDB, Properties: { Stream: !GetAtt T.StreamArn, StartingPosition: TRIM_HORIZON } } }
"#;
    let spec = TemplateSpec::parse(template).expect("a stream function is not an error");
    assert!(spec.functions.is_empty());
    assert!(spec.tables.contains_key("T"));
}
