//! The stream run: charge-payment fed a Kinesis stream of two shards as Lambda's stream poller feeds it
//! (`sqsafe_local::esm::StreamMapping`: a batch of up to 10 records from the checkpoint, the checkpoint moved to the
//! lowest sequence number the answer names, a failed invocation bisected and retried, no retry limit), under the
//! suite's faults: SIGKILLs at the crash points, the DynamoDB proxy's throttles and 500s, the payments API's 503s
//! before and after charging, payments slower than the function's timeout.
//!
//! The records: payments of 8 customers (the partition keys), some republished later in their shard, a few poison
//! records (not a payment) and a few payments republished with another amount (a payload mismatch), among the others.
//! The verdict, from the payments API's ledger, the failure queue and the idempotency table:
//!
//! - every payment charged once (`charged twice` and `lost` both 0), with its own amount;
//! - per customer, the charges in the order of the customer's records (`out of order` 0): no record ran ahead of one
//!   that had failed before it;
//! - every poison record and every mismatch in the failure queue with its content and its shard and sequence number,
//!   and nothing else there;
//! - no record left IN_PROGRESS, no batch given up on.

use std::collections::{BTreeMap, BTreeSet};
use std::time::{Duration, Instant};

use serde_json::json;
use sqsafe_e2e::harness::{build_functions, context_field, read_all};
use sqsafe_e2e::workspace_root;
use sqsafe_local::esm::{Delivered, StreamMapping, StreamMappingConfig};
use sqsafe_local::lambda::{FunctionInstance, FunctionSpec, INIT_TIMEOUT, InstanceStats};
use sqsafe_testkit::{create_table, unique_name};

use super::{
    FUNCTION_TIMEOUT, PipelineOptions, answers_after_the_deadline, heavy, in_process_payments,
    local_aws, seed, sum_faults,
};

/// The stream's shards, each with its own mapping and function instance.
const SHARDS: i32 = 2;
/// The customers: the records' partition keys.
const CUSTOMERS: usize = 8;
/// A shard is stalled when its checkpoint has not moved for this long: a few times the longest wait the protocol has
/// (a crashed claim's lease, the function's timeout and the takeover margin, about 6 s).
const STALL: Duration = Duration::from_secs(90);
/// The pause before handing the same records over again when the checkpoint did not move (Lambda backs off too).
const RETRY_PAUSE: Duration = Duration::from_millis(200);

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
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Put {
    /// A payment (a republished copy is the same record again).
    Payment,
    /// A payment id already published, with another amount: a payload mismatch.
    Mismatch,
    /// Not a payment.
    Poison,
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn charge_payment_on_a_kinesis_stream_applies_every_record_once_in_order_under_faults() {
    let started = Instant::now();
    let seed = seed();
    let payments_n = if heavy() { 1000 } else { 240 };
    println!(
        "fault injection (charge-payment on a Kinesis stream, {SHARDS} shards): seed {seed} (replay with \
         SQSAFE_FAULT_SEED={seed}), {payments_n} payments"
    );
    let mut rng = fastrand::Rng::with_seed(seed ^ 0x5712_EA4D);

    let options = PipelineOptions::claim();
    let local = local_aws(seed, &options).await;
    let payments_table = unique_name("payments-keys");
    create_table(&local.dynamodb, &payments_table, "pk", None).await;
    // Now and then slower than the function's timeout: the invocation is cut and its batch comes again.
    let payments = in_process_payments(&local, seed, payments_table, seed ^ 0x510E, 4_500).await;
    let p = local
        .pipeline(
            "faults-stream",
            BTreeMap::from([("PaymentsApiUrl".to_owned(), payments.base_url())]),
            options,
        )
        .await;
    let config = sqsafe_testkit::sdk_config_at(&p.moto.endpoint()).await;
    let kinesis = aws_sdk_kinesis::Client::new(&config);
    let stream = unique_name("faults-payments");
    kinesis
        .create_stream()
        .stream_name(&stream)
        .shard_count(SHARDS)
        .send()
        .await
        .expect("the stream");

    // The records, in the order they are put: each customer's payments in turn, some republished later, a poison
    // record or a mismatch now and then.
    let body = |id: &str, amount: u64, customer: &str| {
        json!({"type": "PaymentRequested", "version": "1", "payment_id": id, "tenant": "acme", "amount": amount,
               "currency": "EUR", "customer_id": customer})
        .to_string()
    };
    let mut puts: Vec<(String, String, Put)> = Vec::new();
    let mut published: BTreeMap<String, Vec<(String, u64)>> = BTreeMap::new();
    for i in 0..payments_n {
        let customer = format!("cus-{}", rng.usize(..CUSTOMERS));
        let id = format!("s-{i}");
        let amount = 100 + (i as u64 % 50);
        puts.push((customer.clone(), body(&id, amount, &customer), Put::Payment));
        published
            .entry(customer.clone())
            .or_default()
            .push((id, amount));
        let earlier = &published[&customer];
        if rng.f64() < 0.2 {
            // A producer's retry: an earlier payment of this customer, the same record again.
            let (id, amount) = earlier[rng.usize(..earlier.len())].clone();
            puts.push((customer.clone(), body(&id, amount, &customer), Put::Payment));
        }
        if rng.f64() < 0.02 {
            puts.push((customer.clone(), format!("not a payment #{i}"), Put::Poison));
        }
        if rng.f64() < 0.02 {
            let (id, amount) = &earlier[rng.usize(..earlier.len())];
            puts.push((
                customer.clone(),
                body(id, amount + 1000, &customer),
                Put::Mismatch,
            ));
        }
    }
    for (customer, data, _) in &puts {
        kinesis
            .put_record()
            .stream_name(&stream)
            .partition_key(customer)
            .data(aws_sdk_kinesis::primitives::Blob::new(data.as_bytes()))
            .send()
            .await
            .expect("put record");
    }
    let poison: BTreeSet<&str> = puts
        .iter()
        .filter(|(_, _, put)| *put != Put::Payment)
        .map(|(_, data, _)| data.as_str())
        .collect();
    println!(
        "{} records put: {payments_n} payments, {} republished, {} poison, {} mismatched",
        puts.len(),
        puts.iter()
            .filter(|(_, _, put)| *put == Put::Payment)
            .count()
            - payments_n,
        puts.iter()
            .filter(|(_, _, put)| *put == Put::Poison)
            .count(),
        puts.iter()
            .filter(|(_, _, put)| *put == Put::Mismatch)
            .count(),
    );

    // One mapping and one function instance per shard, side by side.
    let shards: Vec<String> = kinesis
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
    let binaries = build_functions(true);
    let log_dir = workspace_root().join(format!("target/fault-logs/{}-kinesis", p.prefix));
    let _ = std::fs::remove_dir_all(&log_dir);
    p.proxy.set_enabled(true);
    let mut tasks = Vec::new();
    for (i, shard) in shards.iter().enumerate() {
        let spec = FunctionSpec {
            name: "charge-payment".to_owned(),
            binary: binaries.join("charge-payment"),
            env: p.function_env("charge-payment", seed.wrapping_add(i as u64)),
            timeout: FUNCTION_TIMEOUT,
            log_dir: log_dir.clone(),
            init_timeout: INIT_TIMEOUT,
        };
        let instance = FunctionInstance::start(spec, i).await.expect("instance");
        let config = StreamMappingConfig {
            batch_size: 10,
            maximum_retry_attempts: None,
            bisect_on_function_error: true,
            on_failure_queue: None,
        };
        let mapping = StreamMapping::of_kinesis(
            kinesis.clone(),
            p.sqs.clone(),
            &stream,
            Some(shard),
            config,
            instance,
        )
        .await
        .expect("the shard's mapping");
        tasks.push(tokio::spawn(run_shard(mapping)));
    }
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
    let mut lettered: BTreeSet<&str> = BTreeSet::new();
    let mut stray = Vec::new();
    let mut without_origin = Vec::new();
    for m in &letters {
        let data = m.body().unwrap_or_default();
        let origin = context_field(m, "stream")
            .and_then(|s| serde_json::from_str::<serde_json::Value>(&s).ok())
            .unwrap_or_default();
        let placed = origin["shard_id"]
            .as_str()
            .is_some_and(|s| shards.iter().any(|shard| shard == s))
            && origin["sequence_number"]
                .as_str()
                .is_some_and(|s| !s.is_empty())
            && origin["partition_key"]
                .as_str()
                .is_some_and(|k| k.starts_with("cus-"));
        if !placed {
            without_origin.push(format!("{data:?}: {origin}"));
        }
        match poison.get(data) {
            Some(known) => {
                lettered.insert(known);
            }
            None => stray.push(format!(
                "{data:?} ({})",
                context_field(m, "error_kind").unwrap_or_default()
            )),
        }
    }
    let poison_missing: Vec<&&str> = poison.iter().filter(|d| !lettered.contains(**d)).collect();

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
        poison.len(),
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
        "letters without their shard, sequence number and partition key (seed {seed}): {without_origin:?}"
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
