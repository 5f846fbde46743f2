//! sqsafe-local's Lambda emulator (`sqsafe_local::lambda`) against a real `lambda_runtime` process:
//! `sqsafe-echo-lambda`, built with this crate (cargo gives a test the path of its own package's binaries only).
//!
//! These tests wait on real processes (a cold start, an abort, a 1.5 s timeout), never on a fixed sleep.

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use serde_json::{Value, json};
use sqsafe_local::lambda::{
    FunctionInstance, FunctionSpec, INIT_TIMEOUT, InvokeError, derive_crash_seed,
};

const ECHO: &str = env!("CARGO_BIN_EXE_sqsafe-echo-lambda");
/// The echo function's timeout: long enough that an echo on a loaded 2-core machine (make test runs these beside
/// sam build and the fault suite) never reaches it, short enough for the timeout test to wait on.
const TIMEOUT: Duration = Duration::from_millis(1500);

/// A spec for the echo function whose log folder is fresh for `test`.
fn spec(test: &str) -> FunctionSpec {
    let dir = PathBuf::from(env!("CARGO_TARGET_TMPDIR"))
        .join("lambda-logs")
        .join(test);
    let _ = std::fs::remove_dir_all(&dir);
    FunctionSpec::new("echo", ECHO, dir).with_timeout(TIMEOUT)
}

async fn start(spec: FunctionSpec, instance_id: usize) -> FunctionInstance {
    FunctionInstance::start(spec, instance_id)
        .await
        .expect("the runtime API starts")
}

async fn ok(instance: &mut FunctionInstance, event: Value) -> Value {
    match instance.invoke(event.clone()).await {
        Ok(response) => response,
        Err(e) => panic!(
            "invoke {event} failed: {e:?}\n--- log ---\n{}",
            log(instance.log_path())
        ),
    }
}

fn log(path: &Path) -> String {
    std::fs::read_to_string(path).unwrap_or_default()
}

fn count(haystack: &str, needle: &str) -> usize {
    haystack.matches(needle).count()
}

fn now_ms() -> u64 {
    let since = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .expect("clock after 1970");
    u64::try_from(since.as_millis()).expect("milliseconds fit in u64")
}

/// A process that was killed and reaped has no `/proc` entry any more.
fn is_gone(pid: u32) -> bool {
    !Path::new(&format!("/proc/{pid}")).exists()
}

#[tokio::test]
async fn echoes_and_cold_starts_once_over_several_invokes() {
    let mut echo = start(spec("round_trip"), 7).await;
    assert_eq!(echo.pid(), None, "no process before the first invoke");

    let mut request_ids = Vec::new();
    for n in 0..3 {
        let event = json!({ "n": n, "nested": { "text": "héllo" } });
        let response = ok(&mut echo, event.clone()).await;
        assert_eq!(response["payload"], event);
        let context = &response["context"];
        assert_eq!(context["invoked_function_arn"], echo.function_arn());
        assert_eq!(
            echo.function_arn(),
            "arn:aws:lambda:us-east-1:123456789012:function:echo"
        );
        assert_eq!(context["function_name"], "echo");
        assert_eq!(context["memory"], 128);
        let trace = context["xray_trace_id"].as_str().expect("a trace id");
        assert!(
            trace.starts_with("Root=1-")
                && trace.contains(";Parent=")
                && trace.ends_with(";Sampled=0"),
            "{trace}"
        );
        assert_eq!(response["env"]["SQSAFE_INSTANCE"], "7");
        assert_eq!(response["env"]["SQSAFE_CRASH_SEED"], Value::Null);
        assert_eq!(
            response["env"]["AWS_LAMBDA_RUNTIME_API"],
            echo.runtime_api().to_string()
        );
        request_ids.push(context["request_id"].as_str().expect("an id").to_owned());
    }
    request_ids.dedup();
    assert_eq!(request_ids.len(), 3, "one request id per invocation");

    let stats = echo.stats();
    assert_eq!(stats.invocations, 3);
    assert_eq!(stats.cold_starts, 1);
    assert_eq!(
        (
            stats.crashes,
            stats.timeouts,
            stats.function_errors,
            stats.init_failures
        ),
        (0, 0, 0, 0)
    );

    let log = log(echo.log_path());
    assert!(echo.log_path().ends_with("echo-7.log"));
    assert_eq!(count(&log, "INIT_START"), 1, "{log}");
    assert_eq!(count(&log, "START RequestId: "), 3, "{log}");
    assert_eq!(count(&log, "REPORT RequestId: "), 3, "{log}");
    assert_eq!(count(&log, "Init Duration: "), 1, "{log}");
    echo.shutdown().await;
}

#[tokio::test]
async fn a_crash_is_reported_and_the_next_invoke_cold_starts() {
    let mut echo = start(spec("crash"), 0).await;
    ok(&mut echo, json!({ "warm": true })).await;
    let first = echo.pid().expect("a running process");

    let error = echo
        .invoke(json!({ "crash": true }))
        .await
        .expect_err("the process aborts");
    let InvokeError::Crashed { exit } = &error else {
        panic!("expected a crash, got {error:?}");
    };
    assert!(exit.contains("SIGABRT"), "{exit}");
    assert!(error.ends_environment());
    assert_eq!(echo.pid(), None);
    assert!(is_gone(first));
    // What it printed just before dying is in the log already.
    let log_text = log(echo.log_path());
    assert!(log_text.contains("echo: aborting on purpose"), "{log_text}");
    assert!(
        log_text.contains("Runtime exited with error: signal: 6 (SIGABRT)"),
        "{log_text}"
    );

    let response = ok(&mut echo, json!({ "after": "crash" })).await;
    assert_eq!(response["payload"]["after"], "crash");
    assert_ne!(echo.pid(), Some(first));
    let stats = echo.stats();
    assert_eq!(
        (stats.invocations, stats.cold_starts, stats.crashes),
        (3, 2, 1)
    );
    echo.shutdown().await;
}

#[tokio::test]
async fn a_timeout_kills_the_process_and_the_next_invoke_cold_starts() {
    let mut echo = start(spec("timeout"), 0).await;
    ok(&mut echo, json!({ "warm": true })).await;
    let pid = echo.pid().expect("a running process");

    let started = Instant::now();
    let error = echo
        .invoke(json!({ "sleep_ms": 60_000 }))
        .await
        .expect_err("it sleeps past the timeout");
    let waited = started.elapsed();
    assert_eq!(error, InvokeError::Timeout);
    assert!(waited >= TIMEOUT, "gave up after {waited:?}");
    assert!(waited < TIMEOUT * 4, "gave up only after {waited:?}");
    assert!(is_gone(pid), "the process was killed");
    assert!(log(echo.log_path()).contains(&format!(
        "Task timed out after {:.2} seconds",
        TIMEOUT.as_secs_f64()
    )));

    // A short sleep within the timeout is fine, on a new process.
    let response = ok(&mut echo, json!({ "sleep_ms": 20 })).await;
    assert_eq!(response["payload"]["sleep_ms"], 20);
    let stats = echo.stats();
    assert_eq!((stats.cold_starts, stats.timeouts), (2, 1));
    echo.shutdown().await;
}

#[tokio::test]
async fn a_function_error_keeps_the_process_warm() {
    let mut echo = start(spec("function_error"), 0).await;
    let error = echo
        .invoke(json!({ "fail": "card declined" }))
        .await
        .expect_err("the handler fails");
    assert_eq!(
        error,
        InvokeError::FunctionError {
            error_type: "EchoError".into(),
            message: "card declined".into(),
        }
    );
    assert!(!error.ends_environment());
    let pid = echo.pid().expect("still running");

    ok(&mut echo, json!({ "after": "error" })).await;
    assert_eq!(echo.pid(), Some(pid));
    let stats = echo.stats();
    assert_eq!((stats.cold_starts, stats.function_errors), (1, 1));
    echo.shutdown().await;
}

#[tokio::test]
async fn emf_metrics_and_fault_markers_are_counted_by_the_time_invoke_returns() {
    let mut echo = start(spec("counters"), 0).await;
    ok(&mut echo, json!({ "emf": 2 })).await;
    assert_eq!(echo.stats().emf_sum("Echoed"), 2.0);

    ok(
        &mut echo,
        json!({ "emf": 3.5, "marker": true, "print": "plain line" }),
    )
    .await;
    let stats = echo.stats();
    assert_eq!(stats.emf_sum("Echoed"), 5.5);
    assert!(!stats.emf.contains_key("NotDeclared"), "{:?}", stats.emf);
    assert_eq!(stats.fault_marker_count("after_claim"), 1);
    assert_eq!(stats.fault_markers.len(), 1);

    // A crash's last words count too.
    echo.invoke(json!({ "marker": true, "crash": true }))
        .await
        .expect_err("it aborts");
    assert_eq!(echo.stats().fault_marker_count("after_claim"), 2);

    let log = log(echo.log_path());
    assert!(log.contains("plain line"), "{log}");
    assert_eq!(
        count(&log, "sqsafe-fault: SIGKILL at after_claim key=echo"),
        2,
        "{log}"
    );
    echo.shutdown().await;
}

#[tokio::test]
async fn the_deadline_is_within_the_timeout() {
    let mut echo = start(spec("deadline"), 0).await;
    for _ in 0..2 {
        let before = now_ms();
        let response = ok(&mut echo, json!({})).await;
        let after = now_ms();
        let deadline = response["context"]["deadline_ms"]
            .as_u64()
            .expect("a deadline");
        let seen_at = response["now_ms"].as_u64().expect("the function's clock");
        let timeout = u64::try_from(TIMEOUT.as_millis()).expect("small");
        assert!(deadline > seen_at, "{deadline} <= {seen_at}");
        assert!(
            deadline - seen_at <= timeout,
            "{} ms left",
            deadline - seen_at
        );
        assert!(deadline >= before + timeout, "set before the invoke");
        assert!(deadline <= after + timeout, "set after the invoke");
    }
    echo.shutdown().await;
}

#[tokio::test]
async fn each_process_gets_a_crash_seed_derived_from_the_base_seed() {
    let spec = spec("crash_seed").with_env("SQSAFE_CRASH_SEED", "42");
    let mut echo = start(spec, 3).await;
    let seed = |response: &Value| response["env"]["SQSAFE_CRASH_SEED"].clone();

    let first = ok(&mut echo, json!({})).await;
    assert_eq!(seed(&first), derive_crash_seed(42, 3, 1).to_string());
    assert_eq!(
        seed(&ok(&mut echo, json!({})).await),
        seed(&first),
        "same process"
    );

    echo.invoke(json!({ "crash": true }))
        .await
        .expect_err("it aborts");
    let second = ok(&mut echo, json!({})).await;
    assert_eq!(seed(&second), derive_crash_seed(42, 3, 2).to_string());
    assert_ne!(seed(&first), seed(&second));

    let log = log(echo.log_path());
    assert!(
        log.contains(&format!("crash_seed={}", derive_crash_seed(42, 3, 2))),
        "{log}"
    );
    echo.shutdown().await;
}

#[tokio::test]
async fn an_exit_during_init_is_an_init_failure() {
    let spec = spec("init_exit").with_env("ECHO_INIT", "exit");
    let mut echo = start(spec, 0).await;
    for attempt in 1..=2 {
        let error = echo.invoke(json!({})).await.expect_err("init fails");
        let InvokeError::InitFailed(message) = &error else {
            panic!("expected an init failure, got {error:?}");
        };
        assert!(message.contains("exit status: 3"), "{message}");
        assert_eq!(
            echo.stats().cold_starts,
            attempt,
            "each invoke retries init"
        );
    }
    assert_eq!(echo.stats().init_failures, 2);
    assert!(log(echo.log_path()).contains("echo: init fails on purpose"));
    echo.shutdown().await;
}

#[tokio::test]
async fn a_slow_init_fails_at_the_specs_init_timeout_and_not_before() {
    // A process that takes 30 s to start its runtime: with a 300 ms init timeout the invoke fails at once, well
    // before Lambda's 10 s default, and the process is killed.
    let slow = spec("init_slow")
        .with_env("ECHO_INIT", "sleep:30000")
        .with_init_timeout(Duration::from_millis(300));
    let mut echo = start(slow, 0).await;
    let started = Instant::now();
    let error = echo.invoke(json!({})).await.expect_err("init is too slow");
    let elapsed = started.elapsed();
    assert_eq!(
        error,
        InvokeError::InitFailed(
            "Sandbox.Timedout: the runtime did not ask for an event within 300ms".into()
        )
    );
    assert!(elapsed >= Duration::from_millis(300), "{elapsed:?}");
    assert!(elapsed < INIT_TIMEOUT, "{elapsed:?}");
    assert_eq!(echo.pid(), None, "the slow process is killed");
    assert_eq!(echo.stats().init_failures, 1);
    assert!(log(echo.log_path()).contains("INIT_REPORT Status: timeout"));
    echo.shutdown().await;

    // An init slower than the invocation timeout (1.5 s) but within a longer init timeout succeeds: the two limits
    // are separate, as in Lambda.
    let slow_ok = spec("init_slow_ok")
        .with_env("ECHO_INIT", "sleep:1600")
        .with_init_timeout(Duration::from_secs(60));
    let mut echo = start(slow_ok, 0).await;
    let response = ok(&mut echo, json!({ "n": 1 })).await;
    assert_eq!(response["payload"]["n"], 1);
    assert_eq!(echo.stats().init_failures, 0);
    echo.shutdown().await;
}

#[test]
fn the_default_init_timeout_is_lambdas() {
    let spec = spec("init_default");
    assert_eq!(spec.init_timeout, INIT_TIMEOUT);
    assert_eq!(INIT_TIMEOUT, Duration::from_secs(10));
}

#[tokio::test]
async fn a_posted_init_error_is_an_init_failure() {
    let spec = spec("init_error").with_env("ECHO_INIT", "error");
    let mut echo = start(spec, 0).await;
    let error = echo.invoke(json!({})).await.expect_err("init fails");
    assert_eq!(
        error,
        InvokeError::InitFailed("EchoInitError: init fails on purpose".into())
    );
    assert_eq!(echo.pid(), None);
    assert_eq!(echo.stats().init_failures, 1);
    echo.shutdown().await;
}

#[tokio::test]
async fn a_missing_binary_cannot_spawn() {
    let mut spec = spec("missing");
    spec.binary = PathBuf::from("/nonexistent/bootstrap");
    let mut echo = start(spec, 0).await;
    let error = echo.invoke(json!({})).await.expect_err("nothing to run");
    assert!(
        matches!(&error, InvokeError::Spawn(m) if m.contains("/nonexistent/bootstrap")),
        "{error:?}"
    );
    assert_eq!(echo.stats().cold_starts, 0);
    echo.shutdown().await;
}

#[tokio::test]
async fn a_malformed_crash_seed_cannot_spawn() {
    let spec = spec("bad_seed").with_env("SQSAFE_CRASH_SEED", "forty-two");
    let mut echo = start(spec, 0).await;
    let error = echo.invoke(json!({})).await.expect_err("refused");
    assert!(
        matches!(&error, InvokeError::Spawn(m) if m.contains("SQSAFE_CRASH_SEED")),
        "{error:?}"
    );
    echo.shutdown().await;
}

#[tokio::test]
async fn shutdown_kills_the_process() {
    let mut echo = start(spec("shutdown"), 0).await;
    ok(&mut echo, json!({})).await;
    let pid = echo.pid().expect("running");
    echo.shutdown().await;
    assert!(is_gone(pid));
}

#[tokio::test]
async fn a_cancelled_invoke_leaves_no_stale_answer() {
    let mut echo = start(spec("cancelled"), 0).await;
    ok(&mut echo, json!({})).await;
    let pid = echo.pid().expect("running");
    // The caller gives up on a slow invocation (well before its timeout) ...
    let gave_up = tokio::time::timeout(
        Duration::from_millis(50),
        echo.invoke(json!({ "sleep_ms": 300 })),
    )
    .await;
    assert!(gave_up.is_err(), "the invocation was still running");
    // ... so the next one runs on a fresh process and gets its own answer, not the abandoned one's.
    let response = ok(&mut echo, json!({ "fresh": true })).await;
    assert_eq!(response["payload"], json!({ "fresh": true }));
    assert!(is_gone(pid));
    assert_eq!(echo.stats().cold_starts, 2);
    echo.shutdown().await;
}

#[tokio::test]
async fn the_runtime_api_rejects_unknown_ids_and_routes() {
    let _ = rustls::crypto::ring::default_provider().install_default();
    let echo = start(spec("routes"), 0).await;
    let client = reqwest::Client::builder()
        .no_proxy()
        .build()
        .expect("a client");
    let base = format!("http://{}/2018-06-01/runtime", echo.runtime_api());

    let unknown = client
        .post(format!("{base}/invocation/nope/response"))
        .body("{}")
        .send()
        .await
        .expect("an answer");
    assert_eq!(unknown.status(), 400);
    let body: Value = unknown.json().await.expect("JSON");
    assert_eq!(body["errorType"], "InvalidRequestID");

    let error = client
        .post(format!("{base}/invocation/nope/error"))
        .body("{}")
        .send()
        .await
        .expect("an answer");
    assert_eq!(error.status(), 400);

    let wrong_method = client
        .post(format!("{base}/invocation/next"))
        .send()
        .await
        .expect("an answer");
    assert_eq!(wrong_method.status(), 405);

    let elsewhere = client
        .get(format!("{base}/nothing/here"))
        .send()
        .await
        .expect("an answer");
    assert_eq!(elsewhere.status(), 404);
    echo.shutdown().await;
}
