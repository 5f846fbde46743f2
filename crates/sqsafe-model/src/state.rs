//! What the model's world holds at one instant: the queue, the table, the instances, the writes and requests in
//! flight, and the ghost facts the properties read.

use sqsafe_idempotency::Status;
use sqsafe_idempotency::protocol::Seen;

use crate::config::Fp;

/// A claim token: one per claim attempt (the SDK's retries of a write reuse it).
pub type Token = u8;

/// The idempotency record, as the table holds it.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Record {
    /// In progress or completed.
    pub status: Status,
    /// Epoch seconds.
    pub expiration_s: u64,
    /// Epoch ms, while in progress.
    pub lease_ms: Option<u64>,
    /// The claim's token.
    pub token: Token,
    /// The content claimed.
    pub fp: Fp,
}

impl Record {
    /// The record as the attempt holding `token` with content `fp` sees it.
    pub fn seen_by(&self, token: Token, fp: Fp) -> Seen {
        Seen {
            status: self.status,
            expiration_s: self.expiration_s,
            lease_ms: self.lease_ms,
            own_token: self.token == token,
            same_fingerprint: self.fp == fp,
        }
    }
}

/// A conditional write on its way to the table. Its condition's values (`:now_ms`, `:lease`) were fixed when it was
/// sent.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum Write {
    /// `PutItem` of an in-progress record, made at the sender's `now_ms`.
    Claim {
        /// The record written.
        record: Record,
        /// The sender's clock when it sent the write.
        now_ms: u64,
    },
    /// `UpdateItem` to completed.
    Complete {
        /// The claim's token.
        token: Token,
        /// The new expiration (epoch s).
        expiration_s: u64,
    },
    /// `UpdateItem` of the lease (and the expiry with it).
    Extend {
        /// The claim's token.
        token: Token,
        /// The new lease end (epoch ms).
        lease_ms: u64,
        /// The new expiration (epoch s).
        expiration_s: u64,
    },
    /// `DeleteItem`.
    Release {
        /// The claim's token.
        token: Token,
    },
    /// The keyed mode's `PutItem` of the completed record, made at the sender's `now_ms`.
    KeyedPut {
        /// The record written (completed).
        record: Record,
        /// The sender's clock when it sent the write.
        now_ms: u64,
    },
}

/// How a message left the queue.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum End {
    /// Deleted after its effect ran and completed.
    Applied,
    /// Deleted after a replay (from the table or the local cache).
    Replayed,
    /// Sent to the DLQ by sqsafe with its context (a permanent error: payload mismatch).
    DeadLetterWithContext,
    /// Moved to the DLQ by SQS after `max_receives` deliveries, without context.
    DeadLetterBySqs,
}

/// A message of the queue.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Message {
    /// Payload fingerprint.
    pub fp: Fp,
    /// Deliveries so far.
    pub receives: u8,
    /// Visible again from this tick.
    pub visible_at: u8,
    /// Gone from the queue, and how.
    pub end: Option<End>,
}

/// Where an invocation stands with its message.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Phase {
    /// The keyed mode: about to read the record.
    Read,
    /// About to claim (or to retry a claim whose answer was lost).
    Claim,
    /// Owns the key; `sent` once the effect's request is on its way downstream.
    Effect {
        /// The request was sent.
        sent: bool,
    },
    /// The effect succeeded; completing (or retrying a completion whose answer was lost). In the keyed mode: putting
    /// the completed record.
    Complete,
    /// The effect failed; releasing the key.
    Release,
}

/// One invocation's work on one message.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Job {
    /// Index of the message.
    pub msg: u8,
    /// The claim token.
    pub token: Token,
    /// True tick at which Lambda kills the invocation (the request's deadline).
    pub deadline: u8,
    /// The step it is at.
    pub phase: Phase,
    /// The lease this claim believes it holds (epoch ms): moves forward with each extension it sees land.
    pub lease_ms: u64,
    /// A write whose answer was lost, to be sent again as it was (the SDK's retry).
    pub retry: Option<Write>,
}

/// A completed key a consumer instance remembers (the local cache).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Cached {
    /// The content completed.
    pub fp: Fp,
    /// The record's expiration (epoch s).
    pub expiration_s: u64,
}

/// A consumer instance.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Instance {
    /// Its clock's offset from true time, in ticks.
    pub skew: i8,
    /// The invocation running, if any.
    pub job: Option<Job>,
    /// Its local cache.
    pub cache: Option<Cached>,
}

/// A request to the downstream API, sent and not yet applied.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Request {
    /// The claim that sent it.
    pub token: Token,
    /// The instance that sent it.
    pub instance: u8,
    /// The content.
    pub fp: Fp,
    /// The record lifetime it was sent in: an application counts against that lifetime.
    pub life: u8,
}

/// What the properties read: facts about the past that the world itself does not keep.
#[derive(Debug, Clone, Default, PartialEq, Eq, Hash)]
pub struct Ghost {
    /// Record lifetimes so far: a claim that lands where no live record was starts a new one.
    pub life: u8,
    /// The content the current lifetime was first claimed with.
    pub life_fp: Option<Fp>,
    /// Effects applied downstream in the current lifetime (requests sent in it).
    pub applied: u8,
    /// An attempt that had sent its effect crashed, was killed, lost its lease or gave up before its completion
    /// landed: the book's named cases for a second application without a downstream key
    /// (book/src/how-it-works.md, "What can still go wrong").
    pub excused: bool,
    /// The record was completed in the current lifetime.
    pub completed: bool,
    /// Effects applied downstream per content, ever.
    pub applied_fp: [u8; 2],
    /// Property 3 broken: a completed, live record was replaced, a claim met it and did not replay, or an attempt
    /// with a live lease ran the effect after it. In the keyed mode: a completed, live record was replaced, or a read
    /// met it with the same content and did not replay (a delivery that read before the completion still sends its
    /// effect: the downstream key keeps it from applying again, property 1).
    pub ran_after_completed: bool,
    /// Property 5 broken: an effect ran for content other than the one its live record was claimed with. In the keyed
    /// mode (no claim before the effect): the downstream applied a second content under the key.
    pub mismatch_applied: bool,
    /// Time moved on while an idle instance could have received a visible message (SQS starved it): property 7's
    /// "every message ends" is judged on the behaviours where this never happened (fairness of delivery).
    pub unfair: bool,
}

/// The model's world.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct State {
    /// True time, in ticks.
    pub now: u8,
    /// The instances.
    pub instances: Vec<Instance>,
    /// The queue (and its DLQ, as message ends).
    pub messages: Vec<Message>,
    /// The table's one record.
    pub record: Option<Record>,
    /// Writes sent and not landed yet (their sender's SDK timed out and retried).
    pub pending: Vec<Write>,
    /// Requests on their way downstream.
    pub requests: Vec<Request>,
    /// The content the downstream first applied under the key's `Idempotency-Key`, once it saw one.
    pub downstream_fp: Option<Fp>,
    /// Next claim token.
    pub next_token: Token,
    /// Crashes left.
    pub crashes: u8,
    /// Lost answers left.
    pub lost_writes: u8,
    /// Effect failures left.
    pub effect_failures: u8,
    /// Ghost facts.
    pub ghost: Ghost,
}
