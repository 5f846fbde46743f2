//! What the demo and the fault-injection suite share: the local AWS, the function binaries, publishing, draining.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::process::Command;
use std::sync::OnceLock;
use std::time::{Duration, Instant};

use aws_sdk_sqs::types::{MessageAttributeValue, SendMessageBatchRequestEntry};

use crate::workspace_root;

/// Builds the function binaries (with the `fault-injection` feature when asked) and copies them out of cargo's way,
/// so a later build of the other flavour does not overwrite them. Returns the folder holding them.
///
/// # Panics
/// When the build fails: its output is in the message.
pub fn build_functions(fault_injection: bool) -> PathBuf {
    // Once per flavour and process: a suite's later runs reuse the first build instead of taking cargo's lock again
    // (make test runs the fault suite beside the template checks, whose sam build holds that lock for minutes).
    static BUILT: [OnceLock<PathBuf>; 2] = [OnceLock::new(), OnceLock::new()];
    BUILT[usize::from(fault_injection)]
        .get_or_init(|| build_functions_now(fault_injection))
        .clone()
}

fn build_functions_now(fault_injection: bool) -> PathBuf {
    let root = workspace_root();
    let mut command = Command::new(env!("CARGO"));
    command
        .current_dir(&root)
        .args(["build", "-q", "-p", "charge-payment", "-p", "apply-ledger"]);
    if fault_injection {
        command.args([
            "--features",
            "charge-payment/fault-injection,apply-ledger/fault-injection",
        ]);
    }
    let output = command.output().expect("run cargo build");
    assert!(
        output.status.success(),
        "cargo build of the functions failed:\n{}",
        String::from_utf8_lossy(&output.stderr)
    );
    let dir = root.join("target").join(if fault_injection {
        "e2e-fault-bin"
    } else {
        "e2e-bin"
    });
    std::fs::create_dir_all(&dir).expect("binary folder");
    for name in ["charge-payment", "apply-ledger"] {
        std::fs::copy(root.join("target/debug").join(name), dir.join(name))
            .expect("copy the function binary");
    }
    dir
}

/// A message to publish: body and correlation id.
#[derive(Debug, Clone)]
pub struct Outgoing {
    /// The body.
    pub body: String,
    /// The `correlationId` attribute.
    pub correlation_id: String,
    /// FIFO: the group.
    pub group: Option<String>,
    /// FIFO: the deduplication id.
    pub dedup: Option<String>,
}

/// Sends `messages` in batches of 10; returns the message ids in order.
///
/// # Panics
/// When SQS refuses a message.
pub async fn publish(
    sqs: &aws_sdk_sqs::Client,
    queue_url: &str,
    messages: &[Outgoing],
) -> Vec<String> {
    let mut ids = Vec::with_capacity(messages.len());
    for chunk in messages.chunks(10) {
        let entries: Vec<SendMessageBatchRequestEntry> = chunk
            .iter()
            .enumerate()
            .map(|(i, m)| {
                let attr = MessageAttributeValue::builder()
                    .data_type("String")
                    .string_value(&m.correlation_id)
                    .build()
                    .expect("attribute");
                SendMessageBatchRequestEntry::builder()
                    .id(format!("e{i}"))
                    .message_body(&m.body)
                    .message_attributes("correlationId", attr)
                    .set_message_group_id(m.group.clone())
                    .set_message_deduplication_id(m.dedup.clone())
                    .build()
                    .expect("entry")
            })
            .collect();
        let out = sqs
            .send_message_batch()
            .queue_url(queue_url)
            .set_entries(Some(entries))
            .send()
            .await
            .expect("send");
        assert!(
            out.failed().is_empty(),
            "SQS refused messages: {:?}",
            out.failed()
        );
        let mut sent: Vec<_> = out
            .successful()
            .iter()
            .map(|s| (s.id().to_owned(), s.message_id().to_owned()))
            .collect();
        sent.sort_by_key(|(id, _)| id[1..].parse::<usize>().unwrap_or(0));
        ids.extend(sent.into_iter().map(|(_, m)| m));
    }
    ids
}

/// Visible + in flight + delayed messages of a queue.
///
/// # Panics
/// When the attributes cannot be read.
pub async fn depth(sqs: &aws_sdk_sqs::Client, queue_url: &str) -> u64 {
    sqsafe_local::stack::queue_depth(sqs, queue_url)
        .await
        .expect("queue attributes")
}

/// Waits until every queue in `urls` is empty; `false` when `limit` passed first.
pub async fn drained(sqs: &aws_sdk_sqs::Client, urls: &[String], limit: Duration) -> bool {
    let started = Instant::now();
    loop {
        let mut total = 0;
        for url in urls {
            total += depth(sqs, url).await;
        }
        if total == 0 {
            return true;
        }
        if started.elapsed() > limit {
            return false;
        }
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
}

/// Every message of a queue (received with a long visibility, so each comes once).
///
/// # Panics
/// When SQS refuses.
pub async fn read_all(
    sqs: &aws_sdk_sqs::Client,
    queue_url: &str,
) -> Vec<aws_sdk_sqs::types::Message> {
    let mut all = Vec::new();
    loop {
        let batch = sqs
            .receive_message()
            .queue_url(queue_url)
            .max_number_of_messages(10)
            .visibility_timeout(600)
            .message_attribute_names("All")
            .message_system_attribute_names(aws_sdk_sqs::types::MessageSystemAttributeName::All)
            .send()
            .await
            .expect("receive")
            .messages
            .unwrap_or_default();
        if batch.is_empty() {
            return all;
        }
        all.extend(batch);
    }
}

/// A message attribute's string value.
pub fn attribute(message: &aws_sdk_sqs::types::Message, name: &str) -> Option<String> {
    message
        .message_attributes()?
        .get(name)?
        .string_value()
        .map(str::to_owned)
}

/// The fields of the sqsafe context a dead-letter copy carries (its `sqsafe.context` attribute, compact JSON): strings
/// as they are, numbers as their decimal text. Empty for a message without context (SQS's redrive policy moved it).
pub fn dead_letter_context(message: &aws_sdk_sqs::types::Message) -> BTreeMap<String, String> {
    let Some(context) = attribute(message, "sqsafe.context")
        .and_then(|v| serde_json::from_str::<serde_json::Map<String, serde_json::Value>>(&v).ok())
    else {
        return BTreeMap::new();
    };
    context
        .into_iter()
        .map(|(field, value)| match value {
            serde_json::Value::String(s) => (field, s),
            other => (field, other.to_string()),
        })
        .collect()
}

/// One field of [`dead_letter_context`].
pub fn context_field(message: &aws_sdk_sqs::types::Message, field: &str) -> Option<String> {
    dead_letter_context(message).remove(field)
}
