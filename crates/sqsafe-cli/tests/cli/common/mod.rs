//! A DLQ in moto seeded the way sqsafe fills one: records dead-lettered by sqsafe-batch's processor through
//! `SqsDeadLetterQueue` (so the context is the real one), a second copy of one of them (a crash between the DLQ send
//! and the delete), and a message SQS's redrive policy moved without context.
#![allow(dead_code, unreachable_pub, missing_docs)]

use std::collections::HashMap;
use std::time::Duration;

use aws_lambda_events::sqs::{SqsEvent, SqsMessage, SqsMessageAttribute};
use aws_sdk_sqs::Client;
use aws_sdk_sqs::types::{Message, MessageSystemAttributeName, QueueAttributeName};
use aws_smithy_runtime_api::box_error::BoxError;
use aws_smithy_runtime_api::client::interceptors::Intercept;
use aws_smithy_runtime_api::client::interceptors::context::BeforeTransmitInterceptorContextRef;
use aws_smithy_runtime_api::client::orchestrator::Metadata;
use aws_smithy_runtime_api::client::runtime_components::RuntimeComponents;
use aws_smithy_types::config_bag::ConfigBag;
use jiff::{SignedDuration, Timestamp};
use sqsafe_batch::{BatchProcessor, Processed, Record, RecordError, SqsDeadLetterQueue};

pub const CONSUMER: &str = "charge-payment";
pub const MAX_ATTEMPTS: u32 = 3;
pub const WINDOW_DAYS: i64 = 30;

pub async fn sqs() -> Client {
    sqsafe_testkit::sqs().await
}

/// An SQS client whose calls of `operation` fail before they are sent.
pub async fn sqs_failing(operation: &'static str) -> Client {
    let config = aws_sdk_sqs::config::Builder::from(&sqsafe_testkit::sdk_config().await)
        .interceptor(FailOperation(operation))
        .build();
    Client::from_conf(config)
}

/// An SQS client whose answers `lost` can lose (the request applied, the client sees a 500 and retries).
pub async fn sqs_losing(lost: &sqsafe_testkit::LostAnswer) -> Client {
    let config = aws_sdk_sqs::config::Builder::from(&sqsafe_testkit::sdk_config().await)
        .interceptor(lost.clone())
        .build();
    Client::from_conf(config)
}

/// Fails every call of one operation before it reaches the server.
#[derive(Debug, Clone)]
pub struct FailOperation(pub &'static str);

impl Intercept for FailOperation {
    fn name(&self) -> &'static str {
        "FailOperation"
    }

    fn read_before_transmit(
        &self,
        _context: &BeforeTransmitInterceptorContextRef<'_>,
        _runtime_components: &RuntimeComponents,
        cfg: &mut ConfigBag,
    ) -> Result<(), BoxError> {
        if cfg.load::<Metadata>().is_some_and(|m| m.name() == self.0) {
            return Err(format!("{} refused by the test before sending", self.0).into());
        }
        Ok(())
    }
}

/// A queue's URL and ARN.
#[derive(Debug, Clone)]
pub struct Queue {
    pub url: String,
    pub arn: String,
}

pub async fn queue(sqs: &Client, prefix: &str, fifo: bool) -> Queue {
    let url = sqsafe_testkit::create_queue(sqs, prefix, fifo).await;
    let arn = arn(sqs, &url).await;
    Queue { url, arn }
}

/// A source queue and its DLQ, the source's redrive policy naming the DLQ as a deployment sets it (a redrive follows
/// a dead letter's recorded source only to a queue that does). The receive count is high: tests receive freely.
pub async fn source_and_dlq(sqs: &Client, prefix: &str, fifo: bool) -> (Queue, Queue) {
    let source = queue(sqs, prefix, fifo).await;
    let dlq = queue(sqs, &format!("{prefix}-dlq"), fifo).await;
    sqs.set_queue_attributes()
        .queue_url(&source.url)
        .attributes(
            QueueAttributeName::RedrivePolicy,
            format!(
                r#"{{"deadLetterTargetArn":"{}","maxReceiveCount":"1000"}}"#,
                dlq.arn
            ),
        )
        .send()
        .await
        .expect("redrive policy");
    (source, dlq)
}

pub async fn arn(sqs: &Client, url: &str) -> String {
    sqs.get_queue_attributes()
        .queue_url(url)
        .attribute_names(QueueAttributeName::QueueArn)
        .send()
        .await
        .expect("queue attributes")
        .attributes()
        .and_then(|a| a.get(&QueueAttributeName::QueueArn))
        .cloned()
        .expect("queue ARN")
}

/// What a seeded record fails with, read from its body's `fail` field.
async fn failing(record: Record) -> Result<Processed, RecordError> {
    let body: serde_json::Value =
        serde_json::from_str(record.message().body.as_deref().unwrap_or("{}")).unwrap_or_default();
    Err(match body["fail"].as_str().unwrap_or_default() {
        "bad_payload" => RecordError::permanent(
            RecordError::BAD_PAYLOAD,
            "body does not match PaymentRequested at `amount`: invalid type: string, expected u64",
        ),
        kind => RecordError::transient(kind.to_owned(), "payments API answered 503"),
    })
}

/// A record as Lambda hands it over: from `source`, sent at `sent`, on its last attempt, with a correlation id and
/// one more attribute of its own.
pub fn record(
    id: &str,
    body: &str,
    source: &Queue,
    sent: Timestamp,
    group: Option<&str>,
) -> SqsMessage {
    let mut m = SqsMessage::default();
    m.message_id = Some(id.to_owned());
    m.receipt_handle = Some(format!("rh-{id}"));
    m.body = Some(body.to_owned());
    m.event_source_arn = Some(source.arn.clone());
    m.attributes
        .insert("ApproximateReceiveCount".into(), MAX_ATTEMPTS.to_string());
    m.attributes
        .insert("SentTimestamp".into(), sent.as_millisecond().to_string());
    if let Some(group) = group {
        m.attributes
            .insert("MessageGroupId".into(), group.to_owned());
    }
    for (name, value) in [
        ("correlationId", format!("corr-{id}")),
        ("tenant", "acme".to_owned()),
    ] {
        let mut a = SqsMessageAttribute::default();
        a.data_type = Some("String".into());
        a.string_value = Some(value);
        m.message_attributes.insert(name.into(), a);
    }
    m
}

/// Dead-letters `records` through sqsafe's batch processor, as the consumer would.
pub async fn dead_letter(sqs: &Client, dlq: &Queue, records: Vec<SqsMessage>) {
    let processor = BatchProcessor::builder(CONSUMER, 1)
        .max_attempts(MAX_ATTEMPTS)
        .dead_letter_queue(
            SqsDeadLetterQueue::new(sqs.clone(), &dlq.url)
                .idempotency_window(Duration::from_secs(86_400 * WINDOW_DAYS as u64))
                // moto's queues take 1 MiB, as SQS's do now (template.yaml sets MaximumMessageSize to it).
                .max_message_size(1_048_576)
                .expect("size"),
        )
        .metrics_output(|_| {})
        .build()
        .expect("processor");
    let mut event = SqsEvent::default();
    event.records = records;
    let report = processor
        .process(event, None, &failing)
        .await
        .expect("batch");
    assert!(
        report.response.batch_item_failures.is_empty(),
        "every record dead-lettered: {:?}",
        report.response
    );
}

/// Sends a message to a queue whose redrive policy moves it to `dlq` after one receive, and has SQS move it: a
/// dead letter without sqsafe's context. Returns the crashing queue and the message id.
pub async fn moved_by_sqs(sqs: &Client, dlq: &Queue, body: &str) -> (Queue, String) {
    let crashing = queue(sqs, "crashing", false).await;
    sqs.set_queue_attributes()
        .queue_url(&crashing.url)
        .attributes(
            QueueAttributeName::RedrivePolicy,
            format!(
                r#"{{"deadLetterTargetArn":"{}","maxReceiveCount":"1"}}"#,
                dlq.arn
            ),
        )
        .send()
        .await
        .expect("redrive policy");
    let id = sqs
        .send_message()
        .queue_url(&crashing.url)
        .message_body(body)
        .message_attributes(
            "correlationId",
            aws_sdk_sqs::types::MessageAttributeValue::builder()
                .data_type("String")
                .string_value("corr-crash")
                .build()
                .expect("attribute"),
        )
        .send()
        .await
        .expect("send")
        .message_id
        .expect("id");
    // The function "crashes": received once, never deleted; the next receive finds it over maxReceiveCount.
    for _ in 0..2 {
        sqs.receive_message()
            .queue_url(&crashing.url)
            .visibility_timeout(0)
            .send()
            .await
            .expect("receive");
    }
    (crashing, id)
}

/// Every message visible in `url` now, received with a long visibility timeout and then made visible again.
pub async fn visible(sqs: &Client, url: &str) -> Vec<Message> {
    let mut out: Vec<Message> = Vec::new();
    loop {
        let got = sqs
            .receive_message()
            .queue_url(url)
            .max_number_of_messages(10)
            .visibility_timeout(60)
            .message_attribute_names("All")
            .message_system_attribute_names(MessageSystemAttributeName::All)
            .send()
            .await
            .expect("receive")
            .messages
            .unwrap_or_default();
        if got.is_empty() {
            break;
        }
        out.extend(got);
    }
    for m in &out {
        sqs.change_message_visibility()
            .queue_url(url)
            .receipt_handle(m.receipt_handle().expect("receipt"))
            .visibility_timeout(0)
            .send()
            .await
            .expect("restore");
    }
    out
}

/// A message's string attributes.
pub fn attributes(m: &Message) -> HashMap<String, String> {
    m.message_attributes()
        .map(|a| {
            a.iter()
                .filter_map(|(k, v)| Some((k.clone(), v.string_value()?.to_owned())))
                .collect()
        })
        .unwrap_or_default()
}

/// A system attribute.
pub fn system(m: &Message, name: MessageSystemAttributeName) -> Option<String> {
    m.attributes().and_then(|a| a.get(&name)).cloned()
}

/// `now` less `days`.
pub fn days_ago(now: Timestamp, days: i64) -> Timestamp {
    now - SignedDuration::from_hours(24 * days)
}

/// A standard source queue and DLQ, seeded: bad_payload o-bad (1 copy), downstream_unavailable o-dup (2 copies,
/// the oldest), o-late, o-last, and one message SQS moved (no context). Returns (source, dlq, moved message id).
pub struct Seeded {
    pub source: Queue,
    pub dlq: Queue,
    pub moved_id: String,
}

pub async fn seed(sqs: &Client, now: Timestamp) -> Seeded {
    let (source, dlq) = source_and_dlq(sqs, "charge-payment", false).await;
    let transient = r#"{"payment_id":"p-1","amount":500,"fail":"downstream_unavailable"}"#;
    let dup = record("o-dup", transient, &source, days_ago(now, 3), None);
    dead_letter(
        sqs,
        &dlq,
        vec![
            dup.clone(),
            record(
                "o-bad",
                r#"{"payment_id":"p-2","amount":"five","fail":"bad_payload"}"#,
                &source,
                days_ago(now, 2),
                None,
            ),
            record(
                "o-late",
                &transient.replace("p-1", "p-3"),
                &source,
                days_ago(now, 1),
                None,
            ),
            record(
                "o-last",
                &transient.replace("p-1", "p-4"),
                &source,
                now,
                None,
            ),
        ],
    )
    .await;
    // The invocation crashed after the DLQ send, before its delete: the record comes back and is dead-lettered again.
    dead_letter(sqs, &dlq, vec![dup]).await;
    let (_, moved_id) = moved_by_sqs(sqs, &dlq, r#"{"payment_id":"p-5","amount":700}"#).await;
    Seeded {
        source,
        dlq,
        moved_id,
    }
}

/// The record Lambda would hand over for `m`, received from `source`, on its last attempt.
pub fn as_record(m: &Message, source: &Queue) -> SqsMessage {
    let mut r = SqsMessage::default();
    r.message_id = m.message_id().map(str::to_owned);
    r.receipt_handle = m.receipt_handle().map(str::to_owned);
    r.body = m.body().map(str::to_owned);
    r.event_source_arn = Some(source.arn.clone());
    if let Some(attrs) = m.attributes() {
        for (k, v) in attrs {
            r.attributes.insert(k.as_str().to_owned(), v.clone());
        }
    }
    r.attributes
        .insert("ApproximateReceiveCount".into(), MAX_ATTEMPTS.to_string());
    for (name, value) in attributes(m) {
        let mut a = SqsMessageAttribute::default();
        a.data_type = Some("String".into());
        a.string_value = Some(value);
        r.message_attributes.insert(name, a);
    }
    r
}
