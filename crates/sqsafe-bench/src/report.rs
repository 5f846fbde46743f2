//! The figures as JSON (`target/bench/results.json`), read by `bench/render.py` into `bench/RESULTS.md` and the
//! chart. Durations are milliseconds, CPU times microseconds, unless a field says otherwise.

use std::collections::BTreeMap;
use std::time::Duration;

use serde::Serialize;

use crate::bed::Peer;
use crate::proxy::Backend;

#[derive(Debug, Default, Serialize)]
pub(crate) struct Report {
    pub(crate) meta: Meta,
    /// Figures 1-4 and 7a: one entry per measured run.
    pub(crate) runs: Vec<Run>,
    /// Figure 4: per process.
    pub(crate) processes: Vec<Process>,
    /// Figure 6.
    pub(crate) pipeline: Pipeline,
    /// Figure 7b, and what was prefilled or skipped.
    pub(crate) table_sizes: Vec<TableSize>,
    pub(crate) table_size_notes: Vec<String>,
    /// Where sqsafe's CPU goes: perf profiles of extra runs (none when perf is not installed, or in the smoke).
    pub(crate) profiles: Vec<Profile>,
    /// Instructions per message by network setting, counted by callgrind (none when valgrind is not installed, or
    /// in the smoke).
    pub(crate) instructions: Vec<crate::instructions::Count>,
    /// The bill per million messages (module `bill`), and the prices it used.
    pub(crate) bill: Vec<crate::bill::Line>,
    pub(crate) prices: Option<crate::bill::Prices>,
    /// Figure 8: the idempotent HTTP layer beside the plain handler (module `api`).
    pub(crate) api: Vec<crate::api::ApiRun>,
    /// What the run asserts (request counts, answers, charges): never a timing.
    pub(crate) checks: Vec<Check>,
}

#[derive(Debug, Clone, Serialize)]
pub(crate) struct Profile {
    pub(crate) peer: Peer,
    pub(crate) backend: Backend,
    pub(crate) latency_ms: u64,
    pub(crate) batches: usize,
    pub(crate) reports: crate::profile::Reports,
}

#[derive(Debug, Default, Serialize)]
pub(crate) struct Meta {
    pub(crate) mode: &'static str,
    pub(crate) profile: String,
    pub(crate) started_unix: u64,
    pub(crate) seconds: f64,
    /// `/proc/loadavg` (1, 5, 15 minutes) at the start and at the end.
    pub(crate) load_start: [f64; 3],
    pub(crate) load_end: [f64; 3],
    pub(crate) cores: usize,
    pub(crate) clock_tick_ms: f64,
}

/// What a run measured.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub(crate) enum Kind {
    /// Payments never seen before.
    Fresh,
    /// Payments completed before, not in the process's local cache: replayed from the store.
    Duplicate,
    /// Payments this process completed: answered from its local cache.
    CacheHit,
}

/// Batches sent one after the other to one warm process, under one network setting.
#[derive(Debug, Clone, Serialize)]
pub(crate) struct Run {
    pub(crate) peer: Peer,
    pub(crate) purpose: &'static str,
    pub(crate) kind: Kind,
    pub(crate) backend: Backend,
    pub(crate) latency_ms: u64,
    pub(crate) batch_size: usize,
    pub(crate) batches: usize,
    pub(crate) duration: Summary,
    /// Client CPU per message (the function process: user + system, and each).
    pub(crate) cpu_us_per_msg: f64,
    pub(crate) user_us_per_msg: f64,
    pub(crate) system_us_per_msg: f64,
    /// DynamoDB requests per message, by operation, counted at the proxy.
    pub(crate) dynamodb_per_msg: BTreeMap<String, f64>,
    pub(crate) dynamodb_total_per_msg: f64,
    /// Payments API requests per message.
    pub(crate) payments_per_msg: f64,
    /// DynamoDB capacity units per message by its sizing rules (module `capacity`); `None` when a request was not
    /// measured (only the `requests` runs on moto are).
    pub(crate) units_per_msg: Option<crate::capacity::Units>,
    /// The same as moto reported them (`ReturnConsumedCapacity`: flat figures, see module `capacity`).
    pub(crate) moto_units_per_msg: Option<crate::capacity::Units>,
    /// Round trips on the critical path of each batch (median, min, max over the batches).
    pub(crate) critical_path: Spread,
    /// Log lines the function wrote per message (Lambda's own START/END/REPORT lines excluded).
    pub(crate) log_lines_per_msg: f64,
    /// Records reported in `batchItemFailures` (0 expected).
    pub(crate) failures: usize,
}

#[derive(Debug, Clone, Default, Serialize)]
pub(crate) struct Summary {
    pub(crate) p50_ms: f64,
    pub(crate) p99_ms: f64,
    pub(crate) mean_ms: f64,
    pub(crate) min_ms: f64,
    pub(crate) max_ms: f64,
}

impl Summary {
    /// Nearest-rank percentiles of `samples`.
    pub(crate) fn of(samples: &[Duration]) -> Self {
        let mut ms: Vec<f64> = samples.iter().map(|d| d.as_secs_f64() * 1e3).collect();
        ms.sort_by(f64::total_cmp);
        let rank = |p: f64| {
            if ms.is_empty() {
                return 0.0;
            }
            let i = ((p * ms.len() as f64).ceil() as usize).clamp(1, ms.len()) - 1;
            ms[i]
        };
        let mean = if ms.is_empty() {
            0.0
        } else {
            ms.iter().sum::<f64>() / ms.len() as f64
        };
        Self {
            p50_ms: rank(0.50),
            p99_ms: rank(0.99),
            mean_ms: mean,
            min_ms: ms.first().copied().unwrap_or(0.0),
            max_ms: ms.last().copied().unwrap_or(0.0),
        }
    }
}

#[derive(Debug, Clone, Copy, Default, Serialize)]
pub(crate) struct Spread {
    pub(crate) median: usize,
    pub(crate) min: usize,
    pub(crate) max: usize,
}

impl Spread {
    pub(crate) fn of(values: &[usize]) -> Self {
        let mut v = values.to_vec();
        v.sort_unstable();
        Self {
            median: v.get(v.len().saturating_sub(1) / 2).copied().unwrap_or(0),
            min: v.first().copied().unwrap_or(0),
            max: v.last().copied().unwrap_or(0),
        }
    }
}

/// Figure 4: one peer's process.
#[derive(Debug, Clone, Serialize)]
pub(crate) struct Process {
    pub(crate) peer: Peer,
    /// Spawn to first batch (10 fresh payments, moto, no added latency) answered, per cold start.
    pub(crate) cold_start_ms: Vec<f64>,
    /// Spawn to the runtime's first `GET /next` (Lambda's Init Duration), per cold start.
    pub(crate) init_ms: Vec<f64>,
    /// `VmHWM` after every run of this peer.
    pub(crate) peak_rss_kib: u64,
    pub(crate) threads: u64,
}

#[derive(Debug, Default, Serialize)]
pub(crate) struct Pipeline {
    /// Conditional PutItem per second straight to moto, by concurrent clients.
    pub(crate) moto_ceiling: Vec<Ceiling>,
    pub(crate) runs: Vec<PipelineRun>,
}

#[derive(Debug, Clone, Serialize)]
pub(crate) struct Ceiling {
    pub(crate) clients: usize,
    pub(crate) writes_per_s: f64,
    /// moto's CPU while it served them, in % of one core.
    pub(crate) moto_cpu_pct: f64,
}

#[derive(Debug, Clone, Serialize)]
pub(crate) struct PipelineRun {
    pub(crate) peer: Peer,
    pub(crate) pollers: usize,
    pub(crate) messages: usize,
    pub(crate) seconds: f64,
    pub(crate) messages_per_s: f64,
    /// DynamoDB requests per message (at the proxy) and DynamoDB writes per second they made.
    pub(crate) dynamodb_per_msg: f64,
    pub(crate) dynamodb_per_s: f64,
    pub(crate) moto_cpu_pct: f64,
    /// CPU of the function processes together, in % of one core.
    pub(crate) functions_cpu_pct: f64,
    /// Deletes made (a message delivered twice is deleted twice) and messages left in the queue at the end.
    pub(crate) deleted: u64,
    pub(crate) left: u64,
    pub(crate) failed_invocations: u64,
}

#[derive(Debug, Clone, Serialize)]
pub(crate) struct TableSize {
    pub(crate) peer: Peer,
    /// Records prefilled into each table so far (the step of the figure).
    pub(crate) prefilled: usize,
    /// Items in the peer's table when measured (DescribeTable).
    pub(crate) records: i64,
    pub(crate) fresh: Summary,
    pub(crate) duplicate: Summary,
    pub(crate) fresh_cpu_us_per_msg: f64,
}

#[derive(Debug, Clone, Serialize)]
pub(crate) struct Check {
    pub(crate) what: String,
    pub(crate) ok: bool,
    pub(crate) detail: String,
}

/// `/proc/loadavg`'s three averages.
pub(crate) fn loadavg() -> [f64; 3] {
    let text = std::fs::read_to_string("/proc/loadavg").unwrap_or_default();
    let mut out = [0.0; 3];
    for (slot, value) in out.iter_mut().zip(text.split_whitespace()) {
        *slot = value.parse().unwrap_or(0.0);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn percentiles_are_nearest_rank() {
        let samples: Vec<Duration> = (1..=100).map(Duration::from_millis).collect();
        let s = Summary::of(&samples);
        assert_eq!(
            (s.p50_ms, s.p99_ms, s.min_ms, s.max_ms),
            (50.0, 99.0, 1.0, 100.0)
        );
        let one = Summary::of(&[Duration::from_millis(7)]);
        assert_eq!((one.p50_ms, one.p99_ms), (7.0, 7.0));
        assert_eq!(Summary::of(&[]).p50_ms, 0.0);
    }

    #[test]
    fn the_spread_takes_the_lower_median() {
        let s = Spread::of(&[3, 30, 2, 3]);
        assert_eq!((s.median, s.min, s.max), (3, 2, 30));
        assert_eq!(Spread::of(&[]).median, 0);
    }
}
