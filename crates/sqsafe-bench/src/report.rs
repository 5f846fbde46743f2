//! The figures as JSON (`target/bench/results.json`), read by `bench/render.py` into `bench/RESULTS.md` and the
//! chart. Durations are milliseconds, CPU times microseconds, unless a field says otherwise.

use serde::Serialize;

use crate::bed::Peer;
use crate::figures::{ApiRun, Run, Summary};
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
    pub(crate) api: Vec<ApiRun>,
    /// Figure 9: Kinesis batches (module `stream`), one entry per measured run, as `runs`.
    pub(crate) kinesis: Vec<Run>,
    /// Figure 9b: a batch of one partition key whose 4th record fails once, redelivered as Lambda does.
    pub(crate) kinesis_order: Vec<crate::stream::Order>,
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
