//! What a user writes: a payload, the intent that keys it, and the effect.

use std::collections::HashMap;
use std::future::Future;
use std::time::SystemTime;

use aws_sdk_dynamodb::types::{AttributeValue, TransactWriteItem};
use serde::Serialize;
use serde::de::DeserializeOwned;
use sqsafe_batch::{Record, RecordError};
use sqsafe_idempotency::IdempotencyKey;
use sqsafe_telemetry::CorrelationId;

use crate::app::Setup;

/// A consumer whose effect is an external call (an HTTP API, an e-mail): sqsafe claims the intent in the
/// idempotency table, runs [`apply`](Consumer::apply) at most once per intent, and completes the claim with its result.
///
/// Pass [`Context::downstream_key`] to the API as its `Idempotency-Key`: it closes the one gap the record cannot (a
/// crash after the call, before the completion).
pub trait Consumer: Sized + Send + Sync + 'static {
    /// The consumer's name: in keys, records, dead-letter context and metrics. Stated once, here.
    const NAME: &'static str;
    /// The effect's version: part of every key. Bump it only when the effect changes meaning (a new version re-keys
    /// every intent, so duplicates of intents applied under the old one apply again); never for a change of shape.
    const EFFECT_VERSION: u32;
    /// The body fields (JSON pointers, e.g. `/amount`) that define an intent: the fingerprint reads only these, from
    /// the raw body, so a field added later does not turn retries into conflicts.
    const INTENT_FIELDS: &'static [&'static str];

    /// The typed, versioned payload: a body that does not parse is a permanent `bad_payload` error, before any effect.
    type Payload: DeserializeOwned + Send + Sync;
    /// What the effect returns; kept with the record and replayed to duplicates.
    type Output: Serialize + DeserializeOwned + Send + Sync;

    /// Builds the consumer from the environment and clients: see [`Setup`].
    fn new(setup: &Setup) -> Result<Self, crate::Error>;

    /// The intent the payload asks for.
    fn intent(payload: &Self::Payload) -> Intent;

    /// Business validation, before any effect: a permanent error sends the record to the DLQ. Default: none.
    fn validate(payload: &Self::Payload) -> Result<(), RecordError> {
        let _ = payload;
        Ok(())
    }

    /// The effect. `Err` with a transient error brings the record back; a permanent one dead-letters it.
    fn apply(
        &self,
        payload: Self::Payload,
        cx: &Context<'_>,
    ) -> impl Future<Output = Result<Self::Output, RecordError>> + Send;
}

/// A consumer whose effect is a set of DynamoDB writes: sqsafe commits them together with the intent's record in one
/// `TransactWriteItems`, so both happen or neither, with no in-progress phase.
pub trait TransactConsumer: Sized + Send + Sync + 'static {
    /// See [`Consumer::NAME`].
    const NAME: &'static str;
    /// See [`Consumer::EFFECT_VERSION`].
    const EFFECT_VERSION: u32;
    /// See [`Consumer::INTENT_FIELDS`].
    const INTENT_FIELDS: &'static [&'static str];

    /// See [`Consumer::Payload`].
    type Payload: DeserializeOwned + Send + Sync;
    /// What the record keeps for replay.
    type Output: Serialize + DeserializeOwned + Send + Sync;

    /// See [`Consumer::new`].
    fn new(setup: &Setup) -> Result<Self, crate::Error>;

    /// See [`Consumer::intent`].
    fn intent(payload: &Self::Payload) -> Intent;

    /// See [`Consumer::validate`].
    fn validate(payload: &Self::Payload) -> Result<(), RecordError> {
        let _ = payload;
        Ok(())
    }

    /// The effect's writes (at most 99) and the result to keep. Make each write conditional on what it needs.
    fn writes(
        &self,
        payload: &Self::Payload,
        cx: &Context<'_>,
    ) -> Result<(Vec<TransactWriteItem>, Self::Output), RecordError>;

    /// One of the writes' own conditions failed (`index` into [`writes`](TransactConsumer::writes), with the item as
    /// it was when that write asked for `ALL_OLD`): nothing was written. Say why, usually as a permanent error.
    fn refused(
        &self,
        payload: &Self::Payload,
        index: usize,
        item: Option<&HashMap<String, AttributeValue>>,
    ) -> RecordError;
}

/// The intent a payload asks for: tenant, kind and id, e.g. `Intent::new(&p.tenant, "payment", &p.payment_id)`.
/// With the consumer's name and effect version it makes the idempotency key
/// (`charge-payment#v1#acme#payment:p-42`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Intent {
    tenant: Option<String>,
    kind: String,
    id: String,
}

impl Intent {
    /// An intent of a verified `tenant`.
    pub fn new(tenant: impl Into<String>, kind: impl Into<String>, id: impl Into<String>) -> Self {
        Self {
            tenant: Some(tenant.into()),
            kind: kind.into(),
            id: id.into(),
        }
    }

    /// An intent in a single-tenant system.
    pub fn untenanted(kind: impl Into<String>, id: impl Into<String>) -> Self {
        Self {
            tenant: None,
            kind: kind.into(),
            id: id.into(),
        }
    }

    pub(crate) fn key(
        &self,
        consumer: &str,
        version: u32,
    ) -> Result<IdempotencyKey, sqsafe_idempotency::Error> {
        let mut key = sqsafe_idempotency::KeyBuilder::new(consumer, version);
        if let Some(tenant) = &self.tenant {
            key = key.tenant(tenant);
        }
        key.intent(&self.kind, &self.id).build()
    }
}

/// What the effect knows about the record it runs for.
#[derive(Debug, Clone, Copy)]
pub struct Context<'a> {
    record: &'a Record,
    key: &'a IdempotencyKey,
}

impl<'a> Context<'a> {
    pub(crate) fn new(record: &'a Record, key: &'a IdempotencyKey) -> Self {
        Self { record, key }
    }

    /// The idempotency key of the intent.
    pub fn idempotency_key(&self) -> &IdempotencyKey {
        self.key
    }

    /// The value to send downstream as an `Idempotency-Key` header: the same on every redelivery of the intent.
    pub fn downstream_key(&self) -> String {
        self.key.downstream_key()
    }

    /// The correlation id: put it on what you publish and call (`sqsafe_telemetry::correlation`).
    pub fn correlation_id(&self) -> &CorrelationId {
        self.record.correlation_id()
    }

    /// The SQS message id.
    pub fn message_id(&self) -> &str {
        self.record.message_id()
    }

    /// `ApproximateReceiveCount`.
    pub fn receive_count(&self) -> u32 {
        self.record.receive_count()
    }

    /// The invocation's deadline.
    pub fn deadline(&self) -> Option<SystemTime> {
        self.record.deadline()
    }

    /// The whole record (attributes, raw message, span).
    pub fn record(&self) -> &Record {
        self.record
    }
}
