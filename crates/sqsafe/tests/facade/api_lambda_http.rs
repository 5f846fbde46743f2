//! `sqsafe::api`'s layer as Lambda runs it: API Gateway HTTP API events (payload 2.0) turned into requests by
//! lambda_http's own adapter, with the invocation's `Context`, the records in moto's DynamoDB. The claim's lease is
//! the invocation's deadline, the caller comes from the authorizer, and a repeat of the event replays the answer
//! through lambda_http's response.

use std::sync::Arc;
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use aws_sdk_dynamodb::Client;
use axum::Router;
use axum::extract::State;
use axum::http::StatusCode;
use axum::http::request::Parts;
use axum::routing::post;
use lambda_http::request::{LambdaRequest, RequestContext};
use lambda_http::tower::Service;
use lambda_http::{Adapter, Context, LambdaEvent};
use sqsafe::api::IdempotencyLayer;
use sqsafe::layers::idempotency::{DynamoDbStore, Idempotency};
use sqsafe_testkit::{RequestCounter, create_table, dynamodb, unique_name};

/// An HTTP API event as API Gateway sends it, signed by `caller` (IAM authorization), with `key` and `body`.
fn event(caller: &str, key: &str, body: &str) -> LambdaRequest {
    let event = serde_json::json!({
        "version": "2.0",
        "routeKey": "POST /charges",
        "rawPath": "/charges",
        "rawQueryString": "",
        "headers": {
            "content-type": "application/json",
            "idempotency-key": key,
            "x-correlation-id": "corr-lambda-http-1"
        },
        "requestContext": {
            "accountId": "123456789012",
            "apiId": "a1b2c3d4e5",
            "authorizer": { "iam": {
                "accessKey": "ASIAEXAMPLE", "accountId": "123456789012", "callerId": "AROAEXAMPLE:checkout",
                "principalOrgId": null, "userArn": caller, "userId": "AROAEXAMPLE:checkout"
            } },
            "domainName": "a1b2c3d4e5.execute-api.eu-west-1.amazonaws.com",
            "domainPrefix": "a1b2c3d4e5",
            "http": { "method": "POST", "path": "/charges", "protocol": "HTTP/1.1", "sourceIp": "192.0.2.10",
                      "userAgent": "checkout/1.0" },
            "requestId": "c6af9ac6-7b61-11e6-9a41-93e8deadbeef",
            "routeKey": "POST /charges",
            "stage": "$default",
            "time": "04/Dec/2026:12:00:00 +0000",
            "timeEpoch": 1_796_385_600_000u64
        },
        "body": body,
        "isBase64Encoded": false
    });
    serde_json::from_value(event).expect("an HTTP API event")
}

/// The authorizer's principal, as a team's extractor reads it.
fn caller(parts: &Parts) -> Option<String> {
    match parts.extensions.get::<RequestContext>()? {
        RequestContext::ApiGatewayV2(context) => {
            context.authorizer.as_ref()?.iam.as_ref()?.user_arn.clone()
        }
        _ => None,
    }
}

#[derive(Clone)]
struct Charges {
    runs: Arc<AtomicU32>,
    dynamodb: Client,
    table: String,
}

/// Answers with the lease its own claim holds (read from the table while it runs) and its run number.
async fn charge(State(charges): State<Charges>) -> (StatusCode, String) {
    let run = charges.runs.fetch_add(1, Ordering::SeqCst) + 1;
    let items = charges
        .dynamodb
        .scan()
        .table_name(&charges.table)
        .send()
        .await
        .expect("scan")
        .items
        .unwrap_or_default();
    let leases: Vec<&str> = items
        .iter()
        .filter(|item| {
            item.get("status")
                .and_then(|s| s.as_s().ok())
                .is_some_and(|s| s == "IN_PROGRESS")
        })
        .filter_map(|item| {
            item.get("lease_expires_at")?
                .as_n()
                .ok()
                .map(String::as_str)
        })
        .collect();
    (
        StatusCode::CREATED,
        format!("{{\"run\":{run},\"leases\":{leases:?}}}"),
    )
}

fn invocation(deadline_ms: u64) -> Context {
    let mut context = Context::default();
    context.request_id = "invocation-1".to_owned();
    context.deadline = deadline_ms;
    context
}

/// The answer as lambda_http hands it back to Lambda: its JSON.
async fn invoke(app: &Router, request: LambdaRequest, context: Context) -> serde_json::Value {
    let mut adapter = Adapter::from(app.clone());
    let answer = adapter
        .call(LambdaEvent::new(request, context))
        .await
        .expect("infallible");
    serde_json::to_value(answer).expect("a Lambda response")
}

#[tokio::test]
async fn under_lambda_http_the_lease_is_the_deadline_and_a_repeated_event_replays() {
    let requests = RequestCounter::default();
    let dynamodb = dynamodb(&requests).await;
    let table = unique_name("api-lambda-http");
    create_table(&dynamodb, &table, "pk", None).await;
    let store = DynamoDbStore::builder(dynamodb.clone(), table.clone())
        .build()
        .expect("store");
    let idem = Idempotency::builder(store, "charges-api", 1)
        .build()
        .expect("idempotency");
    let charges = Charges {
        runs: Arc::new(AtomicU32::new(0)),
        dynamodb,
        table,
    };
    let app = Router::new()
        .route("/charges", post(charge))
        .layer(IdempotencyLayer::new(idem, caller).expect("layer"))
        .with_state(charges.clone());

    let now_ms = u64::try_from(
        SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .expect("clock")
            .as_millis(),
    )
    .expect("ms");
    // 9 s left: the default lease outside Lambda is 30 s, so a lease of 9 s can only come from the Context.
    let deadline_ms = now_ms + Duration::from_secs(9).as_millis() as u64;
    let alice = "arn:aws:sts::123456789012:assumed-role/checkout/alice";
    let first = invoke(
        &app,
        event(alice, "charge-1", r#"{"amount":5}"#),
        invocation(deadline_ms),
    )
    .await;
    assert_eq!(first["statusCode"], 201, "{first}");
    let body = first["body"].as_str().expect("a text body");
    assert_eq!(
        body,
        format!("{{\"run\":1,\"leases\":[\"{deadline_ms}\"]}}"),
        "the claim's lease is the invocation's deadline"
    );
    assert!(
        first["headers"].get("idempotent-replayed").is_none(),
        "{first}"
    );

    // The same event again (Lambda retried it, or the client did): the stored answer, the handler not run.
    let again = invoke(
        &app,
        event(alice, "charge-1", r#"{"amount":5}"#),
        invocation(deadline_ms),
    )
    .await;
    assert_eq!(again["statusCode"], 201, "{again}");
    assert_eq!(again["body"], first["body"], "replayed byte for byte");
    assert_eq!(again["headers"]["idempotent-replayed"], "true", "{again}");
    assert_eq!(charges.runs.load(Ordering::SeqCst), 1);

    // Another principal with the same key: its own record, its own run.
    let bob = "arn:aws:sts::123456789012:assumed-role/checkout/bob";
    let other = invoke(
        &app,
        event(bob, "charge-1", r#"{"amount":5}"#),
        invocation(deadline_ms),
    )
    .await;
    assert_eq!(other["statusCode"], 201, "{other}");
    assert!(
        other["body"]
            .as_str()
            .expect("body")
            .starts_with("{\"run\":2,"),
        "{other}"
    );

    // Other content under alice's key: refused, not run.
    let changed = invoke(
        &app,
        event(alice, "charge-1", r#"{"amount":6}"#),
        invocation(deadline_ms),
    )
    .await;
    assert_eq!(changed["statusCode"], 422, "{changed}");
    assert_eq!(charges.runs.load(Ordering::SeqCst), 2);
}
