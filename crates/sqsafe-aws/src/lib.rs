//! AWS SDK configuration shared by sqsafe's crates and functions.
//!
//! The SDK's default features pull two HTTP stacks and the aws-lc C library; sqsafe turns them off and builds one
//! client on hyper 1 with rustls and ring. Everything else comes from the standard environment: `AWS_REGION`,
//! credentials, and `AWS_ENDPOINT_URL` / `AWS_ENDPOINT_URL_<SERVICE>` (how tests and local runs reach moto server).
//!
//! Every call is bounded in time ([`Timeouts`]): an endpoint that accepts the connection and never answers fails the
//! call in seconds with a timeout error (transient), instead of holding an idempotency claim and the invocation until
//! Lambda kills it.
//!
//! ```no_run
//! # async fn f() {
//! use std::time::Duration;
//! use sqsafe_aws::Timeouts;
//!
//! let config = sqsafe_aws::load().await; // Timeouts::default()
//! // let dynamodb = aws_sdk_dynamodb::Client::new(&config);
//! # let _ = config;
//!
//! // A longer budget, e.g. for SQS long polling (ReceiveMessage waits up to 20 s for messages):
//! let polling = Timeouts::default()
//!     .with_read(Duration::from_secs(25))
//!     .with_attempt(Duration::from_secs(25))
//!     .with_operation(Duration::from_secs(60));
//! let config = sqsafe_aws::config_loader_with(polling).load().await;
//! # let _ = config;
//! # }
//! ```
#![forbid(unsafe_code)]

mod endpoint;
mod local;

use std::time::Duration;

use aws_config::stalled_stream_protection::StalledStreamProtectionConfig;
use aws_config::timeout::TimeoutConfig;
use aws_config::{BehaviorVersion, ConfigLoader, SdkConfig};
use aws_smithy_http_client::tls::{self, rustls_provider::CryptoMode};
use aws_smithy_runtime_api::client::http::SharedHttpClient;

pub use endpoint::HttpUrl;
pub use local::{free_port, local_config_loader};

/// How long one SDK call may take, at each level. Set on every client made from [`load`] / [`config_loader`].
///
/// A call is made of attempts (the SDK's standard retry mode makes up to 3); an attempt opens a connection (or reuses
/// one), sends the request and reads the response.
///
/// | level | bounds | default |
/// |---|---|---|
/// | `connect` | TCP connect and TLS handshake of a new connection | 2 s |
/// | `read` | from sending the request to the first byte of the response | 3 s |
/// | `attempt` | one attempt, from connect to the last byte of the response | 3 s |
/// | `operation` | the whole call, all attempts and the backoff between them included | 10 s |
///
/// # Default
/// connect 2 s, read 3 s, attempt 3 s, operation 10 s. Why these values:
/// - DynamoDB and SQS answer in milliseconds (p99 single-digit to tens of ms in region), so 3 s for an attempt is
///   a hundred times a slow answer: an attempt that takes that long is lost, and a new attempt (on a new connection)
///   is the better bet.
/// - 2 s to connect leaves room for one retransmitted SYN (Linux retransmits after 1 s) and a TLS handshake.
/// - 10 s for the whole call fits about three 3 s attempts with the SDK's backoff between them, and stays well inside
///   the 30-60 s Lambda timeouts of sqsafe's functions: a dependency that has gone silent fails one record as a
///   transient store error, and the invocation still reports its batch. (A record that starts just before the
///   deadline can still outlast it: the batch processor's deadline reserve decides which records start.)
///
/// Calls that legitimately wait longer need their own budget: SQS long polling (`ReceiveMessage` with
/// `WaitTimeSeconds`) needs `read` and `attempt` above the wait.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Timeouts {
    connect: Duration,
    read: Duration,
    attempt: Duration,
    operation: Duration,
}

impl Default for Timeouts {
    fn default() -> Self {
        Self::DEFAULT
    }
}

impl Timeouts {
    /// The defaults (see [`Timeouts`]), usable in `const` contexts.
    pub const DEFAULT: Self = Self {
        connect: Duration::from_secs(2),
        read: Duration::from_secs(3),
        attempt: Duration::from_secs(3),
        operation: Duration::from_secs(10),
    };

    /// For local tools that long-poll SQS (up to 20 s) or talk to a local emulator that may queue requests under
    /// load: connect 2 s, read 25 s, attempt 25 s, operation 60 s. Not for functions.
    pub const LOCAL_TOOLS: Self = Self {
        connect: Duration::from_secs(2),
        read: Duration::from_secs(25),
        attempt: Duration::from_secs(25),
        operation: Duration::from_secs(60),
    };

    /// Sets the connect timeout.
    pub const fn with_connect(mut self, timeout: Duration) -> Self {
        self.connect = timeout;
        self
    }

    /// Sets the read timeout (request sent to first response byte).
    pub const fn with_read(mut self, timeout: Duration) -> Self {
        self.read = timeout;
        self
    }

    /// Sets the timeout of one attempt.
    pub const fn with_attempt(mut self, timeout: Duration) -> Self {
        self.attempt = timeout;
        self
    }

    /// Sets the timeout of a whole operation, retries included.
    pub const fn with_operation(mut self, timeout: Duration) -> Self {
        self.operation = timeout;
        self
    }

    /// The connect timeout.
    pub const fn connect(&self) -> Duration {
        self.connect
    }

    /// The read timeout.
    pub const fn read(&self) -> Duration {
        self.read
    }

    /// The timeout of one attempt.
    pub const fn attempt(&self) -> Duration {
        self.attempt
    }

    /// The timeout of a whole operation.
    pub const fn operation(&self) -> Duration {
        self.operation
    }

    /// The SDK's form of these timeouts.
    pub fn to_timeout_config(&self) -> TimeoutConfig {
        TimeoutConfig::builder()
            .connect_timeout(self.connect)
            .read_timeout(self.read)
            .operation_attempt_timeout(self.attempt)
            .operation_timeout(self.operation)
            .build()
    }
}

impl From<Timeouts> for TimeoutConfig {
    fn from(timeouts: Timeouts) -> Self {
        timeouts.to_timeout_config()
    }
}

/// The HTTP client every sqsafe SDK client uses: hyper 1, rustls with ring, connection pooling.
pub fn http_client() -> SharedHttpClient {
    aws_smithy_http_client::Builder::new()
        .tls_provider(tls::Provider::Rustls(CryptoMode::Ring))
        .build_https()
}

/// The standard configuration loader with sqsafe's HTTP client and [`Timeouts::default`]; add overrides before
/// `.load()`.
///
/// A later `.timeout_config(..)` on the loader replaces these timeouts as a whole: prefer
/// [`config_loader_with`].
pub fn config_loader() -> ConfigLoader {
    config_loader_with(Timeouts::default())
}

/// [`config_loader`] with other timeouts.
///
/// The SDK's stalled-stream protection is off: DynamoDB's and SQS's bodies are a few kilobytes of JSON, and the read
/// and attempt timeouts above already end a response that stops arriving. Its throughput checks cost a timer per
/// body poll (bench/RESULTS.md, figure 4).
pub fn config_loader_with(timeouts: Timeouts) -> ConfigLoader {
    aws_config::defaults(BehaviorVersion::latest())
        .http_client(http_client())
        .timeout_config(timeouts.to_timeout_config())
        .stalled_stream_protection(StalledStreamProtectionConfig::disabled())
}

/// Loads the configuration from the environment, with [`Timeouts::default`].
pub async fn load() -> SdkConfig {
    config_loader().load().await
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn defaults_are_the_documented_ones() {
        let t = Timeouts::default();
        assert_eq!(t.connect(), Duration::from_secs(2));
        assert_eq!(t.read(), Duration::from_secs(3));
        assert_eq!(t.attempt(), Duration::from_secs(3));
        assert_eq!(t.operation(), Duration::from_secs(10));
    }

    #[test]
    fn builders_set_each_level_and_reach_the_sdk_config() {
        let t = Timeouts::DEFAULT
            .with_connect(Duration::from_millis(100))
            .with_read(Duration::from_millis(200))
            .with_attempt(Duration::from_millis(300))
            .with_operation(Duration::from_millis(400));
        let config = TimeoutConfig::from(t);
        assert_eq!(config.connect_timeout(), Some(Duration::from_millis(100)));
        assert_eq!(config.read_timeout(), Some(Duration::from_millis(200)));
        assert_eq!(
            config.operation_attempt_timeout(),
            Some(Duration::from_millis(300))
        );
        assert_eq!(config.operation_timeout(), Some(Duration::from_millis(400)));
    }

    #[tokio::test]
    async fn the_loaded_config_carries_the_default_timeouts() {
        let config = config_loader()
            .region(aws_config::Region::new("us-east-1"))
            .load()
            .await;
        assert_eq!(
            config.timeout_config(),
            Some(&Timeouts::default().to_timeout_config())
        );
    }
}
