//! The consumers the demo compares with sqsafe, in-process: a naive one, and one that only sends a downstream
//! `Idempotency-Key`. Both answer SQS events like a Lambda handler with partial batch failures would.

use serde_json::{Value, json};
use sqsafe_idempotency::KeyBuilder;
use sqsafe_local::esm::Invoker;

/// How a consumer protects its effect.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Protection {
    /// Nothing: a fresh `Idempotency-Key` per attempt, so the payments API cannot recognise a duplicate.
    Naive,
    /// A downstream key derived from the payment (as sqsafe derives it), but no idempotency record and no DLQ context.
    DownstreamKey,
}

/// An in-process consumer of `PaymentRequested` events.
pub struct InProcessConsumer {
    protection: Protection,
    http: reqwest::Client,
    payments_api: String,
}

impl InProcessConsumer {
    /// A consumer calling the payments API at `payments_api`.
    ///
    /// # Panics
    /// When the HTTP client cannot be built (no TLS provider can be installed).
    pub fn new(protection: Protection, payments_api: String) -> Self {
        let _ = rustls::crypto::ring::default_provider().install_default();
        let http = reqwest::Client::builder().build().expect("HTTP client");
        Self {
            protection,
            http,
            payments_api,
        }
    }

    async fn charge(&self, body: &str) -> Result<(), String> {
        let payment: Value = serde_json::from_str(body).map_err(|e| format!("bad body: {e}"))?;
        let field = |name: &str| {
            payment
                .get(name)
                .cloned()
                .ok_or_else(|| format!("no {name}"))
        };
        let payment_id = field("payment_id")?;
        let key = match self.protection {
            Protection::Naive => uuid::Uuid::new_v4().to_string(),
            Protection::DownstreamKey => {
                let tenant = field("tenant")?;
                KeyBuilder::new("charge-payment", 1)
                    .tenant(tenant.as_str().unwrap_or_default())
                    .intent("payment", payment_id.as_str().unwrap_or_default())
                    .build()
                    .map_err(|e| e.to_string())?
                    .downstream_key()
            }
        };
        let request = json!({
            "payment_id": payment_id,
            "amount": field("amount")?,
            "currency": field("currency")?,
            "customer_id": field("customer_id")?,
        });
        let response = self
            .http
            .post(format!("{}/v1/charges", self.payments_api))
            .header("Idempotency-Key", key)
            .json(&request)
            .send()
            .await
            .map_err(|e| e.to_string())?;
        if response.status().is_success() {
            Ok(())
        } else {
            Err(format!("payments API {}", response.status()))
        }
    }
}

impl Invoker for InProcessConsumer {
    async fn invoke(&mut self, event: Value) -> Result<Value, String> {
        let mut failures = Vec::new();
        for record in event["Records"].as_array().cloned().unwrap_or_default() {
            let id = record["messageId"].as_str().unwrap_or_default().to_owned();
            if self
                .charge(record["body"].as_str().unwrap_or_default())
                .await
                .is_err()
            {
                failures.push(json!({ "itemIdentifier": id }));
            }
        }
        Ok(json!({ "batchItemFailures": failures }))
    }
}
