//! The fault proxy in front of a real moto server, driven by the real AWS SDK.
//!
//! Every test starts its own moto server (from `.venv`, made by `sqsafe local venv`) and its own proxy, so counters and
//! tables are its own. Without the venv the tests fail, saying how to make it.

use std::future::ready;
use std::path::Path;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use aws_config::retry::RetryConfig;
use aws_config::timeout::TimeoutConfig;
use aws_sdk_dynamodb::config::interceptors::FinalizerInterceptorContextRef;
use aws_sdk_dynamodb::config::{
    AsyncSleep, ConfigBag, IdentityCache, Intercept, RuntimeComponents, SharedAsyncSleep, Sleep,
    StalledStreamProtectionConfig,
};
use aws_sdk_dynamodb::error::{BoxError, ProvideErrorMetadata, SdkError};
use aws_sdk_dynamodb::types::AttributeValue;
use sqsafe_local::moto::{self, MotoServer};
use sqsafe_test_servers::proxy::{
    self, FaultProxy, FaultProxyConfig, ProxyStats, RECENT_FAULTS, RunningProxy,
};
use sqsafe_testkit::{create_table, unique_name};

async fn start_moto() -> MotoServer {
    match MotoServer::start(&moto::venv_bin()).await {
        Ok(moto) => moto,
        Err(e) => panic!("moto server must start for these tests: {e}"),
    }
}

async fn start_proxy(config: FaultProxyConfig) -> RunningProxy {
    FaultProxy::start(config).await.expect("proxy starts")
}

/// A client of `endpoint` that makes one attempt per call: what the proxy answers is what the test sees.
async fn client(endpoint: &str) -> aws_sdk_dynamodb::Client {
    client_with(endpoint, RetryConfig::disabled(), None).await
}

/// A client of `endpoint` with `retry`. With `sleeper`, backoff delays are recorded instead of slept; the other users
/// of the SDK's sleeper are turned off (timeouts, stalled-stream protection, and the identity cache, whose load
/// timeout is a sleep too).
async fn client_with(
    endpoint: &str,
    retry: RetryConfig,
    sleeper: Option<NoSleep>,
) -> aws_sdk_dynamodb::Client {
    let sdk = sqsafe_aws::local_config_loader(endpoint).load().await;
    let mut config = aws_sdk_dynamodb::config::Builder::from(&sdk)
        // Set here too: a service-specific AWS_ENDPOINT_URL_DYNAMODB in the environment must not win.
        .endpoint_url(endpoint)
        .retry_config(retry);
    config = match sleeper {
        Some(sleeper) => config
            .sleep_impl(SharedAsyncSleep::new(sleeper))
            .identity_cache(IdentityCache::no_cache())
            .timeout_config(TimeoutConfig::disabled())
            .stalled_stream_protection(StalledStreamProtectionConfig::disabled()),
        None => config.timeout_config(
            TimeoutConfig::builder()
                .operation_attempt_timeout(Duration::from_secs(10))
                .build(),
        ),
    };
    aws_sdk_dynamodb::Client::from_conf(config.build())
}

/// Records the SDK's backoff delays and returns at once: retries without real sleeps.
#[derive(Debug, Clone, Default)]
struct NoSleep(Arc<Mutex<Vec<Duration>>>);

impl NoSleep {
    fn delays(&self) -> Vec<Duration> {
        self.0.lock().unwrap_or_else(|p| p.into_inner()).clone()
    }
}

impl AsyncSleep for NoSleep {
    fn sleep(&self, duration: Duration) -> Sleep {
        self.0
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .push(duration);
        Sleep::new(ready(()))
    }
}

async fn new_table(moto_client: &aws_sdk_dynamodb::Client) -> String {
    let table = unique_name("proxy");
    create_table(moto_client, &table, "pk", None).await;
    table
}

async fn put(
    client: &aws_sdk_dynamodb::Client,
    table: &str,
    pk: &str,
) -> Result<(), SdkError<aws_sdk_dynamodb::operation::put_item::PutItemError>> {
    client
        .put_item()
        .table_name(table)
        .item("pk", AttributeValue::S(pk.into()))
        .item("n", AttributeValue::N("1".into()))
        .send()
        .await
        .map(drop)
}

/// Whether moto holds the item, asked directly (strongly consistent; moto is anyway).
async fn stored(moto_client: &aws_sdk_dynamodb::Client, table: &str, pk: &str) -> bool {
    moto_client
        .get_item()
        .table_name(table)
        .key("pk", AttributeValue::S(pk.into()))
        .consistent_read(true)
        .send()
        .await
        .expect("get item from moto")
        .item
        .is_some()
}

fn status<E>(err: &SdkError<E>) -> Option<u16> {
    err.raw_response().map(|r| r.status().as_u16())
}

fn dynamodb_only(stats: &ProxyStats) -> u64 {
    stats.by_operation.values().sum()
}

#[tokio::test]
async fn is_transparent_when_every_rate_is_zero() {
    let moto = start_moto().await;
    let proxy = start_proxy(FaultProxyConfig::new(moto.endpoint())).await;
    let via_proxy = client(&proxy.endpoint()).await;

    let table = unique_name("proxy");
    create_table(&via_proxy, &table, "pk", None).await;
    put(&via_proxy, &table, "a")
        .await
        .expect("put through the proxy");
    let item = via_proxy
        .get_item()
        .table_name(&table)
        .key("pk", AttributeValue::S("a".into()))
        .send()
        .await
        .expect("get through the proxy")
        .item
        .expect("item found");
    assert_eq!(item.get("n"), Some(&AttributeValue::N("1".into())));
    assert!(stored(&client(&moto.endpoint()).await, &table, "a").await);

    let stats = proxy.stats();
    assert_eq!(stats.requests, 4, "{stats:?}");
    assert_eq!(stats.dynamodb_requests, 4);
    assert_eq!(dynamodb_only(&stats), 4);
    for op in ["CreateTable", "UpdateTimeToLive", "PutItem", "GetItem"] {
        assert_eq!(stats.by_operation.get(op), Some(&1), "{op}: {stats:?}");
    }
    assert_eq!((stats.faults(), stats.upstream_errors), (0, 0));
    proxy.shutdown().await;
    moto.shutdown().await;
}

#[tokio::test]
async fn throttling_is_answered_without_forwarding() {
    let moto = start_moto().await;
    let direct = client(&moto.endpoint()).await;
    let table = new_table(&direct).await;
    let proxy = start_proxy(FaultProxyConfig {
        throttle_rate: 1.0,
        ..FaultProxyConfig::new(moto.endpoint())
    })
    .await;

    let err = put(&client(&proxy.endpoint()).await, &table, "a")
        .await
        .expect_err("throttled");
    assert_eq!(err.code(), Some("ThrottlingException"), "{err:?}");
    assert_eq!(
        err.message(),
        Some("Rate of requests exceeds the allowed throughput.")
    );
    assert_eq!(status(&err), Some(400));
    let headers = err.raw_response().expect("raw response").headers();
    assert_eq!(headers.get("x-amzn-ErrorType"), Some("ThrottlingException"));
    assert_eq!(
        headers.get("content-type"),
        Some("application/x-amz-json-1.0")
    );
    assert!(!stored(&direct, &table, "a").await, "nothing written");

    let stats = proxy.stats();
    assert_eq!(
        (
            stats.requests,
            stats.throttled,
            stats.errors_500,
            stats.after_write_500
        ),
        (1, 1, 0, 0)
    );
    let recent: Vec<_> = stats
        .recent_faults
        .iter()
        .map(|f| (f.operation.as_str(), f.fault))
        .collect();
    assert_eq!(recent, [("PutItem", "throttled")]);

    // The latest faults only: a long run keeps the last RECENT_FAULTS.
    let throttled = client(&proxy.endpoint()).await;
    for i in 0..RECENT_FAULTS + 4 {
        put(&throttled, &table, &format!("k{i}"))
            .await
            .expect_err("throttled");
    }
    let recent = proxy.stats().recent_faults;
    assert_eq!(recent.len(), RECENT_FAULTS);
    assert!(
        recent
            .iter()
            .zip(recent.iter().skip(1))
            .all(|(a, b)| a.at <= b.at),
        "oldest first"
    );
    proxy.shutdown().await;
    moto.shutdown().await;
}

#[tokio::test]
async fn error_500_is_answered_without_forwarding() {
    let moto = start_moto().await;
    let direct = client(&moto.endpoint()).await;
    let table = new_table(&direct).await;
    let proxy = start_proxy(FaultProxyConfig {
        error_500_rate: 1.0,
        ..FaultProxyConfig::new(moto.endpoint())
    })
    .await;

    let err = put(&client(&proxy.endpoint()).await, &table, "a")
        .await
        .expect_err("500");
    assert_eq!(err.code(), Some("InternalServerError"), "{err:?}");
    assert_eq!(status(&err), Some(500));
    assert!(
        err.as_service_error()
            .is_some_and(|e| e.is_internal_server_error()),
        "{err:?}"
    );
    assert!(!stored(&direct, &table, "a").await, "nothing written");
    assert_eq!(proxy.stats().errors_500, 1);
    proxy.shutdown().await;
    moto.shutdown().await;
}

#[tokio::test]
async fn after_write_500_applies_the_write_and_reports_a_failure() {
    let moto = start_moto().await;
    let direct = client(&moto.endpoint()).await;
    let table = new_table(&direct).await;
    let proxy = start_proxy(FaultProxyConfig {
        after_write_500_rate: 1.0,
        operations: Some(vec!["PutItem".into()]),
        ..FaultProxyConfig::new(moto.endpoint())
    })
    .await;
    let via_proxy = client(&proxy.endpoint()).await;

    let err = put(&via_proxy, &table, "a").await.expect_err("500");
    assert_eq!(err.code(), Some("InternalServerError"), "{err:?}");
    assert_eq!(status(&err), Some(500));
    assert!(stored(&direct, &table, "a").await, "the write was applied");
    // GetItem is not in `operations`: it goes through, and sees the write.
    let found = via_proxy
        .get_item()
        .table_name(&table)
        .key("pk", AttributeValue::S("a".into()))
        .send()
        .await
        .expect("get through the proxy");
    assert!(found.item.is_some());

    let stats = proxy.stats();
    assert_eq!((stats.after_write_500, stats.faults()), (1, 1), "{stats:?}");
    proxy.shutdown().await;
    moto.shutdown().await;
}

/// Faults on for the first attempt of each call only: the retry sees the truth.
#[derive(Debug)]
struct FaultsOnFirstAttemptOnly(Arc<RunningProxy>);

impl Intercept for FaultsOnFirstAttemptOnly {
    fn name(&self) -> &'static str {
        "FaultsOnFirstAttemptOnly"
    }

    fn read_after_attempt(
        &self,
        _context: &FinalizerInterceptorContextRef<'_>,
        _runtime_components: &RuntimeComponents,
        _cfg: &mut ConfigBag,
    ) -> Result<(), BoxError> {
        self.0.set_enabled(false);
        Ok(())
    }
}

#[tokio::test]
async fn an_sdk_retry_after_a_lost_answer_fails_the_condition_on_its_own_write() {
    let moto = start_moto().await;
    let direct = client(&moto.endpoint()).await;
    let table = new_table(&direct).await;
    let proxy = Arc::new(
        start_proxy(FaultProxyConfig {
            after_write_500_rate: 1.0,
            ..FaultProxyConfig::new(moto.endpoint())
        })
        .await,
    );
    let sleeper = NoSleep::default();
    let sdk = client_with(
        &proxy.endpoint(),
        RetryConfig::standard(),
        Some(sleeper.clone()),
    )
    .await;
    let retrying = aws_sdk_dynamodb::Client::from_conf(
        sdk.config()
            .to_builder()
            .interceptor(FaultsOnFirstAttemptOnly(proxy.clone()))
            .build(),
    );

    let err = retrying
        .put_item()
        .table_name(&table)
        .item("pk", AttributeValue::S("a".into()))
        .condition_expression("attribute_not_exists(pk)")
        .send()
        .await
        .expect_err("the retry fails its condition");
    assert!(
        err.as_service_error()
            .is_some_and(|e| e.is_conditional_check_failed_exception()),
        "{err:?}"
    );
    assert!(
        stored(&direct, &table, "a").await,
        "written once, by attempt 1"
    );
    assert_eq!(
        sleeper.delays().len(),
        1,
        "one retry, after the 500: {:?}",
        sleeper.delays()
    );

    let stats = proxy.stats();
    assert_eq!(stats.after_write_500, 1, "{stats:?}");
    assert_eq!(stats.by_operation.get("PutItem"), Some(&2));
    drop(retrying);
    drop(sdk);
    if let Some(proxy) = Arc::into_inner(proxy) {
        proxy.shutdown().await;
    }
    moto.shutdown().await;
}

/// A claim as sqsafe's store writes it: `token` fences it, the old item comes back when the condition fails.
async fn claim(
    client: &aws_sdk_dynamodb::Client,
    table: &str,
    key: &str,
    token: &str,
) -> Result<(), SdkError<aws_sdk_dynamodb::operation::put_item::PutItemError>> {
    client
        .put_item()
        .table_name(table)
        .item("pk", AttributeValue::S(key.into()))
        .item("token", AttributeValue::S(token.into()))
        .item("status", AttributeValue::S("IN_PROGRESS".into()))
        .condition_expression("attribute_not_exists(pk)")
        .return_values_on_condition_check_failure(
            aws_sdk_dynamodb::types::ReturnValuesOnConditionCheckFailure::AllOld,
        )
        .send()
        .await
        .map(drop)
}

#[tokio::test]
async fn a_retry_that_meets_its_own_token_is_counted_as_self_met() {
    let moto = start_moto().await;
    let direct = client(&moto.endpoint()).await;
    let table = new_table(&direct).await;
    let proxy = Arc::new(
        start_proxy(FaultProxyConfig {
            after_write_500_rate: 1.0,
            ..FaultProxyConfig::new(moto.endpoint())
        })
        .await,
    );
    let sdk = client_with(
        &proxy.endpoint(),
        RetryConfig::standard(),
        Some(NoSleep::default()),
    )
    .await;
    let retrying = aws_sdk_dynamodb::Client::from_conf(
        sdk.config()
            .to_builder()
            .interceptor(FaultsOnFirstAttemptOnly(proxy.clone()))
            .build(),
    );
    let err = claim(&retrying, &table, "k1", "t1")
        .await
        .expect_err("the retry meets its own claim");
    assert!(
        err.as_service_error()
            .is_some_and(|e| e.is_conditional_check_failed_exception()),
        "{err:?}"
    );
    let stats = proxy.stats();
    assert_eq!(stats.self_met_writes.get("PutItem"), Some(&1), "{stats:?}");
    assert_eq!(stats.self_met.len(), 1);
    assert_eq!(
        (
            stats.self_met[0].table.as_str(),
            stats.self_met[0].key.as_str()
        ),
        (table.as_str(), "k1")
    );

    // Another attempt's claim meeting that record is a plain conflict, not a self-met write.
    let once = client(&proxy.endpoint()).await;
    proxy.set_enabled(false);
    let other = claim(&once, &table, "k1", "t2").await.expect_err("taken");
    assert!(
        other
            .as_service_error()
            .is_some_and(|e| e.is_conditional_check_failed_exception())
    );
    // A write answered 500 after it landed, then taken over (the record now carries another token) before the
    // retry: the retry meets someone else's write.
    proxy.set_enabled(true);
    assert_eq!(
        claim(&once, &table, "k2", "t1")
            .await
            .expect_err("500 after the write")
            .code(),
        Some("InternalServerError")
    );
    proxy.set_enabled(false);
    direct
        .put_item()
        .table_name(&table)
        .item("pk", AttributeValue::S("k2".into()))
        .item("token", AttributeValue::S("t9".into()))
        .send()
        .await
        .expect("takeover");
    claim(&once, &table, "k2", "t1")
        .await
        .expect_err("meets the takeover");
    let stats = proxy.stats();
    assert_eq!(
        (stats.self_met_total(), stats.after_write_500),
        (1, 2),
        "{stats:?}"
    );
    drop(retrying);
    drop(sdk);
    if let Some(proxy) = Arc::into_inner(proxy) {
        proxy.shutdown().await;
    }
    moto.shutdown().await;
}

#[tokio::test]
async fn faults_apply_only_to_the_listed_operations() {
    let moto = start_moto().await;
    let direct = client(&moto.endpoint()).await;
    let table = new_table(&direct).await;
    put(&direct, &table, "existing").await.expect("seed item");
    let proxy = start_proxy(FaultProxyConfig {
        throttle_rate: 1.0,
        operations: Some(vec![
            "PutItem".into(),
            "UpdateItem".into(),
            "TransactWriteItems".into(),
        ]),
        ..FaultProxyConfig::new(moto.endpoint())
    })
    .await;
    let via_proxy = client(&proxy.endpoint()).await;
    let key = || AttributeValue::S("existing".into());

    via_proxy
        .describe_table()
        .table_name(&table)
        .send()
        .await
        .expect("DescribeTable passes");
    via_proxy
        .get_item()
        .table_name(&table)
        .key("pk", key())
        .send()
        .await
        .expect("GetItem passes");
    via_proxy
        .delete_item()
        .table_name(&table)
        .key("pk", AttributeValue::S("other".into()))
        .send()
        .await
        .expect("DeleteItem passes");

    let put_err = put(&via_proxy, &table, "new").await.expect_err("PutItem");
    assert_eq!(put_err.code(), Some("ThrottlingException"));
    let update_err = via_proxy
        .update_item()
        .table_name(&table)
        .key("pk", key())
        .update_expression("SET n = :two")
        .expression_attribute_values(":two", AttributeValue::N("2".into()))
        .send()
        .await
        .expect_err("UpdateItem");
    assert_eq!(update_err.code(), Some("ThrottlingException"));
    let transact_err = via_proxy
        .transact_write_items()
        .transact_items(
            aws_sdk_dynamodb::types::TransactWriteItem::builder()
                .put(
                    aws_sdk_dynamodb::types::Put::builder()
                        .table_name(&table)
                        .item("pk", AttributeValue::S("tx".into()))
                        .build()
                        .expect("put"),
                )
                .build(),
        )
        .send()
        .await
        .expect_err("TransactWriteItems");
    assert_eq!(transact_err.code(), Some("ThrottlingException"));

    assert!(!stored(&direct, &table, "new").await);
    assert!(!stored(&direct, &table, "tx").await);
    let stats = proxy.stats();
    assert_eq!(
        (stats.dynamodb_requests, stats.throttled),
        (6, 3),
        "{stats:?}"
    );
    proxy.shutdown().await;
    moto.shutdown().await;
}

#[tokio::test]
async fn unprocessed_keys_answers_a_batch_read_with_every_key_unprocessed() {
    let moto = start_moto().await;
    let direct = client(&moto.endpoint()).await;
    let table = new_table(&direct).await;
    put(&direct, &table, "stored").await.expect("seed item");
    let proxy = start_proxy(FaultProxyConfig {
        unprocessed_keys_rate: 1.0,
        ..FaultProxyConfig::new(moto.endpoint())
    })
    .await;
    let via_proxy = client(&proxy.endpoint()).await;
    let keys = aws_sdk_dynamodb::types::KeysAndAttributes::builder()
        .keys([("pk".to_owned(), AttributeValue::S("stored".into()))].into())
        .keys([("pk".to_owned(), AttributeValue::S("absent".into()))].into())
        .consistent_read(true)
        .build()
        .expect("keys");

    let answer = via_proxy
        .batch_get_item()
        .request_items(&table, keys.clone())
        .send()
        .await
        .expect("a 200");
    assert_eq!(
        answer.responses().and_then(|r| r.get(&table)).map(Vec::len),
        Some(0),
        "no item, though moto holds one: {answer:?}"
    );
    assert_eq!(
        answer.unprocessed_keys().and_then(|u| u.get(&table)),
        Some(&keys),
        "every key asked for, as asked"
    );
    // Only a BatchGetItem gets it: a write in the same band is forwarded untouched.
    put(&via_proxy, &table, "new")
        .await
        .expect("PutItem passes");
    assert!(stored(&direct, &table, "new").await);

    let stats = proxy.stats();
    assert_eq!(
        (
            stats.unprocessed_keys,
            stats.faults(),
            stats.dynamodb_requests
        ),
        (1, 1, 2),
        "{stats:?}"
    );
    let recent: Vec<_> = stats
        .recent_faults
        .iter()
        .map(|f| (f.operation.as_str(), f.fault))
        .collect();
    assert_eq!(recent, [("BatchGetItem", "every key unprocessed")]);
    proxy.shutdown().await;
    moto.shutdown().await;
}

/// The outcome of `n` sequential GetItem calls through a proxy with `seed`: `None` for a success, else the error code.
async fn outcomes(moto: &MotoServer, table: &str, seed: u64, n: usize) -> Vec<Option<String>> {
    let proxy = start_proxy(FaultProxyConfig {
        seed,
        throttle_rate: 0.3,
        error_500_rate: 0.3,
        ..FaultProxyConfig::new(moto.endpoint())
    })
    .await;
    let via_proxy = client(&proxy.endpoint()).await;
    let mut seen = Vec::with_capacity(n);
    for _ in 0..n {
        let result = via_proxy
            .get_item()
            .table_name(table)
            .key("pk", AttributeValue::S("a".into()))
            .send()
            .await;
        seen.push(result.err().map(|e| e.code().unwrap_or("?").to_owned()));
    }
    let stats = proxy.stats();
    assert_eq!(stats.dynamodb_requests, n as u64);
    assert_eq!(
        stats.throttled as usize,
        seen.iter()
            .filter(|o| o.as_deref() == Some("ThrottlingException"))
            .count()
    );
    proxy.shutdown().await;
    seen
}

#[tokio::test]
async fn the_same_seed_gives_the_same_faults() {
    let moto = start_moto().await;
    let table = new_table(&client(&moto.endpoint()).await).await;

    let first = outcomes(&moto, &table, 42, 40).await;
    let again = outcomes(&moto, &table, 42, 40).await;
    let other = outcomes(&moto, &table, 43, 40).await;
    assert_eq!(first, again);
    assert_ne!(first, other);
    for expected in [
        None,
        Some("ThrottlingException"),
        Some("InternalServerError"),
    ] {
        assert!(
            first.iter().any(|o| o.as_deref() == expected),
            "{expected:?} in {first:?}"
        );
    }
    moto.shutdown().await;
}

#[tokio::test]
async fn disabled_faults_make_it_transparent() {
    let moto = start_moto().await;
    let direct = client(&moto.endpoint()).await;
    let table = new_table(&direct).await;
    let proxy = start_proxy(FaultProxyConfig {
        throttle_rate: 1.0,
        ..FaultProxyConfig::new(moto.endpoint())
    })
    .await;
    let via_proxy = client(&proxy.endpoint()).await;
    assert!(proxy.is_enabled());

    proxy.set_enabled(false);
    assert!(!proxy.is_enabled());
    put(&via_proxy, &table, "off").await.expect("faults off");
    proxy.set_enabled(true);
    let err = put(&via_proxy, &table, "on").await.expect_err("faults on");
    assert_eq!(err.code(), Some("ThrottlingException"));

    assert!(stored(&direct, &table, "off").await);
    assert!(!stored(&direct, &table, "on").await);
    let stats = proxy.stats();
    assert_eq!((stats.requests, stats.throttled), (2, 1), "{stats:?}");
    proxy.shutdown().await;
    moto.shutdown().await;
}

#[tokio::test]
async fn other_traffic_passes_through_untouched() {
    let moto = start_moto().await;
    let proxy = start_proxy(FaultProxyConfig {
        throttle_rate: 1.0,
        ..FaultProxyConfig::new(moto.endpoint())
    })
    .await;
    let sdk = sqsafe_aws::local_config_loader(&proxy.endpoint())
        .retry_config(RetryConfig::disabled())
        .load()
        .await;
    let sqs = aws_sdk_sqs::Client::from_conf(
        aws_sdk_sqs::config::Builder::from(&sdk)
            .endpoint_url(proxy.endpoint())
            .build(),
    );

    let queue_url = sqsafe_testkit::create_queue(&sqs, "proxy", false).await;
    sqs.send_message()
        .queue_url(&queue_url)
        .message_body("hello")
        .send()
        .await
        .expect("SendMessage through the proxy");
    let received = sqs
        .receive_message()
        .queue_url(&queue_url)
        .send()
        .await
        .expect("ReceiveMessage through the proxy");
    assert_eq!(
        received.messages().first().and_then(|m| m.body()),
        Some("hello")
    );

    let stats = proxy.stats();
    assert_eq!(stats.requests, 3, "{stats:?}");
    assert_eq!(
        (
            stats.dynamodb_requests,
            stats.faults(),
            stats.upstream_errors
        ),
        (0, 0, 0)
    );
    assert!(stats.by_operation.is_empty());
    proxy.shutdown().await;
    moto.shutdown().await;
}

#[tokio::test]
async fn standard_retries_get_most_calls_through_half_throttling() {
    const CALLS: usize = 40;
    let moto = start_moto().await;
    let direct = client(&moto.endpoint()).await;
    let table = new_table(&direct).await;
    let proxy = start_proxy(FaultProxyConfig {
        seed: 2024,
        throttle_rate: 0.5,
        ..FaultProxyConfig::new(moto.endpoint())
    })
    .await;
    let sleeper = NoSleep::default();
    // The SDK's standard mode: 3 attempts, exponential backoff with jitter (recorded here, not slept).
    let retrying = client_with(
        &proxy.endpoint(),
        RetryConfig::standard(),
        Some(sleeper.clone()),
    )
    .await;

    let mut succeeded = 0;
    for i in 0..CALLS {
        if put(&retrying, &table, &format!("item-{i}")).await.is_ok() {
            succeeded += 1;
        }
    }
    let failed = CALLS - succeeded;
    // One call in eight fails three times in a row: about 35 of 40 get through; the seed fixes the exact number.
    assert!(succeeded >= 30, "{succeeded} of {CALLS}");

    let scanned = direct
        .scan()
        .table_name(&table)
        .send()
        .await
        .expect("scan moto")
        .count;
    assert_eq!(
        scanned as usize, succeeded,
        "exactly the successes were written"
    );
    let stats = proxy.stats();
    assert_eq!(
        stats.dynamodb_requests,
        stats.throttled + succeeded as u64,
        "{stats:?}"
    );
    // Every throttled attempt but the last of a failed call was followed by a backoff and a retry.
    let delays = sleeper.delays();
    assert_eq!(delays.len() as u64, stats.throttled - failed as u64);
    assert!(delays.iter().any(|d| !d.is_zero()), "{delays:?}");
    proxy.shutdown().await;
    moto.shutdown().await;
}

#[tokio::test]
async fn an_unreachable_upstream_is_a_502() {
    // A port that was just free, and closed again.
    let port = sqsafe_aws::free_port().expect("free port");
    let proxy = start_proxy(FaultProxyConfig::new(format!("http://127.0.0.1:{port}"))).await;
    let err = client(&proxy.endpoint())
        .await
        .list_tables()
        .send()
        .await
        .expect_err("no upstream");
    assert_eq!(status(&err), Some(502), "{err:?}");
    assert_eq!(proxy.stats().upstream_errors, 1);
    proxy.shutdown().await;
}

#[tokio::test]
async fn an_invalid_config_is_refused_at_start() {
    let err = FaultProxy::start(FaultProxyConfig {
        throttle_rate: 0.6,
        error_500_rate: 0.6,
        ..FaultProxyConfig::new("http://127.0.0.1:1")
    })
    .await
    .expect_err("rates over 1");
    assert!(matches!(err, proxy::Error::RatesExceedOne { .. }), "{err}");
    let err = FaultProxy::start(FaultProxyConfig::new("https://127.0.0.1:1"))
        .await
        .expect_err("https");
    assert!(err.is_invalid_config(), "{err}");
}

#[tokio::test]
async fn moto_reset_wipes_state_and_the_log_is_where_asked() {
    let log = std::env::temp_dir()
        .join(unique_name("sqsafe-moto-test"))
        .join("moto.log");
    let moto = MotoServer::start_with_log(&moto::venv_bin(), &log)
        .await
        .expect("moto starts");
    assert_eq!(moto.log_path(), log);
    assert!(moto.endpoint().starts_with("http://127.0.0.1:"));
    let direct = client(&moto.endpoint()).await;
    new_table(&direct).await;
    assert_eq!(
        direct
            .list_tables()
            .send()
            .await
            .expect("list")
            .table_names()
            .len(),
        1
    );
    moto.reset().await.expect("reset");
    assert!(
        direct
            .list_tables()
            .send()
            .await
            .expect("list")
            .table_names()
            .is_empty()
    );
    moto.shutdown().await;
    let written = std::fs::read_to_string(&log).expect("log kept");
    assert!(written.contains("/moto-api/reset"), "{written}");
    if let Some(dir) = log.parent() {
        let _ = std::fs::remove_dir_all(dir);
    }
}

#[tokio::test]
async fn moto_without_the_venv_says_how_to_make_it() {
    let err = MotoServer::start(Path::new("/nonexistent/.venv/bin"))
        .await
        .expect_err("no venv");
    assert!(matches!(err, moto::Error::NotInstalled { .. }), "{err}");
    assert!(err.to_string().contains("sqsafe local venv"), "{err}");
}

/// moto restores a copy of the tables when a transaction is cancelled, erasing what other requests wrote meanwhile
/// (the copy takes longer the larger the table). Through the proxy a transaction runs alone, so writes made around
/// cancelled transactions survive.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn writes_survive_cancelled_transactions_through_the_proxy() {
    let moto = start_moto().await;
    let proxy = start_proxy(FaultProxyConfig::new(moto.endpoint())).await;
    let lost = lost_writes_around_cancelled_transactions(&proxy.endpoint()).await;
    assert!(
        lost.is_empty(),
        "writes erased by a cancelled transaction's rollback: {lost:?}"
    );
}

/// Seeds a table large enough that moto's copy takes a while, then runs cancelled transactions and plain puts at
/// the same time; returns the puts that are missing afterwards.
async fn lost_writes_around_cancelled_transactions(endpoint: &str) -> Vec<String> {
    use aws_sdk_dynamodb::types::{Put, TransactWriteItem};
    let db = client(endpoint).await;
    let table = unique_name("tx");
    create_table(&db, &table, "pk", None).await;
    let filler = "x".repeat(2_000);
    // 32 at a time: only the table's size matters here, and 800 puts at once through one moto could wait past the
    // SDK's attempt timeout on a loaded machine (seen once in make test).
    for wave in (0..800).collect::<Vec<_>>().chunks(32) {
        let mut seeds = Vec::new();
        for &i in wave {
            let db = db.clone();
            let (table, filler) = (table.clone(), filler.clone());
            seeds.push(tokio::spawn(async move {
                db.put_item()
                    .table_name(&table)
                    .item("pk", AttributeValue::S(format!("seed-{i}")))
                    .item("filler", AttributeValue::S(filler))
                    .send()
                    .await
                    .expect("seed");
            }));
        }
        for s in seeds {
            s.await.expect("seed task");
        }
    }
    let mut tasks = Vec::new();
    for i in 0..60 {
        let db = db.clone();
        let table = table.clone();
        tasks.push(tokio::spawn(async move {
            if i % 3 == 0 {
                // Cancelled: seed-0 exists.
                let put = Put::builder()
                    .table_name(&table)
                    .item("pk", AttributeValue::S("seed-0".into()))
                    .condition_expression("attribute_not_exists(pk)")
                    .build()
                    .expect("put");
                let tx = TransactWriteItem::builder().put(put).build();
                assert!(
                    db.transact_write_items()
                        .transact_items(tx)
                        .send()
                        .await
                        .is_err()
                );
                None
            } else {
                let pk = format!("w-{i}");
                db.put_item()
                    .table_name(&table)
                    .item("pk", AttributeValue::S(pk.clone()))
                    .send()
                    .await
                    .expect("put");
                Some(pk)
            }
        }));
    }
    let mut written = Vec::new();
    for t in tasks {
        written.extend(t.await.expect("task"));
    }
    let mut lost = Vec::new();
    for pk in written {
        let item = db
            .get_item()
            .table_name(&table)
            .key("pk", AttributeValue::S(pk.clone()))
            .send()
            .await
            .expect("get")
            .item;
        if item.is_none() {
            lost.push(pk);
        }
    }
    lost
}
