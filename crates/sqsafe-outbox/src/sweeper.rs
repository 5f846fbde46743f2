//! The sweeper: publishes every outbox event still `PENDING` after a threshold, whatever happened to its stream
//! record (the relay gave up after its retries, the relay was down longer than the stream's 24 hours, a record was
//! lost). It reads only pending items, oldest first, from the table's sparse index ([`PENDING_INDEX`]), and publishes
//! each with the relay's own publish-then-mark, so a republish is what a stream redelivery would be: harmless, since
//! the consumer is idempotent and a FIFO destination deduplicates on the event id.
//!
//! [`PENDING_INDEX`]: crate::PENDING_INDEX

use std::collections::HashMap;
use std::fmt;
use std::sync::Arc;
use std::time::Duration;

use aws_sdk_dynamodb::types::AttributeValue;
use sqsafe_idempotency::{Clock, SystemClock};

use crate::error::{Error, Result};
use crate::item::{OutboxRecord, PENDING_INDEX, Status, attributes};
use crate::relay::{Relay, Relayed, epoch_millis};

/// What one [`Sweeper::sweep`] did.
#[derive(Debug, Default)]
#[non_exhaustive]
pub struct Swept {
    /// The events published and marked (event id, what the relay did), oldest first.
    pub published: Vec<(String, Relayed)>,
    /// The events that were due but could not be published or marked (event id, why): they stay `PENDING` and the
    /// next sweep tries again; [`oldest_pending`](Swept::oldest_pending) keeps growing until one succeeds.
    pub failed: Vec<(String, Error)>,
    /// How old the oldest item still pending was when the sweep began (`None`: nothing pending). The metric the
    /// outbox-age alarm watches.
    pub oldest_pending: Option<Duration>,
    /// More items were due than one sweep takes ([`Sweeper::max_per_sweep`]): the next sweep continues.
    pub more: bool,
}

/// Publishes the outbox events still `PENDING` after [`older_than`](Sweeper::older_than), at most
/// [`max_per_sweep`](Sweeper::max_per_sweep) per call, through a [`Relay`] (its allowed destinations and its mark).
///
/// # Default
/// Events pending 5 minutes or more, 100 per sweep, the index [`PENDING_INDEX`], key attributes `pk` and `sk`
/// (as [`Outbox`](crate::Outbox) writes them), the system clock.
#[derive(Clone)]
pub struct Sweeper {
    relay: Relay,
    index: String,
    partition_key: String,
    sort_key: String,
    older_than: Duration,
    max_per_sweep: u32,
    clock: Arc<dyn Clock>,
}

impl fmt::Debug for Sweeper {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Sweeper")
            .field("relay", &self.relay)
            .field("index", &self.index)
            .field("older_than", &self.older_than)
            .field("max_per_sweep", &self.max_per_sweep)
            .finish_non_exhaustive()
    }
}

impl Sweeper {
    /// A sweeper of the relay's table.
    pub fn new(relay: Relay) -> Self {
        Self {
            relay,
            index: PENDING_INDEX.to_owned(),
            partition_key: "pk".into(),
            sort_key: "sk".into(),
            older_than: Duration::from_secs(300),
            max_per_sweep: 100,
            clock: Arc::new(SystemClock),
        }
    }

    /// Publishes only events pending at least this long, so that it does not race the relay on what the stream is
    /// about to deliver (a race would only publish twice, which the consumers absorb, but costs a message).
    pub fn older_than(mut self, age: Duration) -> Self {
        self.older_than = age;
        self
    }

    /// At most this many events per sweep (at least 1), so one run stays well within its function's timeout.
    pub fn max_per_sweep(mut self, max: u32) -> Self {
        self.max_per_sweep = max.max(1);
        self
    }

    /// Another name for the sparse index on pending items.
    pub fn index(mut self, index: impl Into<String>) -> Self {
        self.index = index.into();
        self
    }

    /// The table's key attributes, when [`Outbox::key_attributes`](crate::Outbox::key_attributes) changed them.
    pub fn key_attributes(
        mut self,
        partition_key: impl Into<String>,
        sort_key: impl Into<String>,
    ) -> Self {
        self.partition_key = partition_key.into();
        self.sort_key = sort_key.into();
        self
    }

    /// The clock that decides what is due and how old it is.
    pub fn clock(mut self, clock: impl Clock) -> Self {
        self.clock = Arc::new(clock);
        self
    }

    /// Reads the oldest pending items and publishes those due, oldest first.
    ///
    /// # Errors
    /// [`Error::Aws`] when the index cannot be read (nothing was published); a pending item that is not an outbox
    /// event's shape is [`Error::MalformedItem`] in [`Swept::failed`], not a failure of the sweep.
    pub async fn sweep(&self) -> Result<Swept> {
        let now_ms = epoch_millis(self.clock.now());
        let due_before = now_ms.saturating_sub(millis(self.older_than));
        let page = self
            .relay
            .dynamodb()
            .query()
            .table_name(self.relay.table())
            .index_name(&self.index)
            .key_condition_expression("#pending = :pending")
            .expression_attribute_names("#pending", attributes::PENDING)
            .expression_attribute_values(
                ":pending",
                AttributeValue::S(Status::Pending.as_str().into()),
            )
            .scan_index_forward(true)
            .limit(i32::try_from(self.max_per_sweep).unwrap_or(i32::MAX))
            .send()
            .await
            .map_err(|e| Error::aws("Query", &self.index, e))?;
        let items = page.items.unwrap_or_default();
        let mut swept = Swept {
            more: page.last_evaluated_key.is_some(),
            ..Swept::default()
        };
        for item in &items {
            let keys: HashMap<String, AttributeValue> = [&self.partition_key, &self.sort_key]
                .into_iter()
                .filter_map(|k| item.get(k).map(|v| (k.clone(), v.clone())))
                .collect();
            let record = match OutboxRecord::from_item(keys, item) {
                Ok(Some(record)) => record,
                Ok(None) => continue,
                Err(e) => {
                    let id = item
                        .get(attributes::EVENT_ID)
                        .and_then(|v| v.as_s().ok())
                        .cloned()
                        .unwrap_or_default();
                    swept.failed.push((id, e));
                    continue;
                }
            };
            if swept.oldest_pending.is_none() {
                swept.oldest_pending = Some(Duration::from_millis(
                    now_ms.saturating_sub(record.created_at_ms()),
                ));
            }
            if record.created_at_ms() > due_before {
                // Oldest first: everything after this one is younger still.
                swept.more = false;
                break;
            }
            let event_id = record.event().event_id().to_owned();
            match self.relay.relay(&record).await {
                Ok(relayed) => swept.published.push((event_id, relayed)),
                Err(e) => swept.failed.push((event_id, e)),
            }
        }
        Ok(swept)
    }
}

fn millis(d: Duration) -> u64 {
    u64::try_from(d.as_millis()).unwrap_or(u64::MAX)
}
