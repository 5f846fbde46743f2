//! Figures 1-4 and 7a, one peer at a time: cold starts, requests per message, batch latency and client CPU under
//! each network setting, duplicates, batch sizes.

use std::collections::HashMap;
use std::path::PathBuf;
use std::time::Duration;

use crate::bed::{Bed, Peer};
use crate::figures::{Kind, Run};
use crate::instructions;
use crate::measure::{Function, Network, last_init_ms};
use crate::plan::{Plan, SLOW_MS};
use crate::profile::Profiler;
use crate::proxy::Backend;
use crate::report::{Check, Process, Profile, Report};

/// Batches of 10 replayed from a local cache: fewer payments than the smallest default cache holds.
const CACHED_BATCHES: usize = 20;
/// Times each of those batches is replayed (at most `batches_fast` times, so the smoke stays short).
const CACHE_ROUNDS: usize = 5;

/// Batches of 10 per profiled run: a few thousand samples.
const PROFILE_BATCHES: usize = 300;

/// Batches of 10 per network setting under callgrind (about fifty times slower than without).
pub(crate) const CALLGRIND_BATCHES: usize = 20;

/// What is measured of a peer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Role {
    /// Everything.
    Main,
    /// Requests and latency of fresh messages and cache hits.
    Cached,
    /// Fresh and duplicate CPU of a variant of sqsafe.
    Variant,
    /// Requests and capacity units (fresh, duplicate) and the latency the bill needs: sqsafe's keyed mode.
    Billed,
}

impl Role {
    fn of(peer: Peer) -> Self {
        match peer {
            Peer::Naive | Peer::Sqsafe | Peer::Powertools => Role::Main,
            Peer::SqsafeCached | Peer::PowertoolsCached => Role::Cached,
            Peer::SqsafeQuiet | Peer::SqsafeMultiThread => Role::Variant,
            Peer::SqsafeKeyed => Role::Billed,
        }
    }
}

pub(crate) struct Bench<'a> {
    pub(crate) bed: &'a Bed,
    pub(crate) plan: &'a Plan,
    pub(crate) report: Report,
    pub(crate) tick: Duration,
    /// Where perf profiles go, when they are taken.
    pub(crate) profiles: Option<PathBuf>,
    /// Payments sent for the first time: the payments API must have charged each exactly once.
    fresh_sent: usize,
    instances: usize,
}

impl<'a> Bench<'a> {
    pub(crate) fn new(bed: &'a Bed, plan: &'a Plan, report: Report, tick: Duration) -> Self {
        Self {
            bed,
            plan,
            report,
            tick,
            profiles: None,
            fresh_sent: 0,
            instances: 0,
        }
    }

    /// `n` payment ids never sent before.
    pub(crate) fn fresh(&mut self, peer: Peer, label: &str, n: usize) -> Vec<String> {
        let first = self.fresh_sent;
        self.fresh_sent += n;
        (first..first + n)
            .map(|i| format!("{}-{label}-{i}", peer.name()))
            .collect()
    }

    pub(crate) fn fresh_batches(
        &mut self,
        peer: Peer,
        label: &str,
        batches: usize,
        size: usize,
    ) -> Vec<Vec<String>> {
        (0..batches)
            .map(|_| self.fresh(peer, label, size))
            .collect()
    }

    /// A new execution environment for `peer` (its process starts on the first invoke), consuming `queue_url`.
    pub(crate) async fn start(
        &mut self,
        peer: Peer,
        queue_url: Option<&str>,
    ) -> Result<Function, String> {
        self.instances += 1;
        Function::start(
            peer,
            self.bed.spec(peer, queue_url),
            self.instances,
            self.tick,
        )
        .await
    }

    /// A new execution environment for `peer` handed Kinesis batches (Powertools: its Kinesis handler).
    pub(crate) async fn start_kinesis(&mut self, peer: Peer) -> Result<Function, String> {
        self.instances += 1;
        Function::start(peer, self.bed.kinesis_spec(peer), self.instances, self.tick)
            .await
            .map(Function::on_kinesis)
    }

    /// A new process that has answered one batch.
    pub(crate) async fn warm(
        &mut self,
        peer: Peer,
        queue_url: Option<&str>,
    ) -> Result<Function, String> {
        let mut function = self.start(peer, queue_url).await?;
        Network::MOTO.apply(&self.bed.proxy);
        let ids = self.fresh(peer, "warm", 10);
        let (_, failed) = function.invoke(&ids).await?;
        self.check(
            format!("{}: warm-up batch answered", peer.name()),
            failed == 0,
            format!("{failed} failed"),
        );
        Ok(function)
    }

    pub(crate) fn check(&mut self, what: String, ok: bool, detail: String) {
        if !ok {
            eprintln!("CHECK FAILED: {what}: {detail}");
        }
        self.report.checks.push(Check { what, ok, detail });
    }

    /// Every figure of one peer, on one warm process (after the cold starts).
    pub(crate) async fn peer(&mut self, peer: Peer) -> Result<(), String> {
        let role = Role::of(peer);
        let proxy = &self.bed.proxy;
        eprintln!("==> {}", peer.name());

        let cold_starts = if role == Role::Main {
            self.plan.cold_starts
        } else {
            1
        };
        let (mut function, cold, init) = self.cold_starts(peer, cold_starts, Network::MOTO).await?;

        let repeat = if peer.cached() {
            Kind::CacheHit
        } else {
            Kind::Duplicate
        };
        if role != Role::Variant {
            let batch = vec![self.fresh(peer, "requests", 10)];
            let fresh = function
                .run(proxy, Network::MOTO, Kind::Fresh, "requests", &batch)
                .await?;
            let again = function
                .run(proxy, Network::MOTO, repeat, "requests", &batch)
                .await?;
            self.record(fresh);
            self.record(again);
        }

        let networks: Vec<Network> = match role {
            Role::Main => Plan::networks().to_vec(),
            Role::Variant => {
                let [moto, _, canned, canned_slow] = Plan::networks();
                vec![moto, canned, canned_slow]
            }
            Role::Cached => vec![Network::MOTO],
            Role::Billed => vec![
                Network::MOTO,
                Network {
                    backend: crate::bill::BILLED_BACKEND,
                    latency_ms: crate::bill::BILLED_LATENCY_MS,
                },
            ],
        };
        let mut on_moto = Vec::new();
        for network in networks {
            let label = format!("{:?}-{}ms", network.backend, network.latency_ms).to_lowercase();
            let batches = self.fresh_batches(peer, &label, self.plan.batches(network), 10);
            let run = function
                .run(proxy, network, Kind::Fresh, "latency", &batches)
                .await?;
            self.record(run);
            if network.backend == Backend::Moto && network.latency_ms == 0 {
                on_moto = batches;
            }
        }
        // A cache hit needs the payment still in the cache: the most recent ones only (Powertools keeps 256 by
        // default, sqsafe 1,024), each replayed a few times so the run spans several clock ticks of CPU.
        if peer.cached() {
            let keep = on_moto.len().min(CACHED_BATCHES);
            on_moto.drain(..on_moto.len() - keep);
            let rounds = CACHE_ROUNDS.min(self.plan.batches_fast);
            on_moto = (0..rounds).flat_map(|_| on_moto.iter().cloned()).collect();
        }
        let again = function
            .run(proxy, Network::MOTO, repeat, "latency", &on_moto)
            .await?;
        self.record(again);

        if peer == Peer::Sqsafe {
            self.profile(&mut function).await?;
        }

        if role == Role::Main {
            let network = Network {
                backend: Backend::Canned,
                latency_ms: SLOW_MS,
            };
            for size in self.plan.batch_sizes.clone() {
                // At least `messages_per_size` messages, so CPU per message is more than a few clock ticks.
                let batches = self
                    .plan
                    .batches_per_size
                    .max(self.plan.messages_per_size.div_ceil(size));
                let batches = self.fresh_batches(peer, &format!("size{size}"), batches, size);
                let run = function
                    .run(proxy, network, Kind::Fresh, "batch_size", &batches)
                    .await?;
                self.record(run);
            }
        }

        let last = function.sample()?;
        self.report.processes.push(Process {
            peer,
            cold_start_ms: cold,
            init_ms: init,
            peak_rss_kib: last.peak_rss_kib,
            threads: last.threads,
        });
        function.shutdown().await;
        Ok(())
    }

    /// `n` cold starts of `peer` one after the other under `network` (at least one), each a new process spawned by its
    /// first batch of 10 fresh payments: the last process, warm, and per cold start the time from spawn to that
    /// batch answered (ms) and Lambda's Init Duration (ms, when its log has one).
    pub(crate) async fn cold_starts(
        &mut self,
        peer: Peer,
        n: usize,
        network: Network,
    ) -> Result<(Function, Vec<f64>, Vec<f64>), String> {
        let mut cold = Vec::new();
        let mut init = Vec::new();
        let mut current: Option<Function> = None;
        for _ in 0..n.max(1) {
            if let Some(previous) = current.take() {
                previous.shutdown().await;
            }
            let mut function = self.start(peer, None).await?;
            network.apply(&self.bed.proxy);
            let ids = self.fresh(peer, "cold", 10);
            // The process is spawned by this invoke: spawn to first batch answered.
            let (took, failed) = function.invoke(&ids).await?;
            self.check(
                format!("{}: first batch answered", peer.name()),
                failed == 0,
                format!("{failed} failed"),
            );
            cold.push(took.as_secs_f64() * 1e3);
            let log = std::fs::read_to_string(function.instance.log_path()).unwrap_or_default();
            init.extend(last_init_ms(&log));
            current = Some(function);
        }
        let function = current.ok_or("no cold start")?;
        Ok((function, cold, init))
    }

    /// Extra runs under `perf record` (moto and canned, no added latency), when profiles are asked for.
    async fn profile(&mut self, function: &mut Function) -> Result<(), String> {
        let Some(dir) = self.profiles.clone() else {
            return Ok(());
        };
        std::fs::create_dir_all(&dir).map_err(|e| format!("{}: {e}", dir.display()))?;
        let [moto, _, canned, _] = Plan::networks();
        for network in [moto, canned] {
            let label = format!("{:?}-{}ms", network.backend, network.latency_ms).to_lowercase();
            let batches = self.fresh_batches(
                function.peer,
                &format!("profile-{label}"),
                PROFILE_BATCHES,
                10,
            );
            let pid = function.sample_pid()?;
            let stem = dir.join(format!("{}-{label}", function.peer.name()));
            let profiler = Profiler::start(pid, &stem).await?;
            let run = function
                .run(&self.bed.proxy, network, Kind::Fresh, "profile", &batches)
                .await;
            let reports = profiler.finish().await?;
            let failures = run?.failures;
            self.check(
                format!(
                    "{} profile ({label}): every record succeeded",
                    function.peer.name()
                ),
                failures == 0,
                format!("{failures} in batchItemFailures"),
            );
            self.report.profiles.push(Profile {
                peer: function.peer,
                backend: network.backend,
                latency_ms: network.latency_ms,
                batches: batches.len(),
                reports,
            });
        }
        Ok(())
    }

    /// Instructions per message of sqsafe's function under each network setting, counted by callgrind in a process
    /// of its own (module [`instructions`]); its dumps and a wrapper script go to `dir`.
    pub(crate) async fn instructions(&mut self, dir: PathBuf) -> Result<(), String> {
        self.count_instructions(Peer::Sqsafe, &Plan::networks(), dir, CALLGRIND_BATCHES)
            .await
    }

    /// Instructions per message of `peer` under each of `networks`, `batches` fresh batches of 10 each, counted by
    /// callgrind in a process of its own (module [`instructions`]); its dumps and a wrapper script go to `dir`
    /// (emptied first).
    pub(crate) async fn count_instructions(
        &mut self,
        peer: Peer,
        networks: &[Network],
        dir: PathBuf,
        batches: usize,
    ) -> Result<(), String> {
        eprintln!("==> {} under callgrind", peer.name());
        let _ = std::fs::remove_dir_all(&dir);
        let mut spec = self.bed.spec(peer, None);
        spec.binary = instructions::wrapper(&dir, &spec.binary)?;
        self.instances += 1;
        let mut function = Function::start(peer, spec, self.instances, self.tick).await?;
        Network::MOTO.apply(&self.bed.proxy);
        let ids = self.fresh(peer, "callgrind-warm", 10);
        let (_, failed) = function.invoke(&ids).await?;
        self.check(
            format!("{} under callgrind: first batch answered", peer.name()),
            failed == 0,
            format!("{failed} failed"),
        );
        let pid = function.sample_pid()?;
        for (n, network) in networks.iter().copied().enumerate() {
            let label = format!("{:?}-{}ms", network.backend, network.latency_ms).to_lowercase();
            let batches = self.fresh_batches(peer, &format!("callgrind-{label}"), batches, 10);
            instructions::zero(pid).await?;
            let run = function
                .run(
                    &self.bed.proxy,
                    network,
                    Kind::Fresh,
                    "instructions",
                    &batches,
                )
                .await?;
            let count = instructions::dump(
                &dir,
                pid,
                n + 1,
                batches.len() * 10,
                peer,
                network.backend,
                network.latency_ms,
            )
            .await?;
            self.check(
                format!(
                    "{} under callgrind ({label}): every record succeeded",
                    peer.name()
                ),
                run.failures == 0,
                format!("{} in batchItemFailures", run.failures),
            );
            self.report.instructions.push(count);
        }
        function.shutdown().await;
        Ok(())
    }

    /// Keeps a run, after checking its request counts and answers (facts, not timings).
    pub(crate) fn record(&mut self, run: Run) {
        self.check_counts(&run);
        self.report.runs.push(run);
    }

    /// Checks a run's DynamoDB and payments API requests per message against what its peer and kind must make, and
    /// that every record succeeded.
    pub(crate) fn check_counts(&mut self, run: &Run) {
        let (dynamodb, payments) = expected(run.peer, run.kind);
        let what = format!(
            "{} {:?} ({} {:?} {} ms)",
            run.peer.name(),
            run.kind,
            run.purpose,
            run.backend,
            run.latency_ms
        );
        let measured: HashMap<&str, f64> = run
            .dynamodb_per_msg
            .iter()
            .map(|(op, n)| (op.as_str(), *n))
            .collect();
        let wanted: HashMap<&str, f64> = dynamodb.iter().copied().collect();
        let same = measured.len() == wanted.len()
            && wanted
                .iter()
                .all(|(op, n)| measured.get(op).is_some_and(|m| (m - n).abs() < 1e-9));
        self.check(
            format!("{what}: DynamoDB requests per message"),
            same,
            format!("measured {measured:?}, expected {wanted:?}"),
        );
        self.check(
            format!("{what}: payments API requests per message"),
            (run.payments_per_msg - payments).abs() < 1e-9,
            format!("measured {}, expected {payments}", run.payments_per_msg),
        );
        self.check(
            format!("{what}: every record succeeded"),
            run.failures == 0,
            format!("{} in batchItemFailures", run.failures),
        );
    }

    /// The bill per million messages of the claim mode, the keyed mode and Powertools (module `bill`), printed and
    /// kept; checks what the keyed mode promises: 1 write unit and at most 1 read unit per fresh message, no write
    /// per duplicate, and the lowest bill for fresh messages and for duplicates (on the counts: Lambda's duration
    /// is a timing, shown and not checked).
    pub(crate) fn bill(&mut self) {
        let mut lines = Vec::new();
        for peer in crate::bill::BILLED {
            for kind in [Kind::Fresh, Kind::Duplicate] {
                match crate::bill::line(&self.report.runs, peer, kind) {
                    Some(line) => lines.push(line),
                    None => self.check(
                        format!("bill: {} {kind:?} measured", peer.name()),
                        false,
                        "a run it needs is missing or was not measured".to_owned(),
                    ),
                }
            }
        }
        eprintln!("{}", crate::bill::table(&lines));
        let find = |peer: Peer, kind: Kind| {
            lines
                .iter()
                .find(|l| l.peer == peer && l.kind == kind)
                .cloned()
        };
        if let (Some(fresh), Some(dup)) = (
            find(Peer::SqsafeKeyed, Kind::Fresh),
            find(Peer::SqsafeKeyed, Kind::Duplicate),
        ) {
            self.check(
                "bill: the keyed mode writes 1.0 unit per fresh message".to_owned(),
                (fresh.units.write - 1.0).abs() < 1e-9,
                format!("{:.3} write units", fresh.units.write),
            );
            self.check(
                "bill: the keyed mode reads at most 1.0 unit per fresh message".to_owned(),
                fresh.units.read <= 1.0 + 1e-9,
                format!("{:.3} read units", fresh.units.read),
            );
            self.check(
                "bill: the keyed mode writes nothing for a duplicate".to_owned(),
                dup.units.write.abs() < 1e-9,
                format!("{:.3} write units", dup.units.write),
            );
            // On what the counts give (DynamoDB, Lambda requests, SQS): Lambda's duration is a timing, and a
            // check never depends on one. The table's totals add it.
            for (keyed, kind) in [(&fresh, Kind::Fresh), (&dup, Kind::Duplicate)] {
                for other in [Peer::Sqsafe, Peer::Powertools] {
                    let Some(o) = find(other, kind) else {
                        continue;
                    };
                    self.check(
                        format!(
                            "bill: the keyed mode costs less per {} message than {} (Lambda's duration aside)",
                            format!("{kind:?}").to_lowercase(),
                            crate::bill::label(other)
                        ),
                        keyed.counted_usd < o.counted_usd,
                        format!(
                            "${:.3} vs ${:.3} per million; totals with the duration ${:.3} vs ${:.3}",
                            keyed.counted_usd, o.counted_usd, keyed.total_usd, o.total_usd
                        ),
                    );
                }
            }
        }
        self.report.bill = lines;
        self.report.prices = Some(crate::bill::PRICES);
    }

    /// Only what the bill needs (`--bill-only`): for each consumer billed, a batch of 10 fresh payments and the same
    /// batch again on moto (requests and capacity units), and the timed run on the billed network setting, each on
    /// a warm process of its own; then the bill and its checks.
    pub(crate) async fn bill_only(&mut self) -> Result<(), String> {
        let bed = self.bed;
        for peer in crate::bill::BILLED {
            eprintln!("==> {} (the bill)", peer.name());
            let mut function = self.warm(peer, None).await?;
            let batch = vec![self.fresh(peer, "requests", 10)];
            let fresh = function
                .run(&bed.proxy, Network::MOTO, Kind::Fresh, "requests", &batch)
                .await?;
            let again = function
                .run(
                    &bed.proxy,
                    Network::MOTO,
                    Kind::Duplicate,
                    "requests",
                    &batch,
                )
                .await?;
            self.record(fresh);
            self.record(again);
            let network = Network {
                backend: crate::bill::BILLED_BACKEND,
                latency_ms: crate::bill::BILLED_LATENCY_MS,
            };
            let batches = self.fresh_batches(peer, "billed", self.plan.batches(network), 10);
            let timed = function
                .run(&bed.proxy, network, Kind::Fresh, "latency", &batches)
                .await?;
            self.record(timed);
            function.shutdown().await;
        }
        self.bill();
        Ok(())
    }

    /// Each payment sent fresh was charged exactly once, whoever consumed it and however often.
    pub(crate) fn check_ledger(&mut self) {
        let charges = self.bed.payments.charges();
        let mut per_payment: HashMap<String, usize> = HashMap::new();
        for charge in &charges {
            *per_payment.entry(charge.payment_id.clone()).or_default() += 1;
        }
        let twice = per_payment.values().filter(|n| **n > 1).count();
        self.check(
            "payments API: one charge per payment sent".to_owned(),
            per_payment.len() == self.fresh_sent && twice == 0,
            format!(
                "{} payments sent, {} charged, {twice} charged more than once",
                self.fresh_sent,
                per_payment.len()
            ),
        );
    }
}

/// DynamoDB requests per message by operation, and payments API requests per message, that each peer makes by
/// design: a fresh payment is claimed (PutItem), charged, completed (UpdateItem); a duplicate is one conditional
/// PutItem that fails and returns the stored record (`ReturnValuesOnConditionCheckFailure = ALL_OLD`, both
/// sqsafe and Powertools 3); a cache hit makes no request. The naive peer charges every delivery.
fn expected(peer: Peer, kind: Kind) -> (&'static [(&'static str, f64)], f64) {
    match (peer, kind) {
        (Peer::Naive, _) => (&[], 1.0),
        // One read for the batch of 10, one write per fresh payment; a duplicate is the read alone.
        (Peer::SqsafeKeyed, Kind::Fresh) => (&[("BatchGetItem", 0.1), ("PutItem", 1.0)], 1.0),
        (Peer::SqsafeKeyed, Kind::Duplicate) => (&[("BatchGetItem", 0.1)], 0.0),
        (_, Kind::Fresh) => (&[("PutItem", 1.0), ("UpdateItem", 1.0)], 1.0),
        (_, Kind::Duplicate) => (&[("PutItem", 1.0)], 0.0),
        (_, Kind::CacheHit) => (&[], 0.0),
    }
}
