//! The bill: dollars per million messages, fresh and duplicate, of the claim mode, the keyed mode and Powertools,
//! from the capacity units and requests counted at the proxy and the batch durations measured, at the prices below.

use serde::Serialize;

use crate::bed::Peer;
use crate::capacity::Units;
use crate::proxy::Backend;
use crate::report::{Kind, Run};

/// On-demand prices, us-east-1, as published by AWS (checked 2026-12-04; see bench/README.md for the pages).
#[derive(Debug, Clone, Copy, Serialize)]
pub(crate) struct Prices {
    /// DynamoDB on-demand, per million write request units.
    pub(crate) dynamodb_write_per_million: f64,
    /// DynamoDB on-demand, per million read request units.
    pub(crate) dynamodb_read_per_million: f64,
    /// Lambda, per million requests (invocations).
    pub(crate) lambda_requests_per_million: f64,
    /// Lambda on arm64, per GB-second.
    pub(crate) lambda_gb_second: f64,
    /// SQS standard queue, per million requests (after the free tier).
    pub(crate) sqs_requests_per_million: f64,
    /// The function's memory: template.yaml's `FunctionMemorySize` default.
    pub(crate) memory_mb: f64,
    /// SQS requests per message: its `SendMessage`, and its share of the event source mapping's `ReceiveMessage`
    /// and `DeleteMessageBatch` for a batch of 10.
    pub(crate) sqs_requests_per_message: f64,
}

pub(crate) const PRICES: Prices = Prices {
    dynamodb_write_per_million: 0.625,
    dynamodb_read_per_million: 0.125,
    lambda_requests_per_million: 0.20,
    lambda_gb_second: 0.000_013_333_4,
    sqs_requests_per_million: 0.40,
    memory_mb: 256.0,
    sqs_requests_per_message: 1.0 + 0.1 + 0.1,
};

/// The latency setting whose batch durations are billed: the canned backend with 5 ms per request (DynamoDB in the
/// same region answering in a few milliseconds; moto's own slowness left out).
pub(crate) const BILLED_BACKEND: Backend = Backend::Canned;
pub(crate) const BILLED_LATENCY_MS: u64 = 5;

/// One consumer's bill per million messages, for fresh messages or duplicates.
#[derive(Debug, Clone, Serialize)]
pub(crate) struct Line {
    pub(crate) peer: Peer,
    pub(crate) kind: Kind,
    /// Capacity units per message by DynamoDB's sizing rules, and as moto reported them.
    pub(crate) units: Units,
    pub(crate) moto_units: Option<Units>,
    /// DynamoDB requests per message.
    pub(crate) dynamodb_requests: f64,
    /// Median duration of a batch of `batch_size` fresh messages, billed (rounded up to the millisecond).
    pub(crate) batch_ms: f64,
    pub(crate) batch_size: usize,
    pub(crate) dynamodb_usd: f64,
    pub(crate) lambda_usd: f64,
    pub(crate) sqs_usd: f64,
    pub(crate) total_usd: f64,
}

/// The consumers billed.
pub(crate) const BILLED: [Peer; 3] = [Peer::Sqsafe, Peer::SqsafeKeyed, Peer::Powertools];

/// The bill of `peer` for `kind` from its runs: `None` when a run it needs is missing or was not measured.
pub(crate) fn line(runs: &[Run], peer: Peer, kind: Kind) -> Option<Line> {
    let requests = runs.iter().find(|r| {
        r.peer == peer && r.purpose == "requests" && r.kind == kind && r.backend == Backend::Moto
    })?;
    let timed = runs.iter().find(|r| {
        r.peer == peer
            && r.purpose == "latency"
            && r.kind == Kind::Fresh
            && r.backend == BILLED_BACKEND
            && r.latency_ms == BILLED_LATENCY_MS
    })?;
    let units = requests.units_per_msg?;
    let p = PRICES;
    let dynamodb_usd =
        units.write * p.dynamodb_write_per_million + units.read * p.dynamodb_read_per_million;
    let batch = timed.batch_size.max(1) as f64;
    let batch_ms = timed.duration.p50_ms.ceil();
    let gb_seconds_per_msg = batch_ms / 1e3 * (p.memory_mb / 1024.0) / batch;
    let lambda_usd =
        p.lambda_requests_per_million / batch + gb_seconds_per_msg * p.lambda_gb_second * 1e6;
    let sqs_usd = p.sqs_requests_per_message * p.sqs_requests_per_million;
    Some(Line {
        peer,
        kind,
        units,
        moto_units: requests.moto_units_per_msg,
        dynamodb_requests: requests.dynamodb_total_per_msg,
        batch_ms,
        batch_size: timed.batch_size,
        dynamodb_usd,
        lambda_usd,
        sqs_usd,
        total_usd: dynamodb_usd + lambda_usd + sqs_usd,
    })
}

/// The bill as a table, for the terminal.
pub(crate) fn table(lines: &[Line]) -> String {
    let mut out = String::from(
        "per million messages        | kind      | WRU  | RRU  | moto WRU/RRU | DynamoDB $ | Lambda $ | SQS $ | total $\n",
    );
    for l in lines {
        let moto = l
            .moto_units
            .map_or("-".to_owned(), |u| format!("{:.2}/{:.2}", u.write, u.read));
        out.push_str(&format!(
            "{:<28}| {:<9} | {:.2} | {:.2} | {:<12} | {:>10.3} | {:>8.3} | {:>5.3} | {:>7.3}\n",
            l.peer.name(),
            format!("{:?}", l.kind).to_lowercase(),
            l.units.write,
            l.units.read,
            moto,
            l.dynamodb_usd,
            l.lambda_usd,
            l.sqs_usd,
            l.total_usd
        ));
    }
    out
}
