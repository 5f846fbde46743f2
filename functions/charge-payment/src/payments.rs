use std::time::Duration;

use reqwest::StatusCode;
use serde::{Deserialize, Serialize};
use sqsafe::RecordError;
use sqsafe::layers::telemetry::CorrelationId;

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

/// Calls the payments API. Every request carries an `Idempotency-Key` derived from the intent, so the API itself
/// refuses to charge twice even when this consumer's own record could not be completed (a crash after the charge).
#[derive(Debug, Clone)]
pub struct PaymentsClient {
    http: reqwest::Client,
    base_url: String,
}

impl PaymentsClient {
    /// A client for `base_url` with a per-request `timeout`. TLS is rustls with ring.
    pub fn new(base_url: impl Into<String>, timeout: Duration) -> Result<Self, reqwest::Error> {
        // reqwest is built without a default crypto provider (the workspace uses ring, not aws-lc); install it once.
        let _already_installed = rustls::crypto::ring::default_provider().install_default();
        let http = reqwest::Client::builder().timeout(timeout).build()?;
        Ok(Self {
            http,
            base_url: base_url.into(),
        })
    }

    /// `POST /v1/charges`, classified: 2xx charged; 409 (the same key in flight), 429 and 5xx transient; 422 (the
    /// key was used with another payload) and other 4xx permanent; no answer transient.
    pub async fn charge(
        &self,
        payment: &PaymentV1,
        idempotency_key: &str,
        correlation_id: &CorrelationId,
    ) -> Result<Charge, RecordError> {
        let body = serde_json::json!({
            "payment_id": payment.payment_id,
            "amount": payment.amount,
            "currency": payment.currency,
            "customer_id": payment.customer_id,
        });
        let (header, value) = sqsafe::layers::telemetry::correlation::http_header(correlation_id);
        let response = self
            .http
            .post(format!("{}/v1/charges", self.base_url))
            .header("Idempotency-Key", idempotency_key)
            .header(header, value)
            .json(&body)
            .send()
            .await
            .map_err(|e| {
                RecordError::transient("downstream_unreachable", format!("payments API: {e}"))
                    .with_source(e)
            })?;
        let status = response.status();
        let text = response.text().await.unwrap_or_default();
        classify(status, &text)
    }
}

fn classify(status: StatusCode, body: &str) -> Result<Charge, RecordError> {
    let said = || {
        format!(
            "payments API answered {status}: {}",
            body.chars().take(300).collect::<String>()
        )
    };
    match status.as_u16() {
        200..=299 => serde_json::from_str(body).map_err(|e| {
            // The charge may have happened; the retry carries the same Idempotency-Key and gets the replay.
            RecordError::transient("downstream_bad_response", format!("unreadable charge: {e}"))
                .with_source(e)
        }),
        409 => Err(RecordError::transient("downstream_in_flight", said())),
        422 => Err(RecordError::permanent("downstream_key_reused", said())),
        429 | 500..=599 => Err(RecordError::transient("downstream_unavailable", said())),
        _ => Err(RecordError::permanent("downstream_rejected", said())),
    }
}

#[cfg(test)]
mod tests {
    use sqsafe::layers::batch::ErrorClass;

    use super::*;

    #[test]
    fn statuses_are_classified_as_the_api_means_them() {
        let ok = classify(
            StatusCode::CREATED,
            r#"{"id":"ch_1","amount":5,"currency":"EUR","status":"succeeded"}"#,
        );
        assert_eq!(ok.expect("charged").id, "ch_1");
        for (status, kind, class) in [
            (409, "downstream_in_flight", ErrorClass::Transient),
            (422, "downstream_key_reused", ErrorClass::Permanent),
            (429, "downstream_unavailable", ErrorClass::Transient),
            (503, "downstream_unavailable", ErrorClass::Transient),
            (400, "downstream_rejected", ErrorClass::Permanent),
        ] {
            let err =
                classify(StatusCode::from_u16(status).expect("status"), "{}").expect_err("failure");
            assert_eq!((err.kind(), err.class()), (kind, class), "{status}");
        }
        let garbled = classify(StatusCode::OK, "<html>").expect_err("unreadable");
        assert_eq!(garbled.class(), ErrorClass::Transient);
    }
}
