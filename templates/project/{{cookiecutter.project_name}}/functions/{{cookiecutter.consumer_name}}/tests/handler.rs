//! {{ cookiecutter.consumer_name }} against DynamoDB's and SQS's real APIs (moto server: `make test` starts it), with its sample event.
//!
//! Each test asserts what its name says from what can be seen outside the handler (the table, the DLQ) and from each
//! record's disposition: an empty `batch_item_failures` alone would also pass if every record were dead-lettered.

use std::collections::{BTreeMap, HashMap};

use aws_sdk_dynamodb::types::AttributeValue;
use sqsafe::{Disposition, Env, Processed, Setup};
use sqsafe_local::stack::{LocalStack, StackOptions};
use sqsafe_testkit::{dlq_context, event_file, invocation, sdk_config, unique_name};

/// Its tables and queues as template.yaml defines them, its environment as the template sets it; and its DLQ's URL.
async fn setup() -> (Setup, String) {
    let aws = sdk_config().await;
    let dynamodb = aws_sdk_dynamodb::Client::new(&aws);
    let sqs = aws_sdk_sqs::Client::new(&aws);
    let options = StackOptions {
        prefix: unique_name("{{ cookiecutter.consumer_name }}"),
        ..StackOptions::default()
    };
    let stack = LocalStack::for_function(&sqs, &dynamodb, "{{ cookiecutter.consumer_name }}", options)
        .await
        .expect("the template's resources for {{ cookiecutter.consumer_name }}");
    let dlq = stack
        .dead_letter_queue("{{ cookiecutter.consumer_name }}")
        .expect("DLQ")
        .url
        .clone();
    let env = Env::from_pairs(stack.function_env("{{ cookiecutter.consumer_name }}"));
    (Setup::new(env, aws).expect("setup"), dlq)
}

/// Every item of `table`.
async fn scan(setup: &Setup, table: &str) -> Vec<HashMap<String, AttributeValue>> {
    setup
        .dynamodb
        .scan()
        .table_name(table)
        .send()
        .await
        .expect("scan")
        .items
        .unwrap_or_default()
}

/// The effect as it can be seen from outside: per intent id, the result its COMPLETED record keeps for replay.
async fn effects(setup: &Setup) -> BTreeMap<String, u64> {
    let mut out = BTreeMap::new();
    for item in scan(setup, &setup.settings.idempotency_table).await {
        let text = |name: &str| {
            item.get(name)
                .and_then(|v| v.as_s().ok())
                .cloned()
                .unwrap_or_default()
        };
        if text("status") != "COMPLETED" {
            continue;
        }
        let result: serde_json::Value =
            serde_json::from_str(&text("result")).expect("a stored result");
        let id = result["id"].as_str().expect("the result's id").to_owned();
        *out.entry(id).or_default() += 1;
    }
    out
}

/// The intents of the sample event: (id, amount) of each record's body.
fn sample_intents() -> BTreeMap<String, u64> {
    event_file("{{ cookiecutter.consumer_name }}.json")
        .records
        .iter()
        .map(|r| {
            let body: serde_json::Value =
                serde_json::from_str(r.body.as_deref().expect("a body")).expect("a JSON body");
            let id = body["id"].as_str().expect("id").to_owned();
            (id, body["amount"].as_u64().expect("amount"))
        })
        .collect()
}

/// Each record's disposition, in the event's order.
fn dispositions(report: &sqsafe::BatchReport) -> Vec<&Disposition> {
    report.records.iter().map(|r| &r.disposition).collect()
}

#[tokio::test]
async fn the_sample_event_applies_once_and_its_redelivery_is_replayed() {
    let (setup, _) = setup().await;
    let app = sqsafe::consumer::<{{ cookiecutter.__consumer_snake }}::{{ cookiecutter.__consumer_pascal }}>()
        .build(&setup)
        .expect("consumer");
    let intents = sample_intents();
    assert!(!intents.is_empty(), "the sample event has records");

    let first = app
        .handle_report(invocation(event_file("{{ cookiecutter.consumer_name }}.json"), "first"))
        .await
        .expect("batch");
    assert!(
        first.response.batch_item_failures.is_empty(),
        "{:?}",
        first.response
    );
    for d in dispositions(&first) {
        assert!(
            matches!(d, Disposition::Succeeded(Processed::Applied)),
            "first delivery: {d:?}"
        );
    }
    let applied = effects(&setup).await;
    assert_eq!(
        applied.keys().collect::<Vec<_>>(),
        intents.keys().collect::<Vec<_>>(),
        "one effect per intent of the sample"
    );

    let again = app
        .handle_report(invocation(event_file("{{ cookiecutter.consumer_name }}.json"), "redelivery"))
        .await
        .expect("batch");
    assert!(
        again.response.batch_item_failures.is_empty(),
        "{:?}",
        again.response
    );
    for d in dispositions(&again) {
        assert!(
            matches!(d, Disposition::Succeeded(Processed::Replayed)),
            "redelivery: {d:?}"
        );
    }
    assert_eq!(effects(&setup).await, applied, "no second effect");
}

#[tokio::test]
async fn a_bad_body_goes_to_the_dlq_with_its_context() {
    let (setup, dlq) = setup().await;
    let app = sqsafe::consumer::<{{ cookiecutter.__consumer_snake }}::{{ cookiecutter.__consumer_pascal }}>()
        .build(&setup)
        .expect("consumer");
    let mut event = event_file("{{ cookiecutter.consumer_name }}.json");
    event.records.truncate(1);
    let message_id = event.records[0].message_id.clone().expect("a message id");
    let body = r#"{"version":"1","tenant":"acme","id":"x","amount":"lots"}"#;
    event.records[0].body = Some(body.to_owned());
    let report = app
        .handle_report(invocation(event, "bad"))
        .await
        .expect("batch");
    assert!(
        report.response.batch_item_failures.is_empty(),
        "dead-lettered, not retried"
    );
    assert!(
        matches!(dispositions(&report)[..], [Disposition::DeadLettered(_)]),
        "{:?}",
        report.records
    );
    assert!(effects(&setup).await.is_empty(), "no effect");
    let received = setup
        .sqs
        .receive_message()
        .queue_url(&dlq)
        .message_attribute_names("All")
        .send()
        .await
        .expect("receive");
    let [letter] = received.messages() else {
        panic!("one dead letter: {:?}", received.messages());
    };
    assert_eq!(letter.body(), Some(body), "the original body");
    assert_eq!(
        dlq_context(letter, "error_kind").as_deref(),
        Some("bad_payload")
    );
    assert_eq!(
        dlq_context(letter, "original_message_id").as_deref(),
        Some(message_id.as_str())
    );
    assert_eq!(
        dlq_context(letter, "consumer").as_deref(),
        Some("{{ cookiecutter.consumer_name }}")
    );
}
