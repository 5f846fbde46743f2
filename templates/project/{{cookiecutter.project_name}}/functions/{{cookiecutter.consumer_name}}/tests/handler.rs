//! {{ cookiecutter.consumer_name }} against DynamoDB's and SQS's real APIs (moto server: `make test` starts it) and a fake of the API its
//! effect calls (`FakeDownstream`, on loopback), with its sample event.
//!
//! Each test asserts what its name says from what can be seen outside the handler: the calls the API received (one
//! per intent, each with the intent's `Idempotency-Key`), the table, the DLQ, and each record's disposition.

use std::collections::{BTreeMap, HashMap};

use aws_sdk_dynamodb::types::AttributeValue;
use sqsafe::{Disposition, Env, Processed, Setup};
use sqsafe_local::stack::{LocalStack, StackOptions};
use sqsafe_testkit::{
    FakeDownstream, Reply, dlq_context, event_file, invocation, sdk_config, unique_name,
};

/// Its tables and queues as template.yaml defines them, its environment as the template sets it with `api` as the
/// API it calls (the parameter `{{ cookiecutter.__consumer_pascal }}ApiUrl`); and its DLQ's URL.
async fn setup(api: &FakeDownstream) -> (Setup, String) {
    let aws = sdk_config().await;
    let dynamodb = aws_sdk_dynamodb::Client::new(&aws);
    let sqs = aws_sdk_sqs::Client::new(&aws);
    let options = StackOptions {
        prefix: unique_name("{{ cookiecutter.consumer_name }}"),
        parameters: BTreeMap::from([("{{ cookiecutter.__consumer_pascal }}ApiUrl".to_owned(), api.url())]),
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

/// What the COMPLETED records keep for replay, per intent id.
async fn stored_results(setup: &Setup) -> BTreeMap<String, serde_json::Value> {
    let items = setup
        .dynamodb
        .scan()
        .table_name(&setup.settings.idempotency_table)
        .send()
        .await
        .expect("scan")
        .items
        .unwrap_or_default();
    let text = |item: &HashMap<String, AttributeValue>, name: &str| {
        item.get(name)
            .and_then(|v| v.as_s().ok())
            .cloned()
            .unwrap_or_default()
    };
    items
        .iter()
        .filter(|item| text(item, "status") == "COMPLETED")
        .map(|item| {
            let result: serde_json::Value =
                serde_json::from_str(&text(item, "result")).expect("a stored result");
            (
                result["id"].as_str().expect("the result's id").to_owned(),
                result,
            )
        })
        .collect()
}

/// The intent ids of the sample event, sorted.
fn sample_ids() -> Vec<String> {
    let mut ids: Vec<String> = event_file("{{ cookiecutter.consumer_name }}.json")
        .records
        .iter()
        .map(|r| {
            let body: serde_json::Value =
                serde_json::from_str(r.body.as_deref().expect("a body")).expect("a JSON body");
            body["id"].as_str().expect("id").to_owned()
        })
        .collect();
    ids.sort();
    ids
}

/// Each record's disposition, in the event's order.
fn dispositions(report: &sqsafe::BatchReport) -> Vec<&Disposition> {
    report.records.iter().map(|r| &r.disposition).collect()
}

#[tokio::test]
async fn the_sample_event_calls_the_api_once_per_intent_and_its_redelivery_is_replayed() {
    let api = FakeDownstream::start().await;
    let (setup, _) = setup(&api).await;
    let app = sqsafe::consumer::<{{ cookiecutter.__consumer_snake }}::{{ cookiecutter.__consumer_pascal }}>()
        .build(&setup)
        .expect("consumer");
    let ids = sample_ids();
    assert!(!ids.is_empty(), "the sample event has records");

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
    let calls = api.calls();
    assert_eq!(calls.len(), ids.len(), "one call per intent: {calls:?}");
    assert!(
        calls
            .iter()
            .all(|c| c.idempotency_key.as_deref().is_some_and(|k| !k.is_empty())),
        "every call carries an Idempotency-Key: {calls:?}"
    );
    assert_eq!(
        api.effects().len(),
        ids.len(),
        "a key of its own per intent: {:?}",
        api.effects()
    );
    let stored = stored_results(&setup).await;
    assert_eq!(
        stored.keys().cloned().collect::<Vec<_>>(),
        ids,
        "one completed record per intent"
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
    assert_eq!(
        api.calls().len(),
        ids.len(),
        "the redelivery called the API again: {:?}",
        api.calls()
    );
    assert_eq!(
        stored_results(&setup).await,
        stored,
        "the replay keeps what the first delivery stored"
    );
}

#[tokio::test]
async fn a_503_then_success_is_one_effect_under_one_key() {
    let api = FakeDownstream::start().await;
    api.reply_next(Reply::status(503));
    let (setup, _) = setup(&api).await;
    let app = sqsafe::consumer::<{{ cookiecutter.__consumer_snake }}::{{ cookiecutter.__consumer_pascal }}>()
        .build(&setup)
        .expect("consumer");
    let mut event = event_file("{{ cookiecutter.consumer_name }}.json");
    event.records.truncate(1);

    let first = app
        .handle_report(invocation(event.clone(), "503"))
        .await
        .expect("batch");
    assert_eq!(
        first.response.batch_item_failures.len(),
        1,
        "the 503 brings the record back"
    );
    assert!(
        matches!(dispositions(&first)[..], [Disposition::Retry(_)]),
        "{:?}",
        first.records
    );
    let again = app
        .handle_report(invocation(event, "retry"))
        .await
        .expect("batch");
    assert!(
        matches!(
            dispositions(&again)[..],
            [Disposition::Succeeded(Processed::Applied)]
        ),
        "{:?}",
        again.records
    );
    let calls = api.calls();
    assert_eq!(calls.len(), 2, "the 503 and the retry: {calls:?}");
    assert!(calls[0].idempotency_key.is_some(), "{calls:?}");
    assert_eq!(
        calls[0].idempotency_key, calls[1].idempotency_key,
        "the retry carries the same Idempotency-Key"
    );
    assert_eq!(
        api.effects().values().sum::<usize>(),
        1,
        "one effect: {:?}",
        api.effects()
    );
}

#[tokio::test]
async fn a_bad_body_goes_to_the_dlq_with_its_context_and_calls_nothing() {
    let api = FakeDownstream::start().await;
    let (setup, dlq) = setup(&api).await;
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
    assert!(api.calls().is_empty(), "no call: {:?}", api.calls());
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
