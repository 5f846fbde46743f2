//! The engine's settings that are plain values: how completions are retried, how a long effect keeps its claim.

use std::time::Duration;

/// How a completion that fails after the effect ran (throttling, a timeout) is retried: jittered exponential
/// backoff from `first_delay` up to `max_delay`, at most `attempts` writes in all, and never past the request's
/// deadline minus `reserve` (the time left to report the record): each write is cut at that point and no retry starts
/// after it, so a write that hangs cannot carry the invocation past its deadline. The first write is always made,
/// with at least half the reserve: a completion that lands saves a second run of the effect.
///
/// # Default
/// 6 attempts, 50 ms first delay, 1 s max delay, 1 s reserve. (The AWS SDK also retries each write up to 3 times.)
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CompletionRetry {
    /// Completion writes in all, the first included (at least 1).
    pub attempts: u32,
    /// Delay before the first retry.
    pub first_delay: Duration,
    /// Longest delay between two tries.
    pub max_delay: Duration,
    /// Time kept before the deadline: retries stop when their delays would reach into it.
    pub reserve: Duration,
}

impl Default for CompletionRetry {
    fn default() -> Self {
        Self {
            attempts: 6,
            first_delay: Duration::from_millis(50),
            max_delay: Duration::from_secs(1),
            reserve: Duration::from_secs(1),
        }
    }
}

/// How a long effect keeps its claim: every `every`, the lease is moved to now + `lease`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Heartbeat {
    /// Interval between extensions.
    pub every: Duration,
    /// New lease length at each extension; must be longer than `every`.
    pub lease: Duration,
}
