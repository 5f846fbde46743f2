//! Logs never carry message bodies, at any level: at TRACE the AWS SDK (and hyper, rustls under it) would log whole
//! request bodies, and a DLQ send carries the original body. sqsafe's log layer keeps those crates' own targets at
//! INFO or above whatever level is set, unless the user names them. Against moto (`make test` starts it).

mod common;

use common::*;
use sqsafe_batch::{BatchProcessor, Record, RecordError, SqsDeadLetterQueue};

const SECRET: &str = "card-4111111111111111-cvv-737";

/// Dead-letters one record whose body holds the secret, through a real `SendMessage` to moto, then receives the dead
/// letter back as `sqsafe dlq inspect` does (the SDK logs whole response bodies at TRACE), all with sqsafe's log layer
/// at `level`; returns every line written.
async fn dead_letter_at(level: &str) -> String {
    let (logs, _guard) = Logs::capture_at(level);

    let sqs = sqsafe_testkit::sqs().await;
    let dlq = sqsafe_testkit::create_queue(&sqs, "trace-secrets-dlq", false).await;
    let processor = BatchProcessor::builder("trace-secrets", 1)
        .dead_letter_queue(SqsDeadLetterQueue::new(sqs.clone(), &dlq))
        .metrics_output(|_| {})
        .build()
        .expect("processor");
    let handler = |_record: Record| async {
        Err::<sqsafe_batch::Processed, _>(RecordError::permanent("precondition", "refused"))
    };
    let body = format!(r#"{{"payment_id":"p-1","card":"{SECRET}"}}"#);
    let report = processor
        .process(event(vec![message("m-secret", &body)]), None, &handler)
        .await
        .expect("batch");
    assert!(
        matches!(
            report.records[0].disposition,
            sqsafe_batch::Disposition::DeadLettered(_)
        ),
        "{:?}",
        report.records
    );
    let received = sqs
        .receive_message()
        .queue_url(&dlq)
        .max_number_of_messages(1)
        .send()
        .await
        .expect("receive");
    assert!(
        received
            .messages()
            .iter()
            .any(|m| m.body().is_some_and(|b| b.contains(SECRET))),
        "the dead letter keeps its body"
    );
    logs.text()
}

#[tokio::test(flavor = "current_thread")]
async fn at_trace_no_line_carries_a_dead_letters_body() {
    let text = dead_letter_at("trace").await;
    assert!(
        text.lines().count() > 0,
        "the run logged at TRACE (sqsafe's own lines)"
    );
    let leaked: Vec<&str> = text.lines().filter(|l| l.contains(SECRET)).collect();
    assert!(
        leaked.is_empty(),
        "{} lines carry the body, e.g. {}",
        leaked.len(),
        leaked
            .first()
            .map(|l| &l[..l.len().min(400)])
            .unwrap_or_default()
    );
}

/// Naming the SDK's target explicitly is the user's opt-in: its TRACE lines come back (and with them the body).
#[tokio::test(flavor = "current_thread")]
async fn naming_the_sdks_target_opts_in_to_its_trace_lines() {
    let text = dead_letter_at("trace,aws_smithy_runtime=trace").await;
    assert!(
        text.lines()
            .any(|l| l.contains("\"target\":\"aws_smithy_runtime")),
        "aws_smithy_runtime's own lines when named"
    );
}
