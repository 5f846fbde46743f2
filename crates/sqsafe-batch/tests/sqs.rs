//! The SQS adapters against SQS's real API (moto server, started by `make test`): the dead-letter copy and its
//! attributes, FIFO dead-letter queues, and ChangeMessageVisibility.

mod common;

use std::time::Duration;

use aws_sdk_sqs::Client;
use aws_sdk_sqs::types::MessageSystemAttributeName;
use common::{event, in_group, message, with_attribute, with_receive_count};
use sqsafe_batch::{
    BatchProcessor, Processed, Record, RecordError, SqsDeadLetterQueue, SqsVisibility,
    VisibilityControl, attributes,
};

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

#[tokio::test]
async fn a_poison_record_reaches_the_dlq_with_its_context_as_attributes() {
    let sqs = client().await;
    let dlq_url = queue(&sqs, "dlq", false).await;
    let processor = BatchProcessor::builder("apply-ledger", 2)
        .dead_letter_queue(SqsDeadLetterQueue::new(sqs.clone(), &dlq_url))
        .build()
        .expect("config");
    let mut m = with_receive_count(message("msg-1", r#"{"account":"a-1","amount":500}"#), 4);
    m = with_attribute(m, "correlationId", "corr-7");
    for extra in ["aa", "bb", "cc", "dd"] {
        m = with_attribute(m, extra, "v"); // more originals than SQS's 10-attribute limit leaves room for
    }
    let report = processor
        .process(event(vec![m]), None, &poison)
        .await
        .expect("batch");
    assert!(
        report.response.batch_item_failures.is_empty(),
        "dead-lettered, so acknowledged"
    );

    let received = sqs
        .receive_message()
        .queue_url(&dlq_url)
        .message_attribute_names("All")
        .max_number_of_messages(10)
        .send()
        .await
        .expect("receive")
        .messages
        .unwrap_or_default();
    assert_eq!(received.len(), 1);
    let copy = &received[0];
    assert_eq!(copy.body(), Some(r#"{"account":"a-1","amount":500}"#));
    let attrs = copy.message_attributes().expect("attributes");
    let get = |name: &str| {
        attrs
            .get(name)
            .and_then(|a| a.string_value())
            .unwrap_or_default()
            .to_owned()
    };
    assert_eq!(get(attributes::ERROR_KIND), "precondition");
    assert_eq!(get(attributes::ERROR_CLASS), "permanent");
    assert_eq!(
        get(attributes::ERROR_MESSAGE),
        "insufficient balance for msg-1"
    );
    assert_eq!(get(attributes::ATTEMPTS), "4");
    assert_eq!(get(attributes::CONSUMER), "apply-ledger");
    assert_eq!(get(attributes::CONSUMER_VERSION), "2");
    assert_eq!(get(attributes::ORIGINAL_MESSAGE_ID), "msg-1");
    assert_eq!(get("correlationId"), "corr-7");
    assert_eq!(
        attrs.len(),
        10,
        "SQS's limit: the context first, then the originals that fit"
    );
    assert!(attrs.contains_key("aa") && attrs.contains_key("bb") && !attrs.contains_key("dd"));
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
