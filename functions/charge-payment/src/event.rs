use serde::{Deserialize, Serialize};
use sqsafe::RecordError;

/// A `PaymentRequested` event, versioned by its `version` tag. An unknown version does not parse: a permanent
/// `bad_payload` error before any side effect.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "version")]
pub enum PaymentRequested {
    /// Version 1.
    #[serde(rename = "1")]
    V1(PaymentV1),
}

impl PaymentRequested {
    /// The payment, whatever the version.
    pub fn payment(&self) -> &PaymentV1 {
        match self {
            PaymentRequested::V1(payment) => payment,
        }
    }
}

/// Version 1 of `PaymentRequested`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PaymentV1 {
    /// The payment's id: names the intent.
    pub payment_id: String,
    /// The tenant, as verified by the publisher.
    pub tenant: String,
    /// Amount in minor units (cents).
    pub amount: u64,
    /// ISO 4217 code.
    pub currency: String,
    /// The customer to charge.
    pub customer_id: String,
}

impl PaymentV1 {
    /// Business validation: a permanent `invalid_payment` error, before any side effect.
    pub fn validate(&self) -> Result<(), RecordError> {
        let invalid = |what: &str| Err(RecordError::permanent("invalid_payment", what.to_owned()));
        if self.amount == 0 {
            return invalid("amount must be positive");
        }
        if self.currency.len() != 3 || !self.currency.bytes().all(|b| b.is_ascii_uppercase()) {
            return invalid("currency must be a three-letter ISO 4217 code");
        }
        if self.customer_id.trim().is_empty() {
            return invalid("customer_id is empty");
        }
        Ok(())
    }
}
