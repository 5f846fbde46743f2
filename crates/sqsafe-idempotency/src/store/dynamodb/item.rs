//! The record as a DynamoDB item, and the conditions the writes state on it.

use std::collections::HashMap;
use std::time::{Duration, SystemTime};

use aws_sdk_dynamodb::types::AttributeValue;

use super::{DynamoDbStore, Item};
use crate::clock::epoch_secs;
use crate::error::{Error, Result};
use crate::fingerprint::Fingerprint;
use crate::key::IdempotencyKey;
use crate::protocol::Status;
use crate::record::{IdempotencyRecord, StoredResult, takeover_cutoff_ms};

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

// Placeholders are fixed; attribute names are bound to them, so configured names need no escaping.
pub(crate) const OWNED_BY_TOKEN: &str = "#token = :token AND #status = :in_progress";

/// Extending is fenced like the other writes and never moves a lease backwards:
///
/// ```text
///  claim ── lease L ──┤            extend(L2 > L): lease L2 ──────┤
///                     extend(L1 <= current lease): refused, lease unchanged (a late heartbeat cannot shorten it)
/// ```
/// The record's expiration moves with the lease, so it never expires under a live one.
pub(crate) const OWNED_AND_LEASE_EARLIER: &str =
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
