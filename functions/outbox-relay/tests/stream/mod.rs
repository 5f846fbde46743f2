//! The outbox table's DynamoDB stream as moto server keeps it, delivered the way Lambda's event source mapping would:
//! each batch is what `GetRecords` returns after the last record delivered, in the Lambda event's shape.
//!
//! moto stores the records (one shard) but cannot invoke a function from them, so the tests are the mapping: they
//! read the stream and hand the records to the relay's handler. `GetRecords` records carry no `eventSourceARN` (AWS's
//! do not either; Lambda adds it): it is added here.

use aws_lambda_events::dynamodb::Event;
use aws_sdk_dynamodb::types::{
    AttributeDefinition, BillingMode, GlobalSecondaryIndex, KeySchemaElement, KeyType, Projection,
    ProjectionType, ScalarAttributeType, StreamSpecification, StreamViewType,
};
use aws_sdk_dynamodbstreams::types::{Record, ShardIteratorType};
use serde_json::{Value, json};

/// Creates an outbox table like template.yaml's `OutboxTable`: `pk`/`sk` strings, a `NEW_IMAGE` stream, the sparse
/// index on pending items.
pub(crate) async fn create_outbox_table(dynamodb: &aws_sdk_dynamodb::Client, table: &str) {
    let attribute = |name: &str| {
        AttributeDefinition::builder()
            .attribute_name(name)
            .attribute_type(ScalarAttributeType::S)
            .build()
            .expect("attribute")
    };
    let key = |name: &str, kind| {
        KeySchemaElement::builder()
            .attribute_name(name)
            .key_type(kind)
            .build()
            .expect("key")
    };
    dynamodb
        .create_table()
        .table_name(table)
        .billing_mode(BillingMode::PayPerRequest)
        .attribute_definitions(attribute("pk"))
        .attribute_definitions(attribute("sk"))
        .key_schema(key("pk", KeyType::Hash))
        .key_schema(key("sk", KeyType::Range))
        // The sparse index on pending items, as template.yaml declares it (the sweeper reads it).
        .attribute_definitions(attribute("pending"))
        .attribute_definitions(
            AttributeDefinition::builder()
                .attribute_name("created_at")
                .attribute_type(ScalarAttributeType::N)
                .build()
                .expect("attribute"),
        )
        .global_secondary_indexes(
            GlobalSecondaryIndex::builder()
                .index_name(sqsafe_outbox::PENDING_INDEX)
                .key_schema(key("pending", KeyType::Hash))
                .key_schema(key("created_at", KeyType::Range))
                .projection(
                    Projection::builder()
                        .projection_type(ProjectionType::All)
                        .build(),
                )
                .build()
                .expect("index"),
        )
        .stream_specification(
            StreamSpecification::builder()
                .stream_enabled(true)
                .stream_view_type(StreamViewType::NewImage)
                .build()
                .expect("stream"),
        )
        .send()
        .await
        .expect("create the outbox table in moto");
}

/// A table's stream, read from where the last batch ended.
pub(crate) struct Stream {
    client: aws_sdk_dynamodbstreams::Client,
    arn: String,
    shard: String,
    after: Option<String>,
}

impl Stream {
    /// The stream of `table` (its latest stream, first shard: moto keeps one).
    pub(crate) async fn of_table(
        dynamodb: &aws_sdk_dynamodb::Client,
        client: aws_sdk_dynamodbstreams::Client,
        table: &str,
    ) -> Self {
        let arn = dynamodb
            .describe_table()
            .table_name(table)
            .send()
            .await
            .expect("describe table")
            .table
            .and_then(|t| t.latest_stream_arn)
            .expect("the table has a stream");
        let shard = client
            .describe_stream()
            .stream_arn(&arn)
            .send()
            .await
            .expect("describe stream")
            .stream_description
            .and_then(|d| d.shards)
            .and_then(|s| s.into_iter().next())
            .and_then(|s| s.shard_id)
            .expect("a shard");
        Self {
            client,
            arn,
            shard,
            after: None,
        }
    }

    /// The stream's ARN (the records' `eventSourceARN`).
    #[allow(
        dead_code,
        reason = "the relay's tests use it, traces.rs does not: each test binary compiles this module"
    )]
    pub(crate) fn arn(&self) -> &str {
        &self.arn
    }

    /// Every record written since the last batch, as one Lambda event (possibly empty).
    pub(crate) async fn next_batch(&mut self) -> Event {
        let iterator = self
            .client
            .get_shard_iterator()
            .stream_arn(&self.arn)
            .shard_id(&self.shard);
        let iterator = match &self.after {
            None => iterator.shard_iterator_type(ShardIteratorType::TrimHorizon),
            Some(seq) => iterator
                .shard_iterator_type(ShardIteratorType::AfterSequenceNumber)
                .sequence_number(seq),
        };
        let mut next = iterator
            .send()
            .await
            .expect("shard iterator")
            .shard_iterator;
        let mut records = Vec::new();
        while let Some(it) = next {
            let out = self
                .client
                .get_records()
                .shard_iterator(it)
                .send()
                .await
                .expect("get records");
            let got = out.records.unwrap_or_default();
            if got.is_empty() {
                break;
            }
            records.extend(got);
            next = out.next_shard_iterator;
        }
        if let Some(last) = records
            .last()
            .and_then(|r| r.dynamodb())
            .and_then(|d| d.sequence_number())
        {
            self.after = Some(last.to_owned());
        }
        let records: Vec<Value> = records.iter().map(|r| self.lambda_record(r)).collect();
        serde_json::from_value(json!({ "Records": records })).expect("a DynamoDB stream event")
    }

    /// A `GetRecords` record as it appears in the Lambda event.
    fn lambda_record(&self, r: &Record) -> Value {
        sqsafe_local::esm::dynamodb_stream_record(r, &self.arn)
    }
}
