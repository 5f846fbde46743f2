//! The DynamoDB Streams mapping against moto: a table's stream read as Lambda's poller reads it, a consumer built
//! with sqsafe invoked in-process. The answer's sequence number is where the next batch starts; every change applies
//! once, in the shard's order; a poison change goes to the consumer's failure queue with its content; bisection and
//! the retry limit isolate a batch that crashes the function, and the on-failure queue gets its metadata only.

use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, Ordering};

use aws_lambda_events::dynamodb::Event as DynamoDbEvent;
use aws_sdk_dynamodb::types::{AttributeValue, StreamViewType};
use serde::Deserialize;
use serde_json::Value;
use sqsafe::{Change, Consumer, Context, Effect, Env, Intent, RecordError, Setup};
use sqsafe_local::esm::{Delivered, Invoker, StreamMapping, StreamMappingConfig};
use sqsafe_testkit::{
    create_queue, create_streamed_table, create_table, invocation_of, sdk_config, unique_name,
};

#[derive(Debug, Deserialize)]
struct Order {
    n: u32,
}

/// An sqsafe consumer invoked in-process, as the function would be; `crash_on`: the invocation fails (as a crashed
/// function's would) whenever its batch holds that order.
struct InProcess<C> {
    app: sqsafe::App<C>,
    crash_on: Option<u32>,
}

impl<C: Consumer<Payload = Change<Order>>> Invoker for InProcess<C> {
    async fn invoke(&mut self, event: Value) -> Result<Value, String> {
        let event: DynamoDbEvent = serde_json::from_value(event).map_err(|e| e.to_string())?;
        if let Some(n) = self.crash_on {
            let holds = event.records.iter().any(|r| {
                r.change.new_image.get("n").is_some_and(|v| {
                    serde_json::to_value(v).ok() == Some(serde_json::json!({"N": n.to_string()}))
                })
            });
            if holds {
                return Err("the function crashed".to_owned());
            }
        }
        let answer = self
            .app
            .handle_dynamodb(invocation_of(event, "req"))
            .await
            .map_err(|e| e.to_string())?;
        serde_json::to_value(answer).map_err(|e| e.to_string())
    }
}

struct Fixture {
    setup: Setup,
    streams: aws_sdk_dynamodbstreams::Client,
    table: String,
    dlq: String,
}

/// The consumer's idempotency table and failure queue, and an orders table with a stream.
async fn fixture() -> Fixture {
    let aws = sdk_config().await;
    let dynamodb = aws_sdk_dynamodb::Client::new(&aws);
    let idempotency = unique_name("idem");
    create_table(&dynamodb, &idempotency, "pk", None).await;
    let dlq = create_queue(&aws_sdk_sqs::Client::new(&aws), "orders-dlq", false).await;
    let table = unique_name("orders");
    create_streamed_table(&dynamodb, &table, "id", StreamViewType::NewAndOldImages).await;
    let env = Env::from_pairs([
        ("IDEMPOTENCY_TABLE", idempotency.as_str()),
        ("DLQ_URL", dlq.as_str()),
    ]);
    Fixture {
        setup: Setup::new(env, aws.clone()).expect("setup"),
        streams: aws_sdk_dynamodbstreams::Client::new(&aws),
        table,
        dlq,
    }
}

impl Fixture {
    async fn put(&self, ns: impl IntoIterator<Item = u32>) {
        for n in ns {
            self.setup
                .dynamodb
                .put_item()
                .table_name(&self.table)
                .item("id", AttributeValue::S(format!("o-{n}")))
                .item("n", AttributeValue::N(n.to_string()))
                .send()
                .await
                .expect("put an order");
        }
    }

    async fn mapping<C: Consumer<Payload = Change<Order>>>(
        &self,
        config: StreamMappingConfig,
        crash_on: Option<u32>,
    ) -> StreamMapping<InProcess<C>> {
        let app = sqsafe::consumer::<C>().build(&self.setup).expect("app");
        StreamMapping::of_table(
            &self.setup.dynamodb,
            self.streams.clone(),
            self.setup.sqs.clone(),
            &self.table,
            config,
            InProcess { app, crash_on },
        )
        .await
        .expect("the table's stream")
    }
}

fn effect_of<'a>(
    applied: &'static Mutex<Vec<u32>>,
    change: Change<Order>,
) -> Result<Effect<'a, ()>, RecordError> {
    Ok(Effect::call(async move {
        if let Some(order) = change.new_image {
            applied.lock().expect("lock").push(order.n);
        }
        Ok(())
    }))
}

static APPLIED: Mutex<Vec<u32>> = Mutex::new(Vec::new());
static FOURTH_FAILED: AtomicBool = AtomicBool::new(false);

/// Order 4 fails once (transient); order 7 is poison (permanent).
struct Orders;

impl Consumer for Orders {
    const NAME: &'static str = "orders";
    const EFFECT_VERSION: u32 = 1;
    const INTENT_FIELDS: &'static [&'static str] = &["/newImage"];
    type Payload = Change<Order>;
    type Output = ();

    fn new(_: &Setup) -> Result<Self, sqsafe::Error> {
        Ok(Orders)
    }

    fn intent(_: &Change<Order>) -> Intent {
        Intent::of_record()
    }

    fn validate(change: &Change<Order>) -> Result<(), RecordError> {
        match &change.new_image {
            Some(Order { n: 7 }) => Err(RecordError::permanent(
                "poison",
                "order 7 cannot be applied",
            )),
            _ => Ok(()),
        }
    }

    fn effect<'a>(
        &'a self,
        change: Change<Order>,
        _: &'a Context<'a>,
    ) -> Result<Effect<'a, ()>, RecordError> {
        if change.new_image.as_ref().is_some_and(|o| o.n == 4)
            && !FOURTH_FAILED.swap(true, Ordering::SeqCst)
        {
            return Err(RecordError::transient("downstream_5xx", "503"));
        }
        effect_of(&APPLIED, change)
    }
}

#[tokio::test]
async fn the_next_batch_starts_at_the_reported_change_and_each_applies_once_in_order() {
    let fx = fixture().await;
    fx.put(1..=10).await;
    let mut mapping = fx
        .mapping::<Orders>(StreamMappingConfig::default(), None)
        .await;
    let deliveries = mapping.drain(10).await.expect("drained");
    assert_eq!(deliveries.len(), 2, "{deliveries:#?}");
    let first = &deliveries[0];
    assert_eq!(first.sequence_numbers.len(), 10);
    assert_eq!(
        first.delivered,
        Delivered::RetryFrom(first.sequence_numbers[3].clone()),
        "the answer names the 4th change"
    );
    assert_eq!(
        deliveries[1].sequence_numbers,
        first.sequence_numbers[3..],
        "the next batch starts at the 4th"
    );
    assert_eq!(deliveries[1].delivered, Delivered::Done);
    assert_eq!(*APPLIED.lock().expect("lock"), [1, 2, 3, 4, 5, 6, 8, 9, 10]);

    let letters = sqsafe_testkit::receive(&fx.setup.sqs, &fx.dlq).await;
    assert_eq!(letters.len(), 1);
    let change: Value = serde_json::from_str(letters[0].body().expect("body")).expect("JSON");
    assert_eq!(change["newImage"]["n"], 7, "the poison change, whole");

    // What is written later is read from the checkpoint: nothing before it again.
    fx.put([11]).await;
    let later = mapping.drain(10).await.expect("drained");
    assert_eq!(later.len(), 1);
    assert_eq!(APPLIED.lock().expect("lock").last(), Some(&11));
    assert_eq!(APPLIED.lock().expect("lock").len(), 10);
}

static BISECTED: Mutex<Vec<u32>> = Mutex::new(Vec::new());

struct Bisected;

impl Consumer for Bisected {
    const NAME: &'static str = "bisected";
    const EFFECT_VERSION: u32 = 1;
    const INTENT_FIELDS: &'static [&'static str] = &["/newImage"];
    type Payload = Change<Order>;
    type Output = ();

    fn new(_: &Setup) -> Result<Self, sqsafe::Error> {
        Ok(Bisected)
    }

    fn intent(_: &Change<Order>) -> Intent {
        Intent::of_record()
    }

    fn effect<'a>(
        &'a self,
        change: Change<Order>,
        _: &'a Context<'a>,
    ) -> Result<Effect<'a, ()>, RecordError> {
        effect_of(&BISECTED, change)
    }
}

#[tokio::test]
async fn bisection_and_the_retry_limit_isolate_a_crashing_change_and_the_on_failure_queue_gets_its_metadata()
 {
    let fx = fixture().await;
    let on_failure = create_queue(&fx.setup.sqs, "orders-on-failure", false).await;
    fx.put(1..=8).await;
    let config = StreamMappingConfig {
        batch_size: 100,
        maximum_retry_attempts: Some(1),
        bisect_on_function_error: true,
        on_failure_queue: Some(on_failure.clone()),
    };
    let mut mapping = fx.mapping::<Bisected>(config, Some(5)).await;
    let deliveries = mapping.drain(20).await.expect("drained");
    let sizes: Vec<usize> = deliveries
        .iter()
        .map(|d| d.sequence_numbers.len())
        .collect();
    // 1-8 crash; 1-4 pass; 5-8 crash; 5-6 crash; 5 crashes, once more (the one retry), is given up; 6-8 pass.
    assert_eq!(sizes, [8, 4, 4, 2, 1, 1, 3], "{deliveries:#?}");
    let given_up: Vec<&String> = deliveries.iter().flat_map(|d| &d.given_up).collect();
    assert_eq!(given_up, [&deliveries[0].sequence_numbers[4]]);
    assert_eq!(
        *BISECTED.lock().expect("lock"),
        [1, 2, 3, 4, 6, 7, 8],
        "each once, in order"
    );

    let metadata = sqsafe_testkit::receive(&fx.setup.sqs, &on_failure).await;
    assert_eq!(metadata.len(), 1);
    let info: Value = serde_json::from_str(metadata[0].body().expect("body")).expect("JSON");
    let batch = &info["DDBStreamBatchInfo"];
    assert_eq!(
        batch["startSequenceNumber"],
        deliveries[0].sequence_numbers[4]
    );
    assert_eq!(
        batch["endSequenceNumber"],
        deliveries[0].sequence_numbers[4]
    );
    assert_eq!(batch["batchSize"], 1);
    assert_eq!(batch["streamArn"], mapping.stream_arn());
    assert_eq!(
        info["requestContext"]["condition"],
        "RetryAttemptsExhausted"
    );
    assert!(
        !metadata[0].body().unwrap_or_default().contains("NewImage"),
        "metadata only, never the record"
    );
}

/// An sqsafe consumer of Kinesis records invoked in-process.
struct InProcessKinesis<C>(sqsafe::App<C>);

impl<C: Consumer> Invoker for InProcessKinesis<C> {
    async fn invoke(&mut self, event: Value) -> Result<Value, String> {
        let event: aws_lambda_events::kinesis::KinesisEvent =
            serde_json::from_value(event).map_err(|e| e.to_string())?;
        let answer = self
            .0
            .handle_kinesis(invocation_of(event, "req"))
            .await
            .map_err(|e| e.to_string())?;
        serde_json::to_value(answer).map_err(|e| e.to_string())
    }
}

static TALLIED: Mutex<Vec<u32>> = Mutex::new(Vec::new());
static TALLY_FAILED: AtomicBool = AtomicBool::new(false);

/// Kinesis records `{"n": n}`; the 4th fails once, transiently.
struct Tally;

impl Consumer for Tally {
    const NAME: &'static str = "tally";
    const EFFECT_VERSION: u32 = 1;
    const INTENT_FIELDS: &'static [&'static str] = &["/n"];
    type Payload = Order;
    type Output = ();

    fn new(_: &Setup) -> Result<Self, sqsafe::Error> {
        Ok(Tally)
    }

    fn intent(p: &Order) -> Intent {
        Intent::untenanted("n", p.n.to_string())
    }

    fn effect<'a>(&'a self, p: Order, _: &'a Context<'a>) -> Result<Effect<'a, ()>, RecordError> {
        Ok(Effect::call(async move {
            if p.n == 4 && !TALLY_FAILED.swap(true, Ordering::SeqCst) {
                return Err(RecordError::transient("downstream_5xx", "503"));
            }
            TALLIED.lock().expect("lock").push(p.n);
            Ok(())
        }))
    }
}

/// The issue's case on a Kinesis stream (moto): 10 records of one partition key whose 4th fails once. The first
/// answer names the 4th and nothing after it applies; the next batch starts at the 4th; each applies once, in order.
#[tokio::test]
async fn a_kinesis_shard_resumes_at_the_reported_record_each_applied_once_in_order() {
    let fx = fixture().await;
    let kinesis = aws_sdk_kinesis::Client::new(&sdk_config().await);
    let stream = unique_name("tally");
    kinesis
        .create_stream()
        .stream_name(&stream)
        .shard_count(1)
        .send()
        .await
        .expect("create the stream in moto");
    for n in 1..=10 {
        kinesis
            .put_record()
            .stream_name(&stream)
            .partition_key("order-7")
            .data(aws_sdk_kinesis::primitives::Blob::new(format!(
                r#"{{"n":{n}}}"#
            )))
            .send()
            .await
            .expect("put a record");
    }
    let app = sqsafe::consumer::<Tally>().build(&fx.setup).expect("app");
    let mut mapping = StreamMapping::of_kinesis(
        kinesis,
        fx.setup.sqs.clone(),
        &stream,
        None,
        StreamMappingConfig::default(),
        InProcessKinesis(app),
    )
    .await
    .expect("the stream's shard");
    let first = mapping.poll().await.expect("poll").expect("a batch");
    assert_eq!(first.sequence_numbers.len(), 10);
    assert_eq!(
        first.delivered,
        Delivered::RetryFrom(first.sequence_numbers[3].clone())
    );
    assert_eq!(
        *TALLIED.lock().expect("lock"),
        [1, 2, 3],
        "nothing after the 4th"
    );
    let rest = mapping.drain(5).await.expect("drained");
    assert_eq!(rest.len(), 1);
    assert_eq!(rest[0].sequence_numbers, first.sequence_numbers[3..]);
    assert_eq!(rest[0].delivered, Delivered::Done);
    assert_eq!(
        *TALLIED.lock().expect("lock"),
        (1..=10).collect::<Vec<_>>(),
        "each once, in order"
    );
    assert_eq!(
        mapping.checkpoint(),
        first.sequence_numbers.last().map(String::as_str)
    );
}

#[derive(Debug, Deserialize)]
struct Keyed {
    key: u32,
    n: u32,
}

/// (key, n) in the order applied.
static CHAOS_APPLIED: Mutex<Vec<(u32, u32)>> = Mutex::new(Vec::new());
/// The seeded draws of the handler's failures.
static CHAOS_RNG: Mutex<Option<fastrand::Rng>> = Mutex::new(None);

/// Fails transiently on one draw in five.
struct Chaos;

impl Consumer for Chaos {
    const NAME: &'static str = "chaos";
    const EFFECT_VERSION: u32 = 1;
    const INTENT_FIELDS: &'static [&'static str] = &["/key", "/n"];
    type Payload = Keyed;
    type Output = ();

    fn new(_: &Setup) -> Result<Self, sqsafe::Error> {
        Ok(Chaos)
    }

    fn intent(_: &Keyed) -> Intent {
        Intent::of_record()
    }

    fn effect<'a>(&'a self, p: Keyed, _: &'a Context<'a>) -> Result<Effect<'a, ()>, RecordError> {
        Ok(Effect::call(async move {
            let fail = CHAOS_RNG
                .lock()
                .expect("lock")
                .as_mut()
                .is_some_and(|rng| rng.u8(..5) == 0);
            if fail {
                return Err(RecordError::transient("downstream_5xx", "503"));
            }
            CHAOS_APPLIED.lock().expect("lock").push((p.key, p.n));
            Ok(())
        }))
    }
}

/// The function's answer is lost (a crash after the work, a timeout) on one invocation in six: the whole batch
/// comes back.
struct LosingAnswers {
    app: sqsafe::App<Chaos>,
    rng: fastrand::Rng,
    lost: u32,
}

impl Invoker for LosingAnswers {
    async fn invoke(&mut self, event: Value) -> Result<Value, String> {
        let lose = self.rng.u8(..6) == 0;
        let mut inner = InProcessKinesis(self.app.clone());
        let answer = inner.invoke(event).await?;
        if lose {
            self.lost += 1;
            return Err("the answer was lost".to_owned());
        }
        Ok(answer)
    }
}

/// 40 records over 4 partition keys on a Kinesis shard (moto), handler failures and lost answers drawn from a seed
/// (printed; `SQSAFE_SEED` replays one), bisection on: every record applied once, in order per key.
#[tokio::test]
async fn under_failures_and_lost_answers_each_record_applies_once_in_order_per_key() {
    let seed = std::env::var("SQSAFE_SEED")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(|| fastrand::u64(..));
    eprintln!("seed {seed} (SQSAFE_SEED={seed} replays it)");
    *CHAOS_RNG.lock().expect("lock") = Some(fastrand::Rng::with_seed(seed));
    let fx = fixture().await;
    let kinesis = aws_sdk_kinesis::Client::new(&sdk_config().await);
    let stream = unique_name("chaos");
    kinesis
        .create_stream()
        .stream_name(&stream)
        .shard_count(1)
        .send()
        .await
        .expect("create the stream in moto");
    for n in 0..40 {
        let key = n % 4;
        kinesis
            .put_record()
            .stream_name(&stream)
            .partition_key(format!("key-{key}"))
            .data(aws_sdk_kinesis::primitives::Blob::new(format!(
                r#"{{"key":{key},"n":{n}}}"#
            )))
            .send()
            .await
            .expect("put a record");
    }
    let app = sqsafe::consumer::<Chaos>().build(&fx.setup).expect("app");
    let config = StreamMappingConfig {
        batch_size: 10,
        bisect_on_function_error: true,
        ..StreamMappingConfig::default()
    };
    let invoker = LosingAnswers {
        app,
        rng: fastrand::Rng::with_seed(seed ^ 0x5eed),
        lost: 0,
    };
    let mut mapping = StreamMapping::of_kinesis(
        kinesis,
        fx.setup.sqs.clone(),
        &stream,
        None,
        config,
        invoker,
    )
    .await
    .expect("the stream's shard");
    let deliveries = mapping.drain(400).await.expect("drained");
    let retried = deliveries
        .iter()
        .filter(|d| d.delivered != Delivered::Done)
        .count();
    eprintln!(
        "{} invocations, {retried} came back in part or whole, {} answers lost",
        deliveries.len(),
        mapping.invoker().lost
    );
    let applied = CHAOS_APPLIED.lock().expect("lock").clone();
    let mut ns: Vec<u32> = applied.iter().map(|(_, n)| *n).collect();
    ns.sort_unstable();
    assert_eq!(
        ns,
        (0..40).collect::<Vec<_>>(),
        "each record once (seed {seed})"
    );
    for key in 0..4 {
        let order: Vec<u32> = applied
            .iter()
            .filter(|(k, _)| *k == key)
            .map(|(_, n)| *n)
            .collect();
        assert!(
            order.windows(2).all(|w| w[0] < w[1]),
            "key {key} out of order: {order:?} (seed {seed})"
        );
    }
    assert!(
        retried > 0,
        "the draws made something come back (seed {seed})"
    );
}
