//! outbox-relay's tests that can share a process, in one test binary (each binary links the AWS SDK): the relay
//! (`relay`) and the sweeper (`sweeper`) against moto with the real consumers, and the sample event (`events`).
//! `traces.rs`, beside this folder, is a binary of its own: it installs the process's subscriber.

// Shared with traces.rs, so it stays in tests/stream.
#[path = "../stream/mod.rs"]
mod stream;

mod events;
mod relay;
mod sweeper;
