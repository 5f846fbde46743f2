use aws_lambda_events::sqs::{SqsBatchResponse, SqsEvent};
use aws_sdk_dynamodb::types::{
    AttributeValue, Put, ReturnValuesOnConditionCheckFailure, TransactWriteItem, Update,
};
use lambda_runtime::LambdaEvent;
use serde::{Deserialize, Serialize};
use sqsafe_batch::{
    Backoff, BatchError, BatchProcessor, Processed, Record, RecordError, SqsDeadLetterQueue,
    SqsVisibility,
};
use sqsafe_idempotency::{
    DynamoDbStore, FingerprintFields, Idempotency, KeyBuilder, ReplaySource, TransactOutcome,
};

use crate::config::Config;
use crate::event::{LedgerEntryRequested, LedgerEntryV1, LedgerEvent};

/// The consumer's name, in keys, records, DLQ context and metrics.
pub const CONSUMER: &str = "apply-ledger";
/// The effect's version: part of every key. Bump it only when applying an entry changes meaning; a new version
/// re-keys every entry, so a duplicate of an entry applied under the old version would be applied again. Never bump
/// it for a change of the event's or the result's shape.
pub const EFFECT_VERSION: u32 = 1;

/// The body fields that define a ledger entry, as JSON pointers: the fingerprint reads only these, from the raw
/// body. A build whose event type gains a field (optional or not) therefore fingerprints a retry as the build before
/// it did, and the retry is a replay, not a `payload_mismatch`. The `version` tag is left out on purpose.
pub const INTENT_FIELDS: [&str; 5] = [
    "/tenant",
    "/entry_id",
    "/account_id",
    "/amount",
    "/currency",
];
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

/// Applies ledger entries: the entry item, the balance update and the idempotency record in one transaction.
pub struct ApplyLedger {
    idem: Idempotency<DynamoDbStore>,
    ledger_table: String,
    processor: BatchProcessor,
}

/// A setting that cannot work.
#[derive(Debug, thiserror::Error)]
pub enum SetupError {
    /// The idempotency layer refused its settings.
    #[error(transparent)]
    Idempotency(#[from] sqsafe_idempotency::Error),
    /// The batch processor refused its settings.
    #[error(transparent)]
    Batch(#[from] BatchError),
}

impl ApplyLedger {
    /// Wires the consumer from its configuration and AWS clients.
    pub fn new(
        config: &Config,
        dynamodb: aws_sdk_dynamodb::Client,
        sqs: aws_sdk_sqs::Client,
    ) -> Result<Self, SetupError> {
        let store = DynamoDbStore::builder(dynamodb, &config.idempotency_table).build()?;
        let idem = Idempotency::builder(store, CONSUMER, EFFECT_VERSION)
            .record_ttl(config.idempotency_window)
            .fingerprint_fields(FingerprintFields::only(INTENT_FIELDS))
            .build()?;
        let processor = BatchProcessor::builder(CONSUMER, EFFECT_VERSION)
            .max_attempts(config.max_attempts)
            .dead_letter_queue(SqsDeadLetterQueue::new(sqs.clone(), &config.dlq_url))
            .visibility(SqsVisibility::new(sqs, &config.queue_url))
            .backoff(Backoff::new(config.backoff_base, config.backoff_max)?)
            .visibility_heartbeat(config.visibility_heartbeat)
            .build()?;
        Ok(Self {
            idem,
            ledger_table: config.ledger_table.clone(),
            processor,
        })
    }

    /// Handles one invocation. FIFO order per account comes from the batch processor (group = account).
    pub async fn handle(
        &self,
        event: LambdaEvent<SqsEvent>,
    ) -> Result<SqsBatchResponse, BatchError> {
        self.handle_as::<LedgerEntryRequested>(event).await
    }

    /// Handles one invocation reading each body as `E`: what a build of this consumer with another version of the
    /// event type does. Tests use it to show that such a deploy does not turn retries of entries in flight into
    /// mismatches.
    pub async fn handle_as<E: LedgerEvent>(
        &self,
        event: LambdaEvent<SqsEvent>,
    ) -> Result<SqsBatchResponse, BatchError> {
        self.processor
            .handle(event, &|record| self.apply::<E>(record))
            .await
    }

    async fn apply<E: LedgerEvent>(&self, record: Record) -> Result<Processed, RecordError> {
        let entry = record.parse::<E>()?.into_entry();
        entry.validate()?;
        // The fingerprint is taken from the body as sent (its INTENT_FIELDS), never from the typed struct, whose
        // shape changes with the build.
        let body = record.parse::<serde_json::Value>()?;
        let key = KeyBuilder::new(CONSUMER, EFFECT_VERSION)
            .tenant(&entry.tenant)
            .intent("ledger-entry", &entry.entry_id)
            .build()?;
        record.record_idempotency_key(&key);
        let request = record.idempotency_request(&self.idem, key.clone(), &body)?;
        let applied = AppliedEntry {
            entry_id: entry.entry_id.clone(),
            account_id: entry.account_id.clone(),
            amount: entry.amount,
        };
        let items = self.effect(&entry, key.as_str(), record.correlation_id().as_str())?;
        match self.idem.transact(&request, items, &applied).await? {
            TransactOutcome::Committed => Ok(Processed::Applied),
            TransactOutcome::Replayed {
                source: ReplaySource::Store,
                ..
            } => Ok(Processed::Replayed),
            TransactOutcome::Replayed {
                source: ReplaySource::Cache,
                ..
            } => Ok(Processed::SkippedByCache),
            TransactOutcome::EffectRefused { index: 0, .. } => Err(RecordError::permanent(
                "entry_conflict",
                format!(
                    "entry {} exists without its idempotency record",
                    entry.entry_id
                ),
            )),
            TransactOutcome::EffectRefused { item, .. } => Err(refusal(&entry, item.as_ref())),
        }
    }

    /// The entry item and the balance update; both conditional.
    fn effect(
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

/// Why the balance update was refused, from the balance item as it was: a permanent error, nothing written.
fn refusal(
    entry: &LedgerEntryV1,
    balance: Option<&std::collections::HashMap<String, AttributeValue>>,
) -> RecordError {
    let currency = balance
        .and_then(|b| b.get("currency"))
        .and_then(|v| v.as_s().ok());
    let amount = balance
        .and_then(|b| b.get("balance"))
        .and_then(|v| v.as_n().ok());
    match (currency, amount) {
        (Some(c), _) if *c != entry.currency => RecordError::permanent(
            "currency_mismatch",
            format!(
                "account {} holds {c}, the entry is in {}",
                entry.account_id, entry.currency
            ),
        ),
        (_, balance) => RecordError::permanent(
            "insufficient_funds",
            format!(
                "account {} balance {} cannot cover a debit of {}",
                entry.account_id,
                balance.map_or("0 (no account yet)", String::as_str),
                -entry.amount
            ),
        ),
    }
}
