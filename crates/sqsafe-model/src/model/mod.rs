//! The protocol as a state machine: every step of every actor (SQS, the consumer instances, the table, the downstream
//! API, the clock) is an action, and the checker tries them in every order.
//!
//! By concern: the actions (`action`), the model's type and its clocks (`world`), the table's conditional writes
//! (`table`), the helpers every step shares (`job`), the claim mode's writes (`claim`), the keyed mode's read and
//! completion (`keyed`), the downstream API (`downstream`), SQS and the clock (`delivery`), and the state machine
//! the checker drives (`machine`).

pub(crate) mod action;
mod claim;
mod delivery;
mod downstream;
mod job;
mod keyed;
mod machine;
mod table;
pub(crate) mod world;

pub use action::Action;
pub use world::ProtocolModel;
