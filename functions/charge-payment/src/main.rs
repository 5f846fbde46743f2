//! `charge-payment`: wiring only. The consumer is in `handler.rs`.

// `sqsafe::main` picks the Tokio runtime: one thread while Lambda sends one invocation at a time.
fn main() -> Result<(), sqsafe::Error> {
    sqsafe::main::<charge_payment::ChargePayment>()
}
