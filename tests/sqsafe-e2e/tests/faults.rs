//! Fault injection over the whole local pipeline: real function binaries (built with crash points) under a local
//! Runtime API, several concurrent event source mappings on moto's queues, a fault proxy in front of DynamoDB, a
//! payments API that fails on purpose, pollers that "crash" before deleting, visibility timeouts shorter than some of
//! the work. At the end: every intent applied exactly once, every poison message in the DLQ with its context, nothing
//! lost, no record left IN_PROGRESS, nothing in the DLQ but poison and reused keys (never `lease_lost` or
//! `in_progress`), and no delivery spent on a write that met its own earlier try: every such write the proxy saw was
//! resolved by the function (`ambiguous write resolved` in its logs).
//!
//! The runs: charge-payment in the claim mode and in the keyed mode (1000 intents each), in the keyed mode with its
//! payments API's process SIGKILLed in flight and started again on the same key table (300 intents), apply-ledger
//! (400 entries), and charge-payment twice more with its spans exported (`SQSAFE_TRACES=otlp`, 300 intents each) to a collector
//! that never answers (claim mode) and to one that answers after 1.5 s (keyed mode). The keyed run's batch reads
//! fail too: the proxy answers some `BatchGetItem`s with every key unprocessed, and 5 intents, published among the
//! others, have a stored idempotency item that does not parse. Those must end in the DLQ (sqsafe's letter,
//! `inconsistent_record` on the 10th attempt, or SQS's move when that delivery died) and never be charged, while
//! the intents that share their batches are charged once. Each charge-payment run's verdict prints `answers after
//! the deadline` (invocations the local Runtime API killed at their deadline), `charged twice` and `lost`, and
//! asserts that all three are 0. Apply-ledger prints the first and does not assert it.
//!
//! The stream run (`stream.rs`): charge-payment fed a Kinesis stream of two shards through Lambda's stream poller
//! (checkpoint, bisect, retry) under the same faults, with poison records and payload mismatches mid-shard: every
//! payment charged once, in the order of its customer's records, each poison record and mismatch in the failure queue
//! with its content and its place in the shard.
//!
//! The seed is printed; `SQSAFE_FAULT_SEED=<n>` replays a run. `SQSAFE_FAULTS_HEAVY=1` runs 4000 payment intents
//! (1000 in each trace run) and 600 ledger entries (moto copies both tables on every transaction, so its time and
//! memory grow with their size; 1500 entries took it past 11 GB).
//!
//! The verdict does not depend on the machine's speed: a run may take as long as it needs while messages keep leaving
//! the source queue, and fails only when none left for as long as one message may take by the protocol (see
//! `ProgressWatch::for_pipeline`), printing what was left: the queues by state, the records still IN_PROGRESS with
//! their lease ends, the mappings' counters and the last faults injected. Messages are fed to the queue as it drains
//! (at most `SQSAFE_FAULTS_BACKLOG`, default 200, at a time): moto's receive walks the whole queue per message, so a
//! backlog of all 1,400 made moto's single core the bottleneck.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use aws_sdk_dynamodb::types::AttributeValue;
use serde_json::json;
use sqsafe_e2e::harness::{
    Outgoing, PipelineTimings, ProgressWatch, RunEnd, attribute, build_functions, context_field,
    feed, payments_binary, queue_state, read_all, watch_run,
};
use sqsafe_e2e::workspace_root;
use sqsafe_local::esm::{EventSourceMapping, MappingConfig, MappingStats};
use sqsafe_local::lambda::{FunctionInstance, FunctionSpec, INIT_TIMEOUT, InstanceStats};
use sqsafe_local::moto::{MotoServer, venv_bin};
use sqsafe_local::stack::{LocalStack, StackOptions, TemplateSpec, template_path};
use sqsafe_test_servers::proxy::SelfMetWrite;
use sqsafe_test_servers::{
    Charge, FaultProxy, FaultProxyConfig, PaymentsApi, ProxyStats, RunningPayments, Stats,
};
use sqsafe_testkit::{create_table, unique_name};
use tokio::io::{AsyncBufReadExt, BufReader};
use tokio::sync::{oneshot, watch};

// charge-payment on a Kinesis stream under the same faults (tests/faults/stream.rs).
#[path = "faults/stream.rs"]
mod stream;

fn seed() -> u64 {
    std::env::var("SQSAFE_FAULT_SEED")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(|| {
            std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map(|d| d.as_secs())
                .unwrap_or(1)
        })
}

/// The functions' timeout here: short, so that a slow payments call outlives it (one of the faults).
const FUNCTION_TIMEOUT: Duration = Duration::from_secs(4);
/// The payments API's lease here (`sqsafe::api`'s claim of a key): longer than its slowest charge (3.5 s), and short
/// enough that a claim its killed process left is taken over well within the run's stall bound.
const PAYMENTS_LEASE: Duration = Duration::from_secs(5);
/// The source queue's visibility timeout here.
const VISIBILITY_TIMEOUT: Duration = Duration::from_secs(3);
/// The backoff the functions get here (`BACKOFF_BASE_SECONDS`, `BACKOFF_MAX_SECONDS`).
const BACKOFF_BASE: Duration = Duration::from_secs(1);
const BACKOFF_MAX: Duration = Duration::from_secs(3);
/// Receives before SQS moves a message to the DLQ here (the template's 5 is too few for faults this frequent).
const MAX_RECEIVES: u32 = 10;
/// Messages the feed keeps in the source queue at most (see `sqsafe_e2e::harness::feed`): 4 pollers take 40 at a
/// time, and the rest of 200 covers those held back by a backoff or a lease. `SQSAFE_FAULTS_BACKLOG=<n>` sets another
/// (a number above the messages published sends them all at once, as the suite did before it had a feed).
fn backlog() -> u64 {
    std::env::var("SQSAFE_FAULTS_BACKLOG")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(200)
}

/// When a run has stalled: no message left the queue for as long as one message may take, by the protocol, from its
/// first receive to leaving (see [`ProgressWatch::for_pipeline`]).
fn progress_watch() -> ProgressWatch {
    ProgressWatch::for_pipeline(PipelineTimings {
        visibility_timeout: VISIBILITY_TIMEOUT,
        function_timeout: FUNCTION_TIMEOUT,
        backoff_max: BACKOFF_MAX,
        takeover_margin: sqsafe_idempotency::DEFAULT_TAKEOVER_MARGIN,
        max_receives: MAX_RECEIVES,
    })
}

fn heavy() -> bool {
    std::env::var("SQSAFE_FAULTS_HEAVY").is_ok_and(|v| v == "1")
}

struct Pipeline {
    moto: MotoServer,
    proxy: sqsafe_test_servers::RunningProxy,
    sqs: aws_sdk_sqs::Client,
    dynamodb: aws_sdk_dynamodb::Client,
    stack: LocalStack,
    /// The prefix of the stack's names, which also names the run's log folders.
    prefix: String,
    options: PipelineOptions,
}

/// What a pipeline changes from the suite's usual one.
#[derive(Debug, Clone)]
struct PipelineOptions {
    /// `SQSAFE_IDEMPOTENCY_MODE` of the functions.
    mode: &'static str,
    /// The fault proxy's `unprocessed_keys_rate`: `BatchGetItem`s answered with every key unprocessed.
    unprocessed_keys_rate: f64,
    /// More environment for the functions (the trace exporter's settings).
    env: Vec<(String, String)>,
}

impl PipelineOptions {
    fn claim() -> Self {
        Self {
            mode: "claim",
            unprocessed_keys_rate: 0.0,
            env: Vec::new(),
        }
    }
}

async fn pipeline(seed: u64, prefix: &str, parameters: BTreeMap<String, String>) -> Pipeline {
    pipeline_with(seed, prefix, parameters, PipelineOptions::claim()).await
}

async fn pipeline_with(
    seed: u64,
    prefix: &str,
    parameters: BTreeMap<String, String>,
    options: PipelineOptions,
) -> Pipeline {
    local_aws(seed, &options)
        .await
        .pipeline(prefix, parameters, options)
        .await
}

/// moto and the fault proxy in front of it, before the stack is made (a payments API is started in between, to give
/// the stack its URL).
struct LocalAws {
    moto: MotoServer,
    proxy: sqsafe_test_servers::RunningProxy,
    sqs: aws_sdk_sqs::Client,
    dynamodb: aws_sdk_dynamodb::Client,
}

async fn local_aws(seed: u64, options: &PipelineOptions) -> LocalAws {
    let moto = MotoServer::start(&venv_bin()).await.expect("moto server");
    let proxy = FaultProxy::start(FaultProxyConfig {
        upstream: moto.endpoint(),
        seed,
        throttle_rate: 0.04,
        error_500_rate: 0.02,
        after_write_500_rate: 0.01,
        unprocessed_keys_rate: options.unprocessed_keys_rate,
        operations: Some(
            [
                "PutItem",
                "UpdateItem",
                "DeleteItem",
                "TransactWriteItems",
                "BatchGetItem",
            ]
            .iter()
            .map(|s| (*s).to_owned())
            .collect(),
        ),
    })
    .await
    .expect("fault proxy");
    proxy.set_enabled(false);
    let config = sqsafe_testkit::sdk_config_at(&moto.endpoint()).await;
    let sqs = aws_sdk_sqs::Client::new(&config);
    let dynamodb = aws_sdk_dynamodb::Client::new(&config);
    LocalAws {
        moto,
        proxy,
        sqs,
        dynamodb,
    }
}

impl LocalAws {
    /// The template's stack in moto, named with `prefix`.
    async fn pipeline(
        self,
        prefix: &str,
        parameters: BTreeMap<String, String>,
        options: PipelineOptions,
    ) -> Pipeline {
        let LocalAws {
            moto,
            proxy,
            sqs,
            dynamodb,
        } = self;
        let spec = TemplateSpec::read(&template_path()).expect("template.yaml");
        let mut parameters = parameters;
        // Faults here are far more frequent than in production: give each message more receives than the template's 5.
        parameters.insert("MaxAttempts".into(), MAX_RECEIVES.to_string());
        let stack_options = StackOptions {
            prefix: prefix.to_owned(),
            visibility_timeout: Some(VISIBILITY_TIMEOUT),
            parameters,
            max_receive_count: Some(MAX_RECEIVES),
            ..StackOptions::default()
        };
        let stack = LocalStack::create(&sqs, &dynamodb, spec, stack_options)
            .await
            .expect("local stack");
        Pipeline {
            moto,
            proxy,
            sqs,
            dynamodb,
            stack,
            prefix: prefix.to_owned(),
            options,
        }
    }
}

impl Pipeline {
    fn function_env(&self, binary: &str, seed: u64) -> Vec<(String, String)> {
        let mut env = self.stack.function_env(binary);
        env.extend([
            ("AWS_ENDPOINT_URL".to_owned(), self.moto.endpoint()),
            (
                "AWS_ENDPOINT_URL_DYNAMODB".to_owned(),
                self.proxy.endpoint(),
            ),
            ("AWS_ACCESS_KEY_ID".to_owned(), "testing".to_owned()),
            ("AWS_SECRET_ACCESS_KEY".to_owned(), "testing".to_owned()),
            ("AWS_REGION".to_owned(), "us-east-1".to_owned()),
            // INFO: the engine reports each ambiguous write it resolved at that level.
            ("AWS_LAMBDA_LOG_LEVEL".to_owned(), "INFO".to_owned()),
            // The backoff on the scale of the 3 s visibility timeout it replaces (production: 60 s doubling to 900 s).
            // The visibility heartbeat keeps its defaults (every 20 s): it never fires within the 4 s function
            // timeout, so a payments call slower than the visibility timeout still lets the message come back while
            // its first attempt runs, which is one of the faults this suite wants.
            (
                "BACKOFF_BASE_SECONDS".to_owned(),
                BACKOFF_BASE.as_secs().to_string(),
            ),
            (
                "BACKOFF_MAX_SECONDS".to_owned(),
                BACKOFF_MAX.as_secs().to_string(),
            ),
            (
                "SQSAFE_CRASH_POINTS".to_owned(),
                "after_claim,after_effect,after_complete".to_owned(),
            ),
            ("SQSAFE_CRASH_RATE".to_owned(), "0.02".to_owned()),
            ("SQSAFE_CRASH_SEED".to_owned(), seed.to_string()),
            (
                "SQSAFE_IDEMPOTENCY_MODE".to_owned(),
                self.options.mode.to_owned(),
            ),
        ]);
        env.extend(self.options.env.iter().cloned());
        env
    }

    /// Feeds `messages` to the source queue (see [`feed`]) and runs `pollers` mappings, each with its own function
    /// instance, until everything fed has left the queue; fails with a report of what is left when no message left
    /// it for the pipeline's stall bound. Returns the run and the message ids, in the order of `messages`. The
    /// instances log into `target/fault-logs/<prefix>-<wave>/`: emptied first, so that the logs read afterwards are
    /// this run's, and named after the run, so that a failed run's logs outlive the suite's later runs.
    async fn run(
        &self,
        binary: &str,
        wave: &str,
        seed: u64,
        pollers: usize,
        drop_delete_rate: f64,
        messages: Vec<Outgoing>,
    ) -> (Run, Vec<String>) {
        let binaries = build_functions(true);
        let queue = self.stack.source_queue(binary).expect("queue").url.clone();
        let dlq = self
            .stack
            .dead_letter_queue(binary)
            .expect("dlq")
            .url
            .clone();
        let log_dir = workspace_root().join(format!("target/fault-logs/{}-{wave}", self.prefix));
        let _ = std::fs::remove_dir_all(&log_dir);
        let (stop_tx, stop) = watch::channel(false);
        let mut tasks = Vec::new();
        let mut stats: Vec<Arc<MappingStats>> = Vec::new();
        for i in 0..pollers {
            let spec = FunctionSpec {
                name: binary.to_owned(),
                binary: binaries.join(binary),
                env: self.function_env(binary, seed),
                timeout: FUNCTION_TIMEOUT,
                log_dir: log_dir.clone(),
                init_timeout: INIT_TIMEOUT,
            };
            let instance = FunctionInstance::start(spec, i).await.expect("instance");
            let config = MappingConfig {
                queue_url: queue.clone(),
                batch_size: self.stack.batch_size(binary),
                wait_seconds: 1,
                drop_delete_rate,
                seed: seed.wrapping_add(i as u64 * 7919),
            };
            let esm = EventSourceMapping::new(self.sqs.clone(), config, instance)
                .await
                .expect("mapping");
            stats.push(esm.stats());
            let stop = stop.clone();
            tasks.push(tokio::spawn(async move {
                let instance = esm.run(stop).await;
                let s = instance.stats();
                instance.shutdown().await;
                s
            }));
        }
        self.proxy.set_enabled(true);
        let fed = feed(&self.sqs, &queue, messages, backlog());
        let label = format!("{binary} {wave}");
        let end = watch_run(&self.sqs, &queue, &dlq, &fed, progress_watch(), &label).await;
        self.proxy.set_enabled(false);
        if let RunEnd::Stalled { .. } = end {
            self.stall_report(&queue, &dlq, &stats).await;
        }
        let _ = stop_tx.send(true);
        let mut instances = Vec::new();
        for t in tasks {
            instances.push(t.await.expect("poller task"));
        }
        if let RunEnd::Stalled { .. } = end {
            println!(
                "faults injected by crash point: {:?}",
                sum_faults(&instances)
            );
            panic!(
                "{label}: no message left the queue for the stall bound (seed {seed}): {end:?}; the state left is above"
            );
        }
        let ids = fed.ids().await;
        (
            Run {
                instances,
                mappings: stats.iter().map(|s| s.snapshot()).collect(),
                logs: LogFindings::read(&log_dir),
            },
            ids,
        )
    }

    /// What a stalled run left: the queues, the records still IN_PROGRESS with their lease ends, the mappings'
    /// counters and the last faults the proxy injected.
    async fn stall_report(&self, queue: &str, dlq: &str, stats: &[Arc<MappingStats>]) {
        let now_ms = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_millis() as i64)
            .unwrap_or(0);
        println!(
            "stalled: source queue {}",
            queue_state(&self.sqs, queue).await
        );
        println!("stalled: DLQ {}", queue_state(&self.sqs, dlq).await);
        let in_progress: Vec<_> = self
            .records()
            .await
            .into_iter()
            .filter(|r| {
                r.get("status")
                    .and_then(|s| s.as_s().ok())
                    .map(String::as_str)
                    == Some("IN_PROGRESS")
            })
            .collect();
        println!("stalled: {} records IN_PROGRESS", in_progress.len());
        for r in in_progress.iter().take(20) {
            let key = r
                .get("pk")
                .and_then(|v| v.as_s().ok())
                .cloned()
                .unwrap_or_default();
            let lease = r
                .get("lease_expires_at")
                .and_then(|v| v.as_n().ok())
                .and_then(|n| n.parse::<i64>().ok());
            match lease {
                Some(ms) if ms < now_ms => println!(
                    "  {key}: lease ended {:.1} s ago",
                    (now_ms - ms) as f64 / 1000.0
                ),
                Some(ms) => println!(
                    "  {key}: lease ends in {:.1} s",
                    (ms - now_ms) as f64 / 1000.0
                ),
                None => println!("  {key}: no lease"),
            }
        }
        for (i, s) in stats.iter().enumerate() {
            let [invocations, records, deleted, reported, failed, dropped] = s.snapshot();
            println!(
                "stalled: mapping {i}: {invocations} invocations, {records} records, {deleted} deleted, {reported} \
                 reported failed, {failed} invocations failed whole, {dropped} deletes dropped"
            );
        }
        println!("stalled: last faults injected at the DynamoDB proxy (oldest first):");
        for f in &self.proxy.stats().recent_faults {
            let ago = f.at.elapsed().unwrap_or_default();
            println!(
                "  {:.1} s ago: {} {}",
                ago.as_secs_f64(),
                f.operation,
                f.fault
            );
        }
    }

    /// Stores an idempotency item for charge-payment's intent `payment_id` that no read can parse (its status is
    /// none), straight into moto: every delivery of that intent fails on reading it.
    async fn store_unreadable_record(&self, payment_id: &str) {
        let key = sqsafe_idempotency::KeyBuilder::new("charge-payment", 1)
            .tenant("acme")
            .intent("payment", payment_id)
            .build()
            .expect("key");
        self.dynamodb
            .put_item()
            .table_name(&self.stack.tables["IdempotencyTable"])
            .item("pk", AttributeValue::S(key.as_str().to_owned()))
            .item("status", AttributeValue::S("NOT_A_STATUS".to_owned()))
            .send()
            .await
            .expect("an unreadable idempotency item");
    }

    async fn records(&self) -> Vec<BTreeMap<String, AttributeValue>> {
        let table = &self.stack.tables["IdempotencyTable"];
        let mut out = Vec::new();
        let mut start = None;
        loop {
            let page = self
                .dynamodb
                .scan()
                .table_name(table)
                .set_exclusive_start_key(start)
                .send()
                .await
                .expect("scan");
            out.extend(
                page.items()
                    .iter()
                    .map(|i| i.clone().into_iter().collect::<BTreeMap<_, _>>()),
            );
            match page.last_evaluated_key() {
                Some(k) => start = Some(k.clone()),
                None => return out,
            }
        }
    }
}

/// One run of the pipeline: what the instances and mappings counted, and what the functions logged.
struct Run {
    instances: Vec<InstanceStats>,
    mappings: Vec<[u64; 6]>,
    logs: LogFindings,
}

/// A `record failed` line.
#[derive(Debug, Clone)]
struct Failure {
    message_id: String,
    kind: String,
    key: Option<String>,
}

/// What the functions' logs say about ambiguity and outcomes, read from their files after a run (JSON lines, fields
/// at the top level, the record's span in `spans`; see sqsafe-telemetry), plus the crash markers of the
/// fault-injection build (`sqsafe-fault: SIGKILL at <point> key=<key>`).
#[derive(Debug, Default)]
struct LogFindings {
    /// `ambiguous write resolved`: (write, idempotency key).
    resolved: Vec<(String, String)>,
    /// Idempotency keys whose completion try the function cut at the invocation's deadline reserve, once per cut
    /// (the engine's `completion failed after the effect ran; ...` line, its error ending with [`DEADLINE_CUT`]).
    completions_cut: Vec<String>,
    /// `record failed`, every disposition.
    failed: Vec<Failure>,
    /// Per message id, the outcome of each delivery that logged one: `ok` (`record handled`) or the error kind.
    outcomes: BTreeMap<String, Vec<String>>,
    /// SIGKILLs per idempotency key.
    kills: BTreeMap<String, u64>,
    /// Per message id, its idempotency key and the highest receive count any of its lines logged.
    receives: BTreeMap<String, (String, u64)>,
    /// Span exports that failed, were cut or were not made (sqsafe-telemetry's `spans not exported, dropped: ...`).
    spans_dropped: u64,
    /// Of those, the exports cut (or not made) to answer before the invocation's deadline.
    spans_cut: u64,
}

impl LogFindings {
    fn read(dir: &Path) -> Self {
        let mut found = Self::default();
        let files: Vec<PathBuf> = std::fs::read_dir(dir)
            .map(|d| d.filter_map(|e| e.ok().map(|e| e.path())).collect())
            .unwrap_or_default();
        assert!(!files.is_empty(), "no function logs in {}", dir.display());
        for file in files {
            let text = std::fs::read_to_string(&file).expect("function log");
            for line in text.lines() {
                found.scan(line);
            }
        }
        found
    }

    fn scan(&mut self, line: &str) {
        if let Some(rest) = line.strip_prefix("sqsafe-fault: SIGKILL at ") {
            if let Some((_, key)) = rest.split_once(" key=") {
                *self.kills.entry(key.to_owned()).or_default() += 1;
            }
            return;
        }
        let Ok(doc) = serde_json::from_str::<serde_json::Value>(line) else {
            return;
        };
        // A field of the event, else of the innermost span that has it.
        let field = |name: &str| -> Option<String> {
            doc.get(name)
                .or_else(|| {
                    doc.get("spans")?
                        .as_array()?
                        .iter()
                        .rev()
                        .find_map(|s| s.get(name))
                })
                .and_then(|v| v.as_str())
                .map(str::to_owned)
        };
        let receive_count = doc
            .get("spans")
            .and_then(|s| s.as_array())
            .and_then(|spans| spans.iter().rev().find_map(|s| s.get("receive_count")))
            .or_else(|| doc.get("receive_count"))
            .and_then(|v| v.as_u64());
        if let (Some(id), Some(key), Some(count)) =
            (field("message_id"), field("idempotency_key"), receive_count)
        {
            let seen = self.receives.entry(id).or_insert((key, 0));
            seen.1 = seen.1.max(count);
        }
        // Only the line that reports the failure once, as it happened (the batch's `record failed` repeats it).
        if doc
            .get("message")
            .and_then(|m| m.as_str())
            .is_some_and(|m| m.starts_with("completion failed after the effect ran; "))
            && let (Some(error), Some(key)) = (field("error"), field("idempotency_key"))
            && error.ends_with(DEADLINE_CUT)
        {
            self.completions_cut.push(key);
        }
        if let Some(why) = doc
            .get("message")
            .and_then(|m| m.as_str())
            .and_then(|m| m.strip_prefix(SPANS_DROPPED))
        {
            self.spans_dropped += 1;
            if why.contains("cut to answer before the invocation's deadline")
                || why.contains("deadline is too near")
            {
                self.spans_cut += 1;
            }
        }
        match doc.get("message").and_then(|m| m.as_str()) {
            Some("ambiguous write resolved") => self.resolved.push((
                field("write").unwrap_or_default(),
                field("idempotency_key").unwrap_or_default(),
            )),
            Some("record failed") => {
                let failure = Failure {
                    message_id: field("message_id").unwrap_or_default(),
                    kind: field("error_kind").unwrap_or_default(),
                    key: field("idempotency_key"),
                };
                self.outcomes
                    .entry(failure.message_id.clone())
                    .or_default()
                    .push(failure.kind.clone());
                self.failed.push(failure);
            }
            Some("record handled") => {
                if let Some(id) = field("message_id") {
                    self.outcomes.entry(id).or_default().push("ok".to_owned());
                }
            }
            _ => {}
        }
    }

    fn merge(mut self, other: Self) -> Self {
        self.resolved.extend(other.resolved);
        self.completions_cut.extend(other.completions_cut);
        self.failed.extend(other.failed);
        self.spans_dropped += other.spans_dropped;
        self.spans_cut += other.spans_cut;
        for (id, outcomes) in other.outcomes {
            self.outcomes.entry(id).or_default().extend(outcomes);
        }
        for (key, n) in other.kills {
            *self.kills.entry(key).or_default() += n;
        }
        for (id, (key, count)) in other.receives {
            let seen = self.receives.entry(id).or_insert((key, 0));
            seen.1 = seen.1.max(count);
        }
        self
    }

    /// Per idempotency key, deliveries that ended with their process (a SIGKILL at a crash point of any record of the
    /// batch, or the function timeout) before logging an outcome: for each message, its receives up to the last one
    /// that logged a line, less the outcomes it logged.
    fn died_deliveries(&self) -> BTreeMap<String, u64> {
        let mut died = BTreeMap::new();
        for (id, (key, receives)) in &self.receives {
            let logged = self.outcomes.get(id).map_or(0, Vec::len) as u64;
            let n = receives.saturating_sub(logged);
            if n > 0 {
                *died.entry(key.clone()).or_default() += n;
            }
        }
        died
    }
}

/// How sqsafe-telemetry begins the line of an export whose spans were dropped (failed, cut or not made).
const SPANS_DROPPED: &str = "spans not exported, dropped: ";

/// How sqsafe-idempotency reports a completion try it cut because no time was left before the deadline reserve.
const DEADLINE_CUT: &str = "timed out: no time left before the invocation's deadline reserve";

/// Error kinds that, in the DLQ, would mean a delivery was lost to a conflict with a live or lost claim: never
/// expected there (an ambiguous write is resolved; a live claim holds its duplicate back until its lease ends).
const CONFLICT_KINDS: [&str; 2] = ["in_progress", "lease_lost"];

/// Deliveries spent on writes that met their own earlier try: how the proxy's self-met writes were answered.
#[derive(Debug, Default)]
struct SelfConflicts {
    /// Self-met writes the function resolved (a matching `ambiguous write resolved` line).
    resolved: u64,
    /// Self-met transactions: sqsafe makes them idempotent with the claim token as client request token, or replays
    /// them from the record; no log line is expected, only no failed delivery.
    transactions: u64,
    /// Self-met writes with no matching line whose process lived to log one: (operation, key).
    unresolved: Vec<(String, String)>,
    /// Self-met writes with no matching line, on a key with a delivery that died with its process: the proxy
    /// relayed the answer, and the process was killed (a crash point of another record of its batch, or the function
    /// timeout) before it could log. The record's lease then holds the key until it ends, as after any crash.
    excused: Vec<(String, String)>,
    /// Self-met writes with no matching line whose try the function cut at the invocation's deadline reserve (it
    /// logged that operation on that key as timed out there): the SDK's own retry met the try's first write, and the
    /// function stopped waiting before the answer came. The write landed; the key's next delivery reads it.
    abandoned: Vec<(String, String)>,
    /// Of the self-met writes not resolved, those whose key then failed a delivery as `in_progress` or
    /// `lease_lost`: deliveries spent on a self-conflict.
    spent: Vec<(String, String)>,
}

impl SelfConflicts {
    fn of(proxy: &ProxyStats, logs: &LogFindings) -> Self {
        let mut lines: Vec<(String, String)> = logs.resolved.clone();
        let mut cut = logs.completions_cut.clone();
        let died = logs.died_deliveries();
        let mut out = Self::default();
        for write in &proxy.self_met {
            let names: &[&str] = match write.operation.as_str() {
                // A claim, or the keyed mode's completion.
                "PutItem" => &["claim", "put_completed"],
                "UpdateItem" => &["complete", "extend"],
                "DeleteItem" => &["release"],
                _ => &[],
            };
            let conflict_failed = logs.failed.iter().any(|f| {
                f.key.as_deref() == Some(write.key.as_str())
                    && CONFLICT_KINDS.contains(&f.kind.as_str())
            });
            if names.is_empty() {
                out.transactions += 1;
                if conflict_failed {
                    out.spent.push((write.operation.clone(), write.key.clone()));
                }
                continue;
            }
            let resolved_at = lines
                .iter()
                .position(|(w, k)| *k == write.key && names.contains(&w.as_str()));
            let cut_at = (names.contains(&"complete") || names.contains(&"put_completed"))
                .then(|| cut.iter().position(|k| *k == write.key))
                .flatten();
            match (resolved_at, cut_at) {
                (Some(i), _) => {
                    lines.swap_remove(i);
                    out.resolved += 1;
                }
                (None, Some(i)) => {
                    cut.swap_remove(i);
                    out.abandoned
                        .push((write.operation.clone(), write.key.clone()));
                }
                (None, None) if died.contains_key(&write.key) => out
                    .excused
                    .push((write.operation.clone(), write.key.clone())),
                (None, None) => {
                    out.unresolved
                        .push((write.operation.clone(), write.key.clone()));
                    if conflict_failed {
                        out.spent.push((write.operation.clone(), write.key.clone()));
                    }
                }
            }
        }
        out
    }
}

/// The kinds of dead-lettered messages: the context's `error_kind`, or `(moved by SQS)` for a message without sqsafe's
/// context.
fn kinds_of(messages: &[aws_sdk_sqs::types::Message]) -> BTreeMap<String, usize> {
    let mut kinds = BTreeMap::new();
    for m in messages {
        let kind = context_field(m, "error_kind").unwrap_or_else(|| "(moved by SQS)".to_owned());
        *kinds.entry(kind).or_default() += 1;
    }
    kinds
}

/// One copy of a message in the DLQ: sqsafe's, with the error kind and the attempts its context names, or one SQS
/// moved (no context: both `None`).
#[derive(Debug)]
struct DeadLetter {
    kind: Option<String>,
    attempts: Option<u64>,
}

impl DeadLetter {
    fn of(m: &aws_sdk_sqs::types::Message) -> Self {
        Self {
            kind: context_field(m, "error_kind"),
            attempts: context_field(m, "attempts").and_then(|n| n.parse().ok()),
        }
    }
}

impl std::fmt::Display for DeadLetter {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match (&self.kind, self.attempts) {
            (Some(kind), Some(n)) => write!(f, "{kind} after {n} attempts"),
            (Some(kind), None) => write!(f, "{kind}"),
            (None, _) => write!(f, "moved by SQS"),
        }
    }
}

/// A message SQS moved to the DLQ without sqsafe's context: how each of its deliveries ended, from the logs. It is
/// crash-caused when fewer deliveries logged an outcome than it was received (the others died with the process: a
/// SIGKILL at a crash point, or the function timeout) and none ended `lease_lost`. An `in_progress` delivery is then
/// the lease of a crashed attempt holding its duplicate back; one caused by an attempt meeting its own claim is
/// caught by [`SelfConflicts`] instead.
#[derive(Debug)]
struct MovedBySqs {
    message_id: String,
    key: String,
    receives: u64,
    outcomes: Vec<String>,
    kills_on_key: u64,
}

impl MovedBySqs {
    fn of(m: &aws_sdk_sqs::types::Message, logs: &LogFindings, max_receives: u64) -> Self {
        let message_id = m.message_id().unwrap_or_default().to_owned();
        let payment = serde_json::from_str::<serde_json::Value>(m.body().unwrap_or_default())
            .ok()
            .and_then(|b| b["payment_id"].as_str().map(str::to_owned))
            .unwrap_or_default();
        let key = format!("charge-payment#v1#acme#payment:{payment}");
        // SQS moves a message on the receive after its `max_receives`-th. (Its ApproximateReceiveCount, read back from
        // the DLQ, also counts the test's own receive of the DLQ.)
        Self {
            outcomes: logs.outcomes.get(&message_id).cloned().unwrap_or_default(),
            kills_on_key: logs.kills.get(&key).copied().unwrap_or(0),
            message_id,
            key,
            receives: max_receives,
        }
    }

    fn killed_deliveries(&self) -> u64 {
        self.receives.saturating_sub(self.outcomes.len() as u64)
    }

    fn crash_caused(&self) -> bool {
        self.killed_deliveries() > 0 && !self.outcomes.iter().any(|k| k == "lease_lost")
    }
}

impl std::fmt::Display for MovedBySqs {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "{} ({}): {} receives, {} ended with the process (SIGKILLs on its key: {}), logged outcomes {:?}",
            self.message_id,
            self.key,
            self.receives,
            self.killed_deliveries(),
            self.kills_on_key,
            self.outcomes
        )
    }
}

/// Invocations the Runtime API killed at their deadline because they had not answered (Lambda's `Task timed out`):
/// each one's records come back, and what ran of them happens again.
fn answers_after_the_deadline(instances: &[InstanceStats]) -> u64 {
    instances.iter().map(|s| s.timeouts).sum()
}

/// The story of each invocation the Runtime API killed at its deadline, from the function logs in `dirs`: its
/// platform lines and what the function logged under its request id (or that it logged nothing: the event was never
/// taken), each line cut to 300 characters, the first 5 invocations. A failed run's logs are gone with its machine (CI);
/// this is what tells a slow record from a process that never took the event.
fn print_timed_out(dirs: &[PathBuf]) {
    const SHOWN: usize = 5;
    const LINES: usize = 40;
    let mut shown = 0;
    for dir in dirs {
        let Ok(entries) = std::fs::read_dir(dir) else {
            continue;
        };
        let mut files: Vec<PathBuf> = entries.filter_map(|e| e.ok().map(|e| e.path())).collect();
        files.sort();
        for file in files {
            let text = std::fs::read_to_string(&file).unwrap_or_default();
            let lines: Vec<&str> = text.lines().collect();
            for (at, line) in lines.iter().enumerate() {
                let Some((id, _)) = line.split_once(" Task timed out after ") else {
                    continue;
                };
                if shown == SHOWN {
                    return;
                }
                shown += 1;
                let start = lines[..at]
                    .iter()
                    .rposition(|l| l.starts_with(&format!("START RequestId: {id}")))
                    .unwrap_or(at);
                let own: Vec<&&str> = lines[start..=at]
                    .iter()
                    .filter(|l| !l.starts_with('{') || l.contains(id))
                    .collect();
                let logged = own.iter().any(|l| l.starts_with('{'));
                println!(
                    "timed out: {id} in {} (line {}), {}",
                    file.display(),
                    at + 1,
                    if logged {
                        "the function logged under it"
                    } else {
                        "nothing logged under it (was the event taken?)"
                    }
                );
                for l in own.iter().rev().take(LINES).rev() {
                    let cut: String = l.chars().take(300).collect();
                    println!("  | {cut}");
                }
            }
        }
    }
}

fn sum_faults(instances: &[InstanceStats]) -> BTreeMap<String, u64> {
    let mut total = BTreeMap::new();
    for s in instances {
        for (k, v) in &s.fault_markers {
            *total.entry(k.clone()).or_insert(0) += v;
        }
        *total.entry("function timeouts".to_owned()).or_insert(0) += s.timeouts;
        *total.entry("process crashes seen".to_owned()).or_insert(0) += s.crashes;
    }
    total
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn charge_payment_applies_every_intent_once_under_faults() {
    charge_payment_under_faults(ChargeRun::new("claim")).await;
}

/// The keyed mode under the same faults: no claim, so a duplicate delivered while another runs makes the call too,
/// and the payments API's `Idempotency-Key` keeps it to one charge (its `409` for a key in flight brings the record
/// back). Its batch reads fail too: some `BatchGetItem`s come back with every key unprocessed, and a few intents'
/// stored items do not parse, so every batch that holds one of them loses its read and each record reads its own
/// key. The same verdict: one charge per intent, nothing lost, nothing in the DLQ but poison, reused keys and the
/// unreadable intents (never charged).
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn charge_payment_applies_every_intent_once_under_faults_in_the_keyed_mode() {
    charge_payment_under_faults(ChargeRun {
        unreadable: 5,
        unprocessed_keys_rate: 0.05,
        ..ChargeRun::new("keyed")
    })
    .await;
}

/// The trace exporter under the same faults, with a collector that takes each export and never answers: every
/// invocation's flush waits until it is cut, 250 ms before the deadline at the latest
/// (`sqsafe_telemetry::traces::ANSWER_MARGIN`), and the batch's answer must still come before the deadline (before
/// that cut, a silent collector held it 2 s, past the deadline of a batch that had used more than 2 s of its 4).
///
/// The export runs after the batch whatever the mode, so the mode is not what the two trace runs test: one runs in
/// each, so that each mode meets batches that answer late. A batch that waits on its collector is deleted later, so
/// more of its messages come back (3 s visibility timeout) before their deletes and must replay: from the completed
/// record in the claim mode, from the batch's read (or the payments API's `Idempotency-Key`) in the keyed mode.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn charge_payment_exports_traces_to_a_silent_collector_under_faults() {
    let collector = Collector::start(CollectorKind::BlackHole).await;
    let verdict = charge_payment_under_faults(ChargeRun {
        traces: Some(collector.endpoint()),
        ..ChargeRun::trace_run("claim", "silent collector")
    })
    .await;
    let seen = collector.stats();
    println!("collector (never answers) {seen}");
    assert!(
        seen.requests > 0,
        "the functions exported to the collector: {seen}"
    );
    assert!(
        verdict.spans_dropped > 0,
        "exports to a collector that never answers are dropped, and logged"
    );
}

/// The trace exporter under the same faults, with a collector that answers each export after 1.5 s: a flush that
/// starts early enough waits for it, one that starts late is cut; the batch's answer must come before the deadline
/// either way. Keyed mode: see the silent collector's run for why one run of each mode.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn charge_payment_exports_traces_to_a_slow_collector_under_faults() {
    let collector =
        Collector::start(CollectorKind::AnswersAfter(Duration::from_millis(1_500))).await;
    charge_payment_under_faults(ChargeRun {
        traces: Some(collector.endpoint()),
        ..ChargeRun::trace_run("keyed", "slow collector")
    })
    .await;
    let seen = collector.stats();
    println!("collector (answers after 1.5 s) {seen}");
    assert!(
        seen.answered > 0,
        "the collector answered some exports: {seen}"
    );
}

/// The payments API as a process of its own (`sqsafe-payments`, its keys in a moto table through `sqsafe::api`, its
/// ledger in a file), SIGKILLed once in flight and started again on the same table, port and ledger: the keyed mode,
/// which relies on the API's `Idempotency-Key` for every duplicate in flight. The kill comes when the payment
/// `p-<intents/2>` reaches its charge: from then on every charge waits (claimed by the layer, not charged) until no
/// charge is without its stored answer, and the process dies there (`hold_in_flight`: a kill between a charge and
/// the layer's completion of its record would charge again on the takeover, since the two are separate writes). The
/// claims it leaves answer `409` with `Retry-After` until their lease ends, then the retries take them over; what it
/// completed (the charges answered `503` after charging among them) is replayed by the new process from the table.
/// The same verdict: nothing charged twice, nothing lost.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn charge_payment_survives_its_payments_api_killed_in_flight_under_faults() {
    charge_payment_under_faults(ChargeRun {
        variant: "payments killed",
        payments: PaymentsKind::KilledInFlight,
        intents: if heavy() { 1000 } else { 300 },
        ..ChargeRun::new("keyed")
    })
    .await;
}

/// The payments API in the test's process: seeded 503s before and after charging (3% each), its keys honoured
/// through `sqsafe::api` on `table` in moto (reached directly, not through the fault proxy), and 1% of its charges
/// `slow_ms` slower (the choice seeded with `slow_seed`).
async fn in_process_payments(
    local: &LocalAws,
    seed: u64,
    table: String,
    slow_seed: u64,
    slow_ms: u64,
) -> RunningPayments {
    let slow = Arc::new(Mutex::new(fastrand::Rng::with_seed(slow_seed)));
    PaymentsApi::builder()
        .seed(seed)
        .fail_before_rate(0.03)
        .fail_after_rate(0.03)
        .lease(PAYMENTS_LEASE)
        .keys_in_dynamodb(local.dynamodb.clone(), table)
        .processing_delay(move || {
            let ms = if slow.lock().map(|mut r| r.f64()).unwrap_or(1.0) < 0.01 {
                slow_ms
            } else {
                0
            };
            async move { tokio::time::sleep(Duration::from_millis(ms)).await }
        })
        .start("127.0.0.1:0".parse().expect("addr"))
        .await
        .expect("payments API")
}

/// Where a run's payments API runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum PaymentsKind {
    /// In the test's process, for the whole run.
    InProcess,
    /// `sqsafe-payments`, a process of its own, killed once in flight and started again (see
    /// `charge_payment_survives_its_payments_api_killed_in_flight_under_faults`).
    KilledInFlight,
}

/// A run's payments API.
enum Payments {
    InProcess(RunningPayments),
    Process(PaymentsProcess),
}

impl Payments {
    fn base_url(&self) -> String {
        match self {
            Payments::InProcess(api) => api.base_url(),
            Payments::Process(process) => process.url.clone(),
        }
    }

    /// Every charge made, by every life of the process.
    async fn charges(&self) -> Vec<Charge> {
        match self {
            Payments::InProcess(api) => api.charges(),
            Payments::Process(process) => {
                serde_json::from_value(process.get("/v1/charges").await).expect("charges")
            }
        }
    }

    /// The counters: for a process, its last life's.
    async fn stats(&self) -> Stats {
        match self {
            Payments::InProcess(api) => api.stats(),
            Payments::Process(process) => {
                serde_json::from_value(process.get("/v1/stats").await).expect("stats")
            }
        }
    }

    async fn shutdown(self) -> Option<KillReport> {
        match self {
            Payments::InProcess(api) => {
                api.shutdown().await;
                None
            }
            Payments::Process(process) => Some(process.shutdown().await),
        }
    }
}

/// `sqsafe-payments` under a task that kills it once it says `held`, and starts it again on the same port.
struct PaymentsProcess {
    url: String,
    client: reqwest::Client,
    stop: oneshot::Sender<()>,
    task: tokio::task::JoinHandle<KillReport>,
}

/// What happened to a killed payments API.
#[derive(Debug)]
struct KillReport {
    /// It said `held` and was SIGKILLed.
    killed: bool,
    /// Requests in flight it left claimed and not charged, by its own count.
    waiting: usize,
    /// From the kill to the new process listening.
    restarted_after: Duration,
}

impl PaymentsProcess {
    /// Starts `sqsafe-payments ARGS --hold HOLD` on a free port, its stderr in `log`.
    async fn start(args: Vec<String>, hold: &str, log: PathBuf) -> Self {
        let binary = payments_binary();
        let mut first_args = args.clone();
        first_args.extend([
            "--hold".to_owned(),
            hold.to_owned(),
            "--port".to_owned(),
            "0".to_owned(),
        ]);
        let (mut first, mut lines, url) = Self::spawn(&binary, &first_args, &log).await;
        let port = url.rsplit(':').next().unwrap_or_default().to_owned();
        let (stop, mut stopped) = oneshot::channel::<()>();
        let task = tokio::spawn(async move {
            let held = loop {
                tokio::select! {
                    _ = &mut stopped => break None,
                    line = lines.next_line() => match line {
                        Ok(Some(line)) if line.starts_with("held ") => {
                            break line["held ".len()..].parse::<usize>().ok();
                        }
                        Ok(Some(_)) => {}
                        other => panic!("sqsafe-payments ended before it held a payment: {other:?} (see {})", log.display()),
                    },
                }
            };
            let Some(waiting) = held else {
                let _ = first.kill().await;
                return KillReport {
                    killed: false,
                    waiting: 0,
                    restarted_after: Duration::ZERO,
                };
            };
            // SIGKILL: no destructor runs, nothing is released; the claims stay in the table.
            first.kill().await.expect("SIGKILL sqsafe-payments");
            let killed_at = std::time::Instant::now();
            let mut again_args = args;
            again_args.extend(["--port".to_owned(), port]);
            let (mut second, mut lines, _) = Self::spawn(&binary, &again_args, &log).await;
            let restarted_after = killed_at.elapsed();
            loop {
                tokio::select! {
                    _ = &mut stopped => break,
                    line = lines.next_line() => if !matches!(line, Ok(Some(_))) { break },
                }
            }
            let _ = second.kill().await;
            KillReport {
                killed: true,
                waiting,
                restarted_after,
            }
        });
        let _ = rustls::crypto::ring::default_provider().install_default();
        let client = reqwest::Client::builder()
            .no_proxy()
            .build()
            .expect("HTTP client");
        Self {
            url,
            client,
            stop,
            task,
        }
    }

    /// Spawns the binary and reads its stdout until it listens: the child, the rest of its stdout, its URL.
    async fn spawn(
        binary: &Path,
        args: &[String],
        log: &Path,
    ) -> (
        tokio::process::Child,
        tokio::io::Lines<BufReader<tokio::process::ChildStdout>>,
        String,
    ) {
        let stderr = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(log)
            .expect("payments log");
        let mut child = tokio::process::Command::new(binary)
            .args(args)
            .stdout(std::process::Stdio::piped())
            .stderr(stderr)
            .kill_on_drop(true)
            .spawn()
            .expect("start sqsafe-payments");
        let mut lines = BufReader::new(child.stdout.take().expect("stdout")).lines();
        while let Ok(Some(line)) = lines.next_line().await {
            if let Some(rest) = line.strip_prefix("payments API listening on ") {
                let url = rest
                    .split_whitespace()
                    .next()
                    .unwrap_or_default()
                    .to_owned();
                return (child, lines, url);
            }
        }
        panic!("sqsafe-payments did not start (see {})", log.display());
    }

    async fn get(&self, path: &str) -> serde_json::Value {
        self.client
            .get(format!("{}{path}", self.url))
            .send()
            .await
            .and_then(reqwest::Response::error_for_status)
            .expect("payments API answers")
            .json()
            .await
            .expect("payments API JSON")
    }

    async fn shutdown(self) -> KillReport {
        let _ = self.stop.send(());
        self.task.await.expect("payments process task")
    }
}

/// What one charge-payment run under faults varies; the faults themselves (crash points, the proxy's throttling and
/// 500s, the payments API's failures and slow calls, dropped deletes) are the same in every run.
#[derive(Debug, Clone)]
struct ChargeRun {
    /// `SQSAFE_IDEMPOTENCY_MODE` of the function.
    mode: &'static str,
    /// What else sets the run apart, for its banner and its stack's names (empty: nothing).
    variant: &'static str,
    /// Payment intents published (each maybe republished).
    intents: usize,
    /// More intents, published among the others, whose idempotency item is stored before the run with a status that
    /// is none (`NOT_A_STATUS`): no delivery of theirs can read its record, so each fails transiently until its last
    /// attempt and ends in the DLQ, never charged. Used in the keyed mode's run, whose batch read they fail.
    unreadable: usize,
    /// The fault proxy's rate of `BatchGetItem`s answered with every key unprocessed (the keyed mode's batch read).
    unprocessed_keys_rate: f64,
    /// Spans exported (`SQSAFE_TRACES=otlp`) to this endpoint (`OTEL_EXPORTER_OTLP_TRACES_ENDPOINT`).
    traces: Option<String>,
    /// Where the payments API runs, and whether it is killed.
    payments: PaymentsKind,
}

impl ChargeRun {
    fn new(mode: &'static str) -> Self {
        Self {
            mode,
            variant: "",
            intents: if heavy() { 4000 } else { 1000 },
            unreadable: 0,
            unprocessed_keys_rate: 0.0,
            traces: None,
            payments: PaymentsKind::InProcess,
        }
    }

    /// A run of the trace exporter: fewer intents, to keep the suite's time down (every invocation of the silent
    /// collector's run waits on it until its flush is cut).
    fn trace_run(mode: &'static str, variant: &'static str) -> Self {
        Self {
            variant,
            intents: if heavy() { 1000 } else { 300 },
            ..Self::new(mode)
        }
    }

    /// The prefix of the run's tables and queues: the mode, and the variant when there is one.
    fn prefix(&self) -> String {
        match self.variant {
            "" => format!("faults-pay-{}", self.mode),
            variant => format!("faults-pay-{}-{}", self.mode, variant.replace(' ', "-")),
        }
    }
}

/// What a charge-payment run's verdict found, beyond what it asserted itself.
#[derive(Debug)]
struct ChargeVerdict {
    /// Span exports whose spans were dropped (failed, cut at the deadline, or not made), from the functions' logs.
    spans_dropped: u64,
}

async fn charge_payment_under_faults(run: ChargeRun) -> ChargeVerdict {
    let started = std::time::Instant::now();
    let seed = seed();
    let ChargeRun {
        mode,
        variant,
        intents,
        unreadable,
        ..
    } = run;
    let variant_note = if variant.is_empty() {
        String::new()
    } else {
        format!(", {variant}")
    };
    println!(
        "fault injection (charge-payment, {mode} mode{variant_note}): seed {seed} (replay with \
         SQSAFE_FAULT_SEED={seed}), {intents} intents, {unreadable} unreadable, backlog {}",
        backlog()
    );
    // The test's own choices (which messages are duplicated, poisoned, slowed down) replay with the seed too.
    let mut rng = fastrand::Rng::with_seed(seed);

    let mut env = Vec::new();
    if let Some(endpoint) = &run.traces {
        env.extend([
            ("SQSAFE_TRACES".to_owned(), "otlp".to_owned()),
            (
                "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT".to_owned(),
                endpoint.clone(),
            ),
        ]);
    }
    let options = PipelineOptions {
        mode,
        unprocessed_keys_rate: run.unprocessed_keys_rate,
        env,
    };
    let local = local_aws(seed, &options).await;
    // A payments API that honours the key through sqsafe::api on a table of its own in moto (reached directly, not
    // through the fault proxy, whose counts are the function's), and fails before or after charging.
    let payments_table = unique_name("payments-keys");
    create_table(&local.dynamodb, &payments_table, "pk", None).await;
    let hold = format!("p-{}", intents / 2);
    let payments = match run.payments {
        PaymentsKind::InProcess => {
            // Sometimes slower than the queue's visibility timeout.
            Payments::InProcess(
                in_process_payments(&local, seed, payments_table, seed ^ 0x5EED, 3_500).await,
            )
        }
        PaymentsKind::KilledInFlight => {
            let dir = workspace_root().join("target/fault-logs");
            std::fs::create_dir_all(&dir).expect("log folder");
            let ledger = dir.join(format!("{}-payments-ledger.jsonl", run.prefix()));
            let log = dir.join(format!("{}-payments.log", run.prefix()));
            let _ = std::fs::remove_file(&ledger);
            let _ = std::fs::remove_file(&log);
            let args = [
                "--seed".to_owned(),
                seed.to_string(),
                "--fail-before".to_owned(),
                "0.03".to_owned(),
                "--fail-after".to_owned(),
                "0.03".to_owned(),
                "--dynamodb".to_owned(),
                local.moto.endpoint(),
                "--table".to_owned(),
                payments_table,
                "--lease".to_owned(),
                PAYMENTS_LEASE.as_secs().to_string(),
                "--ledger".to_owned(),
                ledger.display().to_string(),
            ];
            Payments::Process(PaymentsProcess::start(args.to_vec(), &hold, log).await)
        }
    };
    let p = local
        .pipeline(
            &run.prefix(),
            BTreeMap::from([("PaymentsApiUrl".to_owned(), payments.base_url())]),
            options,
        )
        .await;

    // Intents, republished duplicates, poison bodies, and payloads reused under an existing key.
    let body = |id: &str, amount: u64| {
        json!({"type": "PaymentRequested", "version": "1", "payment_id": id, "tenant": "acme", "amount": amount,
               "currency": "EUR", "customer_id": "cus-1"})
        .to_string()
    };
    let mut messages = Vec::new();
    let mut expected: BTreeMap<String, u64> = BTreeMap::new();
    let (mut duplicates, mut poison, mut reused) = (0, 0, 0);
    for i in 0..intents {
        let id = format!("p-{i}");
        let amount = 100 + (i as u64 % 50);
        expected.insert(id.clone(), amount);
        let copies = if rng.f64() < 0.3 {
            2 + usize::from(rng.f64() < 0.3)
        } else {
            1
        };
        for c in 0..copies {
            messages.push(Outgoing {
                body: body(&id, amount),
                correlation_id: format!("corr-{i}-{c}"),
                group: None,
                dedup: None,
                traceparent: None,
            });
        }
        duplicates += copies - 1;
        if rng.f64() < 0.02 {
            messages.push(Outgoing {
                body: "{\"version\":\"1\",\"payment_id\":".into(),
                correlation_id: format!("poison-{i}"),
                group: None,
                dedup: None,
                traceparent: None,
            });
            poison += 1;
        }
    }
    // Intents whose stored item does not parse, among the others so that they share batches with them.
    let unreadable_payments: BTreeSet<String> = (0..unreadable).map(|j| format!("u-{j}")).collect();
    for (j, id) in unreadable_payments.iter().enumerate() {
        p.store_unreadable_record(id).await;
        messages.push(Outgoing {
            body: body(id, 100),
            correlation_id: format!("unreadable-{j}"),
            group: None,
            dedup: None,
            traceparent: None,
        });
    }
    // Shuffle so duplicates arrive apart (and sometimes in the same batch).
    rng.shuffle(&mut messages);
    // With spans exported, a sampled producer's context on each message: the emulated Lambda's own X-Ray header says
    // `Sampled=0`, so without one no span would be recorded, and every flush would have nothing to send.
    let traceparent = |i: usize| {
        run.traces
            .as_ref()
            .map(|_| format!("00-{:032x}-{:016x}-01", i + 1, i + 1))
    };
    for (i, m) in messages.iter_mut().enumerate() {
        m.traceparent = traceparent(i);
    }
    let (wave1, ids) = p
        .run("charge-payment", "wave1", seed, 4, 0.03, messages.clone())
        .await;
    let poison_ids: BTreeSet<String> = messages
        .iter()
        .zip(&ids)
        .filter(|(m, _)| m.correlation_id.starts_with("poison"))
        .map(|(_, id)| id.clone())
        .collect();
    let unreadable_ids: BTreeSet<String> = messages
        .iter()
        .zip(&ids)
        .filter(|(m, _)| m.correlation_id.starts_with("unreadable"))
        .map(|(_, id)| id.clone())
        .collect();

    // An intent whose every delivery met a crash can exhaust its receives and reach the DLQ, moved there by SQS
    // without sqsafe's context (with or without its effect applied). Operators redrive the DLQ; the redrive must
    // complete it and must not apply it again. Each such message is kept to show below that crashes, not conflicts,
    // sent it there. Everything else in the DLQ stays for the assertions below.
    let dlq_url = p
        .stack
        .dead_letter_queue("charge-payment")
        .expect("dlq")
        .url
        .clone();
    let mut redriven = Vec::new();
    let mut redriven_messages = Vec::new();
    for m in read_all(&p.sqs, &dlq_url).await {
        let kind = context_field(&m, "error_kind");
        let intent = serde_json::from_str::<serde_json::Value>(m.body().unwrap_or_default())
            .ok()
            .and_then(|b| b["payment_id"].as_str().map(str::to_owned))
            .filter(|id| expected.contains_key(id))
            .filter(|_| !matches!(kind.as_deref(), Some("bad_payload" | "payload_mismatch")));
        let receipt = m.receipt_handle().unwrap_or_default().to_owned();
        if intent.is_some() {
            redriven_messages.push(m.clone());
            redriven.push(Outgoing {
                body: m.body().unwrap_or_default().to_owned(),
                correlation_id: attribute(&m, "correlationId").unwrap_or_default(),
                group: None,
                dedup: None,
                traceparent: attribute(&m, "traceparent"),
            });
            p.sqs
                .delete_message()
                .queue_url(&dlq_url)
                .receipt_handle(receipt)
                .send()
                .await
                .expect("delete");
        } else {
            p.sqs
                .change_message_visibility()
                .queue_url(&dlq_url)
                .receipt_handle(receipt)
                .visibility_timeout(0)
                .send()
                .await
                .expect("visible again");
        }
    }

    // A second wave after everything applied: the same ids with other amounts (permanent mismatches).
    let mut second = Vec::new();
    for i in (0..intents).step_by(97) {
        second.push(Outgoing {
            body: body(&format!("p-{i}"), 1),
            correlation_id: format!("reuse-{i}"),
            group: None,
            dedup: None,
            traceparent: traceparent(messages.len() + i),
        });
        reused += 1;
    }
    let wave2_messages: Vec<Outgoing> = second.iter().chain(&redriven).cloned().collect();
    let (wave2, wave2_ids) = p
        .run(
            "charge-payment",
            "wave2",
            seed.wrapping_add(1),
            2,
            0.0,
            wave2_messages,
        )
        .await;
    let reused_ids: BTreeSet<String> = wave2_ids.into_iter().take(second.len()).collect();

    // Effects: the payments API's own ledger.
    let charges = payments.charges().await;
    let mut by_payment: BTreeMap<String, u64> = BTreeMap::new();
    for c in &charges {
        *by_payment.entry(c.payment_id.clone()).or_insert(0) += 1;
    }
    let twice: Vec<_> = by_payment.iter().filter(|(_, n)| **n > 1).collect();
    let dlq = read_all(
        &p.sqs,
        &p.stack
            .dead_letter_queue("charge-payment")
            .expect("dlq")
            .url,
    )
    .await;
    let dlq_ids: BTreeMap<String, Option<String>> = dlq
        .iter()
        .map(|m| {
            let original = context_field(m, "original_message_id")
                .or_else(|| m.message_id().map(str::to_owned))
                .unwrap_or_default();
            (original, context_field(m, "error_kind"))
        })
        .collect();
    // Each unreadable intent's copies in the DLQ, by message id.
    let mut unreadable_letters: BTreeMap<String, Vec<DeadLetter>> = unreadable_ids
        .iter()
        .map(|id| (id.clone(), Vec::new()))
        .collect();
    for m in &dlq {
        let original = context_field(m, "original_message_id")
            .or_else(|| m.message_id().map(str::to_owned))
            .unwrap_or_default();
        if let Some(copies) = unreadable_letters.get_mut(&original) {
            copies.push(DeadLetter::of(m));
        }
    }
    // Lost: an intent never charged, or an unreadable one that never reached the DLQ.
    let missing: Vec<&String> = expected
        .keys()
        .filter(|id| !by_payment.contains_key(*id))
        .chain(
            unreadable_letters
                .iter()
                .filter(|(_, copies)| copies.is_empty())
                .map(|(id, _)| id),
        )
        .collect();
    let unreadable_charged: Vec<&String> = unreadable_payments
        .iter()
        .filter(|id| by_payment.contains_key(*id))
        .collect();
    let records = p.records().await;
    let in_progress = records
        .iter()
        .filter(|r| {
            r.get("status")
                .and_then(|s| s.as_s().ok())
                .map(String::as_str)
                == Some("IN_PROGRESS")
        })
        .count();
    let instances: Vec<InstanceStats> = wave1
        .instances
        .iter()
        .chain(&wave2.instances)
        .cloned()
        .collect();
    let faults = sum_faults(&instances);
    let late = answers_after_the_deadline(&instances);
    let proxy = p.proxy.stats();
    let api = payments.stats().await;
    let kill = payments.shutdown().await;
    let deliveries: u64 = wave1
        .mappings
        .iter()
        .chain(&wave2.mappings)
        .map(|m| m[1])
        .sum();
    let dropped: u64 = wave1.mappings.iter().map(|m| m[5]).sum();
    let logs = wave1.logs.merge(wave2.logs);
    let conflicts = SelfConflicts::of(&proxy, &logs);
    let resolved_by_write = logs.resolved.iter().fold(BTreeMap::new(), |mut m, (w, _)| {
        *m.entry(w.as_str()).or_insert(0u64) += 1;
        m
    });
    // Each message SQS moved after its receives ran out (max receive count 10 here), with how its deliveries ended.
    let moved: Vec<MovedBySqs> = redriven_messages
        .iter()
        .chain(&dlq)
        .filter(|m| context_field(m, "error_kind").is_none())
        // An unreadable intent never completes: SQS moves it when its last delivery died, or after sqsafe's DLQ send
        // on that delivery, when its batch then died before the delete. Its copies are checked below.
        .filter(|m| !unreadable_ids.contains(m.message_id().unwrap_or_default()))
        .map(|m| MovedBySqs::of(m, &logs, MAX_RECEIVES.into()))
        .collect();
    // sqsafe dead-letters a message itself, with its context, on its last receive (MaxAttempts, 10 here). One of kind
    // `in_progress` is crash-caused like a message SQS moved when deliveries of it died (a SIGKILL at a crash point of
    // any record of its batch, or the function timeout), at least as many as met a lease, and every delivery that
    // logged met one: each claim it made died with its process, and the next delivery met that dead claim's lease. Five dead claims in a row for one
    // message are rare, but a crash point kills the whole batch, so under load (bigger batches) they happen: seed
    // 1796201563 had two in 1000 intents. It is redriven between the waves like the messages SQS moved, and must then
    // be applied once (the counts above); a `lease_lost` letter, or one with a delivery that did not die or meet a
    // lease, is never excused.
    let crash_letters: Vec<MovedBySqs> = redriven_messages
        .iter()
        .chain(&dlq)
        .filter(|m| context_field(m, "error_kind").as_deref() == Some("in_progress"))
        .map(|m| MovedBySqs::of(m, &logs, MAX_RECEIVES.into()))
        .filter(|m| {
            m.crash_caused()
                && m.outcomes.iter().all(|k| k == "in_progress")
                && m.killed_deliveries() >= m.outcomes.len() as u64
        })
        .collect();
    let excused: BTreeSet<&str> = crash_letters
        .iter()
        .map(|m| m.message_id.as_str())
        .collect();
    let not_excused =
        |m: &&aws_sdk_sqs::types::Message| !excused.contains(m.message_id().unwrap_or_default());
    let dead_kinds = kinds_of(&dlq);
    let redriven_kinds = kinds_of(&redriven_messages);
    let conflict_kinds = kinds_of(
        &dlq.iter()
            .chain(&redriven_messages)
            .filter(not_excused)
            .cloned()
            .collect::<Vec<_>>(),
    );

    println!(
        "messages published        {}",
        messages.len() + second.len()
    );
    println!("  intents                 {intents}");
    println!("  republished duplicates  {duplicates}");
    println!("  poison                  {poison}");
    println!("  reused keys (mismatch)  {reused}");
    println!("  unreadable intents      {unreadable}");
    println!("deliveries                {deliveries}");
    println!("faults injected           crash points {:?}", faults);
    println!(
        "                          DynamoDB proxy: throttled {}, 500 {}, 500 after the write {}, BatchGetItem with \
         every key unprocessed {} (of {} requests, {} BatchGetItem)",
        proxy.throttled,
        proxy.errors_500,
        proxy.after_write_500,
        proxy.unprocessed_keys,
        proxy.dynamodb_requests,
        proxy.by_operation.get("BatchGetItem").copied().unwrap_or(0)
    );
    let api_life = match run.payments {
        PaymentsKind::InProcess => "",
        PaymentsKind::KilledInFlight => " (its life after the kill)",
    };
    println!(
        "                          payments API{api_life}: 503 before {}, 503 after charging {}, 409 {}, replays {}",
        api.failed_before, api.failed_after, api.conflicts_409, api.replays
    );
    println!("                          pollers dropped the delete of {dropped} batches");
    println!(
        "effects (charges)         {} for {} intents; charged twice: {}",
        charges.len(),
        intents,
        twice.len()
    );
    println!(
        "dead-lettered             {} messages in {} copies (poison {}, mismatches {}, unreadable {}, intents {})",
        dlq_ids.len(),
        dlq.len(),
        poison_ids.len(),
        reused_ids.len(),
        unreadable_letters
            .values()
            .filter(|copies| !copies.is_empty())
            .count(),
        dlq_ids
            .iter()
            .filter(|(id, k)| {
                k.as_deref() != Some("bad_payload")
                    && k.as_deref() != Some("payload_mismatch")
                    && !unreadable_ids.contains(*id)
            })
            .count()
    );
    println!("  by kind                 {dead_kinds:?}");
    println!(
        "redriven from the DLQ     {} intents that had exhausted their receives, by kind {redriven_kinds:?}",
        redriven.len()
    );
    for m in &moved {
        println!("  moved by SQS            {m}");
    }
    for m in &crash_letters {
        println!("  in_progress, crashes    {m}");
    }
    println!(
        "writes that met their own try at the proxy {:?}; resolved by the function {} of them, transactions {}",
        proxy.self_met_writes, conflicts.resolved, conflicts.transactions
    );
    println!(
        "ambiguous writes resolved (function logs) {resolved_by_write:?}; self-met writes not resolved {}, \
         not resolved because their process died first {:?}, cut at the deadline reserve {:?}",
        conflicts.unresolved.len(),
        conflicts.excused,
        conflicts.abandoned
    );
    println!(
        "deliveries spent on self-conflicts {}",
        conflicts.spent.len()
    );
    if unreadable > 0 {
        println!(
            "unreadable intents        {unreadable}: charged {}; their copies in the DLQ {:?}",
            unreadable_charged.len(),
            unreadable_letters
                .values()
                .map(|copies| copies
                    .iter()
                    .map(DeadLetter::to_string)
                    .reduce(|a, b| format!("{a} + {b}"))
                    .unwrap_or_else(|| "none".to_owned()))
                .collect::<Vec<_>>()
        );
    }
    if run.traces.is_some() {
        println!(
            "span exports dropped      {} (cut or not made for the deadline: {})",
            logs.spans_dropped, logs.spans_cut
        );
    }
    if let Some(kill) = &kill {
        println!(
            "payments API killed       SIGKILL once {hold} was held in flight, {} requests claimed and not charged; \
             listening again on the same port and table after {} ms",
            kill.waiting,
            kill.restarted_after.as_millis()
        );
    }
    println!("answers after the deadline  {late}");
    println!("lost                      {}", missing.len());
    println!("records left IN_PROGRESS  {in_progress}");
    println!(
        "wall time                 {:.0} s",
        started.elapsed().as_secs_f64()
    );

    if let Some(kill) = &kill {
        assert!(
            kill.killed && kill.waiting > 0,
            "the payments API was killed with requests in flight (seed {seed}): {kill:?}"
        );
    }
    if late > 0 {
        let dirs: Vec<PathBuf> = ["wave1", "wave2"]
            .iter()
            .map(|wave| workspace_root().join(format!("target/fault-logs/{}-{wave}", run.prefix())))
            .collect();
        print_timed_out(&dirs);
        let met: Vec<String> = proxy
            .self_met
            .iter()
            .map(|w| format!("{} {}", w.operation, w.key))
            .collect();
        println!("writes that met their own try: {met:?}");
    }
    assert_eq!(
        late, 0,
        "invocations that had not answered by their deadline, killed by the Runtime API (seed {seed})"
    );
    assert!(
        twice.is_empty(),
        "intents charged twice (seed {seed}): {twice:?}"
    );
    assert!(
        missing.is_empty(),
        "intents lost: never charged, or (unreadable ones) never dead-lettered (seed {seed}): {missing:?}"
    );
    assert!(
        unreadable_charged.is_empty(),
        "intents whose record does not parse were charged (seed {seed}): {unreadable_charged:?}"
    );
    // sqsafe dead-letters an unreadable intent itself, with its context, on its last attempt (MaxAttempts = the
    // queue's max receive count here); when that delivery died with its process, SQS moves it on the next receive,
    // without context. Its failures are its own record's: some delivery of it failed `inconsistent_record`.
    for (id, copies) in &unreadable_letters {
        for copy in copies {
            assert!(
                copy.kind.is_none() || copy.attempts == Some(u64::from(MAX_RECEIVES)),
                "unreadable intent {id} dead-lettered as {copy}, not on its last attempt ({MAX_RECEIVES}) (seed \
                 {seed})"
            );
        }
        assert!(
            logs.outcomes
                .get(id)
                .is_some_and(|o| o.iter().any(|k| k == "inconsistent_record")),
            "unreadable intent {id}: no delivery failed on its unparsable record (seed {seed}): {:?}",
            logs.outcomes.get(id)
        );
    }
    assert_eq!(
        charges.len(),
        intents,
        "one charge per intent (seed {seed})"
    );
    for id in &poison_ids {
        assert_eq!(
            dlq_ids.get(id),
            Some(&Some("bad_payload".to_owned())),
            "poison {id} in the DLQ with its context (seed {seed})"
        );
    }
    for id in &reused_ids {
        assert_eq!(
            dlq_ids.get(id),
            Some(&Some("payload_mismatch".to_owned())),
            "reused key {id} in the DLQ (seed {seed})"
        );
    }
    // A crash or a dropped delete after the DLQ send delivers the record again, and it is dead-lettered again: the DLQ
    // is at least once too. What must hold is that it holds exactly the poison, reused and unreadable messages.
    let expected_dead: BTreeSet<String> = poison_ids
        .iter()
        .chain(&reused_ids)
        .chain(&unreadable_ids)
        .cloned()
        .collect();
    let dead: BTreeSet<String> = dlq_ids.keys().cloned().collect();
    assert_eq!(
        dead, expected_dead,
        "nothing else dead-lettered (seed {seed})"
    );
    assert_eq!(in_progress, 0, "no record left IN_PROGRESS (seed {seed})");
    for (kind, n) in &conflict_kinds {
        assert!(
            !CONFLICT_KINDS.contains(&kind.as_str()),
            "{n} dead letters of kind {kind}: a conflict cost every delivery (seed {seed})"
        );
    }
    // Between the waves, only what SQS moved after crashes, and `in_progress` letters whose claims all died
    // (crash_letters), may have been in the DLQ: no other sqsafe dead letter of an intent (it would be a transient
    // failure that outlived 10 deliveries, or a conflict).
    let intents_dead_lettered: Vec<_> = redriven_messages
        .iter()
        .filter(not_excused)
        .filter_map(|m| context_field(m, "error_kind"))
        .collect();
    assert!(
        intents_dead_lettered.is_empty(),
        "intents dead-lettered by sqsafe between the waves (seed {seed}): {intents_dead_lettered:?}"
    );
    for m in &moved {
        assert!(
            m.crash_caused(),
            "{} reached the DLQ without context, and its deliveries do not show crashes (seed {seed}): {m:?}",
            m.message_id
        );
    }
    assert!(
        conflicts.unresolved.is_empty(),
        "writes that met their own earlier try and were not resolved by the function (seed {seed}): {:?}",
        conflicts.unresolved
    );
    assert!(
        conflicts.spent.is_empty(),
        "deliveries spent on self-conflicts (seed {seed}): {:?}",
        conflicts.spent
    );
    assert!(
        faults.values().sum::<u64>() > 0 && proxy.throttled + proxy.errors_500 > 0,
        "faults were really injected"
    );
    assert!(
        run.unprocessed_keys_rate == 0.0 || proxy.unprocessed_keys > 0,
        "BatchGetItems were really answered with their keys unprocessed"
    );
    ChargeVerdict {
        spans_dropped: logs.spans_dropped,
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn apply_ledger_applies_every_entry_once_under_faults() {
    let seed = seed().wrapping_add(17);
    let entries = if heavy() { 600 } else { 400 };
    println!(
        "fault injection (apply-ledger): seed {seed} (replay with SQSAFE_FAULT_SEED={}), {entries} entries",
        seed.wrapping_sub(17)
    );
    // The test's own choices (which messages are duplicated, poisoned, slowed down) replay with the seed too.
    let mut rng = fastrand::Rng::with_seed(seed);
    let p = pipeline(
        seed,
        "faults-ledger",
        BTreeMap::from([("PaymentsApiUrl".to_owned(), "http://127.0.0.1:9".to_owned())]),
    )
    .await;
    let accounts = 8;
    let mut expected: BTreeMap<String, i64> = BTreeMap::new();
    let mut messages = Vec::new();
    let mut duplicates = 0;
    for i in 0..entries {
        let account = format!("acct-{}", i % accounts);
        let amount = 10 + (i as i64 % 7);
        *expected.entry(account.clone()).or_insert(0) += amount;
        let body = json!({"type": "LedgerEntryRequested", "version": "1", "entry_id": format!("e-{i}"), "account_id": account,
                          "tenant": "acme", "amount": amount, "currency": "EUR"}).to_string();
        let copies = if rng.f64() < 0.25 { 2 } else { 1 };
        for c in 0..copies {
            // A republished entry: another deduplication id, so SQS delivers it again.
            messages.push(Outgoing {
                body: body.clone(),
                correlation_id: format!("corr-{i}-{c}"),
                group: Some(account.clone()),
                dedup: Some(format!("e-{i}-{c}")),
                traceparent: None,
            });
        }
        duplicates += copies - 1;
    }
    let (run, _) = p
        .run("apply-ledger", "wave1", seed, 3, 0.03, messages.clone())
        .await;

    let table = &p.stack.tables["LedgerTable"];
    let scan = p
        .dynamodb
        .scan()
        .table_name(table)
        .send()
        .await
        .expect("scan");
    let items = scan.items();
    let entries_written = items
        .iter()
        .filter(|i| {
            i.get("sk")
                .and_then(|v| v.as_s().ok())
                .is_some_and(|s| s.starts_with("ENTRY#"))
        })
        .count();
    let balances: BTreeMap<String, i64> = items
        .iter()
        .filter(|i| i.get("sk").and_then(|v| v.as_s().ok()).map(String::as_str) == Some("BALANCE"))
        .filter_map(|i| {
            Some((
                i.get("pk")?.as_s().ok()?.clone(),
                i.get("balance")?.as_n().ok()?.parse().ok()?,
            ))
        })
        .collect();
    let records = p.records().await;
    let dlq = read_all(
        &p.sqs,
        &p.stack.dead_letter_queue("apply-ledger").expect("dlq").url,
    )
    .await;
    let faults = sum_faults(&run.instances);
    let proxy = p.proxy.stats();
    let conflicts = SelfConflicts::of(&proxy, &run.logs);
    let conflict_failures = run
        .logs
        .failed
        .iter()
        .filter(|f| CONFLICT_KINDS.contains(&f.kind.as_str()))
        .count();
    println!(
        "messages published        {} ({entries} entries, {duplicates} republished)",
        messages.len()
    );
    println!(
        "deliveries                {}",
        run.mappings.iter().map(|m| m[1]).sum::<u64>()
    );
    println!(
        "faults injected           crash points {faults:?}; DynamoDB throttled {}, 500 {}, 500 after the write {}",
        proxy.throttled, proxy.errors_500, proxy.after_write_500
    );
    println!(
        "entries written           {entries_written} (records {})",
        records.len()
    );
    println!(
        "dead-lettered             {} {:?}",
        dlq.len(),
        kinds_of(&dlq)
    );
    println!(
        "writes that met their own try at the proxy {:?} (resolved {}, transactions {}); ambiguous writes resolved \
         (function logs) {}; deliveries failed in_progress/lease_lost {conflict_failures}",
        proxy.self_met_writes,
        conflicts.resolved,
        conflicts.transactions,
        run.logs.resolved.len()
    );
    println!(
        "deliveries spent on self-conflicts {}",
        conflicts.spent.len()
    );
    // Printed, not asserted (issue 40 asks it of charge-payment): apply-ledger has had one in a run, and its
    // entries' exactly-once verdict below holds regardless.
    println!(
        "answers after the deadline  {}",
        answers_after_the_deadline(&run.instances)
    );
    assert_eq!(
        entries_written, entries,
        "every entry applied exactly once (seed {seed})"
    );
    assert_eq!(
        records.len(),
        entries,
        "one COMPLETED record per entry, committed with it (seed {seed})"
    );
    assert_eq!(
        balances, expected,
        "balances are the sum of each entry once (seed {seed})"
    );
    assert!(
        dlq.is_empty(),
        "nothing dead-lettered (seed {seed}): {:?}",
        kinds_of(&dlq)
    );
    assert!(
        conflicts.unresolved.is_empty() && conflicts.spent.is_empty(),
        "writes that met their own earlier try: not resolved {:?}, deliveries spent {:?} (seed {seed})",
        conflicts.unresolved,
        conflicts.spent
    );
}

/// How a [`Collector`] treats each export.
#[derive(Debug, Clone, Copy)]
enum CollectorKind {
    /// Reads it and never answers: the connection stays open until the exporter gives up on it.
    BlackHole,
    /// Reads it, waits, then answers `200` with an empty body.
    AnswersAfter(Duration),
}

/// An OTLP/HTTP collector on loopback that misbehaves on purpose ([`CollectorKind`]), for the trace exporter under
/// faults. Written on a bare socket rather than with axum (as sqsafe-testkit's `OtlpReceiver` is): it needs only to
/// read a request whole and to hold or delay the answer. It stops when dropped.
struct Collector {
    addr: std::net::SocketAddr,
    counters: Arc<CollectorCounters>,
    task: tokio::task::JoinHandle<()>,
}

#[derive(Debug, Default)]
struct CollectorCounters {
    connections: AtomicU64,
    requests: AtomicU64,
    answered: AtomicU64,
}

/// What a [`Collector`] has seen.
#[derive(Debug, Clone, Copy)]
struct CollectorStats {
    /// Connections accepted.
    connections: u64,
    /// Requests read whole.
    requests: u64,
    /// Answers written (the exporter may have stopped waiting for one before it came).
    answered: u64,
}

impl std::fmt::Display for CollectorStats {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "{} connections, {} exports read, {} answered",
            self.connections, self.requests, self.answered
        )
    }
}

impl Collector {
    async fn start(kind: CollectorKind) -> Self {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .expect("collector: bind 127.0.0.1:0");
        let addr = listener.local_addr().expect("collector: its address");
        let counters = Arc::new(CollectorCounters::default());
        let shared = Arc::clone(&counters);
        let task = tokio::spawn(async move {
            // The connections' tasks end with the accept loop (dropping the set aborts them).
            let mut connections = tokio::task::JoinSet::new();
            loop {
                let Ok((socket, _)) = listener.accept().await else {
                    continue;
                };
                shared.connections.fetch_add(1, Ordering::Relaxed);
                connections.spawn(Self::serve(socket, kind, Arc::clone(&shared)));
                // Reap the finished ones, so a long run does not keep them all.
                while connections.try_join_next().is_some() {}
            }
        });
        Self {
            addr,
            counters,
            task,
        }
    }

    /// `OTEL_EXPORTER_OTLP_TRACES_ENDPOINT` for the functions.
    fn endpoint(&self) -> String {
        format!("http://{}/v1/traces", self.addr)
    }

    fn stats(&self) -> CollectorStats {
        CollectorStats {
            connections: self.counters.connections.load(Ordering::Relaxed),
            requests: self.counters.requests.load(Ordering::Relaxed),
            answered: self.counters.answered.load(Ordering::Relaxed),
        }
    }

    /// Reads requests off one keep-alive connection until the exporter closes it.
    async fn serve(
        mut socket: tokio::net::TcpStream,
        kind: CollectorKind,
        counters: Arc<CollectorCounters>,
    ) {
        use tokio::io::{AsyncReadExt, AsyncWriteExt};
        let mut buffer = Vec::new();
        let mut chunk = [0u8; 16 * 1024];
        loop {
            // One request: its head, then `content-length` bytes of body (the exporter sends a sized protobuf body).
            let request_len = loop {
                if let Some(len) = http_request_len(&buffer) {
                    break len;
                }
                match socket.read(&mut chunk).await {
                    Ok(0) | Err(_) => return,
                    Ok(n) => buffer.extend_from_slice(&chunk[..n]),
                }
            };
            buffer.drain(..request_len);
            counters.requests.fetch_add(1, Ordering::Relaxed);
            match kind {
                CollectorKind::BlackHole => {
                    // Never answer; read on (nothing comes) until the exporter gives up and closes the connection.
                    while matches!(socket.read(&mut chunk).await, Ok(n) if n > 0) {}
                    return;
                }
                CollectorKind::AnswersAfter(delay) => {
                    tokio::time::sleep(delay).await;
                    let answer = b"HTTP/1.1 200 OK\r\ncontent-length: 0\r\n\r\n";
                    if socket.write_all(answer).await.is_err() {
                        return;
                    }
                    counters.answered.fetch_add(1, Ordering::Relaxed);
                }
            }
        }
    }
}

impl Drop for Collector {
    fn drop(&mut self) {
        self.task.abort();
    }
}

/// The length of the first HTTP/1.1 request in `buffer` (head and `content-length` body) once it is all there.
fn http_request_len(buffer: &[u8]) -> Option<usize> {
    let head_end = buffer.windows(4).position(|w| w == b"\r\n\r\n")? + 4;
    let head = std::str::from_utf8(&buffer[..head_end]).ok()?;
    let body_len = head
        .lines()
        .filter_map(|line| line.split_once(':'))
        .find(|(name, _)| name.trim().eq_ignore_ascii_case("content-length"))
        .and_then(|(_, value)| value.trim().parse::<usize>().ok())
        .unwrap_or(0);
    (buffer.len() >= head_end + body_len).then_some(head_end + body_len)
}

#[test]
fn the_collector_reads_a_request_whole_before_answering() {
    let head = "POST /v1/traces HTTP/1.1\r\nhost: x\r\nContent-Length: 5\r\n\r\n";
    assert_eq!(
        http_request_len(head.as_bytes()),
        None,
        "body not there yet"
    );
    assert_eq!(
        http_request_len(format!("{head}abc").as_bytes()),
        None,
        "part of the body"
    );
    assert_eq!(
        http_request_len(format!("{head}abcdeGET").as_bytes()),
        Some(head.len() + 5),
        "the next request's bytes are not this one's"
    );
    assert_eq!(
        http_request_len(b"GET / HTTP/1.1\r\n\r\n"),
        Some(18),
        "no body"
    );
}

/// The oracle itself: a self-met write nobody logged as resolved fails the suite, unless the process that made it died
/// before it could log (its delivery logged no outcome), as a SIGKILL of another record of the batch does.
#[test]
fn a_self_met_write_is_excused_only_when_its_process_died_before_logging() {
    let line = |message: &str, kind: Option<&str>, id: &str, count: u64, key: &str| {
        let mut doc = json!({
            "message": message,
            "spans": [{"message_id": id, "receive_count": count, "idempotency_key": key}]
        });
        if let Some(kind) = kind {
            doc["error_kind"] = json!(kind);
        }
        doc.to_string()
    };
    let mut logs = LogFindings::default();
    // m-died: its first delivery left no line (the process was killed); the second met the lease, the third applied.
    logs.scan(&line(
        "record failed",
        Some("in_progress"),
        "m-died",
        2,
        "k-died",
    ));
    logs.scan(&line("record handled", None, "m-died", 3, "k-died"));
    // m-lived: every delivery logged; its first met its own claim and failed `in_progress`: a delivery spent.
    logs.scan(&line(
        "record failed",
        Some("in_progress"),
        "m-lived",
        1,
        "k-lived",
    ));
    logs.scan(&line("record handled", None, "m-lived", 2, "k-lived"));
    assert_eq!(
        logs.died_deliveries(),
        BTreeMap::from([("k-died".to_owned(), 1)])
    );

    let mut proxy = ProxyStats::default();
    for key in ["k-died", "k-lived"] {
        proxy.self_met.push(SelfMetWrite {
            operation: "PutItem".to_owned(),
            table: "idempotency".to_owned(),
            key: key.to_owned(),
        });
    }
    let conflicts = SelfConflicts::of(&proxy, &logs);
    let pair = |k: &str| ("PutItem".to_owned(), k.to_owned());
    assert_eq!(conflicts.excused, [pair("k-died")]);
    assert_eq!(conflicts.unresolved, [pair("k-lived")]);
    assert_eq!(conflicts.spent, [pair("k-lived")]);
}

/// The oracle: a completion whose try the function cut at the invocation's deadline (its answer never read) is not a
/// self-met write the function failed to resolve: when the SDK's own retry of that try met the first one's write, the
/// key is already COMPLETED and the next delivery replays it (run 36 of 2026-12-02, seed 1796212927, key p-957: a 500
/// after the write, the SDK's retry met it at the proxy, the try was cut at the deadline reserve). Only the operation
/// that was cut is excused, and only once.
#[test]
fn a_self_met_write_cut_at_the_deadline_is_abandoned_not_unresolved() {
    let cut = |key: &str| {
        json!({
            "message": "completion failed after the effect ran; the key stays in progress until its lease ends",
            "error": format!("idempotency store failed during complete of key `{key}`: {DEADLINE_CUT}"),
            "idempotency_key": key,
            "spans": [{"message_id": format!("m-{key}"), "receive_count": 1, "idempotency_key": key}]
        })
        .to_string()
    };
    let mut logs = LogFindings::default();
    logs.scan(&cut("k-cut"));
    // The batch's report of that delivery, then the next delivery's outcome: no delivery of k-cut died with its
    // process.
    logs.scan(
        &json!({"message": "record failed", "error_kind": "completion_failed",
            "error": format!("the effect for idempotency key `k-cut` ran, but its completion failed after 1 tries: \
                {DEADLINE_CUT}"),
            "spans": [{"message_id": "m-k-cut", "receive_count": 1, "idempotency_key": "k-cut"}]})
        .to_string(),
    );
    logs.scan(
        &json!({"message": "record handled",
            "spans": [{"message_id": "m-k-cut", "receive_count": 2, "idempotency_key": "k-cut"}]})
        .to_string(),
    );
    assert_eq!(logs.died_deliveries(), BTreeMap::new());
    let mut proxy = ProxyStats::default();
    for (operation, key) in [
        ("UpdateItem", "k-cut"),
        ("UpdateItem", "k-cut"),
        ("PutItem", "k-cut"),
        ("UpdateItem", "k-other"),
    ] {
        proxy.self_met.push(SelfMetWrite {
            operation: operation.to_owned(),
            table: "idempotency".to_owned(),
            key: key.to_owned(),
        });
    }
    let conflicts = SelfConflicts::of(&proxy, &logs);
    let pair = |o: &str, k: &str| (o.to_owned(), k.to_owned());
    assert_eq!(conflicts.abandoned, [pair("UpdateItem", "k-cut")]);
    assert_eq!(
        conflicts.unresolved,
        [
            pair("UpdateItem", "k-cut"),
            pair("PutItem", "k-cut"),
            pair("UpdateItem", "k-other")
        ]
    );
}
