//! Which dead letters go back, and what the copy sent carries.

use super::options::RedriveOptions;
use std::collections::HashMap;

use aws_sdk_sqs::types::MessageAttributeValue;
use jiff::Timestamp;
use sha2::{Digest, Sha256};
use sqsafe_batch::attributes;

use crate::letter::{AgeFrom, Entry};

use crate::time::human_duration;

/// Where a dead letter would go, or why not.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) enum Decision {
    Move(String),
    Refuse(String),
}

/// Who named a dead letter's target queue: the operator (`--to`), or the dead letter's own context, which anyone who
/// can send to the DLQ can write, so it is trusted only when that queue really uses this DLQ as its dead-letter queue.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum NamedBy {
    Operator,
    Context,
}

/// Decides for one dead letter of a kind asked for: its queue, and whether its idempotency window still covers a
/// redrive (unless forced).
pub(super) fn decide(entry: &Entry, options: &RedriveOptions, now: Timestamp) -> Decision {
    if !options.force {
        let Some(expires) = entry.expires(options.window) else {
            return Decision::Refuse(
                "its idempotency window is not recorded (no `expires` in the DLQ copy's context), so nothing says \
                 a redrive would be replayed rather than applied again: pass --window with the consumer's \
                 IDEMPOTENCY_WINDOW_DAYS (e.g. --window 30d), or --force"
                    .to_owned(),
            );
        };
        let deadline = expires
            .checked_sub(options.margin)
            .unwrap_or(Timestamp::MIN);
        if now >= deadline {
            return Decision::Refuse(refusal(entry, expires, options, now));
        }
    }
    match options
        .to
        .clone()
        .or_else(|| entry.letter.source_queue.clone())
    {
        Some(target) => Decision::Move(target.trim().to_owned()),
        None if entry.letter.stream.is_some() => Decision::Refuse(format!(
            "it is a record of the stream {}, which cannot take it back: pass --to <queue> (a queue a consumer of \
             the same records reads)",
            entry.letter.stream.as_deref().unwrap_or_default()
        )),
        None => Decision::Refuse(
            "its source queue is not recorded (no `source_queue` in the DLQ copy's context, no \
             DeadLetterQueueSourceArn): pass --to <queue>"
                .to_owned(),
        ),
    }
}

/// Why a dead letter past (or near) the end of its idempotency window is refused: its age, the window, and what a
/// redrive would do.
pub(super) fn refusal(
    entry: &Entry,
    expires: Timestamp,
    options: &RedriveOptions,
    now: Timestamp,
) -> String {
    let (age, from) = entry
        .age(now)
        .map(|(d, from)| (human_duration(d), from))
        .unwrap_or(("unknown".into(), AgeFrom::DlqCopy));
    let from = match from {
        AgeFrom::FirstSent => "since its first send",
        AgeFrom::DlqCopy => "since its DLQ copy was sent",
    };
    let window = entry
        .origin()
        .map(|(origin, _)| human_duration(expires.duration_since(origin)))
        .unwrap_or_else(|| "unknown".into());
    let when = if expires <= now {
        format!("ended {expires}")
    } else {
        format!(
            "ends {expires}, in {}, less than the margin of {} the consumer needs to take it (--margin)",
            human_duration(expires.duration_since(now)),
            human_duration(options.margin)
        )
    };
    format!(
        "age {age} ({from}), idempotency window {window} ({when}): its idempotency record may be gone, so a redrive \
         would apply its effect again instead of replaying it; --force redrives it anyway"
    )
}

/// The deduplication id of a redrive to a FIFO queue: one per original message, so that copies of it sent within
/// SQS's 5-minute deduplication interval (two DLQ copies, or a redrive retried after a crash) enqueue once.
pub(super) fn deduplication_id(original_message_id: &str) -> String {
    let id = format!("sqsafe-redrive-{original_message_id}");
    // SQS allows 128 characters, alphanumeric or punctuation.
    if id.len() <= 128
        && id
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b.is_ascii_punctuation())
    {
        return id;
    }
    let digest = Sha256::digest(original_message_id.as_bytes());
    let hex: String = digest.iter().map(|b| format!("{b:02x}")).collect();
    format!("sqsafe-redrive-{hex}")
}

/// The attributes the redriven message carries: the original's, as the copy kept them (sqsafe's context removed:
/// `sqsafe.context`, or the legacy attributes) and, when there is room, when it was first sent and its first message
/// id (so that a second dead-lettering keeps counting from there, under the same id).
pub(super) fn redrive_attributes(entry: &Entry) -> HashMap<String, MessageAttributeValue> {
    let mut out = entry.letter.original_attributes();
    let text = |value: String| {
        MessageAttributeValue::builder()
            .data_type("String")
            .string_value(value)
            .build()
            .ok()
    };
    if let Some((origin, _)) = entry.origin()
        && out.len() < 10
        && let Some(value) = text(origin.to_string())
    {
        out.insert(attributes::FIRST_SENT.to_owned(), value);
    }
    // So that a second dead-lettering names the message by its first id, not the redriven copy's.
    if out.len() < 10
        && let Some(value) = text(entry.letter.original_message_id.clone())
    {
        out.insert(attributes::FIRST_MESSAGE_ID.to_owned(), value);
    }
    out
}
