use std::time::Duration;

use serde::{Deserialize, Serialize};
use sqsafe::http::HttpClient;
use sqsafe::{Context, RecordError};

use crate::event::PaymentV1;

/// A charge as the payments API reports it; stored with the idempotency record for replay.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Charge {
    /// The payments API's charge id.
    pub id: String,
    /// Amount charged, minor units.
    pub amount: u64,
    /// Currency.
    pub currency: String,
}

/// Calls the payments API through `sqsafe::http`: every request carries the intent's `Idempotency-Key`, so the API
/// itself refuses to charge twice even when this consumer's own record could not be completed (a crash after the
/// charge); 409 (the same key in flight) comes back, 422 (the key used with another payment) is dead-lettered (the
/// status mapping is `sqsafe::http`'s).
#[derive(Debug, Clone)]
pub struct PaymentsClient {
    http: HttpClient,
}

impl PaymentsClient {
    /// A client for `base_url` with a per-request `timeout`.
    pub fn new(base_url: impl Into<String>, timeout: Duration) -> Result<Self, sqsafe::Error> {
        let http = HttpClient::builder(base_url)
            .name("payments API")
            .timeout(timeout)
            .build()?;
        Ok(Self { http })
    }

    /// `POST /v1/charges` for `payment`, under the record's downstream key and correlation id.
    pub async fn charge(
        &self,
        payment: &PaymentV1,
        cx: &Context<'_>,
    ) -> Result<Charge, RecordError> {
        let body = serde_json::json!({
            "payment_id": payment.payment_id,
            "amount": payment.amount,
            "currency": payment.currency,
            "customer_id": payment.customer_id,
        });
        self.http.post_json("/v1/charges", &body, cx).await?.json()
    }
}
