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
        let text = read_capped(response, MAX_RESPONSE_BYTES).await?;
        classify(status, &text)
    }
}

/// The most of a payments API response read: a charge or an error is a few hundred bytes, and a larger answer (a
/// proxy's error page, a misbehaving API) is not held in memory.
pub(crate) const MAX_RESPONSE_BYTES: usize = 64 * 1024;

/// The response's body, read chunk by chunk up to `cap` bytes. A larger one is a transient `downstream_bad_response`
/// (the charge may have happened: the retry carries the same Idempotency-Key and gets the replay).
async fn read_capped(mut response: reqwest::Response, cap: usize) -> Result<String, RecordError> {
    let mut body = Vec::new();
    while let Some(chunk) = response.chunk().await.map_err(|e| {
        RecordError::transient(
            "downstream_unreachable",
            "payments API: the response was cut",
        )
        .with_source(e)
    })? {
        if body.len() + chunk.len() > cap {
            return Err(RecordError::transient(
                "downstream_bad_response",
                format!(
                    "payments API answered {} with a body larger than {cap} bytes",
                    response.status()
                ),
            ));
        }
        body.extend_from_slice(&chunk);
    }
    Ok(String::from_utf8_lossy(&body).into_owned())
}

/// The API's error code (`{"error": "<code>"}`) when it looks like one: a short identifier, never free text.
fn error_code(body: &str) -> Option<String> {
    let doc: serde_json::Value = serde_json::from_str(body).ok()?;
    let code = doc.get("error")?.as_str()?;
    let is_code = !code.is_empty()
        && code.len() <= 64
        && code
            .bytes()
            .all(|b| b.is_ascii_alphabetic() || b == b'_' || b == b'.' || b == b'-');
    is_code.then(|| code.to_owned())
}

/// Classifies an answer. Error messages carry the status and the API's error code only: they go to the logs and
/// the DLQ's context, and the response's text may echo what was sent (a card, a customer).
fn classify(status: StatusCode, body: &str) -> Result<Charge, RecordError> {
    let said = || match error_code(body) {
        Some(code) => format!("payments API answered {status} (error code {code})"),
        None => format!("payments API answered {status}"),
    };
    match status.as_u16() {
        200..=299 => serde_json::from_str(body).map_err(|e| {
            // The charge may have happened; the retry carries the same Idempotency-Key and gets the replay. Only the
            // parser's category and position: its message may quote the body.
            RecordError::transient(
                "downstream_bad_response",
                format!(
                    "unreadable charge ({:?} error at line {} column {})",
                    e.classify(),
                    e.line(),
                    e.column()
                ),
            )
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

    /// An error's message goes to the logs and the DLQ's context: it carries the status and the API's error code,
    /// never the text the API sent back (which may echo the request: a card, a customer).
    #[test]
    fn an_error_carries_the_status_and_code_never_the_response_text() {
        let echo =
            r#"{"error":"card_declined","message":"card 4111111111111111 of cus-7 declined"}"#;
        let err = classify(StatusCode::PAYMENT_REQUIRED, echo).expect_err("declined");
        assert_eq!(
            err.message(),
            "payments API answered 402 Payment Required (error code card_declined)"
        );
        let odd = classify(
            StatusCode::SERVICE_UNAVAILABLE,
            r#"{"error":"4111 1111 1111 1111"}"#,
        )
        .expect_err("503");
        assert_eq!(
            odd.message(),
            "payments API answered 503 Service Unavailable",
            "a code that is not a code is left out"
        );
        let garbled = classify(StatusCode::OK, "4111111111111111").expect_err("unreadable");
        assert!(!garbled.message().contains("4111"), "{}", garbled.message());
    }

    /// A response of `body` from a one-shot HTTP server on loopback.
    async fn response_with(body: String) -> reqwest::Response {
        use tokio::io::{AsyncReadExt, AsyncWriteExt};
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .expect("bind");
        let addr = listener.local_addr().expect("addr");
        tokio::spawn(async move {
            let (mut socket, _) = listener.accept().await.expect("accept");
            let mut request = [0u8; 1024];
            let _ = socket.read(&mut request).await;
            let head = format!(
                "HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: {}\r\n\r\n",
                body.len()
            );
            let _ = socket.write_all(head.as_bytes()).await;
            let _ = socket.write_all(body.as_bytes()).await;
        });
        let _provider = rustls::crypto::ring::default_provider().install_default();
        reqwest::get(format!("http://{addr}/"))
            .await
            .expect("response")
    }

    #[tokio::test]
    async fn a_response_is_read_up_to_its_cap_and_no_further() {
        let small = response_with(r#"{"id":"ch_1"}"#.to_owned()).await;
        assert_eq!(
            read_capped(small, 64).await.expect("read"),
            r#"{"id":"ch_1"}"#
        );
        let huge = response_with("x".repeat(MAX_RESPONSE_BYTES + 1)).await;
        let err = read_capped(huge, MAX_RESPONSE_BYTES)
            .await
            .expect_err("too large");
        assert_eq!(err.kind(), "downstream_bad_response");
        assert_eq!(err.class(), ErrorClass::Transient);
        assert!(err.message().contains("larger than"), "{}", err.message());
    }
}
