//! The functions as real binaries under the Lambda runtime API emulator (`cargo lambda watch` from the pinned venv),
//! invoked with the sample events exactly as each function's README says, against moto server and the local
//! payments API.

use sqsafe_e2e::{Watch, failures};
use sqsafe_test_servers::PaymentsApi;
use sqsafe_testkit::{RequestCounter, create_queue, create_table, endpoint, unique_name};

fn aws_env() -> Vec<(&'static str, String)> {
    vec![
        ("AWS_ENDPOINT_URL", endpoint()),
        ("AWS_REGION", "us-east-1".into()),
        ("AWS_ACCESS_KEY_ID", "testing".into()),
        ("AWS_SECRET_ACCESS_KEY", "testing".into()),
    ]
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn charge_payment_under_cargo_lambda_watch() {
    let dynamodb = sqsafe_testkit::dynamodb(&RequestCounter::default()).await;
    let sqs = sqsafe_testkit::sqs().await;
    let table = unique_name("idem");
    create_table(&dynamodb, &table, "pk", None).await;
    let dlq = create_queue(&sqs, "charge-payment-dlq", false).await;
    let queue = create_queue(&sqs, "charge-payment", false).await;
    let payments = PaymentsApi::builder()
        .keys_in_new_table(dynamodb.clone())
        .await
        .start("127.0.0.1:0".parse().expect("addr"))
        .await
        .expect("payments API");

    let mut env = aws_env();
    env.extend([
        ("IDEMPOTENCY_TABLE", table),
        ("PAYMENTS_API_URL", payments.base_url()),
        ("DLQ_URL", dlq.clone()),
        ("QUEUE_URL", queue),
    ]);
    let watch = tokio::task::spawn_blocking(move || Watch::start(&env))
        .await
        .expect("watch");
    let watch = std::sync::Arc::new(watch);

    let w = std::sync::Arc::clone(&watch);
    let answer = tokio::task::spawn_blocking(move || {
        w.invoke("charge-payment", "charge-payment-batch.json")
    })
    .await
    .expect("invoke");
    let failed = failures(&answer);
    // p-1001 is in the batch twice (records 1 and 3) and they run concurrently: whichever loses the claim race finds
    // the key in progress and comes back; nothing else may.
    let racing = [
        "0b1e6c4a-0001-4e7a-9c1d-000000000001",
        "0b1e6c4a-0003-4e7a-9c1d-000000000003",
    ];
    assert!(
        failed.len() <= 1 && failed.iter().all(|f| racing.contains(&f.as_str())),
        "{answer}"
    );
    assert_eq!(payments.charges().len(), 2, "p-1001 and p-1002, once each");

    let w = std::sync::Arc::clone(&watch);
    let again = tokio::task::spawn_blocking(move || {
        w.invoke("charge-payment", "charge-payment-batch.json")
    })
    .await
    .expect("invoke");
    assert!(
        failures(&again).is_empty(),
        "the redelivered batch replays: {again}"
    );
    assert_eq!(payments.charges().len(), 2, "no new charge");

    let dead = sqs
        .receive_message()
        .queue_url(&dlq)
        .max_number_of_messages(10)
        .send()
        .await
        .expect("receive");
    assert!(
        !dead.messages.unwrap_or_default().is_empty(),
        "the poison record reached the DLQ"
    );
    let log = watch.log();
    assert!(
        log.contains(r#""message":"record failed""#)
            && log.contains(r#""error_kind":"bad_payload""#),
        "JSON logs"
    );
    assert!(
        log.contains(r#""correlation_id":"corr-a1""#),
        "records log their correlation id"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn apply_ledger_under_cargo_lambda_watch() {
    let dynamodb = sqsafe_testkit::dynamodb(&RequestCounter::default()).await;
    let sqs = sqsafe_testkit::sqs().await;
    let (idem, ledger) = (unique_name("idem"), unique_name("ledger"));
    create_table(&dynamodb, &idem, "pk", None).await;
    create_table(&dynamodb, &ledger, "pk", Some("sk")).await;
    let dlq = create_queue(&sqs, "apply-ledger-dlq", true).await;
    let queue = create_queue(&sqs, "apply-ledger", true).await;

    // Transactions alone in front of moto (see sqsafe_test_servers::proxy): the two groups run concurrently.
    let proxy = sqsafe_test_servers::FaultProxy::start(sqsafe_test_servers::FaultProxyConfig::new(
        endpoint(),
    ))
    .await
    .expect("proxy");
    let mut env = aws_env();
    env.extend([
        ("IDEMPOTENCY_TABLE", idem),
        ("LEDGER_TABLE", ledger.clone()),
        ("DLQ_URL", dlq),
        ("QUEUE_URL", queue),
        ("AWS_ENDPOINT_URL_DYNAMODB", proxy.endpoint()),
    ]);
    let answer = tokio::task::spawn_blocking(move || {
        let watch = Watch::start(&env);
        watch.invoke("apply-ledger", "apply-ledger-fifo.json")
    })
    .await
    .expect("invoke");
    assert!(failures(&answer).is_empty(), "{answer}");
    let balance = dynamodb
        .get_item()
        .table_name(&ledger)
        .key(
            "pk",
            aws_sdk_dynamodb::types::AttributeValue::S("acct-A".into()),
        )
        .key(
            "sk",
            aws_sdk_dynamodb::types::AttributeValue::S("BALANCE".into()),
        )
        .send()
        .await
        .expect("get")
        .item
        .and_then(|i| i.get("balance").and_then(|v| v.as_n().ok()).cloned());
    assert_eq!(balance.as_deref(), Some("750"));
}
