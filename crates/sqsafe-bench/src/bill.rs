//! The bill: dollars per million messages, fresh and duplicate, of the claim mode, the keyed mode and Powertools,
//! from the capacity units and requests counted at the proxy and the batch durations measured, at the prices below.

use serde::Serialize;

use crate::bed::Peer;
use crate::capacity::Units;
use crate::figures::{Kind, Run};
use crate::proxy::Backend;

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
    /// Lambda's requests (a share of one invocation per batch) and its duration (GB-s, from a timing).
    pub(crate) lambda_requests_usd: f64,
    pub(crate) lambda_duration_usd: f64,
    pub(crate) lambda_usd: f64,
    pub(crate) sqs_usd: f64,
    /// Everything but Lambda's duration: what the counts alone give, whatever the machine's load. The smoke
    /// compares the consumers on this; the total adds the duration.
    pub(crate) counted_usd: f64,
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
    let lambda_requests_usd = p.lambda_requests_per_million / batch;
    let lambda_duration_usd = gb_seconds_per_msg * p.lambda_gb_second * 1e6;
    let sqs_usd = p.sqs_requests_per_message * p.sqs_requests_per_million;
    let counted_usd = dynamodb_usd + lambda_requests_usd + sqs_usd;
    Some(Line {
        peer,
        kind,
        units,
        moto_units: requests.moto_units_per_msg,
        dynamodb_requests: requests.dynamodb_total_per_msg,
        batch_ms,
        batch_size: timed.batch_size,
        dynamodb_usd,
        lambda_requests_usd,
        lambda_duration_usd,
        lambda_usd: lambda_requests_usd + lambda_duration_usd,
        sqs_usd,
        counted_usd,
        total_usd: counted_usd + lambda_duration_usd,
    })
}

/// What the bill calls each consumer.
pub(crate) fn label(peer: Peer) -> &'static str {
    match peer {
        Peer::Sqsafe => "sqsafe, claim mode",
        Peer::SqsafeKeyed => "sqsafe, keyed mode",
        Peer::Powertools => "Powertools",
        other => other.name(),
    }
}

/// The bill for the terminal: the prices, the units per message (both counts), and dollars per million messages
/// (one row per consumer, fresh and duplicate columns).
pub(crate) fn table(lines: &[Line]) -> String {
    let p = PRICES;
    let mut out = format!(
        "prices (on-demand, us-east-1): DynamoDB ${} per million WRU, ${} per million RRU; Lambda ${} per million \
         requests, ${} per GB-s (arm64) at {} MB; SQS ${} per million requests, {:.1} per message\n\
         units per message: WRU/RRU by DynamoDB's sizing rules, moto's ReturnConsumedCapacity beside them \
         ('-': none reported, as on a refused write)\n",
        p.dynamodb_write_per_million,
        p.dynamodb_read_per_million,
        p.lambda_requests_per_million,
        p.lambda_gb_second,
        p.memory_mb,
        p.sqs_requests_per_million,
        p.sqs_requests_per_message,
    );
    for l in lines {
        let moto = l
            .moto_units
            .map_or("-".to_owned(), |u| format!("{:.2}/{:.2}", u.write, u.read));
        out.push_str(&format!(
            "  {:<20} {:<9}  rules {:.2}/{:.2}  moto {:<9}  DynamoDB requests {:.2}\n",
            label(l.peer),
            format!("{:?}", l.kind).to_lowercase(),
            l.units.write,
            l.units.read,
            moto,
            l.dynamodb_requests,
        ));
    }
    out.push_str(
        "$ per million messages: total (counted: DynamoDB + Lambda requests + SQS; the rest is Lambda's GB-s)\n\
         \x20 consumer             | fresh                  | duplicate\n",
    );
    for peer in BILLED {
        let cell = |kind: Kind| {
            lines
                .iter()
                .find(|l| l.peer == peer && l.kind == kind)
                .map_or("-".to_owned(), |l| {
                    format!("{:.3} ({:.3} counted)", l.total_usd, l.counted_usd)
                })
        };
        out.push_str(&format!(
            "  {:<20} | {:<22} | {}\n",
            label(peer),
            cell(Kind::Fresh),
            cell(Kind::Duplicate)
        ));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::figures::{Spread, Summary};

    fn run(purpose: &'static str, kind: Kind, backend: Backend, latency_ms: u64) -> Run {
        Run {
            peer: Peer::SqsafeKeyed,
            purpose,
            kind,
            backend,
            latency_ms,
            batch_size: 10,
            batches: 3,
            duration: Summary {
                p50_ms: 40.2,
                ..Summary::default()
            },
            cpu_us_per_msg: 0.0,
            user_us_per_msg: 0.0,
            system_us_per_msg: 0.0,
            dynamodb_per_msg: Default::default(),
            dynamodb_total_per_msg: 1.1,
            payments_per_msg: 1.0,
            units_per_msg: Some(Units {
                read: 1.0,
                write: 1.0,
            }),
            moto_units_per_msg: None,
            critical_path: Spread::default(),
            log_lines_per_msg: 0.0,
            failures: 0,
        }
    }

    #[test]
    fn a_line_is_the_counted_units_at_the_prices_plus_the_billed_duration() {
        let runs = vec![
            run("requests", Kind::Fresh, Backend::Moto, 0),
            run("latency", Kind::Fresh, BILLED_BACKEND, BILLED_LATENCY_MS),
        ];
        let l = line(&runs, Peer::SqsafeKeyed, Kind::Fresh).expect("both runs are there");
        let close = |a: f64, b: f64| (a - b).abs() < 1e-9;
        // 1 WRU at $0.625 and 1 RRU at $0.125 per million.
        assert!(close(l.dynamodb_usd, 0.75), "{l:?}");
        // A tenth of an invocation at $0.20 per million.
        assert!(close(l.lambda_requests_usd, 0.02), "{l:?}");
        // 41 ms (40.2 rounded up) at 256 MB for 10 messages: 0.001025 GB-s each.
        assert_eq!(l.batch_ms, 41.0);
        assert!(
            close(
                l.lambda_duration_usd,
                0.041 * 0.25 / 10.0 * 0.000_013_333_4 * 1e6
            ),
            "{l:?}"
        );
        // 1.2 SQS requests at $0.40 per million.
        assert!(close(l.sqs_usd, 0.48), "{l:?}");
        assert!(close(l.counted_usd, 0.75 + 0.02 + 0.48), "{l:?}");
        assert!(
            close(l.total_usd, l.counted_usd + l.lambda_duration_usd),
            "{l:?}"
        );
        // No duplicate run, or no timed run on the billed setting: no line.
        assert!(line(&runs, Peer::SqsafeKeyed, Kind::Duplicate).is_none());
        assert!(line(&runs[..1], Peer::SqsafeKeyed, Kind::Fresh).is_none());
    }
}
