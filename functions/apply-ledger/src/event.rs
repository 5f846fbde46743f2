use serde::{Deserialize, Serialize};
use sqsafe::RecordError;

/// A `LedgerEntryRequested` event, versioned by its `version` tag. Published to a FIFO queue with the account as the
/// message group, so one account's entries apply in order.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "version")]
pub enum LedgerEntryRequested {
    /// Version 1.
    #[serde(rename = "1")]
    V1(LedgerEntryV1),
}

impl LedgerEntryRequested {
    /// The entry, whatever the version.
    pub fn entry(&self) -> &LedgerEntryV1 {
        match self {
            LedgerEntryRequested::V1(entry) => entry,
        }
    }
}

/// Version 1 of `LedgerEntryRequested`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct LedgerEntryV1 {
    /// The entry's id: names the intent.
    pub entry_id: String,
    /// The account.
    pub account_id: String,
    /// The tenant, as verified by the publisher.
    pub tenant: String,
    /// Minor units; positive credits the account, negative debits it.
    pub amount: i64,
    /// ISO 4217 code; an account holds one currency.
    pub currency: String,
}

impl LedgerEntryV1 {
    /// Business validation: a permanent `invalid_entry` error before any side effect.
    pub fn validate(&self) -> Result<(), RecordError> {
        let invalid = |what: &str| Err(RecordError::permanent("invalid_entry", what.to_owned()));
        if self.amount == 0 {
            return invalid("amount must not be zero");
        }
        if self.currency.len() != 3 || !self.currency.bytes().all(|b| b.is_ascii_uppercase()) {
            return invalid("currency must be a three-letter ISO 4217 code");
        }
        if self.account_id.trim().is_empty() || self.entry_id.trim().is_empty() {
            return invalid("account_id and entry_id must not be empty");
        }
        Ok(())
    }
}
