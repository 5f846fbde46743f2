//! Per-batch counters written as one CloudWatch
//! [Embedded Metric Format](https://docs.aws.amazon.com/AmazonCloudWatch/latest/monitoring/CloudWatch_Embedded_Metric_Format_Specification.html)
//! line: CloudWatch Logs turns it into metrics, with no `PutMetricData` call and no extra latency.
//!
//! ```
//! use std::time::Duration;
//! use sqsafe_telemetry::metrics::{BatchMetrics, Metric};
//!
//! let metrics = BatchMetrics::new("sqsafe", "charge-payment");
//! metrics.incr(Metric::Processed);
//! metrics.incr(Metric::Replayed);
//! assert_eq!(metrics.get(Metric::Processed), 1);
//!
//! let mut out = Vec::new();
//! metrics.write_to(&mut out, 1_714_564_800_000, Duration::from_micros(12_500))?;
//! let doc: serde_json::Value = serde_json::from_slice(&out)?;
//! assert_eq!(doc["consumer"], "charge-payment");
//! assert_eq!(doc["RecordsReplayed"], 1);
//! assert_eq!(doc["RecordsSentToDlq"], 0); // every counter, every batch
//! assert_eq!(doc["BatchDuration"], 12.5);
//! // In the handler: metrics.emit(now_ms, started.elapsed());
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```
//!
//! One metric directive, dimension set `[["consumer"]]`, counters with unit `Count` and `BatchDuration` in
//! `Milliseconds`. All eleven counters ([`Metric::ALL`]) are written every time, zeros included, so dashboards and
//! alarms see a continuous series rather than gaps. When records were dead-lettered, one more line per error kind
//! carries `RecordsSentToDlq` under the dimensions `consumer` and `error_kind` ([`BatchMetrics::dead_lettered`]).
//!
//! `RecordsReceived` counts the records of each invocation's batch, a refused one included. Unless the batch is
//! refused (`BatchesRefused`), each record then counts once among `RecordsProcessed`, `RecordsReplayed`,
//! `RecordsSkippedByCache`, `RecordsIgnored` (not an event: S3's `s3:TestEvent`), `RecordsFailedTransient`,
//! `RecordsFailedPermanent` and `RecordsHeldBack` (FIFO: not run because an earlier record of its group was
//! reported), and also in `RecordsSentToDlq` when it went there.
//! `RecordsLeaseLost` and `RecordsDeferred` say why some records failed transiently; they are counted in
//! `RecordsFailedTransient` too.

use std::io;
use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use serde_json::{Value, json};

use crate::api_metrics::{REQUEST_DURATION, RequestOutcome};

/// The dimension that names the consumer.
const CONSUMER_DIMENSION: &str = "consumer";

/// The dimension that names the error kind of dead letters.
const ERROR_KIND_DIMENSION: &str = "error_kind";

/// The metric name of the batch duration.
pub const BATCH_DURATION: &str = "BatchDuration";

/// The outbox sweeper's gauge: seconds since the oldest outbox item still `PENDING` was written (0 when none is).
/// The outbox-age alarm watches it.
pub const OUTBOX_OLDEST_PENDING_AGE: &str = "OutboxOldestPendingAge";
/// The outbox sweeper's count of events it published in one run.
pub const OUTBOX_EVENTS_SWEPT: &str = "OutboxEventsSwept";
/// The outbox sweeper's count of due events it could not publish or mark in one run.
pub const OUTBOX_SWEEP_FAILURES: &str = "OutboxSweepFailures";

/// One outbox sweep's EMF document: [`OUTBOX_OLDEST_PENDING_AGE`] (seconds), [`OUTBOX_EVENTS_SWEPT`] and
/// [`OUTBOX_SWEEP_FAILURES`] (counts) under the dimension `consumer` = the sweeper's name.
pub fn outbox_sweep_emf(
    namespace: &str,
    sweeper: &str,
    timestamp_ms: u64,
    swept: u64,
    failures: u64,
    oldest_pending: Duration,
) -> Value {
    json!({
        "_aws": {
            "Timestamp": timestamp_ms,
            "CloudWatchMetrics": [{
                "Namespace": namespace,
                "Dimensions": [[CONSUMER_DIMENSION]],
                "Metrics": [
                    { "Name": OUTBOX_OLDEST_PENDING_AGE, "Unit": "Seconds" },
                    { "Name": OUTBOX_EVENTS_SWEPT, "Unit": "Count" },
                    { "Name": OUTBOX_SWEEP_FAILURES, "Unit": "Count" },
                ],
            }],
        },
        CONSUMER_DIMENSION: sweeper,
        OUTBOX_OLDEST_PENDING_AGE: oldest_pending.as_secs(),
        OUTBOX_EVENTS_SWEPT: swept,
        OUTBOX_SWEEP_FAILURES: failures,
    })
}

/// Every metric name sqsafe writes: the counters ([`Metric::ALL`]), [`BATCH_DURATION`], the outbox sweeper's three,
/// and the idempotency layer's per request ([`RequestOutcome::ALL`], [`REQUEST_DURATION`]). What a dashboard or an
/// alarm may name in the `sqsafe` namespace (`sqsafe check`, rule dashboard-metrics).
pub const METRIC_NAMES: [&str; Metric::ALL.len() + 4 + RequestOutcome::ALL.len() + 1] = {
    let mut names = [""; Metric::ALL.len() + 4 + RequestOutcome::ALL.len() + 1];
    let mut i = 0;
    while i < Metric::ALL.len() {
        names[i] = Metric::ALL[i].name();
        i += 1;
    }
    names[i] = BATCH_DURATION;
    names[i + 1] = OUTBOX_OLDEST_PENDING_AGE;
    names[i + 2] = OUTBOX_EVENTS_SWEPT;
    names[i + 3] = OUTBOX_SWEEP_FAILURES;
    i += 4;
    let mut j = 0;
    while j < RequestOutcome::ALL.len() {
        names[i + j] = RequestOutcome::ALL[j].metric_name();
        j += 1;
    }
    names[i + j] = REQUEST_DURATION;
    names
};

/// What happened to a record.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Metric {
    /// Records in the invocation's batch: `RecordsReceived`.
    Received,
    /// The effect ran and completed: `RecordsProcessed`.
    Processed,
    /// A duplicate answered from the idempotency store: `RecordsReplayed`.
    Replayed,
    /// A duplicate answered from the local cache, without a store read: `RecordsSkippedByCache`.
    SkippedByCache,
    /// Not an event for the handler (S3's `s3:TestEvent`), acknowledged: `RecordsIgnored`.
    Ignored,
    /// Failed and reported for redelivery: `RecordsFailedTransient`.
    FailedTransient,
    /// Failed in a way a retry cannot fix: `RecordsFailedPermanent`.
    FailedPermanent,
    /// Sent to the dead-letter queue: `RecordsSentToDlq`.
    SentToDlq,
    /// Failed because another attempt took its idempotency key over while it ran (its lease had passed: a slow
    /// effect, or clock skew between instances): `RecordsLeaseLost`.
    LeaseLost,
    /// FIFO: not run because an earlier record of its group was reported; reported too, to keep the group's order:
    /// `RecordsHeldBack`.
    HeldBack,
    /// Not started because too little time was left before the invocation's deadline; reported so it comes back:
    /// `RecordsDeferred`.
    Deferred,
    /// The whole invocation was refused (a malformed event, or every record failed under the fail-invocation policy):
    /// its batch comes back as a whole. `BatchesRefused`.
    BatchRefused,
}

impl Metric {
    /// Every metric, in the order they appear in the EMF document.
    pub const ALL: [Metric; 12] = [
        Metric::Received,
        Metric::Processed,
        Metric::Replayed,
        Metric::SkippedByCache,
        Metric::Ignored,
        Metric::FailedTransient,
        Metric::FailedPermanent,
        Metric::SentToDlq,
        Metric::LeaseLost,
        Metric::HeldBack,
        Metric::Deferred,
        Metric::BatchRefused,
    ];

    /// The CloudWatch metric name.
    pub const fn name(self) -> &'static str {
        match self {
            Metric::Received => "RecordsReceived",
            Metric::Processed => "RecordsProcessed",
            Metric::Replayed => "RecordsReplayed",
            Metric::SkippedByCache => "RecordsSkippedByCache",
            Metric::Ignored => "RecordsIgnored",
            Metric::FailedTransient => "RecordsFailedTransient",
            Metric::FailedPermanent => "RecordsFailedPermanent",
            Metric::SentToDlq => "RecordsSentToDlq",
            Metric::LeaseLost => "RecordsLeaseLost",
            Metric::HeldBack => "RecordsHeldBack",
            Metric::Deferred => "RecordsDeferred",
            Metric::BatchRefused => "BatchesRefused",
        }
    }

    const fn index(self) -> usize {
        self as usize
    }
}

/// The counters of one batch, for one consumer. Create one per batch; records handled concurrently increment it
/// through `&self`.
#[derive(Debug)]
pub struct BatchMetrics {
    namespace: String,
    consumer: String,
    counts: [AtomicU64; Metric::ALL.len()],
    /// Dead letters per error kind, in first-seen order (a batch has at most 10 records, so a few kinds).
    dead_letters: Mutex<Vec<(String, u64)>>,
}

impl BatchMetrics {
    /// Counters at zero. `namespace` is the CloudWatch namespace (1 to 255 characters, e.g. `sqsafe`); `consumer`
    /// is the value of the `consumer` dimension (e.g. the function's name).
    pub fn new(namespace: impl Into<String>, consumer: impl Into<String>) -> Self {
        Self {
            namespace: namespace.into(),
            consumer: consumer.into(),
            counts: Default::default(),
            dead_letters: Mutex::new(Vec::new()),
        }
    }

    /// Counts one record sent to the dead-letter queue with error kind `kind`: `RecordsSentToDlq` for the consumer,
    /// and `RecordsSentToDlq` by `consumer` and `error_kind` (see [`BatchMetrics::write_to`]).
    pub fn dead_lettered(&self, kind: &str) {
        self.incr(Metric::SentToDlq);
        let mut by_kind = self
            .dead_letters
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        match by_kind.iter_mut().find(|(k, _)| k == kind) {
            Some((_, n)) => *n += 1,
            None => by_kind.push((kind.to_owned(), 1)),
        }
    }

    /// Dead letters of this batch per error kind, in first-seen order.
    pub fn dead_letters_by_kind(&self) -> Vec<(String, u64)> {
        self.dead_letters
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .clone()
    }

    /// Counts one record.
    pub fn incr(&self, metric: Metric) {
        self.add(metric, 1);
    }

    /// Counts `n` records.
    pub fn add(&self, metric: Metric, n: u64) {
        self.counts[metric.index()].fetch_add(n, Ordering::Relaxed);
    }

    /// The count so far.
    pub fn get(&self, metric: Metric) -> u64 {
        self.counts[metric.index()].load(Ordering::Relaxed)
    }

    /// The EMF document: `timestamp_ms` is milliseconds since the Unix epoch (CloudWatch accepts up to two weeks
    /// in the past and two hours in the future); `batch_duration` becomes `BatchDuration` in milliseconds.
    pub fn to_emf(&self, timestamp_ms: u64, batch_duration: Duration) -> Value {
        let mut definitions: Vec<Value> = Metric::ALL
            .iter()
            .map(|m| json!({ "Name": m.name(), "Unit": "Count" }))
            .collect();
        definitions.push(json!({ "Name": BATCH_DURATION, "Unit": "Milliseconds" }));

        let mut doc = json!({
            "_aws": {
                "Timestamp": timestamp_ms,
                "CloudWatchMetrics": [{
                    "Namespace": self.namespace,
                    "Dimensions": [[CONSUMER_DIMENSION]],
                    "Metrics": definitions,
                }],
            },
            CONSUMER_DIMENSION: self.consumer,
            BATCH_DURATION: millis(batch_duration),
        });
        for metric in Metric::ALL {
            doc[metric.name()] = self.get(metric).into();
        }
        doc
    }

    /// Prints the EMF document as one line on stdout, beside (not through) the `tracing` logs, where CloudWatch
    /// Logs picks it up.
    pub fn emit(&self, timestamp_ms: u64, batch_duration: Duration) {
        // Metrics must never fail a batch, so a closed stdout loses the line instead of panicking like `println!`.
        let _ = self.write_to(&mut io::stdout().lock(), timestamp_ms, batch_duration);
    }

    /// One EMF document per error kind dead-lettered in this batch: `RecordsSentToDlq` (unit `Count`) under the
    /// dimensions `consumer` and `error_kind`, for a dashboard's "dead-lettered by kind". None when nothing was
    /// dead-lettered. (EMF takes dimension values from the document's root, so each kind needs its own document.)
    pub fn dead_letter_emf(&self, timestamp_ms: u64) -> Vec<Value> {
        self.dead_letters_by_kind()
            .into_iter()
            .map(|(kind, count)| {
                json!({
                    "_aws": {
                        "Timestamp": timestamp_ms,
                        "CloudWatchMetrics": [{
                            "Namespace": self.namespace,
                            "Dimensions": [[CONSUMER_DIMENSION, ERROR_KIND_DIMENSION]],
                            "Metrics": [{ "Name": Metric::SentToDlq.name(), "Unit": "Count" }],
                        }],
                    },
                    CONSUMER_DIMENSION: self.consumer,
                    ERROR_KIND_DIMENSION: kind,
                    Metric::SentToDlq.name(): count,
                })
            })
            .collect()
    }

    /// Writes the EMF document as one line to `out`, then one line per error kind dead-lettered in this batch
    /// ([`BatchMetrics::dead_letter_emf`]).
    ///
    /// # Errors
    ///
    /// When writing to `out` fails.
    pub fn write_to(
        &self,
        out: &mut impl io::Write,
        timestamp_ms: u64,
        batch_duration: Duration,
    ) -> io::Result<()> {
        // The document of `to_emf`, written directly: this line is written for every batch, and building it as a
        // `Value` first cost more than a record's own bookkeeping (bench/RESULTS.md, figure 5).
        use std::io::Write as _;
        let mut line = Vec::with_capacity(1024);
        write!(
            line,
            "{{\"_aws\":{{\"Timestamp\":{timestamp_ms},\"CloudWatchMetrics\":[{{\"Namespace\":"
        )?;
        serde_json::to_writer(&mut line, &*self.namespace)?;
        write!(
            line,
            ",\"Dimensions\":[[\"{CONSUMER_DIMENSION}\"]],\"Metrics\":["
        )?;
        for metric in Metric::ALL {
            write!(
                line,
                "{{\"Name\":\"{}\",\"Unit\":\"Count\"}},",
                metric.name()
            )?;
        }
        write!(
            line,
            "{{\"Name\":\"{BATCH_DURATION}\",\"Unit\":\"Milliseconds\"}}]}}]}},\"{CONSUMER_DIMENSION}\":"
        )?;
        serde_json::to_writer(&mut line, &*self.consumer)?;
        write!(line, ",\"{BATCH_DURATION}\":")?;
        serde_json::to_writer(&mut line, &millis(batch_duration))?;
        for metric in Metric::ALL {
            write!(line, ",\"{}\":{}", metric.name(), self.get(metric))?;
        }
        line.extend_from_slice(b"}\n");
        out.write_all(&line)?;
        for doc in self.dead_letter_emf(timestamp_ms) {
            writeln!(out, "{doc}")?;
        }
        Ok(())
    }
}

/// Milliseconds with the sub-millisecond part kept (12.5 for 12 500 µs).
fn millis(d: Duration) -> f64 {
    // Nanoseconds over 1e6 is exact for round durations, unlike `as_secs_f64() * 1e3`.
    d.as_nanos() as f64 / 1e6
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counters_start_at_zero_and_count() {
        let metrics = BatchMetrics::new("sqsafe", "c");
        for metric in Metric::ALL {
            assert_eq!(metrics.get(metric), 0, "{metric:?}");
        }
        metrics.incr(Metric::Processed);
        metrics.incr(Metric::Processed);
        metrics.incr(Metric::SentToDlq);
        assert_eq!(metrics.get(Metric::Processed), 2);
        assert_eq!(metrics.get(Metric::SentToDlq), 1);
        assert_eq!(metrics.get(Metric::Replayed), 0);
    }

    #[test]
    fn emf_document_has_the_exact_shape() {
        let metrics = BatchMetrics::new("sqsafe", "charge-payment");
        metrics.add(Metric::Received, 7);
        for _ in 0..3 {
            metrics.incr(Metric::Processed);
        }
        metrics.incr(Metric::Replayed);
        metrics.incr(Metric::FailedTransient);
        metrics.incr(Metric::Deferred);
        metrics.incr(Metric::HeldBack);
        metrics.incr(Metric::HeldBack);

        let doc = metrics.to_emf(1_714_564_800_250, Duration::from_micros(12_500));

        assert_eq!(
            doc,
            json!({
                "_aws": {
                    "Timestamp": 1_714_564_800_250_u64,
                    "CloudWatchMetrics": [{
                        "Namespace": "sqsafe",
                        "Dimensions": [["consumer"]],
                        "Metrics": [
                            { "Name": "RecordsReceived", "Unit": "Count" },
                            { "Name": "RecordsProcessed", "Unit": "Count" },
                            { "Name": "RecordsReplayed", "Unit": "Count" },
                            { "Name": "RecordsSkippedByCache", "Unit": "Count" },
                            { "Name": "RecordsIgnored", "Unit": "Count" },
                            { "Name": "RecordsFailedTransient", "Unit": "Count" },
                            { "Name": "RecordsFailedPermanent", "Unit": "Count" },
                            { "Name": "RecordsSentToDlq", "Unit": "Count" },
                            { "Name": "RecordsLeaseLost", "Unit": "Count" },
                            { "Name": "RecordsHeldBack", "Unit": "Count" },
                            { "Name": "RecordsDeferred", "Unit": "Count" },
                            { "Name": "BatchesRefused", "Unit": "Count" },
                            { "Name": "BatchDuration", "Unit": "Milliseconds" },
                        ],
                    }],
                },
                "consumer": "charge-payment",
                "RecordsReceived": 7,
                "RecordsProcessed": 3,
                "RecordsReplayed": 1,
                "RecordsSkippedByCache": 0,
                "RecordsIgnored": 0,
                "RecordsFailedTransient": 1,
                "RecordsFailedPermanent": 0,
                "RecordsSentToDlq": 0,
                "RecordsLeaseLost": 0,
                "RecordsHeldBack": 2,
                "RecordsDeferred": 1,
                "BatchesRefused": 0,
                "BatchDuration": 12.5,
            })
        );
    }

    #[test]
    fn every_declared_metric_has_a_numeric_value_at_the_root() {
        let doc = BatchMetrics::new("sqsafe", "c").to_emf(0, Duration::ZERO);
        let declared = doc["_aws"]["CloudWatchMetrics"][0]["Metrics"]
            .as_array()
            .expect("Metrics is an array");
        assert_eq!(declared.len(), Metric::ALL.len() + 1);
        for definition in declared {
            let name = definition["Name"].as_str().expect("Name is a string");
            assert!(doc[name].is_number(), "{name} has no value");
        }
        assert!(doc["consumer"].is_string());
    }

    #[test]
    fn metric_names_are_exactly_the_names_written() {
        let batch = BatchMetrics::new("sqsafe", "c").to_emf(0, Duration::ZERO);
        let sweep = outbox_sweep_emf("sqsafe", "s", 0, 0, 0, Duration::ZERO);
        let request = crate::api_metrics::request_emf(
            "sqsafe",
            "a",
            0,
            RequestOutcome::Executed,
            Duration::ZERO,
        );
        let mut written: Vec<&str> = [&batch, &sweep, &request]
            .into_iter()
            .flat_map(|doc| {
                doc["_aws"]["CloudWatchMetrics"][0]["Metrics"]
                    .as_array()
                    .expect("Metrics")
            })
            .map(|definition| definition["Name"].as_str().expect("Name is a string"))
            .collect();
        written.sort_unstable();
        let mut names = METRIC_NAMES.to_vec();
        names.sort_unstable();
        assert_eq!(names, written);
    }

    #[test]
    fn write_to_writes_one_line() {
        let metrics = BatchMetrics::new("sqsafe", "c");
        metrics.incr(Metric::SkippedByCache);
        let mut out = Vec::new();
        metrics
            .write_to(&mut out, 7, Duration::from_millis(3))
            .expect("writing to a Vec cannot fail");
        let text = String::from_utf8(out).expect("EMF is UTF-8");
        assert!(text.ends_with('\n'));
        assert_eq!(text.matches('\n').count(), 1);
        let doc: Value = serde_json::from_str(&text).expect("one JSON document");
        assert_eq!(doc, metrics.to_emf(7, Duration::from_millis(3)));
    }

    #[test]
    fn the_written_line_is_the_emf_document_for_any_name_and_count() {
        let metrics = BatchMetrics::new("name\"space", "con\\sumer \u{e9}");
        for (i, metric) in Metric::ALL.iter().enumerate() {
            metrics.add(*metric, i as u64 * 7 + 1);
        }
        metrics.dead_lettered("bad_payload");
        for duration in [
            Duration::ZERO,
            Duration::from_micros(12_500),
            Duration::from_secs(3),
        ] {
            let mut out = Vec::new();
            metrics
                .write_to(&mut out, 1_714_564_800_250, duration)
                .expect("writing to a Vec cannot fail");
            let text = String::from_utf8(out).expect("EMF is UTF-8");
            let first = text.lines().next().expect("a line");
            let doc: Value = serde_json::from_str(first).expect("JSON");
            assert_eq!(doc, metrics.to_emf(1_714_564_800_250, duration), "{first}");
            assert_eq!(text.lines().count(), 2, "and the dead letters' line");
        }
    }

    #[test]
    fn dead_letters_are_also_written_per_error_kind() {
        let metrics = BatchMetrics::new("sqsafe", "charge-payment");
        metrics.dead_lettered("payload_mismatch");
        metrics.dead_lettered("card_declined");
        metrics.dead_lettered("payload_mismatch");
        assert_eq!(metrics.get(Metric::SentToDlq), 3);

        let mut out = Vec::new();
        metrics
            .write_to(&mut out, 7, Duration::from_millis(3))
            .expect("writing to a Vec cannot fail");
        let text = String::from_utf8(out).expect("EMF is UTF-8");
        let docs: Vec<Value> = text
            .lines()
            .map(|l| serde_json::from_str(l).expect("one JSON document per line"))
            .collect();
        assert_eq!(docs.len(), 3, "{text}");
        assert_eq!(docs[0]["RecordsSentToDlq"], 3);
        assert_eq!(
            docs[1],
            json!({
                "_aws": {
                    "Timestamp": 7,
                    "CloudWatchMetrics": [{
                        "Namespace": "sqsafe",
                        "Dimensions": [["consumer", "error_kind"]],
                        "Metrics": [{ "Name": "RecordsSentToDlq", "Unit": "Count" }],
                    }],
                },
                "consumer": "charge-payment",
                "error_kind": "payload_mismatch",
                "RecordsSentToDlq": 2,
            })
        );
        assert_eq!(docs[2]["error_kind"], "card_declined");
        assert_eq!(docs[2]["RecordsSentToDlq"], 1);
    }

    #[test]
    fn no_dead_letter_no_per_kind_line() {
        let metrics = BatchMetrics::new("sqsafe", "c");
        metrics.incr(Metric::FailedPermanent);
        assert!(metrics.dead_letter_emf(0).is_empty());
    }

    #[test]
    fn batch_duration_keeps_sub_milliseconds() {
        assert_eq!(millis(Duration::from_micros(12_500)), 12.5);
        assert_eq!(millis(Duration::from_secs(2)), 2000.0);
        assert_eq!(millis(Duration::ZERO), 0.0);
    }

    #[test]
    fn batch_metrics_are_shared_across_threads() {
        fn assert_send_sync<T: Send + Sync>() {}
        assert_send_sync::<BatchMetrics>();

        let metrics = BatchMetrics::new("sqsafe", "c");
        std::thread::scope(|s| {
            for _ in 0..4 {
                s.spawn(|| {
                    for _ in 0..100 {
                        metrics.incr(Metric::Processed);
                    }
                });
            }
        });
        assert_eq!(metrics.get(Metric::Processed), 400);
    }
}
