//! FakeDownstream answers as scripted, records what it got and counts effects per key.

use std::time::{Duration, Instant};

use sqsafe_testkit::{Call, FakeDownstream, Reply};

use crate::common::send;

#[tokio::test]
async fn the_default_reply_counts_calls_and_echoes_the_key() {
    let api = FakeDownstream::start().await;
    let (status, head, body) = send(
        &api,
        "POST",
        "/v1/charges?x=1",
        &[("Idempotency-Key", "k-1"), ("x-correlation-id", "c-1")],
        r#"{"a":1}"#,
    )
    .await;
    assert_eq!(status, 200);
    assert!(head.contains("content-type: application/json"), "{head}");
    assert_eq!(
        serde_json::from_str::<serde_json::Value>(&body).expect("json"),
        serde_json::json!({"call": 1, "idempotency_key": "k-1"})
    );
    let (_, _, body) = send(&api, "PUT", "/other", &[], "").await;
    assert_eq!(
        serde_json::from_str::<serde_json::Value>(&body).expect("json"),
        serde_json::json!({"call": 2, "idempotency_key": null})
    );
    // Every header is kept too (the key's among them); the rest of each call compared whole.
    let calls: Vec<Call> = api
        .calls()
        .into_iter()
        .map(|mut call| {
            assert_eq!(
                call.headers.get("idempotency-key"),
                call.idempotency_key.as_ref()
            );
            assert!(call.headers.contains_key("host"), "{:?}", call.headers);
            call.headers.clear();
            call
        })
        .collect();
    assert_eq!(
        calls,
        vec![
            Call {
                method: "POST".into(),
                path: "/v1/charges?x=1".into(),
                idempotency_key: Some("k-1".into()),
                correlation_id: Some("c-1".into()),
                body: r#"{"a":1}"#.into(),
                headers: Default::default(),
            },
            Call {
                method: "PUT".into(),
                path: "/other".into(),
                idempotency_key: None,
                correlation_id: None,
                body: String::new(),
                headers: Default::default(),
            },
        ]
    );
    assert_eq!(api.calls_for("k-1"), 1);
    assert_eq!(api.calls_for("k-2"), 0);
    assert_eq!(
        api.effects().into_iter().collect::<Vec<_>>(),
        vec![(String::new(), 1), ("k-1".to_owned(), 1)]
    );
}

#[tokio::test]
async fn scripted_replies_answer_in_order_then_the_default_and_only_2xx_count_as_effects() {
    let api = FakeDownstream::start().await;
    api.reply_next(Reply::status(503).retry_after_secs(1));
    api.reply_next(Reply::status(201).json(serde_json::json!({"id": "ch_1"})));
    api.reply_next(Reply::status(422).body("not json").header("x-extra", "yes"));
    let key = [("Idempotency-Key", "k")];
    let (status, head, _) = send(&api, "POST", "/", &key, "").await;
    assert_eq!(status, 503);
    assert!(head.contains("retry-after: 1"), "{head}");
    let (status, _, body) = send(&api, "POST", "/", &key, "").await;
    assert_eq!((status, body.as_str()), (201, r#"{"id":"ch_1"}"#));
    let (status, head, body) = send(&api, "POST", "/", &key, "").await;
    assert_eq!((status, body.as_str()), (422, "not json"));
    assert!(head.contains("x-extra: yes"), "{head}");
    let (status, _, body) = send(&api, "POST", "/", &key, "").await;
    assert_eq!(status, 200);
    assert!(body.contains(r#""call":4"#), "{body}");
    assert_eq!(api.calls_for("k"), 4);
    assert_eq!(
        api.effects().get("k"),
        Some(&2),
        "the 201 and the default 200"
    );
}

#[tokio::test]
async fn a_delayed_reply_waits_and_its_effect_counts_on_arrival() {
    let api = FakeDownstream::start().await;
    api.reply_next(
        Reply::status(200)
            .retry_after("Wed, 21 Oct 2015 07:28:00 GMT")
            .delay(Duration::from_millis(100)),
    );
    let started = Instant::now();
    let (status, head, _) = send(&api, "POST", "/", &[("Idempotency-Key", "k")], "").await;
    assert_eq!(status, 200);
    assert!(started.elapsed() >= Duration::from_millis(100));
    assert!(
        head.contains("retry-after: wed, 21 oct 2015 07:28:00 gmt"),
        "{head}"
    );
    assert_eq!(api.effects().get("k"), Some(&1));
}

#[test]
#[should_panic(expected = "not an HTTP status")]
fn a_status_that_is_not_one_is_refused_when_scripted() {
    let _ = Reply::status(1000);
}

#[test]
#[should_panic(expected = "not a valid HTTP header")]
fn a_header_that_is_not_one_is_refused_when_scripted() {
    let _ = Reply::status(200).header("bad name", "v");
}
