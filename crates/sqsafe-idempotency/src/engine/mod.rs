//! The engine: [`Idempotency`] and what it hands out, in rooms by concern.
//!
//! - `types`: the engine and the values it takes and answers with;
//! - `claim`: the claim mode (one conditional write claims the key, the effect runs under a [`Guard`]);
//! - `keyed`: the keyed mode (a read, the effect under the downstream's key, one write completes);
//! - `guard`: what the claim's owner does with it: complete, extend (the heartbeat), release;
//! - `completion`: the completion write both modes retry within the deadline;
//! - `replay`: stored results: encoded under the cap, decoded for a replay, kept in the local cache.

/// A crash point for fault-injection tests; nothing without the `fault-injection` feature.
macro_rules! crash_point {
    ($point:ident, $key:expr) => {
        #[cfg(feature = "fault-injection")]
        crate::fault::point(crate::fault::Point::$point, $key);
    };
}

mod claim;
mod completion;
mod guard;
mod keyed;
mod replay;
mod types;

pub(crate) use completion::before_deadline;
pub(crate) use types::Inner;
pub use types::{
    Claim, Guard, Idempotency, MAX_CORRELATION_CHARS, Outcome, ReplaySource, Replayed, Request,
};
