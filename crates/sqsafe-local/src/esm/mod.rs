//! A local SQS event source mapping: what Lambda's poller does between a queue and a function.
//!
//! Long-polls up to `batch_size` messages, invokes the function with an `SqsEvent`, deletes only the records that the
//! answer's `batchItemFailures` does not name, and leaves the rest to their visibility timeout, so SQS (moto) counts
//! receives and moves exhausted messages to the DLQ by the queue's redrive policy. If the invocation fails (a crash, a
//! timeout, a function error) or names an identifier that is not in the batch, nothing is deleted, as in Lambda.
//! Several mappings may poll one queue at once, like Lambda's concurrent pollers.
//!
//! A stream (a Kinesis shard, a table's DynamoDB stream) has its own poller ([`StreamMapping`]): per shard, from a
//! checkpoint that the answer's `batchItemFailures` moves, with bisection, retry limits and the on-failure
//! destination.
//!
//! With [`EventSourceMapping::with_reports`], each invocation's batch is reported as it is answered (esm/report.rs):
//! how many records, how each ended, how long it took.

mod event;
mod report;
mod stream;

use std::collections::HashSet;
use std::future::Future;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use aws_sdk_sqs::types::{
    DeleteMessageBatchRequestEntry, MessageSystemAttributeName, QueueAttributeName,
};
use serde_json::Value;
use tokio::sync::watch;

pub use event::sqs_event;
pub use report::{BatchReport, Ended, Reports};
pub use stream::{Delivered, Delivery, StreamMapping, StreamMappingConfig, dynamodb_stream_record};

use crate::lambda::BatchOutcomes;

/// Something that answers an SQS event: a function instance under the Runtime API, or an in-process consumer.
pub trait Invoker: Send {
    /// Invokes with `event` (an `SqsEvent` as JSON); `Err` is any failed invocation (crash, timeout, error).
    fn invoke(&mut self, event: Value) -> impl Future<Output = Result<Value, String>> + Send;

    /// What the function's own output counted of the records since the last call (its batch metrics lines), for
    /// the [reports](EventSourceMapping::with_reports); `None` when this invoker does not read it (the default).
    fn take_outcomes(&mut self) -> Option<BatchOutcomes> {
        None
    }
}

impl Invoker for crate::lambda::FunctionInstance {
    async fn invoke(&mut self, event: Value) -> Result<Value, String> {
        crate::lambda::FunctionInstance::invoke(self, event)
            .await
            .map_err(|e| e.to_string())
    }

    fn take_outcomes(&mut self) -> Option<BatchOutcomes> {
        crate::lambda::FunctionInstance::take_outcomes(self)
    }
}

/// Settings of one mapping.
#[derive(Debug, Clone)]
pub struct MappingConfig {
    /// The source queue.
    pub queue_url: String,
    /// Records per invocation (1-10).
    pub batch_size: i32,
    /// Long-poll wait per receive, seconds.
    pub wait_seconds: i32,
    /// Fault: the chance that the poller "crashes" after the invocation and before deleting, so even the successes
    /// come back (seeded).
    pub drop_delete_rate: f64,
    /// Seed of the drop-delete decisions.
    pub seed: u64,
}

/// What a mapping did.
#[derive(Debug, Default)]
pub struct MappingStats {
    /// Invocations made.
    pub invocations: AtomicU64,
    /// Records delivered (sum of batch sizes).
    pub records: AtomicU64,
    /// Records deleted after success.
    pub deleted: AtomicU64,
    /// Records the function reported in `batchItemFailures`.
    pub reported: AtomicU64,
    /// Invocations that failed as a whole (crash, timeout, function error, unknown identifier).
    pub failed_invocations: AtomicU64,
    /// Batches whose deletes were dropped by the injected poller crash.
    pub dropped_deletes: AtomicU64,
}

impl MappingStats {
    /// A plain copy of the counters: (invocations, records, deleted, reported, failed invocations, dropped deletes).
    pub fn snapshot(&self) -> [u64; 6] {
        [
            self.invocations.load(Ordering::Relaxed),
            self.records.load(Ordering::Relaxed),
            self.deleted.load(Ordering::Relaxed),
            self.reported.load(Ordering::Relaxed),
            self.failed_invocations.load(Ordering::Relaxed),
            self.dropped_deletes.load(Ordering::Relaxed),
        ]
    }
}

/// One poller bound to one function instance.
pub struct EventSourceMapping<I> {
    sqs: aws_sdk_sqs::Client,
    config: MappingConfig,
    queue_arn: String,
    invoker: I,
    stats: Arc<MappingStats>,
    rng: fastrand::Rng,
    reports: Option<Reports>,
}

impl<I: Invoker> EventSourceMapping<I> {
    /// Binds `invoker` to the queue (reads its ARN once).
    pub async fn new(
        sqs: aws_sdk_sqs::Client,
        config: MappingConfig,
        invoker: I,
    ) -> Result<Self, String> {
        let attributes = sqs
            .get_queue_attributes()
            .queue_url(&config.queue_url)
            .attribute_names(QueueAttributeName::QueueArn)
            .send()
            .await
            .map_err(|e| format!("queue {}: {e:?}", config.queue_url))?;
        let queue_arn = attributes
            .attributes()
            .and_then(|a| a.get(&QueueAttributeName::QueueArn))
            .cloned()
            .ok_or_else(|| format!("queue {} has no ARN", config.queue_url))?;
        let rng = fastrand::Rng::with_seed(config.seed);
        Ok(Self {
            sqs,
            config,
            queue_arn,
            invoker,
            stats: Arc::new(MappingStats::default()),
            rng,
            reports: None,
        })
    }

    /// Reports each invocation's batch as soon as it is answered (before its deletes): off by default.
    pub fn with_reports(mut self, reports: Reports) -> Self {
        self.reports = Some(reports);
        self
    }

    /// The counters, shared: readable while the mapping runs.
    pub fn stats(&self) -> Arc<MappingStats> {
        Arc::clone(&self.stats)
    }

    /// Polls until `stop` turns true (checked between receives), then returns the invoker.
    pub async fn run(mut self, mut stop: watch::Receiver<bool>) -> I {
        loop {
            if *stop.borrow() {
                return self.invoker;
            }
            let received = tokio::select! {
                r = self.receive() => r,
                _ = stop.changed() => continue,
            };
            match received {
                Ok(messages) if messages.is_empty() => {}
                Ok(messages) => self.deliver(messages).await,
                Err(e) => {
                    tracing::warn!(error = %e, "receive failed; retrying");
                    tokio::time::sleep(Duration::from_millis(200)).await;
                }
            }
        }
    }

    async fn receive(&self) -> Result<Vec<aws_sdk_sqs::types::Message>, String> {
        let out = self
            .sqs
            .receive_message()
            .queue_url(&self.config.queue_url)
            .max_number_of_messages(self.config.batch_size)
            .wait_time_seconds(self.config.wait_seconds)
            .message_system_attribute_names(MessageSystemAttributeName::All)
            .message_attribute_names("All")
            .send()
            .await
            .map_err(|e| format!("{e:?}"))?;
        Ok(out.messages.unwrap_or_default())
    }

    async fn deliver(&mut self, messages: Vec<aws_sdk_sqs::types::Message>) {
        let stats = Arc::clone(&self.stats);
        stats.invocations.fetch_add(1, Ordering::Relaxed);
        stats
            .records
            .fetch_add(messages.len() as u64, Ordering::Relaxed);
        let event = sqs_event(&messages, &self.queue_arn);
        let ids: HashSet<&str> = messages.iter().filter_map(|m| m.message_id()).collect();
        // Whatever the function printed between invocations is not this batch's.
        let _ = self.invoker.take_outcomes();
        let calls_before = self.reports.as_ref().and_then(Reports::calls_now);
        let started = Instant::now();
        let answer = self.invoker.invoke(event).await;
        let took = started.elapsed();
        let failed = match answer {
            // An empty or unknown itemIdentifier: Lambda fails the whole batch.
            Ok(answer) => reported(&answer, &ids).ok_or_else(|| {
                format!("the answer names an identifier not in the batch: {answer}")
            }),
            Err(e) => {
                tracing::info!(error = %e, records = messages.len(), "invocation failed; the batch comes back");
                Err(e)
            }
        };
        if let Some(reports) = &self.reports {
            let ended = match &failed {
                Ok(failed) => Ended::Answered {
                    returned: failed.len(),
                    outcomes: self.invoker.take_outcomes(),
                },
                Err(e) => Ended::Failed(e.clone()),
            };
            let report = BatchReport::new(reports.consumer(), messages.len(), ended, took);
            reports.send(report, calls_before);
        }
        let Ok(failed) = failed else {
            stats.failed_invocations.fetch_add(1, Ordering::Relaxed);
            return;
        };
        stats
            .reported
            .fetch_add(failed.len() as u64, Ordering::Relaxed);
        if self.draw() < self.config.drop_delete_rate {
            stats.dropped_deletes.fetch_add(1, Ordering::Relaxed);
            return;
        }
        let done: Vec<&aws_sdk_sqs::types::Message> = messages
            .iter()
            .filter(|m| m.message_id().is_some_and(|id| !failed.contains(id)))
            .collect();
        for chunk in done.chunks(10) {
            let entries: Vec<DeleteMessageBatchRequestEntry> = chunk
                .iter()
                .enumerate()
                .filter_map(|(i, m)| {
                    DeleteMessageBatchRequestEntry::builder()
                        .id(format!("m{i}"))
                        .receipt_handle(m.receipt_handle()?)
                        .build()
                        .ok()
                })
                .collect();
            match self
                .sqs
                .delete_message_batch()
                .queue_url(&self.config.queue_url)
                .set_entries(Some(entries))
                .send()
                .await
            {
                Ok(out) => {
                    stats
                        .deleted
                        .fetch_add(out.successful().len() as u64, Ordering::Relaxed);
                }
                Err(e) => tracing::warn!(error = ?e, "delete failed; those messages come back"),
            }
        }
    }

    fn draw(&mut self) -> f64 {
        self.rng.f64()
    }
}

/// The identifiers an answer reports, or `None` when one is empty or not in the batch (the whole batch failed).
fn reported(answer: &Value, batch: &HashSet<&str>) -> Option<HashSet<String>> {
    let Some(items) = answer.get("batchItemFailures").and_then(Value::as_array) else {
        return Some(HashSet::new());
    };
    let mut out = HashSet::with_capacity(items.len());
    for item in items {
        let id = item
            .get("itemIdentifier")
            .and_then(Value::as_str)
            .unwrap_or_default();
        if id.is_empty() || !batch.contains(id) {
            return None;
        }
        out.insert(id.to_owned());
    }
    Some(out)
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn an_unknown_or_empty_identifier_fails_the_whole_batch() {
        let batch: HashSet<&str> = ["a", "b"].into_iter().collect();
        assert_eq!(
            reported(&json!({"batchItemFailures": []}), &batch),
            Some(HashSet::new())
        );
        assert_eq!(reported(&json!({}), &batch), Some(HashSet::new()));
        let one = reported(
            &json!({"batchItemFailures": [{"itemIdentifier": "b"}]}),
            &batch,
        )
        .expect("valid");
        assert!(one.contains("b") && one.len() == 1);
        assert_eq!(
            reported(
                &json!({"batchItemFailures": [{"itemIdentifier": ""}]}),
                &batch
            ),
            None
        );
        assert_eq!(
            reported(
                &json!({"batchItemFailures": [{"itemIdentifier": "zz"}]}),
                &batch
            ),
            None
        );
    }
}
