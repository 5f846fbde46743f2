//! sqsafe's tests that can share a process, in one test binary (each binary links the AWS SDK): the façade against
//! moto (`facade`), envelopes through moto's own paths into a queue (`envelopes`), stream consumers (`streams`), the HTTP client through a consumer
//! (`http`, feature `http`), and the idempotent HTTP layer on an axum Router (`api`) and under lambda_http's adapter
//! (`api_lambda_http`), both feature `api`.
//!
//! A module that needs a feature is built when the feature is on, as its own test target was before (cargo test
//! --workspace turns both on: charge-payment asks for `http`, sqsafe-testkit's `honoured-keys` for `api`; `-p sqsafe`
//! alone has `api` only). Binaries of their own, beside this folder: the layer's log line read through a scoped
//! `tracing` subscriber (`api_logs.rs`) and its spans through the process's exporter (`api_traces.rs`).

// Shared with api_logs.rs and api_traces.rs, so it stays in tests/api_common.
#[cfg(feature = "api")]
#[path = "../api_common/mod.rs"]
mod api_common;

#[cfg(feature = "api")]
mod api;
#[cfg(feature = "api")]
mod api_lambda_http;
mod envelopes;
mod facade;
#[cfg(feature = "http")]
mod http;
mod streams;
