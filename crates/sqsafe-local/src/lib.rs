#![doc = include_str!("../README.md")]
#![forbid(unsafe_code)]

pub mod cli;
mod error;
pub mod esm;
pub mod gateway;
pub mod harness;
pub mod lambda;
pub mod moto;
mod send_error;
pub mod stack;
pub mod watch;

pub use error::{Error, Result};
pub use lambda::{FunctionInstance, InstanceStats, InvokeError};
pub use moto::MotoServer;
