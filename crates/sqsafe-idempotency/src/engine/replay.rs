//! Stored results: encoded under the cap when a key completes, decoded for a replay, kept in the local cache.

use std::time::SystemTime;

use serde::Serialize;
use serde::de::DeserializeOwned;

use super::types::{Idempotency, Replayed, Request};
use crate::error::{Error, Result};
use crate::fingerprint::{Fingerprint, sha256_hex};
use crate::key::IdempotencyKey;
use crate::record::{IdempotencyRecord, StoredResult};
use crate::store::IdempotencyStore;

impl<S: IdempotencyStore> Idempotency<S> {
    /// A completed key this instance saw recently, with the fingerprint checked.
    pub(crate) fn replay_from_cache<T: DeserializeOwned>(
        &self,
        request: &Request,
        now: SystemTime,
    ) -> Result<Option<Replayed<T>>> {
        let Some(hit) = self
            .inner
            .cache
            .as_ref()
            .and_then(|c| c.get(&request.key, now))
        else {
            return Ok(None);
        };
        check_fingerprint(&request.key, &hit.fingerprint, &request.fingerprint)?;
        Ok(Some(decode(&request.key, hit.result.as_ref())))
    }

    /// A completed record of the request's content, replayed: its result decoded, and the key remembered in the local
    /// cache.
    pub(super) fn replay_stored<T: DeserializeOwned>(
        &self,
        key: &IdempotencyKey,
        record: &IdempotencyRecord,
        now: SystemTime,
    ) -> Replayed<T> {
        self.remember(
            key,
            &record.fingerprint,
            record.result.clone(),
            record.expiration,
            now,
        );
        decode(key, record.result.as_ref())
    }

    /// Remembers a completed key in the local cache, if there is one.
    pub(crate) fn remember(
        &self,
        key: &IdempotencyKey,
        fingerprint: &Fingerprint,
        result: Option<StoredResult>,
        expiration: u64,
        now: SystemTime,
    ) {
        if let Some(cache) = &self.inner.cache {
            cache.insert(key, fingerprint, result, expiration, now);
        }
    }

    /// The result to store with `record`: its JSON when it fits under the configured cap and in the store's item
    /// beside the record's other attributes, else its digest and size.
    pub(crate) fn encode_result<T: Serialize>(
        &self,
        record: &IdempotencyRecord,
        value: &T,
    ) -> Option<StoredResult> {
        let key = &record.key;
        let json = match serde_json::to_string(value) {
            Ok(json) => json,
            Err(e) => {
                // The effect already happened: completing without a result beats releasing (which would run it again).
                tracing::warn!(idempotency_key = %key, error = %e, "result cannot be encoded; completing without it");
                return None;
            }
        };
        let cap = match self.inner.store.result_room(record) {
            Some(room) => room.min(self.inner.max_result_bytes),
            None => self.inner.max_result_bytes,
        };
        if json.len() <= cap {
            return Some(StoredResult::Json(json));
        }
        tracing::warn!(
            idempotency_key = %key,
            size = json.len(),
            cap,
            "result over the size cap (or the room left in the item); keeping its digest only"
        );
        Some(StoredResult::Omitted {
            digest: sha256_hex(json.as_bytes()),
            size: json.len() as u64,
        })
    }
}

pub(super) fn check_fingerprint(
    key: &IdempotencyKey,
    stored: &Fingerprint,
    actual: &Fingerprint,
) -> Result<()> {
    if stored == actual {
        return Ok(());
    }
    Err(Error::PayloadMismatch {
        key: key.to_string(),
        stored: stored.to_string(),
        actual: actual.to_string(),
    })
}

/// The stored result as `T`. A result that no longer decodes (its type changed since it was stored, or none was
/// stored and `T` is not `()`) replays as [`Replayed::Unavailable`]: the effect is done either way.
pub(super) fn decode<T: DeserializeOwned>(
    key: &IdempotencyKey,
    stored: Option<&StoredResult>,
) -> Replayed<T> {
    let json = match stored {
        Some(StoredResult::Json(json)) => json.as_str(),
        Some(StoredResult::Omitted { digest, size }) => {
            return Replayed::Omitted {
                digest: digest.clone(),
                size: *size,
            };
        }
        // Completed without a result (it could not be encoded): fine for a caller that expects nothing.
        None => "null",
    };
    match serde_json::from_str(json) {
        Ok(value) => Replayed::Value(value),
        Err(e) => {
            tracing::warn!(idempotency_key = %key, error = %e,
                "stored result does not decode into today's type; replaying as done, value unavailable");
            Replayed::Unavailable {
                reason: format!("stored result does not decode: {e}"),
            }
        }
    }
}
