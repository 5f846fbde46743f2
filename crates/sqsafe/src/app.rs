//! The entry point: settings, telemetry, clients, the batch processor, the idempotency layer and the runtime loop.

use std::collections::{HashMap, HashSet};
use std::marker::PhantomData;
use std::sync::{Arc, Mutex};
use std::time::SystemTime;

use aws_lambda_events::dynamodb::Event as DynamoDbEvent;
use aws_lambda_events::kinesis::KinesisEvent;
use aws_lambda_events::sqs::{SqsBatchResponse, SqsEvent, SqsMessage};
use aws_lambda_events::streams::{DynamoDbEventResponse, KinesisEventResponse};
use lambda_runtime::{LambdaEvent, service_fn};
use serde::Deserialize;
use sqsafe_batch::{
    Backoff, BatchError, BatchProcessor, BatchProcessorBuilder, BatchReport, Envelope, Processed,
    Record, RecordError, SqsDeadLetterQueue, SqsVisibility, StreamBatch,
};
use sqsafe_idempotency::{
    DynamoDbStore, Fingerprint, FingerprintFields, Idempotency, IdempotencyBuilder, IdempotencyKey,
    IdempotencyRecord, ReplaySource, TransactOutcome,
};

use crate::consumer::{Consumer, Context, EffectKind};
use crate::error::Error;
use crate::settings::{ConfigError, IdempotencyMode, MODE_VARIABLE};
use crate::setup::Setup;

type BatchHook = Box<dyn FnOnce(BatchProcessorBuilder) -> BatchProcessorBuilder + Send>;
type IdempotencyHook =
    Box<dyn FnOnce(IdempotencyBuilder<DynamoDbStore>) -> IdempotencyBuilder<DynamoDbStore> + Send>;

/// Builds and runs consumer `C`; every layer underneath stays reachable through the hooks.
///
/// ```no_run
/// # struct ChargePayment;
/// # impl sqsafe::Consumer for ChargePayment {
/// #     const NAME: &'static str = "charge-payment";
/// #     const EFFECT_VERSION: u32 = 1;
/// #     const INTENT_FIELDS: &'static [&'static str] = &["/id"];
/// #     type Payload = serde_json::Value;
/// #     type Output = ();
/// #     fn new(_: &sqsafe::Setup) -> Result<Self, sqsafe::Error> { Ok(ChargePayment) }
/// #     fn intent(p: &serde_json::Value) -> sqsafe::Intent { sqsafe::Intent::untenanted("x", p["id"].to_string()) }
/// #     fn effect<'a>(&'a self, _: serde_json::Value, _: &'a sqsafe::Context<'a>)
/// #         -> Result<sqsafe::Effect<'a, ()>, sqsafe::RecordError> { Ok(sqsafe::Effect::call(async { Ok(()) })) }
/// # }
/// # async fn f() -> Result<(), sqsafe::Error> {
/// use std::time::Duration;
/// sqsafe::consumer::<ChargePayment>()
///     .batch(|b| b.max_concurrency(4))
///     .idempotency(|i| i.takeover_margin(Duration::from_secs(5)))
///     .run()
///     .await
/// # }
/// ```
pub struct ConsumerBuilder<C> {
    batch: Option<BatchHook>,
    idempotency: Option<IdempotencyHook>,
    consumer: PhantomData<fn() -> C>,
}

/// Starts building consumer `C`.
pub fn consumer<C>() -> ConsumerBuilder<C> {
    ConsumerBuilder {
        batch: None,
        idempotency: None,
        consumer: PhantomData,
    }
}

impl<C> ConsumerBuilder<C> {
    /// Adjusts the batch processor after sqsafe configured it from the settings (DLQ, attempts, backoff,
    /// in-progress waits, visibility heartbeat).
    pub fn batch(
        mut self,
        f: impl FnOnce(BatchProcessorBuilder) -> BatchProcessorBuilder + Send + 'static,
    ) -> Self {
        self.batch = Some(Box::new(f));
        self
    }

    /// Adjusts the idempotency layer after sqsafe configured it (table, window, consumer name and version).
    pub fn idempotency(
        mut self,
        f: impl FnOnce(IdempotencyBuilder<DynamoDbStore>) -> IdempotencyBuilder<DynamoDbStore>
        + Send
        + 'static,
    ) -> Self {
        self.idempotency = Some(Box::new(f));
        self
    }

    fn layers(
        self,
        name: &'static str,
        version: u32,
        envelope: Envelope,
        setup: &Setup,
    ) -> Result<(BatchProcessor, Idempotency<DynamoDbStore>), Error> {
        let s = &setup.settings;
        let store = DynamoDbStore::builder(setup.dynamodb.clone(), &s.idempotency_table).build()?;
        let mut idem =
            Idempotency::builder(store, name, version).idempotency_window(s.idempotency_window);
        if let Some(hook) = self.idempotency {
            idem = hook(idem);
        }
        let idem = idem.build()?;
        // Dead letters carry the window the records are really written with (a hook may have changed it), so that
        // `sqsafe dlq redrive` can refuse one whose record may have expired.
        let dlq = SqsDeadLetterQueue::new(setup.sqs.clone(), &s.dlq_url)
            .idempotency_window(idem.idempotency_window())
            .max_message_size(s.dlq_max_message_size)?;
        let mut batch = BatchProcessor::builder(name, version)
            .max_attempts(s.max_attempts)
            .dead_letter_queue(dlq)
            .envelope(envelope);
        // The backoff is checked either way; it, in-progress waits and the heartbeat change visibility on the
        // consumed queue, which a stream consumer has not.
        let backoff = Backoff::new(s.backoff_base, s.backoff_max)?;
        if let Some(queue) = &s.queue_url {
            batch = batch
                .visibility(SqsVisibility::new(setup.sqs.clone(), queue))
                .backoff(backoff)
                .visibility_heartbeat(s.visibility_heartbeat);
        }
        if let Some(hook) = self.batch {
            batch = hook(batch);
        }
        Ok((batch.build()?, idem))
    }
}

impl<C: Consumer> ConsumerBuilder<C> {
    /// Builds the consumer from `setup`, without running it (for tests and custom runtimes).
    pub fn build(self, setup: &Setup) -> Result<App<C>, Error> {
        let mode = setup.settings.idempotency_mode;
        if mode == IdempotencyMode::Keyed && !C::DOWNSTREAM_KEYED {
            return Err(Error::Config(ConfigError {
                variable: MODE_VARIABLE.to_owned(),
                value: Some(mode.as_str().to_owned()),
                reason: format!(
                    "{} does not declare Consumer::DOWNSTREAM_KEYED: the keyed mode is only safe when the downstream \
                     applies the Idempotency-Key at most once (use `claim`, the default)",
                    C::NAME
                ),
            }));
        }
        let (processor, idem) = self.layers(C::NAME, C::EFFECT_VERSION, C::ENVELOPE, setup)?;
        let fields = FingerprintFields::only(C::INTENT_FIELDS.iter().map(|p| (*p).to_owned()));
        let consumer = C::new(setup)?;
        Ok(App {
            inner: Arc::new((
                processor,
                Runner {
                    consumer,
                    idem,
                    fields,
                    mode,
                    no_queue: setup
                        .settings
                        .queue_url
                        .is_none()
                        .then(std::sync::Once::new),
                },
            )),
        })
    }

    /// Initialises logging, reads the environment, builds the clients and the consumer, and runs the Lambda runtime
    /// (concurrently when `AWS_LAMBDA_MAX_CONCURRENCY` > 1).
    pub async fn run(self) -> Result<(), Error> {
        let setup = setup_from_env().await?;
        self.build(&setup)?.run().await
    }
}

/// Runs consumer `C` with every default: `sqsafe::run::<ChargePayment>().await`.
pub async fn run<C: Consumer>() -> Result<(), Error> {
    consumer::<C>().run().await
}

/// Runs consumer `C` with every default on a Tokio runtime fitted to Lambda ([`runtime`]), from a plain `fn main`:
/// `fn main() -> Result<(), sqsafe::Error> { sqsafe::main::<ChargePayment>() }`.
pub fn main<C: Consumer>() -> Result<(), Error> {
    runtime()?.block_on(run::<C>())
}

/// The Tokio runtime a function runs on: one thread when Lambda hands the process one invocation at a time (the
/// default; `AWS_LAMBDA_MAX_CONCURRENCY` unset or 1), the multi-threaded runtime when it hands it several at once.
/// With one invocation at a time, a batch's records are I/O waits on one task set: a second worker thread only adds
/// wake-ups across threads (bench/RESULTS.md, figure 4). `SQSAFE_TOKIO_RUNTIME=multi-thread` (or `current-thread`)
/// overrides the choice, for a consumer whose records are CPU-heavy on a function with several vCPUs.
///
/// # Errors
///
/// [`Error::Config`] for another value of `SQSAFE_TOKIO_RUNTIME`; [`Error::Runtime`] when Tokio cannot start.
pub fn runtime() -> Result<tokio::runtime::Runtime, Error> {
    runtime_for(
        std::env::var("SQSAFE_TOKIO_RUNTIME").ok().as_deref(),
        std::env::var("AWS_LAMBDA_MAX_CONCURRENCY").ok().as_deref(),
    )
}

fn runtime_for(
    flavour: Option<&str>,
    max_concurrency: Option<&str>,
) -> Result<tokio::runtime::Runtime, Error> {
    let concurrent = max_concurrency
        .and_then(|v| v.trim().parse::<u32>().ok())
        .is_some_and(|n| n > 1);
    let multi_thread = match flavour.map(str::trim) {
        None | Some("") => concurrent,
        Some("multi-thread") => true,
        Some("current-thread") => false,
        Some(other) => {
            return Err(Error::Config(ConfigError {
                variable: "SQSAFE_TOKIO_RUNTIME".to_owned(),
                value: Some(other.to_owned()),
                reason: "`current-thread` or `multi-thread` (unset: one thread unless \
                         AWS_LAMBDA_MAX_CONCURRENCY > 1)"
                    .to_owned(),
            }));
        }
    };
    let mut builder = if multi_thread {
        tokio::runtime::Builder::new_multi_thread()
    } else {
        tokio::runtime::Builder::new_current_thread()
    };
    builder
        .enable_all()
        .build()
        .map_err(|e| Error::Runtime(e.into()))
}

/// Logging first (so that a bad setting is logged as JSON too), then the settings and the clients.
async fn setup_from_env() -> Result<Setup, Error> {
    match sqsafe_telemetry::init() {
        Err(e) if !e.is_already_initialised() => return Err(e.into()),
        _ => {}
    }
    Setup::from_env().await
}

/// A built consumer: hand it Lambda events. Cheap to clone.
pub struct App<C> {
    inner: Arc<(BatchProcessor, Runner<C>)>,
}

impl<C> Clone for App<C> {
    fn clone(&self) -> Self {
        Self {
            inner: Arc::clone(&self.inner),
        }
    }
}

impl<C: Consumer> App<C> {
    /// Handles one invocation.
    pub async fn handle(
        &self,
        event: LambdaEvent<SqsEvent>,
    ) -> Result<SqsBatchResponse, BatchError> {
        let (processor, runner) = &*self.inner;
        runner.check_queue();
        let batch = runner.keyed_batch(processor, &event.payload.records);
        processor
            .handle(event, &|record| runner.run(record, batch.as_ref()))
            .await
    }

    /// Handles a Kinesis invocation: the records' data are the consumer's payloads, run in order per shard, each
    /// shard stopped at its first record that must come back, which the answer names by its sequence number
    /// ([`BatchProcessor::handle_stream_report`]).
    pub async fn handle_kinesis(
        &self,
        event: LambdaEvent<KinesisEvent>,
    ) -> Result<KinesisEventResponse, BatchError> {
        Ok(self.handle_kinesis_report(event).await?.kinesis_response())
    }

    /// [`handle_kinesis`](Self::handle_kinesis), returning each record's disposition (for tests).
    pub async fn handle_kinesis_report(
        &self,
        event: LambdaEvent<KinesisEvent>,
    ) -> Result<BatchReport, BatchError> {
        let batch = StreamBatch::kinesis(event.payload);
        self.handle_stream_report(event.context, batch).await
    }

    /// Handles a DynamoDB Streams invocation: each record's payload is a [`Change`](crate::Change) of the consumer's
    /// item type, run in order, stopped at the first record that must come back, which the answer names by its
    /// sequence number.
    pub async fn handle_dynamodb(
        &self,
        event: LambdaEvent<DynamoDbEvent>,
    ) -> Result<DynamoDbEventResponse, BatchError> {
        Ok(self
            .handle_dynamodb_report(event)
            .await?
            .dynamodb_response())
    }

    /// [`handle_dynamodb`](Self::handle_dynamodb), returning each record's disposition (for tests).
    pub async fn handle_dynamodb_report(
        &self,
        event: LambdaEvent<DynamoDbEvent>,
    ) -> Result<BatchReport, BatchError> {
        let batch = StreamBatch::dynamodb(event.payload);
        self.handle_stream_report(event.context, batch).await
    }

    async fn handle_stream_report(
        &self,
        context: lambda_runtime::Context,
        batch: Result<StreamBatch, BatchError>,
    ) -> Result<BatchReport, BatchError> {
        let (processor, runner) = &*self.inner;
        let batch = match batch {
            Ok(batch) => batch,
            Err(refused) => return Err(processor.refuse(context, refused).await),
        };
        let keyed = runner.keyed_batch(processor, batch.messages());
        processor
            .handle_stream_report(LambdaEvent::new(batch, context), &|record| {
                runner.run(record, keyed.as_ref())
            })
            .await
    }

    /// Handles an invocation of whichever source it comes from (`run`'s loop).
    async fn handle_any(
        &self,
        event: LambdaEvent<SourceEvent>,
    ) -> Result<SqsBatchResponse, BatchError> {
        let LambdaEvent { payload, context } = event;
        match payload {
            SourceEvent::Sqs(event) => self.handle(LambdaEvent::new(event, context)).await,
            // The same answer's JSON for a stream: `batchItemFailures` of `itemIdentifier`s (sequence numbers).
            SourceEvent::Kinesis(event) => Ok(self
                .handle_kinesis_report(LambdaEvent::new(event, context))
                .await?
                .response),
            SourceEvent::Dynamodb(event) => Ok(self
                .handle_dynamodb_report(LambdaEvent::new(event, context))
                .await?
                .response),
        }
    }

    /// Handles one invocation and returns each record's disposition with the response (see
    /// [`BatchProcessor::handle_report`]): for tests, which must tell `Applied` from `Replayed` and a dead letter from
    /// a success (all three leave `batch_item_failures` empty).
    pub async fn handle_report(
        &self,
        event: LambdaEvent<SqsEvent>,
    ) -> Result<BatchReport, BatchError> {
        let (processor, runner) = &*self.inner;
        runner.check_queue();
        let batch = runner.keyed_batch(processor, &event.payload.records);
        processor
            .handle_report(event, &|record| runner.run(record, batch.as_ref()))
            .await
    }

    /// The consumer.
    pub fn consumer(&self) -> &C {
        &self.inner.1.consumer
    }

    /// Runs the Lambda runtime loop; concurrent when Lambda sets `AWS_LAMBDA_MAX_CONCURRENCY` above 1. Each
    /// invocation is read by its records' `eventSource`: an SQS batch (`aws:sqs`), a Kinesis batch
    /// (`aws:kinesis`) or a DynamoDB Streams batch (`aws:dynamodb`), answered with the same `batchItemFailures`;
    /// another source, or a mix, fails the invocation with an error that names it.
    pub async fn run(self) -> Result<(), Error> {
        lambda_runtime::run_concurrent(service_fn(move |event: LambdaEvent<SourceEvent>| {
            let app = self.clone();
            async move { app.handle_any(event).await }
        }))
        .await
        .map_err(Error::Runtime)
    }
}

/// An invocation's event, read by its records' `eventSource`.
#[derive(Debug)]
enum SourceEvent {
    Sqs(SqsEvent),
    Kinesis(KinesisEvent),
    Dynamodb(DynamoDbEvent),
}

impl<'de> Deserialize<'de> for SourceEvent {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        use serde::de::Error as _;
        #[derive(Deserialize)]
        struct Peek<'a> {
            #[serde(rename = "Records", default, borrow)]
            records: Vec<PeekRecord<'a>>,
        }
        #[derive(Deserialize)]
        struct PeekRecord<'a> {
            #[serde(rename = "eventSource", alias = "EventSource", default, borrow)]
            event_source: Option<std::borrow::Cow<'a, str>>,
        }
        let raw = Box::<serde_json::value::RawValue>::deserialize(deserializer)?;
        let peek: Peek<'_> = serde_json::from_str(raw.get()).map_err(D::Error::custom)?;
        let mut sources = peek
            .records
            .iter()
            .map(|r| r.event_source.as_deref().unwrap_or_default());
        // No records, or none that names its source: an SQS batch, which refuses what it cannot use by name.
        let first = sources.next().unwrap_or_default();
        if let Some(other) = sources.find(|s| *s != first) {
            return Err(D::Error::custom(format!(
                "the event mixes records of eventSource {first:?} and {other:?}: one invocation comes from one source"
            )));
        }
        let parsed = match first {
            "aws:sqs" | "" => serde_json::from_str(raw.get()).map(SourceEvent::Sqs),
            "aws:kinesis" => serde_json::from_str(raw.get()).map(SourceEvent::Kinesis),
            "aws:dynamodb" => serde_json::from_str(raw.get()).map(SourceEvent::Dynamodb),
            other => {
                return Err(D::Error::custom(format!(
                    "eventSource {other:?} is not a source sqsafe consumes (aws:sqs, aws:kinesis, aws:dynamodb)"
                )));
            }
        };
        parsed.map_err(D::Error::custom)
    }
}

/// A consumer with its idempotency layer: runs one record.
struct Runner<C> {
    consumer: C,
    idem: Idempotency<DynamoDbStore>,
    fields: FingerprintFields,
    mode: IdempotencyMode,
    /// Without `QUEUE_URL`: said once, on the first SQS batch.
    no_queue: Option<std::sync::Once>,
}

/// The keyed mode's view of one batch: its payloads, parsed once before any record runs so that their keys are
/// known, and their records, read in one request when the first record needs them.
struct KeyedBatch<P> {
    /// Parsed payloads (and bodies as sent) by message id, taken by their records when they run. A record whose
    /// payload did not parse or validate is not here: it parses again when it runs and reports its own error.
    parsed: Mutex<HashMap<String, (P, serde_json::Value)>>,
    /// The keys of the batch, each once, in the batch's order.
    keys: Vec<IdempotencyKey>,
    /// The same keys, to look one up.
    known: HashSet<IdempotencyKey>,
    /// The records read, once, by the first record that needs them. `None`: that read failed (a chunk's error,
    /// keys DynamoDB left unprocessed, a stored item that does not parse); it is not tried again for this
    /// invocation, and each record reads its own key instead, so a throttled table sees one request per record (as
    /// in the claim mode), not the whole batch again per record, and an unreadable item fails only its own record.
    read: tokio::sync::OnceCell<Option<HashMap<IdempotencyKey, IdempotencyRecord>>>,
    /// Keys a record of this batch has used the read for: a later record of the same key (a duplicate in the batch;
    /// in a FIFO group, after the first completed) reads its record again rather than trust the batch's read.
    used: Mutex<HashSet<IdempotencyKey>>,
}

impl<P> KeyedBatch<P> {
    fn take(&self, message_id: &str) -> Option<(P, serde_json::Value)> {
        self.parsed.lock().ok()?.remove(message_id)
    }

    /// The record of `key` as read for this batch, or read now when a record of this batch already used that read.
    async fn record<C>(
        &self,
        runner: &Runner<C>,
        key: &IdempotencyKey,
        deadline: Option<SystemTime>,
    ) -> Result<Option<IdempotencyRecord>, sqsafe_idempotency::Error> {
        let first = self
            .used
            .lock()
            .map(|mut used| used.insert(key.clone()))
            .unwrap_or(false);
        let own_read = || async {
            let mut read = runner
                .idem
                .read_keyed(std::slice::from_ref(key), deadline)
                .await?;
            Ok::<_, sqsafe_idempotency::Error>(read.remove(key))
        };
        if !first || !self.known.contains(key) {
            return own_read().await;
        }
        let read = self
            .read
            .get_or_init(|| async {
                match runner.idem.read_keyed(&self.keys, deadline).await {
                    Ok(read) => Some(read),
                    Err(error) => {
                        tracing::warn!(
                            error = %error,
                            keys = self.keys.len(),
                            "the batch's keyed read failed: each record reads its own key instead"
                        );
                        None
                    }
                }
            })
            .await;
        match read {
            Some(read) => Ok(read.get(key).cloned()),
            None => own_read().await,
        }
    }
}

/// One line per record handled (a failure gets the batch processor's `record failed` line instead).
fn handled(processed: Processed) -> Processed {
    tracing::info!(outcome = ?processed, "record handled");
    processed
}

impl<C: Consumer> Runner<C> {
    /// An SQS batch without `QUEUE_URL` runs without visibility changes: said once.
    fn check_queue(&self) {
        if let Some(once) = &self.no_queue {
            once.call_once(|| {
                tracing::warn!(
                    "QUEUE_URL is not set: an SQS batch runs without backoff, in-progress waits or the visibility \
                     heartbeat (set it to the queue this function consumes)"
                );
            });
        }
    }

    /// In the keyed mode, the batch's payloads parsed and keyed before any record runs; `None` in the claim mode.
    fn keyed_batch(
        &self,
        processor: &BatchProcessor,
        messages: &[SqsMessage],
    ) -> Option<KeyedBatch<C::Payload>> {
        if self.mode != IdempotencyMode::Keyed {
            return None;
        }
        let mut parsed = HashMap::with_capacity(messages.len());
        let mut keys = Vec::with_capacity(messages.len());
        let mut known = HashSet::with_capacity(messages.len());
        // A message id that two records of the event share (a hand-built event: SQS gives each delivery its own)
        // names no one payload: neither is kept, and each of those records parses its own body when it runs.
        let mut ids = HashSet::with_capacity(messages.len());
        let mut shared_ids = HashSet::new();
        for message in messages {
            let Some(id) = message.message_id.as_deref() else {
                continue;
            };
            if !ids.insert(id) {
                shared_ids.insert(id);
            }
            // Errors are left for the record to report when it runs (within its span, to the DLQ if permanent).
            let Ok(Some((payload, raw))) = processor.parse_message::<C::Payload>(message) else {
                continue;
            };
            if C::validate(&payload).is_err() {
                continue;
            }
            let identity = sqsafe_batch::record_identity(message);
            let Ok(key) = C::intent(&payload).key(C::NAME, C::EFFECT_VERSION, identity) else {
                continue;
            };
            if known.insert(key.clone()) {
                keys.push(key);
            }
            parsed.insert(id.to_owned(), (payload, raw));
        }
        for id in shared_ids {
            parsed.remove(id);
        }
        Some(KeyedBatch {
            parsed: Mutex::new(parsed),
            keys,
            known,
            read: tokio::sync::OnceCell::new(),
            used: Mutex::new(HashSet::new()),
        })
    }

    /// Parses the record, keys it, builds its idempotency request (the key goes on the record's span), then makes
    /// the effect the payload asks for: a call once the intent is claimed (claim mode) or under its downstream key
    /// (keyed mode, with the record read for the batch), or writes committed with its record.
    async fn run(
        &self,
        record: Record,
        batch: Option<&KeyedBatch<C::Payload>>,
    ) -> Result<Processed, RecordError> {
        // One parse: the typed payload, and the body as sent, whose intent fields the fingerprint reads. In the keyed
        // mode it was made with the batch's.
        let (payload, raw): (C::Payload, _) = match batch.and_then(|b| b.take(record.message_id()))
        {
            Some(parsed) => parsed,
            None => record.parse_with_raw()?,
        };
        C::validate(&payload)?;
        let key = C::intent(&payload).key(C::NAME, C::EFFECT_VERSION, record.identity())?;
        record.record_idempotency_key(&key);
        let mut request = self
            .idem
            .request_with_fingerprint(key.clone(), Fingerprint::of_value(&raw, &self.fields))
            .attempt(record.receive_count())
            .correlation_id(record.correlation_id().as_str());
        if let Some(deadline) = record.deadline() {
            request = request.deadline(deadline);
        }
        let cx = Context::new(&record, &key);
        match self.consumer.effect(payload, &cx)?.kind {
            EffectKind::Call(call) => {
                let outcome = match batch {
                    None => self.idem.execute(&request, || call).await?,
                    Some(batch) => {
                        let found = batch.record(self, &key, record.deadline()).await?;
                        self.idem
                            .execute_keyed(&request, found.as_ref(), || call)
                            .await?
                    }
                };
                Ok(handled(Processed::of(&outcome)))
            }
            EffectKind::Writes {
                writes,
                output,
                refused,
            } => match self.idem.transact(&request, writes, &output).await? {
                TransactOutcome::Committed => Ok(handled(Processed::Applied)),
                TransactOutcome::Replayed {
                    source: ReplaySource::Store,
                    ..
                } => Ok(handled(Processed::Replayed)),
                TransactOutcome::Replayed {
                    source: ReplaySource::Cache,
                    ..
                } => Ok(handled(Processed::SkippedByCache)),
                TransactOutcome::EffectRefused { index, item } => {
                    Err(refused(index, item.as_ref()))
                }
            },
        }
    }
}

#[cfg(test)]
mod tests {
    use tokio::runtime::RuntimeFlavor;

    use super::{SourceEvent, runtime_for};

    #[test]
    fn an_invocation_is_read_by_its_records_event_source() {
        let read = |json: &str| serde_json::from_str::<SourceEvent>(json);
        let sqs = r#"{"Records":[{"messageId":"m-1","body":"{}","eventSource":"aws:sqs","attributes":{},"messageAttributes":{}}]}"#;
        assert!(matches!(read(sqs), Ok(SourceEvent::Sqs(e)) if e.records.len() == 1));
        let kinesis = r#"{"Records":[{"kinesis":{"partitionKey":"p","sequenceNumber":"1","data":"e30=",
            "approximateArrivalTimestamp":1750000000.123},"eventSource":"aws:kinesis","eventID":"shardId-0:1"}]}"#;
        assert!(matches!(read(kinesis), Ok(SourceEvent::Kinesis(e)) if e.records.len() == 1));
        let dynamodb = r#"{"Records":[{"eventID":"e","eventName":"INSERT","eventSource":"aws:dynamodb","awsRegion":"us-east-1",
            "dynamodb":{"Keys":{"id":{"S":"1"}},"SequenceNumber":"1","SizeBytes":1}}]}"#;
        assert!(matches!(read(dynamodb), Ok(SourceEvent::Dynamodb(e)) if e.records.len() == 1));
        // No records: an SQS batch, which refuses it by name when it runs.
        assert!(
            matches!(read(r#"{"Records":[]}"#), Ok(SourceEvent::Sqs(e)) if e.records.is_empty())
        );
        let err = read(r#"{"Records":[{"eventSource":"aws:s3"}]}"#).expect_err("unknown");
        assert!(
            err.to_string()
                .contains(r#"eventSource "aws:s3" is not a source sqsafe consumes"#),
            "{err}"
        );
        let mixed = format!(
            r#"{{"Records":[{},{}]}}"#,
            &sqs[12..sqs.len() - 2],
            r#"{"eventSource":"aws:kinesis"}"#
        );
        let err = read(&mixed).expect_err("mixed");
        assert!(
            err.to_string()
                .contains(r#"mixes records of eventSource "aws:sqs" and "aws:kinesis""#),
            "{err}"
        );
    }

    #[test]
    fn one_invocation_at_a_time_runs_on_one_thread() {
        let flavour = |f, c| {
            runtime_for(f, c)
                .expect("runtime")
                .handle()
                .runtime_flavor()
        };
        for setting in [None, Some("1"), Some(" 1 "), Some("0"), Some("many")] {
            assert_eq!(
                flavour(None, setting),
                RuntimeFlavor::CurrentThread,
                "{setting:?}"
            );
        }
        assert_eq!(flavour(None, Some("4")), RuntimeFlavor::MultiThread);
        assert_eq!(
            flavour(Some("multi-thread"), None),
            RuntimeFlavor::MultiThread
        );
        assert_eq!(
            flavour(Some("current-thread"), Some("4")),
            RuntimeFlavor::CurrentThread
        );
        let err = runtime_for(Some("green-threads"), None).expect_err("refused");
        assert!(err.to_string().contains("SQSAFE_TOKIO_RUNTIME"), "{err}");
    }
}
