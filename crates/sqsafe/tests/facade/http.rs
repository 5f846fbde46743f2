//! sqsafe::http through a consumer, against a local fake API (sqsafe_testkit::FakeDownstream) and DynamoDB's and
//! SQS's real APIs (moto server, started by `make test`): each row of the status mapping, the headers, the time
//! bounds.

use std::time::{Duration, SystemTime};

use aws_lambda_events::sqs::{SqsEvent, SqsMessage, SqsMessageAttribute};
use serde::{Deserialize, Serialize};
use sqsafe::http::HttpClient;
use sqsafe::layers::batch::ErrorClass;
use sqsafe::{
    Consumer, Context, Disposition, Effect, Env, Intent, Processed, RecordError, Setup,
    TraceContext,
};
use sqsafe_testkit::{
    FakeDownstream, Reply, create_queue, create_table, invocation, sdk_config, unique_name,
};

#[derive(Deserialize)]
struct Order {
    tenant: String,
    id: String,
}

/// What the consumer keeps: the answer, and what its context said (to compare with what the API received).
#[derive(Debug, Serialize, Deserialize)]
struct Sent {
    status: u16,
    answer: serde_json::Value,
    downstream_key: String,
    correlation_id: String,
}

struct Caller {
    api: HttpClient,
}

impl Consumer for Caller {
    const NAME: &'static str = "caller";
    const EFFECT_VERSION: u32 = 1;
    const INTENT_FIELDS: &'static [&'static str] = &["/tenant", "/id"];
    type Payload = Order;
    type Output = Sent;

    fn new(setup: &Setup) -> Result<Self, sqsafe::Error> {
        let env = &setup.env;
        let api = HttpClient::builder(env.url("ORDERS_API_URL")?)
            .name("orders API")
            .timeout(env.millis("ORDERS_TIMEOUT_MS", 5000, 1..=60_000)?)
            .max_body_bytes(env.number("ORDERS_MAX_BODY_BYTES", 64 * 1024, 1..=1 << 20)?)
            .deadline_reserve(env.millis("ORDERS_RESERVE_MS", 2000, 0..=600_000)?);
        let api = match env.get("ORDERS_KEY_HEADER") {
            Some(header) => api.idempotency_header(header),
            None => api,
        }
        .build()?;
        Ok(Self { api })
    }

    fn intent(o: &Order) -> Intent {
        Intent::new(&o.tenant, "order", &o.id)
    }

    fn effect<'a>(
        &'a self,
        o: Order,
        cx: &'a Context<'a>,
    ) -> Result<Effect<'a, Sent>, RecordError> {
        Ok(Effect::call(async move {
            let body = serde_json::json!({ "order": o.id });
            let response = self.api.post_json("/v1/orders", &body, cx).await?;
            Ok(Sent {
                status: response.status(),
                answer: response.json()?,
                downstream_key: cx.downstream_key(),
                correlation_id: cx.correlation_id().as_str().to_owned(),
            })
        }))
    }
}

struct Fixture {
    api: FakeDownstream,
    aws: aws_config::SdkConfig,
    env: Vec<(String, String)>,
}

async fn fixture() -> Fixture {
    fixture_with(false).await
}

/// The same, the API behind sqsafe's idempotency layer on a table of its own: it honours the key.
async fn fixture_honouring() -> Fixture {
    fixture_with(true).await
}

async fn fixture_with(honouring: bool) -> Fixture {
    let aws = sdk_config().await;
    let dynamodb = aws_sdk_dynamodb::Client::new(&aws);
    let api = if honouring {
        let keys = unique_name("http-api-keys");
        create_table(&dynamodb, &keys, "pk", None).await;
        FakeDownstream::start_honouring_keys(dynamodb.clone(), keys).await
    } else {
        FakeDownstream::start().await
    };
    let sqs = aws_sdk_sqs::Client::new(&aws);
    let table = unique_name("http");
    create_table(&dynamodb, &table, "pk", None).await;
    let dlq = create_queue(&sqs, "http-dlq", false).await;
    let queue = create_queue(&sqs, "http", false).await;
    let env = vec![
        ("IDEMPOTENCY_TABLE".to_owned(), table),
        ("DLQ_URL".to_owned(), dlq),
        ("QUEUE_URL".to_owned(), queue),
        ("ORDERS_API_URL".to_owned(), api.url()),
    ];
    Fixture { api, aws, env }
}

impl Fixture {
    /// The consumer, its client built with `settings` over the fixture's environment.
    fn app(&self, settings: &[(&str, &str)]) -> sqsafe::App<Caller> {
        let pairs = self.env.iter().cloned().chain(
            settings
                .iter()
                .map(|(k, v)| ((*k).to_owned(), (*v).to_owned())),
        );
        let setup = Setup::new(Env::from_pairs(pairs), self.aws.clone()).expect("setup");
        sqsafe::consumer::<Caller>()
            .build(&setup)
            .expect("consumer")
    }

    /// One order (a new intent) through the consumer built with `settings`.
    async fn run(&self, settings: &[(&str, &str)]) -> Disposition {
        self.run_order(settings, &unique_name("o")).await
    }

    async fn run_order(&self, settings: &[(&str, &str)], order: &str) -> Disposition {
        let mut message = SqsMessage::default();
        message.message_id = Some(unique_name("m"));
        message.body = Some(format!(r#"{{"tenant":"acme","id":"{order}"}}"#));
        message.event_source_arn = Some("arn:aws:sqs:us-east-1:123456789012:http".to_owned());
        message
            .attributes
            .insert("ApproximateReceiveCount".into(), "1".into());
        let mut event = SqsEvent::default();
        event.records = vec![message];
        let mut report = self
            .app(settings)
            .handle_report(invocation(event, "req-http"))
            .await
            .expect("batch");
        assert_eq!(report.records.len(), 1);
        report.records.remove(0).disposition
    }
}

fn retried(disposition: Disposition) -> RecordError {
    match disposition {
        Disposition::Retry(e) => e,
        other => panic!("expected a retry, got {other:?}"),
    }
}

fn dead_lettered(disposition: Disposition) -> RecordError {
    match disposition {
        Disposition::DeadLettered(e) => e,
        other => panic!("expected a dead letter, got {other:?}"),
    }
}

#[tokio::test]
async fn a_2xx_is_the_effect_and_its_body_reads_as_json() {
    let fx = fixture().await;
    fx.api
        .reply_next(Reply::status(201).json(serde_json::json!({"id": "ord_1"})));
    assert!(matches!(
        fx.run(&[]).await,
        Disposition::Succeeded(Processed::Applied)
    ));
    let calls = fx.api.calls();
    assert_eq!(calls.len(), 1);
    let call = &calls[0];
    assert_eq!(
        (call.method.as_str(), call.path.as_str()),
        ("POST", "/v1/orders")
    );
    assert!(call.body.starts_with(r#"{"order":"o-"#), "{}", call.body);
    let key = call.idempotency_key.clone().expect("Idempotency-Key");
    assert_eq!(fx.api.calls_for(&key), 1);
    assert_eq!(fx.api.effects().get(&key), Some(&1));
}

#[tokio::test]
async fn the_headers_sent_are_the_intents_downstream_key_and_the_records_correlation_id() {
    let fx = fixture().await;
    let mut message = SqsMessage::default();
    message.message_id = Some(unique_name("m"));
    message.body = Some(r#"{"tenant":"acme","id":"o-headers"}"#.to_owned());
    message.event_source_arn = Some("arn:aws:sqs:us-east-1:123456789012:http".to_owned());
    let mut event = SqsEvent::default();
    event.records = vec![message];
    let report = fx
        .app(&[])
        .handle_report(invocation(event, "req-headers"))
        .await
        .expect("batch");
    assert!(matches!(
        report.records[0].disposition,
        Disposition::Succeeded(Processed::Applied)
    ));
    let call = &fx.api.calls()[0];
    let expected = sqsafe::layers::idempotency::KeyBuilder::new("caller", 1)
        .tenant("acme")
        .intent("order", "o-headers")
        .build()
        .expect("key")
        .downstream_key();
    assert_eq!(call.idempotency_key.as_deref(), Some(expected.as_str()));
    let correlation = call.correlation_id.clone().expect("x-correlation-id");
    assert!(!correlation.is_empty());
    // The message carried no trace context: the call starts one (a valid traceparent, sampled).
    let traceparent = call.headers.get("traceparent").expect("traceparent");
    let started = TraceContext::from_traceparent(traceparent).expect("a W3C traceparent");
    assert_eq!(started.sampled(), Some(true), "{traceparent}");
    // The consumer kept what its context said: the same key and correlation id as were sent.
    let table = &fx.env[0].1;
    let dynamodb = aws_sdk_dynamodb::Client::new(&fx.aws);
    let items = dynamodb
        .scan()
        .table_name(table)
        .send()
        .await
        .expect("scan");
    let stored = format!("{:?}", items.items());
    assert!(
        stored.contains(&expected) && stored.contains(&correlation),
        "{stored}"
    );
}

/// The producer's trace goes on to the API: the call's `traceparent` has the producer's trace id and its
/// sampling, and a parent of its own (the consumer's span, not the producer's).
#[tokio::test]
async fn the_call_carries_the_producers_trace_on() {
    let fx = fixture().await;
    let producer = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-00";
    let mut message = SqsMessage::default();
    message.message_id = Some(unique_name("m"));
    message.body = Some(r#"{"tenant":"acme","id":"o-traced"}"#.to_owned());
    message.event_source_arn = Some("arn:aws:sqs:us-east-1:123456789012:http".to_owned());
    let mut attribute = SqsMessageAttribute::default();
    attribute.string_value = Some(producer.to_owned());
    attribute.data_type = Some("String".to_owned());
    message
        .message_attributes
        .insert("traceparent".to_owned(), attribute);
    let mut event = SqsEvent::default();
    event.records = vec![message];
    fx.app(&[])
        .handle_report(invocation(event, "req-traced"))
        .await
        .expect("batch");
    let call = &fx.api.calls()[0];
    let sent = call.headers.get("traceparent").expect("traceparent");
    let sent = TraceContext::from_traceparent(sent).expect("a W3C traceparent");
    assert_eq!(sent.trace_id(), "4bf92f3577b34da6a3ce929d0e0e4736");
    assert_eq!(
        sent.sampled(),
        Some(false),
        "the producer's sampling decision"
    );
    assert_ne!(
        sent.parent_id(),
        Some("00f067aa0ba902b7"),
        "a span of the consumer"
    );
}

#[tokio::test]
async fn transient_statuses_come_back_honouring_retry_after_in_seconds() {
    let fx = fixture().await;
    for status in [408, 425, 429, 500, 503] {
        fx.api
            .reply_next(Reply::status(status).retry_after_secs(120));
        let before = SystemTime::now();
        let err = retried(fx.run(&[]).await);
        assert_eq!(
            (err.kind(), err.class()),
            ("downstream_unavailable", ErrorClass::Transient),
            "{status}"
        );
        let at = err.retry_not_before().expect("Retry-After honoured");
        assert!(
            at >= before + Duration::from_secs(119)
                && at <= SystemTime::now() + Duration::from_secs(121),
            "{status}: {at:?}"
        );
        assert!(
            err.message()
                .starts_with(&format!("orders API answered {status}")),
            "{}",
            err.message()
        );
    }
    assert!(fx.api.effects().is_empty(), "no 2xx, no effect");
}

#[tokio::test]
async fn retry_after_as_an_http_date_is_honoured() {
    let fx = fixture().await;
    let later = SystemTime::now() + Duration::from_secs(300);
    fx.api
        .reply_next(Reply::status(503).retry_after(httpdate::fmt_http_date(later)));
    let err = retried(fx.run(&[]).await);
    let at = err.retry_not_before().expect("Retry-After honoured");
    assert!(
        at > later - Duration::from_secs(2) && at <= later,
        "{at:?} against {later:?}"
    );
    // Without the header: the record's own backoff.
    fx.api.reply_next(Reply::status(503));
    assert_eq!(retried(fx.run(&[]).await).retry_not_before(), None);
}

#[tokio::test]
async fn a_409_is_the_same_key_in_flight_and_comes_back() {
    let fx = fixture().await;
    fx.api.reply_next(
        Reply::status(409)
            .json(serde_json::json!({"error": "request_in_progress"}))
            .retry_after_secs(5),
    );
    let err = retried(fx.run(&[]).await);
    assert_eq!(
        (err.kind(), err.class()),
        ("downstream_in_flight", ErrorClass::Transient)
    );
    assert_eq!(
        err.message(),
        "orders API answered 409 Conflict (error code request_in_progress)"
    );
    assert!(err.retry_not_before().is_some());
}

#[tokio::test]
async fn a_422_is_the_key_reused_and_is_dead_lettered() {
    let fx = fixture().await;
    fx.api.reply_next(
        Reply::status(422).json(serde_json::json!({"error": "idempotency_key_reused"})),
    );
    let err = dead_lettered(fx.run(&[]).await);
    assert_eq!(
        (err.kind(), err.class()),
        ("downstream_key_reused", ErrorClass::Permanent)
    );
}

#[tokio::test]
async fn other_4xx_are_rejections_and_never_quote_the_answer() {
    let fx = fixture().await;
    for status in [400, 404] {
        fx.api.reply_next(Reply::status(status).json(
            serde_json::json!({"error": "invalid_order", "message": "card 4111111111111111 refused"}),
        ));
        let err = dead_lettered(fx.run(&[]).await);
        assert_eq!(
            (err.kind(), err.class()),
            ("downstream_rejected", ErrorClass::Permanent),
            "{status}"
        );
        assert!(
            err.message().ends_with("(error code invalid_order)"),
            "{}",
            err.message()
        );
        assert!(!err.to_string().contains("4111"), "{err}");
    }
}

#[tokio::test]
async fn an_answer_later_than_the_timeout_is_a_transient_timeout() {
    let fx = fixture().await;
    fx.api
        .reply_next(Reply::status(200).delay(Duration::from_secs(2)));
    let err = retried(fx.run(&[("ORDERS_TIMEOUT_MS", "200")]).await);
    assert_eq!(
        (err.kind(), err.class()),
        ("downstream_timeout", ErrorClass::Transient)
    );
    assert_eq!(err.message(), "orders API did not answer within 200 ms");
    // The API did the work; the retry carries the same key and gets the API's replay.
    assert_eq!(fx.api.effects().values().sum::<usize>(), 1);
}

/// Against an API that honours the key (the fake behind sqsafe's layer): the call that timed out goes on there; its
/// retries get `409` while it runs (or time out themselves on a loaded machine), then its own answer replayed. One
/// charge, and the consumer keeps the first answer.
#[tokio::test]
async fn a_timed_out_call_is_answered_on_retry_by_an_honouring_api_with_its_first_answer() {
    let fx = fixture_honouring().await;
    fx.api.reply_next(
        Reply::status(201)
            .json(serde_json::json!({"id": "ord_1"}))
            .delay(Duration::from_secs(2)),
    );
    let (order, settings) = (unique_name("o"), [("ORDERS_TIMEOUT_MS", "200")]);
    let err = retried(fx.run_order(&settings, &order).await);
    assert_eq!(err.kind(), "downstream_timeout");
    let started = std::time::Instant::now();
    loop {
        match fx.run_order(&settings, &order).await {
            Disposition::Succeeded(Processed::Applied) => break,
            // A retry answered 409 while the first call runs there, or one that itself outlived the 200 ms on a
            // loaded machine (the layer's claim on moto is slower than that there): both come back.
            Disposition::Retry(e)
                if matches!(e.kind(), "downstream_in_flight" | "downstream_timeout") => {}
            other => panic!("expected 409s (or retries timed out), then the replay: {other:?}"),
        }
        assert!(
            started.elapsed() < Duration::from_secs(20),
            "no replay after 20 s"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let key = fx.api.calls()[0].idempotency_key.clone().expect("key");
    assert_eq!(
        fx.api.effects().get(&key),
        Some(&1),
        "{:?}",
        fx.api.effects()
    );
    assert!(fx.api.calls_for(&key) >= 2);
    let dynamodb = aws_sdk_dynamodb::Client::new(&fx.aws);
    let completed = sqsafe_testkit::completed_records(&dynamodb, &fx.env[0].1).await;
    assert_eq!(completed.len(), 1, "{completed:?}");
    let sent: Sent = serde_json::from_str(&sqsafe_testkit::item_string(&completed[0], "result"))
        .expect("the stored Sent");
    assert_eq!(
        (sent.status, sent.answer),
        (201, serde_json::json!({"id": "ord_1"}))
    );
}

#[tokio::test]
async fn a_2xx_larger_than_the_cap_is_transient_and_not_kept() {
    let fx = fixture().await;
    fx.api.reply_next(Reply::status(200).body(vec![b'x'; 65]));
    let err = retried(fx.run(&[("ORDERS_MAX_BODY_BYTES", "64")]).await);
    assert_eq!(
        (err.kind(), err.class()),
        ("downstream_bad_response", ErrorClass::Transient)
    );
    assert_eq!(
        err.message(),
        "orders API answered 200 OK with a body larger than 64 bytes"
    );
    // Up to the cap is read.
    fx.api
        .reply_next(Reply::status(200).body(format!(r#"{{"x":"{}"}}"#, "y".repeat(56))));
    assert!(matches!(
        fx.run(&[("ORDERS_MAX_BODY_BYTES", "64")]).await,
        Disposition::Succeeded(Processed::Applied)
    ));
}

/// An error page over the cap is still the API's answer: a 422 or a 400 is dead-lettered at once (one call, no
/// retry), and its body is neither read for a code nor quoted.
#[tokio::test]
async fn an_error_page_larger_than_the_cap_is_mapped_by_its_status() {
    let fx = fixture().await;
    let page = format!(
        r#"{{"error":"idempotency_key_reused","message":"card 4111111111111111 {}"}}"#,
        "x".repeat(64)
    );
    for (status, kind) in [(422, "downstream_key_reused"), (400, "downstream_rejected")] {
        fx.api.reply_next(Reply::status(status).body(page.clone()));
        let calls = fx.api.calls().len();
        let err = dead_lettered(fx.run(&[("ORDERS_MAX_BODY_BYTES", "64")]).await);
        assert_eq!(
            (err.kind(), err.class()),
            (kind, ErrorClass::Permanent),
            "{status}"
        );
        assert_eq!(fx.api.calls().len(), calls + 1, "{status}: one call");
        assert!(
            err.message()
                .starts_with(&format!("orders API answered {status}"))
                && err.message().ends_with("with a body larger than 64 bytes"),
            "{}",
            err.message()
        );
        assert!(!err.to_string().contains("4111"), "{err}");
    }
}

/// A 429 or 503 over the cap keeps the server's delay.
#[tokio::test]
async fn a_transient_answer_larger_than_the_cap_keeps_its_retry_after() {
    let fx = fixture().await;
    for status in [429, 503] {
        fx.api.reply_next(
            Reply::status(status)
                .body(vec![b'x'; 65])
                .retry_after_secs(120),
        );
        let before = SystemTime::now();
        let err = retried(fx.run(&[("ORDERS_MAX_BODY_BYTES", "64")]).await);
        assert_eq!(
            (err.kind(), err.class()),
            ("downstream_unavailable", ErrorClass::Transient),
            "{status}"
        );
        let at = err.retry_not_before().expect("Retry-After honoured");
        assert!(
            at >= before + Duration::from_secs(119)
                && at <= SystemTime::now() + Duration::from_secs(121),
            "{status}: {at:?}"
        );
    }
}

#[tokio::test]
async fn an_unreadable_2xx_is_transient_and_never_quoted() {
    let fx = fixture().await;
    fx.api
        .reply_next(Reply::status(200).body("<html>card 4111111111111111</html>"));
    let err = retried(fx.run(&[]).await);
    assert_eq!(
        (err.kind(), err.class()),
        ("downstream_bad_response", ErrorClass::Transient)
    );
    assert!(!err.to_string().contains("4111"), "{err}");
}

#[tokio::test]
async fn a_refused_connection_is_transient() {
    let fx = fixture().await;
    let closed = {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
        listener.local_addr().expect("addr")
    };
    let url = format!("http://{closed}");
    let err = retried(fx.run(&[("ORDERS_API_URL", url.as_str())]).await);
    assert_eq!(
        (err.kind(), err.class()),
        ("downstream_unreachable", ErrorClass::Transient)
    );
}

#[tokio::test]
async fn with_no_time_left_before_the_deadline_nothing_is_sent() {
    let fx = fixture().await;
    // invocation() sets a deadline 30 s away; a reserve of 60 s leaves nothing.
    let err = retried(fx.run(&[("ORDERS_RESERVE_MS", "60000")]).await);
    assert_eq!(
        (err.kind(), err.class()),
        (RecordError::DEADLINE, ErrorClass::Transient)
    );
    assert!(fx.api.calls().is_empty(), "not sent");
}

#[tokio::test]
async fn the_key_goes_under_the_header_the_api_reads() {
    let fx = fixture().await;
    let applied = fx.run(&[("ORDERS_KEY_HEADER", "PayPal-Request-Id")]).await;
    assert!(
        matches!(applied, Disposition::Succeeded(Processed::Applied)),
        "{applied:?}"
    );
    let call = &fx.api.calls()[0];
    assert_eq!(call.idempotency_key, None, "not under Idempotency-Key");
    let key = call
        .headers
        .get("paypal-request-id")
        .expect("the key under PayPal-Request-Id");
    assert!(!key.is_empty());
    assert_eq!(call.headers.get("idempotency-key"), None);

    let err = HttpClient::builder("http://127.0.0.1:1")
        .idempotency_header("bad header")
        .build()
        .expect_err("not a header name");
    assert!(
        err.to_string()
            .contains("\"bad header\" is not an HTTP header name"),
        "{err}"
    );
}

#[tokio::test]
async fn a_base_url_that_is_not_http_is_refused_at_build() {
    for url in [
        "ftp://example.com",
        "example.com",
        "http://",
        "https://example.com/?a=1",
    ] {
        let err = HttpClient::builder(url).build().expect_err(url);
        assert!(matches!(err, sqsafe::Error::Setup(_)), "{url}: {err}");
        assert!(
            err.to_string().contains("is not an http(s):// URL"),
            "{err}"
        );
    }
    let err = HttpClient::builder("http://127.0.0.1:1")
        .timeout(Duration::ZERO)
        .build()
        .expect_err("zero timeout");
    assert!(
        err.to_string().contains("timeout must be more than zero"),
        "{err}"
    );
    assert!(
        HttpClient::builder("https://api.example.com/v2/")
            .build()
            .is_ok()
    );
}

/// Both ends of the key read one status table (`sqsafe::status`). For each status an API behind sqsafe's layer may
/// answer (scripted once, then the fake's default `200`), a consumer's call and its redelivery under the same key:
/// - a status the consumer's `sqsafe::http` retries must have been released by the layer: the redelivery runs the
///   handler again and gets the `200`;
/// - a status it takes as final must have been stored: the redrive gets the same answer replayed, the handler not run
///   again (it would answer `200`).
///
/// Before, the layer stored every 4xx: a 408, 409, 425 or 429 was replayed to every retry until the message was
/// dead-lettered, and its redrive failed the same way.
#[tokio::test]
async fn both_ends_of_the_key_read_one_status_table() {
    let fx = fixture_honouring().await;
    for status in [
        200u16, 201, 303, 400, 401, 404, 408, 409, 410, 422, 425, 429, 500, 502, 503, 504,
    ] {
        let order = unique_name("o");
        fx.api.reply_next(
            Reply::status(status).json(serde_json::json!({"error": "scripted", "status": status})),
        );
        let first = fx.run_order(&[], &order).await;
        let second = fx.run_order(&[], &order).await;
        match (&first, &second) {
            (Disposition::Succeeded(Processed::Applied), Disposition::Succeeded(_)) => {
                assert!((200..300).contains(&status), "{status}");
            }
            (Disposition::Retry(_), Disposition::Succeeded(Processed::Applied)) => {
                assert!(
                    sqsafe::status::StatusClass::of(status).is_retried(),
                    "{status}: retried by the client, and released by the layer"
                );
            }
            (Disposition::DeadLettered(a), Disposition::DeadLettered(b)) => {
                assert!(
                    !sqsafe::status::StatusClass::of(status).is_retried(),
                    "{status}"
                );
                assert_eq!(
                    (a.kind(), a.class()),
                    (b.kind(), b.class()),
                    "{status}: the redrive gets the stored answer"
                );
            }
            other => panic!(
                "{status}: the two ends disagree (the client's first and second outcome): {other:?}"
            ),
        }
    }
}
