//! The end-to-end tests that can share a process, in one test binary (each binary links the AWS SDK): the functions
//! under `cargo lambda watch` (`lambda_watch`), `sqsafe local up` on the repository's template (`local_up`), with a
//! Kinesis consumer (`local_up_streams`) and behind its HTTP API gateway (`local_api`), and no body value in the logs
//! at TRACE (`trace_logs`). Each starts its own processes on free ports, with names and folders of its own.
//!
//! Binaries of their own, beside this folder, which `make test` runs on their own: the fault-injection suite
//! (`faults.rs`, `--test faults`) and `sqsafe local up --watch` (`local_watch.rs`, `--test local_watch`).

mod lambda_watch;
mod local_api;
mod local_up;
mod local_up_streams;
mod trace_logs;
