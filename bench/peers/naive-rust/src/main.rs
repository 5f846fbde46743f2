//! The bench's floor: the same effect as `charge-payment` (one `POST /v1/charges` per payment, with an
//! `Idempotency-Key`) and nothing else. No idempotency record, no DLQ, no logs: a redelivered message is charged
//! again, and only the payments API's own key saves the customer. Records run concurrently; a failed charge is
//! reported in `batchItemFailures`.

use std::time::Duration;

use aws_lambda_events::sqs::{BatchItemFailure, SqsBatchResponse, SqsEvent, SqsMessage};
use lambda_runtime::{Error, LambdaEvent, service_fn};
use serde::Deserialize;

#[derive(Deserialize)]
struct Payment {
    payment_id: String,
    tenant: String,
    amount: u64,
    currency: String,
    customer_id: String,
}

#[tokio::main]
async fn main() -> Result<(), Error> {
    let url = std::env::var("PAYMENTS_API_URL").map_err(|_| "PAYMENTS_API_URL is required")?;
    let charges = format!("{}/v1/charges", url.trim_end_matches('/'));
    // reqwest is built without a default crypto provider (the workspace uses ring).
    let _ = rustls::crypto::ring::default_provider().install_default();
    let http = reqwest::Client::builder()
        .timeout(Duration::from_secs(5))
        .build()?;
    lambda_runtime::run(service_fn(|event: LambdaEvent<SqsEvent>| {
        handle(&http, &charges, event.payload)
    }))
    .await
}

async fn handle(
    http: &reqwest::Client,
    url: &str,
    event: SqsEvent,
) -> Result<SqsBatchResponse, Error> {
    let outcomes =
        futures::future::join_all(event.records.iter().map(|r| charge(http, url, r))).await;
    let batch_item_failures = event
        .records
        .iter()
        .zip(outcomes)
        .filter(|(_, outcome)| outcome.is_err())
        .map(|(record, _)| {
            let mut failure = BatchItemFailure::default();
            failure.item_identifier = record.message_id.clone().unwrap_or_default();
            failure
        })
        .collect();
    let mut response = SqsBatchResponse::default();
    response.batch_item_failures = batch_item_failures;
    Ok(response)
}

async fn charge(http: &reqwest::Client, url: &str, record: &SqsMessage) -> Result<(), Error> {
    let payment: Payment = serde_json::from_str(record.body.as_deref().unwrap_or_default())?;
    let body = serde_json::json!({
        "payment_id": payment.payment_id,
        "amount": payment.amount,
        "currency": payment.currency,
        "customer_id": payment.customer_id,
    });
    let response = http
        .post(url)
        .header(
            "Idempotency-Key",
            format!("payment:{}:{}", payment.tenant, payment.payment_id),
        )
        .json(&body)
        .send()
        .await?;
    if response.status().is_success() {
        Ok(())
    } else {
        Err(format!("payments API answered {}", response.status()).into())
    }
}
