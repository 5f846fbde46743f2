//! The test bed every peer runs on: moto server, the payments API, the bench proxy in front of both, the tables and
//! queues, and the environment each peer's process gets.

use std::path::{Path, PathBuf};
use std::time::Duration;

use sqsafe_local::lambda::FunctionSpec;
use sqsafe_local::moto::{self, MotoServer};
use sqsafe_test_servers::{PaymentsApi, RunningPayments};

use crate::proxy::BenchProxy;

/// sqsafe's idempotency table (partition key `pk`, TTL on `expiration`, as template.yaml has it).
pub(crate) const SQSAFE_TABLE: &str = "bench-sqsafe-idempotency";
/// Powertools' (partition key `id`, its default; TTL on `expiration`, its default).
pub(crate) const POWERTOOLS_TABLE: &str = "bench-powertools-idempotency";

/// Where the peers' programs are.
#[derive(Debug, Clone)]
pub(crate) struct Programs {
    /// The Rust binaries (`target/release` or `target/debug`).
    pub(crate) bins: PathBuf,
    /// The bench venv's `python` (Powertools, awslambdaric).
    pub(crate) python: PathBuf,
    /// `bench/peers/powertools`.
    pub(crate) powertools: PathBuf,
    /// The functions' log files.
    pub(crate) logs: PathBuf,
}

/// One consumer under test.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "kebab-case")]
pub(crate) enum Peer {
    /// The floor: the same charge, no idempotency (`bench/peers/naive-rust`).
    Naive,
    /// `functions/charge-payment`, as deployed (the claim mode, the default).
    Sqsafe,
    /// charge-payment in the keyed mode (`SQSAFE_IDEMPOTENCY_MODE=keyed`): one read for a batch, one write per fresh
    /// payment.
    SqsafeKeyed,
    /// charge-payment with the idempotency layer's local cache on.
    SqsafeCached,
    /// charge-payment with logs at `error` (none in the happy path): what its JSON logs cost.
    SqsafeQuiet,
    /// charge-payment on Tokio's multi-threaded runtime (`SQSAFE_TOKIO_RUNTIME=multi-thread`) instead of the
    /// one-thread runtime `sqsafe::main` picks: what the worker threads cost.
    SqsafeMultiThread,
    /// Powertools for AWS Lambda (Python): BatchProcessor + idempotent_function on DynamoDB.
    Powertools,
    /// The same with `use_local_cache=True`.
    PowertoolsCached,
}

impl Peer {
    pub(crate) const fn name(self) -> &'static str {
        match self {
            Peer::Naive => "naive",
            Peer::Sqsafe => "sqsafe",
            Peer::SqsafeKeyed => "sqsafe-keyed",
            Peer::SqsafeCached => "sqsafe-cached",
            Peer::SqsafeQuiet => "sqsafe-quiet",
            Peer::SqsafeMultiThread => "sqsafe-multi-thread",
            Peer::Powertools => "powertools",
            Peer::PowertoolsCached => "powertools-cached",
        }
    }

    /// Whether a duplicate this process completed is answered from its local cache.
    pub(crate) const fn cached(self) -> bool {
        matches!(self, Peer::SqsafeCached | Peer::PowertoolsCached)
    }

    /// The idempotency table it writes to, if any.
    pub(crate) const fn table(self) -> Option<&'static str> {
        match self {
            Peer::Naive => None,
            Peer::Sqsafe
            | Peer::SqsafeKeyed
            | Peer::SqsafeCached
            | Peer::SqsafeQuiet
            | Peer::SqsafeMultiThread => Some(SQSAFE_TABLE),
            Peer::Powertools | Peer::PowertoolsCached => Some(POWERTOOLS_TABLE),
        }
    }
}

/// moto, the payments API and the proxy, running; the tables and queues created.
pub(crate) struct Bed {
    pub(crate) moto: MotoServer,
    pub(crate) payments: RunningPayments,
    pub(crate) proxy: BenchProxy,
    pub(crate) programs: Programs,
    /// Clients straight to moto (setup, prefill, the pollers, the write ceiling).
    pub(crate) dynamodb: aws_sdk_dynamodb::Client,
    pub(crate) sqs: aws_sdk_sqs::Client,
    /// The queue charge-payment is told it consumes, and its DLQ (only touched on failures).
    queue_url: String,
    dlq_url: String,
}

impl Bed {
    pub(crate) async fn start(programs: Programs) -> Result<Self, String> {
        let moto = MotoServer::start(&moto::venv_bin())
            .await
            .map_err(|e| format!("moto: {e}"))?;
        // Keys in memory: the bench measures the consumers, and a key table in moto would add its writes to the
        // single moto core the measured functions share. The payments API lives as long as the bench, so its keys
        // do too; what the layer does on DynamoDB is proved by sqsafe-test-servers' tests and the fault suite.
        let payments = PaymentsApi::builder()
            .keys_in_memory()
            .start(([127, 0, 0, 1], 0).into())
            .await
            .map_err(|e| format!("payments API: {e}"))?;
        let keys = std::collections::HashMap::from([
            (SQSAFE_TABLE.to_owned(), "pk".to_owned()),
            (POWERTOOLS_TABLE.to_owned(), "id".to_owned()),
        ]);
        let proxy = BenchProxy::start(&moto.endpoint(), &payments.base_url(), keys)
            .await
            .map_err(|e| format!("proxy: {e}"))?;
        let config = sqsafe_testkit::sdk_config_at(&moto.endpoint()).await;
        let dynamodb = aws_sdk_dynamodb::Client::new(&config);
        let sqs = aws_sdk_sqs::Client::new(&config);
        for (table, key) in [(SQSAFE_TABLE, "pk"), (POWERTOOLS_TABLE, "id")] {
            sqsafe_testkit::create_table(&dynamodb, table, key, None).await;
        }
        let queue_url = sqsafe_testkit::create_queue(&sqs, "bench-payments", false).await;
        let dlq_url = sqsafe_testkit::create_queue(&sqs, "bench-payments-dlq", false).await;
        std::fs::create_dir_all(&programs.logs)
            .map_err(|e| format!("{}: {e}", programs.logs.display()))?;
        Ok(Self {
            moto,
            payments,
            proxy,
            programs,
            dynamodb,
            sqs,
            queue_url,
            dlq_url,
        })
    }

    /// How `peer` runs under the Runtime API emulator: its program and environment. DynamoDB and the payments API
    /// are reached through the proxy; SQS (only touched on failures) directly.
    pub(crate) fn spec(&self, peer: Peer, queue_url: Option<&str>) -> FunctionSpec {
        let p = &self.programs;
        let (program, own): (PathBuf, Vec<(&str, String)>) = match peer {
            Peer::Naive => (p.bins.join("naive-rust"), vec![]),
            Peer::Sqsafe | Peer::SqsafeQuiet => (p.bins.join("charge-payment"), vec![]),
            Peer::SqsafeKeyed => (
                p.bins.join("charge-payment"),
                vec![("SQSAFE_IDEMPOTENCY_MODE", "keyed".to_owned())],
            ),
            Peer::SqsafeMultiThread => (
                p.bins.join("charge-payment"),
                vec![("SQSAFE_TOKIO_RUNTIME", "multi-thread".to_owned())],
            ),
            Peer::SqsafeCached => (p.bins.join("charge-payment-cached"), vec![]),
            Peer::Powertools | Peer::PowertoolsCached => (
                p.powertools.join("bootstrap"),
                vec![
                    ("BENCH_PYTHON", p.python.display().to_string()),
                    ("PYTHONPATH", p.powertools.display().to_string()),
                    // Compiled bytecode of the handler goes under target/, not next to the source.
                    (
                        "PYTHONPYCACHEPREFIX",
                        p.logs.join("pycache").display().to_string(),
                    ),
                    ("AWS_EXECUTION_ENV", "AWS_Lambda_python3.11".to_owned()),
                    (
                        "POWERTOOLS_SERVICE_NAME",
                        "charge-payment-powertools".to_owned(),
                    ),
                    (
                        "BENCH_LOCAL_CACHE",
                        if peer.cached() { "1" } else { "0" }.to_owned(),
                    ),
                ],
            ),
        };
        let mut spec = FunctionSpec::new(peer.name(), program, &p.logs)
            .with_timeout(Duration::from_secs(60))
            // Lambda's 10 s Init limit is not what is measured here: a Python peer's imports on a loaded machine
            // (the smoke runs beside cargo test) can take longer, and its init time is a reported figure anyway.
            .with_init_timeout(Duration::from_secs(60))
            .with_env("AWS_ACCESS_KEY_ID", "testing")
            .with_env("AWS_SECRET_ACCESS_KEY", "testing")
            .with_env("AWS_REGION", "us-east-1")
            .with_env("AWS_ENDPOINT_URL", self.moto.endpoint())
            .with_env("AWS_ENDPOINT_URL_DYNAMODB", self.proxy.dynamodb_endpoint())
            .with_env("PAYMENTS_API_URL", self.proxy.payments_url())
            .with_env("QUEUE_URL", queue_url.unwrap_or(&self.queue_url))
            .with_env("DLQ_URL", &self.dlq_url)
            .with_env(
                "AWS_LAMBDA_LOG_LEVEL",
                if peer == Peer::SqsafeQuiet {
                    "ERROR"
                } else {
                    "INFO"
                },
            );
        if let Some(table) = peer.table() {
            spec = spec.with_env("IDEMPOTENCY_TABLE", table);
        }
        for (name, value) in own {
            spec = spec.with_env(name, value);
        }
        spec
    }

    /// How `peer` runs when handed Kinesis batches: as [`spec`](Self::spec), Powertools with its Kinesis handler
    /// (`BatchProcessor(EventType.KinesisDataStreams)`).
    pub(crate) fn kinesis_spec(&self, peer: Peer) -> FunctionSpec {
        let spec = self.spec(peer, None);
        match peer {
            Peer::Powertools | Peer::PowertoolsCached => {
                spec.with_env("BENCH_HANDLER", "handler.kinesis_handler")
            }
            _ => spec,
        }
    }

    /// The pid of moto server, for its CPU time.
    pub(crate) fn moto_pid(&self) -> Option<u32> {
        self.moto.pid()
    }

    pub(crate) async fn shutdown(self) {
        self.payments.shutdown().await;
        self.moto.shutdown().await;
    }
}

/// `<root>/bench/peers/powertools`.
pub(crate) fn powertools_dir(root: &Path) -> PathBuf {
    root.join("bench").join("peers").join("powertools")
}
