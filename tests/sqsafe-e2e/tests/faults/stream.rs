//! The stream runs: charge-payment fed a Kinesis stream of two shards, and charge-payment-changes (the same charge,
//! its payload a `Change<PaymentV1>`) fed a payment requests table's DynamoDB stream (one shard in moto), each as
//! Lambda's stream poller feeds them (`sqsafe_local::esm::StreamMapping`: a batch of up to 10 records from the
//! checkpoint, the checkpoint moved to the lowest sequence number the answer names, a failed invocation bisected and
//! retried, no retry limit), under the suite's faults: SIGKILLs at the crash points, the DynamoDB proxy's throttles
//! and 500s, the payments API's 503s before and after charging, payments slower than the function's timeout.
//!
//! The records: payments of 8 customers (Kinesis: the partition keys), some published again later (Kinesis: the same
//! record; DynamoDB: the item written again with a new `put` attribute, a modification of the same payment), a few
//! poison records (Kinesis: not a payment; DynamoDB: an item whose amount is not a number) and a few payments
//! published again with another amount (a payload mismatch), among the others. The verdict, from the payments API's
//! ledger, the failure queue and the idempotency table:
//!
//! - every payment charged once (`charged twice` and `lost` both 0), with its own amount;
//! - per customer, the charges in the order of the customer's records (`out of order` 0): no record ran ahead of one
//!   that had failed before it;
//! - every poison record and every mismatch in the failure queue with its content and its place in the stream
//!   (Kinesis: shard, sequence number, partition key; DynamoDB: stream, sequence number, event id), and nothing else
//!   there;
//! - no record left IN_PROGRESS, no batch given up on.

use std::collections::{BTreeMap, BTreeSet};
use std::time::{Duration, Instant};

use aws_sdk_dynamodb::types::{AttributeValue, StreamViewType};
use serde_json::json;
use sqsafe_e2e::harness::{build_functions, context_field, read_all};
use sqsafe_e2e::workspace_root;
use sqsafe_local::esm::{Delivered, StreamMapping, StreamMappingConfig};
use sqsafe_local::lambda::{FunctionInstance, FunctionSpec, INIT_TIMEOUT, InstanceStats};
use sqsafe_testkit::{create_streamed_table, create_table, unique_name};

use super::{
    FUNCTION_TIMEOUT, PipelineOptions, answers_after_the_deadline, heavy, in_process_payments,
    local_aws, seed, sum_faults,
};

/// The Kinesis stream's shards, each with its own mapping and function instance.
const SHARDS: i32 = 2;
/// The customers: the records' partition keys.
const CUSTOMERS: usize = 8;
/// A shard is stalled when its checkpoint has not moved for this long: a few times the longest wait the protocol has
/// (a crashed claim's lease, the function's timeout and the takeover margin, about 6 s).
const STALL: Duration = Duration::from_secs(90);
/// The pause before handing the same records over again when the checkpoint did not move (Lambda backs off too).
const RETRY_PAUSE: Duration = Duration::from_millis(200);

/// Where the records go.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Source {
    /// A Kinesis stream of [`SHARDS`] shards, records keyed by customer; charge-payment reads them.
    Kinesis,
    /// The DynamoDB stream of a payment requests table (`payment_id` its key); charge-payment-changes reads it.
    Table,
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn charge_payment_on_a_kinesis_stream_applies_every_record_once_in_order_under_faults() {
    stream_run(Source::Kinesis, if heavy() { 1000 } else { 240 }).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn charge_payment_on_a_dynamodb_stream_applies_every_change_once_in_order_under_faults() {
    stream_run(Source::Table, if heavy() { 600 } else { 160 }).await;
}

/// What one shard's mapping did.
#[derive(Debug, Default)]
struct ShardRun {
    shard: String,
    invocations: u64,
    done: u64,
    retried_from: u64,
    failed: u64,
    given_up: Vec<String>,
    stalled: Option<String>,
    instance: Option<InstanceStats>,
}

/// What a record put on the stream is.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Put {
    /// A payment (published again: the same payment once more).
    Payment { id: String, amount: u64 },
    /// A payment id already published, with another amount: a payload mismatch.
    Mismatch { id: String, amount: u64 },
    /// Not a payment.
    Poison { n: usize },
}

impl Put {
    /// The record's content as it is put: Kinesis data, or the item's attributes.
    fn kinesis_data(&self, customer: &str) -> String {
        let body = |id: &str, amount: u64| {
            json!({"type": "PaymentRequested", "version": "1", "payment_id": id, "tenant": "acme",
                   "amount": amount, "currency": "EUR", "customer_id": customer})
            .to_string()
        };
        match self {
            Put::Payment { id, amount } | Put::Mismatch { id, amount } => body(id, *amount),
            Put::Poison { n } => format!("not a payment #{n}"),
        }
    }

    /// The item, with `put` (the put's place) so that each put changes the item and makes a stream record.
    fn item(&self, customer: &str, put: usize) -> BTreeMap<String, AttributeValue> {
        let (id, amount) = match self {
            Put::Payment { id, amount } | Put::Mismatch { id, amount } => {
                (id.clone(), AttributeValue::N(amount.to_string()))
            }
            Put::Poison { n } => (
                format!("poison-{n}"),
                AttributeValue::S("not a number".to_owned()),
            ),
        };
        BTreeMap::from([
            ("payment_id".to_owned(), AttributeValue::S(id)),
            ("tenant".to_owned(), AttributeValue::S("acme".to_owned())),
            ("amount".to_owned(), amount),
            ("currency".to_owned(), AttributeValue::S("EUR".to_owned())),
            (
                "customer_id".to_owned(),
                AttributeValue::S(customer.to_owned()),
            ),
            ("put".to_owned(), AttributeValue::N(put.to_string())),
        ])
    }

    /// How its letter in the failure queue is told apart ([`letter_id`]), when it must have one.
    fn letter_id(&self, source: Source, customer: &str) -> Option<String> {
        match (self, source) {
            (Put::Payment { .. }, _) => None,
            (_, Source::Kinesis) => Some(self.kinesis_data(customer)),
            (Put::Mismatch { id, amount }, Source::Table) => Some(format!("{id}:{amount}")),
            (Put::Poison { n }, Source::Table) => Some(format!("poison-{n}:not a number")),
        }
    }
}

/// A letter's identity, from its body: Kinesis, the record's data as it is; DynamoDB, the new image's payment id and
/// amount (the body is the change, as the consumer read it).
fn letter_id(source: Source, body: &str) -> String {
    match source {
        Source::Kinesis => body.to_owned(),
        Source::Table => {
            let change: serde_json::Value = serde_json::from_str(body).unwrap_or_default();
            let image = &change["newImage"];
            let amount = match &image["amount"] {
                serde_json::Value::String(s) => s.clone(),
                other => other.to_string(),
            };
            format!(
                "{}:{amount}",
                image["payment_id"].as_str().unwrap_or_default()
            )
        }
    }
}

/// Each customer's payments (id, amount), in the order they were first published.
type Published = BTreeMap<String, Vec<(String, u64)>>;

/// The records, in the order they are put (each with its customer): each customer's payments in turn, some published
/// again later, a poison record or a mismatch now and then. With the payments published, per customer, in order.
fn plan(rng: &mut fastrand::Rng, payments_n: usize) -> (Vec<(String, Put)>, Published) {
    let mut puts: Vec<(String, Put)> = Vec::new();
    let mut published = Published::new();
    for i in 0..payments_n {
        let customer = format!("cus-{}", rng.usize(..CUSTOMERS));
        let id = format!("s-{i}");
        let amount = 100 + (i as u64 % 50);
        puts.push((
            customer.clone(),
            Put::Payment {
                id: id.clone(),
                amount,
            },
        ));
        published
            .entry(customer.clone())
            .or_default()
            .push((id, amount));
        let earlier = &published[&customer];
        if rng.f64() < 0.2 {
            // A producer's retry: an earlier payment of this customer, once more.
            let (id, amount) = earlier[rng.usize(..earlier.len())].clone();
            puts.push((customer.clone(), Put::Payment { id, amount }));
        }
        if rng.f64() < 0.02 {
            puts.push((customer.clone(), Put::Poison { n: i }));
        }
        if rng.f64() < 0.02 {
            let (id, amount) = &earlier[rng.usize(..earlier.len())];
            puts.push((
                customer.clone(),
                Put::Mismatch {
                    id: id.clone(),
                    amount: amount + 1000,
                },
            ));
        }
    }
    (puts, published)
}

async fn stream_run(source: Source, payments_n: usize) {
    let started = Instant::now();
    let seed = seed();
    let (what, salt) = match source {
        Source::Kinesis => (
            format!("charge-payment on a Kinesis stream, {SHARDS} shards"),
            0x5712_EA4D,
        ),
        Source::Table => (
            "charge-payment-changes on a DynamoDB stream".to_owned(),
            0xC4A6_6E5D,
        ),
    };
    println!(
        "fault injection ({what}): seed {seed} (replay with SQSAFE_FAULT_SEED={seed}), {payments_n} payments"
    );
    let mut rng = fastrand::Rng::with_seed(seed ^ salt);

    let options = PipelineOptions::claim();
    let local = local_aws(seed, &options).await;
    let payments_table = unique_name("payments-keys");
    create_table(&local.dynamodb, &payments_table, "pk", None).await;
    // Now and then slower than the function's timeout: the invocation is cut and its batch comes again.
    let payments = in_process_payments(&local, seed, payments_table, seed ^ 0x510E, 4_500).await;
    let prefix = match source {
        Source::Kinesis => "faults-stream",
        Source::Table => "faults-changes",
    };
    let p = local
        .pipeline(
            prefix,
            BTreeMap::from([("PaymentsApiUrl".to_owned(), payments.base_url())]),
            options,
        )
        .await;
    let config = sqsafe_testkit::sdk_config_at(&p.moto.endpoint()).await;

    let (puts, published) = plan(&mut rng, payments_n);
    let count = |f: fn(&Put) -> bool| puts.iter().filter(|(_, put)| f(put)).count();
    println!(
        "{} records put: {payments_n} payments, {} published again, {} poison, {} mismatched",
        puts.len(),
        count(|p| matches!(p, Put::Payment { .. })) - payments_n,
        count(|p| matches!(p, Put::Poison { .. })),
        count(|p| matches!(p, Put::Mismatch { .. })),
    );
    let must_letter: BTreeSet<String> = puts
        .iter()
        .filter_map(|(customer, put)| put.letter_id(source, customer))
        .collect();

    let (function, binary) = match source {
        Source::Kinesis => ("charge-payment", "charge-payment"),
        Source::Table => ("charge-payment-changes", "charge-payment-changes"),
    };
    let binaries = build_functions(true);
    let log_dir = workspace_root().join(format!("target/fault-logs/{}-stream", p.prefix));
    let _ = std::fs::remove_dir_all(&log_dir);
    let instance = |i: usize| {
        let spec = FunctionSpec {
            name: function.to_owned(),
            binary: binaries.join(binary),
            // charge-payment's settings (the payments API, the idempotency table, the failure queue): the changes'
            // consumer reads the same ones.
            env: p.function_env("charge-payment", seed.wrapping_add(i as u64)),
            timeout: FUNCTION_TIMEOUT,
            log_dir: log_dir.clone(),
            init_timeout: INIT_TIMEOUT,
        };
        async move { FunctionInstance::start(spec, i).await.expect("instance") }
    };
    let mapping_config = StreamMappingConfig {
        batch_size: 10,
        maximum_retry_attempts: None,
        bisect_on_function_error: true,
        on_failure_queue: None,
    };

    // One mapping and one function instance per shard, side by side.
    let mut mappings = Vec::new();
    let mut shards: Vec<String> = Vec::new();
    match source {
        Source::Kinesis => {
            let kinesis = aws_sdk_kinesis::Client::new(&config);
            let stream = unique_name("faults-payments");
            kinesis
                .create_stream()
                .stream_name(&stream)
                .shard_count(SHARDS)
                .send()
                .await
                .expect("the stream");
            for (customer, put) in &puts {
                kinesis
                    .put_record()
                    .stream_name(&stream)
                    .partition_key(customer)
                    .data(aws_sdk_kinesis::primitives::Blob::new(
                        put.kinesis_data(customer).as_bytes(),
                    ))
                    .send()
                    .await
                    .expect("put record");
            }
            shards = kinesis
                .list_shards()
                .stream_name(&stream)
                .send()
                .await
                .expect("shards")
                .shards()
                .iter()
                .map(|s| s.shard_id().to_owned())
                .collect();
            assert_eq!(shards.len(), SHARDS as usize, "the stream's shards");
            for (i, shard) in shards.iter().enumerate() {
                let mapping = StreamMapping::of_kinesis(
                    kinesis.clone(),
                    p.sqs.clone(),
                    &stream,
                    Some(shard),
                    mapping_config.clone(),
                    instance(i).await,
                )
                .await
                .expect("the shard's mapping");
                mappings.push(mapping);
            }
        }
        Source::Table => {
            let dynamodb = aws_sdk_dynamodb::Client::new(&config);
            let table = unique_name("payment-requests");
            create_streamed_table(
                &dynamodb,
                &table,
                "payment_id",
                StreamViewType::NewAndOldImages,
            )
            .await;
            for (n, (customer, put)) in puts.iter().enumerate() {
                dynamodb
                    .put_item()
                    .table_name(&table)
                    .set_item(Some(put.item(customer, n).into_iter().collect()))
                    .send()
                    .await
                    .expect("put item");
            }
            let mapping = StreamMapping::of_table(
                &dynamodb,
                aws_sdk_dynamodbstreams::Client::new(&config),
                p.sqs.clone(),
                &table,
                mapping_config.clone(),
                instance(0).await,
            )
            .await
            .expect("the table stream's mapping");
            shards.push(mapping.shard_id().to_owned());
            mappings.push(mapping);
        }
    }
    p.proxy.set_enabled(true);
    let tasks: Vec<_> = mappings
        .into_iter()
        .map(|m| tokio::spawn(run_shard(m)))
        .collect();
    let mut runs = Vec::new();
    for task in tasks {
        runs.push(task.await.expect("shard task"));
    }
    p.proxy.set_enabled(false);
    let instances: Vec<InstanceStats> = runs.iter().filter_map(|r| r.instance.clone()).collect();
    for r in &runs {
        println!(
            "shard {}: {} invocations: {} done, {} stopped at a record, {} failed whole; given up on: {}",
            r.shard,
            r.invocations,
            r.done,
            r.retried_from,
            r.failed,
            r.given_up.len()
        );
    }
    println!("faults injected: {:?}", sum_faults(&instances));
    let proxy = p.proxy.stats();
    println!(
        "the DynamoDB proxy: {} requests, {} throttled, {} answered 500, {} answered 500 after writing",
        proxy.dynamodb_requests, proxy.throttled, proxy.errors_500, proxy.after_write_500
    );
    let stalled: Vec<&String> = runs.iter().filter_map(|r| r.stalled.as_ref()).collect();
    assert!(
        stalled.is_empty(),
        "a shard stalled (seed {seed}): {stalled:?}"
    );
    // Effects: the payments API's own ledger.
    let charges = payments.charges();
    let mut by_payment: BTreeMap<&str, Vec<u64>> = BTreeMap::new();
    for c in &charges {
        by_payment
            .entry(c.payment_id.as_str())
            .or_default()
            .push(c.amount);
    }
    let twice: Vec<(&&str, &Vec<u64>)> = by_payment.iter().filter(|(_, a)| a.len() > 1).collect();
    let expected: BTreeMap<&str, u64> = published
        .values()
        .flatten()
        .map(|(id, amount)| (id.as_str(), *amount))
        .collect();
    let lost: Vec<&&str> = expected
        .keys()
        .filter(|id| !by_payment.contains_key(**id))
        .collect();
    let wrong_amount: Vec<(&&str, &Vec<u64>)> = by_payment
        .iter()
        .filter(|(id, amounts)| {
            expected
                .get(**id)
                .is_none_or(|a| amounts.iter().any(|x| x != a))
        })
        .collect();
    // Per customer: the first charge of each payment, in the order the ledger made them, against the order of the
    // customer's records.
    let mut out_of_order = Vec::new();
    for (customer, payments_of) in &published {
        let mut want: Vec<&str> = Vec::new();
        for (id, _) in payments_of {
            if !want.contains(&id.as_str()) {
                want.push(id);
            }
        }
        let mut got: Vec<&str> = Vec::new();
        for c in charges.iter().filter(|c| &c.customer_id == customer) {
            if !got.contains(&c.payment_id.as_str()) {
                got.push(&c.payment_id);
            }
        }
        if got != want {
            let at = got.iter().zip(&want).position(|(a, b)| a != b);
            out_of_order.push(format!(
                "{customer}: charged {} payments, the first out of order at #{at:?} ({:?} against {:?})",
                got.len(),
                at.map(|n| got[n]),
                at.map(|n| want[n])
            ));
        }
    }

    // The failure queue (DLQ_URL): each poison record and mismatch with its content and its place in its shard.
    let dlq = p
        .stack
        .dead_letter_queue("charge-payment")
        .expect("dlq")
        .url
        .clone();
    let letters = read_all(&p.sqs, &dlq).await;
    let mut lettered: BTreeSet<String> = BTreeSet::new();
    let mut stray = Vec::new();
    let mut without_origin = Vec::new();
    for m in &letters {
        let body = m.body().unwrap_or_default();
        let origin = context_field(m, "stream")
            .and_then(|s| serde_json::from_str::<serde_json::Value>(&s).ok())
            .unwrap_or_default();
        let nonempty = |field: &str| origin[field].as_str().is_some_and(|s| !s.is_empty());
        let placed = nonempty("sequence_number")
            && match source {
                Source::Kinesis => {
                    origin["shard_id"]
                        .as_str()
                        .is_some_and(|s| shards.iter().any(|shard| shard == s))
                        && origin["partition_key"]
                            .as_str()
                            .is_some_and(|k| k.starts_with("cus-"))
                }
                Source::Table => nonempty("stream_arn") && nonempty("event_id"),
            };
        if !placed {
            without_origin.push(format!("{body:?}: {origin}"));
        }
        let id = letter_id(source, body);
        if must_letter.contains(&id) {
            lettered.insert(id);
        } else {
            stray.push(format!(
                "{body:?} ({})",
                context_field(m, "error_kind").unwrap_or_default()
            ));
        }
    }
    let poison_missing: Vec<&String> = must_letter
        .iter()
        .filter(|d| !lettered.contains(*d))
        .collect();

    let in_progress = p
        .records()
        .await
        .into_iter()
        .filter(|r| {
            r.get("status")
                .and_then(|s| s.as_s().ok())
                .map(String::as_str)
                == Some("IN_PROGRESS")
        })
        .count();
    let given_up: Vec<&String> = runs.iter().flat_map(|r| &r.given_up).collect();
    println!(
        "verdict: {} charges for {} payments; charged twice {}, lost {}, with another amount {}, out of order {}; \
         failure queue: {} letters for {} poison records and mismatches, {} missing, {} stray, {} without their \
         place in the shard; IN_PROGRESS {}; given up {}; answers after the deadline {} (each one's batch came \
         again); {:.0} s",
        charges.len(),
        expected.len(),
        twice.len(),
        lost.len(),
        wrong_amount.len(),
        out_of_order.len(),
        letters.len(),
        must_letter.len(),
        poison_missing.len(),
        stray.len(),
        without_origin.len(),
        in_progress,
        given_up.len(),
        answers_after_the_deadline(&instances),
        started.elapsed().as_secs_f64()
    );
    assert!(twice.is_empty(), "charged twice (seed {seed}): {twice:?}");
    assert!(lost.is_empty(), "never charged (seed {seed}): {lost:?}");
    assert!(
        wrong_amount.is_empty(),
        "charged with another record's amount (seed {seed}): {wrong_amount:?}"
    );
    assert!(
        out_of_order.is_empty(),
        "a record applied before one that came before it in its shard (seed {seed}): {out_of_order:?}"
    );
    assert!(
        poison_missing.is_empty(),
        "poison records and mismatches not in the failure queue (seed {seed}): {poison_missing:?}"
    );
    assert!(
        stray.is_empty(),
        "letters in the failure queue that are neither poison nor a mismatch (seed {seed}): {stray:?}"
    );
    assert!(
        without_origin.is_empty(),
        "letters without their place in the stream (seed {seed}): {without_origin:?}"
    );
    assert_eq!(in_progress, 0, "records left IN_PROGRESS (seed {seed})");
    assert!(
        given_up.is_empty(),
        "records given up on (seed {seed}): {given_up:?}"
    );
    let faults = sum_faults(&instances);
    assert!(
        faults.keys().any(|k| k.starts_with("after_")) && proxy.throttled + proxy.errors_500 > 0,
        "faults were really injected: {faults:?}"
    );
    assert!(
        runs.iter().any(|r| r.retried_from > 0),
        "some batch stopped at a failed record"
    );
}

/// Polls one shard until nothing is left after its checkpoint, pausing before records handed over again; stops at
/// [`STALL`] without progress.
async fn run_shard(mut mapping: StreamMapping<FunctionInstance>) -> ShardRun {
    let mut run = ShardRun {
        shard: mapping.shard_id().to_owned(),
        ..ShardRun::default()
    };
    let mut progress = Instant::now();
    loop {
        let before = mapping.checkpoint().map(str::to_owned);
        match mapping.poll().await {
            Ok(None) => break,
            Ok(Some(delivery)) => {
                run.invocations += 1;
                match &delivery.delivered {
                    Delivered::Done => run.done += 1,
                    Delivered::RetryFrom(_) => run.retried_from += 1,
                    Delivered::Failed(_) => run.failed += 1,
                }
                run.given_up.extend(delivery.given_up.iter().cloned());
            }
            Err(e) => println!("shard {}: {e}", run.shard),
        }
        if mapping.checkpoint().map(str::to_owned) != before {
            progress = Instant::now();
        } else if progress.elapsed() > STALL {
            run.stalled = Some(format!(
                "shard {}: the checkpoint stayed at {before:?} for {} s",
                run.shard,
                STALL.as_secs()
            ));
            break;
        } else {
            tokio::time::sleep(RETRY_PAUSE).await;
        }
    }
    let instance = mapping.into_invoker();
    run.instance = Some(instance.stats());
    instance.shutdown().await;
    run
}
