//! `sqsafe-echo-lambda`: a tiny `lambda_runtime` function that the tests of sqsafe-local's Lambda emulator
//! (`tests/servers/lambda.rs`, `sqsafe_local::lambda`) run as a real process, to crash, time out and fail on demand.
//!
//! It answers `{"payload": <event>, "context": {...}, "env": {...}}` (the invocation context and the `SQSAFE_*`
//! variables it was started with), after doing what the event asks:
//!
//! | event member | effect |
//! |---|---|
//! | `"crash": true` | `abort()`: the process dies without answering |
//! | `"sleep_ms": n` | waits `n` ms first |
//! | `"fail": "msg"` | answers with an error: `errorType` `EchoError`, `errorMessage` `msg` |
//! | `"emf": n` | prints an EMF line with `Echoed` = `n` |
//! | `"marker": true` | prints `sqsafe-fault: SIGKILL at after_claim key=echo` to stderr (and lives on) |
//! | `"print": "text"` | prints `text` to stdout |
//!
//! Started with `ECHO_INIT=exit` it exits with status 3 before the runtime starts; with `ECHO_INIT=error` it posts
//! `/init/error` first and then exits; with `ECHO_INIT=sleep:<ms>` it sleeps that long before the runtime starts (a
//! slow Init phase).

use std::io::{Read, Write};
use std::time::Duration;

use lambda_runtime::{Diagnostic, LambdaEvent, service_fn};
use serde_json::{Value, json};

#[tokio::main(flavor = "current_thread")]
async fn main() -> Result<(), lambda_runtime::Error> {
    match std::env::var("ECHO_INIT").as_deref() {
        Ok("exit") => {
            eprintln!("echo: init fails on purpose");
            std::process::exit(3);
        }
        Ok("error") => {
            post_init_error()?;
            std::process::exit(1);
        }
        Ok(other) => {
            if let Some(ms) = other.strip_prefix("sleep:") {
                let ms: u64 = ms.parse().map_err(|e| format!("ECHO_INIT={other}: {e}"))?;
                std::thread::sleep(Duration::from_millis(ms));
            }
        }
        Err(_) => {}
    }
    lambda_runtime::run(service_fn(echo)).await
}

async fn echo(event: LambdaEvent<Value>) -> Result<Value, Diagnostic> {
    let (payload, context) = event.into_parts();
    if let Some(text) = payload.get("print").and_then(Value::as_str) {
        println!("{text}");
    }
    if let Some(n) = payload.get("emf").and_then(Value::as_f64) {
        let line = json!({
            "_aws": {
                "Timestamp": 0,
                "CloudWatchMetrics": [{
                    "Namespace": "sqsafe-echo",
                    "Dimensions": [[]],
                    "Metrics": [{ "Name": "Echoed", "Unit": "Count" }],
                }],
            },
            "Echoed": n,
            "NotDeclared": 1,
        });
        println!("{line}");
    }
    if payload.get("marker").and_then(Value::as_bool) == Some(true) {
        eprintln!("sqsafe-fault: SIGKILL at after_claim key=echo");
    }
    if payload.get("crash").and_then(Value::as_bool) == Some(true) {
        eprintln!("echo: aborting on purpose");
        std::process::abort();
    }
    if let Some(ms) = payload.get("sleep_ms").and_then(Value::as_u64) {
        tokio::time::sleep(Duration::from_millis(ms)).await;
    }
    if let Some(message) = payload.get("fail").and_then(Value::as_str) {
        return Err(Diagnostic {
            error_type: "EchoError".to_owned(),
            error_message: message.to_owned(),
        });
    }
    Ok(json!({
        "payload": payload,
        "context": {
            "request_id": context.request_id,
            "deadline_ms": context.deadline,
            "invoked_function_arn": context.invoked_function_arn,
            "xray_trace_id": context.xray_trace_id,
            "function_name": context.env_config.function_name,
            "memory": context.env_config.memory,
            "log_stream": context.env_config.log_stream,
        },
        "env": {
            "SQSAFE_INSTANCE": std::env::var("SQSAFE_INSTANCE").ok(),
            "SQSAFE_CRASH_SEED": std::env::var("SQSAFE_CRASH_SEED").ok(),
            "AWS_LAMBDA_RUNTIME_API": std::env::var("AWS_LAMBDA_RUNTIME_API").ok(),
        },
        "now_ms": now_ms(),
    }))
}

fn now_ms() -> u128 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_millis())
        .unwrap_or_default()
}

/// What a runtime does when its init fails: one plain HTTP/1.1 request to the Runtime API.
fn post_init_error() -> std::io::Result<()> {
    let api = std::env::var("AWS_LAMBDA_RUNTIME_API").unwrap_or_default();
    let host = api.trim_start_matches("http://").trim_end_matches('/');
    let body = r#"{"errorType":"EchoInitError","errorMessage":"init fails on purpose"}"#;
    let mut stream = std::net::TcpStream::connect(host)?;
    write!(
        stream,
        "POST /2018-06-01/runtime/init/error HTTP/1.1\r\nHost: {host}\r\nContent-Type: application/json\r\n\
         Lambda-Runtime-Function-Error-Type: EchoInitError\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    )?;
    let mut answer = String::new();
    stream.read_to_string(&mut answer)?;
    eprintln!(
        "echo: /init/error answered {}",
        answer.lines().next().unwrap_or("")
    );
    Ok(())
}
