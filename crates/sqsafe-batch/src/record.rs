use std::future::Future;
use std::sync::{Arc, OnceLock};
use std::time::SystemTime;

use aws_lambda_events::sqs::SqsMessage;
use serde::Serialize;
use serde::de::DeserializeOwned;
use sqsafe_idempotency::{Idempotency, IdempotencyKey, IdempotencyStore, Outcome, Request};
use sqsafe_telemetry::{CorrelationId, TraceContext};
use tracing::Span;

use crate::envelope::OpenedPayload;
use crate::error::RecordError;

/// What a record handler reports on success; the batch counts each in its metrics.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Processed {
    /// The effect ran now.
    Applied,
    /// A duplicate: the stored result was replayed from the idempotency store.
    Replayed,
    /// A duplicate answered by the local cache of completed keys, with no request.
    SkippedByCache,
    /// Not an event for the handler, acknowledged without running it (S3's `s3:TestEvent`, see
    /// [`Envelope`](crate::Envelope)).
    Ignored,
}

impl Processed {
    /// How an idempotency outcome counts.
    pub fn of<T>(outcome: &Outcome<T>) -> Self {
        match outcome {
            Outcome::Executed(_) => Processed::Applied,
            Outcome::Replayed {
                source: sqsafe_idempotency::ReplaySource::Store,
                ..
            } => Processed::Replayed,
            Outcome::Replayed {
                source: sqsafe_idempotency::ReplaySource::Cache,
                ..
            } => Processed::SkippedByCache,
        }
    }
}

/// One SQS record as a handler sees it: the message plus what the batch derived from it.
#[derive(Debug, Clone)]
pub struct Record {
    message: Arc<SqsMessage>,
    message_id: String,
    receive_count: u32,
    correlation_id: CorrelationId,
    deadline: Option<SystemTime>,
    span: Span,
    /// The payload taken out of its envelope (none: the body is the payload).
    payload: Option<Arc<OpenedPayload>>,
    /// The producer's trace context, as the message carried it.
    producer: Option<Arc<TraceContext>>,
    /// The trace context this record carries on (see [`Record::trace_context`]): made when first asked for, so a
    /// record that sends nothing on costs nothing; with spans exported, made with the span.
    trace: Arc<OnceLock<TraceContext>>,
}

impl Record {
    pub(crate) fn new(
        message: Arc<SqsMessage>,
        message_id: String,
        correlation_id: CorrelationId,
        receive_count: u32,
        deadline: Option<SystemTime>,
        span: Span,
        producer: Option<TraceContext>,
    ) -> Self {
        let trace = Arc::new(OnceLock::new());
        if sqsafe_telemetry::traces::exporting() {
            // The span must be parented on the producer before it starts: now, not when first asked for.
            let _ = trace.set(sqsafe_telemetry::traces::record_context(
                &span,
                producer.as_ref(),
            ));
        }
        Self {
            message,
            message_id,
            receive_count,
            correlation_id,
            deadline,
            span,
            payload: None,
            producer: producer.map(Arc::new),
            trace,
        }
    }

    /// The trace context to send on from this record (to an HTTP call, in a message it publishes): the producer's
    /// trace continued from this record's span, or a new trace when the message carried none
    /// ([`sqsafe_telemetry::traces::record_context`]). Its [`traceparent`](TraceContext::traceparent) is what
    /// `sqsafe::http` sends and what an outbox event stores.
    pub fn trace_context(&self) -> &TraceContext {
        self.trace.get_or_init(|| {
            sqsafe_telemetry::traces::record_context(&self.span, self.producer.as_deref())
        })
    }

    pub(crate) fn with_payload(mut self, payload: Option<Arc<OpenedPayload>>) -> Self {
        self.payload = payload;
        self
    }

    /// The SQS message id (never empty: the batch refuses events with missing ids).
    pub fn message_id(&self) -> &str {
        &self.message_id
    }

    /// The record's identity ([`record_identity`](crate::record_identity)): a stream record's event id, else the
    /// SQS message id.
    pub fn identity(&self) -> &str {
        crate::stream::record_identity(&self.message)
    }

    /// Where a stream record came from (stream, shard, sequence number); `None` for an SQS message.
    pub fn stream_origin(&self) -> Option<crate::StreamOrigin> {
        crate::StreamOrigin::of(&self.message)
    }

    /// `ApproximateReceiveCount`: 1 on the first delivery. 1 when the attribute is missing or unreadable.
    pub fn receive_count(&self) -> u32 {
        self.receive_count
    }

    /// The correlation id: from the message attribute or body, else generated for this record.
    pub fn correlation_id(&self) -> &CorrelationId {
        &self.correlation_id
    }

    /// `MessageGroupId` of a FIFO message.
    pub fn group_id(&self) -> Option<&str> {
        group_id(&self.message)
    }

    /// A message attribute's string value.
    pub fn attribute(&self, name: &str) -> Option<&str> {
        self.message
            .message_attributes
            .get(name)
            .and_then(|a| a.string_value.as_deref())
    }

    /// The invocation's deadline.
    pub fn deadline(&self) -> Option<SystemTime> {
        self.deadline
    }

    /// The raw message.
    pub fn message(&self) -> &SqsMessage {
        &self.message
    }

    /// The record's span (`message_id`, `correlation_id`, `idempotency_key`, …). Every line the handler logs is
    /// inside it, also in spans the handler opens; instrument work the handler spawns with it.
    pub fn span(&self) -> &Span {
        &self.span
    }

    /// Puts `key` on the record's span, so every later line of this record carries `idempotency_key`, whatever span
    /// the handler is in. [`Record::run_idempotent`] does this itself; call it when you build the request yourself.
    pub fn record_idempotency_key(&self, key: &IdempotencyKey) {
        self.span.record("idempotency_key", key.as_str());
    }

    /// The body; a missing body is a permanent `missing_body` error.
    pub fn body(&self) -> Result<&str, RecordError> {
        self.message.body.as_deref().ok_or_else(|| {
            RecordError::permanent(RecordError::MISSING_BODY, "the message has no body")
        })
    }

    /// Parses the body into the consumer's typed, versioned payload. A body that does not parse (bad JSON, wrong
    /// shape, unknown version tag) is a permanent `bad_payload` error, raised before any side effect.
    ///
    /// The error names the payload type, the field path and the type expected, never a value from the body:
    /// `body does not match Payment at `amount`: invalid type: string, expected u64 (line 1, column 32)`. Invalid
    /// JSON is reported by position only. (Inside an internally tagged enum, `#[serde(tag = ..)]`, serde does not
    /// track the path: the message then has the expected type without the path.)
    ///
    /// Behind an envelope ([`BatchProcessorBuilder::envelope`](crate::BatchProcessorBuilder::envelope)) it parses
    /// the payload taken out of it: an SNS notification's `Message`, an EventBridge event's `detail`, an
    /// [`S3Object`](crate::S3Object).
    pub fn parse<T: DeserializeOwned>(&self) -> Result<T, RecordError> {
        match self.payload.as_deref() {
            None => crate::parse::from_json(self.body()?, short_type_name::<T>()),
            Some(OpenedPayload::Text(text)) => {
                crate::parse::from_json(text, short_type_name::<T>())
            }
            Some(OpenedPayload::Json(value)) => {
                crate::parse::from_value(value, short_type_name::<T>())
            }
        }
        .map_err(|message| RecordError::permanent(RecordError::BAD_PAYLOAD, message))
    }

    /// [`Record::parse`], keeping the body as parsed JSON too, for reading fields of the body as sent (a fingerprint
    /// of the intent's fields). The body is scanned once.
    pub fn parse_with_raw<T: DeserializeOwned>(
        &self,
    ) -> Result<(T, serde_json::Value), RecordError> {
        parse_with_raw(self.payload.as_deref(), || self.body())
    }

    /// An idempotency request for `key` carrying this record's deadline, receive count and correlation id.
    pub fn idempotency_request<S, P>(
        &self,
        idem: &Idempotency<S>,
        key: IdempotencyKey,
        payload: &P,
    ) -> Result<Request, RecordError>
    where
        S: IdempotencyStore,
        P: Serialize + ?Sized,
    {
        let mut request = idem
            .request(key, payload)?
            .attempt(self.receive_count)
            .correlation_id(self.correlation_id.as_str());
        if let Some(deadline) = self.deadline {
            request = request.deadline(deadline);
        }
        Ok(request)
    }

    /// Runs `effect` at most once for `key`, mapping every idempotency outcome to what the batch needs.
    pub async fn run_idempotent<S, P, T, F, Fut>(
        &self,
        idem: &Idempotency<S>,
        key: IdempotencyKey,
        payload: &P,
        effect: F,
    ) -> Result<(Processed, Option<T>), RecordError>
    where
        S: IdempotencyStore,
        P: Serialize + ?Sized,
        T: Serialize + DeserializeOwned,
        F: FnOnce() -> Fut,
        Fut: Future<Output = Result<T, RecordError>>,
    {
        let request = self.idempotency_request(idem, key, payload)?;
        self.record_idempotency_key(request.key());
        let outcome = idem.execute(&request, effect).await?;
        Ok((Processed::of(&outcome), outcome.into_value()))
    }
}

pub(crate) fn receive_count(message: &SqsMessage) -> u32 {
    message
        .attributes
        .get("ApproximateReceiveCount")
        .and_then(|v| v.parse().ok())
        .unwrap_or(1)
        .max(1)
}

pub(crate) fn group_id(message: &SqsMessage) -> Option<&str> {
    message.attributes.get("MessageGroupId").map(String::as_str)
}

/// [`Record::parse_with_raw`] of a payload taken out of an envelope (`None`: the body is the payload).
pub(crate) fn parse_with_raw<'a, T: DeserializeOwned>(
    payload: Option<&OpenedPayload>,
    body: impl FnOnce() -> Result<&'a str, RecordError>,
) -> Result<(T, serde_json::Value), RecordError> {
    match payload {
        None => crate::parse::from_json_with_raw(body()?, short_type_name::<T>()),
        Some(OpenedPayload::Text(text)) => {
            crate::parse::from_json_with_raw(text, short_type_name::<T>())
        }
        Some(OpenedPayload::Json(value)) => {
            crate::parse::from_value(value, short_type_name::<T>()).map(|t| (t, value.clone()))
        }
    }
    .map_err(|message| RecordError::permanent(RecordError::BAD_PAYLOAD, message))
}

fn short_type_name<T>() -> &'static str {
    let full = std::any::type_name::<T>();
    full.rsplit("::").next().unwrap_or(full)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn record(producer: Option<TraceContext>) -> Record {
        Record::new(
            Arc::new(SqsMessage::default()),
            "m-1".to_owned(),
            CorrelationId::new("c-1"),
            1,
            None,
            Span::none(),
            producer,
        )
    }

    #[test]
    fn the_trace_context_is_made_once_per_record_and_shared_by_its_clones() {
        let producer = TraceContext::from_traceparent(
            "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",
        )
        .expect("valid");
        let r = record(Some(producer.clone()));
        let clone = r.clone();
        let first = r.trace_context().clone();
        assert_eq!(
            first.trace_id(),
            producer.trace_id(),
            "the producer's trace"
        );
        assert_ne!(
            first.parent_id(),
            producer.parent_id(),
            "a span of the record"
        );
        assert_eq!(r.trace_context(), &first, "the same span on every call");
        assert_eq!(clone.trace_context(), &first, "and in a clone made before");
        let unsent = record(None);
        assert_ne!(
            unsent.trace_context().trace_id(),
            producer.trace_id(),
            "a new trace"
        );
    }
}
