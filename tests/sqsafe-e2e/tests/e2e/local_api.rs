//! `sqsafe local up` serves a function behind an HTTP API on a loopback port: a template whose function has an
//! `HttpApi` event, the function a real lambda_http binary with sqsafe's idempotency layer (src/bin/sqsafe-orders-api.rs)
//! in the local Lambda emulator, its records in moto. Through the local gateway: a repeat of a request is replayed
//! byte for byte, other content under the key is refused, another caller's key is its own, and each request prints
//! one line.

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use sqsafe_e2e::workspace_root;

const TEMPLATE: &str = r#"
Resources:
  IdempotencyTable:
    Type: AWS::DynamoDB::Table
    Properties:
      BillingMode: PAY_PER_REQUEST
      AttributeDefinitions: [{ AttributeName: pk, AttributeType: S }]
      KeySchema: [{ AttributeName: pk, KeyType: HASH }]
      TimeToLiveSpecification: { AttributeName: expiration, Enabled: true }
  OrdersApiFunction:
    Type: AWS::Serverless::Function
    Metadata:
      BuildMethod: rust-cargolambda
      BuildProperties: { Binary: sqsafe-orders-api }
    Properties:
      Handler: bootstrap
      Runtime: provided.al2023
      Environment:
        Variables:
          IDEMPOTENCY_TABLE: !Ref IdempotencyTable
      Events:
        Create:
          Type: HttpApi
          Properties: { Path: /orders, Method: post }
"#;

/// `sqsafe local up` on `template`, its stdout read line by line.
struct Up {
    child: Child,
    lines: mpsc::Receiver<String>,
    seen: Vec<String>,
}

impl Up {
    fn start(template: &Path) -> Self {
        let api = PathBuf::from(env!("CARGO_BIN_EXE_sqsafe-orders-api"));
        let mut child = Command::new(sqsafe_e2e::sqsafe_cli())
            .current_dir(workspace_root())
            .args(["local", "up", "--template"])
            .arg(template)
            .arg("--bin-dir")
            .arg(api.parent().expect("the binary's folder"))
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .spawn()
            .expect("spawn sqsafe local up");
        let lines = sqsafe_e2e::stdout_lines(child.stdout.take().expect("stdout"));
        Self {
            child,
            lines,
            seen: Vec::new(),
        }
    }

    /// The first line, seen or to come within `limit`, that contains `text`.
    fn wait_for(&mut self, text: &str, limit: Duration) -> String {
        if let Some(line) = self.seen.iter().find(|l| l.contains(text)) {
            return line.clone();
        }
        let deadline = Instant::now() + limit;
        loop {
            match self
                .lines
                .recv_timeout(deadline.saturating_duration_since(Instant::now()))
            {
                Ok(line) => {
                    println!("  | {line}");
                    self.seen.push(line.clone());
                    if line.contains(text) {
                        return line;
                    }
                }
                Err(e) => panic!(
                    "no line with {text:?} ({e}) after {limit:?}; output:\n{}",
                    self.seen.join("\n")
                ),
            }
        }
    }

    /// SIGTERM, then what it prints until it exits.
    fn stop(mut self) -> String {
        let _ = Command::new("kill")
            .args(["-s", "TERM", &self.child.id().to_string()])
            .status();
        while let Ok(line) = self.lines.recv_timeout(Duration::from_secs(30)) {
            println!("  | {line}");
            self.seen.push(line);
        }
        let status = self.child.wait().expect("wait");
        assert!(status.success(), "sqsafe local up ended with {status}");
        self.seen.join("\n")
    }
}

impl Drop for Up {
    fn drop(&mut self) {
        let _ = self.child.kill();
    }
}

struct Answer {
    status: u16,
    replayed: bool,
    body: String,
}

async fn post(
    client: &reqwest::Client,
    url: &str,
    key: Option<&str>,
    caller: Option<&str>,
    body: &str,
) -> Answer {
    let mut request = client
        .post(format!("{url}/orders"))
        .header("content-type", "application/json")
        .body(body.to_owned());
    if let Some(key) = key {
        request = request.header("idempotency-key", key);
    }
    if let Some(caller) = caller {
        request = request.header("x-sqsafe-local-caller", caller);
    }
    let answer = request.send().await.expect("the local API answers");
    let status = answer.status().as_u16();
    let replayed = answer
        .headers()
        .get("idempotent-replayed")
        .is_some_and(|v| v == "true");
    let body = answer.text().await.expect("body");
    Answer {
        status,
        replayed,
        body,
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn local_up_serves_an_http_api_function_whose_repeats_replay() {
    let scratch = workspace_root()
        .join("target")
        .join(format!("local-api-{}", uuid::Uuid::new_v4()));
    std::fs::create_dir_all(&scratch).expect("scratch folder");
    let template = scratch.join("template.yaml");
    std::fs::write(&template, TEMPLATE).expect("template");
    let mut up = Up::start(&template);
    let line = up.wait_for(" API   http://127.0.0.1:", Duration::from_secs(60));
    let url = line
        .split_whitespace()
        .find(|w| w.starts_with("http://"))
        .expect("the API's URL")
        .to_owned();
    assert!(
        line.contains("POST /orders"),
        "its route is printed: {line}"
    );

    let _ = rustls::crypto::ring::default_provider().install_default();
    let client = reqwest::Client::new();
    let order = r#"{"sku":"tea","quantity":2}"#;
    let first = post(&client, &url, Some("k-1"), None, order).await;
    assert_eq!(
        (first.status, first.replayed),
        (201, false),
        "{}",
        first.body
    );
    let repeat = post(&client, &url, Some("k-1"), None, order).await;
    assert_eq!((repeat.status, repeat.replayed), (201, true));
    assert_eq!(
        repeat.body, first.body,
        "the replay is the first answer, byte for byte"
    );
    let other = post(
        &client,
        &url,
        Some("k-1"),
        None,
        r#"{"sku":"tea","quantity":3}"#,
    )
    .await;
    assert_eq!(
        other.status, 422,
        "other content under the key: {}",
        other.body
    );
    let alice = "arn:aws:iam::111122223333:user/alice";
    let theirs = post(&client, &url, Some("k-1"), Some(alice), order).await;
    assert_eq!(
        (theirs.status, theirs.replayed),
        (201, false),
        "another caller's key is its own"
    );
    assert_ne!(theirs.body, first.body);
    let no_key = post(&client, &url, None, None, order).await;
    assert_eq!(no_key.status, 400, "{}", no_key.body);
    let elsewhere = client
        .get(format!("{url}/orders"))
        .send()
        .await
        .expect("answer");
    assert_eq!(
        elsewhere.status().as_u16(),
        404,
        "GET /orders is no route of it"
    );

    up.wait_for("POST /orders 201 replayed", Duration::from_secs(5));
    up.wait_for("POST /orders 422", Duration::from_secs(5));
    let output = up.stop();
    assert!(
        output.contains("sqsafe-orders-api: 5 requests answered"),
        "each routed request invoked the function once:\n{output}"
    );
    let _ = std::fs::remove_dir_all(&scratch);
}
