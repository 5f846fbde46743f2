use std::collections::HashMap;
use std::time::{Duration, SystemTime};

use aws_sdk_dynamodb::Client;
use aws_sdk_dynamodb::error::{DisplayErrorContext, ProvideErrorMetadata, SdkError};
use aws_sdk_dynamodb::operation::delete_item::DeleteItemError;
use aws_sdk_dynamodb::operation::put_item::PutItemError;
use aws_sdk_dynamodb::operation::update_item::UpdateItemError;
use aws_sdk_dynamodb::types::{
    AttributeValue, KeysAndAttributes, ReturnValuesOnConditionCheckFailure,
};

use super::{ClaimAttempt, FencedWrite, IdempotencyStore};
use crate::clock::epoch_secs;
use crate::error::{BoxError, Error, Result};
use crate::fingerprint::Fingerprint;
use crate::key::IdempotencyKey;
use crate::protocol::Status;
use crate::record::{Completion, IdempotencyRecord, StoredResult, takeover_cutoff_ms};

/// DynamoDB's item size limit: 400 KB, counting attribute names and values.
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

pub(crate) fn s(v: impl Into<String>) -> AttributeValue {
    AttributeValue::S(v.into())
}

pub(crate) fn n(v: impl ToString) -> AttributeValue {
    AttributeValue::N(v.to_string())
}

/// Claimable: no record; or expired (TTL deletion lags up to ~48 h, so the condition checks it); or an IN_PROGRESS
/// claim of the same content whose lease has passed (its owner crashed or timed out) by more than the takeover margin
/// (`:now_ms` is now minus the margin). Other content is never taken over: it is refused, and the old item makes it a
/// payload mismatch. Same rule as `protocol::claim_lands`.
pub(crate) const CLAIM_CONDITION: &str = "attribute_not_exists(#pk) OR #expiration < :now_s OR (#status = :in_progress AND #lease < :now_ms AND #fingerprint = :fingerprint)";

/// The keyed mode's completion lands on no record, an expired one, or an in-progress one of the same content. Same
/// rule as `protocol::keyed_completion_lands`.
pub(crate) const KEYED_COMPLETION_CONDITION: &str = "attribute_not_exists(#pk) OR #expiration < :now_s OR (#status = :in_progress AND #fingerprint = :fingerprint)";

/// `BatchGetItem` takes at most this many keys a request.
const BATCH_GET_KEYS: usize = 100;
/// Rounds of `BatchGetItem` for the keys DynamoDB left unprocessed (throttled) before the read fails as transient.
const BATCH_GET_ROUNDS: u32 = 5;
/// The pause before the first round again; doubled each round.
const BATCH_GET_BACKOFF: Duration = Duration::from_millis(25);

// Placeholders are fixed; attribute names are bound to them, so configured names need no escaping.
const OWNED_BY_TOKEN: &str = "#token = :token AND #status = :in_progress";

/// Extending is fenced like the other writes and never moves a lease backwards:
///
/// ```text
///  claim ── lease L ──┤            extend(L2 > L): lease L2 ──────┤
///                     extend(L1 <= current lease): refused, lease unchanged (a late heartbeat cannot shorten it)
/// ```
/// The record's expiration moves with the lease, so it never expires under a live one.
const OWNED_AND_LEASE_EARLIER: &str =
    "#token = :token AND #status = :in_progress AND #lease < :lease";

impl DynamoDbStore {
    pub(crate) fn key_item(&self, key: &IdempotencyKey) -> Item {
        let mut item = Item::with_capacity(2);
        item.insert(self.names.partition_key.clone(), s(key.as_str()));
        if let Some((sk, value)) = &self.sort_key {
            item.insert(sk.clone(), s(value));
        }
        item
    }

    pub(crate) fn claim_names(&self) -> HashMap<String, String> {
        let names = &self.names;
        HashMap::from([
            ("#pk".to_owned(), names.partition_key.clone()),
            ("#expiration".to_owned(), names.expiration.clone()),
            ("#status".to_owned(), names.status.clone()),
            ("#lease".to_owned(), names.lease_expires_at.clone()),
            ("#fingerprint".to_owned(), names.fingerprint.clone()),
        ])
    }

    pub(crate) fn record_item(&self, r: &IdempotencyRecord) -> Item {
        let names = &self.names;
        let mut item = self.key_item(&r.key);
        item.insert(names.status.clone(), s(r.status.as_str()));
        item.insert(names.expiration.clone(), n(r.expiration));
        if let Some(lease) = r.lease_expires_at {
            item.insert(names.lease_expires_at.clone(), n(lease));
        }
        item.insert(names.token.clone(), s(&r.token));
        item.insert(names.fingerprint.clone(), s(r.fingerprint.as_str()));
        match &r.result {
            None => {}
            Some(StoredResult::Json(json)) => {
                item.insert(names.result.clone(), s(json));
            }
            Some(StoredResult::Omitted { digest, size }) => {
                item.insert(names.result_digest.clone(), s(digest));
                item.insert(names.result_size.clone(), n(size));
            }
        }
        item.insert(names.consumer.clone(), s(&r.consumer));
        item.insert(names.consumer_version.clone(), n(r.consumer_version));
        item.insert(names.attempt.clone(), n(r.attempt));
        item.insert(names.created_at.clone(), n(r.created_at));
        if let Some(id) = &r.correlation_id {
            item.insert(names.correlation_id.clone(), s(id));
        }
        item
    }

    pub(crate) fn parse_item(
        &self,
        key: &IdempotencyKey,
        item: &Item,
    ) -> Result<IdempotencyRecord> {
        let names = &self.names;
        let bad = |detail: String| Error::Inconsistent {
            key: key.to_string(),
            detail,
        };
        let text = |name: &str| -> Option<&str> {
            item.get(name)
                .and_then(|v| v.as_s().ok())
                .map(String::as_str)
        };
        let num = |name: &str| -> Result<Option<u64>> {
            match item.get(name) {
                None => Ok(None),
                Some(AttributeValue::N(v)) => v
                    .parse()
                    .map(Some)
                    .map_err(|_| bad(format!("attribute `{name}` is not a whole number: {v}"))),
                Some(other) => Err(bad(format!(
                    "attribute `{name}` is not a number: {other:?}"
                ))),
            }
        };
        let required_num =
            |name: &str| num(name)?.ok_or_else(|| bad(format!("attribute `{name}` is missing")));
        let status_text = text(&names.status)
            .ok_or_else(|| bad(format!("attribute `{}` is missing", names.status)))?;
        let status = Status::parse(status_text)
            .ok_or_else(|| bad(format!("unknown status `{status_text}`")))?;
        let result = match (text(&names.result), text(&names.result_digest)) {
            (Some(json), _) => Some(StoredResult::Json(json.to_owned())),
            (None, Some(digest)) => Some(StoredResult::Omitted {
                digest: digest.to_owned(),
                size: num(&names.result_size)?.unwrap_or(0),
            }),
            (None, None) => None,
        };
        let small = |name: &str| -> Result<u32> {
            u32::try_from(num(name)?.unwrap_or(0))
                .map_err(|_| bad(format!("attribute `{name}` is out of range")))
        };
        Ok(IdempotencyRecord {
            key: key.clone(),
            status,
            expiration: required_num(&names.expiration)?,
            lease_expires_at: num(&names.lease_expires_at)?,
            token: text(&names.token).unwrap_or_default().to_owned(),
            fingerprint: Fingerprint::from_stored(text(&names.fingerprint).unwrap_or_default()),
            result,
            consumer: text(&names.consumer).unwrap_or_default().to_owned(),
            consumer_version: small(&names.consumer_version)?,
            attempt: small(&names.attempt)?,
            created_at: num(&names.created_at)?.unwrap_or(0),
            correlation_id: text(&names.correlation_id).map(str::to_owned),
        })
    }
}

pub(crate) fn claim_values(
    now: SystemTime,
    takeover_margin: Duration,
    fingerprint: &Fingerprint,
) -> Item {
    HashMap::from([
        (":now_s".to_owned(), n(epoch_secs(now))),
        (
            ":now_ms".to_owned(),
            n(takeover_cutoff_ms(now, takeover_margin)),
        ),
        (":in_progress".to_owned(), s(Status::InProgress.as_str())),
        (":fingerprint".to_owned(), s(fingerprint.as_str())),
    ])
}

/// A failed condition, with the old item when the write asked for it (`ALL_OLD`); any other failure is a store error.
trait ConditionFailed {
    fn old_item(&self) -> Option<Option<&Item>>;
}

impl ConditionFailed for UpdateItemError {
    fn old_item(&self) -> Option<Option<&Item>> {
        match self {
            UpdateItemError::ConditionalCheckFailedException(e) => Some(e.item()),
            _ => None,
        }
    }
}

impl ConditionFailed for PutItemError {
    fn old_item(&self) -> Option<Option<&Item>> {
        match self {
            PutItemError::ConditionalCheckFailedException(e) => Some(e.item()),
            _ => None,
        }
    }
}

impl ConditionFailed for DeleteItemError {
    fn old_item(&self) -> Option<Option<&Item>> {
        match self {
            DeleteItemError::ConditionalCheckFailedException(e) => Some(e.item()),
            _ => None,
        }
    }
}

impl DynamoDbStore {
    fn fenced<E, R>(
        &self,
        operation: &'static str,
        key: &IdempotencyKey,
        result: Result<R, SdkError<E>>,
    ) -> Result<FencedWrite>
    where
        E: ConditionFailed + ProvideErrorMetadata + std::error::Error + Send + Sync + 'static,
    {
        let error = match result {
            Ok(_) => return Ok(FencedWrite::Written),
            Err(e) => e,
        };
        match error.as_service_error().and_then(ConditionFailed::old_item) {
            Some(old) => Ok(FencedWrite::Refused(
                old.map(|item| self.parse_item(key, item)).transpose()?,
            )),
            None => Err(store_error(operation, key, error)),
        }
    }
}

/// A store error that says what happened: the service's error code and message (`ThrottlingException: ...`), or
/// the kind of transport failure (a timeout, an unreachable endpoint), never just "service error".
pub(crate) fn store_error<E>(
    operation: &'static str,
    key: &IdempotencyKey,
    error: SdkError<E>,
) -> Error
where
    E: ProvideErrorMetadata + std::error::Error + Send + Sync + 'static,
{
    let detail = match &error {
        SdkError::ServiceError(service) => {
            let e = service.err();
            match (e.code(), e.message()) {
                (Some(code), Some(message)) => format!("{code}: {message}"),
                (Some(code), None) => code.to_owned(),
                _ => format!("{}", DisplayErrorContext(&error)),
            }
        }
        SdkError::TimeoutError(_) => format!("timed out ({})", DisplayErrorContext(&error)),
        SdkError::DispatchFailure(_) => {
            format!("request not delivered ({})", DisplayErrorContext(&error))
        }
        _ => format!("{}", DisplayErrorContext(&error)),
    };
    Error::store_with_detail(operation, key.as_str(), detail, BoxError::from(error))
}

/// DynamoDB's size of an attribute: its name plus its value (numbers counted by their digits, an overestimate).
fn attribute_bytes(name: &str, value: &AttributeValue) -> usize {
    name.len()
        + match value {
            AttributeValue::S(v) | AttributeValue::N(v) => v.len(),
            _ => 0,
        }
}

impl IdempotencyStore for DynamoDbStore {
    async fn claim(
        &self,
        record: &IdempotencyRecord,
        now: SystemTime,
        takeover_margin: Duration,
    ) -> Result<ClaimAttempt> {
        let outcome = self
            .client
            .put_item()
            .table_name(&self.table)
            .set_item(Some(self.record_item(record)))
            .condition_expression(CLAIM_CONDITION)
            .set_expression_attribute_names(Some(self.claim_names()))
            .set_expression_attribute_values(Some(claim_values(
                now,
                takeover_margin,
                &record.fingerprint,
            )))
            .return_values_on_condition_check_failure(ReturnValuesOnConditionCheckFailure::AllOld)
            .send()
            .await;
        match outcome {
            Ok(_) => Ok(ClaimAttempt::Claimed),
            Err(e) => match e.as_service_error() {
                Some(PutItemError::ConditionalCheckFailedException(failed)) => {
                    match failed.item() {
                        Some(old) => Ok(ClaimAttempt::Existing(self.parse_item(&record.key, old)?)),
                        None => Err(Error::Inconsistent {
                            key: record.key.to_string(),
                            detail: "claim refused but the old item was not returned (ALL_OLD)"
                                .into(),
                        }),
                    }
                }
                _ => Err(store_error("claim", &record.key, e)),
            },
        }
    }

    async fn complete(
        &self,
        key: &IdempotencyKey,
        token: &str,
        completion: &Completion,
    ) -> Result<FencedWrite> {
        let names = &self.names;
        let mut update = self
            .client
            .update_item()
            .table_name(&self.table)
            .set_key(Some(self.key_item(key)))
            .condition_expression(OWNED_BY_TOKEN)
            .return_values_on_condition_check_failure(ReturnValuesOnConditionCheckFailure::AllOld)
            .expression_attribute_names("#token", &names.token)
            .expression_attribute_names("#status", &names.status)
            .expression_attribute_names("#expiration", &names.expiration)
            .expression_attribute_names("#lease", &names.lease_expires_at)
            .expression_attribute_values(":token", s(token))
            .expression_attribute_values(":in_progress", s(Status::InProgress.as_str()))
            .expression_attribute_values(":completed", s(Status::Completed.as_str()))
            .expression_attribute_values(":expiration", n(completion.expiration));
        let set_result = match &completion.result {
            None => "",
            Some(StoredResult::Json(json)) => {
                update = update
                    .expression_attribute_names("#result", &names.result)
                    .expression_attribute_values(":result", s(json));
                ", #result = :result"
            }
            Some(StoredResult::Omitted { digest, size }) => {
                update = update
                    .expression_attribute_names("#digest", &names.result_digest)
                    .expression_attribute_names("#size", &names.result_size)
                    .expression_attribute_values(":digest", s(digest))
                    .expression_attribute_values(":size", n(size));
                ", #digest = :digest, #size = :size"
            }
        };
        let expression = format!(
            "SET #status = :completed, #expiration = :expiration{set_result} REMOVE #lease"
        );
        self.fenced(
            "complete",
            key,
            update.update_expression(expression).send().await,
        )
    }

    async fn extend(
        &self,
        key: &IdempotencyKey,
        token: &str,
        lease_expires_at: u64,
        expiration: u64,
    ) -> Result<FencedWrite> {
        let names = &self.names;
        let outcome = self
            .client
            .update_item()
            .table_name(&self.table)
            .set_key(Some(self.key_item(key)))
            .update_expression("SET #lease = :lease, #expiration = :expiration")
            .condition_expression(OWNED_AND_LEASE_EARLIER)
            .return_values_on_condition_check_failure(ReturnValuesOnConditionCheckFailure::AllOld)
            .expression_attribute_names("#token", &names.token)
            .expression_attribute_names("#status", &names.status)
            .expression_attribute_names("#lease", &names.lease_expires_at)
            .expression_attribute_names("#expiration", &names.expiration)
            .expression_attribute_values(":token", s(token))
            .expression_attribute_values(":in_progress", s(Status::InProgress.as_str()))
            .expression_attribute_values(":lease", n(lease_expires_at))
            .expression_attribute_values(":expiration", n(expiration))
            .send()
            .await;
        self.fenced("extend", key, outcome)
    }

    async fn release(&self, key: &IdempotencyKey, token: &str) -> Result<FencedWrite> {
        let names = &self.names;
        let outcome = self
            .client
            .delete_item()
            .table_name(&self.table)
            .set_key(Some(self.key_item(key)))
            .condition_expression(OWNED_BY_TOKEN)
            .return_values_on_condition_check_failure(ReturnValuesOnConditionCheckFailure::AllOld)
            .expression_attribute_names("#token", &names.token)
            .expression_attribute_names("#status", &names.status)
            .expression_attribute_values(":token", s(token))
            .expression_attribute_values(":in_progress", s(Status::InProgress.as_str()))
            .send()
            .await;
        self.fenced("release", key, outcome)
    }

    fn result_room(&self, record: &IdempotencyRecord) -> Option<usize> {
        let used: usize = self
            .record_item(record)
            .iter()
            .map(|(name, value)| attribute_bytes(name, value))
            .sum();
        let result_name = self.names.result.len();
        Some(MAX_ITEM_BYTES.saturating_sub(used + result_name + ITEM_SLACK_BYTES))
    }

    async fn get_many(
        &self,
        keys: &[IdempotencyKey],
    ) -> Result<HashMap<IdempotencyKey, IdempotencyRecord>> {
        // BatchGetItem refuses a request that names a key twice: each key once (a batch of up to 10,000 records
        // often holds copies of one intent). The map also finds each answered item's key.
        let by_pk: HashMap<&str, &IdempotencyKey> = keys.iter().map(|k| (k.as_str(), k)).collect();
        let unique: Vec<&IdempotencyKey> = by_pk.values().copied().collect();
        let mut found = HashMap::with_capacity(unique.len());
        for chunk in unique.chunks(BATCH_GET_KEYS) {
            let mut pending = KeysAndAttributes::builder()
                .set_keys(Some(chunk.iter().map(|k| self.key_item(k)).collect()))
                .consistent_read(true)
                .build()
                .map_err(|e| {
                    Error::store_with_detail(
                        "get_many",
                        chunk[0].as_str(),
                        format!("the BatchGetItem request could not be built: {e}"),
                        BoxError::from(e),
                    )
                })?;
            let mut backoff = BATCH_GET_BACKOFF;
            for round in 1..=BATCH_GET_ROUNDS {
                let answer = self
                    .client
                    .batch_get_item()
                    .request_items(&self.table, pending.clone())
                    .send()
                    .await
                    .map_err(|e| store_error("get_many", chunk[0], e))?;
                for item in answer
                    .responses()
                    .and_then(|r| r.get(&self.table))
                    .map(Vec::as_slice)
                    .unwrap_or_default()
                {
                    let pk = item
                        .get(&self.names.partition_key)
                        .and_then(|v| v.as_s().ok());
                    let Some(key) = pk.and_then(|pk| by_pk.get(pk.as_str())) else {
                        return Err(Error::Inconsistent {
                            key: chunk[0].to_string(),
                            detail: "BatchGetItem answered an item whose key was not asked for"
                                .into(),
                        });
                    };
                    found.insert((*key).clone(), self.parse_item(key, item)?);
                }
                match answer
                    .unprocessed_keys()
                    .and_then(|u| u.get(&self.table))
                    .filter(|u| !u.keys().is_empty())
                {
                    None => break,
                    Some(_) if round == BATCH_GET_ROUNDS => {
                        return Err(Error::store_with_detail(
                            "get_many",
                            chunk[0].as_str(),
                            format!(
                                "DynamoDB left keys unprocessed after {BATCH_GET_ROUNDS} rounds of BatchGetItem (throttled)"
                            ),
                            BoxError::from("unprocessed keys"),
                        ));
                    }
                    Some(unprocessed) => {
                        pending = unprocessed.clone();
                        tokio::time::sleep(backoff).await;
                        backoff *= 2;
                    }
                }
            }
        }
        Ok(found)
    }

    async fn put_completed(
        &self,
        record: &IdempotencyRecord,
        now: SystemTime,
    ) -> Result<FencedWrite> {
        let mut names = self.claim_names();
        names.remove("#lease");
        let values = HashMap::from([
            (":now_s".to_owned(), n(epoch_secs(now))),
            (":in_progress".to_owned(), s(Status::InProgress.as_str())),
            (":fingerprint".to_owned(), s(record.fingerprint.as_str())),
        ]);
        let outcome = self
            .client
            .put_item()
            .table_name(&self.table)
            .set_item(Some(self.record_item(record)))
            .condition_expression(KEYED_COMPLETION_CONDITION)
            .set_expression_attribute_names(Some(names))
            .set_expression_attribute_values(Some(values))
            .return_values_on_condition_check_failure(ReturnValuesOnConditionCheckFailure::AllOld)
            .send()
            .await;
        self.fenced("put_completed", &record.key, outcome)
    }

    async fn get(&self, key: &IdempotencyKey) -> Result<Option<IdempotencyRecord>> {
        let outcome = self
            .client
            .get_item()
            .table_name(&self.table)
            .set_key(Some(self.key_item(key)))
            .consistent_read(true)
            .send()
            .await
            .map_err(|e| store_error("get", key, e))?;
        outcome
            .item()
            .map(|item| self.parse_item(key, item))
            .transpose()
    }
}
