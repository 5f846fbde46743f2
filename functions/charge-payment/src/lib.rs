//! The `charge-payment` consumer: `PaymentRequested` events in, one charge per payment through the payments API.
//! See the README for what it does and how to run it locally.
#![forbid(unsafe_code)]

mod config;
mod event;
mod handler;
mod payments;

pub use config::{Config, ConfigError};
pub use event::{PaymentEvent, PaymentRequested, PaymentV1};
pub use handler::{CONSUMER, ChargePayment, EFFECT_VERSION, INTENT_FIELDS, SetupError};
pub use payments::{Charge, PaymentsClient};
