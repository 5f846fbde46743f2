//! FakeDownstream behind sqsafe's idempotency layer (feature honoured-keys), its keys in a table of moto server's:
//! a repeat is the first answer byte for byte, other content 422, a repeat in flight 409, a 5xx releases the key.

use std::time::{Duration, Instant};

use sqsafe_testkit::{
    FakeDownstream, Reply, RequestCounter, create_table, dynamodb, item_string, unique_name,
};

use crate::common::send;

/// The fake on a table of its own; the table's name, to read the records.
async fn honouring() -> (FakeDownstream, aws_sdk_dynamodb::Client, String) {
    let client = dynamodb(&RequestCounter::default()).await;
    let table = unique_name("honoured");
    create_table(&client, &table, "pk", None).await;
    let api = FakeDownstream::start_honouring_keys(client.clone(), table.clone()).await;
    (api, client, table)
}

fn replayed(head: &str) -> bool {
    head.contains("idempotent-replayed: true")
}

#[tokio::test]
async fn a_repeat_is_the_first_answer_and_other_content_is_refused_without_running() {
    let (api, client, table) = honouring().await;
    let key = [("Idempotency-Key", "k-1")];
    api.reply_next(Reply::status(201).json(serde_json::json!({"id": "ch_1"})));
    let first = send(&api, "POST", "/v1/charges", &key, r#"{"amount":5}"#).await;
    assert_eq!(first.0, 201);
    assert!(!replayed(&first.1), "{}", first.1);

    let repeat = send(&api, "POST", "/v1/charges", &key, r#"{"amount":5}"#).await;
    assert_eq!((repeat.0, repeat.2.as_str()), (201, first.2.as_str()));
    assert!(replayed(&repeat.1), "{}", repeat.1);

    let other = send(&api, "POST", "/v1/charges", &key, r#"{"amount":6}"#).await;
    assert_eq!(other.0, 422, "{}", other.2);

    // Every call is listed; the handler ran once, and the record is the layer's, completed.
    assert_eq!(api.calls_for("k-1"), 3);
    assert_eq!(api.effects().get("k-1"), Some(&1));
    let items = client
        .scan()
        .table_name(&table)
        .send()
        .await
        .expect("scan")
        .items
        .unwrap_or_default();
    assert_eq!(items.len(), 1, "{items:?}");
    assert_eq!(item_string(&items[0], "status"), "COMPLETED");
}

#[tokio::test]
async fn a_scripted_5xx_releases_the_key_and_the_retry_runs_with_the_next_reply() {
    let (api, _, _) = honouring().await;
    let key = [("Idempotency-Key", "k-5xx")];
    api.reply_next(Reply::status(503).retry_after_secs(1));
    let (status, _, _) = send(&api, "POST", "/v1/charges", &key, "{}").await;
    assert_eq!(status, 503);
    assert_eq!(api.effects().get("k-5xx"), None);

    let (status, head, body) = send(&api, "POST", "/v1/charges", &key, "{}").await;
    assert_eq!(status, 200);
    assert!(!replayed(&head), "{head}");
    assert_eq!(
        serde_json::from_str::<serde_json::Value>(&body).expect("json"),
        serde_json::json!({"call": 2, "idempotency_key": "k-5xx"})
    );
    assert_eq!(api.effects().get("k-5xx"), Some(&1));
}

#[tokio::test]
async fn a_repeat_while_the_first_runs_gets_409_and_the_handler_runs_once() {
    let (api, _, _) = honouring().await;
    let api = std::sync::Arc::new(api);
    api.reply_next(Reply::status(200).delay(Duration::from_secs(30)));
    let first = tokio::spawn({
        let api = std::sync::Arc::clone(&api);
        async move {
            send(
                &api,
                "POST",
                "/v1/charges",
                &[("Idempotency-Key", "k-busy")],
                "{}",
            )
            .await
        }
    });
    // The effect is counted when the handler starts, after the layer claimed the key.
    let started = Instant::now();
    while !api.effects().contains_key("k-busy") {
        assert!(
            started.elapsed() < Duration::from_secs(10),
            "the first call never reached the handler"
        );
        tokio::task::yield_now().await;
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    let (status, head, _) = send(
        &api,
        "POST",
        "/v1/charges",
        &[("Idempotency-Key", "k-busy")],
        "{}",
    )
    .await;
    assert_eq!(status, 409);
    assert!(head.contains("retry-after:"), "{head}");
    assert_eq!(api.effects().get("k-busy"), Some(&1));
    first.abort();
}

#[tokio::test]
async fn a_call_without_a_key_and_a_get_pass_through_every_time() {
    let (api, _, _) = honouring().await;
    for _ in 0..2 {
        assert_eq!(send(&api, "POST", "/v1/charges", &[], "{}").await.0, 200);
        assert_eq!(
            send(
                &api,
                "GET",
                "/v1/charges",
                &[("Idempotency-Key", "k-get")],
                ""
            )
            .await
            .0,
            200
        );
    }
    assert_eq!(api.effects().get(""), Some(&2));
    assert_eq!(api.effects().get("k-get"), Some(&2));
}
