#![doc = include_str!("../README.md")]
#![forbid(unsafe_code)]
// The README links every module; without the test servers' features two of them are not compiled.
#![cfg_attr(
    not(all(feature = "payments-api", feature = "fault-proxy")),
    allow(rustdoc::broken_intra_doc_links)
)]

pub mod cli;
mod error;
pub mod esm;
pub mod lambda;
pub mod moto;
#[cfg(feature = "payments-api")]
pub mod payments;
#[cfg(feature = "fault-proxy")]
pub mod proxy;
pub mod stack;
pub mod watch;

pub use error::{Error, Result};
pub use lambda::{FunctionInstance, InstanceStats, InvokeError};
pub use moto::MotoServer;
#[cfg(feature = "payments-api")]
pub use payments::{
    Charge, Fault, PaymentsApi, PaymentsApiBuilder, ProcessingDelay, RunningPayments, Stats,
};
#[cfg(feature = "fault-proxy")]
pub use proxy::{FaultProxy, FaultProxyConfig, ProxyStats, RunningProxy};
