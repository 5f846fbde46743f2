//! The keyed mode: the batch's records read at once; the effect runs under the downstream's key; one conditional
//! write puts the completed record.

use std::collections::HashMap;
use std::future::Future;
use std::panic::AssertUnwindSafe;
use std::time::{Duration, SystemTime};

use futures::FutureExt;
use serde::Serialize;
use serde::de::DeserializeOwned;

use super::completion::{ambiguous_write_resolved, write_completion};
use super::replay::check_fingerprint;
use super::types::{CACHED_READ_TOKEN, Idempotency, Outcome, ReplaySource, Replayed, Request};
use crate::clock::{duration_millis, epoch_millis};
use crate::error::{Error, Result, RunError};
use crate::key::IdempotencyKey;
use crate::protocol::Status;
use crate::protocol::{self, ClaimRefused, KeyedRead};
use crate::record::IdempotencyRecord;
use crate::store::{FencedWrite, IdempotencyStore};

impl<S: IdempotencyStore> Idempotency<S> {
    /// The keyed mode's read: the records of `keys`, strongly consistent, in as few requests as the store allows
    /// (DynamoDB: one `BatchGetItem` per 100 keys, unprocessed keys read again). Keys the local cache holds as
    /// completed are not read from the store: the cache's answer is part of the read, as the completed record it
    /// stands for (its fingerprint, result and expiration), so it still counts when the cache has let the key go
    /// by the time its request runs (its time-to-live ran out, or it was evicted). The read is cut at the
    /// `deadline` less the completion's reserve, as a store error: nothing ran, so the records come back.
    ///
    /// Hand each request's record to [`execute_keyed`](Self::execute_keyed).
    pub async fn read_keyed(
        &self,
        keys: &[IdempotencyKey],
        deadline: Option<SystemTime>,
    ) -> Result<HashMap<IdempotencyKey, IdempotencyRecord>> {
        let now = self.inner.clock.now();
        let mut cached = HashMap::new();
        let unread: Vec<IdempotencyKey> = match &self.inner.cache {
            Some(cache) => keys
                .iter()
                .filter(|k| match cache.get(k, now) {
                    Some(hit) => {
                        cached.insert((*k).clone(), self.cached_record(k, &hit, now));
                        false
                    }
                    None => true,
                })
                .cloned()
                .collect(),
            None => keys.to_vec(),
        };
        if unread.is_empty() {
            return Ok(cached);
        }
        let read = async {
            let mut read = self.inner.store.get_many(&unread).await?;
            read.extend(cached);
            Ok(read)
        };
        let Some(deadline) = deadline else {
            return read.await;
        };
        let left = deadline
            .duration_since(now)
            .unwrap_or(Duration::ZERO)
            .saturating_sub(self.inner.completion_retry.reserve);
        tokio::time::timeout(left, read).await.unwrap_or_else(|_| {
            Err(Error::store(
                "get_many",
                unread[0].as_str(),
                format!(
                    "timed out reading {} keys: no time left before the invocation's deadline reserve",
                    unread.len()
                ),
            ))
        })
    }

    /// The keyed mode, for an effect whose downstream applies its `Idempotency-Key` (derived from the key) at most
    /// once within the idempotency window: no claim, no in-progress record. `read` is the request's record as
    /// [`read_keyed`](Self::read_keyed) found it (`None`: there was none).
    ///
    /// - completed with the same content (in the read, or in the local cache): replays, no write, the effect does not
    ///   run.
    /// - a record of other content that still counts: [`Error::PayloadMismatch`], the effect does not run.
    /// - otherwise the effect runs (under the downstream key), then one conditional write puts the completed record
    ///   (absent, expired, or an older claim of the same content: see
    ///   [`protocol::keyed_completion_lands`](crate::protocol::keyed_completion_lands)), retried like a claim's
    ///   completion within the deadline. Refused because a concurrent delivery completed the same content: the
    ///   stored result replays. Refused for other content: [`Error::PayloadMismatch`].
    /// - the effect fails: `RunError::Effect`, nothing was written (a panic resumes).
    ///
    /// Two deliveries of one intent that read before either completed both run the effect: the downstream key is
    /// what keeps it to one. Use the claim mode ([`execute`](Self::execute)) for any effect without one.
    pub async fn execute_keyed<T, E, F, Fut>(
        &self,
        request: &Request,
        read: Option<&IdempotencyRecord>,
        effect: F,
    ) -> Result<Outcome<T>, RunError<E>>
    where
        T: Serialize + DeserializeOwned,
        F: FnOnce() -> Fut,
        Fut: Future<Output = Result<T, E>>,
    {
        let now = self.inner.clock.now();
        if let Some(result) = self.replay_from_cache(request, now)? {
            return Ok(Outcome::Replayed {
                result,
                source: ReplaySource::Cache,
            });
        }
        let key = &request.key;
        let seen = read.map(|r| r.seen_by("", &request.fingerprint));
        match protocol::keyed_read(seen.as_ref(), epoch_millis(now)) {
            KeyedRead::Run => {}
            KeyedRead::Replay => {
                let found = read.expect("a replay is of a record read");
                let source = if found.token == CACHED_READ_TOKEN {
                    ReplaySource::Cache
                } else {
                    ReplaySource::Store
                };
                return Ok(Outcome::Replayed {
                    result: self.replay_stored(key, found, now),
                    source,
                });
            }
            KeyedRead::PayloadMismatch => {
                let found = read.expect("a mismatch is of a record read");
                check_fingerprint(key, &found.fingerprint, &request.fingerprint)?;
                return Err(Error::Inconsistent {
                    key: key.to_string(),
                    detail: format!(
                        "the read said other content, yet the fingerprints agree: {found:?}"
                    ),
                }
                .into());
            }
        }
        let outcome = AssertUnwindSafe(effect()).catch_unwind().await;
        let value = match outcome {
            Ok(Ok(value)) => value,
            Ok(Err(e)) => return Err(RunError::Effect(e)),
            Err(panic) => std::panic::resume_unwind(panic),
        };
        crash_point!(AfterEffect, key);
        let done = self.complete_keyed(request, &value).await?;
        crash_point!(AfterComplete, key);
        Ok(match done {
            None => Outcome::Executed(value),
            Some(result) => Outcome::Replayed {
                result,
                source: ReplaySource::Store,
            },
        })
    }

    /// Puts the completed record after a keyed effect ran. `None`: it landed (or its own first try had); `Some`: a
    /// concurrent delivery of the same content completed first, whose stored result replays.
    pub(super) async fn complete_keyed<T: Serialize + DeserializeOwned>(
        &self,
        request: &Request,
        value: &T,
    ) -> Result<Option<Replayed<T>>> {
        let inner = &self.inner;
        let now = inner.clock.now();
        let key = &request.key;
        let mut record = self.new_record(request, now, inner.tokens.token());
        record.status = Status::Completed;
        record.lease_expires_at = None;
        record.expiration = protocol::completed_expiration_s(
            epoch_millis(now),
            duration_millis(inner.idempotency_window),
        );
        record.result = self.encode_result(&record, value);
        let then = "the message comes back and runs again under the same downstream key";
        let written = write_completion(inner, key, request.deadline, now, then, || {
            inner.store.put_completed(&record, now)
        })
        .await?;
        let found = match written {
            FencedWrite::Written => None,
            FencedWrite::Refused(Some(found)) if found.token == record.token => {
                // The SDK retried a put whose first try landed: the record it met is this one.
                ambiguous_write_resolved("put_completed", key);
                None
            }
            FencedWrite::Refused(Some(found)) => Some(found),
            FencedWrite::Refused(None) => {
                return Err(Error::Inconsistent {
                    key: key.to_string(),
                    detail: "keyed completion refused, yet the key had no record".to_owned(),
                });
            }
        };
        let Some(found) = found else {
            self.remember(
                key,
                &record.fingerprint,
                record.result,
                record.expiration,
                now,
            );
            return Ok(None);
        };
        let seen = found.seen_by(&record.token, &record.fingerprint);
        match protocol::keyed_completion_refused(&seen, epoch_millis(now)) {
            ClaimRefused::Replay => {
                tracing::info!(idempotency_key = %key,
                    "completed by a concurrent delivery of the same content; replaying its result");
                Ok(Some(self.replay_stored(key, &found, now)))
            }
            ClaimRefused::PayloadMismatch => {
                tracing::error!(idempotency_key = %key,
                    "another content completed this key while the effect ran; the downstream key kept it to one \
                     effect there. Failing as a payload mismatch");
                check_fingerprint(key, &found.fingerprint, &record.fingerprint)?;
                Err(inconsistent_put(key, &found))
            }
            _ => Err(inconsistent_put(key, &found)),
        }
    }

    /// The completed record a cache entry stands for, as the keyed read hands it on (its token says where it
    /// came from: [`CACHED_READ_TOKEN`]).
    pub(super) fn cached_record(
        &self,
        key: &IdempotencyKey,
        hit: &crate::cache::CachedCompletion,
        now: SystemTime,
    ) -> IdempotencyRecord {
        IdempotencyRecord {
            key: key.clone(),
            status: Status::Completed,
            expiration: hit.expiration,
            lease_expires_at: None,
            token: CACHED_READ_TOKEN.to_owned(),
            fingerprint: hit.fingerprint.clone(),
            result: hit.result.clone(),
            consumer: self.inner.consumer.clone(),
            consumer_version: self.inner.consumer_version,
            attempt: 0,
            created_at: epoch_millis(now),
            correlation_id: None,
        }
    }
}

/// A refused keyed completion that the protocol's rules say should have landed.
pub(super) fn inconsistent_put(key: &IdempotencyKey, found: &IdempotencyRecord) -> Error {
    Error::Inconsistent {
        key: key.to_string(),
        detail: format!("keyed completion refused although the stored record allows it: {found:?}"),
    }
}
