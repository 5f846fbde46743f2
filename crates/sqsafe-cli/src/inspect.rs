//! `sqsafe dlq inspect`: what the DLQ holds, grouped by error kind, read without consuming anything.

use std::io::Write;

use aws_sdk_sqs::Client;
use jiff::Timestamp;
use serde::Serialize;

use crate::clock::Clock;
use crate::error::Error;
use crate::letter::{Entry, NO_CONTEXT, entries};
use crate::scan::{ScanOptions, Scanned, scan};
use crate::time::human_duration;

/// How `inspect` reads.
///
/// # Default
/// [`ScanOptions::default`]; correlation id attribute `correlationId`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct InspectOptions {
    /// How the DLQ is received.
    pub scan: ScanOptions,
    /// The attribute that carries the correlation id.
    pub correlation_attribute: String,
}

impl Default for InspectOptions {
    fn default() -> Self {
        Self {
            scan: ScanOptions::default(),
            correlation_attribute: "correlationId".to_owned(),
        }
    }
}

/// What a DLQ holds (the JSON of `inspect --json`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Report {
    /// The DLQ's URL.
    pub queue: String,
    /// Messages received (copies included).
    pub messages: usize,
    /// Dead letters: messages with copies of one original counted once.
    pub dead_letters: usize,
    /// Why the scan stopped: `empty` (everything visible was seen), `repeated`, or `limit` (more may remain).
    pub stopped: &'static str,
    /// Messages made visible again.
    pub restored: usize,
    /// Messages that could not be made visible again at once: they come back after the visibility timeout.
    pub not_restored: usize,
    /// The dead letters by error kind, the largest group first.
    pub kinds: Vec<KindGroup>,
    /// When the report was made.
    pub at: String,
}

/// The dead letters of one error kind.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct KindGroup {
    /// The context's `error_kind`, or `no_context`.
    pub kind: String,
    /// `permanent` or `transient` when every entry says the same.
    pub class: Option<String>,
    /// The dead letters, oldest first.
    pub entries: Vec<Listed>,
}

/// One dead letter as listed.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Listed {
    /// The message id the consumer saw.
    pub original_message_id: String,
    /// How many copies of it the DLQ holds.
    pub copies: usize,
    /// The copies' DLQ message ids.
    pub dlq_message_ids: Vec<String>,
    /// `permanent` or `transient`.
    pub error_class: Option<String>,
    /// The error message.
    pub error: Option<String>,
    /// Deliveries made before it was dead-lettered.
    pub attempts: Option<u32>,
    /// The consumer that dead-lettered it.
    pub consumer: Option<String>,
    /// Its effect version.
    pub consumer_version: Option<u32>,
    /// The correlation id, to follow in the logs.
    pub correlation_id: Option<String>,
    /// The source queue's ARN.
    pub source_queue: Option<String>,
    /// The message group (FIFO).
    pub group_id: Option<String>,
    /// When the original was first sent, or the DLQ copy was sent (see `age_from`).
    pub sent: Option<String>,
    /// Age, for people (`3h 2m`).
    pub age: Option<String>,
    /// Age in seconds.
    pub age_seconds: Option<i64>,
    /// `first_sent` (the original's first send) or `dlq_copy` (the DLQ copy's send).
    pub age_from: Option<&'static str>,
    /// When its idempotency protection ends; a redrive after it applies the effect again.
    pub expires: Option<String>,
    /// `expires` has passed.
    pub expired: Option<bool>,
    /// Original attributes may have been left out of the copy (SQS's limit of 10, or the DLQ's message size): see
    /// [`DeadLetter::attributes_may_be_missing`](crate::DeadLetter::attributes_may_be_missing).
    pub attributes_may_be_missing: bool,
}

impl Listed {
    fn of(entry: &Entry, now: Timestamp) -> Self {
        let l = &entry.letter;
        let origin = entry.origin();
        let age = entry.age(now);
        let expires = entry.expires(None);
        Self {
            original_message_id: l.original_message_id.clone(),
            copies: entry.copies.len(),
            dlq_message_ids: entry
                .copies
                .iter()
                .map(|c| c.dlq_message_id.clone())
                .collect(),
            error_class: l.class.clone(),
            error: l.error.clone(),
            attempts: l.attempts,
            consumer: l.consumer.clone(),
            consumer_version: l.consumer_version,
            correlation_id: l.correlation_id.clone(),
            source_queue: l.source_queue.clone(),
            group_id: l.group_id.clone(),
            sent: origin.map(|(t, _)| t.to_string()),
            age: age.map(|(d, _)| human_duration(d)),
            age_seconds: age.map(|(d, _)| d.as_secs()),
            age_from: age.map(|(_, from)| from.as_str()),
            expires: expires.map(|t| t.to_string()),
            expired: expires.map(|t| t <= now),
            attributes_may_be_missing: l.attributes_may_be_missing,
        }
    }
}

/// Groups `entries` by kind, the largest group first, each oldest first.
fn group(mut entries: Vec<Entry>, now: Timestamp) -> Vec<KindGroup> {
    // Oldest first; a dead letter of unknown age last.
    entries.sort_by_key(|e| e.origin().map_or(Timestamp::MAX, |(t, _)| t));
    let mut groups: Vec<(String, Vec<Entry>)> = Vec::new();
    for entry in entries {
        match groups.iter_mut().find(|(k, _)| *k == entry.letter.kind) {
            Some((_, group)) => group.push(entry),
            None => groups.push((entry.letter.kind.clone(), vec![entry])),
        }
    }
    groups.sort_by(|(ka, a), (kb, b)| b.len().cmp(&a.len()).then(ka.cmp(kb)));
    groups
        .into_iter()
        .map(|(kind, group)| {
            let class = group[0].letter.class.clone();
            let class = class.filter(|c| group.iter().all(|e| e.letter.class.as_ref() == Some(c)));
            KindGroup {
                kind,
                class,
                entries: group.iter().map(|e| Listed::of(e, now)).collect(),
            }
        })
        .collect()
}

/// Reads what `queue` (a URL, name or ARN) holds and makes every message visible again.
///
/// # Errors
/// The queue cannot be found, or a receive fails.
pub async fn inspect(
    sqs: &Client,
    queue: &str,
    options: &InspectOptions,
    clock: &dyn Clock,
) -> Result<Report, Error> {
    let mut scanned: Scanned = scan(sqs, queue, &options.scan).await?;
    let now = clock.now();
    let found = entries(scanned.messages(), &options.correlation_attribute);
    let (restored, not_restored) = scanned.restore(sqs).await;
    Ok(Report {
        queue: scanned.queue_url().to_owned(),
        messages: scanned.messages().len(),
        dead_letters: found.len(),
        stopped: scanned.stopped.as_str(),
        restored,
        not_restored,
        kinds: group(found, now),
        at: format!("{now:.0}"),
    })
}

impl Report {
    /// The report for people.
    ///
    /// # Errors
    /// Writing fails.
    pub fn write_text(&self, out: &mut dyn Write) -> std::io::Result<()> {
        let copies = self
            .kinds
            .iter()
            .flat_map(|k| &k.entries)
            .filter(|e| e.copies > 1)
            .count();
        writeln!(out, "DLQ {}", self.queue)?;
        write!(
            out,
            "{} message{}, {} dead letter{}",
            self.messages,
            plural(self.messages),
            self.dead_letters,
            plural(self.dead_letters)
        )?;
        if copies > 0 {
            write!(out, " ({copies} with more than one copy)")?;
        }
        writeln!(out, " at {}", self.at)?;
        for kind in &self.kinds {
            writeln!(out)?;
            let class = kind
                .class
                .as_deref()
                .map(|c| format!(" ({c})"))
                .unwrap_or_default();
            writeln!(out, "{}{class}: {}", kind.kind, kind.entries.len())?;
            if kind.kind == NO_CONTEXT {
                writeln!(
                    out,
                    "  moved without sqsafe's context: by SQS's redrive policy (the function crashed or timed out on \
                     every delivery: look for the crash in its logs), or sent by something else"
                )?;
            }
            for e in &kind.entries {
                write_entry(out, e)?;
            }
        }
        writeln!(out)?;
        match self.stopped {
            "limit" => writeln!(
                out,
                "stopped at the limit of {} messages: more may remain (raise --limit)",
                self.messages
            )?,
            "repeated" => writeln!(
                out,
                "stopped when a message came back: its visibility timeout passed (raise --visibility-timeout)"
            )?,
            _ => {}
        }
        write!(out, "left in the DLQ: {} made visible again", self.restored)?;
        if self.not_restored > 0 {
            write!(
                out,
                ", {} not (they come back after the visibility timeout)",
                self.not_restored
            )?;
        }
        writeln!(out)
    }
}

fn write_entry(out: &mut dyn Write, e: &Listed) -> std::io::Result<()> {
    write!(out, "  {}", e.original_message_id)?;
    if e.copies > 1 {
        write!(out, "  {} copies", e.copies)?;
    }
    if let (Some(age), Some(from)) = (&e.age, e.age_from) {
        let from = if from == "first_sent" {
            "first sent"
        } else {
            "from the DLQ copy"
        };
        write!(out, "  age {age} ({from})")?;
    }
    if let Some(n) = e.attempts {
        write!(out, "  attempts {n}")?;
    }
    if let Some(consumer) = &e.consumer {
        write!(out, "  consumer {consumer}")?;
        if let Some(v) = e.consumer_version {
            write!(out, " v{v}")?;
        }
    }
    writeln!(out)?;
    if let Some(id) = &e.correlation_id {
        writeln!(out, "    correlation id: {id}")?;
    }
    if let Some(error) = &e.error {
        writeln!(out, "    error: {error}")?;
    }
    match &e.source_queue {
        Some(q) => write!(out, "    source: {q}")?,
        None => write!(out, "    source: not recorded (redrive with --to)")?,
    }
    if let Some(group) = &e.group_id {
        write!(out, "  group {group}")?;
    }
    writeln!(out)?;
    match (&e.expires, e.expired) {
        (Some(at), Some(true)) => writeln!(
            out,
            "    past its idempotency window since {at}: a redrive would apply its effect again"
        )?,
        (Some(at), _) => writeln!(
            out,
            "    a redrive is replayed, not applied again, until {at}"
        )?,
        _ => writeln!(
            out,
            "    idempotency window not recorded (redrive with --window)"
        )?,
    }
    if e.attributes_may_be_missing {
        writeln!(
            out,
            "    some original attributes may be missing (SQS keeps 10 per message; a body near the size limit \
             leaves less room)"
        )?;
    }
    if e.copies > 1 {
        writeln!(out, "    DLQ copies: {}", e.dlq_message_ids.join(", "))?;
    }
    Ok(())
}

fn plural(n: usize) -> &'static str {
    if n == 1 { "" } else { "s" }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::letter::tests::copy;

    #[test]
    fn kinds_are_grouped_largest_first_and_entries_oldest_first() {
        let messages = [
            copy("d-1", "o-1", "precondition", 1_750_000_300_000).build(),
            copy("d-2", "o-2", "bad_payload", 1_750_000_200_000).build(),
            copy("d-3", "o-3", "bad_payload", 1_750_000_100_000).build(),
            copy("d-4", "o-2", "bad_payload", 1_750_000_250_000).build(),
        ];
        let now = Timestamp::from_second(1_750_003_600).expect("t");
        let groups = group(entries(&messages, "correlationId"), now);
        assert_eq!(groups.len(), 2);
        assert_eq!(groups[0].kind, "bad_payload");
        let ids: Vec<_> = groups[0]
            .entries
            .iter()
            .map(|e| (e.original_message_id.as_str(), e.copies))
            .collect();
        assert_eq!(ids, [("o-3", 1), ("o-2", 2)]);
        assert_eq!(groups[0].entries[1].age.as_deref(), Some("56m 40s"));
        assert_eq!(groups[1].kind, "precondition");
        assert_eq!(groups[1].class.as_deref(), Some("permanent"));
    }

    #[test]
    fn the_text_names_the_context_and_the_copies() {
        let messages = [
            copy("d-1", "o-1", "precondition", 1_750_000_000_000).build(),
            copy("d-2", "o-1", "precondition", 1_750_000_001_000).build(),
        ];
        let now = Timestamp::from_second(1_750_003_600).expect("t");
        let report = Report {
            queue: "http://local/123/ledger-dlq".into(),
            messages: 2,
            dead_letters: 1,
            stopped: "empty",
            restored: 2,
            not_restored: 0,
            kinds: group(entries(&messages, "correlationId"), now),
            at: now.to_string(),
        };
        let mut text = Vec::new();
        report.write_text(&mut text).expect("write");
        let text = String::from_utf8(text).expect("utf-8");
        for expected in [
            "2 messages, 1 dead letter (1 with more than one copy)",
            "precondition (permanent): 1",
            "  o-1  2 copies  age 1h (from the DLQ copy)  attempts 3  consumer apply-ledger v2",
            "    correlation id: corr-o-1",
            "    error: no such account",
            "    source: not recorded (redrive with --to)",
            "    idempotency window not recorded (redrive with --window)",
            "    DLQ copies: d-1, d-2",
            "left in the DLQ: 2 made visible again",
        ] {
            assert!(text.contains(expected), "{expected:?} not in\n{text}");
        }
    }
}
