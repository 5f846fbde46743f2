//! Figure 7b: does a fuller idempotency table cost more? Each peer's table is prefilled with completed records
//! (straight into moto, 25 per BatchWriteItem) before its fresh and duplicate batches are measured again.

use std::collections::HashMap;
use std::time::{Instant, SystemTime, UNIX_EPOCH};

use aws_sdk_dynamodb::types::{AttributeValue, PutRequest, WriteRequest};
use tokio::task::JoinSet;

use crate::bed::{Bed, POWERTOOLS_TABLE, Peer, SQSAFE_TABLE};
use crate::bench::Bench;
use crate::figures::Kind;
use crate::measure::Network;
use crate::report::TableSize;

/// Concurrent BatchWriteItem requests while prefilling.
const PREFILL_CLIENTS: usize = 4;

impl Bench<'_> {
    pub(crate) async fn table_sizes(&mut self) -> Result<(), String> {
        eprintln!("==> table sizes");
        let mut functions = Vec::new();
        for peer in [Peer::Sqsafe, Peer::Powertools] {
            functions.push(self.warm(peer, None).await?);
        }
        let mut filled = 0;
        let mut items_per_s: Option<f64> = None;
        for size in self.plan.table_sizes.clone() {
            let needed = size.saturating_sub(filled);
            if let Some(rate) = items_per_s {
                let estimate = 2.0 * needed as f64 / rate;
                if estimate > self.plan.prefill_budget.as_secs_f64() {
                    self.report.table_size_notes.push(format!(
                        "{size} records skipped: prefilling would take about {estimate:.0} s at moto's {rate:.0} items/s"
                    ));
                    continue;
                }
            }
            let started = Instant::now();
            for table in [SQSAFE_TABLE, POWERTOOLS_TABLE] {
                prefill(self.bed, table, filled, needed).await?;
            }
            let seconds = started.elapsed().as_secs_f64();
            items_per_s = Some(2.0 * needed as f64 / seconds.max(1e-3));
            self.report.table_size_notes.push(format!(
                "prefilled {needed} records into each table in {seconds:.1} s"
            ));
            filled = size;
            for function in &mut functions {
                let peer = function.peer;
                let batches = self.fresh_batches(
                    peer,
                    &format!("table{size}"),
                    self.plan.batches_per_table,
                    10,
                );
                let proxy = &self.bed.proxy;
                let fresh = function
                    .run(proxy, Network::MOTO, Kind::Fresh, "table_size", &batches)
                    .await?;
                let again = function
                    .run(
                        proxy,
                        Network::MOTO,
                        Kind::Duplicate,
                        "table_size",
                        &batches,
                    )
                    .await?;
                let records = item_count(self.bed, peer).await?;
                self.report.table_sizes.push(TableSize {
                    peer,
                    prefilled: size,
                    records,
                    fresh: fresh.duration.clone(),
                    duplicate: again.duration.clone(),
                    fresh_cpu_us_per_msg: fresh.cpu_us_per_msg,
                });
                self.record(fresh);
                self.record(again);
            }
        }
        for function in functions {
            function.shutdown().await;
        }
        Ok(())
    }
}

async fn item_count(bed: &Bed, peer: Peer) -> Result<i64, String> {
    let table = peer.table().ok_or("no table")?;
    let described = bed
        .dynamodb
        .describe_table()
        .table_name(table)
        .send()
        .await
        .map_err(|e| format!("describe {table}: {e:?}"))?;
    Ok(described.table().and_then(|t| t.item_count()).unwrap_or(0))
}

/// Writes records `first..first + n` into `table`, shaped like the peer's completed records.
async fn prefill(bed: &Bed, table: &'static str, first: usize, n: usize) -> Result<(), String> {
    let now = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_secs());
    let chunks: Vec<Vec<usize>> = (first..first + n)
        .collect::<Vec<_>>()
        .chunks(25)
        .map(<[usize]>::to_vec)
        .collect();
    let mut chunks = chunks.into_iter();
    let mut tasks = JoinSet::new();
    loop {
        while tasks.len() < PREFILL_CLIENTS {
            let Some(chunk) = chunks.next() else { break };
            let client = bed.dynamodb.clone();
            tasks.spawn(async move {
                let writes: Vec<WriteRequest> =
                    chunk.iter().map(|i| write(table, *i, now)).collect();
                client
                    .batch_write_item()
                    .request_items(table, writes)
                    .send()
                    .await
                    .map_err(|e| format!("prefill {table}: {e:?}"))
                    .and_then(
                        |out| match out.unprocessed_items().map_or(0, HashMap::len) {
                            0 => Ok(()),
                            _ => Err(format!("prefill {table}: moto left items unprocessed")),
                        },
                    )
            });
        }
        match tasks.join_next().await {
            Some(done) => done.map_err(|e| format!("prefill task: {e}"))??,
            None => return Ok(()),
        }
    }
}

fn write(table: &str, i: usize, now: u64) -> WriteRequest {
    let s = |v: String| AttributeValue::S(v);
    let n = |v: u64| AttributeValue::N(v.to_string());
    let expiration = now + 30 * 86_400;
    let item: HashMap<String, AttributeValue> = if table == SQSAFE_TABLE {
        HashMap::from([
            (
                "pk".to_owned(),
                s(format!("charge-payment#v1#acme#payment:prefill-{i}")),
            ),
            ("status".to_owned(), s("COMPLETED".to_owned())),
            ("expiration".to_owned(), n(expiration)),
            ("token".to_owned(), s(format!("{i:032x}"))),
            ("fingerprint".to_owned(), s(format!("{i:064x}"))),
            (
                "result".to_owned(),
                s(format!(
                    r#"{{"id":"ch_{i}","amount":1250,"currency":"EUR"}}"#
                )),
            ),
            ("consumer".to_owned(), s("charge-payment".to_owned())),
            ("consumer_version".to_owned(), n(1)),
            ("attempt".to_owned(), n(1)),
            ("created_at".to_owned(), n(now * 1000)),
            ("correlation_id".to_owned(), s(format!("corr-prefill-{i}"))),
        ])
    } else {
        HashMap::from([
            (
                "id".to_owned(),
                s(format!("powertools.handler.charge#{i:032x}")),
            ),
            ("status".to_owned(), s("COMPLETED".to_owned())),
            ("expiration".to_owned(), n(expiration)),
            (
                "data".to_owned(),
                s(format!(
                    r#"{{"id":"ch_{i}","amount":1250,"currency":"EUR"}}"#
                )),
            ),
            ("validation".to_owned(), s(format!("{i:032x}"))),
        ])
    };
    let put = PutRequest::builder().set_item(Some(item)).build();
    let mut request = WriteRequest::builder();
    if let Ok(put) = put {
        request = request.put_request(put);
    }
    request.build()
}
