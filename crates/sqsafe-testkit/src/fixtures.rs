use std::sync::atomic::{AtomicU64, Ordering};

use aws_config::SdkConfig;
use aws_sdk_dynamodb::types::{
    AttributeDefinition, BillingMode, KeySchemaElement, KeyType, ScalarAttributeType,
    StreamSpecification, StreamViewType, TimeToLiveSpecification,
};
use aws_sdk_sqs::types::QueueAttributeName;

use crate::RequestCounter;

/// The local AWS endpoint: `SQSAFE_TEST_ENDPOINT`, else `AWS_ENDPOINT_URL`.
///
/// # Panics
/// When neither is set, with a message that says how to start the server (`make test`, or `make moto`).
pub fn endpoint() -> String {
    std::env::var("SQSAFE_TEST_ENDPOINT").or_else(|_| std::env::var("AWS_ENDPOINT_URL")).unwrap_or_else(|_| {
        panic!(
            "SQSAFE_TEST_ENDPOINT (or AWS_ENDPOINT_URL) must point at a running moto server: run `make test`, \
             or `make moto` and export what it prints"
        )
    })
}

/// SDK configuration for the local AWS: its endpoint, test credentials, `us-east-1`, the local tools' timeouts
/// (`sqsafe_aws::Timeouts::LOCAL_TOOLS`: moto may queue requests while many tests share it).
pub async fn sdk_config() -> SdkConfig {
    sdk_config_at(&endpoint()).await
}

/// The same for another local endpoint (a proxy in front of the local AWS).
pub async fn sdk_config_at(endpoint: &str) -> SdkConfig {
    sqsafe_aws::local_config_loader(endpoint).load().await
}

/// A DynamoDB client for the local AWS whose requests `counter` counts.
pub async fn dynamodb(counter: &RequestCounter) -> aws_sdk_dynamodb::Client {
    dynamodb_at(&endpoint(), counter).await
}

/// A DynamoDB client for another local endpoint (e.g. sqsafe-test-servers' proxy, which keeps moto's transactions
/// atomic under concurrency) whose requests `counter` counts.
pub async fn dynamodb_at(endpoint: &str, counter: &RequestCounter) -> aws_sdk_dynamodb::Client {
    let config = aws_sdk_dynamodb::config::Builder::from(&sdk_config_at(endpoint).await)
        .interceptor(counter.clone())
        .build();
    aws_sdk_dynamodb::Client::from_conf(config)
}

/// A DynamoDB client for the local AWS whose requests `counter` counts and whose answers `lost` can lose.
pub async fn dynamodb_losing(
    counter: &RequestCounter,
    lost: &crate::LostAnswer,
) -> aws_sdk_dynamodb::Client {
    let config = aws_sdk_dynamodb::config::Builder::from(&sdk_config().await)
        .interceptor(counter.clone())
        .interceptor(lost.clone())
        .build();
    aws_sdk_dynamodb::Client::from_conf(config)
}

/// An SQS client for the local AWS.
pub async fn sqs() -> aws_sdk_sqs::Client {
    aws_sdk_sqs::Client::new(&sdk_config().await)
}

static NAMES: AtomicU64 = AtomicU64::new(0);

/// `prefix-<pid>-<n>`: unique per process and call, so tests share one server without stepping on each other.
pub fn unique_name(prefix: &str) -> String {
    format!(
        "{prefix}-{}-{}",
        std::process::id(),
        NAMES.fetch_add(1, Ordering::SeqCst)
    )
}

/// Creates an on-demand table with a String partition key (and optional String sort key), TTL on `expiration`.
///
/// For a library test's own tables (other key names, a business table). A function's tables and queues, as
/// template.yaml defines them, come from `sqsafe_local::stack::LocalStack::for_function` instead.
///
/// # Panics
/// When the server refuses (a test fixture: failing loudly is the point).
pub async fn create_table(
    client: &aws_sdk_dynamodb::Client,
    table: &str,
    partition_key: &str,
    sort_key: Option<&str>,
) {
    table_request(client, table, partition_key, sort_key)
        .send()
        .await
        .expect("create table in moto");
    client
        .update_time_to_live()
        .table_name(table)
        .time_to_live_specification(
            TimeToLiveSpecification::builder()
                .attribute_name("expiration")
                .enabled(true)
                .build()
                .expect("ttl"),
        )
        .send()
        .await
        .expect("enable TTL in moto");
}

/// Creates an on-demand table with a String partition key and a stream of `view` (no TTL: a stream consumer's test
/// reads every change the test makes, and no other).
///
/// # Panics
/// When the server refuses.
pub async fn create_streamed_table(
    client: &aws_sdk_dynamodb::Client,
    table: &str,
    partition_key: &str,
    view: StreamViewType,
) {
    table_request(client, table, partition_key, None)
        .stream_specification(
            StreamSpecification::builder()
                .stream_enabled(true)
                .stream_view_type(view)
                .build()
                .expect("stream specification"),
        )
        .send()
        .await
        .expect("create table with a stream in moto");
}

/// The `CreateTable` request of an on-demand table with String keys.
fn table_request(
    client: &aws_sdk_dynamodb::Client,
    table: &str,
    partition_key: &str,
    sort_key: Option<&str>,
) -> aws_sdk_dynamodb::operation::create_table::builders::CreateTableFluentBuilder {
    let attribute = |name: &str| {
        AttributeDefinition::builder()
            .attribute_name(name)
            .attribute_type(ScalarAttributeType::S)
            .build()
            .expect("attribute definition")
    };
    let key = |name: &str, kind: KeyType| {
        KeySchemaElement::builder()
            .attribute_name(name)
            .key_type(kind)
            .build()
            .expect("key schema")
    };
    let mut create = client
        .create_table()
        .table_name(table)
        .billing_mode(BillingMode::PayPerRequest)
        .attribute_definitions(attribute(partition_key))
        .key_schema(key(partition_key, KeyType::Hash));
    if let Some(sk) = sort_key {
        create = create
            .attribute_definitions(attribute(sk))
            .key_schema(key(sk, KeyType::Range));
    }
    create
}

/// Creates a queue named `unique_name(prefix)` (FIFO: with the `.fifo` suffix) and returns its URL.
///
/// For a library test's own queues; a function's come from the template (see [`create_table`]).
///
/// # Panics
/// When the server refuses.
pub async fn create_queue(client: &aws_sdk_sqs::Client, prefix: &str, fifo: bool) -> String {
    let name = unique_name(prefix);
    let mut create =
        client
            .create_queue()
            .queue_name(if fifo { format!("{name}.fifo") } else { name });
    if fifo {
        create = create.attributes(QueueAttributeName::FifoQueue, "true");
    }
    create
        .send()
        .await
        .expect("create queue in moto")
        .queue_url
        .expect("queue url")
}

/// The queue's ARN (what an event source mapping puts in each record's `eventSourceARN`).
///
/// # Panics
/// When moto does not answer it.
pub async fn queue_arn(client: &aws_sdk_sqs::Client, queue_url: &str) -> String {
    client
        .get_queue_attributes()
        .queue_url(queue_url)
        .attribute_names(QueueAttributeName::QueueArn)
        .send()
        .await
        .expect("queue attributes")
        .attributes
        .and_then(|a| a.get(&QueueAttributeName::QueueArn).cloned())
        .expect("queue arn")
}

/// Up to 10 messages of the queue, with every message and system attribute, as an event source mapping reads them
/// (`sqsafe_local::esm::sqs_event` turns them into the Lambda event).
///
/// # Panics
/// When moto does not answer.
pub async fn receive(
    client: &aws_sdk_sqs::Client,
    queue_url: &str,
) -> Vec<aws_sdk_sqs::types::Message> {
    client
        .receive_message()
        .queue_url(queue_url)
        .max_number_of_messages(10)
        .message_attribute_names("All")
        .message_system_attribute_names(aws_sdk_sqs::types::MessageSystemAttributeName::All)
        .send()
        .await
        .expect("receive")
        .messages
        .unwrap_or_default()
}

/// The `COMPLETED` idempotency records of `table` (one scan: a test's few records), as DynamoDB holds them.
///
/// # Panics
/// When moto does not answer.
pub async fn completed_records(
    client: &aws_sdk_dynamodb::Client,
    table: &str,
) -> Vec<std::collections::HashMap<String, aws_sdk_dynamodb::types::AttributeValue>> {
    client
        .scan()
        .table_name(table)
        .send()
        .await
        .expect("scan")
        .items
        .unwrap_or_default()
        .into_iter()
        .filter(|item| item_string(item, "status") == "COMPLETED")
        .collect()
}

/// A message attribute's string value, if the message has it.
pub fn message_attribute(message: &aws_sdk_sqs::types::Message, name: &str) -> Option<String> {
    message
        .message_attributes()?
        .get(name)?
        .string_value()
        .map(str::to_owned)
}

/// A received message's attribute as binary: its data type, its binary value, and whether it also has a string value
/// (an attribute has one or the other). `None` when the message has no attribute `name`.
pub fn binary_attribute(
    message: &aws_sdk_sqs::types::Message,
    name: &str,
) -> Option<(String, Option<Vec<u8>>, bool)> {
    let attribute = message.message_attributes()?.get(name)?;
    Some((
        attribute.data_type().to_owned(),
        attribute.binary_value().map(|b| b.as_ref().to_vec()),
        attribute.string_value().is_some(),
    ))
}

/// A field of the sqsafe context a dead-letter copy carries (its `sqsafe.context` attribute, compact JSON): a
/// string as it is, a number as its decimal text. `None` when the message has no context (SQS's redrive policy moved
/// it) or its context lacks the field (left out when unknown, or to fit the DLQ's message size).
///
/// The name is spelled here rather than taken from `sqsafe-batch`, which depends on this crate for its tests: a test
/// that reads it checks the format a DLQ holds.
pub fn dlq_context(message: &aws_sdk_sqs::types::Message, field: &str) -> Option<String> {
    let context: serde_json::Value =
        serde_json::from_str(&message_attribute(message, "sqsafe.context")?).ok()?;
    match context.get(field)? {
        serde_json::Value::String(s) => Some(s.clone()),
        other => Some(other.to_string()),
    }
}

/// An item's string attribute (`S`), empty when absent or of another type.
pub fn item_string(
    item: &std::collections::HashMap<String, aws_sdk_dynamodb::types::AttributeValue>,
    name: &str,
) -> String {
    item.get(name)
        .and_then(|v| v.as_s().ok())
        .cloned()
        .unwrap_or_default()
}
