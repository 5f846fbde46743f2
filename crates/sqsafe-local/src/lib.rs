#![doc = include_str!("../README.md")]
#![forbid(unsafe_code)]

mod error;
pub mod esm;
mod http_server;
pub mod lambda;
pub mod moto;
pub mod payments;
pub mod proxy;
pub mod stack;
pub mod watch;

pub use error::{Error, Result};
pub use lambda::{FunctionInstance, InstanceStats, InvokeError};
pub use moto::MotoServer;
pub use payments::{
    Charge, Fault, PaymentsApi, PaymentsApiBuilder, ProcessingDelay, RunningPayments, Stats,
};
pub use proxy::{FaultProxy, FaultProxyConfig, ProxyStats, RunningProxy};
