//! `charge-payment`: wiring only (configuration, clients, runtime). The logic is in `handler.rs`.

use charge_payment::{ChargePayment, Config};
use lambda_runtime::{Error, LambdaEvent, service_fn};

#[tokio::main]
async fn main() -> Result<(), Error> {
    sqsafe_telemetry::init()?;
    let config = Config::from_env()?;
    let aws = sqsafe_aws::load().await;
    let consumer = ChargePayment::new(
        &config,
        aws_sdk_dynamodb::Client::new(&aws),
        aws_sdk_sqs::Client::new(&aws),
    )?;
    let consumer = &consumer;
    lambda_runtime::run(service_fn(move |event: LambdaEvent<_>| async move {
        consumer.handle(event).await
    }))
    .await
}
