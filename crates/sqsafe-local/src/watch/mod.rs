//! Functions under `cargo lambda watch` (hot reload) behind the local SQS event source mapping: `sqsafe local up
//! --watch`, `make local-watch`.
//!
//! ```no_run
//! use std::time::Duration;
//!
//! use sqsafe_local::esm::{EventSourceMapping, MappingConfig};
//! use sqsafe_local::watch::{Saves, VisibilityHold, WatchFunction, WatchSpec, prebuild};
//!
//! # async fn run(sqs: aws_sdk_sqs::Client, queue_url: String) -> Result<(), Box<dyn std::error::Error>> {
//! prebuild(".".as_ref(), "charge-payment").await?;
//! let spec = WatchSpec::new("charge-payment", ".", "target/local-logs/charge-payment.watch.log")
//!     .with_env([("QUEUE_URL".to_owned(), queue_url.clone())]);
//! let function = WatchFunction::start(spec).await?;
//! let saves = Saves::watch(".".as_ref(), &[])?;
//! let (stop_tx, stop) = tokio::sync::watch::channel(false);
//! let invoker = function
//!     .invoker(stop.clone())
//!     .with_hold(VisibilityHold::new(sqs.clone(), &queue_url, Duration::from_secs(400)))
//!     .with_saves(saves.latest());
//! let config = MappingConfig {
//!     queue_url,
//!     batch_size: 10,
//!     wait_seconds: 5,
//!     drop_delete_rate: 0.0,
//!     seed: 0,
//! };
//! let mapping = EventSourceMapping::new(sqs, config, invoker).await?;
//! let polling = tokio::spawn(mapping.run(stop));
//! // ... edit the handler, save: a delivery after the save waits until watch runs the saved code ...
//! stop_tx.send(true)?;
//! polling.await?;
//! println!("{}", function.shutdown().await);
//! # Ok(()) }
//! ```
//!
//! # Terminology
//!
//! - **Watch**: one `cargo lambda watch` process per function (the pinned cargo-lambda from the venv), on its own
//!   loopback port, in the workspace's root, with the function's environment as its own (watch passes it on to the
//!   function's processes). Its output, cargo's and the function's, goes to one log file.
//! - **Start**: watch runs `cargo run --bin <binary>` on the first invocation, and again after every saved change
//!   in the workspace (a **reload**: it stops the running process, rebuilds, starts the new one).
//! - **Phase** ([`Phase`]): idle, building, running, exited, stopped, read from watch's output ([`Status`]).
//! - **Save** ([`Saves`]): a source file of the workspace changed, seen within milliseconds (watch sees it seconds
//!   later). A batch received after a save waits until a build begun after it runs or fails ([`AfterSave`]).
//! - **Hold** ([`VisibilityHold`]): while the function is not running, or runs the code from before a save, the
//!   batch it waits for is kept invisible.
//!
//! ```text
//! mapping                 WatchInvoker                     cargo lambda watch              function process
//!   | receive batch ------->|                                |                                  |
//!   |                       |-- POST .../invocations ------->| (queued)                         |
//!   |                       |   phase Building: hold ------->|  cargo build ...                 |
//!   |                       |   (ChangeMessageVisibility)    |  Running `target/debug/NAME` --->| init
//!   |                       |   phase Running: clock starts  |<-- GET /next --------------------|
//!   |                       |                                |--- the event ------------------->| handler
//!   |                       |<-- 200 {batchItemFailures} ----|<-- POST /response ---------------|
//!   |<-- answer ------------|                                |                                  |
//!   | delete the successes  |                                |                                  |
//! ```
//!
//! What differs from Lambda and from the local Runtime API ([`crate::lambda`]), which the fault suite keeps using:
//! watch cannot stop a running invocation at its timeout, and a process that exits stays down until a saved change
//! (watch does not cold-start a new one): the invoker then waits, holding the batch, rather than burning its
//! receives. A process stopped by a reload while it ran a batch loses that invocation: the batch comes back after its
//! visibility timeout, like an invocation whose process crashed.

mod error;
mod invoker;
mod prebuild;
mod process;
mod saves;
mod status;
mod tally;

pub use error::WatchError;
pub use invoker::{VisibilityHold, WatchInvoker};
pub use prebuild::prebuild;
pub use process::{WatchFunction, WatchSpec};
pub use saves::{Save, Saves, is_source};
pub use status::{AfterSave, Phase, Status};
