//! Property 9: the idempotent HTTP layer (`sqsafe::api::IdempotencyLayer`, issue #41), model-checked.
//!
//! Clients send requests under one `Idempotency-Key`, each with its caller and its content, and retry: while an
//! earlier attempt is still in flight (a client-side timeout), after a `409`, a `5xx` or a `504`, and after an answer
//! lost on the way back. Each attempt is handled by a server instance with its own clock (skewed), which does what
//! the layer does: one conditional write claims the caller's key (its lease the layer's deadline), the handler runs
//! (or answers `5xx`, or runs past the lease and is stopped), the answer is stored by the completion fenced by the
//! claim's token, and a `5xx` or a timeout releases the key. A refused claim is judged from the old record the write
//! returned: a replay of the stored answer, `422` for other content, `409` in flight. An instance may crash at any
//! step.
//!
//! As in the claim model ([`crate::ProtocolModel`]), the table's condition, the lease, the expiry and the meaning of
//! every refused write come from [`sqsafe_idempotency::protocol`]; this model adds the layer's own rules (the key
//! scoped by caller, the answer stored and replayed, the handler bounded by the lease) and the client's retries.
//! Writes here always get their answer (the SDK's retries of a write are the claim model's subject), and a record past
//! its expiry is not deleted by TTL (every condition treats it as absent already).
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
    EXAMPLE_HTTP_SECOND_RUN, EXAMPLE_LOST_ANSWER_REPLAYED, EXAMPLE_RETRY_AFTER_CRASH,
    EXAMPLE_RETRY_AFTER_RELEASE, P9_HANDLER_AT_MOST_ONCE, P9_OTHER_CONTENT_NEVER_RUNS,
    P9_REPLAY_IS_STORED, P9_RETRY_RUNS,
};
pub use state::{
    AnswerId, Attempt, Client, HttpAction, HttpGhost, HttpRecord, HttpState, ScopeGhost, Stage,
};
pub use world::HttpModel;
