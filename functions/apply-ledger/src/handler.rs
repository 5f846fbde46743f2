//! Applies each `LedgerEntryRequested` once: the entry item, the balance update and the idempotency record commit in
//! one DynamoDB transaction. FIFO order per account comes from the queue (group = account).

use std::collections::HashMap;

use aws_sdk_dynamodb::types::{
    AttributeValue, Put, ReturnValuesOnConditionCheckFailure, TransactWriteItem, Update,
};
use serde::{Deserialize, Serialize};
use sqsafe::{Consumer, Context, Effect, Intent, RecordError, Setup};

use crate::event::{LedgerEntryRequested, LedgerEntryV1};

/// Sort key of an account's balance item.
pub const BALANCE_SK: &str = "BALANCE";

/// Sort key of an entry item.
pub fn entry_sk(entry_id: &str) -> String {
    format!("ENTRY#{entry_id}")
}

/// What the record keeps for replay.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct AppliedEntry {
    /// The entry.
    pub entry_id: String,
    /// The account.
    pub account_id: String,
    /// The amount applied.
    pub amount: i64,
}

/// Applies ledger entries into `LEDGER_TABLE`.
#[derive(Debug, Clone)]
pub struct ApplyLedger {
    ledger_table: String,
}

impl Consumer for ApplyLedger {
    const NAME: &'static str = "apply-ledger";
    // Part of every key: bump it only when applying an entry changes meaning (a new version applies duplicates of
    // entries applied under the old one again); never for a change of the event's or the result's shape.
    const EFFECT_VERSION: u32 = 1;
    // The body fields that define a ledger entry; the `version` tag is left out on purpose.
    const INTENT_FIELDS: &'static [&'static str] = &[
        "/tenant",
        "/entry_id",
        "/account_id",
        "/amount",
        "/currency",
    ];
    type Payload = LedgerEntryRequested;
    type Output = AppliedEntry;

    /// `LEDGER_TABLE` (required).
    fn new(setup: &Setup) -> Result<Self, sqsafe::Error> {
        Ok(Self {
            ledger_table: setup.env.required("LEDGER_TABLE")?,
        })
    }

    fn intent(event: &LedgerEntryRequested) -> Intent {
        let entry = event.entry();
        Intent::new(&entry.tenant, "ledger-entry", &entry.entry_id)
    }

    fn validate(event: &LedgerEntryRequested) -> Result<(), RecordError> {
        event.entry().validate()
    }

    /// Writes: the entry item and the balance update, committed with the entry's record.
    fn effect<'a>(
        &'a self,
        event: LedgerEntryRequested,
        cx: &'a Context<'a>,
    ) -> Result<Effect<'a, AppliedEntry>, RecordError> {
        let (writes, applied) = self.entry_writes(event.entry(), cx)?;
        Ok(Effect::writes(writes, applied)
            .refused(move |index, item| self.entry_refused(event.entry(), index, item)))
    }
}

impl ApplyLedger {
    /// The writes of one entry and what its record keeps.
    pub fn entry_writes(
        &self,
        entry: &LedgerEntryV1,
        cx: &Context<'_>,
    ) -> Result<(Vec<TransactWriteItem>, AppliedEntry), RecordError> {
        let items = self.write_items(
            entry,
            cx.idempotency_key().as_str(),
            cx.correlation_id().as_str(),
        )?;
        let applied = AppliedEntry {
            entry_id: entry.entry_id.clone(),
            account_id: entry.account_id.clone(),
            amount: entry.amount,
        };
        Ok((items, applied))
    }

    /// Why one of the entry's writes was refused: a permanent error, nothing written.
    pub fn entry_refused(
        &self,
        entry: &LedgerEntryV1,
        index: usize,
        item: Option<&HashMap<String, AttributeValue>>,
    ) -> RecordError {
        match index {
            0 => RecordError::permanent(
                "entry_conflict",
                format!(
                    "entry {} exists without its idempotency record",
                    entry.entry_id
                ),
            ),
            _ => refusal(entry, item),
        }
    }

    /// The entry item and the balance update; both conditional.
    fn write_items(
        &self,
        entry: &LedgerEntryV1,
        key: &str,
        correlation_id: &str,
    ) -> Result<Vec<TransactWriteItem>, RecordError> {
        let s = |v: &str| AttributeValue::S(v.to_owned());
        let n = |v: i64| AttributeValue::N(v.to_string());
        let build = |e: aws_sdk_dynamodb::error::BuildError| RecordError::permanent("internal", e);
        let put = Put::builder()
            .table_name(&self.ledger_table)
            .item("pk", s(&entry.account_id))
            .item("sk", s(&entry_sk(&entry.entry_id)))
            .item("amount", n(entry.amount))
            .item("currency", s(&entry.currency))
            .item("idempotency_key", s(key))
            .item("correlation_id", s(correlation_id))
            .condition_expression("attribute_not_exists(sk)")
            .build()
            .map_err(build)?;
        let update = Update::builder()
            .table_name(&self.ledger_table)
            .key("pk", s(&entry.account_id))
            .key("sk", s(BALANCE_SK))
            .expression_attribute_values(":currency", s(&entry.currency))
            .expression_attribute_values(":entry", s(&entry.entry_id))
            .return_values_on_condition_check_failure(ReturnValuesOnConditionCheckFailure::AllOld);
        let update = if entry.amount > 0 {
            update
                .update_expression(
                    "SET balance = if_not_exists(balance, :zero) + :amount, currency = if_not_exists(currency, :currency), \
                     last_entry = :entry",
                )
                .condition_expression("attribute_not_exists(currency) OR currency = :currency")
                .expression_attribute_values(":zero", n(0))
                .expression_attribute_values(":amount", n(entry.amount))
        } else {
            // A debit needs the account to exist, in this currency, with enough balance.
            update
                .update_expression("SET balance = balance - :debit, last_entry = :entry")
                .condition_expression("currency = :currency AND balance >= :debit")
                .expression_attribute_values(":debit", n(-entry.amount))
        };
        Ok(vec![
            TransactWriteItem::builder().put(put).build(),
            TransactWriteItem::builder()
                .update(update.build().map_err(build)?)
                .build(),
        ])
    }
}

/// Why the balance update was refused, from the balance item as it was: a permanent error, nothing written. The
/// message names the account and the entry, never the balance: it goes to the logs and the DLQ's context.
fn refusal(
    entry: &LedgerEntryV1,
    balance: Option<&HashMap<String, AttributeValue>>,
) -> RecordError {
    let currency = balance
        .and_then(|b| b.get("currency"))
        .and_then(|v| v.as_s().ok());
    match currency {
        Some(c) if *c != entry.currency => RecordError::permanent(
            "currency_mismatch",
            format!(
                "account {} holds {c}, the entry is in {}",
                entry.account_id, entry.currency
            ),
        ),
        _ => RecordError::permanent(
            "insufficient_funds",
            format!(
                "account {} {} cannot cover a debit of {}",
                entry.account_id,
                if balance.is_some() {
                    "(its balance)"
                } else {
                    "(no account yet)"
                },
                -entry.amount
            ),
        ),
    }
}
