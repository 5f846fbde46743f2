//! What the demo and the fault-injection suite share: the local AWS, the function binaries, publishing, draining.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::process::Command;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, OnceLock};
use std::time::{Duration, Instant};

use aws_sdk_sqs::types::{MessageAttributeValue, SendMessageBatchRequestEntry};

use crate::workspace_root;

/// Where make test puts the fault-injection builds of the functions before it starts the fault suite beside
/// `cargo test` (which builds the plain ones under the same names): when set, the suite runs the binaries in this
/// folder and builds nothing, so no build of the other flavour can come between its build and its copy.
pub const PREBUILT_FAULT_BINARIES: &str = "SQSAFE_E2E_FAULT_BIN_DIR";

/// Where make test puts the plain builds of the functions, built before the tests run: when set, the tests run the
/// binaries in this folder and build nothing (a `cargo build` inside a test waits on cargo's lock while the steps
/// beside the tests build, on 2 cores for minutes).
pub const PREBUILT_BINARIES: &str = "SQSAFE_E2E_BIN_DIR";

/// Builds the function binaries (with the `fault-injection` feature when asked) and copies them out of cargo's way,
/// so a later build of the other flavour does not overwrite them. Returns the folder holding them. With
/// [`PREBUILT_FAULT_BINARIES`] set, the fault-injection flavour is that folder, as it is; with [`PREBUILT_BINARIES`]
/// set, the plain one.
///
/// # Panics
/// When the build fails: its output is in the message; when the prebuilt folder lacks a function's binary.
pub fn build_functions(fault_injection: bool) -> PathBuf {
    let prebuilt = if fault_injection {
        PREBUILT_FAULT_BINARIES
    } else {
        PREBUILT_BINARIES
    };
    if let Some(dir) = prebuilt_folder(prebuilt, function_binaries(fault_injection)) {
        return dir;
    }
    // Once per flavour and process: a suite's later runs reuse the first build instead of taking cargo's lock again
    // (make test runs the fault suite beside the template checks, whose sam build holds that lock for minutes).
    static BUILT: [OnceLock<PathBuf>; 2] = [OnceLock::new(), OnceLock::new()];
    BUILT[usize::from(fault_injection)]
        .get_or_init(|| build_functions_now(fault_injection))
        .clone()
}

/// charge-payment's DynamoDB-stream consumer: an example (in `target/debug/examples`), built with the
/// `fault-injection` feature only.
const CHANGES_EXAMPLE: &str = "charge-payment-changes";

/// The binaries of a flavour: with the `fault-injection` feature, charge-payment's example [`CHANGES_EXAMPLE`] too
/// (the fault suite's stream runs).
fn function_binaries(fault_injection: bool) -> &'static [&'static str] {
    if fault_injection {
        &["charge-payment", "apply-ledger", CHANGES_EXAMPLE]
    } else {
        &["charge-payment", "apply-ledger"]
    }
}

fn build_functions_now(fault_injection: bool) -> PathBuf {
    let root = workspace_root();
    let mut command = Command::new(env!("CARGO"));
    command
        .current_dir(&root)
        .args(["build", "-q", "-p", "charge-payment", "-p", "apply-ledger"]);
    if fault_injection {
        command.args([
            "--features",
            "charge-payment/fault-injection,apply-ledger/fault-injection",
            "--bins",
            "--example",
            CHANGES_EXAMPLE,
        ]);
    }
    let output = command.output().expect("run cargo build");
    assert!(
        output.status.success(),
        "cargo build of the functions failed:\n{}",
        String::from_utf8_lossy(&output.stderr)
    );
    let dir = root.join("target").join(if fault_injection {
        "e2e-fault-bin"
    } else {
        "e2e-bin"
    });
    std::fs::create_dir_all(&dir).expect("binary folder");
    for name in function_binaries(fault_injection) {
        let folder = if *name == CHANGES_EXAMPLE {
            "target/debug/examples"
        } else {
            "target/debug"
        };
        std::fs::copy(root.join(folder).join(name), dir.join(name))
            .expect("copy the function binary");
    }
    dir
}

/// The folder environment variable `var` names, when set, holding every one of `binaries` (make test's builds; see
/// [`PREBUILT_BINARIES`]).
///
/// # Panics
/// When the folder lacks one of them.
pub fn prebuilt_folder(var: &str, binaries: &[&str]) -> Option<PathBuf> {
    let dir = PathBuf::from(std::env::var_os(var).filter(|d| !d.is_empty())?);
    for name in binaries {
        assert!(
            dir.join(name).is_file(),
            "{var}={} has no {name}: build it (the fault-injection flavour of a function with its fault-injection \
             feature) and copy it there",
            dir.display()
        );
    }
    Some(dir)
}

/// The payments API's binary (`sqsafe-payments`), for the fault suite's run that kills its process: built once per
/// process and copied out of cargo's way, or, with [`PREBUILT_FAULT_BINARIES`] set, that folder's (make test copies
/// it there beside the functions).
///
/// # Panics
/// When the build fails, or the prebuilt folder has no `sqsafe-payments`.
pub fn payments_binary() -> PathBuf {
    if let Some(dir) = prebuilt_folder(PREBUILT_FAULT_BINARIES, &["sqsafe-payments"]) {
        return dir.join("sqsafe-payments");
    }
    static BUILT: OnceLock<PathBuf> = OnceLock::new();
    BUILT
        .get_or_init(|| {
            let root = workspace_root();
            let output = Command::new(env!("CARGO"))
                .current_dir(&root)
                .args([
                    "build",
                    "-q",
                    "-p",
                    "sqsafe-test-servers",
                    "--bin",
                    "sqsafe-payments",
                ])
                .output()
                .expect("run cargo build");
            assert!(
                output.status.success(),
                "cargo build of sqsafe-payments failed:\n{}",
                String::from_utf8_lossy(&output.stderr)
            );
            let dir = root.join("target/e2e-bin");
            std::fs::create_dir_all(&dir).expect("binary folder");
            let binary = dir.join("sqsafe-payments");
            std::fs::copy(root.join("target/debug/sqsafe-payments"), &binary)
                .expect("copy the payments binary");
            binary
        })
        .clone()
}

/// A message to publish: body and correlation id.
#[derive(Debug, Clone)]
pub struct Outgoing {
    /// The body.
    pub body: String,
    /// The `correlationId` attribute.
    pub correlation_id: String,
    /// FIFO: the group.
    pub group: Option<String>,
    /// FIFO: the deduplication id.
    pub dedup: Option<String>,
    /// The producer's trace context, sent as the `traceparent` attribute (W3C): a record's span is its child.
    pub traceparent: Option<String>,
}

/// Sends `messages` in batches of 10; returns the message ids in order.
///
/// # Panics
/// When SQS refuses a message.
pub async fn publish(
    sqs: &aws_sdk_sqs::Client,
    queue_url: &str,
    messages: &[Outgoing],
) -> Vec<String> {
    let mut ids = Vec::with_capacity(messages.len());
    for chunk in messages.chunks(10) {
        let entries: Vec<SendMessageBatchRequestEntry> = chunk
            .iter()
            .enumerate()
            .map(|(i, m)| {
                let attr = MessageAttributeValue::builder()
                    .data_type("String")
                    .string_value(&m.correlation_id)
                    .build()
                    .expect("attribute");
                let mut entry = SendMessageBatchRequestEntry::builder()
                    .id(format!("e{i}"))
                    .message_body(&m.body)
                    .message_attributes("correlationId", attr)
                    .set_message_group_id(m.group.clone())
                    .set_message_deduplication_id(m.dedup.clone());
                if let Some(traceparent) = &m.traceparent {
                    let attr = MessageAttributeValue::builder()
                        .data_type("String")
                        .string_value(traceparent)
                        .build()
                        .expect("attribute");
                    entry = entry.message_attributes("traceparent", attr);
                }
                entry.build().expect("entry")
            })
            .collect();
        let out = sqs
            .send_message_batch()
            .queue_url(queue_url)
            .set_entries(Some(entries))
            .send()
            .await
            .expect("send");
        assert!(
            out.failed().is_empty(),
            "SQS refused messages: {:?}",
            out.failed()
        );
        let mut sent: Vec<_> = out
            .successful()
            .iter()
            .map(|s| (s.id().to_owned(), s.message_id().to_owned()))
            .collect();
        sent.sort_by_key(|(id, _)| id[1..].parse::<usize>().unwrap_or(0));
        ids.extend(sent.into_iter().map(|(_, m)| m));
    }
    ids
}

/// Visible + in flight + delayed messages of a queue.
///
/// # Panics
/// When the attributes cannot be read.
pub async fn depth(sqs: &aws_sdk_sqs::Client, queue_url: &str) -> u64 {
    sqsafe_local::stack::queue_depth(sqs, queue_url)
        .await
        .expect("queue attributes")
}

/// Waits until every queue in `urls` is empty; `false` when `limit` passed first.
pub async fn drained(sqs: &aws_sdk_sqs::Client, urls: &[String], limit: Duration) -> bool {
    let started = Instant::now();
    loop {
        let mut total = 0;
        for url in urls {
            total += depth(sqs, url).await;
        }
        if total == 0 {
            return true;
        }
        if started.elapsed() > limit {
            return false;
        }
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
}

/// Messages being published by [`feed`]: how many are out, and the message ids once all are.
pub struct Feed {
    total: u64,
    published: Arc<AtomicU64>,
    task: tokio::task::JoinHandle<Vec<String>>,
}

impl Feed {
    /// Messages to publish in all.
    pub fn total(&self) -> u64 {
        self.total
    }

    /// Messages published so far.
    pub fn published(&self) -> u64 {
        self.published.load(Ordering::Relaxed)
    }

    /// Waits for the last batch; the message ids in the order of the messages.
    ///
    /// # Panics
    /// When publishing failed (SQS refused a message).
    pub async fn ids(self) -> Vec<String> {
        self.task.await.expect("the feed task")
    }
}

/// Publishes `messages` in their order, in batches of 10, while the queue holds fewer than `backlog` messages
/// (visible, in flight or delayed); returns at once. A consumer meets the messages in the same order as if they had
/// all been sent first, but the queue never holds more than `backlog + 10` of them: moto's ReceiveMessage and
/// GetQueueAttributes walk every message of the queue (its retention check reads every queue attribute, counts
/// included, once per message received), so their cost grows with the backlog, and a backlog of 1,300 messages made
/// moto's one Python core the fault suite's bottleneck.
pub fn feed(
    sqs: &aws_sdk_sqs::Client,
    queue_url: &str,
    messages: Vec<Outgoing>,
    backlog: u64,
) -> Feed {
    let published = Arc::new(AtomicU64::new(0));
    let total = messages.len() as u64;
    let (sqs, queue_url, counter) = (sqs.clone(), queue_url.to_owned(), published.clone());
    let task = tokio::spawn(async move {
        let mut ids = Vec::with_capacity(messages.len());
        for chunk in messages.chunks(10) {
            while depth(&sqs, &queue_url).await >= backlog {
                tokio::time::sleep(Duration::from_millis(200)).await;
            }
            ids.extend(publish(&sqs, &queue_url, chunk).await);
            counter.fetch_add(chunk.len() as u64, Ordering::Relaxed);
        }
        ids
    });
    Feed {
        total,
        published,
        task,
    }
}

/// How a run is watched: it may take as long as it needs while messages keep leaving the queue, and it has stalled
/// when none left for `stall`.
#[derive(Debug, Clone, Copy)]
pub struct ProgressWatch {
    /// The longest time without a message leaving the source queue (deleted after its record was applied, replayed
    /// or dead-lettered, or moved to the DLQ by SQS) before the run is declared stalled.
    pub stall: Duration,
    /// How often a progress line is printed.
    pub report_every: Duration,
}

impl ProgressWatch {
    /// The stall bound of a pipeline from its timings: the longest a single message may take from its first receive
    /// to leaving the queue, by the protocol: `max_receives` deliveries, each at most the function's timeout, then
    /// away for at most the longest of the visibility timeout, the backoff's maximum, and the lease of a crashed
    /// claim (the function timeout) plus the takeover margin and SQS's one-second rounding; plus a long poll's wait
    /// and a cold start per delivery (one second each). While any message is left, some message must leave within
    /// that, whatever the machine's speed: the pollers are busy with the others, each batch bounded by the timeout.
    pub fn for_pipeline(timings: PipelineTimings) -> Self {
        let away = timings
            .visibility_timeout
            .max(timings.backoff_max)
            .max(timings.function_timeout + timings.takeover_margin + Duration::from_secs(1));
        let delivery = timings.function_timeout + away + Duration::from_secs(2);
        Self {
            stall: delivery * timings.max_receives,
            report_every: Duration::from_secs(30),
        }
    }
}

/// The timings a [`ProgressWatch`] bound is derived from.
#[derive(Debug, Clone, Copy)]
pub struct PipelineTimings {
    /// The source queue's visibility timeout.
    pub visibility_timeout: Duration,
    /// The function's timeout (a batch's longest run; a crashed claim's lease ends by then).
    pub function_timeout: Duration,
    /// The longest backoff the function sets on a transient failure.
    pub backoff_max: Duration,
    /// How long after a lease ends another attempt may take the key over.
    pub takeover_margin: Duration,
    /// Receives before SQS moves a message to the DLQ.
    pub max_receives: u32,
}

/// How a watched run ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RunEnd {
    /// Everything published and the queue empty.
    Drained {
        /// Wall time of the run.
        elapsed: Duration,
    },
    /// No message left the queue for the watch's stall bound.
    Stalled {
        /// Wall time of the run.
        elapsed: Duration,
        /// Messages still in the queue.
        left: u64,
        /// Messages not yet published.
        unpublished: u64,
    },
}

/// What a queue holds, by state (moto's approximate counts are exact).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct QueueState {
    /// Visible: waiting for a poller.
    pub visible: u64,
    /// In flight: received and not deleted, until their visibility timeout (or the delay a function set) ends.
    pub in_flight: u64,
    /// Delayed.
    pub delayed: u64,
}

impl QueueState {
    /// Every message of the queue.
    pub fn total(&self) -> u64 {
        self.visible + self.in_flight + self.delayed
    }
}

impl std::fmt::Display for QueueState {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "{} visible, {} in flight, {} delayed",
            self.visible, self.in_flight, self.delayed
        )
    }
}

/// A queue's messages by state.
///
/// # Panics
/// When the attributes cannot be read.
pub async fn queue_state(sqs: &aws_sdk_sqs::Client, queue_url: &str) -> QueueState {
    use aws_sdk_sqs::types::QueueAttributeName as A;
    let attributes = sqs
        .get_queue_attributes()
        .queue_url(queue_url)
        .attribute_names(A::All)
        .send()
        .await
        .expect("queue attributes")
        .attributes
        .unwrap_or_default();
    let count = |name: A| {
        attributes
            .get(&name)
            .and_then(|v| v.parse::<u64>().ok())
            .unwrap_or(0)
    };
    QueueState {
        visible: count(A::ApproximateNumberOfMessages),
        in_flight: count(A::ApproximateNumberOfMessagesNotVisible),
        delayed: count(A::ApproximateNumberOfMessagesDelayed),
    }
}

/// Watches a run until everything `feed` publishes has left `queue_url`, or until no message left it for
/// `watch.stall`: the verdict depends on progress, never on how long a slow machine takes. Prints a line every
/// `watch.report_every` (messages left the queue, its state, the DLQ's depth), prefixed by `label`.
pub async fn watch_run(
    sqs: &aws_sdk_sqs::Client,
    queue_url: &str,
    dlq_url: &str,
    feed: &Feed,
    watch: ProgressWatch,
    label: &str,
) -> RunEnd {
    let started = Instant::now();
    let mut last_progress = Instant::now();
    let mut last_report = Instant::now();
    let mut gone_before = 0;
    let mut longest_gap = Duration::ZERO;
    loop {
        // Read the count published before the queue: a batch published in between is then in the queue but not in
        // `published`, which can only understate what left (never report progress that did not happen).
        let published = feed.published();
        let state = queue_state(sqs, queue_url).await;
        let gone = published.saturating_sub(state.total());
        if gone > gone_before {
            gone_before = gone;
            longest_gap = longest_gap.max(last_progress.elapsed());
            last_progress = Instant::now();
        }
        if published == feed.total() && state.total() == 0 {
            println!(
                "{label}: drained in {:.0} s; longest time without a message leaving the queue {:.1} s (stall bound {:.0} s)",
                started.elapsed().as_secs_f64(),
                longest_gap.as_secs_f64(),
                watch.stall.as_secs_f64()
            );
            return RunEnd::Drained {
                elapsed: started.elapsed(),
            };
        }
        if last_report.elapsed() >= watch.report_every {
            last_report = Instant::now();
            println!(
                "{label}: {:>4.0} s  {gone}/{} left the queue; queue: {state}; DLQ {}",
                started.elapsed().as_secs_f64(),
                feed.total(),
                depth(sqs, dlq_url).await
            );
        }
        if last_progress.elapsed() > watch.stall {
            return RunEnd::Stalled {
                elapsed: started.elapsed(),
                left: state.total(),
                unpublished: feed.total() - published,
            };
        }
        tokio::time::sleep(Duration::from_secs(1)).await;
    }
}

/// Every message of a queue (received with a long visibility, so each comes once).
///
/// # Panics
/// When SQS refuses.
pub async fn read_all(
    sqs: &aws_sdk_sqs::Client,
    queue_url: &str,
) -> Vec<aws_sdk_sqs::types::Message> {
    let mut all = Vec::new();
    loop {
        let batch = sqs
            .receive_message()
            .queue_url(queue_url)
            .max_number_of_messages(10)
            .visibility_timeout(600)
            .message_attribute_names("All")
            .message_system_attribute_names(aws_sdk_sqs::types::MessageSystemAttributeName::All)
            .send()
            .await
            .expect("receive")
            .messages
            .unwrap_or_default();
        if batch.is_empty() {
            return all;
        }
        all.extend(batch);
    }
}

/// A message attribute's string value.
pub fn attribute(message: &aws_sdk_sqs::types::Message, name: &str) -> Option<String> {
    message
        .message_attributes()?
        .get(name)?
        .string_value()
        .map(str::to_owned)
}

/// The fields of the sqsafe context a dead-letter copy carries (its `sqsafe.context` attribute, compact JSON): strings
/// as they are, numbers as their decimal text. Empty for a message without context (SQS's redrive policy moved it).
pub fn dead_letter_context(message: &aws_sdk_sqs::types::Message) -> BTreeMap<String, String> {
    let Some(context) = attribute(message, "sqsafe.context")
        .and_then(|v| serde_json::from_str::<serde_json::Map<String, serde_json::Value>>(&v).ok())
    else {
        return BTreeMap::new();
    };
    context
        .into_iter()
        .map(|(field, value)| match value {
            serde_json::Value::String(s) => (field, s),
            other => (field, other.to_string()),
        })
        .collect()
}

/// One field of [`dead_letter_context`].
pub fn context_field(message: &aws_sdk_sqs::types::Message, field: &str) -> Option<String> {
    dead_letter_context(message).remove(field)
}
