use std::collections::BTreeMap;

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
    /// DynamoDB requests per operation name (`PutItem`, ...), faulted or not.
    pub by_operation: BTreeMap<String, u64>,
    /// Requests the upstream did not answer (connection refused, reset, an oversized answer): answered `502`.
    pub upstream_errors: u64,
}

impl ProxyStats {
    /// Faults injected so far: `throttled + errors_500 + after_write_500`.
    pub fn faults(&self) -> u64 {
        self.throttled + self.errors_500 + self.after_write_500
    }
}
