use aws_lambda_events::sqs::{SqsBatchResponse, SqsEvent};
use lambda_runtime::LambdaEvent;
use sqsafe_batch::{
    Backoff, BatchError, BatchProcessor, Processed, Record, RecordError, SqsDeadLetterQueue,
    SqsVisibility,
};
use sqsafe_idempotency::{DynamoDbStore, FingerprintFields, Idempotency, KeyBuilder};

use crate::config::Config;
use crate::event::{PaymentEvent, PaymentRequested};
use crate::payments::{Charge, PaymentsClient};

/// The consumer's name, in keys, records, DLQ context and metrics.
pub const CONSUMER: &str = "charge-payment";
/// The effect's version: bump it only when charging changes meaning, so old records do not suppress new charges. It
/// is part of every key: a new version re-keys every payment, and a duplicate of a payment charged under the old
/// version is charged again (the payments API's `Idempotency-Key` changes with it). Never bump it for a change of
/// the event's or the result's shape.
pub const EFFECT_VERSION: u32 = 1;

/// The body fields that define a payment, as JSON pointers: the fingerprint reads only these, from the raw body. A
/// build whose event type gains a field (optional or not) therefore fingerprints a retry as the build before it did,
/// and the retry is a replay, not a `payload_mismatch`. The `version` tag is left out on purpose: a version 2 that
/// keeps these fields names the same payment the same way.
pub const INTENT_FIELDS: [&str; 5] = [
    "/tenant",
    "/payment_id",
    "/amount",
    "/currency",
    "/customer_id",
];

/// Charges each `PaymentRequested` once: idempotency record in DynamoDB, `Idempotency-Key` to the payments API.
pub struct ChargePayment {
    idem: Idempotency<DynamoDbStore>,
    payments: PaymentsClient,
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
    /// The HTTP client could not be built.
    #[error("payments client: {0}")]
    Http(#[from] reqwest::Error),
}

impl ChargePayment {
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
        let payments = PaymentsClient::new(&config.payments_api_url, config.payments_timeout)?;
        Ok(Self {
            idem,
            payments,
            processor,
        })
    }

    /// Handles one invocation.
    pub async fn handle(
        &self,
        event: LambdaEvent<SqsEvent>,
    ) -> Result<SqsBatchResponse, BatchError> {
        self.handle_as::<PaymentRequested>(event).await
    }

    /// Handles one invocation reading each body as `E`: what a build of this consumer with another version of the
    /// event type does. Tests use it to show that such a deploy does not turn retries of payments in flight into
    /// mismatches.
    pub async fn handle_as<E: PaymentEvent>(
        &self,
        event: LambdaEvent<SqsEvent>,
    ) -> Result<SqsBatchResponse, BatchError> {
        self.processor
            .handle(event, &|record| self.charge::<E>(record))
            .await
    }

    /// One record: parse and validate (permanent errors before any effect), then charge at most once.
    async fn charge<E: PaymentEvent>(&self, record: Record) -> Result<Processed, RecordError> {
        let payment = record.parse::<E>()?.into_payment();
        payment.validate()?;
        // The fingerprint is taken from the body as sent (its INTENT_FIELDS), never from the typed struct, whose
        // shape changes with the build.
        let body = record.parse::<serde_json::Value>()?;
        let key = KeyBuilder::new(CONSUMER, EFFECT_VERSION)
            .tenant(&payment.tenant)
            .intent("payment", &payment.payment_id)
            .build()?;
        let downstream_key = key.downstream_key();
        let correlation_id = record.correlation_id().clone();
        let (processed, charge) = record
            .run_idempotent(&self.idem, key, &body, || async {
                self.payments
                    .charge(&payment, &downstream_key, &correlation_id)
                    .await
            })
            .await?;
        let charge: Option<Charge> = charge;
        tracing::info!(
            payment_id = %payment.payment_id,
            charge_id = charge.as_ref().map(|c| c.id.as_str()),
            outcome = ?processed,
            "payment handled"
        );
        Ok(processed)
    }
}
