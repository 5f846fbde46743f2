//! One consumer of the template against the local AWS, for its tests: what a generated consumer's tests would
//! otherwise build by hand, so that each of them reads as its name says.
//!
//! [`Harness::start`] creates the consumer's tables and queues as template.yaml defines them (under unique names, in
//! the moto server `make test` runs), sets its environment as the template does, and builds the consumer on it.
//! [`Harness::with_api`] does the same with a [`FakeDownstream`] as the API it calls. Then the test delivers events
//! ([`Harness::deliver`]: the sample event of `events/`, or one record of it with another body) and reads what can be
//! seen from outside: each record's [`Disposition`](sqsafe::Disposition), the stored results, the items of a table, the dead letters.
//!
//! ```no_run
//! # use serde::{Deserialize, Serialize};
//! # use sqsafe::{Consumer, Context, Effect, Intent, RecordError, Setup};
//! # #[derive(Debug, Deserialize)] struct Requested { id: String }
//! # #[derive(Debug, PartialEq, Serialize, Deserialize)] struct Applied { id: String }
//! # struct SendInvoice;
//! # impl Consumer for SendInvoice {
//! #     const NAME: &'static str = "send-invoice";
//! #     const EFFECT_VERSION: u32 = 1;
//! #     const INTENT_FIELDS: &'static [&'static str] = &["/id"];
//! #     type Payload = Requested;
//! #     type Output = Applied;
//! #     fn new(_: &Setup) -> Result<Self, sqsafe::Error> { Ok(Self) }
//! #     fn intent(p: &Requested) -> Intent { Intent::untenanted("invoice", &p.id) }
//! #     fn effect<'a>(&'a self, p: Requested, _: &'a Context<'a>) -> Result<Effect<'a, Applied>, RecordError> {
//! #         Ok(Effect::call(async move { Ok(Applied { id: p.id }) }))
//! #     }
//! # }
//! use sqsafe::Processed;
//! use sqsafe_local::harness::Harness;
//!
//! # async fn run() -> Result<(), sqsafe_local::harness::HarnessError> {
//! // The template's parameter `SendInvoiceApiUrl` set to a fake API on loopback.
//! let h = Harness::<SendInvoice>::with_api("SendInvoiceApiUrl").await?;
//! let first = h.deliver(h.sample()).await;
//! assert!(first.all_succeeded(Processed::Applied), "{first:?}");
//! assert_eq!(h.api().calls().len(), first.records.len());
//! let again = h.deliver(h.sample()).await;
//! assert!(again.all_succeeded(Processed::Replayed), "{again:?}");
//! assert_eq!(h.api().calls().len(), first.records.len(), "no second call");
//! # Ok(()) }
//! ```

mod builder;
mod delivery;
mod error;

use std::collections::{BTreeMap, HashMap};
use std::sync::atomic::{AtomicU64, Ordering};

use aws_lambda_events::dynamodb::Event as DynamoDbEvent;
use aws_lambda_events::kinesis::KinesisEvent;
use aws_lambda_events::sqs::SqsEvent;
use aws_sdk_dynamodb::types::AttributeValue;
use aws_sdk_sqs::types::MessageSystemAttributeName;
use sqsafe::{App, Consumer, Env, Setup};
use sqsafe_testkit::{
    FakeDownstream, event_file, invocation, invocation_of, sdk_config, unique_name,
};

use crate::stack::{EnvSource, LocalStack, StackOptions, template_path};

pub use builder::HarnessBuilder;
pub use delivery::{DeadLetter, Delivery};
pub use error::HarnessError;

/// A DynamoDB item, as the SDK returns it.
pub type Item = HashMap<String, AttributeValue>;

/// The consumer `C` built on its template's resources in the local AWS (see the [module](self)).
///
/// Each harness has tables and queues of its own: tests run in parallel against one moto server.
pub struct Harness<C: Consumer> {
    app: App<C>,
    setup: Setup,
    api: Option<FakeDownstream>,
    dead_letter_queue: String,
    sample: String,
    deliveries: AtomicU64,
}

impl<C: Consumer> std::fmt::Debug for Harness<C> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Harness")
            .field("consumer", &C::NAME)
            .field("api", &self.api.as_ref().map(FakeDownstream::url))
            .field("dead_letter_queue", &self.dead_letter_queue)
            .finish_non_exhaustive()
    }
}

impl<C: Consumer> Harness<C> {
    /// `C` on the resources template.yaml defines for its function (the one built as [`Consumer::NAME`]): its tables
    /// and queues created in the local AWS ([`sqsafe_testkit::endpoint`]) under names of their own, its environment
    /// as the template sets it. [`Harness::builder`] for what a test changes.
    pub async fn start() -> Result<Self, HarnessError> {
        Self::builder().start().await
    }

    /// The same, with a [`FakeDownstream`] ([`Harness::api`]) as the API `C` calls: its URL is the value of the
    /// template's parameter `parameter`, which the function's environment must refer to.
    pub async fn with_api(parameter: &str) -> Result<Self, HarnessError> {
        Self::builder().fake_api(parameter).start().await
    }

    /// A harness with choices of the test's own: parameters, environment, the DynamoDB client, the sample.
    pub fn builder() -> HarnessBuilder<C> {
        HarnessBuilder::new()
    }

    async fn create(options: HarnessBuilder<C>) -> Result<Self, HarnessError> {
        let aws = sdk_config().await;
        let api = match options.fake_api {
            Some(_) => Some(FakeDownstream::start().await),
            None => None,
        };
        let mut parameters = options.parameters;
        if let (Some(name), Some(api)) = (&options.fake_api, &api) {
            parameters.insert(name.clone(), api.url());
        }
        let stack_options = StackOptions {
            prefix: unique_name(C::NAME),
            parameters,
            ..StackOptions::default()
        };
        let sqs = aws_sdk_sqs::Client::new(&aws);
        let dynamodb = options
            .dynamodb
            .unwrap_or_else(|| aws_sdk_dynamodb::Client::new(&aws));
        let template = options.template.clone().unwrap_or_else(template_path);
        let stack = LocalStack::for_function_in(&template, &sqs, &dynamodb, C::NAME, stack_options)
            .await
            .map_err(|source| HarnessError::Stack {
                consumer: C::NAME,
                source,
            })?;
        if let Some(parameter) = &options.fake_api {
            let refers = stack.spec.env_of(C::NAME).is_some_and(|env| {
                env.values()
                    .any(|s| matches!(s, EnvSource::Ref(r) if r == parameter))
            });
            if !refers {
                return Err(HarnessError::ApiParameter {
                    consumer: C::NAME,
                    parameter: parameter.clone(),
                });
            }
        }
        let dead_letter_queue = stack
            .failure_queue(C::NAME)
            .ok_or(HarnessError::NoDeadLetterQueue { consumer: C::NAME })?
            .url
            .clone();
        let mut env = stack.function_env(C::NAME);
        env.extend(options.env);
        let consumer_error = |source| HarnessError::Consumer {
            consumer: C::NAME,
            source,
        };
        let mut setup = Setup::new(Env::from_pairs(env), aws).map_err(consumer_error)?;
        setup.dynamodb = dynamodb;
        let app = sqsafe::consumer::<C>()
            .build(&setup)
            .map_err(consumer_error)?;
        Ok(Self {
            app,
            setup,
            api,
            dead_letter_queue,
            sample: options
                .sample
                .unwrap_or_else(|| format!("{}.json", C::NAME)),
            deliveries: AtomicU64::new(0),
        })
    }

    /// The consumer, built as its `main` builds it.
    pub fn app(&self) -> &App<C> {
        &self.app
    }

    /// What it was built from: its settings, its environment and the AWS clients of the local AWS.
    pub fn setup(&self) -> &Setup {
        &self.setup
    }

    /// The fake API it calls.
    ///
    /// # Panics
    /// When the harness was made with [`Harness::start`], which starts none.
    pub fn api(&self) -> &FakeDownstream {
        self.api.as_ref().unwrap_or_else(|| {
            panic!(
                "{}'s harness has no fake API: make it with Harness::with_api",
                C::NAME
            )
        })
    }

    /// The sample event: `events/<NAME>.json` of the project (or the file given to [`HarnessBuilder::sample`]).
    ///
    /// # Panics
    /// When the file is missing or is not an SQS event ([`event_file`]).
    pub fn sample(&self) -> SqsEvent {
        event_file(&self.sample)
    }

    /// The sample event's first record alone.
    ///
    /// # Panics
    /// As [`Harness::sample`], and when the sample has no record.
    pub fn sample_first(&self) -> SqsEvent {
        let mut event = self.sample();
        assert!(
            !event.records.is_empty(),
            "events/{} has no record",
            self.sample
        );
        event.records.truncate(1);
        event
    }

    /// The sample event's first record alone, with `body` as its body: a record the sample does not hold (a bad
    /// body, a notification of another kind) as the queue would deliver it.
    ///
    /// # Panics
    /// As [`Harness::sample_first`].
    pub fn sample_with_body(&self, body: &str) -> SqsEvent {
        let mut event = self.sample_first();
        event.records[0].body = Some(body.to_owned());
        event
    }

    /// Hands `event` to the consumer as one invocation (a request id of its own, a deadline 30 s ahead) and returns
    /// what became of each record.
    ///
    /// # Panics
    /// When the invocation fails as a whole (a `BatchError`: no record was answered).
    pub async fn deliver(&self, event: SqsEvent) -> Delivery {
        let n = self.deliveries.fetch_add(1, Ordering::Relaxed) + 1;
        let request_id = format!("{}-delivery-{n}", C::NAME);
        match self.app.handle_report(invocation(event, &request_id)).await {
            Ok(report) => Delivery::from(report),
            Err(e) => panic!("{request_id}: the invocation failed as a whole: {e}"),
        }
    }

    /// The sample event of a Kinesis consumer: `events/<NAME>.json` (or the file given to
    /// [`HarnessBuilder::sample`]) read as a Kinesis batch.
    ///
    /// # Panics
    /// When the file is missing or is not a Kinesis event.
    pub fn kinesis_sample(&self) -> KinesisEvent {
        let path = sqsafe_testkit::events_dir().join(&self.sample);
        let text = std::fs::read_to_string(&path)
            .unwrap_or_else(|e| panic!("read {}: {e}", path.display()));
        serde_json::from_str(&text)
            .unwrap_or_else(|e| panic!("{} is not a Kinesis event: {e}", path.display()))
    }

    /// Records of one shard with `data` as their data, in order, as the shard hands them over: sequence numbers
    /// 1, 2, ... (56 digits, as Kinesis writes them), partition key `acme`, the stream named after the consumer.
    pub fn kinesis_records(&self, data: &[&str]) -> KinesisEvent {
        use base64::Engine as _;
        let records: Vec<serde_json::Value> = data
            .iter()
            .enumerate()
            .map(|(i, data)| {
                let sequence = format!("{:056}", i + 1);
                serde_json::json!({
                    "kinesis": {
                        "kinesisSchemaVersion": "1.0",
                        "partitionKey": "acme",
                        "sequenceNumber": sequence,
                        "data": base64::engine::general_purpose::STANDARD.encode(data),
                        "approximateArrivalTimestamp": 1_796_000_000.0,
                    },
                    "eventSource": "aws:kinesis",
                    "eventVersion": "1.0",
                    "eventID": format!("shardId-000000000000:{sequence}"),
                    "eventName": "aws:kinesis:record",
                    "awsRegion": "us-east-1",
                    "eventSourceARN": format!("arn:aws:kinesis:us-east-1:123456789012:stream/{}", C::NAME),
                })
            })
            .collect();
        serde_json::from_value(serde_json::json!({ "Records": records }))
            .unwrap_or_else(|e| panic!("a Kinesis event: {e}"))
    }

    /// Hands the Kinesis batch `event` to the consumer as one invocation, as [`Harness::deliver`] an SQS one.
    ///
    /// # Panics
    /// When the invocation fails as a whole.
    pub async fn deliver_kinesis(&self, event: KinesisEvent) -> Delivery {
        let n = self.deliveries.fetch_add(1, Ordering::Relaxed) + 1;
        let request_id = format!("{}-delivery-{n}", C::NAME);
        match self
            .app
            .handle_kinesis_report(invocation_of(event, &request_id))
            .await
        {
            Ok(report) => Delivery::from(report),
            Err(e) => panic!("{request_id}: the invocation failed as a whole: {e}"),
        }
    }

    /// The sample event of a DynamoDB-stream consumer: `events/<NAME>.json` (or the file given to
    /// [`HarnessBuilder::sample`]) read as a DynamoDB Streams batch.
    ///
    /// # Panics
    /// When the file is missing or is not a DynamoDB Streams event.
    pub fn dynamodb_sample(&self) -> DynamoDbEvent {
        let path = sqsafe_testkit::events_dir().join(&self.sample);
        let text = std::fs::read_to_string(&path)
            .unwrap_or_else(|e| panic!("read {}: {e}", path.display()));
        serde_json::from_str(&text)
            .unwrap_or_else(|e| panic!("{} is not a DynamoDB Streams event: {e}", path.display()))
    }

    /// Inserts of `items` (each an item's attributes as plain JSON, its `pk` the key), in order, as a table's stream
    /// hands them over: sequence numbers 1, 2, ..., event ids `change-1`, `change-2`, ..., new images only.
    ///
    /// # Panics
    /// When an item is not a JSON object.
    pub fn dynamodb_inserts(&self, items: &[serde_json::Value]) -> DynamoDbEvent {
        let records: Vec<serde_json::Value> = items
            .iter()
            .enumerate()
            .map(|(i, item)| {
                let image = serde_dynamo::to_item::<_, serde_dynamo::Item>(item)
                    .unwrap_or_else(|e| panic!("item {}: not a DynamoDB item: {e}", i + 1));
                let keys: serde_dynamo::Item = item
                    .get("pk")
                    .map(|pk| serde_dynamo::to_item(serde_json::json!({ "pk": pk })))
                    .transpose()
                    .unwrap_or_else(|e| panic!("item {}: its pk: {e}", i + 1))
                    .unwrap_or_default();
                serde_json::json!({
                    "eventID": format!("change-{}", i + 1),
                    "eventName": "INSERT",
                    "eventVersion": "1.1",
                    "eventSource": "aws:dynamodb",
                    "awsRegion": "us-east-1",
                    "dynamodb": {
                        "ApproximateCreationDateTime": 1_796_000_000,
                        "Keys": keys,
                        "NewImage": image,
                        "SequenceNumber": format!("{:021}", i + 1),
                        "SizeBytes": 64,
                        "StreamViewType": "NEW_IMAGE",
                    },
                    "eventSourceARN": format!(
                        "arn:aws:dynamodb:us-east-1:123456789012:table/{}-source/stream/2026-12-01T00:00:00.000",
                        C::NAME
                    ),
                })
            })
            .collect();
        serde_json::from_value(serde_json::json!({ "Records": records }))
            .unwrap_or_else(|e| panic!("a DynamoDB Streams event: {e}"))
    }

    /// Hands the DynamoDB Streams batch `event` to the consumer as one invocation, as [`Harness::deliver`] an SQS
    /// one.
    ///
    /// # Panics
    /// When the invocation fails as a whole.
    pub async fn deliver_dynamodb(&self, event: DynamoDbEvent) -> Delivery {
        let n = self.deliveries.fetch_add(1, Ordering::Relaxed) + 1;
        let request_id = format!("{}-delivery-{n}", C::NAME);
        match self
            .app
            .handle_dynamodb_report(invocation_of(event, &request_id))
            .await
        {
            Ok(report) => Delivery::from(report),
            Err(e) => panic!("{request_id}: the invocation failed as a whole: {e}"),
        }
    }

    /// The results the `COMPLETED` idempotency records keep for replay, decoded, in the order of their keys.
    ///
    /// # Panics
    /// When the local AWS does not answer, or a stored result is not a `C::Output`.
    pub async fn stored_results(&self) -> Vec<C::Output> {
        let text = |item: &Item, name: &str| item.get(name).and_then(|v| v.as_s().ok()).cloned();
        let completed: BTreeMap<String, String> = self
            .items_of(&self.setup.settings.idempotency_table)
            .await
            .into_iter()
            .filter(|item| text(item, "status").as_deref() == Some("COMPLETED"))
            .filter_map(|item| Some((text(&item, "pk")?, text(&item, "result")?)))
            .collect();
        completed
            .into_iter()
            .map(|(key, result)| {
                serde_json::from_str(&result).unwrap_or_else(|e| {
                    panic!(
                        "the result stored under {key} is not {}'s output: {e}",
                        C::NAME
                    )
                })
            })
            .collect()
    }

    /// Every item of the table named by the environment variable `variable` (e.g. `EFFECT_TABLE`), in the order
    /// the scan returns them.
    ///
    /// # Panics
    /// When the consumer's environment has no such variable, or the local AWS does not answer.
    pub async fn items(&self, variable: &str) -> Vec<Item> {
        let table = self
            .setup
            .env
            .required(variable)
            .unwrap_or_else(|e| panic!("{}: {e}", C::NAME));
        self.items_of(&table).await
    }

    async fn items_of(&self, table: &str) -> Vec<Item> {
        self.setup
            .dynamodb
            .scan()
            .table_name(table)
            .send()
            .await
            .unwrap_or_else(|e| panic!("scan {table}: {e:?}"))
            .items
            .unwrap_or_default()
    }

    /// The one message the consumer's DLQ holds (see [`Harness::dead_letters`]).
    ///
    /// # Panics
    /// When the DLQ holds none or several (the message lists them), or the local AWS does not answer.
    pub async fn dead_letter(&self) -> DeadLetter {
        let mut letters = self.dead_letters().await;
        match letters.pop() {
            Some(letter) if letters.is_empty() => letter,
            last => panic!(
                "{}'s DLQ holds {} messages, not one: {:?}",
                C::NAME,
                letters.len() + usize::from(last.is_some()),
                letters
                    .iter()
                    .chain(&last)
                    .map(|l| &l.body)
                    .collect::<Vec<_>>()
            ),
        }
    }

    /// What the consumer's DLQ holds (up to 10 messages, not waiting for more), received with their attributes and
    /// system attributes (a FIFO DLQ's `MessageGroupId`).
    /// Receiving hides them for the queue's visibility timeout: a second call sees none of them.
    ///
    /// # Panics
    /// When the local AWS does not answer.
    pub async fn dead_letters(&self) -> Vec<DeadLetter> {
        let received = self
            .setup
            .sqs
            .receive_message()
            .queue_url(&self.dead_letter_queue)
            .max_number_of_messages(10)
            .message_attribute_names("All")
            .message_system_attribute_names(MessageSystemAttributeName::All)
            .send()
            .await
            .unwrap_or_else(|e| panic!("receive from {}: {e:?}", self.dead_letter_queue));
        received
            .messages
            .unwrap_or_default()
            .into_iter()
            .map(DeadLetter::from)
            .collect()
    }
}
