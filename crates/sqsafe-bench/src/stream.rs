//! Figure 9: Kinesis batches. sqsafe's charge-payment (claim and keyed modes) and Powertools' `BatchProcessor` for
//! `KinesisDataStreams` (with `idempotent_function` on DynamoDB, as its SQS peer) handed the same batches of 10
//! records of one shard and one partition key, on the same moto and proxy: CPU per record, DynamoDB and payments API
//! requests per record (fresh, and the same payments again), batch latency. Then 9b: a batch whose 4th record fails
//! once (the payments API answers 503 before charging it), redelivered from the lowest sequence number the answer
//! names, as Lambda does, until nothing is named: the order in which the payments were charged, and how many records
//! after the failed one were applied before it.

use serde::Serialize;
use sqsafe_test_servers::Fault;

use crate::bed::Peer;
use crate::bench::Bench;
use crate::events;
use crate::figures::Kind;
use crate::measure::Network;
use crate::plan::SLOW_MS;
use crate::proxy::Backend;

/// The peers of figure 9.
pub(crate) const PEERS: [Peer; 3] = [Peer::Sqsafe, Peer::SqsafeKeyed, Peer::Powertools];

/// Records in figure 9b's batch, and the one (1-based) that fails once.
const ORDER_BATCH: usize = 10;
const FAILS: usize = 4;
/// Deliveries of that batch at most (Lambda's retries of the records from the checkpoint).
const MAX_DELIVERIES: usize = 5;

/// Figure 9b: one peer's batch whose 4th record failed once, redelivered from the checkpoint.
#[derive(Debug, Clone, Serialize)]
pub(crate) struct Order {
    pub(crate) peer: Peer,
    /// Invocations until the answer named nothing.
    pub(crate) deliveries: usize,
    /// The records (1-based positions) the first answer named.
    pub(crate) first_answer_named: Vec<usize>,
    /// The records (1-based positions) in the order the payments API charged them.
    pub(crate) charged_in_order: Vec<usize>,
    /// Records after the failed one charged before it.
    pub(crate) ran_ahead: usize,
    /// Payments API requests for the batch, over every delivery (10 when each record was called once).
    pub(crate) payments_calls: u64,
    /// Records charged more than once (the payments API's ledger).
    pub(crate) charged_twice: usize,
}

impl Bench<'_> {
    /// Figure 9 and 9b for each of [`PEERS`].
    pub(crate) async fn kinesis(&mut self) -> Result<(), String> {
        for peer in PEERS {
            eprintln!("==> {} on Kinesis", peer.name());
            self.kinesis_runs(peer).await?;
            self.kinesis_order(peer).await?;
        }
        Ok(())
    }

    /// One warm process: requests per record (fresh, then the same payments again), then latency and CPU on moto
    /// with no added latency and with 5 ms per request.
    async fn kinesis_runs(&mut self, peer: Peer) -> Result<(), String> {
        let proxy = &self.bed.proxy;
        let mut function = self.start_kinesis(peer).await?;
        Network::MOTO.apply(proxy);
        let warm = self.fresh(peer, "kinesis-warm", 10);
        let (_, failed) = function.invoke(&warm).await?;
        self.check(
            format!("{} on Kinesis: first batch answered", peer.name()),
            failed == 0,
            format!("{failed} failed"),
        );
        let batch = vec![self.fresh(peer, "kinesis-requests", 10)];
        for kind in [Kind::Fresh, Kind::Duplicate] {
            let run = function
                .run(proxy, Network::MOTO, kind, "kinesis_requests", &batch)
                .await?;
            self.record_kinesis(run);
        }
        for network in [
            Network::MOTO,
            Network {
                backend: Backend::Moto,
                latency_ms: SLOW_MS,
            },
        ] {
            let label = format!("kinesis-moto-{}ms", network.latency_ms);
            let batches = self.fresh_batches(peer, &label, self.plan.batches(network), 10);
            for kind in [Kind::Fresh, Kind::Duplicate] {
                let run = function
                    .run(proxy, network, kind, "kinesis", &batches)
                    .await?;
                self.record_kinesis(run);
            }
        }
        function.shutdown().await;
        Ok(())
    }

    fn record_kinesis(&mut self, run: crate::figures::Run) {
        self.check_counts(&run);
        self.report.kinesis.push(run);
    }

    /// Figure 9b for `peer`: a new process, a batch of [`ORDER_BATCH`] payments whose [`FAILS`]th fails once,
    /// handed over again from the lowest sequence number each answer names.
    async fn kinesis_order(&mut self, peer: Peer) -> Result<(), String> {
        let proxy = &self.bed.proxy;
        let ids = self.fresh(peer, "kinesis-order", ORDER_BATCH);
        let records: Vec<(String, u64)> = ids
            .iter()
            .enumerate()
            .map(|(i, id)| (id.clone(), 1_000 + i as u64))
            .collect();
        self.bed
            .payments
            .force_for_payment(&ids[FAILS - 1], Fault::Before);
        let mut function = self.start_kinesis(peer).await?;
        Network::MOTO.apply(proxy);
        proxy.take().await;
        let position = |sequence: &str| {
            records
                .iter()
                .position(|(_, n)| events::sequence_number(*n) == sequence)
        };
        let mut from = 0;
        let mut deliveries = 0;
        let mut first_answer_named = Vec::new();
        let mut payments_calls = 0;
        while deliveries < MAX_DELIVERIES {
            deliveries += 1;
            let answer = function
                .invoke_event(events::kinesis_batch(&records[from..]))
                .await?;
            payments_calls += crate::trace::Counts::of(&proxy.take().await).payments_total();
            let named: Vec<usize> = events::failure_ids(&answer)
                .iter()
                .filter_map(|s| position(s))
                .collect();
            if deliveries == 1 {
                first_answer_named = named.iter().map(|i| i + 1).collect();
            }
            match named.iter().min() {
                None => break,
                Some(lowest) => from = *lowest,
            }
        }
        function.shutdown().await;
        let charges = self.bed.payments.charges();
        let mut charged_in_order = Vec::new();
        let mut charged_twice = 0;
        for c in &charges {
            if let Some(i) = ids.iter().position(|id| *id == c.payment_id) {
                if charged_in_order.contains(&(i + 1)) {
                    charged_twice += 1;
                } else {
                    charged_in_order.push(i + 1);
                }
            }
        }
        let ran_ahead = charged_in_order
            .iter()
            .take_while(|p| **p != FAILS)
            .filter(|p| **p > FAILS)
            .count();
        let order = Order {
            peer,
            deliveries,
            first_answer_named,
            charged_in_order,
            ran_ahead,
            payments_calls,
            charged_twice,
        };
        eprintln!(
            "{} on Kinesis, record {FAILS} of {ORDER_BATCH} failing once: {} deliveries, charged in the order {:?}, \
             {} ran ahead of it",
            peer.name(),
            order.deliveries,
            order.charged_in_order,
            order.ran_ahead
        );
        let all: Vec<usize> = (1..=ORDER_BATCH).collect();
        self.check(
            format!("{} on Kinesis: every record charged once", peer.name()),
            order.charged_twice == 0 && {
                let mut sorted = order.charged_in_order.clone();
                sorted.sort_unstable();
                sorted == all
            },
            format!(
                "charged {:?}, {} twice",
                order.charged_in_order, order.charged_twice
            ),
        );
        if peer != Peer::Powertools {
            // sqsafe's promise: the shard stops at the failure, so nothing after it runs ahead.
            self.check(
                format!(
                    "{} on Kinesis: records charged in the shard's order, the first answer naming record {FAILS} alone",
                    peer.name()
                ),
                order.charged_in_order == all && order.first_answer_named == [FAILS],
                format!(
                    "charged in the order {:?}; the first answer named {:?}",
                    order.charged_in_order, order.first_answer_named
                ),
            );
        }
        self.report.kinesis_order.push(order);
        Ok(())
    }
}
