//! `sqsafe local up`'s stream consumers: each function whose `Kinesis` or `DynamoDB` event names a stream of the
//! template runs behind [`StreamMapping`], one mapping (and one function instance) per shard, as Lambda polls each
//! shard on its own. Under `--watch` a function runs under cargo lambda watch, and one task reads its shards in turn
//! (one batch at a time for the one watch process); a batch after a save waits for the saved code, as a queue's does,
//! and its records wait in their shard meanwhile (nothing to hold). The mapping's settings are the template's (`BatchSize`, `MaximumRetryAttempts`,
//! `BisectBatchOnFunctionError`, the `OnFailure` queue). The streams are new with each run, so every shard is read
//! from its start whatever the `StartingPosition`.
//!
//! A line per invocation, as for the queues' batches, with where the shard stopped when the answer named a record:
//!
//! ```text
//! ship-order       10 records: 3 applied, 7 returned for retry (0.21 s); stopped at record 4 (49651…), handed over again with the 6 after it
//! ```

use std::path::Path;
use std::time::{Duration, Instant};

use tokio::sync::watch;
use tokio::task::JoinHandle;

use super::watch_mode::{self, Run};
use crate::esm::{
    BatchReport, Delivered, Delivery, Ended, Invoker, StreamMapping, StreamMappingConfig,
};
use crate::lambda::{BatchOutcomes, FunctionInstance, FunctionSpec, INIT_TIMEOUT, InstanceStats};
use crate::stack::{LocalStack, StreamFunctionSpec, StreamSource};
use crate::watch::WatchFunction;

/// How long an idle shard waits before it is read again (Lambda reads each shard about once a second).
const IDLE_POLL: Duration = Duration::from_secs(1);
/// Lambda's default batch size for streams.
const DEFAULT_BATCH_SIZE: usize = 100;
/// The functions' timeout here, as for the queues' functions.
const FUNCTION_TIMEOUT: Duration = Duration::from_secs(30);

/// The local AWS clients a stream mapping reads and writes with.
pub(super) struct Clients {
    pub(super) sqs: aws_sdk_sqs::Client,
    pub(super) dynamodb: aws_sdk_dynamodb::Client,
    pub(super) streams: aws_sdk_dynamodbstreams::Client,
    pub(super) kinesis: aws_sdk_kinesis::Client,
}

/// What one shard's mapping did, for the summary when `up` stops.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub(super) struct ShardTotals {
    pub(super) invocations: u64,
    pub(super) records: u64,
    pub(super) failed: u64,
    pub(super) given_up: u64,
}

impl ShardTotals {
    fn add(&mut self, delivery: &Delivery) {
        self.invocations += 1;
        self.records += delivery.sequence_numbers.len() as u64;
        self.failed += u64::from(matches!(delivery.delivered, Delivered::Failed(_)));
        self.given_up += delivery.given_up.len() as u64;
    }
}

/// What one shard's mapping did, when `up` stops: its name (`binary#shard`), its totals, and its instance's counters
/// (none under watch, whose process is cargo lambda watch's).
pub(super) struct ShardSummary {
    pub(super) name: String,
    pub(super) totals: ShardTotals,
    pub(super) instance: Option<InstanceStats>,
}

/// Running shard mappings: each task reads one shard (its own instance) or, under watch, every shard of a function in
/// turn (one cargo lambda watch process, invoked one batch at a time).
pub(super) type ShardTask = JoinHandle<Vec<ShardSummary>>;

/// The stream consumers' mappings, and their functions under watch.
pub(super) struct StreamRuns {
    tasks: Vec<ShardTask>,
    watched: Vec<WatchFunction>,
}

impl StreamRuns {
    /// Waits for the mappings (already told by `stop`) and prints what each did, then stops watch.
    pub(super) async fn finish(self) {
        for task in self.tasks {
            for summary in task.await.unwrap_or_default() {
                let t = summary.totals;
                let instance = summary
                    .instance
                    .map(|f| {
                        format!(
                            "; cold starts {}, crashes {}, timeouts {}",
                            f.cold_starts, f.crashes, f.timeouts
                        )
                    })
                    .unwrap_or_default();
                println!(
                    "{}: {} invocations, {} records, {} failed invocations, {} given up on{instance}",
                    summary.name, t.invocations, t.records, t.failed, t.given_up
                );
            }
        }
        for function in self.watched {
            watch_mode::stop_function(function).await;
        }
    }
}

/// Starts a mapping per shard of every stream function of the stack's template, with the function's environment and
/// `extra_env`: each with its own instance of the binary built in a folder, or, under watch, every shard of a function
/// read in turn by one task invoking the function's cargo lambda watch.
pub(super) async fn start(
    stack: &LocalStack,
    run: &Run<'_>,
    clients: &Clients,
    extra_env: &[(String, String)],
    log_dir: &Path,
    stop: &watch::Receiver<bool>,
) -> Result<StreamRuns, String> {
    let mut runs = StreamRuns {
        tasks: Vec::new(),
        watched: Vec::new(),
    };
    for function in stack.spec.stream_functions.values() {
        let mut env = stack.function_env(&function.binary);
        env.extend(extra_env.iter().cloned());
        let config = mapping_config(stack, function);
        let binary = function.binary.clone();
        match run {
            Run::Built(bin_dir) => {
                let instance = async |index: usize| {
                    FunctionInstance::start(
                        FunctionSpec {
                            name: function.binary.clone(),
                            binary: bin_dir.join(&function.binary),
                            env: env.clone(),
                            timeout: FUNCTION_TIMEOUT,
                            log_dir: log_dir.to_path_buf(),
                            init_timeout: INIT_TIMEOUT,
                        },
                        index,
                    )
                    .await
                    .map_err(|e| e.to_string())
                };
                for mapping in mappings(stack, function, clients, &config, instance).await? {
                    let (binary, stop) = (binary.clone(), stop.clone());
                    runs.tasks.push(tokio::spawn(async move {
                        let mut summaries = Vec::new();
                        for (mapping, name, totals) in in_turn(vec![mapping], &binary, stop).await {
                            let instance = mapping.into_invoker();
                            let stats = instance.stats();
                            instance.shutdown().await;
                            summaries.push(ShardSummary {
                                name,
                                totals,
                                instance: Some(stats),
                            });
                        }
                        summaries
                    }));
                }
            }
            Run::Watch(shared) => {
                let (watched, invoker) =
                    watch_mode::start_stream(shared, &function.binary, env).await?;
                runs.watched.push(watched);
                let shards = mappings(stack, function, clients, &config, async |_| {
                    Ok(invoker.clone())
                })
                .await?;
                let stop = stop.clone();
                runs.tasks.push(tokio::spawn(async move {
                    in_turn(shards, &binary, stop)
                        .await
                        .into_iter()
                        .map(|(_, name, totals)| ShardSummary {
                            name,
                            totals,
                            instance: None,
                        })
                        .collect()
                }));
            }
        }
        if let Some(queue) = &config.on_failure_queue {
            println!("{:<16} on failure {queue}", "");
        }
    }
    Ok(runs)
}

/// A mapping per shard of `function`'s stream, each with the invoker `invoker` makes for the shard's index.
async fn mappings<I: Invoker>(
    stack: &LocalStack,
    function: &StreamFunctionSpec,
    clients: &Clients,
    config: &StreamMappingConfig,
    mut invoker: impl AsyncFnMut(usize) -> Result<I, String>,
) -> Result<Vec<StreamMapping<I>>, String> {
    let mut out = Vec::new();
    match &function.source {
        StreamSource::Kinesis(logical) => {
            let stream = stack.kinesis_streams.get(logical).ok_or_else(|| {
                format!("{}: Kinesis stream {logical} not created", function.binary)
            })?;
            let shards = clients
                .kinesis
                .list_shards()
                .stream_name(&stream.name)
                .send()
                .await
                .map_err(|e| format!("Kinesis stream {}: {e:?}", stream.name))?;
            for (index, shard) in shards.shards().iter().enumerate() {
                let mapping = StreamMapping::of_kinesis(
                    clients.kinesis.clone(),
                    clients.sqs.clone(),
                    &stream.name,
                    Some(shard.shard_id()),
                    config.clone(),
                    invoker(index).await?,
                )
                .await?;
                println!(
                    "{:<16} stream {}  {}",
                    function.binary,
                    stream.name,
                    shard.shard_id()
                );
                out.push(mapping);
            }
        }
        StreamSource::DynamoDb(logical) => {
            let table = stack
                .tables
                .get(logical)
                .ok_or_else(|| format!("{}: table {logical} not created", function.binary))?;
            let mapping = StreamMapping::of_table(
                &clients.dynamodb,
                clients.streams.clone(),
                clients.sqs.clone(),
                table,
                config.clone(),
                invoker(0).await?,
            )
            .await?;
            println!(
                "{:<16} stream of table {table}  {}",
                function.binary,
                mapping.shard_id()
            );
            out.push(mapping);
        }
    }
    Ok(out)
}

/// The mapping's settings as the template gives them (a parameter's default for `BatchSize`).
fn mapping_config(stack: &LocalStack, function: &StreamFunctionSpec) -> StreamMappingConfig {
    StreamMappingConfig {
        batch_size: function
            .batch_size
            .as_deref()
            .map(|b| stack.spec.resolve_parameter(b))
            .and_then(|b| b.parse().ok())
            .unwrap_or(DEFAULT_BATCH_SIZE),
        maximum_retry_attempts: function.maximum_retry_attempts,
        bisect_on_function_error: function.bisect_on_function_error,
        on_failure_queue: function
            .on_failure_queue
            .as_ref()
            .and_then(|q| stack.queues.get(q))
            .map(|q| q.url.clone()),
    }
}

/// Polls each shard in turn until `stop`, a line per invocation; when none had records, they are read again after
/// [`IDLE_POLL`]. Returns each mapping with its name (`binary#shard`) and totals.
async fn in_turn<I: Invoker>(
    mut mappings: Vec<StreamMapping<I>>,
    binary: &str,
    mut stop: watch::Receiver<bool>,
) -> Vec<(StreamMapping<I>, String, ShardTotals)> {
    let mut totals = vec![ShardTotals::default(); mappings.len()];
    'polling: while !*stop.borrow() {
        let mut busy = false;
        for (mapping, totals) in mappings.iter_mut().zip(totals.iter_mut()) {
            let started = Instant::now();
            let polled = tokio::select! {
                _ = stop.changed() => break 'polling,
                polled = mapping.poll() => polled,
            };
            match polled {
                Ok(Some(delivery)) => {
                    let outcomes = mapping.invoker().take_outcomes();
                    println!("{}", line(binary, &delivery, outcomes, started.elapsed()));
                    totals.add(&delivery);
                    busy = true;
                }
                Ok(None) => {}
                Err(e) => eprintln!("{binary}: {e}"),
            }
        }
        if busy {
            continue;
        }
        tokio::select! {
            _ = stop.changed() => break,
            () = tokio::time::sleep(IDLE_POLL) => {}
        }
    }
    mappings
        .into_iter()
        .zip(totals)
        .map(|(mapping, totals)| {
            let name = format!("{binary}#{}", mapping.shard_id());
            (mapping, name, totals)
        })
        .collect()
}

/// The line of one invocation: the records and how they ended (as a queue's batch line), then where the shard
/// stopped, and what was given up on.
pub(super) fn line(
    binary: &str,
    delivery: &Delivery,
    outcomes: Option<BatchOutcomes>,
    took: Duration,
) -> String {
    let records = delivery.sequence_numbers.len();
    let stopped_at = match &delivery.delivered {
        Delivered::RetryFrom(seq) => delivery.sequence_numbers.iter().position(|s| s == seq),
        _ => None,
    };
    let ended = match (&delivery.delivered, stopped_at) {
        (Delivered::Failed(reason), _) => Ended::Failed(reason.clone()),
        (_, Some(at)) => Ended::Answered {
            returned: records - at,
            outcomes,
        },
        (_, None) => Ended::Answered {
            returned: 0,
            outcomes,
        },
    };
    let mut line = BatchReport::new(binary, records, ended, took).to_string();
    if let (Delivered::RetryFrom(seq), Some(at)) = (&delivery.delivered, stopped_at) {
        let after = records - at - 1;
        line.push_str(&format!(
            "; stopped at record {} ({}), handed over again with the {after} after it",
            at + 1,
            short(seq)
        ));
    }
    if !delivery.given_up.is_empty() {
        line.push_str(&format!(
            "; retries exhausted: {} given up on, their place in the shard sent to the on-failure queue",
            delivery.given_up.len()
        ));
    }
    line
}

/// A sequence number cut to its first 12 digits (Kinesis's run to 56).
fn short(seq: &str) -> String {
    if seq.len() > 12 {
        format!("{}…", &seq[..12])
    } else {
        seq.to_owned()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn delivery(n: usize, delivered: Delivered, given_up: usize) -> Delivery {
        let sequence_numbers: Vec<String> = (1..=n).map(|i| format!("4965{i:08}")).collect();
        let given_up = sequence_numbers[..given_up].to_vec();
        Delivery {
            sequence_numbers,
            delivered,
            given_up,
        }
    }

    fn counted(applied: u64, dead_lettered: u64) -> Option<BatchOutcomes> {
        Some(BatchOutcomes {
            received: 10,
            applied,
            dead_lettered,
            ..BatchOutcomes::default()
        })
    }

    #[test]
    fn a_line_says_how_each_record_ended_and_where_the_shard_stopped() {
        let took = Duration::from_millis(210);
        let done = delivery(3, Delivered::Done, 0);
        assert_eq!(
            line("ship-order", &done, counted(2, 1), took),
            "ship-order       3 records: 2 applied, 1 dead-lettered (0.21 s)"
        );
        let stopped = delivery(10, Delivered::RetryFrom("496500000004".into()), 0);
        assert_eq!(
            line("ship-order", &stopped, counted(3, 0), took),
            "ship-order       10 records: 3 applied, 7 returned for retry (0.21 s); stopped at record 4 \
             (496500000004), handed over again with the 6 after it"
        );
        let failed = delivery(
            2,
            Delivered::Failed("the function process crashed".into()),
            0,
        );
        assert_eq!(
            line("ship-order", &failed, None, took),
            "ship-order       2 records: invocation failed (the function process crashed), all 2 returned for \
             retry (0.21 s)"
        );
        let given_up = delivery(1, Delivered::Failed("timed out".into()), 1);
        assert!(
            line("ship-order", &given_up, None, took).ends_with(
                "; retries exhausted: 1 given up on, their place in the shard sent to the on-failure queue"
            )
        );
    }

    #[test]
    fn totals_count_invocations_records_failures_and_what_was_given_up() {
        let mut totals = ShardTotals::default();
        totals.add(&delivery(3, Delivered::Done, 0));
        totals.add(&delivery(2, Delivered::Failed("x".into()), 2));
        assert_eq!(
            totals,
            ShardTotals {
                invocations: 2,
                records: 5,
                failed: 1,
                given_up: 2,
            }
        );
    }
}
