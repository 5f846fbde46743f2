//! What the idempotency layer's test binaries (facade/api.rs, api_logs.rs, api_traces.rs) set up alike.

#![allow(dead_code, unreachable_pub)]

use std::collections::HashMap;

use aws_sdk_dynamodb::types::AttributeValue;
use sqsafe::layers::idempotency::{DynamoDbStore, Idempotency, IdempotencyBuilder};
use sqsafe_testkit::{RequestCounter, create_table, dynamodb, unique_name};

/// The `orders-api` records (version 1) on a table of their own in moto, named after `prefix`; `requests` counts the
/// DynamoDB requests made.
pub(crate) async fn orders_api_on_moto(
    requests: &RequestCounter,
    prefix: &str,
) -> Idempotency<DynamoDbStore> {
    OrdersTable::create(requests, prefix)
        .await
        .engine("orders-api", 1, |b| b)
}

/// A table of its own in moto for the layer's records, and a client of it.
pub(crate) struct OrdersTable {
    pub(crate) client: aws_sdk_dynamodb::Client,
    pub(crate) name: String,
}

impl OrdersTable {
    pub(crate) async fn create(requests: &RequestCounter, prefix: &str) -> Self {
        let client = dynamodb(requests).await;
        let name = unique_name(prefix);
        create_table(&client, &name, "pk", None).await;
        Self { client, name }
    }

    /// An engine on the table, its records named `name` at `version`, built with what `build` adds.
    pub(crate) fn engine(
        &self,
        name: &str,
        version: u32,
        build: impl FnOnce(IdempotencyBuilder<DynamoDbStore>) -> IdempotencyBuilder<DynamoDbStore>,
    ) -> Idempotency<DynamoDbStore> {
        let store = DynamoDbStore::builder(self.client.clone(), self.name.clone())
            .build()
            .expect("store");
        build(Idempotency::builder(store, name, version))
            .build()
            .expect("idempotency")
    }

    /// Every record of the table, as DynamoDB holds it.
    pub(crate) async fn records(&self) -> Vec<HashMap<String, AttributeValue>> {
        self.client
            .scan()
            .table_name(&self.name)
            .send()
            .await
            .expect("scan")
            .items
            .unwrap_or_default()
    }
}
