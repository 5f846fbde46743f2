//! The façade against DynamoDB's and SQS's real APIs (moto server, started by `make test`): a consumer of a few lines
//! applies once, replays duplicates, dead-letters poison with context; a transactional one commits with its record.

use std::sync::atomic::{AtomicU32, Ordering};

use aws_lambda_events::sqs::{SqsEvent, SqsMessage};
use aws_sdk_dynamodb::types::{AttributeValue, Put, TransactWriteItem};
use serde::{Deserialize, Serialize};
use sqsafe::{Consumer, Context, Effect, Env, Intent, RecordError, Setup};
use sqsafe_testkit::{create_queue, create_table, invocation, sdk_config, unique_name};

#[derive(Deserialize)]
struct Greet {
    tenant: String,
    id: String,
    name: String,
}

#[derive(Debug, PartialEq, Serialize, Deserialize)]
struct Greeting(String);

static GREETINGS: AtomicU32 = AtomicU32::new(0);

struct Greeter;

impl Consumer for Greeter {
    const NAME: &'static str = "greeter";
    const EFFECT_VERSION: u32 = 1;
    const INTENT_FIELDS: &'static [&'static str] = &["/tenant", "/id", "/name"];
    type Payload = Greet;
    type Output = Greeting;

    fn new(setup: &Setup) -> Result<Self, sqsafe::Error> {
        setup.env.required("GREETING_STYLE")?;
        Ok(Greeter)
    }

    fn intent(p: &Greet) -> Intent {
        Intent::new(&p.tenant, "greet", &p.id)
    }

    fn validate(p: &Greet) -> Result<(), RecordError> {
        if p.name.is_empty() {
            return Err(RecordError::permanent("invalid_greet", "name is empty"));
        }
        Ok(())
    }

    fn effect<'a>(
        &'a self,
        p: Greet,
        cx: &'a Context<'a>,
    ) -> Result<Effect<'a, Greeting>, RecordError> {
        Ok(Effect::call(async move {
            assert_eq!(cx.downstream_key().len(), 64);
            GREETINGS.fetch_add(1, Ordering::SeqCst);
            Ok(Greeting(format!("hello {}", p.name)))
        }))
    }
}

fn message(id: &str, body: &str, queue_arn: &str) -> SqsMessage {
    let mut m = SqsMessage::default();
    m.message_id = Some(id.to_owned());
    m.body = Some(body.to_owned());
    m.event_source_arn = Some(queue_arn.to_owned());
    m.attributes
        .insert("ApproximateReceiveCount".into(), "1".into());
    m
}

fn event(messages: Vec<SqsMessage>) -> SqsEvent {
    let mut e = SqsEvent::default();
    e.records = messages;
    e
}

async fn setup(extra: &[(&str, &str)]) -> (Setup, String) {
    let aws = sdk_config().await;
    let dynamodb = aws_sdk_dynamodb::Client::new(&aws);
    let sqs = aws_sdk_sqs::Client::new(&aws);
    let table = unique_name("idem");
    create_table(&dynamodb, &table, "pk", None).await;
    let dlq = create_queue(&sqs, "facade-dlq", false).await;
    let queue = create_queue(&sqs, "facade", false).await;
    let mut pairs = vec![
        ("IDEMPOTENCY_TABLE".to_owned(), table),
        ("DLQ_URL".to_owned(), dlq.clone()),
        ("QUEUE_URL".to_owned(), queue),
    ];
    pairs.extend(
        extra
            .iter()
            .map(|(k, v)| ((*k).to_owned(), (*v).to_owned())),
    );
    (Setup::new(Env::from_pairs(pairs), aws).expect("setup"), dlq)
}

#[tokio::test]
async fn a_consumer_of_a_few_lines_applies_once_replays_and_dead_letters_poison() {
    let (setup, dlq) = setup(&[("GREETING_STYLE", "warm")]).await;
    let app = sqsafe::consumer::<Greeter>().build(&setup).expect("app");
    let arn = "arn:aws:sqs:us-east-1:123456789012:facade";
    let body = r#"{"tenant":"acme","id":"g-1","name":"Zoë"}"#;
    let before = GREETINGS.load(Ordering::SeqCst);
    let response = app
        .handle(invocation(
            event(vec![
                message("m1", body, arn),
                message(
                    "m2",
                    r#"{"tenant":"acme","id":"g-2","name":"Ann","extra":1}"#,
                    arn,
                ),
                message(
                    "m3",
                    r#"{"tenant":"acme","id":"g-3","name":"secret-4111"}"#
                        .replace("\"name\":\"secret-4111\"", "\"name\":17")
                        .as_str(),
                    arn,
                ),
            ]),
            "req-1",
        ))
        .await
        .expect("batch");
    assert!(response.batch_item_failures.is_empty(), "{response:?}");
    assert_eq!(
        GREETINGS.load(Ordering::SeqCst) - before,
        2,
        "two applied, the poison one dead-lettered"
    );

    // A redelivery with a field the consumer ignores and the fingerprint does not read: a replay.
    let again = app
        .handle(invocation(
            event(vec![message(
                "m1b",
                r#"{"tenant":"acme","id":"g-1","name":"Zoë","sent_at":"now"}"#,
                arn,
            )]),
            "req-2",
        ))
        .await
        .expect("batch");
    assert!(again.batch_item_failures.is_empty());
    assert_eq!(
        GREETINGS.load(Ordering::SeqCst) - before,
        2,
        "replayed, not applied again"
    );
    // The report tells what the response cannot: a replay, not a second application.
    let report = app
        .handle_report(invocation(event(vec![message("m1d", body, arn)]), "req-2b"))
        .await
        .expect("batch");
    assert!(report.response.batch_item_failures.is_empty());
    assert!(
        matches!(
            report.records.as_slice(),
            [sqsafe::RecordReport {
                disposition: sqsafe::Disposition::Succeeded(sqsafe::Processed::Replayed),
                ..
            }]
        ),
        "{:?}",
        report.records
    );

    // The same intent with another name: a permanent mismatch, no effect.
    app.handle(invocation(
        event(vec![message(
            "m1c",
            r#"{"tenant":"acme","id":"g-1","name":"Other"}"#,
            arn,
        )]),
        "req-3",
    ))
    .await
    .expect("batch");
    assert_eq!(GREETINGS.load(Ordering::SeqCst) - before, 2);

    let received = setup
        .sqs
        .receive_message()
        .queue_url(&dlq)
        .max_number_of_messages(10)
        .message_attribute_names("All")
        .send()
        .await
        .expect("receive");
    let kinds: Vec<String> = received
        .messages()
        .iter()
        .filter_map(|m| sqsafe_testkit::dlq_context(m, "error_kind"))
        .collect();
    assert_eq!(kinds.len(), 2, "{kinds:?}");
    assert!(
        kinds.contains(&"bad_payload".to_owned()) && kinds.contains(&"payload_mismatch".to_owned()),
        "{kinds:?}"
    );
}

#[tokio::test]
async fn a_consumer_that_misses_its_own_setting_names_it() {
    let (setup, _) = setup(&[]).await;
    let err = sqsafe::consumer::<Greeter>()
        .build(&setup)
        .err()
        .expect("GREETING_STYLE is missing");
    assert_eq!(
        err.to_string(),
        "environment variable GREETING_STYLE: is required"
    );
}

/// The keyed mode relies on the downstream applying its key once: a consumer that does not say so cannot run in it.
#[tokio::test]
async fn the_keyed_mode_is_refused_at_start_for_a_consumer_that_does_not_declare_a_downstream_key()
{
    let (setup, _) = setup(&[
        ("GREETING_STYLE", "warm"),
        ("SQSAFE_IDEMPOTENCY_MODE", "keyed"),
    ])
    .await;
    let err = sqsafe::consumer::<Greeter>()
        .build(&setup)
        .err()
        .expect("Greeter does not declare DOWNSTREAM_KEYED");
    let said = err.to_string();
    assert!(
        said.starts_with("environment variable SQSAFE_IDEMPOTENCY_MODE = \"keyed\": greeter does not declare Consumer::DOWNSTREAM_KEYED"),
        "{said}"
    );
}

struct Ledger {
    table: String,
}

#[derive(Deserialize)]
struct Entry {
    account: String,
    entry_id: String,
    amount: i64,
}

impl Consumer for Ledger {
    const NAME: &'static str = "ledger";
    const EFFECT_VERSION: u32 = 1;
    const INTENT_FIELDS: &'static [&'static str] = &["/account", "/entry_id", "/amount"];
    type Payload = Entry;
    type Output = i64;

    fn new(setup: &Setup) -> Result<Self, sqsafe::Error> {
        Ok(Ledger {
            table: setup.env.required("LEDGER_TABLE")?,
        })
    }

    fn intent(e: &Entry) -> Intent {
        Intent::untenanted("entry", &e.entry_id)
    }

    fn effect<'a>(&'a self, e: Entry, cx: &'a Context<'a>) -> Result<Effect<'a, i64>, RecordError> {
        let put = Put::builder()
            .table_name(&self.table)
            .item("pk", AttributeValue::S(e.account.clone()))
            .item("amount", AttributeValue::N(e.amount.to_string()))
            .item("key", AttributeValue::S(cx.idempotency_key().to_string()))
            .condition_expression("attribute_not_exists(pk)")
            .build()
            .map_err(|err| RecordError::permanent("internal", err))?;
        let account = e.account;
        Ok(Effect::writes(
            vec![TransactWriteItem::builder().put(put).build()],
            e.amount,
        )
        .refused(move |_index, _item| {
            RecordError::permanent("account_exists", format!("account {account} exists"))
        }))
    }
}

#[tokio::test]
async fn a_transactional_consumer_commits_with_its_record_and_reports_refusals() {
    let ledger = unique_name("ledger");
    let (setup, _) = setup(&[("LEDGER_TABLE", ledger.as_str())]).await;
    create_table(&setup.dynamodb, &ledger, "pk", None).await;
    let app = sqsafe::consumer::<Ledger>().build(&setup).expect("app");
    let arn = "arn:aws:sqs:us-east-1:123456789012:ledger";
    let first = r#"{"account":"a-1","entry_id":"e-1","amount":5}"#;
    for request in ["r1", "r2"] {
        let response = app
            .handle(invocation(event(vec![message("m1", first, arn)]), request))
            .await
            .expect("batch");
        assert!(response.batch_item_failures.is_empty(), "{response:?}");
    }
    let item = setup
        .dynamodb
        .get_item()
        .table_name(&ledger)
        .key("pk", AttributeValue::S("a-1".into()))
        .send()
        .await
        .expect("get");
    assert_eq!(
        item.item()
            .and_then(|i| i.get("amount"))
            .and_then(|v| v.as_n().ok())
            .map(String::as_str),
        Some("5")
    );
    // Another entry for the same account: the write's own condition refuses it, nothing is written.
    let report = app
        .handle(invocation(
            event(vec![message(
                "m2",
                r#"{"account":"a-1","entry_id":"e-2","amount":7}"#,
                arn,
            )]),
            "r3",
        ))
        .await
        .expect("batch");
    assert!(
        report.batch_item_failures.is_empty(),
        "dead-lettered, not retried"
    );
}

#[tokio::test]
async fn dead_letters_carry_the_source_queue_and_the_window_the_records_are_written_with() {
    use std::time::{Duration, UNIX_EPOCH};

    let (setup, dlq) = setup(&[
        ("GREETING_STYLE", "warm"),
        ("IDEMPOTENCY_WINDOW_DAYS", "20"),
    ])
    .await;
    // A hook that changes the window: the dead letter must say the window records are really written with.
    let app = sqsafe::consumer::<Greeter>()
        .idempotency(|i| i.idempotency_window(Duration::from_secs(25 * 86_400)))
        .build(&setup)
        .expect("app");
    let arn = "arn:aws:sqs:us-east-1:123456789012:greeter";
    let mut poison = message("m-window", r#"{"tenant":"acme","id":"g-9","name":""}"#, arn);
    poison
        .attributes
        .insert("SentTimestamp".into(), "1750000000123".into());
    let response = app
        .handle(invocation(event(vec![poison]), "req-w"))
        .await
        .expect("batch");
    assert!(response.batch_item_failures.is_empty(), "{response:?}");

    let received = setup
        .sqs
        .receive_message()
        .queue_url(&dlq)
        .message_attribute_names("All")
        .send()
        .await
        .expect("receive");
    let copy = received.messages().first().expect("the dead letter");
    let value = sqsafe_testkit::message_attribute(copy, sqsafe_batch::attributes::CONTEXT)
        .expect("sqsafe.context");
    let redrive = sqsafe_batch::DeadLetterContext::parse(&value)
        .expect("sqsafe's JSON")
        .redrive;
    let sent = UNIX_EPOCH + Duration::from_millis(1_750_000_000_123);
    assert_eq!(redrive.source_queue.as_deref(), Some(arn));
    assert_eq!(redrive.first_sent, Some(sent));
    assert_eq!(
        redrive.expires,
        Some(sent + Duration::from_secs(25 * 86_400)),
        "{value}"
    );
}

/// SQS takes messages of up to 1 MiB. A 900 KB poison message reaches a 1 MiB DLQ (`DLQ_MAX_MESSAGE_SIZE`, set by the
/// template from the queue's MaximumMessageSize) with its whole body and its whole context: fitted to the DLQ's real
/// maximum, not to the old 256 KiB.
#[tokio::test]
async fn a_900_kb_poison_message_reaches_a_1_mib_dlq_with_its_whole_context() {
    let (setup, dlq) = setup(&[
        ("GREETING_STYLE", "warm"),
        ("DLQ_MAX_MESSAGE_SIZE", "1048576"),
    ])
    .await;
    let app = sqsafe::consumer::<Greeter>().build(&setup).expect("app");
    let arn = "arn:aws:sqs:us-east-1:123456789012:greeter";
    // Not a greeting (`name` is a number), and 900 KB of it.
    let body = format!(
        r#"{{"tenant":"acme","id":"g-big","name":17,"padding":"{}"}}"#,
        "x".repeat(900_000)
    );
    let response = app
        .handle(invocation(
            event(vec![message("m-big", &body, arn)]),
            "req-big",
        ))
        .await
        .expect("batch");
    assert!(response.batch_item_failures.is_empty(), "{response:?}");
    let received = setup
        .sqs
        .receive_message()
        .queue_url(&dlq)
        .message_attribute_names("All")
        .send()
        .await
        .expect("receive");
    let [letter] = received.messages() else {
        panic!("one dead letter: {} messages", received.messages().len());
    };
    assert_eq!(
        letter.body().map(str::len),
        Some(body.len()),
        "the whole body"
    );
    for (field, want) in [
        ("error_kind", Some("bad_payload")),
        ("original_message_id", Some("m-big")),
        ("consumer", Some("greeter")),
    ] {
        assert_eq!(
            sqsafe_testkit::dlq_context(letter, field).as_deref(),
            want,
            "{field}"
        );
    }
    assert!(
        sqsafe_testkit::dlq_context(letter, "source_queue").is_some(),
        "the redrive fields too (they go first when the copy must shrink)"
    );
}
