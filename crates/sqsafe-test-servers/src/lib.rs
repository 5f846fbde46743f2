#![doc = include_str!("../README.md")]
#![forbid(unsafe_code)]

mod error;
pub mod payments;
pub mod proxy;

pub use error::{Error, Result};
pub use payments::{
    Charge, Fault, PaymentsApi, PaymentsApiBuilder, ProcessingDelay, RunningPayments, Stats,
};
pub use proxy::{FaultProxy, FaultProxyConfig, ProxyStats, RunningProxy};
