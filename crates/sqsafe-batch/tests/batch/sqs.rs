//! The SQS adapters against SQS's real API (moto server, started by `make test`): the dead-letter copy and its
//! attributes (fitted into the DLQ's message size, never quoting the body), FIFO dead-letter queues, and
//! ChangeMessageVisibility (backoff, and in-progress duplicates that wait for the lease).

use std::time::Duration;

use aws_lambda_events::sqs::SqsMessage;
use aws_sdk_sqs::Client;
use aws_sdk_sqs::types::{MessageSystemAttributeName, QueueAttributeName};
use sqsafe_batch::{
    BatchProcessor, DeadLetterContext, Processed, Record, RecordError, RecordHandler,
    SqsDeadLetterQueue, SqsVisibility, VisibilityControl, attributes,
};
use sqsafe_idempotency::{Claim, Idempotency, InMemoryStore, KeyBuilder};

use crate::common::{self, event, in_group, message, with_attribute, with_receive_count};

async fn client() -> Client {
    sqsafe_testkit::sqs().await
}

async fn queue(client: &Client, prefix: &str, fifo: bool) -> String {
    sqsafe_testkit::create_queue(client, prefix, fifo).await
}

async fn poison(record: Record) -> Result<Processed, RecordError> {
    Err(RecordError::permanent(
        "precondition",
        format!("insufficient balance for {}", record.message_id()),
    ))
}

/// The sqsafe context a DLQ copy carries.
fn context_of(copy: &aws_sdk_sqs::types::Message) -> DeadLetterContext {
    let value =
        sqsafe_testkit::message_attribute(copy, attributes::CONTEXT).expect("sqsafe.context");
    DeadLetterContext::parse(&value).expect("sqsafe's JSON")
}

#[tokio::test]
async fn a_poison_record_reaches_the_dlq_with_its_context_and_the_originals_that_fit() {
    let (logs, _guard) = common::Logs::capture();
    let sqs = client().await;
    let dlq_url = queue(&sqs, "dlq", false).await;
    let processor = BatchProcessor::builder("apply-ledger", 2)
        .dead_letter_queue(SqsDeadLetterQueue::new(sqs.clone(), &dlq_url))
        .build()
        .expect("config");
    let mut m = with_receive_count(message("msg-1", r#"{"account":"a-1","amount":500}"#), 4);
    m = with_attribute(m, "correlationId", "corr-7");
    // SQS's 10 on the original: one more of its own than the copy has room for beside the context.
    for extra in ["aa", "bb", "cc", "dd", "ee", "ff", "gg", "hh", "ii"] {
        m = with_attribute(m, extra, "v");
    }
    let report = processor
        .process(event(vec![m]), None, &poison)
        .await
        .expect("batch");
    assert!(
        report.response.batch_item_failures.is_empty(),
        "dead-lettered, so acknowledged"
    );

    let received = receive_all(&sqs, &dlq_url).await;
    assert_eq!(received.len(), 1);
    let copy = &received[0];
    assert_eq!(copy.body(), Some(r#"{"account":"a-1","amount":500}"#));
    let context = context_of(copy);
    assert_eq!(context.error_kind, "precondition");
    assert_eq!(context.error_class.as_deref(), Some("permanent"));
    assert_eq!(
        context.error.as_deref(),
        Some("insufficient balance for msg-1")
    );
    assert_eq!(context.attempts, Some(4));
    assert_eq!(context.consumer.as_deref(), Some("apply-ledger"));
    assert_eq!(context.consumer_version, Some(2));
    assert_eq!(context.original_message_id, "msg-1");
    assert_eq!(
        sqsafe_testkit::message_attribute(copy, "correlationId").as_deref(),
        Some("corr-7")
    );
    let attrs = copy.message_attributes().expect("attributes");
    assert_eq!(attrs.len(), 10, "SQS's limit");
    assert!(attrs.contains_key("aa") && attrs.contains_key("hh") && !attrs.contains_key("ii"));
    let warning = logs
        .lines()
        .into_iter()
        .find(|l| l["left_out"].is_string())
        .expect("a warning names what was left out");
    assert_eq!(warning["level"], "WARN");
    assert!(
        warning["left_out"]
            .as_str()
            .is_some_and(|s| s.contains("\"ii\"")),
        "{warning}"
    );
}

/// `(data type, string value)` of each attribute, by name.
fn typed(
    attrs: &std::collections::HashMap<String, aws_sdk_sqs::types::MessageAttributeValue>,
) -> std::collections::BTreeMap<String, (String, String)> {
    attrs
        .iter()
        .map(|(name, a)| {
            let value = a.string_value().unwrap_or_default().to_owned();
            (name.clone(), (a.data_type().to_owned(), value))
        })
        .collect()
}

#[tokio::test]
async fn a_poison_record_with_many_attributes_keeps_every_one_and_the_whole_context() {
    let sqs = client().await;
    let dlq_url = queue(&sqs, "dlq", false).await;
    let processor = BatchProcessor::builder("apply-ledger", 2)
        .dead_letter_queue(
            SqsDeadLetterQueue::new(sqs.clone(), &dlq_url)
                .idempotency_window(Duration::from_secs(30 * 86_400)),
        )
        .build()
        .expect("config");
    let mut m = with_receive_count(message("msg-many", r#"{"account":"a-1"}"#), 4);
    // 2025-06-15T15:06:40.123Z
    m.attributes
        .insert("SentTimestamp".into(), "1750000000123".into());
    m = with_attribute(m, "correlationId", "corr-7");
    let own = [
        ("tenant", "String", "acme"),
        (
            "traceparent",
            "String",
            "00-4bf92f3577b34da6-00f067aa0ba902b7-01",
        ),
        ("schema", "String.v2", "ledger-entry"),
        ("priority", "Number", "5"),
        ("region", "String", "eu-west-1"),
        ("source", "String", "checkout"),
    ];
    for (name, data_type, value) in own {
        m = with_attribute(m, name, value);
        if let Some(a) = m.message_attributes.get_mut(name) {
            a.data_type = Some(data_type.to_owned());
        }
    }
    let copy = &dead_letter_one(&processor, &poison, m, &sqs, &dlq_url).await;
    assert_eq!(copy.body(), Some(r#"{"account":"a-1"}"#));
    let mut attrs = typed(copy.message_attributes().expect("attributes"));
    let context = attrs.remove("sqsafe.context");
    let mut expected: std::collections::BTreeMap<String, (String, String)> = own
        .iter()
        .map(|(n, t, v)| ((*n).to_owned(), ((*t).to_owned(), (*v).to_owned())))
        .collect();
    expected.insert("correlationId".into(), ("String".into(), "corr-7".into()));
    assert_eq!(attrs, expected, "every original attribute, none lost");
    let context = context.expect("sqsafe.context");
    assert_eq!(context.0, "String");
    let context: serde_json::Value = serde_json::from_str(&context.1).expect("JSON");
    assert_eq!(
        context,
        serde_json::json!({
            "error_kind": "precondition",
            "original_message_id": "msg-many",
            "error_class": "permanent",
            "error": "insufficient balance for msg-many",
            "attempts": 4,
            "consumer": "apply-ledger",
            "consumer_version": 2,
            "source_queue": common::STANDARD_ARN,
            "first_sent": "2025-06-15T15:06:40.123Z",
            "expires": "2025-07-15T15:06:40.123Z",
        })
    );
}

/// Bytes no UTF-8 text could carry: a NUL, an invalid lead byte, a lone continuation byte.
const THUMBNAIL: &[u8] = &[0x89, b'P', b'N', b'G', 0x00, 0xff, 0x80, 0x0d, 0x0a];

#[tokio::test]
async fn a_poison_record_with_a_binary_attribute_keeps_it_byte_for_byte() {
    let sqs = client().await;
    let dlq_url = queue(&sqs, "dlq", false).await;
    let processor = BatchProcessor::builder("apply-ledger", 2)
        .dead_letter_queue(SqsDeadLetterQueue::new(sqs.clone(), &dlq_url))
        .build()
        .expect("config");
    let mut m = with_attribute(message("msg-bin", r#"{"account":"a-1"}"#), "tenant", "acme");
    m = sqsafe_testkit::with_binary_attribute(m, "thumbnail", "Binary", THUMBNAIL);
    m = sqsafe_testkit::with_binary_attribute(m, "signature", "Binary.sha256", &[0x00; 32]);
    let copy = &dead_letter_one(&processor, &poison, m, &sqs, &dlq_url).await;
    assert_eq!(context_of(copy).original_message_id, "msg-bin");
    let attrs = copy.message_attributes().expect("attributes");
    let binary = |name: &str| sqsafe_testkit::binary_attribute(copy, name);
    assert_eq!(
        binary("thumbnail"),
        Some(("Binary".to_owned(), Some(THUMBNAIL.to_vec()), false)),
        "the binary value, byte for byte"
    );
    assert_eq!(
        binary("signature"),
        Some(("Binary.sha256".to_owned(), Some(vec![0x00; 32]), false))
    );
    assert_eq!(
        sqsafe_testkit::message_attribute(copy, "tenant").as_deref(),
        Some("acme")
    );
    assert_eq!(
        attrs.len(),
        5,
        "the context, the correlation id and all three"
    );
}

#[tokio::test]
async fn a_fifo_dlq_keeps_the_group_and_deduplicates_by_message_id() {
    let sqs = client().await;
    let dlq_url = queue(&sqs, "dlq", true).await;
    let processor = BatchProcessor::builder("apply-ledger", 1)
        .dead_letter_queue(SqsDeadLetterQueue::new(sqs.clone(), &dlq_url))
        .build()
        .expect("config");
    let m = in_group(message("msg-2", "{}"), "account-9");
    // The same failure dead-lettered twice (a retried invocation): one copy.
    processor
        .process(event(vec![m.clone()]), None, &poison)
        .await
        .expect("batch");
    processor
        .process(event(vec![m]), None, &poison)
        .await
        .expect("batch");
    let received = sqs
        .receive_message()
        .queue_url(&dlq_url)
        .message_system_attribute_names(MessageSystemAttributeName::MessageGroupId)
        .max_number_of_messages(10)
        .send()
        .await
        .expect("receive")
        .messages
        .unwrap_or_default();
    assert_eq!(received.len(), 1);
    let group = received[0]
        .attributes()
        .and_then(|a| a.get(&MessageSystemAttributeName::MessageGroupId))
        .cloned();
    assert_eq!(group.as_deref(), Some("account-9"));
}

#[tokio::test]
async fn an_unreachable_dlq_leaves_the_record_reported() {
    let sqs = client().await;
    let processor = BatchProcessor::builder("c", 1)
        .dead_letter_queue(SqsDeadLetterQueue::new(
            sqs,
            format!("{}/123456789012/no-such-queue", sqsafe_testkit::endpoint()),
        ))
        .build()
        .expect("config");
    let report = processor
        .process(event(vec![message("m1", "{}")]), None, &poison)
        .await
        .expect("batch");
    assert_eq!(
        report.response.batch_item_failures.len(),
        1,
        "nothing lost: the message comes back"
    );
}

#[tokio::test]
async fn visibility_changes_reach_the_queue() {
    let sqs = client().await;
    let url = queue(&sqs, "src", false).await;
    sqs.send_message()
        .queue_url(&url)
        .message_body("x")
        .send()
        .await
        .expect("send");
    let receive = || async {
        sqs.receive_message()
            .queue_url(&url)
            .visibility_timeout(300)
            .send()
            .await
            .expect("receive")
            .messages
            .unwrap_or_default()
    };
    let first = receive().await;
    assert_eq!(first.len(), 1);
    assert!(receive().await.is_empty(), "invisible for 300 s");
    let control = SqsVisibility::new(sqs.clone(), &url);
    control
        .set_visibility(first[0].receipt_handle().expect("receipt"), Duration::ZERO)
        .await
        .expect("change");
    assert_eq!(receive().await.len(), 1, "visible again at once");
}

#[tokio::test]
async fn the_queues_max_receive_count_is_read_from_its_redrive_policy() {
    let sqs = client().await;
    let dlq = queue(&sqs, "dlq", true).await;
    let dlq_arn = sqs
        .get_queue_attributes()
        .queue_url(&dlq)
        .attribute_names(QueueAttributeName::QueueArn)
        .send()
        .await
        .expect("attributes")
        .attributes
        .and_then(|a| a.get(&QueueAttributeName::QueueArn).cloned())
        .expect("arn");
    let source = sqs
        .create_queue()
        .queue_name(sqsafe_testkit::unique_name("src").replace('.', "-") + ".fifo")
        .attributes(QueueAttributeName::FifoQueue, "true")
        .attributes(
            QueueAttributeName::RedrivePolicy,
            format!(r#"{{"deadLetterTargetArn":"{dlq_arn}","maxReceiveCount":"7"}}"#),
        )
        .send()
        .await
        .expect("queue")
        .queue_url
        .expect("url");
    let with_policy = SqsVisibility::new(sqs.clone(), &source);
    assert_eq!(
        with_policy.max_receive_count().await.expect("read"),
        Some(7)
    );
    let without = SqsVisibility::new(sqs.clone(), &dlq);
    assert_eq!(without.max_receive_count().await.expect("read"), None);
}

/// The event record Lambda would build from a received message.
fn as_event_record(m: &aws_sdk_sqs::types::Message, receive_count: u32) -> SqsMessage {
    let mut record = message(
        m.message_id().expect("message id"),
        m.body().unwrap_or_default(),
    );
    record.receipt_handle = m.receipt_handle().map(str::to_owned);
    with_receive_count(record, receive_count)
}

#[tokio::test]
async fn an_in_progress_duplicate_stays_invisible_until_the_lease_ends() {
    let sqs = client().await;
    let url = queue(&sqs, "src", false).await;
    sqs.send_message()
        .queue_url(&url)
        .message_body("{}")
        .send()
        .await
        .expect("send");
    let receive = |visibility: i32| {
        let (sqs, url) = (sqs.clone(), url.clone());
        async move {
            sqs.receive_message()
                .queue_url(&url)
                .visibility_timeout(visibility)
                .send()
                .await
                .expect("receive")
                .messages
                .unwrap_or_default()
        }
    };
    let first = receive(1).await;
    assert_eq!(first.len(), 1);

    // Another attempt holds the key with the default 60 s lease.
    let idem = Idempotency::builder(InMemoryStore::new(), "c", 1)
        .build()
        .expect("idempotency");
    let key = KeyBuilder::new("c", 1)
        .intent("payment", "p-1")
        .build()
        .expect("key");
    let held = idem
        .claim::<()>(&idem.request(key.clone(), "{}").expect("request"))
        .await
        .expect("claim");
    assert!(matches!(held, Claim::Acquired(_)));

    let processor = BatchProcessor::builder("c", 1)
        .visibility(SqsVisibility::new(sqs.clone(), &url))
        .build()
        .expect("config");
    let handler = |record: Record| {
        let (idem, key) = (&idem, key.clone());
        async move {
            let (processed, _) = record
                .run_idempotent(idem, key, "{}", || async { Ok::<_, RecordError>(()) })
                .await?;
            Ok(processed)
        }
    };
    let report = processor
        .process(event(vec![as_event_record(&first[0], 1)]), None, &handler)
        .await
        .expect("batch");
    assert_eq!(report.response.batch_item_failures.len(), 1);

    // The receive made it invisible for 1 s; the lease keeps it invisible past that.
    tokio::time::sleep(Duration::from_millis(1_500)).await;
    assert!(
        receive(30).await.is_empty(),
        "invisible until the other attempt's lease ends"
    );
    SqsVisibility::new(sqs.clone(), &url)
        .set_visibility(first[0].receipt_handle().expect("receipt"), Duration::ZERO)
        .await
        .expect("change");
    assert_eq!(receive(30).await.len(), 1, "still in the queue");
}

/// Body and attributes as SQS counts them against `MaximumMessageSize`.
fn counted_size(m: &aws_sdk_sqs::types::Message) -> usize {
    m.body().unwrap_or_default().len()
        + m.message_attributes().map_or(0, |attrs| {
            attrs
                .iter()
                .map(|(name, a)| {
                    let value = a.string_value().map_or(0, str::len)
                        + a.binary_value().map_or(0, |b| b.as_ref().len());
                    name.len() + a.data_type().len() + value
                })
                .sum()
        })
}

async fn dlq_with_max_size(sqs: &Client, max: usize) -> String {
    sqs.create_queue()
        .queue_name(sqsafe_testkit::unique_name("dlq-size"))
        .attributes(QueueAttributeName::MaximumMessageSize, max.to_string())
        .send()
        .await
        .expect("create queue in moto")
        .queue_url
        .expect("queue url")
}

/// Processes `m` alone with `handler`, checks that the batch acknowledged it (dead-lettered, not reported back), and
/// returns its one copy in the DLQ.
async fn dead_letter_one<H: RecordHandler>(
    processor: &BatchProcessor,
    handler: &H,
    m: SqsMessage,
    sqs: &Client,
    dlq_url: &str,
) -> aws_sdk_sqs::types::Message {
    let report = processor
        .process(event(vec![m]), None, handler)
        .await
        .expect("batch");
    assert!(
        report.response.batch_item_failures.is_empty(),
        "dead-lettered, so acknowledged"
    );
    let mut received = receive_all(sqs, dlq_url).await;
    assert_eq!(received.len(), 1);
    received.remove(0)
}

async fn receive_all(sqs: &Client, url: &str) -> Vec<aws_sdk_sqs::types::Message> {
    sqs.receive_message()
        .queue_url(url)
        .message_attribute_names("All")
        .max_number_of_messages(10)
        .send()
        .await
        .expect("receive")
        .messages
        .unwrap_or_default()
}

async fn long_error(record: Record) -> Result<Processed, RecordError> {
    Err(RecordError::permanent(
        "precondition",
        format!("{}: {}", record.message_id(), "refused; ".repeat(170)), // ~1.5 KB of context
    ))
}

#[tokio::test]
async fn a_body_near_the_size_limit_keeps_the_context_that_fits() {
    let sqs = client().await;
    let limit = sqsafe_batch::DEFAULT_MAX_MESSAGE_SIZE;
    let dlq_url = dlq_with_max_size(&sqs, limit).await;
    let processor = BatchProcessor::builder("apply-ledger", 2)
        .dead_letter_queue(SqsDeadLetterQueue::new(sqs.clone(), &dlq_url))
        .build()
        .expect("config");
    let body = "x".repeat(limit - 600);
    let mut m = with_attribute(message("msg-big", &body), "correlationId", "corr-1");
    m = with_attribute(m, "tenant", "acme");
    let report = processor
        .process(event(vec![m]), None, &long_error)
        .await
        .expect("batch");
    assert!(
        report.response.batch_item_failures.is_empty(),
        "dead-lettered at once, not retried until the redrive policy moves it without context"
    );
    let received = receive_all(&sqs, &dlq_url).await;
    assert_eq!(received.len(), 1);
    let copy = &received[0];
    assert_eq!(copy.body().map(str::len), Some(body.len()));
    assert!(counted_size(copy) <= limit, "{} bytes", counted_size(copy));
    let attrs = copy.message_attributes().expect("attributes");
    let context = context_of(copy);
    assert_eq!(context.error_kind, "precondition");
    assert_eq!(context.original_message_id, "msg-big");
    assert!(context.redrive.is_empty(), "the redrive fields go first");
    assert!(!attrs.contains_key("tenant"), "then the copied originals");
    assert!(attrs.contains_key("correlationId"));
    let error = context.error.unwrap_or_default();
    assert!(
        error.starts_with("msg-big: refused;") && error.ends_with('…'),
        "shortened, not dropped: {error}"
    );
}

#[tokio::test]
async fn a_body_at_the_size_limit_is_dead_lettered_alone_and_nothing_is_lost() {
    let sqs = client().await;
    let limit = sqsafe_batch::DEFAULT_MAX_MESSAGE_SIZE;
    let dlq_url = dlq_with_max_size(&sqs, limit).await;
    let processor = BatchProcessor::builder("apply-ledger", 2)
        .dead_letter_queue(SqsDeadLetterQueue::new(sqs.clone(), &dlq_url))
        .build()
        .expect("config");
    let body = "y".repeat(limit);
    let m = with_attribute(message("msg-full", &body), "correlationId", "corr-2");
    let copy = &dead_letter_one(&processor, &long_error, m, &sqs, &dlq_url).await;
    assert_eq!(copy.body(), Some(body.as_str()), "the body is kept whole");
    assert!(
        copy.message_attributes().is_none_or(|a| a.is_empty()),
        "no room for any attribute"
    );
    assert_eq!(counted_size(copy), limit);
}

#[tokio::test]
async fn a_mistyped_value_does_not_reach_the_dlq_attributes() {
    #[derive(serde::Deserialize)]
    #[allow(dead_code)]
    struct Payment {
        amount: u64,
    }
    let secret = "4111-1111-1111-1111";
    let sqs = client().await;
    let dlq_url = queue(&sqs, "dlq", false).await;
    let processor = BatchProcessor::builder("c", 1)
        .dead_letter_queue(SqsDeadLetterQueue::new(sqs.clone(), &dlq_url))
        .build()
        .expect("config");
    let handler = |record: Record| async move {
        let _: Payment = record.parse()?;
        Ok(Processed::Applied)
    };
    let body = format!(r#"{{"amount":"{secret}"}}"#);
    processor
        .process(event(vec![message("m1", &body)]), None, &handler)
        .await
        .expect("batch");
    let received = receive_all(&sqs, &dlq_url).await;
    assert_eq!(received.len(), 1);
    let attrs = received[0].message_attributes().expect("attributes");
    for (name, value) in attrs {
        let value = value.string_value().unwrap_or_default();
        assert!(!value.contains(secret), "{name} carries the value: {value}");
    }
    let error = context_of(&received[0]).error.unwrap_or_default();
    assert!(
        error.contains("`amount`") && error.contains("expected u64"),
        "{error}"
    );
}
