//! An endpoint that accepts connections and never answers (a "black hole": a hung load balancer, a half-open
//! connection, a firewall that drops replies) must fail a call in seconds, as a typed transient error.
//!
//! The black hole is a local `TcpListener`: nothing here needs the local AWS.

use std::time::{Duration, Instant};

use aws_sdk_dynamodb::error::SdkError;
use aws_sdk_dynamodb::types::AttributeValue;
use sqsafe_aws::Timeouts;
use sqsafe_idempotency::{DynamoDbStore, Idempotency, KeyBuilder, RunError};
use tokio::net::TcpListener;

/// Accepts every connection and keeps it open without reading or writing a byte. Returns its `http://` URL.
async fn black_hole() -> String {
    let listener = TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind a local port");
    let addr = listener.local_addr().expect("local address");
    tokio::spawn(async move {
        let mut held = Vec::new(); // dropping a socket would close it: a refusal, not a black hole
        while let Ok((socket, _)) = listener.accept().await {
            held.push(socket);
        }
    });
    format!("http://{addr}")
}

async fn dynamodb(timeouts: Option<Timeouts>) -> aws_sdk_dynamodb::Client {
    let loader = match timeouts {
        None => sqsafe_aws::config_loader(), // the production configuration
        Some(t) => sqsafe_aws::config_loader_with(t),
    };
    let config = loader
        .endpoint_url(black_hole().await)
        .region(aws_config::Region::new("us-east-1"))
        .credentials_provider(aws_sdk_dynamodb::config::Credentials::new(
            "testing", "testing", None, None, "test",
        ))
        .load()
        .await;
    aws_sdk_dynamodb::Client::new(&config)
}

/// Without timeouts the call never returns; this bound turns that into a failure instead of a hung test.
const NEVER: Duration = Duration::from_secs(60);

#[tokio::test]
async fn a_black_hole_fails_a_put_item_within_the_default_operation_timeout() {
    let client = dynamodb(None).await;
    let started = Instant::now();
    let put = client
        .put_item()
        .table_name("idempotency")
        .item("pk", AttributeValue::S("k".into()))
        .send();
    let result = tokio::time::timeout(NEVER, put)
        .await
        .expect("the call must end by itself: the production config sets timeouts");
    let elapsed = started.elapsed();
    let error = result.expect_err("nothing answers");
    let timed_out = match &error {
        SdkError::TimeoutError(_) => true,
        SdkError::DispatchFailure(failure) => failure.is_timeout(),
        _ => false,
    };
    assert!(timed_out, "a timeout error, not {error:?}");
    let budget = Timeouts::default().operation();
    assert!(
        elapsed < budget * 3,
        "failed after {elapsed:?}; the operation timeout is {budget:?}"
    );
}

#[tokio::test]
async fn a_black_hole_is_a_transient_store_error_for_idempotency() {
    let short = Timeouts::default()
        .with_connect(Duration::from_millis(300))
        .with_read(Duration::from_millis(300))
        .with_attempt(Duration::from_millis(300))
        .with_operation(Duration::from_secs(1));
    let store = DynamoDbStore::builder(dynamodb(Some(short)).await, "idempotency")
        .build()
        .expect("store");
    let idem = Idempotency::builder(store, "black-hole", 1)
        .build()
        .expect("idempotency");
    let key = KeyBuilder::new("black-hole", 1)
        .intent("payment", "p-1")
        .build()
        .expect("key");
    let started = Instant::now();
    let run = idem.run(key, "payload", || async { Ok::<_, std::io::Error>(()) });
    let result = tokio::time::timeout(NEVER, run)
        .await
        .expect("the claim must end by itself");
    let elapsed = started.elapsed();
    match result {
        Err(RunError::Idempotency(e)) => {
            assert!(e.is_store(), "a store error, not {e:?}");
            assert!(e.is_retryable(), "a black hole is transient: {e:?}");
        }
        other => panic!("expected a store error, got {other:?}"),
    }
    assert!(elapsed < short.operation() * 3, "failed after {elapsed:?}");
}
