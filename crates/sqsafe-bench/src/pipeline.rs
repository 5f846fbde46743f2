//! Figure 6: the whole local pipeline (queue in moto, sqsafe-local's event source mapping, the function under the
//! Runtime API emulator) with 1 and 4 pollers, against moto's own ceiling for conditional writes.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use aws_sdk_dynamodb::types::AttributeValue;
use aws_sdk_sqs::types::{MessageAttributeValue, SendMessageBatchRequestEntry};
use sqsafe_local::esm::{EventSourceMapping, MappingConfig};
use tokio::sync::watch;
use tokio::task::JoinSet;

use crate::bed::Peer;
use crate::bench::Bench;
use crate::events::payment_body;
use crate::measure::Network;
use crate::procfs::Sample;
use crate::report::{Ceiling, PipelineRun};
use crate::trace::Counts;

impl Bench<'_> {
    /// Conditional PutItem per second straight to moto (no proxy), from 1 and 4 concurrent clients.
    pub(crate) async fn moto_ceiling(&mut self) -> Result<(), String> {
        eprintln!("==> moto's write ceiling");
        let table = sqsafe_testkit::unique_name("bench-ceiling");
        sqsafe_testkit::create_table(&self.bed.dynamodb, &table, "pk", None).await;
        for clients in [1, 4] {
            let moto = self.moto_sample();
            let writes = Arc::new(AtomicU64::new(0));
            let deadline = Instant::now() + self.plan.ceiling_probe;
            let started = Instant::now();
            let mut tasks = JoinSet::new();
            for client_id in 0..clients {
                let (dynamodb, table, writes) = (
                    self.bed.dynamodb.clone(),
                    table.clone(),
                    Arc::clone(&writes),
                );
                tasks.spawn(async move {
                    let mut i = 0u64;
                    while Instant::now() < deadline {
                        let put = dynamodb
                            .put_item()
                            .table_name(&table)
                            .item(
                                "pk",
                                AttributeValue::S(format!("c{clients}-{client_id}-{i}")),
                            )
                            .item("status", AttributeValue::S("IN_PROGRESS".to_owned()))
                            .condition_expression("attribute_not_exists(pk)")
                            .send()
                            .await;
                        if put.is_ok() {
                            writes.fetch_add(1, Ordering::Relaxed);
                        }
                        i += 1;
                    }
                });
            }
            while tasks.join_next().await.is_some() {}
            let seconds = started.elapsed().as_secs_f64();
            let moto_cpu_pct = self.moto_cpu_pct(moto, seconds);
            self.report.pipeline.moto_ceiling.push(Ceiling {
                clients,
                writes_per_s: writes.load(Ordering::Relaxed) as f64 / seconds,
                moto_cpu_pct,
            });
        }
        Ok(())
    }

    /// Each main peer behind 1 and 4 pollers, draining a queue of fresh payments.
    pub(crate) async fn pipeline(&mut self) -> Result<(), String> {
        for peer in [Peer::Naive, Peer::Sqsafe, Peer::Powertools] {
            for pollers in [1, 4] {
                eprintln!("==> pipeline: {} with {pollers} poller(s)", peer.name());
                let run = self.pipeline_run(peer, pollers).await?;
                self.check(
                    format!("pipeline {} x{pollers}: every message deleted", peer.name()),
                    run.left == 0 && run.failed_invocations == 0,
                    format!(
                        "{} messages, {} deletes, {} left in the queue, {} failed invocations",
                        run.messages, run.deleted, run.left, run.failed_invocations
                    ),
                );
                self.report.pipeline.runs.push(run);
            }
        }
        Ok(())
    }

    async fn pipeline_run(&mut self, peer: Peer, pollers: usize) -> Result<PipelineRun, String> {
        let bed = self.bed;
        let queue_url = sqsafe_testkit::create_queue(&bed.sqs, "bench-pipeline", false).await;
        let ids = self.fresh(
            peer,
            &format!("pipeline{pollers}"),
            self.plan.pipeline_messages,
        );
        publish(&bed.sqs, &queue_url, &ids).await?;
        let mut functions = Vec::new();
        for _ in 0..pollers {
            functions.push(self.warm(peer, Some(&queue_url)).await?);
        }
        Network::MOTO.apply(&bed.proxy);
        bed.proxy.set_measuring(false);
        bed.proxy.take().await;

        let mut pids = Vec::new();
        let mut mappings = Vec::new();
        for function in functions {
            pids.extend(function.instance.pid());
            let config = MappingConfig {
                queue_url: queue_url.clone(),
                batch_size: 10,
                wait_seconds: 1,
                drop_delete_rate: 0.0,
                seed: 0,
            };
            mappings
                .push(EventSourceMapping::new(bed.sqs.clone(), config, function.instance).await?);
        }
        let stats: Vec<_> = mappings.iter().map(EventSourceMapping::stats).collect();
        let cpu = |pids: &[u32]| -> Duration {
            pids.iter()
                .filter_map(|pid| Sample::read(*pid, self.tick).ok())
                .map(|s| s.user + s.system)
                .sum()
        };
        let functions_before = cpu(&pids);
        let moto = self.moto_sample();
        // The clock starts when the pollers do: all of them at once.
        let started = Instant::now();
        let (stop, stopped) = watch::channel(false);
        let mut tasks = JoinSet::new();
        for mapping in mappings {
            tasks.spawn(mapping.run(stopped.clone()));
        }
        let total = |stats: &[Arc<sqsafe_local::esm::MappingStats>]| -> [u64; 2] {
            stats.iter().fold([0, 0], |[deleted, failed], s| {
                let [_, _, d, _, f, _] = s.snapshot();
                [deleted + d, failed + f]
            })
        };
        // SQS delivers at least once (moto too, to concurrent pollers): a message can be deleted twice, so the
        // queue is drained when as many deletes as messages were made and nothing is left.
        let mut left = u64::MAX;
        while started.elapsed() < self.plan.pipeline_timeout {
            if total(&stats)[0] >= ids.len() as u64 {
                left = depth(&bed.sqs, &queue_url).await?;
                if left == 0 {
                    break;
                }
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        let seconds = started.elapsed().as_secs_f64();
        let functions_cpu = cpu(&pids).saturating_sub(functions_before);
        let moto_cpu_pct = self.moto_cpu_pct(moto, seconds);
        let _ = stop.send(true);
        while let Some(instance) = tasks.join_next().await {
            if let Ok(instance) = instance {
                instance.shutdown().await;
            }
        }
        let [deleted, failed_invocations] = total(&stats);
        let counts = Counts::of(&bed.proxy.take().await);
        let messages = ids.len();
        Ok(PipelineRun {
            peer,
            pollers,
            messages,
            seconds,
            messages_per_s: messages as f64 / seconds,
            dynamodb_per_msg: counts.dynamodb_total() as f64 / messages as f64,
            dynamodb_per_s: counts.dynamodb_total() as f64 / seconds,
            moto_cpu_pct,
            functions_cpu_pct: 100.0 * functions_cpu.as_secs_f64() / seconds,
            deleted,
            left,
            failed_invocations,
        })
    }

    fn moto_sample(&self) -> Option<(u32, Sample)> {
        let pid = self.bed.moto_pid()?;
        Some((pid, Sample::read(pid, self.tick).ok()?))
    }

    /// moto's CPU since `before`, in % of one core over `seconds`; 0 when moto's process was not found.
    fn moto_cpu_pct(&self, before: Option<(u32, Sample)>, seconds: f64) -> f64 {
        let Some((pid, before)) = before else {
            return 0.0;
        };
        let Ok(after) = Sample::read(pid, self.tick) else {
            return 0.0;
        };
        let (user, system) = after.since(&before);
        100.0 * (user + system).as_secs_f64() / seconds.max(1e-3)
    }
}

/// Messages visible, in flight or delayed.
async fn depth(sqs: &aws_sdk_sqs::Client, queue_url: &str) -> Result<u64, String> {
    sqsafe_local::stack::queue_depth(sqs, queue_url)
        .await
        .map_err(|e| format!("queue attributes: {e}"))
}

async fn publish(sqs: &aws_sdk_sqs::Client, queue_url: &str, ids: &[String]) -> Result<(), String> {
    let sent_at = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_millis());
    for chunk in ids.chunks(10) {
        let mut entries = Vec::with_capacity(chunk.len());
        for (i, id) in chunk.iter().enumerate() {
            let correlation = MessageAttributeValue::builder()
                .data_type("String")
                .string_value(format!("corr-{id}-{sent_at}"))
                .build()
                .map_err(|e| format!("attribute: {e}"))?;
            let entry = SendMessageBatchRequestEntry::builder()
                .id(format!("e{i}"))
                .message_body(payment_body(id))
                .message_attributes("correlationId", correlation)
                .build()
                .map_err(|e| format!("entry: {e}"))?;
            entries.push(entry);
        }
        let out = sqs
            .send_message_batch()
            .queue_url(queue_url)
            .set_entries(Some(entries))
            .send()
            .await
            .map_err(|e| format!("send: {e:?}"))?;
        if !out.failed().is_empty() {
            return Err(format!("SQS refused messages: {:?}", out.failed()));
        }
    }
    Ok(())
}
