use std::fmt;
use std::future::Future;
use std::path::PathBuf;
use std::pin::Pin;
use std::sync::Arc;
use std::time::Duration;

use crate::error::{Error, Result};

/// Runs while a new charge request is being "processed": after the idempotency layer claimed its key, before the
/// charge.
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

/// Where the idempotency layer keeps the keys.
#[derive(Clone)]
pub(crate) enum KeyPlace {
    DynamoDb {
        client: aws_sdk_dynamodb::Client,
        table: String,
    },
    InMemory,
}

impl fmt::Debug for KeyPlace {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            KeyPlace::DynamoDb { table, .. } => write!(f, "DynamoDb({table})"),
            KeyPlace::InMemory => f.write_str("InMemory"),
        }
    }
}

/// A configured local payments API, ready to [`start`](PaymentsApi::start). Clones start independent servers (on
/// the same key table, when they were given one: two of them answer one key as one API).
#[derive(Clone)]
pub struct PaymentsApi {
    pub(crate) seed: u64,
    pub(crate) fail_before_rate: f64,
    pub(crate) fail_after_rate: f64,
    pub(crate) delay: Option<Arc<dyn ProcessingDelay>>,
    pub(crate) keys: KeyPlace,
    pub(crate) lease: Duration,
    pub(crate) ledger_file: Option<PathBuf>,
    pub(crate) hold: Option<String>,
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
}

impl fmt::Debug for PaymentsApi {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("PaymentsApi")
            .field("seed", &self.seed)
            .field("fail_before_rate", &self.fail_before_rate)
            .field("fail_after_rate", &self.fail_after_rate)
            .field("processing_delay", &self.delay.is_some())
            .field("keys", &self.keys)
            .field("lease", &self.lease)
            .field("ledger_file", &self.ledger_file)
            .field("hold", &self.hold)
            .finish()
    }
}

/// Builder of a [`PaymentsApi`].
///
/// # Default
/// - no place for the keys: one must be chosen, [`keys_in_dynamodb`](Self::keys_in_dynamodb) (tests, the demo,
///   the fault suite) or [`keys_in_memory`](Self::keys_in_memory) (`sqsafe-payments` run without `--table`);
///   [`build`](Self::build) refuses none with [`Error::NoKeyStore`];
/// - seed `0`: the same fault sequence on every run unless told otherwise;
/// - `fail_before_rate` and `fail_after_rate` `0.0`: no injected faults except those forced with
///   [`RunningPayments::force_next`](super::RunningPayments::force_next);
/// - no processing delay;
/// - lease 30 s (the layer's default, [`sqsafe::api::ApiSettings::lease`]);
/// - the ledger in memory only, no payment held.
#[derive(Clone)]
pub struct PaymentsApiBuilder {
    seed: u64,
    fail_before_rate: f64,
    fail_after_rate: f64,
    delay: Option<Arc<dyn ProcessingDelay>>,
    keys: Option<KeyPlace>,
    lease: Duration,
    ledger_file: Option<PathBuf>,
    hold: Option<String>,
}

impl PaymentsApiBuilder {
    /// The defaults.
    pub const fn new() -> Self {
        Self {
            seed: 0,
            fail_before_rate: 0.0,
            fail_after_rate: 0.0,
            delay: None,
            keys: None,
            lease: Duration::from_secs(30),
            ledger_file: None,
            hold: None,
        }
    }

    /// Keeps the keys in DynamoDB, in `table` (partition key `pk`, a string: the layout of sqsafe's idempotency
    /// table), through `client`. The table must exist. A restarted server on the same table answers every key as
    /// the one before it did: replays what it completed, `409` for what it still held when it died (until that
    /// claim's lease runs out), and takes over after that.
    pub fn keys_in_dynamodb(
        mut self,
        client: aws_sdk_dynamodb::Client,
        table: impl Into<String>,
    ) -> Self {
        self.keys = Some(KeyPlace::DynamoDb {
            client,
            table: table.into(),
        });
        self
    }

    /// [`keys_in_dynamodb`](Self::keys_in_dynamodb) on a table of its own, created now through `client` (a local
    /// DynamoDB: moto), named `payments-keys-…`, unique per call.
    ///
    /// # Panics
    /// When the table cannot be created (`sqsafe_testkit::create_table`'s message).
    pub async fn keys_in_new_table(self, client: aws_sdk_dynamodb::Client) -> Self {
        let table = sqsafe_testkit::unique_name("payments-keys");
        sqsafe_testkit::create_table(&client, &table, "pk", None).await;
        self.keys_in_dynamodb(client, table)
    }

    /// Keeps the keys in this process's memory (sqsafe's `InMemoryStore`): a restart forgets them, so the retry of a
    /// charge made before it charges again. For `sqsafe-payments` run by hand without `--table`; never what a test
    /// proves a key's handling on.
    pub fn keys_in_memory(mut self) -> Self {
        self.keys = Some(KeyPlace::InMemory);
        self
    }

    /// The claim's lease, and the longest a charge may be processed: the layer then stops it (`504`) and keeps its
    /// claim, since it may have charged; a claim so left, or left by a process that died, holds its key (`409` with
    /// `Retry-After`) until its lease ends, and a retry takes over after sqsafe's takeover margin (2 s) more.
    pub const fn lease(mut self, lease: Duration) -> Self {
        self.lease = lease;
        self
    }

    /// Appends each charge to `path` as a JSON line, and starts with the charges already there: a ledger that
    /// outlives the process (`sqsafe-payments --ledger`), so that charges made before a crash still count.
    pub fn ledger_file(mut self, path: impl Into<PathBuf>) -> Self {
        self.ledger_file = Some(path.into());
        self
    }

    /// A kill point for tests that crash the server in flight. The first new request of `payment_id` is held,
    /// claimed and not charged, for good; from then on no request is charged (each waits, claimed, before its charge).
    /// Once every request charged before it has had its answer stored, [`RunningPayments::held`](super::RunningPayments::held) resolves: killing
    /// the process then leaves every request in flight claimed and uncharged, never charged and not completed
    /// (a charge and its completion are two writes, and a kill between them would charge again on the takeover).
    pub fn hold_in_flight(mut self, payment_id: impl Into<String>) -> Self {
        self.hold = Some(payment_id.into());
        self
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

    /// Checks that both rates are probabilities, that a place for the keys was chosen and that the lease is not
    /// zero.
    pub fn build(self) -> Result<PaymentsApi> {
        check_rate("fail_before_rate", self.fail_before_rate)?;
        check_rate("fail_after_rate", self.fail_after_rate)?;
        let keys = self.keys.ok_or(Error::NoKeyStore)?;
        if self.lease.is_zero() {
            return Err(Error::Layer("the lease must be longer than zero".into()));
        }
        Ok(PaymentsApi {
            seed: self.seed,
            fail_before_rate: self.fail_before_rate,
            fail_after_rate: self.fail_after_rate,
            delay: self.delay,
            keys,
            lease: self.lease,
            ledger_file: self.ledger_file,
            hold: self.hold,
        })
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
            .field("keys", &self.keys)
            .field("lease", &self.lease)
            .field("ledger_file", &self.ledger_file)
            .field("hold", &self.hold)
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
                .keys_in_memory()
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
                .keys_in_memory()
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
            .keys_in_memory()
            .seed(3)
            .fail_before_rate(0.0)
            .fail_after_rate(1.0)
            .build()
            .expect("valid");
        assert_eq!(api.seed(), 3);
    }

    #[test]
    fn a_place_for_the_keys_must_be_chosen_and_the_lease_be_positive() {
        let err = PaymentsApi::builder().build().expect_err("no key store");
        assert!(err.is_no_key_store(), "{err}");
        let err = PaymentsApi::builder()
            .keys_in_memory()
            .lease(Duration::ZERO)
            .build()
            .expect_err("zero lease");
        assert!(matches!(err, Error::Layer(_)), "{err}");
    }
}
