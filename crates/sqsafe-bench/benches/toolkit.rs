//! Toolkit CPU per message, without I/O: batches of 10 `PaymentRequested` records through sqsafe's batch processor
//! and idempotency layer on the in-memory store, record by record as the façade runs charge-payment (the event
//! parsed from JSON, each body parsed once, validated, keyed, fingerprinted on the intent fields, claimed, the
//! effect, completed, one `record handled` line), on the functions' allocator (`sqsafe::Allocator`), with logs off
//! and with the JSON logs a function writes (at `info`, formatted, written to a sink rather than a pipe). Figures
//! are per batch: divide by 10.
//!
//! `make bench` runs it (`cargo bench -p sqsafe-bench --bench toolkit`) and reports it in bench/RESULTS.md.

use std::time::{Duration, Instant};

use aws_lambda_events::sqs::SqsEvent;
use charge_payment::{Charge, ChargePayment, PaymentRequested};
use criterion::{Criterion, Throughput, criterion_group, criterion_main};
use sqsafe::Consumer;
use sqsafe_batch::{BatchProcessor, Processed, Record, RecordError};
use sqsafe_idempotency::{Fingerprint, FingerprintFields, Idempotency, InMemoryStore, KeyBuilder};
use sqsafe_telemetry::LogConfig;
use tracing_subscriber::layer::SubscriberExt;

// The allocator the deployed functions run with.
#[global_allocator]
static ALLOCATOR: sqsafe::Allocator = sqsafe::Allocator;

/// Batches timed on one store; a new store for the next ones keeps memory flat however long criterion runs.
const BATCHES_PER_STORE: u64 = 500;

struct Toolkit {
    processor: BatchProcessor,
    fields: FingerprintFields,
    runtime: tokio::runtime::Runtime,
    next_payment: u64,
}

impl Toolkit {
    fn new() -> Self {
        let processor = BatchProcessor::builder(ChargePayment::NAME, ChargePayment::EFFECT_VERSION)
            .metrics_output(|_| {})
            .build()
            .expect("processor");
        let fields =
            FingerprintFields::only(ChargePayment::INTENT_FIELDS.iter().map(|f| (*f).to_owned()));
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_time()
            .build()
            .expect("runtime");
        Self {
            processor,
            fields,
            runtime,
            next_payment: 0,
        }
    }

    fn store() -> Idempotency<InMemoryStore> {
        Idempotency::builder(
            InMemoryStore::new(),
            ChargePayment::NAME,
            ChargePayment::EFFECT_VERSION,
        )
        .idempotency_window(Duration::from_secs(30 * 86_400))
        .build()
        .expect("idempotency")
    }

    /// An SQS event of 10 new payments, as the runtime receives it (JSON).
    fn event(&mut self) -> String {
        let records: Vec<serde_json::Value> = (0..10)
            .map(|_| {
                self.next_payment += 1;
                let id = self.next_payment;
                let body = serde_json::json!({
                    "type": "PaymentRequested", "version": "1", "payment_id": format!("p-{id}"), "tenant": "acme",
                    "amount": 1250, "currency": "EUR", "customer_id": "cus-17",
                });
                serde_json::json!({
                    "messageId": format!("00000000-0000-4000-8000-{id:012}"),
                    "receiptHandle": format!("receipt-{id}"),
                    "body": body.to_string(),
                    "attributes": {"ApproximateReceiveCount": "1", "SentTimestamp": "1796025600000"},
                    "messageAttributes": {"correlationId": {"stringValue": format!("corr-{id}"), "dataType": "String"}},
                    "eventSource": "aws:sqs",
                    "eventSourceARN": "arn:aws:sqs:us-east-1:123456789012:charge-payment",
                    "awsRegion": "us-east-1",
                })
            })
            .collect();
        serde_json::json!({ "Records": records }).to_string()
    }

    fn batch(&self, idem: &Idempotency<InMemoryStore>, event: &str) {
        let event: SqsEvent = serde_json::from_str(event).expect("event");
        let handler = |record: Record| run_record(idem, &self.fields, record);
        let invocation = sqsafe_testkit::invocation(event, "bench");
        let response = self
            .runtime
            .block_on(self.processor.handle(invocation, &handler))
            .expect("batch");
        assert!(response.batch_item_failures.is_empty());
    }

    /// Times `iters` batches; `duplicates` runs each batch once untimed first, so the timed run replays it.
    fn time(&mut self, iters: u64, duplicates: bool) -> Duration {
        let mut total = Duration::ZERO;
        let mut done = 0;
        while done < iters {
            let n = (iters - done).min(BATCHES_PER_STORE);
            let idem = Self::store();
            let events: Vec<String> = (0..n).map(|_| self.event()).collect();
            if duplicates {
                for event in &events {
                    self.batch(&idem, event);
                }
            }
            let started = Instant::now();
            for event in &events {
                self.batch(&idem, event);
            }
            total += started.elapsed();
            done += n;
        }
        total
    }
}

/// What sqsafe's façade does for one charge-payment record, with an effect that does no I/O.
async fn run_record(
    idem: &Idempotency<InMemoryStore>,
    fields: &FingerprintFields,
    record: Record,
) -> Result<Processed, RecordError> {
    let (payload, raw): (PaymentRequested, _) = record.parse_with_raw()?;
    ChargePayment::validate(&payload)?;
    let payment = payload.payment();
    let key = KeyBuilder::new(ChargePayment::NAME, ChargePayment::EFFECT_VERSION)
        .tenant(&payment.tenant)
        .intent("payment", &payment.payment_id)
        .build()?;
    record.record_idempotency_key(&key);
    let mut request = idem
        .request_with_fingerprint(key, Fingerprint::of_value(&raw, fields))
        .attempt(record.receive_count())
        .correlation_id(record.correlation_id().as_str());
    if let Some(deadline) = record.deadline() {
        request = request.deadline(deadline);
    }
    let outcome = idem
        .execute(&request, || async {
            tracing::info!(payment_id = %payment.payment_id, charge_id = "ch_bench", "payment charged");
            Ok::<_, RecordError>(Charge {
                id: "ch_bench".to_owned(),
                amount: payment.amount,
                currency: payment.currency.clone(),
            })
        })
        .await?;
    let processed = Processed::of(&outcome);
    tracing::info!(outcome = ?processed, "record handled");
    Ok(processed)
}

fn toolkit(c: &mut Criterion) {
    let mut group = c.benchmark_group("toolkit");
    group.throughput(Throughput::Elements(10));
    let mut toolkit = Toolkit::new();
    for (name, duplicates) in [("fresh", false), ("duplicate", true)] {
        group.bench_function(format!("{name}/no-logs"), |b| {
            b.iter_custom(|iters| toolkit.time(iters, duplicates))
        });
        group.bench_function(format!("{name}/json-logs"), |b| {
            b.iter_custom(|iters| {
                let logs = tracing_subscriber::registry().with(
                    sqsafe_telemetry::layer_with_writer(&LogConfig::default(), std::io::sink),
                );
                tracing::subscriber::with_default(logs, || toolkit.time(iters, duplicates))
            })
        });
    }
    group.finish();
}

criterion_group! {
    name = benches;
    config = Criterion::default()
        .sample_size(20)
        .warm_up_time(Duration::from_secs(1))
        .measurement_time(Duration::from_secs(4));
    targets = toolkit
}
criterion_main!(benches);
