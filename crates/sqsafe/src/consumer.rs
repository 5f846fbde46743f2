//! What a user writes: a payload, the intent that keys it, and the effect (a call, or DynamoDB writes).

use std::collections::HashMap;
use std::future::Future;
use std::pin::Pin;
use std::time::SystemTime;

use aws_sdk_dynamodb::types::{AttributeValue, TransactWriteItem};
use serde::Serialize;
use serde::de::DeserializeOwned;
use sqsafe_batch::{Envelope, Record, RecordError};
use sqsafe_idempotency::IdempotencyKey;
use sqsafe_telemetry::{CorrelationId, TraceContext};

use crate::setup::Setup;

/// What a user writes: the payload, the intent that keys it, and the effect it asks for.
///
/// The effect is one of two kinds ([`Effect`]), chosen per payload by [`effect`](Consumer::effect):
///
/// - **a call** ([`Effect::call`]: an HTTP API, an e-mail): sqsafe claims the intent in the idempotency table, runs
///   the call at most once per intent, and completes the claim with its result. Pass
///   [`Context::downstream_key`] to the API as its `Idempotency-Key` (`sqsafe::http` does): it closes the one gap the
///   record cannot (a crash after the call, before the completion).
/// - **DynamoDB writes** ([`Effect::writes`]): sqsafe commits them together with the intent's record in one
///   `TransactWriteItems`, so both happen or neither, with no in-progress phase.
///
/// Either way a duplicate of an applied intent replays the stored output, and the same key with other content is a
/// permanent `fingerprint_mismatch` error, never a second effect.
pub trait Consumer: Sized + Send + Sync + 'static {
    /// The consumer's name: in keys, records, dead-letter context and metrics. Stated once, here.
    const NAME: &'static str;
    /// The effect's version: part of every key. Bump it only when the effect changes meaning (a new version re-keys
    /// every intent, so duplicates of intents applied under the old one apply again); never for a change of shape.
    const EFFECT_VERSION: u32;
    /// The body fields (JSON pointers, e.g. `/amount`) that define an intent: the fingerprint reads only these, from
    /// the raw body, so a field added later does not turn retries into conflicts.
    const INTENT_FIELDS: &'static [&'static str];

    /// What the SQS message bodies wrap: [`Envelope::Sqs`] (the default: the body is the payload), `Sns` (a topic's
    /// notifications, without raw delivery), `EventBridge` (a rule's events: the payload is `detail`) or `S3` (object
    /// notifications: the payload is an [`S3Object`](crate::S3Object)). `INTENT_FIELDS` and the payload are read from
    /// what the envelope wraps; a body that is not this envelope is a permanent `bad_envelope` error, before any
    /// effect. See the book's Envelopes page.
    const ENVELOPE: Envelope = Envelope::Sqs;

    /// `true` states that this consumer's calls go to a downstream that applies the `Idempotency-Key` it is sent
    /// ([`Context::downstream_key`]; `sqsafe::http` sends it) at most once within the idempotency window, answers a
    /// repeat with the same content as the first time, and refuses the key with other content (a 422 as the IETF
    /// Idempotency-Key draft says, mapped to a permanent error), as a payments API does. That permits the keyed mode (`SQSAFE_IDEMPOTENCY_MODE=keyed`: one write per fresh message
    /// instead of two, none per duplicate), which relies on it: two deliveries that read before either completed
    /// both make the call. Default `false`: the keyed mode is refused at start.
    const DOWNSTREAM_KEYED: bool = false;

    /// The typed, versioned payload: a body that does not parse is a permanent `bad_payload` error, before any effect.
    type Payload: DeserializeOwned + Send + Sync;
    /// What the effect returns; kept with the record and replayed to duplicates.
    type Output: Serialize + DeserializeOwned + Send + Sync;

    /// Builds the consumer from the environment and clients: see [`Setup`].
    fn new(setup: &Setup) -> Result<Self, crate::error::Error>;

    /// The intent the payload asks for.
    fn intent(payload: &Self::Payload) -> Intent;

    /// Business validation, before any effect: a permanent error sends the record to the DLQ. Default: none.
    fn validate(payload: &Self::Payload) -> Result<(), RecordError> {
        let _ = payload;
        Ok(())
    }

    /// The effect the payload asks for: [`Effect::call`] or [`Effect::writes`]. Nothing may happen here: a call
    /// runs only when sqsafe awaits it, after the claim (so a duplicate never starts it); writes are committed by
    /// sqsafe. `Err`: a transient error brings the record back, a permanent one dead-letters it, before any effect.
    fn effect<'a>(
        &'a self,
        payload: Self::Payload,
        cx: &'a Context<'a>,
    ) -> Result<Effect<'a, Self::Output>, RecordError>;
}

/// How a [`Consumer`]'s effect is made: see [`Consumer::effect`].
#[must_use = "an effect does nothing until sqsafe runs it: return it from Consumer::effect"]
pub struct Effect<'a, O> {
    pub(crate) kind: EffectKind<'a, O>,
}

/// The call to await once the intent is claimed.
pub(crate) type Call<'a, O> = Pin<Box<dyn Future<Output = Result<O, RecordError>> + Send + 'a>>;
/// What to say when a write's own condition failed: see [`Effect::refused`].
pub(crate) type Refused<'a> =
    Box<dyn FnOnce(usize, Option<&HashMap<String, AttributeValue>>) -> RecordError + Send + 'a>;

pub(crate) enum EffectKind<'a, O> {
    Call(Call<'a, O>),
    Writes {
        writes: Vec<TransactWriteItem>,
        output: O,
        refused: Refused<'a>,
    },
}

impl<'a, O> Effect<'a, O> {
    /// An external call (an HTTP API, an e-mail): `call` is awaited at most once per intent, after sqsafe claimed it,
    /// and its `Ok` is kept with the record. `Err` with a transient error releases the claim and brings the record
    /// back; a permanent one dead-letters it.
    ///
    /// ```ignore
    /// fn effect<'a>(&'a self, p: Payment, cx: &'a Context<'a>) -> Result<Effect<'a, Charge>, RecordError> {
    ///     Ok(Effect::call(async move { self.api.post_json("/charges", &p, cx).await?.json() }))
    /// }
    /// ```
    pub fn call(call: impl Future<Output = Result<O, RecordError>> + Send + 'a) -> Self {
        Self {
            kind: EffectKind::Call(Box::pin(call)),
        }
    }

    /// DynamoDB writes (at most 99) committed with the intent's record in one `TransactWriteItems`; `output` is what
    /// the record keeps for replay. Make each write conditional on what it needs; when one's own condition fails,
    /// nothing is written and [`refused`](Self::refused) says why (by default a permanent `effect_refused` error
    /// naming the write).
    pub fn writes(writes: Vec<TransactWriteItem>, output: O) -> Self {
        Self {
            kind: EffectKind::Writes {
                writes,
                output,
                refused: Box::new(|index, _| {
                    RecordError::permanent(
                        "effect_refused",
                        format!("write {index} of the effect was refused by its own condition"),
                    )
                }),
            },
        }
    }

    /// For [`writes`](Self::writes): the error when write `index` was refused by its own condition (`item`: the item
    /// as it was, when that write asked for `ALL_OLD`). Usually a permanent error that says why. No effect on a call.
    pub fn refused(
        mut self,
        why: impl FnOnce(usize, Option<&HashMap<String, AttributeValue>>) -> RecordError + Send + 'a,
    ) -> Self {
        if let EffectKind::Writes { refused, .. } = &mut self.kind {
            *refused = Box::new(why);
        }
        self
    }
}

impl<O> std::fmt::Debug for Effect<'_, O> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match &self.kind {
            EffectKind::Call(_) => f.write_str("Effect::Call"),
            EffectKind::Writes { writes, .. } => {
                write!(f, "Effect::Writes({} writes)", writes.len())
            }
        }
    }
}

/// The intent a payload asks for: tenant, kind and id, e.g. `Intent::new(&p.tenant, "payment", &p.payment_id)`.
/// With the consumer's name and effect version it makes the idempotency key
/// (`charge-payment#v1#acme#payment:p-42`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Intent {
    tenant: Option<String>,
    kind: String,
    id: String,
    /// The id is the record's identity ([`Intent::of_record`]).
    of_record: bool,
}

impl Intent {
    /// An intent of a verified `tenant`.
    pub fn new(tenant: impl Into<String>, kind: impl Into<String>, id: impl Into<String>) -> Self {
        Self {
            tenant: Some(tenant.into()),
            kind: kind.into(),
            id: id.into(),
            of_record: false,
        }
    }

    /// An intent in a single-tenant system.
    pub fn untenanted(kind: impl Into<String>, id: impl Into<String>) -> Self {
        Self {
            tenant: None,
            kind: kind.into(),
            id: id.into(),
            of_record: false,
        }
    }

    /// For a payload that names no intent: the record itself is the intent, keyed by its identity
    /// ([`sqsafe_batch::record_identity`]). A stream record's event id (Kinesis `shardId-…:sequence`, DynamoDB
    /// `eventID`) is the same on every redelivery, bisect retry and replay of the shard, so each applies once. On an
    /// SQS message it is the message id: the same on a redelivery, not when a producer sends the same content again
    /// (prefer an id from the payload there).
    pub fn of_record() -> Self {
        Self {
            tenant: None,
            kind: "record".to_owned(),
            id: String::new(),
            of_record: true,
        }
    }

    /// The idempotency key; `identity` is the record's ([`Intent::of_record`]).
    pub(crate) fn key(
        &self,
        consumer: &str,
        version: u32,
        identity: &str,
    ) -> Result<IdempotencyKey, sqsafe_idempotency::Error> {
        let mut key = sqsafe_idempotency::KeyBuilder::new(consumer, version);
        if let Some(tenant) = &self.tenant {
            key = key.tenant(tenant);
        }
        let id = if self.of_record { identity } else { &self.id };
        key.intent(&self.kind, id).build()
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

    /// The SQS message id; a stream record's sequence number.
    pub fn message_id(&self) -> &str {
        self.record.message_id()
    }

    /// Where a stream record came from (stream, shard, sequence number, partition key); `None` for an SQS message.
    pub fn stream_origin(&self) -> Option<sqsafe_batch::StreamOrigin> {
        self.record.stream_origin()
    }

    /// `ApproximateReceiveCount` (1 for a stream record, which has none).
    pub fn receive_count(&self) -> u32 {
        self.record.receive_count()
    }

    /// The invocation's deadline.
    pub fn deadline(&self) -> Option<SystemTime> {
        self.record.deadline()
    }

    /// The trace context to send on: the producer's trace, continued from this record
    /// ([`Record::trace_context`]). `sqsafe::http` sends it as `traceparent`; put it on an outbox event with
    /// `sqsafe_outbox::OutboxEvent::with_trace_context`.
    pub fn trace_context(&self) -> &TraceContext {
        self.record.trace_context()
    }

    /// The whole record (attributes, raw message, span).
    pub fn record(&self) -> &Record {
        self.record
    }
}
