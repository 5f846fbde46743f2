use aws_lambda_events::sqs::{SqsBatchResponse, SqsEvent};
use lambda_runtime::LambdaEvent;
use sqsafe_batch::{
    BatchError, BatchProcessor, Processed, Record, RecordError, SqsDeadLetterQueue,
};
use sqsafe_idempotency::{DynamoDbStore, Idempotency, KeyBuilder};

use crate::config::Config;
use crate::event::PaymentRequested;
use crate::payments::{Charge, PaymentsClient};

/// The consumer's name, in keys, records, DLQ context and metrics.
pub const CONSUMER: &str = "charge-payment";
/// The effect's version: bump it when charging changes meaning, so old records do not suppress new charges.
pub const EFFECT_VERSION: u32 = 1;

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
            .build()?;
        let processor = BatchProcessor::builder(CONSUMER, EFFECT_VERSION)
            .max_attempts(config.max_attempts)
            .dead_letter_queue(SqsDeadLetterQueue::new(sqs, &config.dlq_url))
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
        self.processor
            .handle(event, &|record| self.charge(record))
            .await
    }

    /// One record: parse and validate (permanent errors before any effect), then charge at most once.
    async fn charge(&self, record: Record) -> Result<Processed, RecordError> {
        let PaymentRequested::V1(payment) = record.parse::<PaymentRequested>()?;
        payment.validate()?;
        let key = KeyBuilder::new(CONSUMER, EFFECT_VERSION)
            .tenant(&payment.tenant)
            .intent("payment", &payment.payment_id)
            .build()?;
        let downstream_key = key.downstream_key();
        let correlation_id = record.correlation_id().clone();
        let (processed, charge) = record
            .run_idempotent(&self.idem, key, &payment, || async {
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
