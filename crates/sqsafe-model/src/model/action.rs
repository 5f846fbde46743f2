//! One step of one actor: what the checker chooses among.

/// One step of one actor.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum Action {
    /// True time moves one tick; Lambda kills invocations whose deadline passed.
    Tick,
    /// SQS delivers a visible message to an idle instance (or moves it to the DLQ after `max_receives`).
    Receive {
        /// The instance.
        instance: u8,
        /// The message.
        msg: u8,
    },
    /// The instance claims (one conditional `PutItem`, `ALL_OLD`). `lost`: its answer is lost and the SDK retries.
    Claim {
        /// The instance.
        instance: u8,
        /// The answer is lost.
        lost: bool,
    },
    /// The keyed mode: the instance reads the record (strongly consistent) and judges it.
    Read {
        /// The instance.
        instance: u8,
    },
    /// The instance sends the effect's request downstream.
    Send {
        /// The instance.
        instance: u8,
    },
    /// The downstream applies a request (or it fails, `fail`), and answers its sender if it is still there.
    Land {
        /// Index in the requests in flight.
        request: u8,
        /// The effect fails.
        fail: bool,
    },
    /// A heartbeat extends the lease.
    Beat {
        /// The instance.
        instance: u8,
        /// The answer is lost.
        lost: bool,
    },
    /// The instance completes (fenced by its token).
    Complete {
        /// The instance.
        instance: u8,
        /// The answer is lost.
        lost: bool,
    },
    /// The instance releases the key after a failed effect (fenced by its token).
    Release {
        /// The instance.
        instance: u8,
        /// The answer is lost.
        lost: bool,
    },
    /// The instance crashes, whatever it was doing.
    Crash {
        /// The instance.
        instance: u8,
    },
    /// A write whose answer was lost lands now.
    Deliver {
        /// Index in the pending writes.
        write: u8,
    },
    /// DynamoDB's TTL deletes the expired record.
    TtlDelete,
}
