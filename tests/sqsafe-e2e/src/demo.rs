//! `make demo`: the same deliveries to four consumers (naive, downstream key only, sqsafe in its claim mode and in its
//! keyed mode) over real local queues, every figure counted from the run: the payments APIs' ledgers, the queues, the
//! functions' own metrics, and the DynamoDB requests each sqsafe function sent (counted by a proxy in front of moto).

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use serde_json::json;
use sqsafe_local::esm::{EventSourceMapping, MappingConfig, MappingStats};
use sqsafe_local::lambda::{FunctionInstance, FunctionSpec, INIT_TIMEOUT};
use sqsafe_local::moto::{MotoServer, venv_bin};
use sqsafe_local::stack::{
    LocalStack, StackOptions, TemplateSpec, scaled_visibility_env, template_path,
};
use sqsafe_test_servers::{
    Fault, FaultProxy, FaultProxyConfig, PaymentsApi, RunningPayments, RunningProxy,
};
use tokio::sync::watch;

use crate::consumers::{InProcessConsumer, Protection};
use crate::harness::{
    Outgoing, attribute, build_functions, dead_letter_context, drained, publish, read_all,
};
use crate::workspace_root;

/// The four consumers: the last two are charge-payment, in `SQSAFE_IDEMPOTENCY_MODE` `claim` and `keyed`.
pub const CONSUMERS: [&str; 4] = [
    "naive",
    "downstream key only",
    "sqsafe claim",
    "sqsafe keyed",
];

/// charge-payment's idempotency mode in each lane (`None`: not sqsafe).
const MODES: [Option<&str>; 4] = [None, None, Some("claim"), Some("keyed")];

/// What one consumer did, counted from the run.
#[derive(Debug, Clone, Default)]
pub struct ConsumerFigures {
    /// Records delivered to it (all deliveries, redeliveries included).
    pub deliveries: u64,
    /// Requests that reached the payments API.
    pub api_calls: u64,
    /// Charges the payments API really made.
    pub charges: u64,
    /// Their total, cents.
    pub charged_total: u64,
    /// Charges per payment id.
    pub charges_by_payment: BTreeMap<String, u64>,
    /// Requests the payments API answered from its own idempotency store.
    pub replayed_by_api: u64,
    /// Duplicates the consumer settled without calling the API (idempotency record or cache).
    pub skipped_before_call: u64,
    /// Messages in its DLQ at the end.
    pub dead_lettered: u64,
    /// The DLQ's messages: (body, the fields of sqsafe's context and the correlation id).
    pub dead_letters: Vec<(String, BTreeMap<String, String>)>,
    /// DynamoDB requests by operation (`PutItem`, ...), for an sqsafe consumer; empty for the others.
    pub dynamodb: BTreeMap<String, u64>,
}

/// DynamoDB's read operations; the others write.
fn is_read(operation: &str) -> bool {
    matches!(operation, "GetItem" | "BatchGetItem" | "Query" | "Scan")
}

impl ConsumerFigures {
    /// DynamoDB write requests.
    pub fn dynamodb_writes(&self) -> u64 {
        self.dynamodb
            .iter()
            .filter(|(op, _)| !is_read(op))
            .map(|(_, n)| n)
            .sum()
    }

    /// DynamoDB read requests.
    pub fn dynamodb_reads(&self) -> u64 {
        self.dynamodb
            .iter()
            .filter(|(op, _)| is_read(op))
            .map(|(_, n)| n)
            .sum()
    }
}

/// The demo's result.
#[derive(Debug, Clone)]
pub struct DemoReport {
    /// Distinct payments (intents) published.
    pub intents: u64,
    /// Per consumer, in [`CONSUMERS`] order.
    pub consumers: Vec<ConsumerFigures>,
    /// Where the sqsafe function's JSON logs are.
    pub log_dir: std::path::PathBuf,
}

fn payment(id: &str, amount: u64) -> String {
    json!({"type": "PaymentRequested", "version": "1", "payment_id": id, "tenant": "acme", "amount": amount,
           "currency": "EUR", "customer_id": "cus-17"})
    .to_string()
}

fn out(body: String, correlation: &str) -> Outgoing {
    Outgoing {
        body,
        correlation_id: correlation.to_owned(),
        group: None,
        dedup: None,
        traceparent: None,
    }
}

struct Lane {
    payments: RunningPayments,
    queue: String,
    dlq: String,
    stats: Arc<MappingStats>,
    /// The proxy in front of DynamoDB that counts an sqsafe function's requests.
    proxy: Option<RunningProxy>,
}

/// Runs the scenario end to end and stops everything it started.
///
/// # Errors
/// When something it needs does not start or the queues do not drain in time.
pub async fn run() -> Result<DemoReport, String> {
    let binaries = build_functions(false);
    let moto = MotoServer::start(&venv_bin())
        .await
        .map_err(|e| e.to_string())?;
    let config = sqsafe_aws::local_config_loader(&moto.endpoint())
        .load()
        .await;
    let sqs = aws_sdk_sqs::Client::new(&config);
    let dynamodb = aws_sdk_dynamodb::Client::new(&config);
    let spec = TemplateSpec::read(&template_path()).map_err(|e| e.to_string())?;
    let log_dir = workspace_root().join("target/demo-logs");
    let log_dir = log_dir.canonicalize().unwrap_or(log_dir);
    let _ = std::fs::remove_dir_all(&log_dir);

    let (stop_tx, stop) = watch::channel(false);
    let mut lanes = Vec::new();
    let mut tasks = Vec::new();
    for (i, mode) in MODES.into_iter().enumerate() {
        let payments = PaymentsApi::builder()
            .keys_in_new_table(dynamodb.clone())
            .await
            .start("127.0.0.1:0".parse().map_err(|e| format!("{e}"))?)
            .await
            .map_err(|e| e.to_string())?;
        // p-2's first charge goes through but is answered 503: the consumer sees a failure and the message comes back.
        payments.force_for_payment("p-2", Fault::After);
        let options = StackOptions {
            prefix: format!("demo{i}"),
            visibility_timeout: Some(Duration::from_secs(2)),
            parameters: BTreeMap::from([("PaymentsApiUrl".to_owned(), payments.base_url())]),
            ..StackOptions::default()
        };
        let stack = LocalStack::create(&sqs, &dynamodb, spec.clone(), options)
            .await
            .map_err(|e| e.to_string())?;
        let queue = stack
            .source_queue("charge-payment")
            .ok_or("no charge-payment queue in template.yaml")?
            .url
            .clone();
        let dlq = stack
            .dead_letter_queue("charge-payment")
            .ok_or("no charge-payment DLQ")?
            .url
            .clone();
        let mapping = MappingConfig {
            queue_url: queue.clone(),
            batch_size: 10,
            wait_seconds: 1,
            drop_delete_rate: 0.0,
            seed: 0,
        };
        let stats;
        let mut proxy = None;
        if let Some(mode) = mode {
            // No faults: the proxy only counts the function's DynamoDB requests by operation.
            let counting = FaultProxy::start(FaultProxyConfig::new(moto.endpoint()))
                .await
                .map_err(|e| e.to_string())?;
            let mut env = stack.function_env("charge-payment");
            // The queue's visibility timeout is 2 s here: the function's backoff and heartbeat follow it.
            env.extend(scaled_visibility_env(Duration::from_secs(2)));
            env.extend([
                ("AWS_ENDPOINT_URL".to_owned(), moto.endpoint()),
                ("AWS_ENDPOINT_URL_DYNAMODB".to_owned(), counting.endpoint()),
                ("SQSAFE_IDEMPOTENCY_MODE".to_owned(), mode.to_owned()),
                ("AWS_ACCESS_KEY_ID".to_owned(), "testing".to_owned()),
                ("AWS_SECRET_ACCESS_KEY".to_owned(), "testing".to_owned()),
                ("AWS_REGION".to_owned(), "us-east-1".to_owned()),
            ]);
            let function = FunctionSpec {
                name: "charge-payment".into(),
                binary: binaries.join("charge-payment"),
                env,
                timeout: Duration::from_secs(10),
                log_dir: log_dir.join(mode),
                init_timeout: INIT_TIMEOUT,
            };
            proxy = Some(counting);
            let instance = FunctionInstance::start(function, 0)
                .await
                .map_err(|e| format!("{e:?}"))?;
            let esm = EventSourceMapping::new(sqs.clone(), mapping, instance).await?;
            stats = esm.stats();
            let stop = stop.clone();
            tasks.push(tokio::spawn(async move {
                let instance = esm.run(stop).await;
                let emf = instance.stats().emf;
                instance.shutdown().await;
                emf
            }));
        } else {
            let protection = if i == 0 {
                Protection::Naive
            } else {
                Protection::DownstreamKey
            };
            let esm = EventSourceMapping::new(
                sqs.clone(),
                mapping,
                InProcessConsumer::new(protection, payments.base_url()),
            )
            .await?;
            stats = esm.stats();
            let stop = stop.clone();
            tasks.push(tokio::spawn(async move {
                esm.run(stop).await;
                BTreeMap::new()
            }));
        }
        lanes.push(Lane {
            payments,
            queue,
            dlq,
            stats,
            proxy,
        });
    }

    // Wave 1: three payments and a poison message.
    let wave1 = [
        out(payment("p-1", 1250), "corr-p1"),
        out(payment("p-2", 990), "corr-p2"),
        out(payment("p-3", 4000), "corr-p3"),
        out(
            r#"{"type":"PaymentRequested","version":"1","payment_id":"#.to_owned(),
            "corr-poison",
        ),
    ];
    for lane in &lanes {
        publish(&sqs, &lane.queue, &wave1).await;
    }
    // Wave 2, once p-1 is charged everywhere: the publisher sends p-1 again, and reuses p-1's id for another amount.
    for lane in &lanes {
        let deadline = std::time::Instant::now() + Duration::from_secs(30);
        while !lane
            .payments
            .charges()
            .iter()
            .any(|c| c.payment_id == "p-1")
        {
            if std::time::Instant::now() > deadline {
                return Err("p-1 was never charged".into());
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }
    let wave2 = [
        out(payment("p-1", 1250), "corr-p1-again"),
        out(payment("p-1", 9999), "corr-p1-changed"),
    ];
    for lane in &lanes {
        publish(&sqs, &lane.queue, &wave2).await;
    }

    let queues: Vec<String> = lanes.iter().map(|l| l.queue.clone()).collect();
    let done = drained(&sqs, &queues, Duration::from_secs(120)).await;
    let _ = stop_tx.send(true);
    let mut emfs = Vec::new();
    for task in tasks {
        emfs.push(task.await.map_err(|e| e.to_string())?);
    }
    if !done {
        return Err("the source queues did not drain in 120 s".into());
    }

    let mut consumers = Vec::new();
    for (lane, emf) in lanes.iter().zip(emfs) {
        let charges = lane.payments.charges();
        let mut by_payment = BTreeMap::new();
        for c in &charges {
            *by_payment.entry(c.payment_id.clone()).or_insert(0) += 1;
        }
        let dead = read_all(&sqs, &lane.dlq).await;
        let dead_letters = dead
            .iter()
            .map(|m| {
                let mut context = dead_letter_context(m);
                if let Some(id) = attribute(m, "correlationId") {
                    context.insert("correlationId".to_owned(), id);
                }
                (m.body().unwrap_or_default().to_owned(), context)
            })
            .collect();
        let stats = lane.payments.stats();
        let skipped = emf.get("RecordsReplayed").copied().unwrap_or(0.0)
            + emf.get("RecordsSkippedByCache").copied().unwrap_or(0.0);
        consumers.push(ConsumerFigures {
            deliveries: lane.stats.snapshot()[1],
            api_calls: stats.requests,
            charges: charges.len() as u64,
            charged_total: charges.iter().map(|c| c.amount).sum(),
            charges_by_payment: by_payment,
            replayed_by_api: stats.replays,
            skipped_before_call: skipped as u64,
            dead_lettered: dead.len() as u64,
            dead_letters,
            dynamodb: lane
                .proxy
                .as_ref()
                .map(|p| p.stats().by_operation)
                .unwrap_or_default(),
        });
    }
    for lane in lanes {
        lane.payments.shutdown().await;
        if let Some(proxy) = lane.proxy {
            proxy.shutdown().await;
        }
    }
    moto.shutdown().await;
    Ok(DemoReport {
        intents: 3,
        consumers,
        log_dir,
    })
}

/// Prints the report as the demo shows it.
pub fn print(report: &DemoReport) {
    println!(
        "\nSame deliveries, four consumers: 3 payments (p-1 1250, p-2 990, p-3 4000); p-1 republished by the"
    );
    println!(
        "publisher; p-2 charged but answered 503 so its message comes back; one poison message; p-1's id reused"
    );
    println!("with amount 9999. Every figure below was counted during this run.\n");
    println!(
        "{:<36}{:>8}{:>22}{:>14}{:>14}",
        "", CONSUMERS[0], CONSUMERS[1], CONSUMERS[2], CONSUMERS[3]
    );
    let row = |label: &str, f: &dyn Fn(&ConsumerFigures) -> String| {
        println!(
            "{label:<36}{:>8}{:>22}{:>14}{:>14}",
            f(&report.consumers[0]),
            f(&report.consumers[1]),
            f(&report.consumers[2]),
            f(&report.consumers[3])
        );
    };
    row("deliveries (incl. redeliveries)", &|c| {
        c.deliveries.to_string()
    });
    row("calls to the payments API", &|c| c.api_calls.to_string());
    row("charges really made", &|c| c.charges.to_string());
    row("total charged (cents)", &|c| c.charged_total.to_string());
    row("replayed by the payments API", &|c| {
        c.replayed_by_api.to_string()
    });
    row("duplicates skipped before the call", &|c| {
        c.skipped_before_call.to_string()
    });
    row("sent to the DLQ", &|c| c.dead_lettered.to_string());
    let sqsafe_only = |c: &ConsumerFigures, n: u64| {
        if c.dynamodb.is_empty() {
            "-".to_owned()
        } else {
            n.to_string()
        }
    };
    row("DynamoDB write requests", &|c| {
        sqsafe_only(c, c.dynamodb_writes())
    });
    row("DynamoDB read requests", &|c| {
        sqsafe_only(c, c.dynamodb_reads())
    });
    for (name, c) in CONSUMERS.iter().zip(&report.consumers) {
        if !c.dynamodb.is_empty() {
            println!("  {name:<34}{:?}", c.dynamodb);
        }
    }
    println!(
        "\nintents: {} payments; charges per payment:",
        report.intents
    );
    for (name, c) in CONSUMERS.iter().zip(&report.consumers) {
        println!("  {name:<22} {:?}", c.charges_by_payment);
    }
    for (name, c) in CONSUMERS.iter().zip(&report.consumers) {
        println!(
            "\nDLQ of the {name} consumer ({} messages):",
            c.dead_letters.len()
        );
        for (body, context) in &c.dead_letters {
            let shown: String = body.chars().take(70).collect();
            println!("  body: {shown}");
            if context.contains_key("error_kind") {
                for key in [
                    "error_kind",
                    "error",
                    "attempts",
                    "consumer",
                    "original_message_id",
                    "correlationId",
                ] {
                    if let Some(v) = context.get(key) {
                        println!("    {key:<28} {v}");
                    }
                }
            } else {
                println!(
                    "    (no context: moved by the queue's redrive policy after maxReceiveCount receives)"
                );
            }
        }
    }
    println!(
        "\nsqsafe's JSON logs: {} (claim/ and keyed/)",
        report.log_dir.display()
    );
}
