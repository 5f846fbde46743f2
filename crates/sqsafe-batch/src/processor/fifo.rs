//! The ordered path (FIFO queues, stream shards): one record at a time in each group, and a group stopped at its
//! first failure.

use std::collections::HashMap;
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::{Duration, SystemTime};

use aws_lambda_events::sqs::SqsMessage;
use futures::{StreamExt, stream};
use sqsafe_telemetry::{BatchMetrics, Metric};
use tracing::Instrument;

use super::budget::within;
use super::config::{BatchProcessor, RecordHandler};
use super::report::{Disposition, RecordReport};
use crate::record::{group_id, receive_count};

impl BatchProcessor {
    pub(super) async fn run_fifo<H: RecordHandler>(
        &self,
        messages: Vec<(String, Arc<SqsMessage>)>,
        deadline: Option<SystemTime>,
        handler: &H,
        metrics: &BatchMetrics,
        stream: bool,
    ) -> Vec<(usize, RecordReport)> {
        // Groups in order of first appearance; records in event order within a group.
        let mut groups: Vec<Vec<(usize, String, Arc<SqsMessage>)>> = Vec::new();
        let mut index: HashMap<String, usize> = HashMap::new();
        for (i, (id, m)) in messages.into_iter().enumerate() {
            match group_id(&m).map(str::to_owned) {
                Some(g) => {
                    let slot = *index.entry(g).or_insert_with(|| {
                        groups.push(Vec::new());
                        groups.len() - 1
                    });
                    groups[slot].push((i, id, m));
                }
                None => groups.push(vec![(i, id, m)]),
            }
        }
        let per_group = groups.into_iter().map(|group| async move {
            let mut out = Vec::with_capacity(group.len());
            // The reported record the rest of the group waits behind, and when it is due again at the earliest.
            let mut blocked: Option<(String, Option<Duration>)> = None;
            for (i, id, m) in group {
                if let Some((first, due)) = &blocked {
                    metrics.incr(Metric::HeldBack);
                    // Not opened (its envelope is read when it runs): the span has the SQS attribute's id, else a
                    // new one.
                    let (span, _, _) = self.record_span(&m, &id, receive_count(&m), None);
                    span.in_scope(|| {
                        if stream {
                            tracing::warn!(blocked_by = %first, disposition = "held_back",
                                "not run: an earlier record of its shard must come back; the stream redelivers from there");
                        } else {
                            tracing::warn!(blocked_by = %first, disposition = "held_back",
                                "not run: an earlier message of its group was reported; reported too, to keep the group's order");
                        }
                    });
                    // Due with the failed record, not after the queue's visibility timeout: the group resumes when
                    // it does (SQS delivers no later message of a group while an earlier one is in flight).
                    if let (Some(due), Some(control), Some(receipt)) =
                        (due, &self.visibility, m.receipt_handle.as_deref())
                        && let Err(e) = within(
                            self.call_budget(deadline),
                            control.set_visibility_boxed(receipt, *due),
                        )
                        .instrument(span.clone())
                        .await
                    {
                        span.in_scope(|| {
                            tracing::warn!(error = %e, delay_s = due.as_secs(),
                                "could not change the held-back message's visibility; the queue's timeout applies");
                        });
                    }
                    out.push((i, RecordReport { message_id: id, disposition: Disposition::SkippedAfterGroupFailure }));
                    continue;
                }
                let kept = Arc::clone(&m);
                let report = self.run_record(m, id, deadline, handler, metrics).await;
                if report.disposition.is_reported() {
                    let due = match &report.disposition {
                        Disposition::Retry(error) => self.retry_floor(&kept, error),
                        _ => None,
                    };
                    blocked = Some((report.message_id.clone(), due));
                }
                out.push((i, report));
            }
            out
        });
        stream::iter(per_group)
            .buffer_unordered(self.max_concurrency)
            .flat_map(stream::iter)
            .collect()
            .await
    }

    /// The book's receive-count rule (book/src/deploy.md, FIFO queues) for a FIFO batch of `size` records, checked
    /// once per larger size: a record held back behind failing ones of its group spends a receive each time, so the
    /// queue's `maxReceiveCount` must be at least `size × (max_attempts − 1) + 1` for every record to get its
    /// `max_attempts` real tries. Read from the queue when the visibility control can (SQS: its redrive policy),
    /// within the call budget; a warning names the numbers. Nothing else changes.
    pub(super) async fn check_receive_count(&self, size: usize, deadline: Option<SystemTime>) {
        if self
            .receive_count_checked
            .fetch_max(size, Ordering::Relaxed)
            >= size
        {
            return;
        }
        let Some(control) = &self.visibility else {
            return;
        };
        let budget = self.call_budget(deadline).unwrap_or(Duration::from_secs(5));
        let read = self
            .max_receive_count
            .get_or_init(|| async {
                match tokio::time::timeout(budget, control.max_receive_count_boxed()).await {
                    Ok(Ok(count)) => count,
                    Ok(Err(e)) => {
                        tracing::debug!(error = %e, "the queue's maxReceiveCount could not be read");
                        None
                    }
                    Err(_) => None,
                }
            })
            .await;
        let Some(max_receive_count) = *read else {
            return;
        };
        let needed = u64::try_from(size)
            .unwrap_or(u64::MAX)
            .saturating_mul(u64::from(self.max_attempts.saturating_sub(1)))
            .saturating_add(1);
        if u64::from(max_receive_count) < needed {
            tracing::warn!(
                batch_size = size,
                max_attempts = self.max_attempts,
                max_receive_count,
                needed,
                "FIFO batch of {size} records: a record held back behind failing ones of its group spends a receive \
                 each time, so with max attempts {} the queue's maxReceiveCount ({max_receive_count}) should be at \
                 least {needed} (batch size x (max attempts - 1) + 1), or the mapping's BatchSize 1; otherwise \
                 held-back records reach the DLQ before their real tries (said once per batch size)",
                self.max_attempts
            );
        }
    }
}
