//! How much of each figure a run measures: the full bench, or the smoke that `make test` runs.

use std::time::Duration;

use crate::measure::Network;
use crate::proxy::Backend;

#[derive(Debug, Clone)]
pub(crate) struct Plan {
    pub(crate) smoke: bool,
    /// Cold starts per peer (figure 4).
    pub(crate) cold_starts: usize,
    /// Batches of 10 per latency run with no added latency, and with some.
    pub(crate) batches_fast: usize,
    pub(crate) batches_slow: usize,
    /// Figure 7a: batch sizes, and batches of each (at least, and enough for this many messages).
    pub(crate) batch_sizes: Vec<usize>,
    pub(crate) batches_per_size: usize,
    pub(crate) messages_per_size: usize,
    /// Figure 7b: idempotency table sizes (records), batches per size, and the most time prefilling may take
    /// for one size step (larger sizes are skipped, with the estimate).
    pub(crate) table_sizes: Vec<usize>,
    pub(crate) batches_per_table: usize,
    pub(crate) prefill_budget: Duration,
    /// Figure 6: messages per pipeline run, the time one may take, and how long each write-ceiling probe runs.
    pub(crate) pipeline_messages: usize,
    pub(crate) pipeline_timeout: Duration,
    pub(crate) ceiling_probe: Duration,
    /// Figure 8: HTTP requests per series (fresh, repeat, other content; the plain handler).
    pub(crate) api_requests: usize,
}

/// The added latency of the "slow" runs: a round trip to a region from outside it.
pub(crate) const SLOW_MS: u64 = 5;

impl Plan {
    pub(crate) fn full(max_table: usize) -> Self {
        Self {
            smoke: false,
            cold_starts: 5,
            batches_fast: 100,
            batches_slow: 40,
            batch_sizes: vec![1, 2, 5, 10],
            batches_per_size: 20,
            messages_per_size: 200,
            table_sizes: [1_000, 10_000, 100_000]
                .into_iter()
                .filter(|n| *n <= max_table)
                .collect(),
            batches_per_table: 20,
            prefill_budget: Duration::from_secs(240),
            pipeline_messages: 400,
            pipeline_timeout: Duration::from_secs(180),
            ceiling_probe: Duration::from_secs(3),
            api_requests: 400,
        }
    }

    /// A few batches of everything: checks that the harness works; its timings mean nothing.
    pub(crate) fn smoke() -> Self {
        Self {
            smoke: true,
            cold_starts: 1,
            batches_fast: 2,
            batches_slow: 2,
            batch_sizes: vec![1, 10],
            batches_per_size: 1,
            messages_per_size: 1,
            table_sizes: vec![100],
            batches_per_table: 1,
            prefill_budget: Duration::from_secs(30),
            pipeline_messages: 20,
            pipeline_timeout: Duration::from_secs(60),
            ceiling_probe: Duration::from_millis(300),
            api_requests: 5,
        }
    }

    /// The four network settings of figure 3.
    pub(crate) fn networks() -> [Network; 4] {
        [
            Network::MOTO,
            Network {
                backend: Backend::Moto,
                latency_ms: SLOW_MS,
            },
            Network {
                backend: Backend::Canned,
                latency_ms: 0,
            },
            Network {
                backend: Backend::Canned,
                latency_ms: SLOW_MS,
            },
        ]
    }

    pub(crate) fn batches(&self, network: Network) -> usize {
        if network.latency_ms == 0 {
            self.batches_fast
        } else {
            self.batches_slow
        }
    }
}
