//! Envelopes against moto's own paths into a queue (moto server, started by `make test`): an SNS topic's SQS
//! subscription (wrapped, and raw delivery read as plain SQS), an EventBridge rule with the queue as its target, a
//! bucket's S3 notifications. tests/envelopes/route.py sets each path up and sends the same intent through it twice;
//! the messages moto delivered are received from the queue and handed to the consumer one invocation each, as the
//! event source mapping would: one effect, then a replay, with the correlation id the envelope carried. A body that
//! is not the declared envelope is dead-lettered as `bad_envelope` with its context, and quotes no value.

use std::path::PathBuf;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use aws_lambda_events::sqs::SqsEvent;
use serde::{Deserialize, Serialize};
use sqsafe::{
    App, Consumer, Context, Disposition, Effect, Env, Envelope, Intent, RecordError, S3Object,
    Setup,
};
use sqsafe_testkit::{create_queue, create_table, invocation, sdk_config, unique_name};

#[derive(Deserialize)]
struct Payment {
    tenant: String,
    id: String,
    amount: u64,
}

#[derive(Debug, PartialEq, Serialize, Deserialize)]
struct Charged(u64);

/// Each effect that ran: (consumer, correlation id).
static EFFECTS: Mutex<Vec<(&'static str, String)>> = Mutex::new(Vec::new());

fn ran(consumer: &'static str, cx: &Context<'_>) {
    EFFECTS
        .lock()
        .expect("effects")
        .push((consumer, cx.correlation_id().as_str().to_owned()));
}

fn effects_of(consumer: &str) -> Vec<String> {
    EFFECTS
        .lock()
        .expect("effects")
        .iter()
        .filter(|(c, _)| *c == consumer)
        .map(|(_, id)| id.clone())
        .collect()
}

/// A payment consumer behind `$envelope`, named `$name`.
macro_rules! payer {
    ($ty:ident, $name:literal, $envelope:expr) => {
        struct $ty;

        impl Consumer for $ty {
            const NAME: &'static str = $name;
            const EFFECT_VERSION: u32 = 1;
            const INTENT_FIELDS: &'static [&'static str] = &["/tenant", "/id", "/amount"];
            const ENVELOPE: Envelope = $envelope;
            type Payload = Payment;
            type Output = Charged;

            fn new(_: &Setup) -> Result<Self, sqsafe::Error> {
                Ok($ty)
            }

            fn intent(p: &Payment) -> Intent {
                Intent::new(&p.tenant, "payment", &p.id)
            }

            fn effect<'a>(
                &'a self,
                p: Payment,
                cx: &'a Context<'a>,
            ) -> Result<Effect<'a, Charged>, RecordError> {
                Ok(Effect::call(async move {
                    ran($name, cx);
                    Ok(Charged(p.amount))
                }))
            }
        }
    };
}

payer!(SnsPayer, "sns-payer", Envelope::Sns);
payer!(RawPayer, "raw-payer", Envelope::Sqs);
payer!(EventPayer, "event-payer", Envelope::EventBridge);

/// Ingests each S3 object once per content (bucket, key and ETag).
struct Ingest;

impl Consumer for Ingest {
    const NAME: &'static str = "ingest";
    const EFFECT_VERSION: u32 = 1;
    const INTENT_FIELDS: &'static [&'static str] = &["/bucket", "/key", "/etag"];
    const ENVELOPE: Envelope = Envelope::S3;
    type Payload = S3Object;
    type Output = String;

    fn new(_: &Setup) -> Result<Self, sqsafe::Error> {
        Ok(Ingest)
    }

    fn intent(o: &S3Object) -> Intent {
        let etag = o.etag.as_deref().unwrap_or("none");
        Intent::untenanted("object", format!("{}/{}@{etag}", o.bucket, o.key))
    }

    fn effect<'a>(
        &'a self,
        o: S3Object,
        cx: &'a Context<'a>,
    ) -> Result<Effect<'a, String>, RecordError> {
        Ok(Effect::call(async move {
            ran("ingest", cx);
            Ok(o.key)
        }))
    }
}

/// The queue route.py made, the messages it expects there.
#[derive(Deserialize)]
struct Route {
    queue_url: String,
    queue_arn: String,
    expected: usize,
}

fn workspace_root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// Runs tests/envelopes/route.py for `kind` against the suite's moto server.
fn route(kind: &str, prefix: &str) -> Route {
    let endpoint = sqsafe_testkit::endpoint();
    let python = workspace_root().join(".venv/bin/python");
    let script = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/envelopes/route.py");
    let out = std::process::Command::new(&python)
        .arg(&script)
        .args([kind, prefix])
        .env("AWS_ENDPOINT_URL", &endpoint)
        .output()
        .unwrap_or_else(|e| panic!("{}: {e} (make test makes the venv)", python.display()));
    assert!(
        out.status.success(),
        "route.py {kind}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).expect("route.py's JSON")
}

/// Everything the path delivered (`route.expected` messages), oldest first, with every attribute.
async fn delivered(sqs: &aws_sdk_sqs::Client, route: &Route) -> Vec<aws_sdk_sqs::types::Message> {
    let started = Instant::now();
    let mut messages = Vec::new();
    while messages.len() < route.expected {
        assert!(
            started.elapsed() < Duration::from_secs(20),
            "{} of {} messages arrived in {}",
            messages.len(),
            route.expected,
            route.queue_url
        );
        let out = sqs
            .receive_message()
            .queue_url(&route.queue_url)
            .max_number_of_messages(10)
            .wait_time_seconds(1)
            .visibility_timeout(60)
            .message_system_attribute_names(aws_sdk_sqs::types::MessageSystemAttributeName::All)
            .message_attribute_names("All")
            .send()
            .await
            .expect("receive");
        messages.extend(out.messages().iter().cloned());
    }
    messages.sort_by_key(|m| {
        m.attributes()
            .and_then(|a| a.get(&aws_sdk_sqs::types::MessageSystemAttributeName::SentTimestamp))
            .and_then(|t| t.parse::<u64>().ok())
            .unwrap_or(0)
    });
    messages
}

/// Each message in an invocation of its own, as the event source mapping hands them over one batch at a time.
async fn one_by_one<C: Consumer>(
    app: &App<C>,
    messages: &[aws_sdk_sqs::types::Message],
    arn: &str,
) -> Vec<Disposition> {
    let mut dispositions = Vec::new();
    for (i, message) in messages.iter().enumerate() {
        let event: SqsEvent = serde_json::from_value(sqsafe_local::esm::sqs_event(
            std::slice::from_ref(message),
            arn,
        ))
        .expect("an SQS event");
        let report = app
            .handle_report(invocation(event, &format!("req-{i}")))
            .await
            .expect("batch");
        dispositions.extend(report.records.into_iter().map(|r| r.disposition));
    }
    dispositions
}

async fn setup() -> (Setup, String) {
    let aws = sdk_config().await;
    let dynamodb = aws_sdk_dynamodb::Client::new(&aws);
    let sqs = aws_sdk_sqs::Client::new(&aws);
    let table = unique_name("envelopes");
    create_table(&dynamodb, &table, "pk", None).await;
    let dlq = create_queue(&sqs, "envelopes-dlq", false).await;
    let queue = create_queue(&sqs, "envelopes", false).await;
    let env = Env::from_pairs([
        ("IDEMPOTENCY_TABLE".to_owned(), table),
        ("DLQ_URL".to_owned(), dlq.clone()),
        ("QUEUE_URL".to_owned(), queue),
    ]);
    (Setup::new(env, aws).expect("setup"), dlq)
}

fn outcomes(dispositions: &[Disposition]) -> Vec<String> {
    dispositions
        .iter()
        .map(|d| match d {
            Disposition::Succeeded(p) => format!("{p:?}"),
            other => format!("{other:?}"),
        })
        .collect()
}

#[tokio::test]
async fn an_intent_published_twice_to_an_sns_topic_is_applied_once_with_the_publishers_correlation_id()
 {
    let (setup, _) = setup().await;
    let app = sqsafe::consumer::<SnsPayer>().build(&setup).expect("app");
    let prefix = unique_name("sns");
    let route = route("sns", &prefix);
    let messages = delivered(&setup.sqs, &route).await;
    assert!(
        messages[0].body().is_some_and(|b| b.contains("\"Type\"")),
        "the subscription wraps each publish in a notification"
    );
    let dispositions = one_by_one(&app, &messages, &route.queue_arn).await;
    assert_eq!(outcomes(&dispositions), ["Applied", "Replayed"]);
    assert_eq!(effects_of("sns-payer"), [format!("corr-{prefix}")]);
}

#[tokio::test]
async fn raw_delivery_is_the_plain_sqs_envelope() {
    let (setup, _) = setup().await;
    let app = sqsafe::consumer::<RawPayer>().build(&setup).expect("app");
    let prefix = unique_name("raw");
    let route = route("sns-raw", &prefix);
    let messages = delivered(&setup.sqs, &route).await;
    let dispositions = one_by_one(&app, &messages, &route.queue_arn).await;
    assert_eq!(outcomes(&dispositions), ["Applied", "Replayed"]);
    // Raw delivery turns the publisher's attributes into SQS message attributes.
    assert_eq!(effects_of("raw-payer"), [format!("corr-{prefix}")]);
}

#[tokio::test]
async fn an_intent_put_twice_on_an_eventbridge_bus_is_applied_once_under_its_events_id() {
    let (setup, _) = setup().await;
    let app = sqsafe::consumer::<EventPayer>().build(&setup).expect("app");
    let prefix = unique_name("events");
    let route = route("eventbridge", &prefix);
    let messages = delivered(&setup.sqs, &route).await;
    let first_id = serde_json::from_str::<serde_json::Value>(messages[0].body().expect("body"))
        .expect("event JSON")["id"]
        .as_str()
        .expect("event id")
        .to_owned();
    let dispositions = one_by_one(&app, &messages, &route.queue_arn).await;
    assert_eq!(outcomes(&dispositions), ["Applied", "Replayed"]);
    assert_eq!(effects_of("event-payer"), [first_id]);
}

#[tokio::test]
async fn the_same_object_put_twice_is_ingested_once_and_s3s_test_event_is_ignored() {
    let (setup, _) = setup().await;
    let app = sqsafe::consumer::<Ingest>().build(&setup).expect("app");
    let prefix = unique_name("s3");
    let route = route("s3", &prefix);
    let messages = delivered(&setup.sqs, &route).await;
    let dispositions = one_by_one(&app, &messages, &route.queue_arn).await;
    // The test event may share its millisecond with the first put: the order of those two is not asserted.
    let mut seen = outcomes(&dispositions);
    seen.sort();
    assert_eq!(seen, ["Applied", "Ignored", "Replayed"]);
    assert_eq!(effects_of("ingest").len(), 1);
}

#[tokio::test]
async fn a_body_that_is_not_the_declared_envelope_is_dead_lettered_as_bad_envelope() {
    let (setup, dlq) = setup().await;
    let app = sqsafe::consumer::<SnsPayer>().build(&setup).expect("app");
    // A plain body where an SNS notification is expected (a subscription switched to raw delivery).
    let secret = "4111-1111-1111-1111";
    let queue = create_queue(&setup.sqs, "envelopes-plain", false).await;
    let body = format!(r#"{{"tenant":"acme","id":"plain-1","amount":1250,"card":"{secret}"}}"#);
    setup
        .sqs
        .send_message()
        .queue_url(&queue)
        .message_body(&body)
        .send()
        .await
        .expect("send");
    let messages = delivered(
        &setup.sqs,
        &Route {
            queue_url: queue,
            queue_arn: "arn:aws:sqs:us-east-1:123456789012:envelopes-plain".to_owned(),
            expected: 1,
        },
    )
    .await;
    let before = effects_of("sns-payer").len();
    let dispositions = one_by_one(
        &app,
        &messages,
        "arn:aws:sqs:us-east-1:123456789012:envelopes-plain",
    )
    .await;
    match dispositions.as_slice() {
        [Disposition::DeadLettered(e)] => {
            assert_eq!(e.kind(), "bad_envelope");
            assert!(e.to_string().contains("not an SNS envelope"), "{e}");
            assert!(!e.to_string().contains(secret), "{e}");
        }
        other => panic!("expected one dead letter: {other:?}"),
    }
    assert_eq!(effects_of("sns-payer").len(), before, "no effect");
    let dead = setup
        .sqs
        .receive_message()
        .queue_url(&dlq)
        .max_number_of_messages(10)
        .message_attribute_names("All")
        .send()
        .await
        .expect("receive");
    let letter = dead
        .messages()
        .iter()
        .find(|m| m.body() == Some(body.as_str()))
        .expect("the dead letter keeps the body as sent");
    assert_eq!(
        sqsafe_testkit::dlq_context(letter, "error_kind").as_deref(),
        Some("bad_envelope")
    );
    let error = sqsafe_testkit::dlq_context(letter, "error").unwrap_or_default();
    assert!(!error.contains(secret), "{error}");
}
