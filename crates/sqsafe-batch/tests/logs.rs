//! What the batch logs, read back from the JSON lines `sqsafe_telemetry` writes: never a body value, the
//! idempotency key on every line of a record, the correlation id on held-back records, lost leases as errors.

mod common;

use common::*;
use serde::Deserialize;
use sqsafe_batch::{BatchProcessor, Processed, Record, RecordError};
use sqsafe_idempotency::{Idempotency, InMemoryStore, KeyBuilder};
use sqsafe_telemetry::Metric;
use tracing::Instrument;

const SECRET: &str = "4111-1111-1111-1111";

#[derive(Debug, Deserialize)]
#[allow(dead_code)]
struct Payment {
    payment_id: String,
    amount: u64,
}

async fn parse_only(record: Record) -> Result<Processed, RecordError> {
    let _payment: Payment = record.parse()?;
    Ok(Processed::Applied)
}

#[tokio::test]
async fn a_mistyped_value_reaches_neither_the_logs_nor_the_dlq_context() {
    let (logs, _guard) = Logs::capture();
    let dlq = RecordingDlq::default();
    let processor = BatchProcessor::builder("c", 1)
        .dead_letter_queue(dlq.clone())
        .build()
        .expect("config");
    let body = format!(r#"{{"payment_id":"p-1","amount":"{SECRET}"}}"#);
    let no_dlq = BatchProcessor::builder("c", 1).build().expect("config");
    for p in [&processor, &no_dlq] {
        p.process(event(vec![message("m1", &body)]), None, &parse_only)
            .await
            .expect("batch");
    }

    let text = logs.text();
    assert!(text.contains("record failed"), "{text}");
    assert!(
        !text.contains(SECRET),
        "the value leaked into the logs: {text}"
    );
    let failures: Vec<_> = logs
        .lines()
        .into_iter()
        .filter(|l| l["message"] == "record failed")
        .collect();
    assert_eq!(failures.len(), 2, "dead-lettered once, reported once");
    for line in failures {
        let error = line["error"].as_str().expect("error field");
        assert!(
            error.contains("`amount`") && error.contains("expected u64"),
            "names the path and the type: {error}"
        );
    }
    let sent = dlq.sent.lock().expect("lock");
    let failure = &sent[0].1;
    assert_eq!(failure.error_kind, RecordError::BAD_PAYLOAD);
    assert!(!failure.error_message.contains(SECRET));
    assert!(failure.error_message.contains("`amount`"));
}

#[tokio::test]
async fn bodies_that_are_not_json_or_absent_do_not_leak_either() {
    let (logs, _guard) = Logs::capture();
    let processor = BatchProcessor::builder("c", 1).build().expect("config");
    let mut no_body = message("m3", "");
    no_body.body = None;
    let report = processor
        .process(
            event(vec![
                message(
                    "m1",
                    &format!(r#"{{"payment_id":"p-1","amount":{SECRET}}}"#),
                ),
                message("m2", &format!("{SECRET} trailing")),
                no_body,
            ]),
            None,
            &parse_only,
        )
        .await
        .expect("batch");
    assert_eq!(report.response.batch_item_failures.len(), 3);
    let text = logs.text();
    assert!(!text.contains("4111"), "{text}");
    assert!(text.contains("not valid JSON") && text.contains("missing_body"));
}

#[tokio::test]
async fn the_idempotency_key_is_on_every_line_of_the_record_even_inside_a_handler_span() {
    let (logs, _guard) = Logs::capture();
    let idem = Idempotency::builder(InMemoryStore::new(), "c", 1)
        .build()
        .expect("idempotency");
    let processor = BatchProcessor::builder("c", 1).build().expect("config");
    let handler = |record: Record| {
        let idem = &idem;
        async move {
            let payment: Payment = record.parse()?;
            let key = KeyBuilder::new("c", 1)
                .intent("payment", &payment.payment_id)
                .build()?;
            let span = tracing::info_span!("charge", payment_id = %payment.payment_id);
            async {
                let (processed, _) = record
                    .run_idempotent(idem, key, &payment.payment_id, || async {
                        tracing::info!("calling the payments API");
                        Err::<(), _>(RecordError::transient("downstream_5xx", "503"))
                    })
                    .await?;
                Ok(processed)
            }
            .instrument(span)
            .await
        }
    };
    processor
        .process(
            event(vec![message("m1", r#"{"payment_id":"p-1","amount":5}"#)]),
            None,
            &handler,
        )
        .await
        .expect("batch");

    let lines = logs.lines();
    let record_lines: Vec<_> = lines.iter().filter(|l| in_record(l).is_some()).collect();
    assert!(
        record_lines
            .iter()
            .any(|l| l["message"] == "calling the payments API")
            && record_lines.iter().any(|l| l["message"] == "record failed"),
        "{}",
        logs.text()
    );
    let expected = KeyBuilder::new("c", 1)
        .intent("payment", "p-1")
        .build()
        .expect("key");
    for line in record_lines {
        let record = in_record(line).expect("record span");
        assert_eq!(
            record["idempotency_key"].as_str(),
            Some(expected.as_str()),
            "{line}"
        );
    }
}

#[tokio::test]
async fn record_idempotency_key_serves_handlers_that_build_their_own_request() {
    let (logs, _guard) = Logs::capture();
    let processor = BatchProcessor::builder("c", 1).build().expect("config");
    let key = KeyBuilder::new("c", 1)
        .intent("payment", "p-9")
        .build()
        .expect("key");
    let handler = |record: Record| {
        let key = key.clone();
        async move {
            async {
                record.record_idempotency_key(&key);
                tracing::info!("claimed by hand");
            }
            .instrument(tracing::info_span!("own"))
            .await;
            Ok(Processed::Applied)
        }
    };
    processor
        .process(event(vec![message("m1", "{}")]), None, &handler)
        .await
        .expect("batch");
    let lines = logs.lines();
    let line = lines
        .iter()
        .find(|l| l["message"] == "claimed by hand")
        .expect("logged");
    assert_eq!(
        in_record(line).expect("record span")["idempotency_key"],
        key.as_str()
    );
}

#[tokio::test]
async fn a_held_back_record_is_logged_with_its_correlation_id_and_counted() {
    let (logs, _guard) = Logs::capture();
    let processor = BatchProcessor::builder("c", 1).build().expect("config");
    let handler = |record: Record| async move {
        match record.message_id() {
            "head" => Err(RecordError::transient("downstream_5xx", "503")),
            _ => Ok(Processed::Applied),
        }
    };
    let report = processor
        .process(
            event(vec![
                in_group(message("head", "{}"), "g"),
                with_attribute(
                    in_group(message("next", "{}"), "g"),
                    "correlationId",
                    "corr-next",
                ),
            ]),
            None,
            &handler,
        )
        .await
        .expect("batch");
    assert_eq!(report.response.batch_item_failures.len(), 2);
    assert_eq!(report.metrics.get(Metric::HeldBack), 1);
    let lines = logs.lines();
    let held = lines
        .iter()
        .find(|l| l["disposition"] == "held_back")
        .expect("a held-back line");
    let record = in_record(held).expect("inside the record's span");
    assert_eq!(record["message_id"], "next");
    assert_eq!(record["correlation_id"], "corr-next");
    assert_eq!(record["group_id"], "g");
    assert_eq!(held["blocked_by"], "head");
}

#[tokio::test]
async fn a_lost_lease_is_counted_and_logged_as_an_error_that_names_clock_skew() {
    let (logs, _guard) = Logs::capture();
    let processor = BatchProcessor::builder("c", 1).build().expect("config");
    let handler = |_record: Record| async move {
        Err::<Processed, _>(RecordError::transient(
            RecordError::LEASE_LOST,
            "lost the claim on idempotency key `k`",
        ))
    };
    let report = processor
        .process(event(vec![message("m1", "{}")]), None, &handler)
        .await
        .expect("batch");
    assert_eq!(report.metrics.get(Metric::LeaseLost), 1);
    assert_eq!(report.metrics.get(Metric::FailedTransient), 1);
    let lines = logs.lines();
    let line = lines
        .iter()
        .find(|l| l["error_kind"] == "lease_lost")
        .expect("logged");
    assert_eq!(line["level"], "ERROR");
    assert!(
        line["message"]
            .as_str()
            .is_some_and(|m| m.contains("clocks that disagree")),
        "{line}"
    );
}

#[tokio::test]
async fn a_fifo_batch_larger_than_the_queues_receive_count_allows_is_warned_about_once_per_size() {
    let (logs, _guard) = Logs::capture();
    let processor = BatchProcessor::builder("c", 1)
        .max_attempts(5)
        .visibility(RecordingVisibility {
            max_receive: Some(5),
            ..RecordingVisibility::default()
        })
        .build()
        .expect("config");
    let ok = |_record: Record| async move { Ok(Processed::Applied) };
    let batch = |n: usize| {
        event(
            (0..n)
                .map(|i| in_group(message(&format!("m{i}"), "{}"), "g"))
                .collect(),
        )
    };
    for size in [1, 3, 3, 2, 4] {
        processor
            .process(batch(size), None, &ok)
            .await
            .expect("batch");
    }
    let warnings: Vec<(u64, u64)> = logs
        .lines()
        .iter()
        .filter(|l| l["max_receive_count"] == 5)
        .map(|l| {
            (
                l["batch_size"].as_u64().unwrap_or_default(),
                l["needed"].as_u64().unwrap_or_default(),
            )
        })
        .collect();
    // A batch of 1 needs nothing; 3 records x (5 - 1) + 1 = 13 > 5, said once; 4 records: 17, said once more.
    assert_eq!(warnings, [(3, 13), (4, 17)]);
    let line = logs.text();
    assert!(
        line.contains("maxReceiveCount (5) should be at least 13"),
        "{line}"
    );
}

/// Every line of a record carries its producer's trace id: SQS's `AWSTraceHeader` (X-Ray) in W3C form, or a
/// `traceparent` message attribute, which wins.
#[tokio::test]
async fn each_records_lines_carry_its_producers_trace_id() {
    let (logs, _guard) = Logs::capture();
    let processor = BatchProcessor::builder("c", 1).build().expect("config");
    let mut xray = message("m-xray", r#"{"payment_id":"p-1","amount":1}"#);
    xray.attributes.insert(
        "AWSTraceHeader".to_owned(),
        "Root=1-5759e988-bd862e3fe1be46a994272793;Parent=53995c3f42cd8ad8;Sampled=1".to_owned(),
    );
    let mut w3c = message("m-w3c", r#"{"payment_id":"p-2","amount":2}"#);
    w3c.attributes.insert(
        "AWSTraceHeader".to_owned(),
        "Root=1-5759e988-bd862e3fe1be46a994272793".to_owned(),
    );
    let mut attribute = aws_lambda_events::sqs::SqsMessageAttribute::default();
    attribute.data_type = Some("String".to_owned());
    attribute.string_value =
        Some("00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01".to_owned());
    w3c.message_attributes
        .insert("traceparent".to_owned(), attribute);
    let plain = message("m-plain", r#"{"payment_id":"p-3","amount":3}"#);
    let handler = |record: Record| async move {
        tracing::info!(message_id = record.message_id(), "handled");
        Ok::<_, RecordError>(Processed::Applied)
    };
    processor
        .process(event(vec![xray, w3c, plain]), None, &handler)
        .await
        .expect("batch");
    let trace_of = |id: &str| {
        logs.lines()
            .into_iter()
            .find(|l| l["message"] == "handled" && l["message_id"] == id)
            .map(|l| l.get("producer_trace_id").cloned())
            .expect("its line")
    };
    assert_eq!(
        trace_of("m-xray"),
        Some("5759e988bd862e3fe1be46a994272793".into())
    );
    assert_eq!(
        trace_of("m-w3c"),
        Some("0af7651916cd43dd8448eb211c80319c".into())
    );
    assert_eq!(trace_of("m-plain"), None);
}
