//! Property 9: the idempotent HTTP layer (`sqsafe::api::IdempotencyLayer`, issue #41), model-checked.
//!
//! Clients send requests under one `Idempotency-Key`, each with its caller and its content, and retry: while an
//! earlier attempt is still in flight (a client-side timeout), after a `409`, a `5xx` or a `504`, and after an answer
//! lost on the way back. Each attempt is handled by a server instance with its own clock (skewed), which does what
//! the layer does:
//!
//! 1. One conditional write claims the caller's key, its lease the layer's deadline (now + the lease setting). A
//!    refused claim is judged from the old record the write returned: a replay of the stored answer, `422` for other
//!    content, `409` in flight.
//! 2. The handler runs, and while it runs its instance extends the claim (the heartbeat, `Guard::extend`: fenced by
//!    the claim's token, the lease moved to now + the lease setting, never shorter). A refused extension means the
//!    claim was lost: the handler is stopped.
//! 3. The handler is not stopped at the lease and its key is not released then: once the client waited its time
//!    (`ApiSettings::answer_within`, by default the lease) it gets `504` (and retries), while the handler runs on
//!    under its extended claim. When it answers, the answer is stored by the completion fenced by the token (and
//!    sent, unless the client got `504`: its retry finds the answer stored), or the key is released when it answered
//!    a status a client retries (`5xx`).
//! 4. An instance may crash at any step; a crashed attempt's claim stays until its lease and the margin pass, and
//!    then a retry runs the handler again (property 2's case when the handler had answered).
//!
//! Under Lambda the layer cuts the handler at the invocation's deadline, less the reserve the completion needs, and
//! leaves its claim to its lease (it never releases it at once): to the protocol that is a crash of the attempt at
//! that point, which the crash step covers, so it is not modelled apart.
//!
//! **Time.** Writes here always get their answer, within the tick they are sent (the SDK's retries of a write are the
//! claim model's subject), and the heartbeat beats in time: each tick first extends every running handler's claim,
//! and time waits for a completion or a release in flight. So a lease passes only when its instance crashed, which
//! property 9e checks (a claim lost would stop its handler). Each handler runs at most
//! [`HttpConfig::handler_ticks`] ticks; longer than the lease, it outlives its first lease.
//!
//! As in the claim model ([`crate::ProtocolModel`]), the table's condition, the lease, its extension, the expiry and
//! the meaning of every refused write come from [`sqsafe_idempotency::protocol`]; this model adds the layer's own
//! rules (the key scoped by caller, the answer stored and replayed, the `504` at the deadline) and the client's
//! retries. A record past its expiry is not deleted by TTL (every condition treats it as absent already).
//!
//! By concern: the configuration and the mutants (`config`), the world's state and the actions (`state`), the
//! model's type and its clocks (`world`), the layer's and the client's steps (`steps`), property 9 (`properties`),
//! the state machine (`machine`), and the check (`check`).

mod check;
mod config;
mod machine;
mod properties;
mod state;
mod steps;
mod world;

pub use check::{HttpReport, check_http};
pub use config::{HttpConfig, HttpMutation};
pub use properties::{
    EXAMPLE_HTTP_SECOND_RUN, EXAMPLE_LOST_ANSWER_REPLAYED, EXAMPLE_OUTLIVED_LEASE_REPLAYED,
    EXAMPLE_RETRY_AFTER_CRASH, EXAMPLE_RETRY_AFTER_RELEASE, P9_CLAIM_HELD, P9_HANDLER_AT_MOST_ONCE,
    P9_OTHER_CONTENT_NEVER_RUNS, P9_REPLAY_IS_STORED, P9_RETRY_RUNS,
};
pub use state::{
    AnswerId, Attempt, Client, HttpAction, HttpGhost, HttpRecord, HttpState, ScopeGhost, Stage,
};
pub use world::HttpModel;
