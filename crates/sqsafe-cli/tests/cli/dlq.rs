//! `inspect` and `redrive` against SQS's real API (moto server, started by `make test`), on DLQs that sqsafe filled:
//! nothing is consumed by looking, copies are shown once, a redrive sends before it deletes, keeps FIFO groups, and
//! refuses what its idempotency window no longer covers.

use std::collections::BTreeMap;

use aws_sdk_sqs::types::MessageSystemAttributeName;
use jiff::{SignedDuration, Timestamp};
use sqsafe_batch::{DeadLetterContext, attributes as context};
use sqsafe_cli::{
    InspectOptions, NO_CONTEXT, Outcome, RedriveOptions, ScanOptions, Stopped, inspect, redrive,
    scan as scan_queue,
};

use crate::common::{self, Seeded, attributes, days_ago, seed, sqs, system, visible};

/// Short polls: moto answers every visible message at once (the binary's default long poll is covered by the runbook).
fn scan() -> ScanOptions {
    ScanOptions {
        wait_secs: 0,
        ..ScanOptions::default()
    }
}

fn options() -> RedriveOptions {
    RedriveOptions {
        scan: scan(),
        ..RedriveOptions::default()
    }
}

fn ids(messages: &[aws_sdk_sqs::types::Message]) -> Vec<String> {
    let mut ids: Vec<String> = messages
        .iter()
        .map(|m| {
            attributes(m)
                .get(context::CONTEXT)
                .and_then(|v| DeadLetterContext::parse(v))
                .map(|c| c.original_message_id)
                .unwrap_or_else(|| m.message_id().unwrap_or_default().to_owned())
        })
        .collect();
    ids.sort();
    ids
}

#[tokio::test]
async fn inspect_shows_the_context_by_kind_copies_once_and_leaves_every_message_visible() {
    let sqs = sqs().await;
    let now = Timestamp::now();
    let Seeded {
        source,
        dlq,
        moved_id,
    } = seed(&sqs, now).await;
    let clock = move || now + SignedDuration::from_hours(1);
    let report = inspect(
        &sqs,
        &dlq.url,
        &InspectOptions {
            scan: scan(),
            ..InspectOptions::default()
        },
        &clock,
    )
    .await
    .expect("inspect");

    assert_eq!((report.messages, report.dead_letters), (6, 5));
    assert_eq!((report.restored, report.not_restored), (6, 0));
    assert_eq!(report.stopped, "empty");
    let kinds: Vec<(&str, usize)> = report
        .kinds
        .iter()
        .map(|k| (k.kind.as_str(), k.entries.len()))
        .collect();
    assert_eq!(
        kinds,
        [
            ("downstream_unavailable", 3),
            ("bad_payload", 1),
            (NO_CONTEXT, 1)
        ]
    );
    let transient = &report.kinds[0];
    assert_eq!(transient.class.as_deref(), Some("transient"));
    let dup = &transient.entries[0];
    assert_eq!(dup.original_message_id, "o-dup", "oldest first");
    assert_eq!(dup.copies, 2);
    assert_eq!(dup.dlq_message_ids.len(), 2);
    assert_eq!(dup.error.as_deref(), Some("payments API answered 503"));
    assert_eq!(dup.attempts, Some(common::MAX_ATTEMPTS));
    assert_eq!(dup.consumer.as_deref(), Some(common::CONSUMER));
    assert_eq!(dup.consumer_version, Some(1));
    assert_eq!(dup.correlation_id.as_deref(), Some("corr-o-dup"));
    assert_eq!(dup.source_queue.as_deref(), Some(source.arn.as_str()));
    assert_eq!(dup.age_from, Some("first_sent"));
    assert_eq!(dup.age.as_deref(), Some("3d 1h"));
    let first_sent = days_ago(now, 3);
    let millis = |t: Timestamp| Timestamp::from_millisecond(t.as_millisecond()).expect("t");
    assert_eq!(dup.sent, Some(millis(first_sent).to_string()));
    assert_eq!(
        dup.expires,
        Some(millis(first_sent + SignedDuration::from_hours(24 * common::WINDOW_DAYS)).to_string())
    );
    assert_eq!(dup.expired, Some(false));
    let bad = &report.kinds[1].entries[0];
    assert_eq!(bad.error_class.as_deref(), Some("permanent"));
    assert!(
        bad.error
            .as_deref()
            .is_some_and(|e| e.contains("expected u64"))
    );
    let moved = &report.kinds[2].entries[0];
    assert_eq!(moved.original_message_id, moved_id);
    assert_eq!(moved.correlation_id.as_deref(), Some("corr-crash"));
    assert_eq!(moved.age_from, Some("dlq_copy"));
    assert_eq!(
        (moved.expires.as_deref(), moved.source_queue.as_deref()),
        (None, None)
    );

    // The JSON is the same report.
    let json = serde_json::to_value(&report).expect("json");
    assert_eq!(json["kinds"][0]["entries"][0]["copies"], 2);
    assert_eq!(
        json["kinds"][0]["entries"][0]["correlation_id"],
        "corr-o-dup"
    );

    // Nothing consumed, nothing held: every message is visible again at once.
    let mut expected: Vec<String> = ["o-bad", "o-dup", "o-dup", "o-last", "o-late", &moved_id]
        .iter()
        .map(|s| (*s).to_owned())
        .collect();
    expected.sort();
    assert_eq!(ids(&visible(&sqs, &dlq.url).await), expected);
    assert!(visible(&sqs, &source.url).await.is_empty());
}

#[tokio::test]
async fn redrive_moves_at_most_max_of_a_kind_with_the_original_body_and_attributes() {
    let sqs = sqs().await;
    let now = Timestamp::now();
    let seeded = seed(&sqs, now).await;
    let mut out = Vec::new();
    let report = redrive(
        &sqs,
        &seeded.dlq.url,
        &RedriveOptions {
            max: 2,
            kinds: vec!["downstream_unavailable".into()],
            ..options()
        },
        &move || now,
        &mut out,
    )
    .await
    .expect("redrive");
    let text = String::from_utf8(out).expect("utf-8");

    // The two oldest of the kind; both copies of o-dup deleted, sent once.
    let moved: Vec<(&str, &Outcome)> = report
        .lines
        .iter()
        .map(|l| (l.original_message_id.as_str(), &l.outcome))
        .collect();
    assert_eq!(moved.len(), 2, "{text}");
    assert_eq!((moved[0].0, moved[1].0), ("o-dup", "o-late"));
    assert_eq!(
        (
            report.moved(),
            report.failed(),
            report.refused(),
            report.left
        ),
        (2, 0, 0, 1)
    );
    let source = visible(&sqs, &seeded.source.url).await;
    assert_eq!(source.len(), 2, "{text}");
    for line in &report.lines {
        let Outcome::Moved {
            new_message_id,
            not_deleted,
        } = &line.outcome
        else {
            panic!("moved: {line:?}");
        };
        assert!(not_deleted.is_empty());
        assert!(
            text.contains(&format!(
                "moved {} downstream_unavailable -> {} as {new_message_id}",
                line.original_message_id,
                seeded.source.url.rsplit('/').next().expect("name")
            )),
            "{text}"
        );
        let sent = source
            .iter()
            .find(|m| m.message_id() == Some(new_message_id))
            .expect("in the source queue");
        let attrs = attributes(sent);
        assert_eq!(
            attrs.get("correlationId").map(String::as_str),
            Some(format!("corr-{}", line.original_message_id).as_str())
        );
        assert_eq!(attrs.get("tenant").map(String::as_str), Some("acme"));
        assert!(attrs.contains_key(context::FIRST_SENT), "{attrs:?}");
        assert!(
            !attrs.keys().any(|k| k.starts_with("sqsafe.")
                && k != context::FIRST_SENT
                && k != context::FIRST_MESSAGE_ID),
            "the failure context is stripped: {attrs:?}"
        );
        assert_eq!(
            attrs.get(context::FIRST_MESSAGE_ID).map(String::as_str),
            Some(line.original_message_id.as_str()),
            "the first message id travels with it"
        );
        assert!(
            sent.body()
                .is_some_and(|b| b.contains("downstream_unavailable"))
        );
    }
    assert!(text.contains("(2 DLQ copies deleted)"), "{text}");
    let left = ids(&visible(&sqs, &seeded.dlq.url).await);
    assert_eq!(
        left.len(),
        3,
        "o-bad, o-last and the SQS-moved one stay: {left:?}"
    );
    assert!(left.contains(&"o-last".to_owned()) && left.contains(&"o-bad".to_owned()));
}

/// Anyone who can send to a DLQ can write a dead letter whose context names another queue. Without `--to`, a redrive
/// sends only to queues that really use this DLQ as their dead-letter queue (ListDeadLetterSourceQueues): the forged
/// one is refused with the reason and nothing reaches the queue it names; the genuine ones move as before; the plan
/// (each target queue and its count) is printed before anything is sent.
#[tokio::test]
async fn a_forged_context_naming_another_queue_is_refused_and_nothing_is_sent_there() {
    let sqs = sqs().await;
    let now = Timestamp::now();
    let seeded = seed(&sqs, now).await;
    let victim = common::queue(&sqs, "payouts", false).await;
    common::dead_letter(
        &sqs,
        &seeded.dlq,
        vec![common::record(
            "o-forged",
            r#"{"payment_id":"p-9","amount":1000000,"fail":"downstream_unavailable"}"#,
            &victim,
            now,
            None,
        )],
    )
    .await;
    let mut out = Vec::new();
    let report = redrive(
        &sqs,
        &seeded.dlq.url,
        &RedriveOptions {
            kinds: vec!["downstream_unavailable".into()],
            ..options()
        },
        &move || now,
        &mut out,
    )
    .await
    .expect("redrive");
    let text = String::from_utf8(out).expect("utf-8");
    let forged = report
        .lines
        .iter()
        .find(|l| l.original_message_id == "o-forged")
        .expect("the forged dead letter is considered");
    let Outcome::Refused(why) = &forged.outcome else {
        panic!("the forged dead letter is refused: {forged:?}\n{text}");
    };
    assert!(why.contains("does not use this DLQ"), "{why}");
    assert!(why.contains("--to"), "{why}");
    assert!(
        visible(&sqs, &victim.url).await.is_empty(),
        "nothing sent to the named queue"
    );
    assert_eq!(report.moved(), 3, "the genuine ones move: {text}");
    assert_eq!(visible(&sqs, &seeded.source.url).await.len(), 3, "{text}");
    let source_name = seeded.source.url.rsplit('/').next().expect("name");
    let plan = text
        .find(&format!("plan: 3 to {source_name}"))
        .unwrap_or_else(|| panic!("the plan names the target and its count:\n{text}"));
    let first_move = text.find("moved ").expect("a moved line");
    assert!(
        plan < first_move,
        "the plan comes before anything is sent:\n{text}"
    );
}

/// SQS takes 1 MiB messages: a 900 KB dead letter keeps its whole context in the DLQ and redrives whole.
#[tokio::test]
async fn a_900_kb_dead_letter_redrives_whole() {
    let sqs = sqs().await;
    let now = Timestamp::now();
    let (source, dlq) = common::source_and_dlq(&sqs, "big", false).await;
    let body = format!(
        r#"{{"payment_id":"p-big","fail":"downstream_unavailable","padding":"{}"}}"#,
        "x".repeat(900_000)
    );
    common::dead_letter(
        &sqs,
        &dlq,
        vec![common::record("o-big", &body, &source, now, None)],
    )
    .await;
    let mut out = Vec::new();
    let report = redrive(&sqs, &dlq.url, &options(), &move || now, &mut out)
        .await
        .expect("redrive");
    let text = String::from_utf8(out).expect("utf-8");
    assert_eq!(report.moved(), 1, "{text}");
    let back = visible(&sqs, &source.url).await;
    assert_eq!(back.len(), 1, "{text}");
    assert_eq!(
        back[0].body().map(str::len),
        Some(body.len()),
        "the whole body"
    );
    assert_eq!(
        attributes(&back[0])
            .get("correlationId")
            .map(String::as_str),
        Some("corr-o-big")
    );
}

/// A permanent error fails the same way again unless something was fixed: the redrive says so before it sends.
#[tokio::test]
async fn redriving_a_permanent_kind_warns_first() {
    let sqs = sqs().await;
    let now = Timestamp::now();
    let seeded = seed(&sqs, now).await;
    let mut out = Vec::new();
    redrive(
        &sqs,
        &seeded.dlq.url,
        &RedriveOptions {
            kinds: vec!["bad_payload".into()],
            ..options()
        },
        &move || now,
        &mut out,
    )
    .await
    .expect("redrive");
    let text = String::from_utf8(out).expect("utf-8");
    let warning = text
        .find("warning: 1 of permanent kinds (bad_payload: 1)")
        .unwrap_or_else(|| panic!("a warning:\n{text}"));
    let moved = text
        .find("moved o-bad")
        .unwrap_or_else(|| panic!("moved:\n{text}"));
    assert!(
        warning < moved,
        "the warning comes before the send:\n{text}"
    );

    // A transient kind: no warning.
    let mut out = Vec::new();
    redrive(
        &sqs,
        &seeded.dlq.url,
        &RedriveOptions {
            kinds: vec!["downstream_unavailable".into()],
            max: 1,
            ..options()
        },
        &move || now,
        &mut out,
    )
    .await
    .expect("redrive");
    let text = String::from_utf8(out).expect("utf-8");
    assert!(!text.contains("warning:"), "{text}");
}

/// `(data type, string value)` of each attribute of `m`, by name.
/// Redrives `dlq` with the default options at `now`, checks that `n` messages moved, and returns what is visible on
/// `source` then.
async fn redrive_all(
    sqs: &aws_sdk_sqs::Client,
    dlq: &str,
    source: &str,
    now: Timestamp,
    n: usize,
) -> Vec<aws_sdk_sqs::types::Message> {
    let mut out = Vec::new();
    let report = redrive(sqs, dlq, &options(), &move || now, &mut out)
        .await
        .expect("redrive");
    let text = String::from_utf8(out).expect("utf-8");
    assert_eq!(report.moved(), n, "{text}");
    let moved = visible(sqs, source).await;
    assert_eq!(moved.len(), n, "{text}");
    moved
}

fn typed(m: &aws_sdk_sqs::types::Message) -> BTreeMap<String, (String, String)> {
    m.message_attributes()
        .into_iter()
        .flatten()
        .map(|(name, a)| {
            let value = a.string_value().unwrap_or_default().to_owned();
            (name.clone(), (a.data_type().to_owned(), value))
        })
        .collect()
}

#[tokio::test]
async fn a_redrive_restores_every_attribute_of_a_message_with_many() {
    let sqs = sqs().await;
    let now = Timestamp::now();
    let (source, dlq) = common::source_and_dlq(&sqs, "charge-payment", false).await;
    let body = r#"{"payment_id":"p-9","amount":500,"fail":"downstream_unavailable"}"#;
    // common::record's correlationId and tenant, and five more of its own.
    let mut record = common::record("o-many", body, &source, days_ago(now, 1), None);
    for (name, data_type, value) in [
        (
            "traceparent",
            "String",
            "00-4bf92f3577b34da6-00f067aa0ba902b7-01",
        ),
        ("schema", "String.v2", "payment-requested"),
        ("priority", "Number", "5"),
        ("region", "String", "eu-west-1"),
        ("channel", "String", "web"),
    ] {
        let mut a = aws_lambda_events::sqs::SqsMessageAttribute::default();
        a.data_type = Some(data_type.to_owned());
        a.string_value = Some(value.to_owned());
        record.message_attributes.insert(name.to_owned(), a);
    }
    let original: BTreeMap<String, (String, String)> = record
        .message_attributes
        .iter()
        .map(|(name, a)| {
            let data_type = a.data_type.clone().unwrap_or_default();
            (
                name.clone(),
                (data_type, a.string_value.clone().unwrap_or_default()),
            )
        })
        .collect();
    assert_eq!(original.len(), 7);
    common::dead_letter(&sqs, &dlq, vec![record]).await;

    let moved = redrive_all(&sqs, &dlq.url, &source.url, now, 1).await;
    assert_eq!(moved[0].body(), Some(body));
    let mut attrs = typed(&moved[0]);
    let first_sent = attrs
        .remove(context::FIRST_SENT)
        .expect("sqsafe.first_sent");
    assert!(
        attrs.remove(context::FIRST_MESSAGE_ID).is_some(),
        "sqsafe.first_message_id"
    );
    let sent = Timestamp::from_millisecond(days_ago(now, 1).as_millisecond()).expect("t");
    assert_eq!(first_sent, ("String".to_owned(), sent.to_string()));
    assert_eq!(
        attrs, original,
        "exactly the original attributes, sqsafe's context stripped"
    );
    assert!(visible(&sqs, &dlq.url).await.is_empty());
}

#[tokio::test]
async fn a_redrive_puts_back_a_binary_attribute_byte_for_byte() {
    let sqs = sqs().await;
    let now = Timestamp::now();
    let (source, dlq) = common::source_and_dlq(&sqs, "charge-payment", false).await;
    let body = r#"{"payment_id":"p-bin","amount":500,"fail":"downstream_unavailable"}"#;
    // Bytes no text could carry: a NUL, an invalid lead byte, a lone continuation byte.
    let thumbnail = [0x89, b'P', b'N', b'G', 0x00, 0xff, 0x80, 0x0d, 0x0a];
    let signature = [0u8; 32];
    // common::record's correlationId and tenant, and two binary ones.
    let mut record = common::record("o-bin", body, &source, days_ago(now, 1), None);
    record = sqsafe_testkit::with_binary_attribute(record, "thumbnail", "Binary", &thumbnail);
    record =
        sqsafe_testkit::with_binary_attribute(record, "signature", "Binary.sha256", &signature);
    common::dead_letter(&sqs, &dlq, vec![record]).await;

    // Inspect reads it like any other dead letter, nothing missing.
    let report = inspect(
        &sqs,
        &dlq.url,
        &InspectOptions {
            scan: scan(),
            ..InspectOptions::default()
        },
        &move || now,
    )
    .await
    .expect("inspect");
    let listed = &report.kinds[0].entries[0];
    assert_eq!(listed.original_message_id, "o-bin");
    assert!(!listed.attributes_may_be_missing);
    let mut text = Vec::new();
    report.write_text(&mut text).expect("text");
    assert!(String::from_utf8(text).expect("utf-8").contains("o-bin"));
    serde_json::to_string(&report).expect("JSON");

    let moved = redrive_all(&sqs, &dlq.url, &source.url, now, 1).await;
    assert_eq!(moved[0].body(), Some(body));
    let attrs = moved[0].message_attributes().expect("attributes");
    let binary = |name: &str| sqsafe_testkit::binary_attribute(&moved[0], name);
    assert_eq!(
        binary("thumbnail"),
        Some(("Binary".to_owned(), Some(thumbnail.to_vec()), false)),
        "the same bytes, as a binary value"
    );
    assert_eq!(
        binary("signature"),
        Some(("Binary.sha256".to_owned(), Some(signature.to_vec()), false))
    );
    let mut names: Vec<_> = attrs.keys().map(String::as_str).collect();
    names.sort_unstable();
    assert_eq!(
        names,
        [
            "correlationId",
            "signature",
            context::FIRST_MESSAGE_ID,
            context::FIRST_SENT,
            "tenant",
            "thumbnail"
        ]
    );
    assert!(visible(&sqs, &dlq.url).await.is_empty());
}

#[tokio::test]
async fn a_dry_run_says_what_would_move_and_touches_nothing() {
    let sqs = sqs().await;
    let now = Timestamp::now();
    let seeded = seed(&sqs, now).await;
    let mut out = Vec::new();
    let report = redrive(
        &sqs,
        &seeded.dlq.url,
        &RedriveOptions {
            dry_run: true,
            ..options()
        },
        &move || now,
        &mut out,
    )
    .await
    .expect("dry run");
    let text = String::from_utf8(out).expect("utf-8");
    assert_eq!(report.moved(), 4, "{text}");
    assert!(report.lines.iter().any(|l| l.original_message_id == "o-dup"
        && l.outcome == Outcome::WouldMove
        && l.copies == 2));
    // The message SQS moved records neither its window nor (in moto) its source.
    assert_eq!(report.refused(), 1, "{text}");
    assert!(
        text.contains(&format!("refused {} no_context", seeded.moved_id)),
        "{text}"
    );
    assert!(text.contains("--window"), "{text}");
    assert!(text.contains("nothing was sent or deleted"), "{text}");
    assert_eq!(report.restored, 6);
    assert_eq!(visible(&sqs, &seeded.dlq.url).await.len(), 6);
    assert!(visible(&sqs, &seeded.source.url).await.is_empty());
}

#[tokio::test]
async fn a_failing_delete_leaves_a_duplicate_never_a_loss() {
    let sqs = sqs().await;
    let now = Timestamp::now();
    let seeded = seed(&sqs, now).await;
    let no_delete = common::sqs_failing("DeleteMessage").await;
    let only = |kind: &str| RedriveOptions {
        max: 1,
        kinds: vec![kind.into()],
        ..options()
    };
    let mut out = Vec::new();
    let report = redrive(
        &no_delete,
        &seeded.dlq.url,
        &only("bad_payload"),
        &move || now,
        &mut out,
    )
    .await
    .expect("redrive");
    let text = String::from_utf8(out).expect("utf-8");
    assert_eq!(report.failed(), 1, "{text}");
    assert!(text.contains("was NOT deleted"), "{text}");
    // Sent first: it is in the source queue, and still (visible) in the DLQ.
    let source = visible(&sqs, &seeded.source.url).await;
    assert_eq!(source.len(), 1);
    assert!(ids(&visible(&sqs, &seeded.dlq.url).await).contains(&"o-bad".to_owned()));
    // A later redrive sends the duplicate (the consumer replays it) and clears the DLQ of it.
    redrive(
        &sqs,
        &seeded.dlq.url,
        &only("bad_payload"),
        &move || now,
        &mut Vec::new(),
    )
    .await
    .expect("redrive");
    assert_eq!(visible(&sqs, &seeded.source.url).await.len(), 2);
    assert!(!ids(&visible(&sqs, &seeded.dlq.url).await).contains(&"o-bad".to_owned()));
}

#[tokio::test]
async fn a_failing_send_deletes_nothing() {
    let sqs = sqs().await;
    let now = Timestamp::now();
    let seeded = seed(&sqs, now).await;
    let no_send = common::sqs_failing("SendMessage").await;
    let mut out = Vec::new();
    let report = redrive(
        &no_send,
        &seeded.dlq.url,
        &options(),
        &move || now,
        &mut out,
    )
    .await
    .expect("redrive");
    let text = String::from_utf8(out).expect("utf-8");
    assert_eq!((report.moved(), report.failed()), (0, 4), "{text}");
    assert!(
        text.contains("failed o-dup downstream_unavailable: SQS SendMessage failed"),
        "{text}"
    );
    assert_eq!(visible(&sqs, &seeded.dlq.url).await.len(), 6);
}

#[tokio::test]
async fn a_lost_answer_to_the_send_makes_a_duplicate_never_a_loss() {
    let sqs = sqs().await;
    let now = Timestamp::now();
    let seeded = seed(&sqs, now).await;
    let lost = sqsafe_testkit::LostAnswer::default();
    lost.arm("SendMessage");
    let losing = common::sqs_losing(&lost).await;
    let report = redrive(
        &losing,
        &seeded.dlq.url,
        &RedriveOptions {
            max: 1,
            kinds: vec!["bad_payload".into()],
            ..options()
        },
        &move || now,
        &mut Vec::new(),
    )
    .await
    .expect("redrive");
    assert!(lost.pending().is_empty(), "the answer was lost");
    assert_eq!((report.moved(), report.failed()), (1, 0));
    // The SDK retried the send that had landed: two in the source queue, none left in the DLQ.
    assert_eq!(visible(&sqs, &seeded.source.url).await.len(), 2);
    assert!(!ids(&visible(&sqs, &seeded.dlq.url).await).contains(&"o-bad".to_owned()));
}

#[tokio::test]
async fn a_fifo_source_gets_its_groups_back_deduplicated_by_original_id() {
    let sqs = sqs().await;
    let now = Timestamp::now();
    let (source, dlq) = common::source_and_dlq(&sqs, "apply-ledger", true).await;
    let body = |n: u32| format!(r#"{{"entry_id":"e-{n}","fail":"downstream_unavailable"}}"#);
    common::dead_letter(
        &sqs,
        &dlq,
        vec![
            common::record(
                "f-1",
                &body(1),
                &source,
                days_ago(now, 2),
                Some("account-1"),
            ),
            common::record(
                "f-2",
                &body(2),
                &source,
                days_ago(now, 1),
                Some("account-1"),
            ),
            common::record("f-3", &body(3), &source, now, Some("account-2")),
        ],
    )
    .await;
    let moved = redrive_all(&sqs, &dlq.url, &source.url, now, 3).await;
    for m in &moved {
        let original = m
            .body()
            .and_then(|b| b.split("e-").nth(1))
            .and_then(|r| r.get(..1))
            .expect("n");
        let group = system(m, MessageSystemAttributeName::MessageGroupId);
        let expected_group = if original == "3" {
            "account-2"
        } else {
            "account-1"
        };
        assert_eq!(group.as_deref(), Some(expected_group));
        assert_eq!(
            system(m, MessageSystemAttributeName::MessageDeduplicationId).as_deref(),
            Some(format!("sqsafe-redrive-f-{original}").as_str())
        );
    }
    assert!(visible(&sqs, &dlq.url).await.is_empty());
}

#[tokio::test]
async fn past_its_idempotency_window_a_dead_letter_is_refused_until_forced() {
    let sqs = sqs().await;
    let now = Timestamp::now();
    let seeded = seed(&sqs, now).await;
    // 28 days on: o-dup (first sent 3 days before the seed) is past its 30-day window; o-late's ends within the
    // margin; o-last's (first sent at the seed) leaves time to consume it.
    let later = now + SignedDuration::from_hours(24 * 28 + 1);
    let only = |force: bool| RedriveOptions {
        kinds: vec!["downstream_unavailable".into()],
        force,
        ..options()
    };
    let mut out = Vec::new();
    let report = redrive(
        &sqs,
        &seeded.dlq.url,
        &only(false),
        &move || later,
        &mut out,
    )
    .await
    .expect("redrive");
    let text = String::from_utf8(out).expect("utf-8");
    assert_eq!((report.moved(), report.refused()), (1, 2), "{text}");
    for part in [
        "refused o-dup downstream_unavailable: age 31d 1h (since its first send), idempotency window 30d (ended ",
        "a redrive would apply its effect again instead of replaying it; --force redrives it anyway",
        "refused o-late downstream_unavailable: age 29d 1h (since its first send), idempotency window 30d (ends ",
        "in 23h, less than the margin of 1d",
    ] {
        assert!(text.contains(part), "{part:?} not in\n{text}");
    }
    let dlq = ids(&visible(&sqs, &seeded.dlq.url).await);
    assert!(dlq.contains(&"o-dup".to_owned()) && dlq.contains(&"o-late".to_owned()));
    assert_eq!(
        visible(&sqs, &seeded.source.url).await.len(),
        1,
        "only o-last moved"
    );

    let report = redrive(
        &sqs,
        &seeded.dlq.url,
        &only(true),
        &move || later,
        &mut Vec::new(),
    )
    .await
    .expect("forced");
    assert_eq!((report.moved(), report.refused()), (2, 0));
    assert_eq!(visible(&sqs, &seeded.source.url).await.len(), 3);
}

#[tokio::test]
async fn a_message_moved_by_sqs_goes_where_told_within_the_window_given() {
    let sqs = sqs().await;
    let now = Timestamp::now();
    let seeded = seed(&sqs, now).await;
    let mut out = Vec::new();
    let report = redrive(
        &sqs,
        &seeded.dlq.url,
        &RedriveOptions {
            kinds: vec![NO_CONTEXT.into()],
            window: Some(SignedDuration::from_hours(24 * 30)),
            ..options()
        },
        &move || now,
        &mut out,
    )
    .await
    .expect("redrive");
    let text = String::from_utf8(out).expect("utf-8");
    assert_eq!(
        report.refused(),
        1,
        "moto records no DeadLetterQueueSourceArn: {text}"
    );
    assert!(text.contains("--to <queue>"), "{text}");

    let name = seeded
        .source
        .url
        .rsplit('/')
        .next()
        .expect("name")
        .to_owned();
    let report = redrive(
        &sqs,
        &seeded.dlq.url,
        &RedriveOptions {
            kinds: vec![NO_CONTEXT.into()],
            window: Some(SignedDuration::from_hours(24 * 30)),
            to: Some(name),
            ..options()
        },
        &move || now,
        &mut Vec::new(),
    )
    .await
    .expect("redrive");
    assert_eq!(report.moved(), 1);
    let moved = visible(&sqs, &seeded.source.url).await;
    assert_eq!(moved.len(), 1);
    assert_eq!(
        attributes(&moved[0])
            .get("correlationId")
            .map(String::as_str),
        Some("corr-crash")
    );
}

#[tokio::test]
async fn a_scan_stops_at_its_limit_and_gives_back_what_it_held() {
    let sqs = sqs().await;
    let seeded = seed(&sqs, Timestamp::now()).await;
    // By name, as an operator may give it.
    let name = seeded.dlq.url.rsplit('/').next().expect("name").to_owned();
    let mut held = scan_queue(&sqs, &name, &ScanOptions { limit: 4, ..scan() })
        .await
        .expect("scan");
    assert_eq!((held.messages().len(), held.stopped), (4, Stopped::Limit));
    assert_eq!(held.queue_url(), seeded.dlq.url);
    assert_eq!(
        visible(&sqs, &seeded.dlq.url).await.len(),
        2,
        "4 held invisible"
    );
    assert_eq!(held.restore(&sqs).await, (4, 0));
    assert_eq!(visible(&sqs, &seeded.dlq.url).await.len(), 6);
    // A queue that does not exist stops the command, naming it.
    let err = scan_queue(&sqs, "no-such-dlq", &scan())
        .await
        .expect_err("no queue");
    assert!(err.to_string().starts_with("queue no-such-dlq: "), "{err}");
}

#[tokio::test]
async fn a_redriven_message_dead_lettered_again_keeps_counting_from_its_first_send() {
    let sqs = sqs().await;
    let now = Timestamp::now();
    let seeded = seed(&sqs, now).await;
    let only_dup = RedriveOptions {
        max: 1,
        kinds: vec!["downstream_unavailable".into()],
        ..options()
    };
    redrive(
        &sqs,
        &seeded.dlq.url,
        &only_dup,
        &move || now,
        &mut Vec::new(),
    )
    .await
    .expect("redrive");
    // The consumer fails it again, as often as it may: sqsafe dead-letters the redriven message.
    let redriven = visible(&sqs, &seeded.source.url).await;
    assert_eq!(redriven.len(), 1);
    let record = common::as_record(&redriven[0], &seeded.source);
    let new_id = record.message_id.clone().expect("id");
    common::dead_letter(&sqs, &seeded.dlq, vec![record]).await;

    let report = inspect(
        &sqs,
        &seeded.dlq.url,
        &InspectOptions {
            scan: scan(),
            ..InspectOptions::default()
        },
        &move || now,
    )
    .await
    .expect("inspect");
    // Shown under its first id, not the redriven copy's.
    let again = report
        .kinds
        .iter()
        .flat_map(|k| &k.entries)
        .find(|e| e.original_message_id == "o-dup")
        .unwrap_or_else(|| {
            panic!("dead-lettered again, shown as o-dup (not {new_id}): {report:?}")
        });
    // Its SentTimestamp is the redrive; its age and window still count from o-dup's first send, three days ago.
    assert_eq!(
        (again.age.as_deref(), again.age_from),
        (Some("3d"), Some("first_sent"))
    );
    let first = Timestamp::from_millisecond(days_ago(now, 3).as_millisecond()).expect("t");
    assert_eq!(again.sent, Some(first.to_string()));
    assert_eq!(again.correlation_id.as_deref(), Some("corr-o-dup"));
}
