//! The store's requests: the conditional writes and the reads, each answered in the protocol's terms.

use std::collections::HashMap;
use std::time::{Duration, SystemTime};

use aws_sdk_dynamodb::error::{DisplayErrorContext, ProvideErrorMetadata, SdkError};
use aws_sdk_dynamodb::operation::delete_item::DeleteItemError;
use aws_sdk_dynamodb::operation::put_item::PutItemError;
use aws_sdk_dynamodb::operation::update_item::UpdateItemError;
use aws_sdk_dynamodb::types::{
    AttributeValue, KeysAndAttributes, ReturnValuesOnConditionCheckFailure,
};

use super::item::{
    CLAIM_CONDITION, KEYED_COMPLETION_CONDITION, OWNED_AND_LEASE_EARLIER, OWNED_BY_TOKEN,
    claim_values, n, s,
};
use super::{DynamoDbStore, ITEM_SLACK_BYTES, Item, MAX_ITEM_BYTES};
use crate::clock::epoch_secs;
use crate::error::{BoxError, Error, Result};
use crate::key::IdempotencyKey;
use crate::protocol::Status;
use crate::record::{Completion, IdempotencyRecord, StoredResult};
use crate::store::{ClaimAttempt, FencedWrite, IdempotencyStore};

/// `BatchGetItem` takes at most this many keys a request.
const BATCH_GET_KEYS: usize = 100;
/// Rounds of `BatchGetItem` for the keys DynamoDB left unprocessed (throttled) before the read fails as transient.
const BATCH_GET_ROUNDS: u32 = 5;
/// The pause before the first round again; doubled each round.
const BATCH_GET_BACKOFF: Duration = Duration::from_millis(25);

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
