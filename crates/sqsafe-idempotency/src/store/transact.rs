//! The effect and the idempotency record in one DynamoDB transaction: both are written, or neither.

use std::collections::HashMap;

use aws_sdk_dynamodb::operation::transact_write_items::TransactWriteItemsError;
use aws_sdk_dynamodb::types::{
    AttributeValue, Put, ReturnValuesOnConditionCheckFailure, TransactWriteItem,
};
use serde::Serialize;
use serde::de::DeserializeOwned;

use super::dynamodb::DynamoDbStore;
use super::dynamodb::item::{CLAIM_CONDITION, claim_values};
use super::dynamodb::ops::store_error;
use crate::clock::{duration_millis, epoch_millis};
use crate::engine::{Claim, Idempotency, ReplaySource, Replayed, Request};
use crate::error::{Error, Result};
use crate::protocol;
use crate::protocol::Status;

/// DynamoDB allows 100 items per transaction; the record takes one.
pub const MAX_EFFECT_ITEMS: usize = 99;

/// What [`Idempotency::transact`] did.
#[derive(Debug, Clone, PartialEq)]
pub enum TransactOutcome<T> {
    /// The effect's writes and the `COMPLETED` record were committed together.
    Committed,
    /// The key was already completed with the same content: nothing was written.
    Replayed {
        /// The stored result.
        result: Replayed<T>,
        /// Store or cache.
        source: ReplaySource,
    },
    /// One of the effect's own conditions failed (a business precondition, e.g. insufficient balance): nothing was
    /// written, the key stays free.
    EffectRefused {
        /// Index of the refusing item in the effect's list.
        index: usize,
        /// The item as it was, when its write asked for `ReturnValuesOnConditionCheckFailure = ALL_OLD`.
        item: Option<HashMap<String, AttributeValue>>,
    },
}

impl Idempotency<DynamoDbStore> {
    /// Writes `effect` and the key's `COMPLETED` record (with `result` for replay) in one `TransactWriteItems`.
    ///
    /// The record's `Put` carries the claim condition, so a duplicate cancels the whole transaction; the cancellation
    /// reasons tell a duplicate (reason 0: the record) from a failed business precondition (reason of an effect item).
    /// No `IN_PROGRESS` phase, no lease, no read. The claim token is the transaction's client request token, so an SDK
    /// retry of a transaction that did commit succeeds instead of looking like a duplicate. With a deadline on the
    /// request, the call is cut half the completion reserve before it, like a claim; a cut transaction that did commit
    /// is replayed by the next delivery.
    ///
    /// Errors: [`Error::PayloadMismatch`] (same key, other content), [`Error::InProgress`] (a
    /// [`claim`](Idempotency::claim) of the same key holds a live lease), [`Error::Store`] (throttling, a transaction
    /// conflict, any other failure: transient), [`Error::Config`] for more than [`MAX_EFFECT_ITEMS`] items.
    pub async fn transact<T>(
        &self,
        request: &Request,
        effect: Vec<TransactWriteItem>,
        result: &T,
    ) -> Result<TransactOutcome<T>>
    where
        T: Serialize + DeserializeOwned,
    {
        if effect.len() > MAX_EFFECT_ITEMS {
            return Err(Error::Config(format!(
                "a transaction takes at most {MAX_EFFECT_ITEMS} effect items besides the record, got {}",
                effect.len()
            )));
        }
        let inner = self.inner();
        let now = inner.clock.now();
        if let Some(result) = self.replay_from_cache(request, now)? {
            return Ok(TransactOutcome::Replayed {
                result,
                source: ReplaySource::Cache,
            });
        }
        let store = &inner.store;
        let token = inner.tokens.token();
        let mut record = self.new_record(request, now, token.clone());
        record.status = Status::Completed;
        record.lease_expires_at = None;
        record.result = self.encode_result(&record, result);
        let put = Put::builder()
            .table_name(store.table())
            .set_item(Some(store.record_item(&record)))
            .condition_expression(CLAIM_CONDITION)
            .set_expression_attribute_names(Some(store.claim_names()))
            .set_expression_attribute_values(Some(claim_values(
                now,
                inner.takeover_margin,
                &record.fingerprint,
            )))
            .return_values_on_condition_check_failure(ReturnValuesOnConditionCheckFailure::AllOld)
            .build()
            .map_err(|e| Error::Config(format!("transaction item for `{}`: {e}", request.key())))?;
        let mut items = Vec::with_capacity(effect.len() + 1);
        items.push(TransactWriteItem::builder().put(put).build());
        items.extend(effect);

        let key = request.key().as_str();
        let call = store
            .client()
            .transact_write_items()
            .set_transact_items(Some(items))
            .client_request_token(client_token(&token))
            .send();
        // Cut before the deadline like a claim; a cut transaction that committed is replayed by the next delivery.
        let sent = crate::engine::before_deadline(
            inner,
            "transact",
            request.key(),
            request.deadline,
            async { Ok(call.await) },
        )
        .await?;
        let error = match sent {
            Ok(_) => {
                #[cfg(feature = "fault-injection")]
                crate::fault::point(crate::fault::Point::AfterComplete, request.key());
                self.remember(
                    request.key(),
                    request.fingerprint(),
                    record.result,
                    record.expiration,
                    now,
                );
                return Ok(TransactOutcome::Committed);
            }
            Err(e) => e,
        };
        let Some(TransactWriteItemsError::TransactionCanceledException(cancelled)) =
            error.as_service_error()
        else {
            return Err(store_error("transact", request.key(), error));
        };
        let reasons = cancelled.cancellation_reasons();
        let failed =
            |i: usize| reasons.get(i).and_then(|r| r.code()) == Some("ConditionalCheckFailed");
        if failed(0) {
            let Some(old) = reasons[0].item() else {
                return Err(Error::Inconsistent {
                    key: key.to_owned(),
                    detail: "transaction refused by the record's condition without the old item (ALL_OLD)".into(),
                });
            };
            let existing = store.parse_item(request.key(), old)?;
            let seen = existing.seen_by(&token, request.fingerprint());
            let margin_ms = duration_millis(inner.takeover_margin);
            let decision = protocol::claim_refused(&seen, epoch_millis(now), margin_ms);
            return match self.refused::<T>(request, existing, decision, now)? {
                Claim::Replay { result, source } => {
                    Ok(TransactOutcome::Replayed { result, source })
                }
                Claim::Acquired(_) => Err(Error::Inconsistent {
                    key: key.to_owned(),
                    detail: "refusal classified as acquired".into(),
                }),
            };
        }
        if let Some(index) = (1..reasons.len()).find(|&i| failed(i)) {
            return Ok(TransactOutcome::EffectRefused {
                index: index - 1,
                item: reasons[index].item().cloned(),
            });
        }
        // A conflict with another transaction, throttling, a validation error: nothing was written.
        Err(store_error("transact", request.key(), error))
    }
}

/// DynamoDB takes 1-36 characters.
fn client_token(token: &str) -> String {
    token.chars().take(36).collect()
}
