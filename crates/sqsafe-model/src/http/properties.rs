//! Property 9, each a named check on every state the layer model reaches, and its examples.

use sqsafe_idempotency::Status;
use sqsafe_idempotency::protocol;
use stateright::Property;

use super::state::HttpState;
use super::world::HttpModel;
use crate::config::ms;

/// 9a: the handler's effect at most once per caller and key while the record lives, a crash excepted. A handler that
/// runs past its lease keeps its claim (extended) and its key, so no retry runs beside it or after it.
pub const P9_HANDLER_AT_MOST_ONCE: &str = "9. api: the handler runs at most once per caller and key while its record lives, unless an instance crashed between its answer and the stored completion";
/// 9b: a replay is the stored answer of the request's own caller and content.
pub const P9_REPLAY_IS_STORED: &str = "9. api: a replay is the answer stored for the same caller and content, the one the client already got";
/// 9c: other content under a live key never runs the handler.
pub const P9_OTHER_CONTENT_NEVER_RUNS: &str =
    "9. api: other content under a live key never runs the handler";
/// 9d: once nothing is in flight at the end of the horizon, every key is free, completed or claimable: a retry after a
/// release or after a lease ended runs (bounded, as property 4).
pub const P9_RETRY_RUNS: &str =
    "9. api: no key stays in progress once its lease ended: a retry runs (bounded)";
/// 9e: an attempt in flight keeps its claim: the heartbeat extends it in time, so no extension, completion or
/// release of it is refused (a lost claim would stop its handler, whose effect may be taken, and let a retry run).
pub const P9_CLAIM_HELD: &str = "9. api: a claim holds until its answer is stored or its key released: no extension, completion or release is refused";
/// Example: the named case, a handler run twice for one caller and key.
pub const EXAMPLE_HTTP_SECOND_RUN: &str =
    "example: a handler run twice (a crash between answer and store)";
/// Example: an answer lost on the way back reaches the client by a replay.
pub const EXAMPLE_LOST_ANSWER_REPLAYED: &str = "example: a lost answer replayed to the retry";
/// Example: after a crash mid-handler, the lease ends and a retry runs the handler.
pub const EXAMPLE_RETRY_AFTER_CRASH: &str =
    "example: a retry runs the handler after a crash mid-handler";
/// Example: after a `5xx` released the key, a retry runs the handler.
pub const EXAMPLE_RETRY_AFTER_RELEASE: &str = "example: a retry runs the handler after a release";
/// Example: a handler runs past its first lease (the client gets `504`), keeps its claim, and its stored answer is
/// replayed to the client's retry.
pub const EXAMPLE_OUTLIVED_LEASE_REPLAYED: &str = "example: a handler that outlived its lease (the client got 504) had its answer replayed to the retry";

/// Every property of the layer model.
pub(super) fn all() -> Vec<Property<HttpModel>> {
    vec![
        Property::always(P9_HANDLER_AT_MOST_ONCE, |_: &HttpModel, s: &HttpState| {
            s.ghost.scopes.iter().all(|g| g.runs <= 1 || g.excused)
        }),
        Property::always(P9_REPLAY_IS_STORED, |_: &HttpModel, s: &HttpState| {
            !s.ghost.bad_replay
        }),
        Property::always(
            P9_OTHER_CONTENT_NEVER_RUNS,
            |_: &HttpModel, s: &HttpState| !s.ghost.mismatch_ran,
        ),
        Property::always(P9_RETRY_RUNS, |m: &HttpModel, s: &HttpState| {
            let now_ms = HttpModel::true_ms(s.now);
            !m.settled(s)
                || s.records.iter().flatten().all(|r| {
                    r.status == Status::Completed
                        || protocol::is_claimable(&r.seen_by(0, r.fp), now_ms, ms(m.config.margin))
                })
        }),
        Property::always(P9_CLAIM_HELD, |_: &HttpModel, s: &HttpState| {
            !s.ghost.claim_lost
        }),
        Property::sometimes(EXAMPLE_HTTP_SECOND_RUN, |_: &HttpModel, s: &HttpState| {
            s.ghost.scopes.iter().any(|g| g.runs >= 2)
        }),
        Property::sometimes(
            EXAMPLE_LOST_ANSWER_REPLAYED,
            |_: &HttpModel, s: &HttpState| s.ghost.lost_then_replayed,
        ),
        Property::sometimes(EXAMPLE_RETRY_AFTER_CRASH, |_: &HttpModel, s: &HttpState| {
            s.ghost.ran_after_crash
        }),
        Property::sometimes(
            EXAMPLE_RETRY_AFTER_RELEASE,
            |_: &HttpModel, s: &HttpState| s.ghost.ran_after_release,
        ),
        Property::sometimes(
            EXAMPLE_OUTLIVED_LEASE_REPLAYED,
            |_: &HttpModel, s: &HttpState| s.ghost.outlived_then_replayed,
        ),
    ]
}
