//! Shared test fixtures: a moto-backed DynamoDB client that counts its requests, and deterministic clocks and tokens.
#![allow(dead_code, unreachable_pub, missing_docs)]

pub mod scenarios;

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use aws_sdk_dynamodb::Client;
use aws_sdk_dynamodb::types::{
    AttributeDefinition, BillingMode, KeySchemaElement, KeyType, ScalarAttributeType,
    TimeToLiveSpecification,
};
use aws_smithy_runtime_api::box_error::BoxError;
use aws_smithy_runtime_api::client::interceptors::Intercept;
use aws_smithy_runtime_api::client::interceptors::context::BeforeTransmitInterceptorContextRef;
use aws_smithy_runtime_api::client::orchestrator::Metadata;
use aws_smithy_runtime_api::client::runtime_components::RuntimeComponents;
use aws_smithy_types::config_bag::ConfigBag;
use sqsafe_idempotency::{Idempotency, IdempotencyBuilder, IdempotencyStore, ManualClock};

/// 2027-01-15T08:00:00Z: far from any epoch edge.
pub const T0_MS: u64 = 1_800_000_000_000;

/// The moto endpoint. A test that needs it fails loudly when it is not set: run the suite with `make test`.
pub fn endpoint() -> String {
    std::env::var("SQSAFE_TEST_ENDPOINT").or_else(|_| std::env::var("AWS_ENDPOINT_URL")).expect(
        "SQSAFE_TEST_ENDPOINT (or AWS_ENDPOINT_URL) must point at a running moto server: run `make test`, \
         or `make moto` and export what it prints",
    )
}

/// Counts the HTTP requests a client really sends (retries included), by operation name.
#[derive(Debug, Clone, Default)]
pub struct RequestCounter(Arc<Mutex<Vec<String>>>);

impl RequestCounter {
    pub fn take(&self) -> Vec<String> {
        std::mem::take(&mut *self.0.lock().expect("counter lock"))
    }
}

impl Intercept for RequestCounter {
    fn name(&self) -> &'static str {
        "RequestCounter"
    }

    fn read_before_transmit(
        &self,
        _context: &BeforeTransmitInterceptorContextRef<'_>,
        _runtime_components: &RuntimeComponents,
        cfg: &mut ConfigBag,
    ) -> Result<(), BoxError> {
        let name = cfg
            .load::<Metadata>()
            .map(|m| m.name().to_owned())
            .unwrap_or_else(|| "?".into());
        self.0.lock().expect("counter lock").push(name);
        Ok(())
    }
}

pub async fn dynamodb_client(counter: &RequestCounter) -> Client {
    let shared = sqsafe_aws::config_loader()
        .endpoint_url(endpoint())
        .region(aws_config::Region::new("us-east-1"))
        .credentials_provider(aws_sdk_dynamodb::config::Credentials::for_tests())
        .load()
        .await;
    let config = aws_sdk_dynamodb::config::Builder::from(&shared)
        .interceptor(counter.clone())
        .timeout_config(
            aws_config::timeout::TimeoutConfig::builder()
                .operation_attempt_timeout(Duration::from_secs(10))
                .build(),
        )
        .build();
    Client::from_conf(config)
}

static TABLES: AtomicU64 = AtomicU64::new(0);

/// A fresh table name per test, so tests run in parallel against one moto server.
pub fn table_name(prefix: &str) -> String {
    let n = TABLES.fetch_add(1, Ordering::SeqCst);
    format!("{prefix}-{}-{n}", std::process::id())
}

/// Creates an on-demand table keyed like the store's defaults (`pk`, optionally a sort key), TTL on `expiration`.
pub async fn create_table(
    client: &Client,
    table: &str,
    partition_key: &str,
    sort_key: Option<&str>,
) {
    let mut create = client
        .create_table()
        .table_name(table)
        .billing_mode(BillingMode::PayPerRequest)
        .attribute_definitions(
            AttributeDefinition::builder()
                .attribute_name(partition_key)
                .attribute_type(ScalarAttributeType::S)
                .build()
                .expect("attribute"),
        )
        .key_schema(
            KeySchemaElement::builder()
                .attribute_name(partition_key)
                .key_type(KeyType::Hash)
                .build()
                .expect("key"),
        );
    if let Some(sk) = sort_key {
        create = create
            .attribute_definitions(
                AttributeDefinition::builder()
                    .attribute_name(sk)
                    .attribute_type(ScalarAttributeType::S)
                    .build()
                    .expect("attribute"),
            )
            .key_schema(
                KeySchemaElement::builder()
                    .attribute_name(sk)
                    .key_type(KeyType::Range)
                    .build()
                    .expect("key"),
            );
    }
    create.send().await.expect("create table in moto");
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

/// Tokens `tok-1`, `tok-2`, … in claim order.
pub fn counting_tokens() -> impl Fn() -> String + Send + Sync + 'static {
    let n = AtomicU64::new(0);
    move || format!("tok-{}", n.fetch_add(1, Ordering::SeqCst) + 1)
}

/// A builder with a manual clock at [`T0_MS`] and counting tokens.
pub fn builder<S: IdempotencyStore>(store: S, clock: &ManualClock) -> IdempotencyBuilder<S> {
    Idempotency::builder(store, "charge-payment", 1)
        .clock(clock.clone())
        .tokens(counting_tokens())
}
