//! The `charge-payment` consumer: `PaymentRequested` events in, one charge per payment through the payments API.
//! See the README for what it does and how to run it locally.
#![forbid(unsafe_code)]

mod changes;
mod event;
mod handler;
mod payments;

pub use changes::ChargePaymentChanges;
pub use event::{PaymentRequested, PaymentV1};
pub use handler::ChargePayment;
pub use payments::{Charge, PaymentsClient};
