use std::net::SocketAddr;

/// Why a [`FaultProxyConfig`](super::FaultProxyConfig) was rejected or the proxy could not start.
///
/// Faults the proxy injects are not errors here: they are HTTP answers, the behaviour under test.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// A fault rate is not a probability.
    #[error("invalid {name}: {value} is not a probability in [0, 1]")]
    InvalidRate {
        /// Which rate: `throttle_rate`, `error_500_rate`, `after_write_500_rate` or `unprocessed_keys_rate`.
        name: &'static str,
        /// The rejected value.
        value: f64,
    },
    /// The rates are each probabilities but together exceed 1: one request gets at most one fault.
    #[error("the fault rates add up to {sum}, more than 1")]
    RatesExceedOne {
        /// `throttle_rate + error_500_rate + after_write_500_rate + unprocessed_keys_rate`.
        sum: f64,
    },
    /// The upstream is not a plain `http://host:port` base URL.
    #[error("invalid upstream {upstream:?}: {reason}")]
    InvalidUpstream {
        /// The rejected URL.
        upstream: String,
        /// What is wrong with it.
        reason: &'static str,
    },
    /// An entry of `operations` is not a DynamoDB operation name such as `PutItem`.
    #[error("invalid operation name {name:?}: expected a DynamoDB operation such as PutItem")]
    InvalidOperation {
        /// The rejected entry.
        name: String,
    },
    /// The listening socket could not be bound or its address read back.
    #[error("cannot listen on {addr}: {source}")]
    Bind {
        /// The address asked for.
        addr: SocketAddr,
        /// The operating system's error.
        #[source]
        source: std::io::Error,
    },
}

impl Error {
    /// `true` when the configuration was rejected (any variant but [`Error::Bind`]).
    pub fn is_invalid_config(&self) -> bool {
        !self.is_bind()
    }

    /// `true` for [`Error::Bind`].
    pub fn is_bind(&self) -> bool {
        matches!(self, Error::Bind { .. })
    }
}
