//! `charge-payment`: wiring only. The consumer is in `handler.rs`.

#[tokio::main]
async fn main() -> Result<(), sqsafe::Error> {
    sqsafe::run::<charge_payment::ChargePayment>().await
}
