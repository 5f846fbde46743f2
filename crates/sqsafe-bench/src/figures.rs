//! The figures every measuring module writes and the report holds: a run's kind and numbers, a summary of durations,
//! a spread, figure 8's API runs. A floor below them all: it imports none of them.

use std::collections::BTreeMap;
use std::time::Duration;

use serde::Serialize;

use crate::bed::Peer;
use crate::proxy::Backend;

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

/// One series of requests, one after the other, with one handler under one network setting.
#[derive(Debug, Clone, Serialize)]
pub(crate) struct ApiRun {
    /// `plain` (the axum handler alone) or `layer` (behind `IdempotencyLayer`).
    pub(crate) handler: &'static str,
    /// `fresh` (a key never seen), `repeat` (the same key and content again), `other_content` (the same key, another
    /// body).
    pub(crate) kind: &'static str,
    pub(crate) backend: Backend,
    /// Added by the proxy to every DynamoDB request.
    pub(crate) latency_ms: u64,
    pub(crate) requests: usize,
    /// Each request, from the call to its answer's last byte.
    pub(crate) duration: Summary,
    /// DynamoDB requests per HTTP request, by operation, counted at the proxy.
    pub(crate) dynamodb_per_request: BTreeMap<String, f64>,
    pub(crate) dynamodb_total_per_request: f64,
    /// Handler runs per HTTP request.
    pub(crate) handler_runs_per_request: f64,
    /// Answers by status code.
    pub(crate) statuses: BTreeMap<u16, usize>,
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
