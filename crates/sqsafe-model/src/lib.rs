//! sqsafe's claim protocol, model-checked (issue #19).
//!
//! A [`stateright`] model of the protocol: two or three consumer instances with skewed clocks, SQS (receive,
//! visibility timeout, redelivery, `maxReceiveCount` to the DLQ), the idempotency table (conditional writes evaluated
//! atomically, `ALL_OLD` on refusal, TTL), and a downstream API with or without an `Idempotency-Key`. Faults are
//! steps like any other: a crash at any step, a write whose answer is lost (it lands now or later, and the SDK
//! retries it), an effect that fails, a request that lands after its sender's deadline, a heartbeat that lands late.
//!
//! The decisions are not restated here: the table's conditions, the claim's lease and expiry and the meaning of
//! every refused write come from [`sqsafe_idempotency::protocol`], which the engine and the in-memory store call too.
//! A [`Mutation`] reverts one guard at a time to show the checker catches it.
//!
//! [`HttpModel`] checks the idempotent HTTP layer (`sqsafe::api`, issue #41) on the same protocol functions: clients
//! that retry (concurrently, after a `409`, a `5xx`, a `504` or a lost answer), callers that send one key, other
//! content under a key, a handler that runs past its lease under its extended claim, an instance that crashes
//! mid-handler.
//!
//! [`StreamModel`] checks a stream consumer (Kinesis, DynamoDB Streams) under Lambda's checkpoint-and-retry
//! delivery: each record applied once and in order per partition key, with the stop rule; without it, out of order.
//!
//! [`Config::keyed`] checks the keyed mode instead of the claim protocol (no claim: a read, the effect under the
//! downstream key, one conditional put of the completed record), under its assumption: the downstream applies a key
//! at most once, and refuses the key with other content (the IETF draft's 422).
//!
//! ```
//! use sqsafe_model::{Config, Stop, check};
//!
//! let mut config = Config::bounded();
//! config.last_receive = 0;
//! let report = check(config, Stop::Exhaustive, 1);
//! assert!(report.violations.is_empty(), "{:?}", report.violations);
//! ```

mod check;
mod config;
mod explore;
mod http;
mod model;
mod outbox;
mod properties;
mod state;
mod stream;
mod trace;

pub use check::{Report, Stop, Violation, check};
pub use config::{Config, Fp, LEFTOVER_TOKEN, Mutation, TICK_MS};
pub use explore::Found;
pub use http::{
    AnswerId, Attempt, Client, EXAMPLE_HTTP_SECOND_RUN, EXAMPLE_LOST_ANSWER_REPLAYED,
    EXAMPLE_OUTLIVED_LEASE_REPLAYED, EXAMPLE_RETRY_AFTER_CRASH, EXAMPLE_RETRY_AFTER_RELEASE,
    HttpAction, HttpConfig, HttpGhost, HttpModel, HttpMutation, HttpRecord, HttpReport, HttpState,
    P9_CLAIM_HELD, P9_HANDLER_AT_MOST_ONCE, P9_OTHER_CONTENT_NEVER_RUNS, P9_REPLAY_IS_STORED,
    P9_RETRY_RUNS, ScopeGhost, Stage, check_http,
};
pub use model::{Action, ProtocolModel};
pub use outbox::{
    Event, OutboxAction, OutboxConfig, OutboxModel, OutboxReport, OutboxState, P8_APPLIED_ONCE,
    P8_PUBLISHED, check_outbox,
};
pub use properties::*;
pub use state::{
    Cached, End, Ghost, Instance, Job, Message, Phase, Record, Request, State, Token, Write,
};
pub use stream::{
    Invocation, P10_IN_ORDER, P10_ONCE, StreamAction, StreamConfig, StreamModel, StreamReport,
    StreamState, check_stream,
};
pub use trace::{describe_action, describe_state, format_path, format_steps};
