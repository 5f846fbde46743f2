//! `sqsafe dlq redrive`: a few dead letters back to their source queue, sent before they are deleted.
//!
//! For each dead letter chosen (oldest first, of the kinds asked for, at most `max`):
//! ```text
//! DLQ copy (invisible) ──SendMessage──▶ source queue      a failure here: nothing changed, the copy stays
//!        │                                 (new message id)
//!        └──DeleteMessage (every copy)                     a failure here: the message is in both queues; the
//!                                                          consumer replays the duplicate, nothing is lost
//! ```
//! Everything received and not deleted is made visible again at the end.

mod decide;
mod options;
mod report;

use std::collections::HashMap;
use std::io::Write;

use aws_sdk_sqs::Client;

use jiff::Timestamp;

use self::decide::{Decision, NamedBy, decide, deduplication_id, redrive_attributes};
pub use self::options::RedriveOptions;
pub use self::report::{Line, Outcome, RedriveReport};
use crate::clock::Clock;
use crate::error::Error;
use crate::letter::{Entry, entries};
use crate::queue::{self, Queue};
use crate::scan::{Scanned, scan};

/// Moves up to `options.max` dead letters from `queue` (a URL, name or ARN) back to their source queue, writing one
/// line per dead letter considered to `out` as it goes, and a summary at the end.
///
/// # Errors
/// The DLQ cannot be found or received, or writing to `out` fails. What was received is made visible again first.
pub async fn redrive(
    sqs: &Client,
    queue: &str,
    options: &RedriveOptions,
    clock: &dyn Clock,
    out: &mut dyn Write,
) -> Result<RedriveReport, Error> {
    if options.max == 0 {
        return Err(Error::Usage("--max must be at least 1".into()));
    }
    if options.margin.is_negative() {
        return Err(Error::Usage("--margin must not be negative".into()));
    }
    let mut scanned = scan(sqs, queue, &options.scan).await?;
    let now = clock.now();
    let mut found = entries(scanned.messages(), &options.correlation_attribute);
    found.sort_by_key(|e| e.origin().map_or(Timestamp::MAX, |(t, _)| t));
    let dead_letters = found.len();
    let named_by = if options.to.is_some() {
        NamedBy::Operator
    } else {
        NamedBy::Context
    };

    // First every decision, each target queue resolved and checked once; then the plan; then the moves.
    let mut planned: Vec<(&Entry, Result<Queue, String>)> = Vec::new();
    let mut moving = 0;
    let mut left = 0;
    let mut queues: HashMap<String, Result<Queue, String>> = HashMap::new();
    let mut sources: Option<Result<Vec<String>, String>> = None;
    for entry in &found {
        if !options.kinds.is_empty() && !options.kinds.contains(&entry.letter.kind) {
            continue;
        }
        if moving == options.max {
            left += 1;
            continue;
        }
        let target = match decide(entry, options, now) {
            Decision::Refuse(why) => Err(why),
            Decision::Move(target) => {
                if !queues.contains_key(&target) {
                    let checked = check_target(
                        sqs,
                        &scanned,
                        &target,
                        named_by,
                        options.endpoint.as_deref(),
                        &mut sources,
                    )
                    .await;
                    queues.insert(target.clone(), checked);
                }
                queues
                    .get(&target)
                    .cloned()
                    .unwrap_or_else(|| Err("unresolved queue".into()))
            }
        };
        moving += usize::from(target.is_ok());
        planned.push((entry, target));
    }
    let plan = Plan::of(&planned);
    let mut write_error = plan
        .write(out, options.dry_run)
        .and_then(|()| warn_permanent(&planned, out))
        .err();

    let mut lines = Vec::new();
    for (entry, target) in &planned {
        let line = match target {
            Err(why) => line_for(entry, None, Outcome::Refused(why.clone())),
            Ok(target) if options.dry_run => line_for(entry, Some(target), Outcome::WouldMove),
            Ok(target) => {
                let outcome = move_one(sqs, &mut scanned, entry, target).await;
                line_for(entry, Some(target), outcome)
            }
        };
        if let Err(e) = line.write(out)
            && write_error.is_none()
        {
            write_error = Some(e);
        }
        lines.push(line);
    }
    let (restored, not_restored) = scanned.restore(sqs).await;
    let report = RedriveReport {
        queue: scanned.queue_url().to_owned(),
        lines,
        left,
        dead_letters,
        restored,
        not_restored,
        dry_run: options.dry_run,
    };
    if let Some(e) = write_error {
        return Err(e.into());
    }
    report.write_summary(out)?;
    Ok(report)
}

/// Resolves a target queue and checks that it may receive a redrive: an SQS queue of the client's region (or a local
/// endpoint), and, when the dead letter's own context named it, one that really uses this DLQ as its dead-letter queue.
async fn check_target(
    sqs: &Client,
    scanned: &Scanned,
    target: &str,
    named_by: NamedBy,
    endpoint: Option<&str>,
    sources: &mut Option<Result<Vec<String>, String>>,
) -> Result<Queue, String> {
    let queue = queue::resolve(sqs, target)
        .await
        .map_err(|e| e.to_string())?;
    queue::check_endpoint(sqs, endpoint, &queue.url)?;
    if named_by == NamedBy::Operator {
        return Ok(queue);
    }
    if sources.is_none() {
        *sources = Some(
            queue::dead_letter_sources(sqs, scanned.queue_url())
                .await
                .map_err(|e| e.to_string()),
        );
    }
    match sources.as_ref() {
        Some(Ok(urls)) if urls.iter().any(|u| queue::same_queue(u, &queue.url)) => Ok(queue),
        Some(Ok(urls)) => {
            let names: Vec<&str> = urls
                .iter()
                .map(|u| u.rsplit('/').next().unwrap_or(u))
                .collect();
            Err(format!(
                "its context names {target}, which does not use this DLQ as its dead-letter queue (queues that do: \
                 {}): a forged or stale context is not followed; pass --to <queue> to send it there anyway",
                if names.is_empty() {
                    "none".to_owned()
                } else {
                    names.join(", ")
                }
            ))
        }
        _ => Err(format!(
            "its context names {target}, and the queues that use this DLQ could not be listed \
             (ListDeadLetterSourceQueues: {}): pass --to <queue>",
            sources
                .as_ref()
                .and_then(|s| s.as_ref().err())
                .map_or("unknown error", String::as_str)
        )),
    }
}

/// Before anything is sent: a warning for the dead letters of a permanent kind that would move. A permanent error
/// (a bad payload, a payload mismatch, a refused precondition) fails the same way again unless the producer or the
/// data was fixed since; the operator hears it before the send, not from the DLQ afterwards.
fn warn_permanent(
    planned: &[(&Entry, Result<Queue, String>)],
    out: &mut dyn Write,
) -> std::io::Result<()> {
    let mut kinds: Vec<(&str, usize)> = Vec::new();
    for (entry, target) in planned {
        if target.is_ok() && entry.letter.class.as_deref() == Some("permanent") {
            match kinds.iter_mut().find(|(k, _)| *k == entry.letter.kind) {
                Some(k) => k.1 += 1,
                None => kinds.push((&entry.letter.kind, 1)),
            }
        }
    }
    if kinds.is_empty() {
        return Ok(());
    }
    let list: Vec<String> = kinds.iter().map(|(k, n)| format!("{k}: {n}")).collect();
    writeln!(
        out,
        "warning: {} of permanent kinds ({}): they failed for a reason a retry does not fix, and fail the same way \
         again unless the producer or the data was fixed since",
        kinds.iter().map(|(_, n)| n).sum::<usize>(),
        list.join(", ")
    )
}

/// What a redrive will do, said before anything is sent: each target queue with its count, and the refusals.
#[derive(Debug, Default)]
struct Plan {
    /// (queue name, URL, dead letters), in the order first met.
    targets: Vec<(String, String, usize)>,
    refused: usize,
}

impl Plan {
    fn of(planned: &[(&Entry, Result<Queue, String>)]) -> Self {
        let mut plan = Self::default();
        for (_, target) in planned {
            match target {
                Ok(q) => match plan.targets.iter_mut().find(|(_, url, _)| *url == q.url) {
                    Some(t) => t.2 += 1,
                    None => plan.targets.push((q.name().to_owned(), q.url.clone(), 1)),
                },
                Err(_) => plan.refused += 1,
            }
        }
        plan
    }

    fn write(&self, out: &mut dyn Write, dry_run: bool) -> std::io::Result<()> {
        let verb = if dry_run { "would send" } else { "sends" };
        for (name, url, n) in &self.targets {
            writeln!(
                out,
                "plan: {n} to {name} ({url}); this run {verb} {}",
                if *n == 1 { "it" } else { "them" }
            )?;
        }
        if self.refused > 0 {
            writeln!(out, "plan: {} refused (reasons below)", self.refused)?;
        }
        if self.targets.is_empty() && self.refused == 0 {
            writeln!(out, "plan: nothing to redrive")?;
        }
        Ok(())
    }
}

fn line_for(entry: &Entry, target: Option<&Queue>, outcome: Outcome) -> Line {
    Line {
        original_message_id: entry.letter.original_message_id.clone(),
        kind: entry.letter.kind.clone(),
        target: target.map(|q| q.name().to_owned()),
        copies: entry.copies.len(),
        outcome,
    }
}

/// Sends one dead letter to `target`, then deletes its copies from the DLQ.
async fn move_one(sqs: &Client, scanned: &mut Scanned, entry: &Entry, target: &Queue) -> Outcome {
    let letter = &entry.letter;
    let mut send = sqs
        .send_message()
        .queue_url(&target.url)
        .message_body(&letter.body)
        .set_message_attributes(Some(redrive_attributes(entry)).filter(|a| !a.is_empty()));
    if target.is_fifo() {
        let Some(group) = &letter.group_id else {
            return Outcome::Failed(format!(
                "{} is a FIFO queue and the DLQ copy has no MessageGroupId (a standard DLQ does not keep it)",
                target.name()
            ));
        };
        send = send
            .message_group_id(group)
            .message_deduplication_id(deduplication_id(&letter.original_message_id));
    }
    let new_message_id = match send.send().await {
        Ok(sent) => sent.message_id().unwrap_or_default().to_owned(),
        Err(e) => return Outcome::Failed(Error::sqs("SendMessage", e).to_string()),
    };
    // Sent: from here on, a failure leaves a duplicate, never a loss.
    let mut not_deleted = Vec::new();
    for copy in &entry.copies {
        let Some(receipt) = scanned.receipt(&copy.dlq_message_id).map(str::to_owned) else {
            continue;
        };
        match sqs
            .delete_message()
            .queue_url(scanned.queue_url())
            .receipt_handle(receipt)
            .send()
            .await
        {
            Ok(_) => scanned.forget(&copy.dlq_message_id),
            Err(e) => not_deleted.push((
                copy.dlq_message_id.clone(),
                Error::sqs("DeleteMessage", e).to_string(),
            )),
        }
    }
    Outcome::Moved {
        new_message_id,
        not_deleted,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use aws_sdk_sqs::types::MessageAttributeValue;
    use jiff::SignedDuration;
    use sqsafe_batch::{RedriveContext, attributes};

    use crate::letter::tests::{attr, context, copy_with, legacy_copy};

    const SENT_MS: i64 = 1_750_000_000_000;

    fn entry(redrive: Option<&str>) -> Entry {
        let mut context = context("o-1", "precondition");
        if let Some(r) = redrive {
            context.redrive = RedriveContext::parse(r).expect("redrive JSON");
        }
        let m = copy_with("d-1", &context, SENT_MS + 3_600_000);
        entries(&[m.build()], "correlationId").remove(0)
    }

    /// Dead-lettered with sqsafe's redrive context: first sent at SENT_MS, a 30-day window.
    fn recorded() -> Entry {
        entry(Some(
            r#"{"source_queue":"arn:aws:sqs:us-east-1:123456789012:ledger","first_sent":"2025-06-15T15:06:40Z","expires":"2025-07-15T15:06:40Z"}"#,
        ))
    }

    fn at(days: i64) -> Timestamp {
        Timestamp::from_millisecond(SENT_MS).expect("t") + SignedDuration::from_hours(24 * days)
    }

    #[test]
    fn a_dead_letter_inside_its_window_goes_to_its_recorded_source() {
        let d = decide(&recorded(), &RedriveOptions::default(), at(10));
        assert_eq!(
            d,
            Decision::Move("arn:aws:sqs:us-east-1:123456789012:ledger".into())
        );
        let to = RedriveOptions {
            to: Some("other".into()),
            ..RedriveOptions::default()
        };
        assert_eq!(
            decide(&recorded(), &to, at(10)),
            Decision::Move("other".into())
        );
    }

    #[test]
    fn past_its_window_it_is_refused_with_the_reason_unless_forced() {
        let Decision::Refuse(why) = decide(&recorded(), &RedriveOptions::default(), at(31)) else {
            panic!("refused");
        };
        for part in [
            "age 31d (since its first send)",
            "idempotency window 30d",
            "ended 2025-07-15T15:06:40Z",
            "a redrive would apply its effect again",
            "--force",
        ] {
            assert!(why.contains(part), "{part:?} not in {why}");
        }
        // Inside the window but within the margin (1 day by default).
        let Decision::Refuse(why) = decide(
            &recorded(),
            &RedriveOptions::default(),
            at(29) + SignedDuration::from_hours(12),
        ) else {
            panic!("refused");
        };
        assert!(why.contains("less than the margin of 1d"), "{why}");
        let forced = RedriveOptions {
            force: true,
            ..RedriveOptions::default()
        };
        assert!(matches!(
            decide(&recorded(), &forced, at(400)),
            Decision::Move(_)
        ));
    }

    #[test]
    fn without_a_recorded_window_the_flag_decides() {
        let bare = entry(None);
        let Decision::Refuse(why) = decide(&bare, &RedriveOptions::default(), at(1)) else {
            panic!("refused");
        };
        assert!(why.contains("--window"), "{why}");
        let window = RedriveOptions {
            window: Some(SignedDuration::from_hours(24 * 30)),
            to: Some("ledger".into()),
            ..RedriveOptions::default()
        };
        // Counted from the DLQ copy's send (an hour after SENT_MS), less the 1-day margin.
        let edge = at(29) + SignedDuration::from_hours(1);
        assert!(matches!(
            decide(&bare, &window, edge - SignedDuration::from_secs(1)),
            Decision::Move(_)
        ));
        assert!(matches!(decide(&bare, &window, edge), Decision::Refuse(_)));
        // A window known, the queue not.
        let no_queue = RedriveOptions {
            window: Some(SignedDuration::from_hours(24 * 30)),
            ..RedriveOptions::default()
        };
        let Decision::Refuse(why) = decide(&bare, &no_queue, at(1)) else {
            panic!("refused");
        };
        assert!(why.contains("--to"), "{why}");
    }

    #[test]
    fn a_stream_records_letter_goes_only_where_to_says() {
        let mut context = context(
            "49590338271490256608559692538361571095921575989136588898",
            "poison",
        );
        context.stream = Some(sqsafe_batch::StreamOrigin {
            source: sqsafe_batch::StreamSource::Kinesis,
            stream_arn: Some("arn:aws:kinesis:us-east-1:123456789012:stream/orders".into()),
            shard_id: Some("shardId-000000000000".into()),
            sequence_number: "49590338271490256608559692538361571095921575989136588898".into(),
            event_id:
                "shardId-000000000000:49590338271490256608559692538361571095921575989136588898"
                    .into(),
            partition_key: Some("order-7".into()),
            data_encoding: None,
        });
        // Its window, from the record's arrival; no source queue.
        context.redrive = RedriveContext::parse(
            r#"{"first_sent":"2025-06-15T15:06:40Z","expires":"2025-07-15T15:06:40Z"}"#,
        )
        .expect("redrive JSON");
        let m = copy_with("d-1", &context, SENT_MS + 3_600_000);
        let stream_letter = entries(&[m.build()], "correlationId").remove(0);
        assert_eq!(
            stream_letter.letter.stream.as_deref(),
            Some("arn:aws:kinesis:us-east-1:123456789012:stream/orders")
        );
        let Decision::Refuse(why) = decide(&stream_letter, &RedriveOptions::default(), at(1))
        else {
            panic!("a stream record's letter has no queue to go back to");
        };
        assert!(
            why.starts_with(
                "it is a record of the stream arn:aws:kinesis:us-east-1:123456789012:stream/orders"
            ),
            "{why}"
        );
        let to = RedriveOptions {
            to: Some("orders-replay".into()),
            ..RedriveOptions::default()
        };
        assert_eq!(
            decide(&stream_letter, &to, at(1)),
            Decision::Move("orders-replay".into())
        );
    }

    #[test]
    fn deduplication_ids_derive_from_the_original_message_id() {
        assert_eq!(
            deduplication_id("059f36b4-87a3-44ab-83d2-661975830a7d"),
            "sqsafe-redrive-059f36b4-87a3-44ab-83d2-661975830a7d"
        );
        let long = deduplication_id(&"x".repeat(200));
        assert_eq!(long.len(), "sqsafe-redrive-".len() + 64);
        assert_ne!(deduplication_id("a b"), deduplication_id("a c"));
    }

    #[test]
    fn the_redriven_message_keeps_its_attributes_and_its_first_send_not_the_context() {
        let attrs = redrive_attributes(&recorded());
        let mut names: Vec<_> = attrs.keys().map(String::as_str).collect();
        names.sort();
        assert_eq!(
            names,
            [
                "correlationId",
                attributes::FIRST_MESSAGE_ID,
                attributes::FIRST_SENT,
                "tenant"
            ]
        );
        assert_eq!(
            attrs[attributes::FIRST_SENT].string_value(),
            Some("2025-06-15T15:06:40Z")
        );
        assert_eq!(
            attrs[attributes::FIRST_MESSAGE_ID].string_value(),
            Some("o-1")
        );
        assert_eq!(attrs["tenant"].data_type(), "String");

        // A legacy copy: every sqsafe.* attribute stripped the same way.
        let legacy = legacy_copy("d-1", "o-1", "precondition", SENT_MS)
            .message_attributes(
                attributes::REDRIVE,
                attr(r#"{"source_queue":"arn:aws:sqs:us-east-1:123456789012:ledger","first_sent":"2025-06-15T15:06:40Z"}"#),
            )
            .build();
        let attrs = redrive_attributes(&entries(&[legacy], "correlationId").remove(0));
        let mut names: Vec<_> = attrs.keys().map(String::as_str).collect();
        names.sort();
        assert_eq!(
            names,
            [
                "correlationId",
                attributes::FIRST_MESSAGE_ID,
                attributes::FIRST_SENT,
                "tenant"
            ]
        );
    }

    #[test]
    fn a_binary_attribute_goes_back_as_the_same_bytes() {
        let bytes = [0x00, 0xff, 0x80, b'z'];
        let thumbnail = MessageAttributeValue::builder()
            .data_type("Binary.png")
            .binary_value(aws_sdk_sqs::primitives::Blob::new(bytes.as_slice()))
            .build()
            .expect("attribute");
        let m = copy_with("d-1", &context("o-1", "precondition"), SENT_MS)
            .message_attributes("thumbnail", thumbnail.clone())
            .build();
        let attrs = redrive_attributes(&entries(&[m], "correlationId").remove(0));
        assert_eq!(attrs.get("thumbnail"), Some(&thumbnail));
    }
}
