//! The runbook in the book (book/src/dead-letters.md, "Runbook: dead letters"), run as written: every command between
//! `<!-- runbook:start -->` and `<!-- runbook:end -->` is taken from that chapter, its documented placeholders (`$DLQ`,
//! `$QUEUE`) replaced by queues in moto server that sqsafe filled, and run with the built `sqsafe` binary; each step's
//! outcome is checked. Edit a command in the chapter and this test runs the new one; add or remove one and it fails
//! until the expectations here follow.

use std::process::Command;

use jiff::Timestamp;

use crate::common::{self, Queue, days_ago, record, seed, sqs, visible};

const RUNBOOK: &str = include_str!("../../../../book/src/dead-letters.md");

/// The command lines of the fenced code blocks between the runbook markers, in order.
fn runbook_commands(chapter: &str) -> Vec<String> {
    let start = chapter
        .find("<!-- runbook:start -->")
        .expect("book/src/dead-letters.md has <!-- runbook:start -->");
    let end = chapter
        .find("<!-- runbook:end -->")
        .expect("book/src/dead-letters.md has <!-- runbook:end -->");
    assert!(start < end, "the runbook markers are in order");
    let mut commands = Vec::new();
    let mut in_block = false;
    for line in chapter[start..end].lines() {
        let line = line.trim();
        if line.starts_with("```") {
            in_block = !in_block;
            continue;
        }
        if in_block && !line.is_empty() && !line.starts_with('#') {
            commands.push(line.to_owned());
        }
    }
    assert!(!in_block, "a code block in the runbook is not closed");
    commands
}

/// The output of one command.
struct Run {
    code: i32,
    stdout: String,
}

/// Runs a runbook line with the built binary, the placeholders replaced; nothing but the placeholders changes.
fn run(line: &str, dlq: &Queue, source: &Queue) -> Run {
    let line = line
        .replace("$DLQ", &dlq.url)
        .replace("$QUEUE", &source.url);
    assert!(
        !line.contains('$'),
        "an undocumented placeholder in {line:?}"
    );
    let mut words = line.split_whitespace();
    assert_eq!(
        words.next(),
        Some("sqsafe"),
        "runbook commands run sqsafe: {line:?}"
    );
    let output = Command::new(env!("CARGO_BIN_EXE_sqsafe"))
        .args(words)
        .env("AWS_ENDPOINT_URL", sqsafe_testkit::endpoint())
        .env("AWS_ACCESS_KEY_ID", "testing")
        .env("AWS_SECRET_ACCESS_KEY", "testing")
        .env("AWS_REGION", "us-east-1")
        .env("AWS_EC2_METADATA_DISABLED", "true")
        .output()
        .expect("the sqsafe binary runs");
    let stdout = String::from_utf8(output.stdout).expect("UTF-8");
    let stderr = String::from_utf8(output.stderr).expect("UTF-8");
    assert!(stderr.is_empty(), "{line}\nstderr: {stderr}");
    Run {
        code: output.status.code().unwrap_or(-1),
        stdout,
    }
}

fn lines_starting(text: &str, prefix: &str) -> usize {
    text.lines().filter(|l| l.starts_with(prefix)).count()
}

#[tokio::test]
async fn every_step_of_the_runbook_does_what_it_says() {
    let commands = runbook_commands(RUNBOOK);
    let expected_shapes: [&[&str]; 7] = [
        &["dlq inspect"],
        &["dlq inspect", "--json"],
        &["dlq redrive", "--kind downstream_unavailable", "--dry-run"],
        &["dlq redrive", "--kind downstream_unavailable", "--max 1"],
        &["dlq inspect"],
        &["dlq redrive", "--kind downstream_unavailable", "--max 10"],
        &[
            "dlq redrive",
            "--kind no_context",
            "--window",
            "--to $QUEUE",
        ],
    ];
    assert_eq!(
        commands.len(),
        expected_shapes.len(),
        "the runbook has other steps now: update this test with them\n{commands:#?}"
    );
    for (command, shape) in commands.iter().zip(expected_shapes) {
        for part in shape {
            assert!(
                command.contains(part),
                "{command:?} should contain {part:?}"
            );
        }
    }

    let sqs = sqs().await;
    let now = Timestamp::now();
    let seeded = seed(&sqs, now).await;
    let (dlq, source) = (&seeded.dlq, &seeded.source);
    // And one bad payload older than the consumer's 30-day idempotency window.
    common::dead_letter(
        &sqs,
        dlq,
        vec![record(
            "o-old",
            r#"{"payment_id":"p-0","amount":"ten","fail":"bad_payload"}"#,
            source,
            days_ago(now, 40),
            None,
        )],
    )
    .await;
    let source_name = source.url.rsplit('/').next().expect("name");
    let count = |url: &str| {
        let sqs = sqs.clone();
        let url = url.to_owned();
        async move { visible(&sqs, &url).await.len() }
    };

    // 1. Look: grouped by kind, copies once, the context, nothing consumed.
    let step = run(&commands[0], dlq, source);
    assert_eq!(step.code, 0, "{}", step.stdout);
    for expected in [
        "7 messages, 6 dead letters (1 with more than one copy)",
        "downstream_unavailable (transient): 3",
        "bad_payload (permanent): 2",
        "no_context: 1",
        "  o-dup  2 copies  age 3d (first sent)  attempts 3  consumer charge-payment v1",
        "    correlation id: corr-o-dup",
        "    error: payments API answered 503",
        "    past its idempotency window since ",
        "left in the DLQ: 7 made visible again",
    ] {
        assert!(
            step.stdout.contains(expected),
            "{expected:?} not in\n{}",
            step.stdout
        );
    }
    assert_eq!(count(&dlq.url).await, 7);

    // ... and as JSON.
    let step = run(&commands[1], dlq, source);
    assert_eq!(step.code, 0);
    let json: serde_json::Value = serde_json::from_str(&step.stdout).expect("JSON");
    assert_eq!(
        (json["messages"].as_u64(), json["dead_letters"].as_u64()),
        (Some(7), Some(6))
    );
    assert_eq!(json["kinds"][0]["kind"], "downstream_unavailable");
    assert_eq!(json["kinds"][0]["entries"][0]["copies"], 2);
    assert_eq!(count(&dlq.url).await, 7);

    // 3. Dry run: what would move, nothing touched.
    let step = run(&commands[2], dlq, source);
    assert_eq!(step.code, 0, "{}", step.stdout);
    assert_eq!(
        lines_starting(&step.stdout, "would move "),
        3,
        "{}",
        step.stdout
    );
    assert!(step.stdout.contains(&format!(
        "would move o-dup downstream_unavailable -> {source_name} (2 DLQ copies)"
    )));
    assert!(step.stdout.contains("nothing was sent or deleted"));
    assert_eq!((count(&dlq.url).await, count(&source.url).await), (7, 0));

    // 4. One, sent before deleted: both copies of the oldest gone, one message in the source queue.
    let step = run(&commands[3], dlq, source);
    assert_eq!(step.code, 0, "{}", step.stdout);
    assert_eq!(lines_starting(&step.stdout, "moved "), 1, "{}", step.stdout);
    let moved = visible(&sqs, &source.url).await;
    assert_eq!(moved.len(), 1);
    assert!(step.stdout.contains(&format!(
        "moved o-dup downstream_unavailable -> {source_name} as {} (2 DLQ copies deleted)",
        moved[0].message_id().expect("id")
    )));
    assert_eq!(count(&dlq.url).await, 5);

    // 5. Verify, then the rest of the kind.
    let step = run(&commands[4], dlq, source);
    assert_eq!(step.code, 0);
    assert!(
        step.stdout
            .contains("downstream_unavailable (transient): 2"),
        "{}",
        step.stdout
    );
    assert!(!step.stdout.contains("o-dup"), "{}", step.stdout);
    let step = run(&commands[5], dlq, source);
    assert_eq!(step.code, 0, "{}", step.stdout);
    assert_eq!(lines_starting(&step.stdout, "moved "), 2, "{}", step.stdout);
    assert_eq!((count(&dlq.url).await, count(&source.url).await), (3, 3));

    // 6. The message SQS moved, with the window and queue given.
    let step = run(&commands[6], dlq, source);
    assert_eq!(step.code, 0, "{}", step.stdout);
    assert!(
        step.stdout.contains(&format!(
            "moved {} no_context -> {source_name} as ",
            seeded.moved_id
        )),
        "{}",
        step.stdout
    );
    // Left: the two bad payloads, for the producer's fix.
    assert_eq!((count(&dlq.url).await, count(&source.url).await), (2, 4));
}

#[test]
fn the_extractor_takes_only_commands_between_the_markers() {
    let chapter = "```sh\nsqsafe outside\n```\n<!-- runbook:start -->\n1. Look:\n\n   ```sh\n   # a comment\n   \
                   sqsafe dlq inspect --queue $DLQ\n\n   sqsafe dlq inspect --queue $DLQ --json\n   ```\n\
                   <!-- runbook:end -->\n```sh\nsqsafe after\n```\n";
    assert_eq!(
        runbook_commands(chapter),
        [
            "sqsafe dlq inspect --queue $DLQ",
            "sqsafe dlq inspect --queue $DLQ --json"
        ]
    );
}
