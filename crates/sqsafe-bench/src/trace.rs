//! What the proxy saw of one batch: requests per operation, and the critical path (the longest chain of requests
//! each of which started only after the previous one was answered).

use std::collections::BTreeMap;
use std::time::Instant;

/// Which port of the proxy a request came through.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub(crate) enum Service {
    DynamoDb,
    Payments,
}

/// One request as the proxy saw it.
#[derive(Debug, Clone)]
pub(crate) struct Exchange {
    pub(crate) service: Service,
    /// `PutItem` for DynamoDB, `POST /v1/charges` for the payments API.
    pub(crate) operation: String,
    /// When the request's head arrived.
    pub(crate) start: Instant,
    /// When its answer was handed back.
    pub(crate) end: Instant,
    /// Its capacity units by DynamoDB's sizing rules (a DynamoDB request on moto; `None` otherwise).
    pub(crate) units: Option<crate::capacity::Units>,
    /// The units moto reported for it (`ReturnConsumedCapacity`).
    pub(crate) reported: Option<crate::capacity::Units>,
}

/// Requests per operation, DynamoDB and payments API apart.
#[derive(Debug, Clone, Default, PartialEq)]
pub(crate) struct Counts {
    pub(crate) dynamodb: BTreeMap<String, u64>,
    pub(crate) payments: BTreeMap<String, u64>,
}

impl Counts {
    pub(crate) fn of(exchanges: &[Exchange]) -> Self {
        let mut counts = Self::default();
        for e in exchanges {
            let map = match e.service {
                Service::DynamoDb => &mut counts.dynamodb,
                Service::Payments => &mut counts.payments,
            };
            *map.entry(e.operation.clone()).or_default() += 1;
        }
        counts
    }

    pub(crate) fn dynamodb_total(&self) -> u64 {
        self.dynamodb.values().sum()
    }

    pub(crate) fn payments_total(&self) -> u64 {
        self.payments.values().sum()
    }
}

/// The number of round trips on the critical path: the longest chain e1, e2, ... where each request arrived after
/// the previous one was answered. Requests in flight together count once; a sequential processor's requests count
/// one each. Independent requests sent one after the other count as dependent: for latency they are.
pub(crate) fn critical_path(exchanges: &[Exchange]) -> usize {
    let mut by_start: Vec<&Exchange> = exchanges.iter().collect();
    by_start.sort_by_key(|e| e.start);
    let mut depth: Vec<usize> = Vec::with_capacity(by_start.len());
    for (i, e) in by_start.iter().enumerate() {
        let before = by_start[..i]
            .iter()
            .zip(&depth)
            .filter(|(earlier, _)| earlier.end <= e.start)
            .map(|(_, d)| *d)
            .max()
            .unwrap_or(0);
        depth.push(before + 1);
    }
    depth.into_iter().max().unwrap_or(0)
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;

    fn at(t0: Instant, service: Service, operation: &str, start: u64, end: u64) -> Exchange {
        Exchange {
            service,
            operation: operation.to_owned(),
            start: t0 + Duration::from_millis(start),
            end: t0 + Duration::from_millis(end),
            units: None,
            reported: None,
        }
    }

    #[test]
    fn concurrent_records_make_a_short_path() {
        let t0 = Instant::now();
        let mut batch = Vec::new();
        for i in 0..10 {
            batch.push(at(t0, Service::DynamoDb, "PutItem", i, 10 + i));
            batch.push(at(
                t0,
                Service::Payments,
                "POST /v1/charges",
                20 + i,
                30 + i,
            ));
            batch.push(at(t0, Service::DynamoDb, "UpdateItem", 40 + i, 50 + i));
        }
        assert_eq!(critical_path(&batch), 3);
        let counts = Counts::of(&batch);
        assert_eq!(counts.dynamodb["PutItem"], 10);
        assert_eq!(counts.dynamodb_total(), 20);
        assert_eq!(counts.payments_total(), 10);
    }

    #[test]
    fn a_sequential_processor_pays_every_round_trip() {
        let t0 = Instant::now();
        let batch: Vec<Exchange> = (0..30)
            .map(|i| at(t0, Service::DynamoDb, "PutItem", 10 * i, 10 * i + 9))
            .collect();
        assert_eq!(critical_path(&batch), 30);
    }

    #[test]
    fn overlap_is_not_dependence() {
        let t0 = Instant::now();
        // b starts before a ends; c starts after both.
        let batch = [
            at(t0, Service::DynamoDb, "PutItem", 0, 10),
            at(t0, Service::DynamoDb, "PutItem", 5, 15),
            at(t0, Service::DynamoDb, "UpdateItem", 15, 20),
        ];
        assert_eq!(critical_path(&batch), 2);
        assert_eq!(critical_path(&[]), 0);
    }
}
