//! The promises, each a named check on every state the checker reaches.

use sqsafe_idempotency::Status;
use sqsafe_idempotency::protocol;
use stateright::Property;

use crate::config::ms;
use crate::model::world::ProtocolModel;
use crate::state::{End, State};

/// Property 1: with a downstream key, a key's effect is applied at most once while its record lives.
pub const P1_AT_MOST_ONCE_WITH_KEY: &str =
    "1. with a downstream key, applied at most once per record lifetime";
/// Property 2: without a downstream key, a second application happens only on the book's named traces
/// (book/src/how-it-works.md, "What can still go wrong").
pub const P2_SECOND_ONLY_NAMED: &str = "2. without a downstream key, a second application only after a crash or lost lease between effect and completion";
/// Property 3: a completed key replays and never runs again while its record lives: every claim of the same content
/// that meets it replays, nothing replaces or deletes it, and no attempt whose lease is live runs the effect after it
/// (an attempt whose lease already passed is property 2's named case). In the keyed mode (no claim, so no lease): every
/// read of the same content that meets it replays, and no other delivery's completion replaces it; a delivery that
/// read before the completion still sends its call, which property 1 keeps from applying again.
pub const P3_COMPLETED_REPLAYS: &str =
    "3. a completed key replays and never runs again while its record lives";
/// Property 4: once the faults stop, no key stays in progress for good (liveness, under fairness), checked at the end
/// of the bounded horizon: in every settled state (see `settled`) the record is absent, completed or claimable on
/// the true clock. This implies the liveness statement for the model: faults are finite (counted budgets) and no
/// message is received after `last_receive` and its drain, so no write is sent after the last job ends; every job
/// ends by the horizon (Lambda kills it at its deadline); under fairness time advances (the tick is enabled until
/// the horizon, but for a drain's prompt deliveries, which are finite) and every request and pending write lands,
/// so every fair behaviour reaches a settled state. From there nothing
/// can write the record again (only TTL can delete it), and being claimable only grows with time (a lease, once
/// passed by the margin, stays passed), so the key is never stuck afterwards. A horizon too short for some lease
/// could only make the check fail, never pass wrongly. The mutant [`crate::Mutation::LeaseNeverEnds`] shows the
/// check is not vacuous.
pub const P4_NOT_STUCK: &str =
    "4. no key stays IN_PROGRESS once the faults stop (bounded, under fairness)";
/// Property 5: a payload mismatch never applies an effect. In the keyed mode, where a delivery that read before another
/// content's completion sends its call under the same key: the downstream never applies a second content, and the
/// table and the downstream agree on which content was the effect (a completed record holds the content the
/// downstream applied under the key).
pub const P5_MISMATCH_NEVER_APPLIES: &str = "5. a payload mismatch never runs an effect";
/// Property 6: an in-progress record never expires before its lease plus the takeover margin.
pub const P6_EXPIRY_COVERS_LEASE: &str = "6. expiry is never earlier than lease + margin";
/// Property 7: no message is lost. Safety, in every configuration: a message that left the queue was applied,
/// replayed (its content applied downstream), or dead-lettered: by sqsafe with its context, or by SQS without it
/// after `max_receives` deliveries (the book's exception: the function crashed or timed out on every delivery).
/// Liveness, in a configuration with a drain (`Config::settling`): in every settled state of a behaviour where SQS
/// never starved a visible message, every message has ended. Without a drain it is not checked: receives stop at
/// `last_receive`, before a message can use up its receives, and the bounded and `make model` configurations with
/// a drain long enough do not fit the state budget (a lost answer landing at any moment of it).
pub const P7_NONE_LOST: &str =
    "7. every message ends applied, replayed or in the DLQ: none is lost";
/// An example, not a promise: the shortest trace where the effect applies twice without a downstream key.
pub const EXAMPLE_SECOND_APPLICATION: &str =
    "example: a second application without a downstream key";

/// Every property of the protocol model.
pub fn all() -> Vec<Property<ProtocolModel>> {
    vec![
        Property::always(P1_AT_MOST_ONCE_WITH_KEY, |m: &ProtocolModel, s: &State| {
            !m.config.downstream_key || s.ghost.applied <= 1
        }),
        Property::always(P2_SECOND_ONLY_NAMED, |m: &ProtocolModel, s: &State| {
            m.config.downstream_key || s.ghost.applied <= 1 || s.ghost.excused
        }),
        Property::always(P3_COMPLETED_REPLAYS, |_: &ProtocolModel, s: &State| {
            !s.ghost.ran_after_completed
        }),
        Property::always(P4_NOT_STUCK, |m: &ProtocolModel, s: &State| {
            !settled(m, s) || !stuck_in_progress(m, s)
        }),
        Property::always(P5_MISMATCH_NEVER_APPLIES, |m: &ProtocolModel, s: &State| {
            !s.ghost.mismatch_applied && (!m.config.keyed || table_agrees_with_downstream(s))
        }),
        Property::always(P6_EXPIRY_COVERS_LEASE, |m: &ProtocolModel, s: &State| {
            s.record.as_ref().is_none_or(|r| {
                r.status != Status::InProgress
                    || r.lease_ms
                        .is_none_or(|lease| r.expiration_s * 1_000 >= lease + ms(m.config.margin))
            })
        }),
        Property::always(P7_NONE_LOST, |m: &ProtocolModel, s: &State| {
            let ended = m.config.drain == 0
                || !settled(m, s)
                || s.ghost.unfair
                || s.messages.iter().all(|msg| msg.end.is_some());
            ended
                && s.messages.iter().all(|msg| match msg.end {
                    Some(End::Applied | End::Replayed) => {
                        s.ghost.applied_fp[usize::from(msg.fp.min(1))] > 0
                    }
                    Some(End::DeadLetterWithContext | End::DeadLetterBySqs) | None => true,
                })
        }),
        Property::sometimes(
            EXAMPLE_SECOND_APPLICATION,
            |m: &ProtocolModel, s: &State| !m.config.downstream_key && s.ghost.applied >= 2,
        ),
    ]
}

/// A completed record holds the content the downstream applied under the key, once it applied one.
fn table_agrees_with_downstream(s: &State) -> bool {
    s.record.as_ref().is_none_or(|r| {
        r.status != Status::Completed || s.downstream_fp.is_none_or(|applied| applied == r.fp)
    })
}

/// The end of the horizon with nothing left in flight: no invocation, no write, no request.
fn settled(m: &ProtocolModel, s: &State) -> bool {
    s.now == m.config.horizon()
        && s.instances.iter().all(|i| i.job.is_none())
        && s.pending.is_empty()
        && s.requests.is_empty()
}

/// The record is in progress and no claim could take it over, on the true clock.
fn stuck_in_progress(m: &ProtocolModel, s: &State) -> bool {
    s.record.as_ref().is_some_and(|r| {
        let seen = r.seen_by(u8::MAX, r.fp);
        r.status == Status::InProgress
            && !protocol::is_claimable(&seen, ProtocolModel::true_ms(s), ms(m.config.margin))
    })
}
