use std::fmt;
use std::future::Future;
use std::net::SocketAddr;
use std::pin::Pin;
use std::sync::Arc;

use super::server::RunningPayments;
use crate::error::{Error, Result};

/// Runs while a new charge request is being "processed": after its key is marked in flight, before the charge.
///
/// Tests hold a request in flight with it (waiting on a `tokio::sync::Notify` or a oneshot) to observe the `409`
/// a concurrent retry gets, without sleeping. Closures `Fn() -> impl Future<Output = ()>` are delays too.
pub trait ProcessingDelay: Send + Sync + 'static {
    /// The wait for one request.
    fn delay(&self) -> Pin<Box<dyn Future<Output = ()> + Send>>;
}

impl<F, Fut> ProcessingDelay for F
where
    F: Fn() -> Fut + Send + Sync + 'static,
    Fut: Future<Output = ()> + Send + 'static,
{
    fn delay(&self) -> Pin<Box<dyn Future<Output = ()> + Send>> {
        Box::pin(self())
    }
}

/// A configured local payments API, ready to [`start`](PaymentsApi::start). Clones start independent servers.
#[derive(Clone)]
pub struct PaymentsApi {
    pub(crate) seed: u64,
    pub(crate) fail_before_rate: f64,
    pub(crate) fail_after_rate: f64,
    pub(crate) delay: Option<Arc<dyn ProcessingDelay>>,
}

impl PaymentsApi {
    /// A builder with the defaults listed on [`PaymentsApiBuilder`].
    pub fn builder() -> PaymentsApiBuilder {
        PaymentsApiBuilder::new()
    }

    /// The seed of the fault RNG.
    pub fn seed(&self) -> u64 {
        self.seed
    }

    /// Binds `addr` (use port 0 for a free port) and serves on a spawned task until the returned handle is shut
    /// down or dropped. Must be called within a Tokio runtime.
    pub async fn start(self, addr: SocketAddr) -> Result<RunningPayments> {
        RunningPayments::start(self, addr).await
    }
}

impl fmt::Debug for PaymentsApi {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("PaymentsApi")
            .field("seed", &self.seed)
            .field("fail_before_rate", &self.fail_before_rate)
            .field("fail_after_rate", &self.fail_after_rate)
            .field("processing_delay", &self.delay.is_some())
            .finish()
    }
}

/// Builder of a [`PaymentsApi`].
///
/// # Default
/// - seed `0`: the same fault sequence on every run unless told otherwise;
/// - `fail_before_rate` and `fail_after_rate` `0.0`: no injected faults except those forced with
///   [`RunningPayments::force_next`];
/// - no processing delay.
#[derive(Clone)]
pub struct PaymentsApiBuilder {
    seed: u64,
    fail_before_rate: f64,
    fail_after_rate: f64,
    delay: Option<Arc<dyn ProcessingDelay>>,
}

impl PaymentsApiBuilder {
    /// The defaults.
    pub const fn new() -> Self {
        Self {
            seed: 0,
            fail_before_rate: 0.0,
            fail_after_rate: 0.0,
            delay: None,
        }
    }

    /// Seed of the RNG that decides the injected faults: one seed, one sequence of faults over the sequence of new
    /// requests.
    pub const fn seed(mut self, seed: u64) -> Self {
        self.seed = seed;
        self
    }

    /// Probability that a new request is answered `503` before being charged, its key forgotten.
    pub const fn fail_before_rate(mut self, rate: f64) -> Self {
        self.fail_before_rate = rate;
        self
    }

    /// Probability that a new request that got past `fail_before_rate` is charged, stored for replay, and answered
    /// `503` anyway.
    pub const fn fail_after_rate(mut self, rate: f64) -> Self {
        self.fail_after_rate = rate;
        self
    }

    /// Awaited by every new request between being marked in flight and being charged.
    pub fn processing_delay(mut self, delay: impl ProcessingDelay) -> Self {
        self.delay = Some(Arc::new(delay));
        self
    }

    /// Checks that both rates are probabilities.
    pub fn build(self) -> Result<PaymentsApi> {
        check_rate("fail_before_rate", self.fail_before_rate)?;
        check_rate("fail_after_rate", self.fail_after_rate)?;
        Ok(PaymentsApi {
            seed: self.seed,
            fail_before_rate: self.fail_before_rate,
            fail_after_rate: self.fail_after_rate,
            delay: self.delay,
        })
    }

    /// [`build`](Self::build), then [`PaymentsApi::start`].
    pub async fn start(self, addr: SocketAddr) -> Result<RunningPayments> {
        self.build()?.start(addr).await
    }
}

impl Default for PaymentsApiBuilder {
    fn default() -> Self {
        Self::new()
    }
}

impl fmt::Debug for PaymentsApiBuilder {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("PaymentsApiBuilder")
            .field("seed", &self.seed)
            .field("fail_before_rate", &self.fail_before_rate)
            .field("fail_after_rate", &self.fail_after_rate)
            .field("processing_delay", &self.delay.is_some())
            .finish()
    }
}

fn check_rate(name: &'static str, value: f64) -> Result<()> {
    // `contains` is false for NaN too.
    if (0.0..=1.0).contains(&value) {
        Ok(())
    } else {
        Err(Error::InvalidRate { name, value })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rates_must_be_probabilities() {
        for bad in [-0.1, 1.01, f64::NAN, f64::INFINITY] {
            let err = PaymentsApi::builder()
                .fail_before_rate(bad)
                .build()
                .expect_err("rejected");
            assert!(
                matches!(
                    err,
                    Error::InvalidRate {
                        name: "fail_before_rate",
                        ..
                    }
                ),
                "{err}"
            );
            let err = PaymentsApi::builder()
                .fail_after_rate(bad)
                .build()
                .expect_err("rejected");
            assert!(
                matches!(
                    err,
                    Error::InvalidRate {
                        name: "fail_after_rate",
                        ..
                    }
                ),
                "{err}"
            );
        }
        let api = PaymentsApi::builder()
            .seed(3)
            .fail_before_rate(0.0)
            .fail_after_rate(1.0)
            .build()
            .expect("valid");
        assert_eq!(api.seed(), 3);
    }
}
