//! A fault-injecting reverse proxy for DynamoDB traffic, in front of moto server.
//!
//! It forwards every HTTP/1.1 request (method, path, headers, body) to an upstream and returns the upstream's
//! answer. Requests of the DynamoDB JSON protocol (`X-Amz-Target: DynamoDB_20120810.<Operation>`) may instead get a
//! fault, decided per request by a seeded RNG before anything is forwarded; other traffic (SQS, moto's own API)
//! passes through untouched. [`FaultProxyConfig`] lists the faults and how they are drawn.
//!
//! ```no_run
//! use sqsafe_local::moto::{self, MotoServer};
//! use sqsafe_test_servers::proxy::{FaultProxy, FaultProxyConfig};
//!
//! # async fn run() -> Result<(), Box<dyn std::error::Error>> {
//! let moto = MotoServer::start(&moto::venv_bin()).await?;
//! let proxy = FaultProxy::start(FaultProxyConfig {
//!     seed: 42,
//!     throttle_rate: 0.2,
//!     after_write_500_rate: 0.05,
//!     operations: Some(vec!["PutItem".into(), "UpdateItem".into(), "TransactWriteItems".into()]),
//!     ..FaultProxyConfig::new(moto.endpoint())
//! })
//! .await?;
//!
//! proxy.set_enabled(false);
//! // ... create tables through proxy.endpoint() or moto.endpoint() ...
//! proxy.set_enabled(true);
//! // ... run the functions with AWS_ENDPOINT_URL_DYNAMODB = proxy.endpoint() ...
//! proxy.set_enabled(false);
//! // ... check the final state ...
//! println!("{:?}", proxy.stats());
//! proxy.shutdown().await;
//! moto.shutdown().await;
//! # Ok(()) }
//! ```
//!
//! # What the client sees
//!
//! ```text
//! SDK                         proxy                       moto
//!  | PutItem (Throttle)         |                           |
//!  |--------------------------->| 400 ThrottlingException   |  nothing written
//!  |<---------------------------|                           |
//!  | PutItem (Error500)         |                           |
//!  |--------------------------->| 500 InternalServerError   |  nothing written
//!  |<---------------------------|                           |
//!  | PutItem (AfterWrite500)    |                           |
//!  |--------------------------->|-------------------------->|  written
//!  |                            |<------------------- 200 --|
//!  |<---------------------------| 500 InternalServerError   |
//!  | PutItem, SDK retry         |                           |
//!  |--------------------------->|-------------------------->|  condition fails on
//!  |<---- 400 ConditionalCheckFailedException --------------|  the request's own write
//!  | BatchGetItem (Unprocessed) |                           |
//!  |--------------------------->| 200, no item, every key   |  nothing read
//!  |<---------------------------| in UnprocessedKeys        |
//! ```
//!
//! Faults are drawn in the order requests reach the proxy: sequential clients get the same faults on every run;
//! concurrent ones get the same multiset of draws in an order that depends on scheduling.
//!
//! # Writes that meet their own earlier try
//!
//! The last exchange above is the ambiguity a real region produces (a timeout or a 5xx after the write landed). The
//! proxy counts how often a client met itself that way, so that a test can check the client recognised each case
//! ([`ProxyStats::self_met_writes`]). It remembers each fenced write (an sqsafe idempotency record's claim,
//! completion, release or transaction, identified by table, key and claim token) that it answered with a 500 after the
//! write, and reads the answer to the next request with the same identity: a `ConditionalCheckFailedException` whose
//! old item (`ALL_OLD`) carries the request's own token (or, for a release, no item at all) is a self-met write.
//! Nothing else is parsed.

mod config;
mod error;
mod fault;
mod forward;
mod ownership;
mod server;
mod shared;
mod stats;

pub use config::FaultProxyConfig;
pub use error::Error;
pub use server::{FaultProxy, RunningProxy};
pub use stats::{InjectedFault, ProxyStats, RECENT_FAULTS, SelfMetWrite};
