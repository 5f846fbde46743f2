//! A local AWS Lambda for the real function binaries: the Runtime API (version 2018-06-01) and one execution
//! environment per [`FunctionInstance`], with crashes and timeouts handled the way Lambda handles them.
//!
//! ```no_run
//! use std::time::Duration;
//!
//! use sqsafe_local::lambda::{FunctionInstance, FunctionSpec, InvokeError};
//!
//! # #[tokio::main(flavor = "current_thread")]
//! # async fn main() -> Result<(), Box<dyn std::error::Error>> {
//! let spec = FunctionSpec::new("charge-payment", "target/debug/charge-payment", "target/lambda-logs")
//!     .with_timeout(Duration::from_secs(5))
//!     .with_env("PAYMENTS_URL", "http://127.0.0.1:8080");
//! let mut instance = FunctionInstance::start(spec, 0).await?;
//!
//! match instance.invoke(serde_json::json!({ "Records": [] })).await {
//!     Ok(response) => println!("answered {response}"),
//!     Err(InvokeError::Crashed { exit }) => println!("crashed ({exit}); the next invoke cold-starts"),
//!     Err(e) => println!("failed: {e}"),
//! }
//! let stats = instance.stats();
//! println!("{} cold starts, {} replayed", stats.cold_starts, stats.emf_sum("RecordsReplayed"));
//! instance.shutdown().await;
//! # Ok(()) }
//! ```
//!
//! # Terminology
//!
//! - **Instance** ([`FunctionInstance`]): one execution environment. It owns a Runtime API server on
//!   `127.0.0.1:<free port>` and at most one **process** at a time, and runs one invocation at a time. Several
//!   instances of a function (distinct instance ids) are Lambda's concurrency.
//! - **Cold start**: an invoke that finds no process spawns one. The process asks `/next` for its first event when
//!   its init is done; that must happen within [`INIT_TIMEOUT`].
//! - **Timeout**: counted from the moment the runtime takes the event, which is also when
//!   `Lambda-Runtime-Deadline-Ms` (now + timeout, epoch milliseconds) is set.
//!
//! ```text
//! invoke(event)                instance                         process (lambda_runtime)
//!   |  no process: spawn ------->|---------------------------------> init (config, clients)
//!   |                            |<-- GET /invocation/next ---------|
//!   |  queue event ------------->|--- 200 event + headers --------->| handler runs
//!   |                            |<-- POST /invocation/{id}/response| -> Ok(response)
//!   |                            |<-- POST /invocation/{id}/error --| -> FunctionError (stays warm)
//!   |                            |    the process exits ------------| -> Crashed (next invoke cold-starts)
//!   |                            |    the deadline passes: SIGKILL  | -> Timeout (next invoke cold-starts)
//!   |                            |<-- POST /init/error, or an exit  |
//!   |                            |    before the first /next -------| -> InitFailed (next invoke cold-starts)
//! ```
//!
//! # The process
//!
//! It inherits this process's environment, minus `AWS_LAMBDA_MAX_CONCURRENCY`, `_X_AMZN_TRACE_ID` and
//! `AWS_LAMBDA_INITIALIZATION_TYPE`, and gets in order (a later one wins):
//!
//! | variable | value |
//! |---|---|
//! | `AWS_LAMBDA_FUNCTION_NAME` | [`FunctionSpec::name`] |
//! | `AWS_LAMBDA_FUNCTION_VERSION` | `$LATEST` |
//! | `AWS_LAMBDA_FUNCTION_MEMORY_SIZE` | `128` |
//! | `AWS_LAMBDA_LOG_GROUP_NAME` / `AWS_LAMBDA_LOG_STREAM_NAME` | `/aws/lambda/<name>` / `YYYY/MM/DD/[$LATEST]<hex>` |
//! | `AWS_REGION`, `AWS_DEFAULT_REGION` | `us-east-1`, or the spec's `AWS_REGION` |
//! | `AWS_LAMBDA_INITIALIZATION_TYPE`, `AWS_EXECUTION_ENV`, `LAMBDA_TASK_ROOT`, `_HANDLER` | `on-demand`, `AWS_Lambda_provided.al2023`, the binary's folder, `bootstrap` |
//! | everything in [`FunctionSpec::env`] | |
//! | `AWS_LAMBDA_RUNTIME_API` | `127.0.0.1:<port>`, no scheme, as Lambda sets it (`lambda_runtime` 1.5 also takes `http://`) |
//! | `SQSAFE_INSTANCE` | the instance id |
//! | `SQSAFE_CRASH_SEED` | only if the spec sets it: [`derive_crash_seed`]`(base, instance id, n)` for its `n`-th process |
//!
//! The derived crash seed means that a process started after a crash does not replay its predecessor's crash
//! decisions (it would crash at the same record forever), while the same base seed still replays the whole run.
//! Each `INIT_START` line in the log gives the seed of that process.
//!
//! It runs in its own process group, with stdin closed, and is killed with SIGKILL on timeout, on
//! [`FunctionInstance::shutdown`] and when the instance is dropped.
//!
//! # Logs and counters
//!
//! Its stdout and stderr are appended line by line to `<log_dir>/<name>-<instance id>.log`, between the lines Lambda
//! itself writes (`INIT_START`, `START`, `END`, `REPORT` with durations, `Task timed out`, `Runtime exited`). Each line
//! is also scanned into [`InstanceStats`]: `sqsafe-fault: SIGKILL at <point> ...` counts a fault marker for
//! `<point>`, and an EMF line (a JSON object with an `_aws` member) adds every metric it declares under
//! `_aws.CloudWatchMetrics[].Metrics[].Name` to a running sum (a metric declared by two documents of one batch, like
//! sqsafe's `RecordsSentToDlq` in its batch line and again per error kind, is summed twice there). sqsafe's batch
//! metrics line alone is also read into [`BatchOutcomes`], each record once, which
//! [`FunctionInstance::take_outcomes`] hands over per invocation. When `invoke` returns, everything the process wrote
//! before it answered, exited or was killed has been counted.
//!
//! # Time and ids
//!
//! Deadlines are wall-clock milliseconds because the function compares them with its own clock; timeouts run on
//! tokio's clock. Request ids (`<instance>-0000-4000-8000-<invocation>`, UUID-shaped) and trace ids are derived
//! from the instance id and a counter, not drawn at random, so runs are repeatable.
//!
//! Against a real process (a cold start, an abort, a timeout, a failed init), this module is tested in
//! crates/sqsafe-test-servers (`tests/servers/lambda.rs`), beside the echo function it runs there.

mod api;
mod error;
mod ids;
mod instance;
mod logs;
mod outcomes;
mod process;
mod spec;
mod stats;

pub use error::InvokeError;
pub use ids::derive_crash_seed;
pub use instance::{FunctionInstance, INIT_TIMEOUT};
pub use outcomes::BatchOutcomes;
pub use spec::FunctionSpec;
pub use stats::InstanceStats;
