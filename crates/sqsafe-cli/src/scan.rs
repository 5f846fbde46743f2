//! Reading a queue without consuming it: receive with a visibility timeout, keep the messages invisible while the
//! command works, then make every one not deleted visible again.

use std::collections::HashMap;

use aws_sdk_sqs::Client;
use aws_sdk_sqs::types::{
    ChangeMessageVisibilityBatchRequestEntry, Message, MessageSystemAttributeName,
};

use crate::error::Error;
use crate::queue::{self, Queue};

/// How a scan receives.
///
/// # Default
/// visibility timeout 120 s, long-poll wait 1 s, at most 1,000 messages.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ScanOptions {
    /// How long received messages stay invisible while the command works (1 to 43,200 s). If the command dies, they
    /// come back by themselves after this.
    pub visibility_timeout_secs: i32,
    /// `WaitTimeSeconds` of each receive (0 to 20). A long poll asks every SQS server, so an empty answer means the
    /// queue has nothing visible left; a short poll (0) may miss messages on a small queue.
    pub wait_secs: i32,
    /// The most messages one scan holds.
    pub limit: usize,
}

impl Default for ScanOptions {
    fn default() -> Self {
        Self {
            visibility_timeout_secs: 120,
            wait_secs: 1,
            limit: 1000,
        }
    }
}

impl ScanOptions {
    fn validate(&self) -> Result<(), Error> {
        if !(1..=43_200).contains(&self.visibility_timeout_secs) {
            return Err(Error::Usage(
                "the visibility timeout must be 1 to 43200 seconds".into(),
            ));
        }
        if !(0..=20).contains(&self.wait_secs) {
            return Err(Error::Usage("the wait must be 0 to 20 seconds".into()));
        }
        if self.limit == 0 {
            return Err(Error::Usage("the limit must be at least 1".into()));
        }
        Ok(())
    }
}

/// Why a scan stopped.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Stopped {
    /// A receive returned nothing: every visible message was seen (on a FIFO queue: every group's first messages,
    /// since SQS holds back a group's later messages while earlier ones are in flight).
    Empty,
    /// A message came back that the scan already held (its visibility timeout passed): the queue was gone through.
    Repeated,
    /// The scan holds [`ScanOptions::limit`] messages: more may remain.
    Limit,
}

impl Stopped {
    /// `empty`, `repeated` or `limit`.
    pub fn as_str(self) -> &'static str {
        match self {
            Stopped::Empty => "empty",
            Stopped::Repeated => "repeated",
            Stopped::Limit => "limit",
        }
    }
}

/// The messages a scan holds, in the order received; each must be deleted or [`restore`](Scanned::restore)d.
#[derive(Debug)]
pub struct Scanned {
    pub(crate) queue: Queue,
    pub(crate) messages: Vec<Message>,
    /// The latest receipt handle per message id (a message received twice has a new one).
    pub(crate) receipts: HashMap<String, String>,
    /// Why the scan stopped.
    pub stopped: Stopped,
}

impl Scanned {
    /// The queue's URL.
    pub fn queue_url(&self) -> &str {
        &self.queue.url
    }

    /// The messages received, in order.
    pub fn messages(&self) -> &[Message] {
        &self.messages
    }

    /// Makes every message not yet deleted visible again (`ChangeMessageVisibility` to 0, in batches of 10).
    /// Returns how many were restored and how many could not be (those come back after the visibility timeout).
    pub async fn restore(&mut self, sqs: &Client) -> (usize, usize) {
        let receipts: Vec<String> = self
            .messages
            .iter()
            .filter_map(|m| self.receipts.get(m.message_id()?).cloned())
            .collect();
        self.receipts.clear();
        let (mut restored, mut failed) = (0, 0);
        for chunk in receipts.chunks(10) {
            let entries = chunk.iter().enumerate().filter_map(|(i, receipt)| {
                ChangeMessageVisibilityBatchRequestEntry::builder()
                    .id(format!("m{i}"))
                    .receipt_handle(receipt)
                    .visibility_timeout(0)
                    .build()
                    .ok()
            });
            match sqs
                .change_message_visibility_batch()
                .queue_url(&self.queue.url)
                .set_entries(Some(entries.collect()))
                .send()
                .await
            {
                Ok(out) => {
                    restored += out.successful().len();
                    failed += out.failed().len();
                }
                Err(_) => failed += chunk.len(),
            }
        }
        (restored, failed)
    }

    /// Forgets `message_id` after it was deleted, so that [`restore`](Self::restore) leaves it alone.
    pub(crate) fn forget(&mut self, message_id: &str) {
        self.receipts.remove(message_id);
    }

    /// The receipt handle to delete or restore `message_id` with.
    pub(crate) fn receipt(&self, message_id: &str) -> Option<&str> {
        self.receipts.get(message_id).map(String::as_str)
    }
}

/// Receives what `queue` holds, up to [`ScanOptions::limit`] messages, with every attribute. It stops at the first
/// empty receive, at a message it already holds, or at the limit, so it always ends. The messages stay invisible
/// until [`Scanned::restore`] (or their visibility timeout).
///
/// # Errors
/// The queue cannot be found, or a receive fails (what was received by then is made visible again first).
pub async fn scan(sqs: &Client, queue: &str, options: &ScanOptions) -> Result<Scanned, Error> {
    options.validate()?;
    let queue = queue::resolve(sqs, queue).await?;
    let mut scanned = Scanned {
        queue,
        messages: Vec::new(),
        receipts: HashMap::new(),
        stopped: Stopped::Limit,
    };
    while scanned.messages.len() < options.limit {
        let room = (options.limit - scanned.messages.len()).min(10);
        let received = sqs
            .receive_message()
            .queue_url(&scanned.queue.url)
            .max_number_of_messages(i32::try_from(room).unwrap_or(10))
            .visibility_timeout(options.visibility_timeout_secs)
            .wait_time_seconds(options.wait_secs)
            .message_system_attribute_names(MessageSystemAttributeName::All)
            .message_attribute_names("All")
            .send()
            .await;
        let received = match received {
            Ok(out) => out.messages.unwrap_or_default(),
            Err(e) => {
                scanned.restore(sqs).await;
                return Err(Error::sqs("ReceiveMessage", e));
            }
        };
        if received.is_empty() {
            scanned.stopped = Stopped::Empty;
            return Ok(scanned);
        }
        let mut repeated = false;
        for message in received {
            let (Some(id), Some(receipt)) = (message.message_id(), message.receipt_handle()) else {
                continue;
            };
            if scanned
                .receipts
                .insert(id.to_owned(), receipt.to_owned())
                .is_some()
            {
                repeated = true; // held already: only its receipt handle is new
            } else {
                scanned.messages.push(message);
            }
        }
        if repeated {
            scanned.stopped = Stopped::Repeated;
            return Ok(scanned);
        }
    }
    Ok(scanned)
}
