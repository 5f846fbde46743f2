//! What the idempotency layer's test binaries (api.rs, api_logs.rs, api_traces.rs) set up alike.

use sqsafe::layers::idempotency::{DynamoDbStore, Idempotency};
use sqsafe_testkit::{RequestCounter, create_table, dynamodb, unique_name};

/// The `orders-api` records (version 1) on a table of their own in moto, named after `prefix`; `requests` counts the
/// DynamoDB requests made.
pub(crate) async fn orders_api_on_moto(
    requests: &RequestCounter,
    prefix: &str,
) -> Idempotency<DynamoDbStore> {
    let client = dynamodb(requests).await;
    let table = unique_name(prefix);
    create_table(&client, &table, "pk", None).await;
    let store = DynamoDbStore::builder(client, table)
        .build()
        .expect("store");
    Idempotency::builder(store, "orders-api", 1)
        .build()
        .expect("idempotency")
}
