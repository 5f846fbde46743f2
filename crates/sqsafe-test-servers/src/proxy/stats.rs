use std::collections::{BTreeMap, VecDeque};
use std::time::SystemTime;

/// Counters of a [`RunningProxy`](super::RunningProxy), from its start.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ProxyStats {
    /// Every request received, DynamoDB or not.
    pub requests: u64,
    /// Requests whose `X-Amz-Target` starts with `DynamoDB_20120810.`.
    pub dynamodb_requests: u64,
    /// Answered `400 ThrottlingException` without being forwarded.
    pub throttled: u64,
    /// Answered `500 InternalServerError` without being forwarded.
    pub errors_500: u64,
    /// Forwarded, then answered `500 InternalServerError` instead of the upstream's answer (whatever that answer was:
    /// a request that failed its condition upstream is counted too).
    pub after_write_500: u64,
    /// `BatchGetItem` requests answered `200` with every key unprocessed, without being forwarded.
    pub unprocessed_keys: u64,
    /// DynamoDB requests per operation name (`PutItem`, ...), faulted or not.
    pub by_operation: BTreeMap<String, u64>,
    /// Requests the upstream did not answer (connection refused, reset, an oversized answer): answered `502`.
    pub upstream_errors: u64,
    /// Fenced writes retried after a 500 after the write whose answer showed they met the client's own earlier write
    /// (see the [module documentation](super#writes-that-meet-their-own-earlier-try)), by operation. Only answers
    /// the client received count: a retry that got another injected fault is not counted.
    pub self_met_writes: BTreeMap<String, u64>,
    /// The same writes, one entry each, in the order they were answered.
    pub self_met: Vec<SelfMetWrite>,
    /// The last [`RECENT_FAULTS`] faults injected, oldest first: what a stalled run was doing when it stopped.
    pub recent_faults: VecDeque<InjectedFault>,
}

/// How many of the latest injected faults [`ProxyStats::recent_faults`] keeps.
pub const RECENT_FAULTS: usize = 16;

/// One injected fault.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct InjectedFault {
    /// When the proxy decided it.
    pub at: SystemTime,
    /// The DynamoDB operation (`PutItem`, ...).
    pub operation: String,
    /// `throttled`, `500`, `500 after the write` or `every key unprocessed`.
    pub fault: &'static str,
}

/// A fenced write whose retry met the client's own earlier write.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SelfMetWrite {
    /// `PutItem` (a claim), `UpdateItem` (a completion or extension), `DeleteItem` (a release) or
    /// `TransactWriteItems` (record and effect together).
    pub operation: String,
    /// The idempotency table.
    pub table: String,
    /// The record's partition key: the idempotency key.
    pub key: String,
}

impl ProxyStats {
    /// Faults injected so far: `throttled + errors_500 + after_write_500 + unprocessed_keys`.
    pub fn faults(&self) -> u64 {
        self.throttled + self.errors_500 + self.after_write_500 + self.unprocessed_keys
    }

    /// Self-met writes of every operation.
    pub fn self_met_total(&self) -> u64 {
        self.self_met_writes.values().sum()
    }
}
