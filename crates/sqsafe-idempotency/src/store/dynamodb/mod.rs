//! The DynamoDB store: its settings and names here; the item it keeps and the conditions its writes state in
//! `item`; the requests it makes in `ops`.

pub(crate) mod item;
pub(crate) mod ops;

use std::collections::HashMap;

use aws_sdk_dynamodb::Client;
use aws_sdk_dynamodb::types::AttributeValue;

use crate::error::{Error, Result};

const MAX_ITEM_BYTES: usize = 400 * 1024;
/// Kept free in an item besides what is counted: number encoding, a digest in place of the result, rounding.
const ITEM_SLACK_BYTES: usize = 2 * 1024;

pub(crate) type Item = HashMap<String, AttributeValue>;

/// Attribute names of the idempotency record.
///
/// # Default
/// `pk`, `status`, `expiration` (the table's TTL attribute), `lease_expires_at`, `token`, `fingerprint`, `result`,
/// `result_digest`, `result_size`, `consumer`, `consumer_version`, `attempt`, `created_at`, `correlation_id`.
#[derive(Debug, Clone, PartialEq, Eq)]
#[allow(missing_docs)]
pub struct AttributeNames {
    pub partition_key: String,
    pub status: String,
    pub expiration: String,
    pub lease_expires_at: String,
    pub token: String,
    pub fingerprint: String,
    pub result: String,
    pub result_digest: String,
    pub result_size: String,
    pub consumer: String,
    pub consumer_version: String,
    pub attempt: String,
    pub created_at: String,
    pub correlation_id: String,
}

impl Default for AttributeNames {
    fn default() -> Self {
        Self {
            partition_key: "pk".into(),
            status: "status".into(),
            expiration: "expiration".into(),
            lease_expires_at: "lease_expires_at".into(),
            token: "token".into(),
            fingerprint: "fingerprint".into(),
            result: "result".into(),
            result_digest: "result_digest".into(),
            result_size: "result_size".into(),
            consumer: "consumer".into(),
            consumer_version: "consumer_version".into(),
            attempt: "attempt".into(),
            created_at: "created_at".into(),
            correlation_id: "correlation_id".into(),
        }
    }
}

impl AttributeNames {
    fn all(&self) -> [&str; 14] {
        [
            &self.partition_key,
            &self.status,
            &self.expiration,
            &self.lease_expires_at,
            &self.token,
            &self.fingerprint,
            &self.result,
            &self.result_digest,
            &self.result_size,
            &self.consumer,
            &self.consumer_version,
            &self.attempt,
            &self.created_at,
            &self.correlation_id,
        ]
    }
}

/// Idempotency records in a DynamoDB table: one item per key, every write conditional.
///
/// ```no_run
/// # async fn f(client: aws_sdk_dynamodb::Client) -> Result<(), sqsafe_idempotency::Error> {
/// use sqsafe_idempotency::DynamoDbStore;
/// // A table of its own, partition key `pk` (S), TTL on `expiration`:
/// let store = DynamoDbStore::builder(client.clone(), "idempotency").build()?;
/// // Or inside a single-table design: partition key `PK` holds the key, sort key `SK` a fixed value.
/// let store = DynamoDbStore::builder(client, "app").partition_key("PK").sort_key("SK", "IDEMPOTENCY").build()?;
/// # Ok(()) }
/// ```
#[derive(Debug, Clone)]
pub struct DynamoDbStore {
    client: Client,
    table: String,
    names: AttributeNames,
    sort_key: Option<(String, String)>,
}

/// Builds a [`DynamoDbStore`].
#[derive(Debug, Clone)]
pub struct DynamoDbStoreBuilder {
    client: Client,
    table: String,
    names: AttributeNames,
    sort_key: Option<(String, String)>,
}

impl DynamoDbStore {
    /// Starts building a store on `table`.
    pub fn builder(client: Client, table: impl Into<String>) -> DynamoDbStoreBuilder {
        DynamoDbStoreBuilder {
            client,
            table: table.into(),
            names: AttributeNames::default(),
            sort_key: None,
        }
    }

    /// The table name.
    pub fn table(&self) -> &str {
        &self.table
    }

    pub(crate) fn client(&self) -> &Client {
        &self.client
    }

    /// The attribute names in use.
    pub fn attribute_names(&self) -> &AttributeNames {
        &self.names
    }
}

impl DynamoDbStoreBuilder {
    /// Name of the partition key attribute (default `pk`).
    pub fn partition_key(mut self, name: impl Into<String>) -> Self {
        self.names.partition_key = name.into();
        self
    }

    /// Single-table mode: the table also has sort key `name`, and every record carries `value` in it.
    pub fn sort_key(mut self, name: impl Into<String>, value: impl Into<String>) -> Self {
        self.sort_key = Some((name.into(), value.into()));
        self
    }

    /// All attribute names at once.
    pub fn attribute_names(mut self, names: AttributeNames) -> Self {
        self.names = names;
        self
    }

    /// Checks the names (non-empty, distinct) and builds.
    pub fn build(self) -> Result<DynamoDbStore> {
        if self.table.len() < 3 || self.table.len() > 255 {
            return Err(Error::Config(format!(
                "table name `{}` must be 3-255 characters",
                self.table
            )));
        }
        let mut names: Vec<&str> = self.names.all().to_vec();
        if let Some((sk, value)) = &self.sort_key {
            if value.is_empty() {
                return Err(Error::Config("sort key value must not be empty".into()));
            }
            names.push(sk);
        }
        if let Some(empty) = names.iter().position(|n| n.is_empty()) {
            return Err(Error::Config(format!("attribute name #{empty} is empty")));
        }
        let mut sorted = names.clone();
        sorted.sort_unstable();
        if let Some(w) = sorted.windows(2).find(|w| w[0] == w[1]) {
            return Err(Error::Config(format!(
                "attribute name `{}` is used twice",
                w[0]
            )));
        }
        Ok(DynamoDbStore {
            client: self.client,
            table: self.table,
            names: self.names,
            sort_key: self.sort_key,
        })
    }
}
