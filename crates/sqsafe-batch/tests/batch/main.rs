//! sqsafe-batch's tests that can share a process, in one test binary (each binary links the AWS SDK): every batch
//! rule on pure logic (`batch`), the time rules (`time`), stream batches (`stream`), and the SQS adapters against
//! moto (`sqs`).
//!
//! Binaries of their own, beside this folder: what touches the process's state. The deadline warning is said once
//! per process (`deadline_warning.rs`, `emulator_deadline.rs`); the span exporter is the process's
//! (`trace_export_deadline.rs`); and the tests that read logs back through a scoped `tracing` subscriber
//! (`logs.rs`, `trace_secrets.rs`) would share their callsites' interest with this binary's threads, which reach the
//! same callsites without a subscriber, and could miss their lines.

// Shared with those binaries, so it stays in tests/common.
#[path = "../common/mod.rs"]
mod common;

mod batch;
mod sqs;
mod stream;
mod time;
