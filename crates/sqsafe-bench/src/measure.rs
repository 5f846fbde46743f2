//! One warm function process, fed batches one after the other: duration of each invocation, the process's CPU
//! time across them, and what the proxy saw of each.

use std::time::{Duration, Instant};

use sqsafe_local::lambda::{FunctionInstance, FunctionSpec};

use crate::bed::Peer;
use crate::events;
use crate::figures::{Kind, Run, Spread, Summary};
use crate::procfs::Sample;
use crate::proxy::{Backend, BenchProxy};
use crate::trace::{Counts, Service, critical_path};

/// Lambda's own lines per invocation in the log (START, END, REPORT).
const PLATFORM_LINES: usize = 3;

/// The network a run sees.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Network {
    pub(crate) backend: Backend,
    pub(crate) latency_ms: u64,
}

impl Network {
    pub(crate) const MOTO: Self = Self {
        backend: Backend::Moto,
        latency_ms: 0,
    };

    pub(crate) fn apply(self, proxy: &BenchProxy) {
        proxy.set_backend(self.backend);
        proxy.set_latency(Duration::from_millis(self.latency_ms));
    }
}

/// The events a function is handed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Shape {
    /// SQS batches (`events::batch`).
    Sqs,
    /// Kinesis batches of one shard and one partition key (`events::kinesis_batch`), each record with the next
    /// sequence number of the shard.
    Kinesis,
}

/// A peer's process under the Runtime API emulator.
pub(crate) struct Function {
    pub(crate) peer: Peer,
    pub(crate) instance: FunctionInstance,
    pub(crate) tick: Duration,
    shape: Shape,
    /// The next sequence number of the Kinesis shard.
    sequence: u64,
}

impl Function {
    pub(crate) async fn start(
        peer: Peer,
        spec: FunctionSpec,
        id: usize,
        tick: Duration,
    ) -> Result<Self, String> {
        let instance = FunctionInstance::start(spec, id)
            .await
            .map_err(|e| format!("{}: {e}", peer.name()))?;
        Ok(Self {
            peer,
            instance,
            tick,
            shape: Shape::Sqs,
            sequence: 1,
        })
    }

    /// The same process, handed Kinesis batches from now on.
    pub(crate) fn on_kinesis(mut self) -> Self {
        self.shape = Shape::Kinesis;
        self
    }

    /// Invokes with a batch of these payments; returns how long it took and how many records failed.
    pub(crate) async fn invoke(
        &mut self,
        payment_ids: &[String],
    ) -> Result<(Duration, usize), String> {
        let event = match self.shape {
            Shape::Sqs => events::batch(payment_ids),
            Shape::Kinesis => {
                let records: Vec<(String, u64)> = payment_ids
                    .iter()
                    .map(|id| {
                        self.sequence += 1;
                        (id.clone(), self.sequence)
                    })
                    .collect();
                events::kinesis_batch(&records)
            }
        };
        let started = Instant::now();
        let answer = self.invoke_event(event).await?;
        Ok((started.elapsed(), events::failures(&answer)))
    }

    /// Invokes with `event` as it is; returns the answer.
    pub(crate) async fn invoke_event(
        &mut self,
        event: serde_json::Value,
    ) -> Result<serde_json::Value, String> {
        self.instance
            .invoke(event)
            .await
            .map_err(|e| format!("{} invocation failed: {e}", self.peer.name()))
    }

    /// The process's id: it must have been started (by a first invoke).
    pub(crate) fn sample_pid(&self) -> Result<u32, String> {
        self.instance
            .pid()
            .ok_or_else(|| format!("{}: no process", self.peer.name()))
    }

    pub(crate) fn sample(&self) -> Result<Sample, String> {
        Sample::read(self.sample_pid()?, self.tick)
            .map_err(|e| format!("{}: {e}", self.peer.name()))
    }

    fn log_lines(&self) -> usize {
        std::fs::read_to_string(self.instance.log_path())
            .map(|s| s.lines().count())
            .unwrap_or(0)
    }

    /// Sends `batches` one after the other under `network` and measures them. The process must be warm (its
    /// first invocation done).
    pub(crate) async fn run(
        &mut self,
        proxy: &BenchProxy,
        network: Network,
        kind: Kind,
        purpose: &'static str,
        batches: &[Vec<String>],
    ) -> Result<Run, String> {
        network.apply(proxy);
        // Capacity units are counted in the runs that count requests (not timed: see `proxy::ToMeasure`).
        proxy.set_measuring(purpose == "requests" && network.backend == Backend::Moto);
        proxy.take().await;
        let lines_before = self.log_lines();
        let before = self.sample()?;
        let mut durations = Vec::with_capacity(batches.len());
        let mut paths = Vec::with_capacity(batches.len());
        let mut counts = Counts::default();
        let mut units = Some(crate::capacity::Units::default());
        let mut reported = Some(crate::capacity::Units::default());
        let mut failures = 0;
        for batch in batches {
            let (took, failed) = self.invoke(batch).await?;
            durations.push(took);
            failures += failed;
            let exchanges = proxy.take().await;
            paths.push(critical_path(&exchanges));
            for e in exchanges.iter().filter(|e| e.service == Service::DynamoDb) {
                match (&mut units, e.units) {
                    (Some(total), Some(u)) => total.add(u),
                    _ => units = None,
                }
                match (&mut reported, e.reported) {
                    (Some(total), Some(u)) => total.add(u),
                    _ => reported = None,
                }
            }
            let seen = Counts::of(&exchanges);
            for (op, n) in seen.dynamodb {
                *counts.dynamodb.entry(op).or_default() += n;
            }
            for (op, n) in seen.payments {
                *counts.payments.entry(op).or_default() += n;
            }
        }
        let after = self.sample()?;
        let (user, system) = after.since(&before);
        let messages: usize = batches.iter().map(Vec::len).sum();
        let per_msg = |n: f64| {
            if messages == 0 {
                0.0
            } else {
                n / messages as f64
            }
        };
        let us = |d: Duration| per_msg(d.as_secs_f64() * 1e6);
        let lines = self
            .log_lines()
            .saturating_sub(lines_before + PLATFORM_LINES * batches.len());
        Ok(Run {
            peer: self.peer,
            purpose,
            kind,
            backend: network.backend,
            latency_ms: network.latency_ms,
            batch_size: batches.first().map_or(0, Vec::len),
            batches: batches.len(),
            duration: Summary::of(&durations),
            cpu_us_per_msg: us(user + system),
            user_us_per_msg: us(user),
            system_us_per_msg: us(system),
            dynamodb_total_per_msg: per_msg(counts.dynamodb_total() as f64),
            dynamodb_per_msg: counts
                .dynamodb
                .iter()
                .map(|(op, n)| (op.clone(), per_msg(*n as f64)))
                .collect(),
            payments_per_msg: per_msg(counts.payments_total() as f64),
            units_per_msg: units.map(|u| crate::capacity::Units {
                read: per_msg(u.read),
                write: per_msg(u.write),
            }),
            moto_units_per_msg: reported.map(|u| crate::capacity::Units {
                read: per_msg(u.read),
                write: per_msg(u.write),
            }),
            critical_path: Spread::of(&paths),
            log_lines_per_msg: per_msg(lines as f64),
            failures,
        })
    }

    pub(crate) async fn shutdown(self) {
        self.instance.shutdown().await;
    }
}

/// `Init Duration` of the last `REPORT` line in a function's log (Lambda's spawn-to-first-`/next` time).
pub(crate) fn last_init_ms(log: &str) -> Option<f64> {
    log.lines().rev().find_map(|line| {
        let rest = line.split("Init Duration: ").nth(1)?;
        rest.split_whitespace().next()?.parse().ok()
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_init_duration_is_read_from_the_last_report() {
        let log = "REPORT RequestId: a\tDuration: 9.00 ms\tBilled Duration: 9 ms\tMemory Size: 128 MB\tInit Duration: 12.50 ms\n\
                   REPORT RequestId: b\tDuration: 3.00 ms\tBilled Duration: 3 ms\tMemory Size: 128 MB\n\
                   REPORT RequestId: c\tDuration: 9.00 ms\tBilled Duration: 9 ms\tMemory Size: 128 MB\tInit Duration: 7.25 ms\n";
        assert_eq!(last_init_ms(log), Some(7.25));
        assert_eq!(last_init_ms("START RequestId: a\n"), None);
    }
}
