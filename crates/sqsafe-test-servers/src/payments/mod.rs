//! A local payments HTTP API that honours `Idempotency-Key` through sqsafe's own idempotency layer
//! ([`sqsafe::api::IdempotencyLayer`]), its keys in a DynamoDB table (or, where chosen, in memory), with faults
//! injected on purpose. It has no key handling of its own: what a repeat gets is what the layer gives every team's API.
//!
//! # Endpoints
//!
//! | request | answer |
//! |---|---|
//! | `POST /v1/charges` with `Idempotency-Key` | `201` and the charge; see below |
//! | `GET /v1/charges` | `200` and the ledger, a JSON array of [`Charge`] |
//! | `GET /v1/stats` | `200` and this process's counters, [`Stats`] |
//! | `GET /health` | `200` |
//! | another path / another method | `404` / `405` (with `Allow`) |
//!
//! The API's own errors are JSON objects `{"error": "<code>", "message": "<text>"}`; the layer's are
//! `application/problem+json` (RFC 9457, `type` ending in `/problems/<kind>`).
//!
//! # Charges and keys
//!
//! The body is `{"payment_id": str, "amount": u64 (minor units, > 0), "currency": str (3 letters),
//! "customer_id": str}`; other members are allowed and count in the layer's fingerprint (JSON compared as JSON, so
//! key order and spacing do not count). An `x-correlation-id` header is stored with the charge. One merchant
//! account: every client's keys are that account's (the layer's caller is always `merchant`).
//!
//! | the request | answer | from |
//! |---|---|---|
//! | body not JSON, not a charge, over 64 KiB | `400 invalid_json` / `invalid_request`, `413`; no key claimed | the API, before the layer |
//! | key missing, empty, over 255 characters | `400` `missing-idempotency-key` / `invalid-idempotency-key` | the layer |
//! | new key | claimed, processed, charged: `201`, stored for replay | the layer, then the charge |
//! | key in flight (or left claimed by a process that died, until its lease ends) | `409 request-in-progress`, `Retry-After` | the layer |
//! | key done, same content | the stored status and body, `Idempotent-Replayed: true` | the layer |
//! | key used with other content | `422 idempotency-key-reused` | the layer |
//! | the key table failing | `503 idempotency-store-unavailable`, nothing charged | the layer |
//!
//! # Injected faults
//!
//! Each new request (its key just claimed) gets a [`Fault`]: the next one queued with
//! [`RunningPayments::force_next`], otherwise one drawn from an RNG seeded with [`PaymentsApiBuilder::seed`].
//!
//! ```text
//! client                       payments API
//!   | POST k (Fault::Before)     |
//!   |--------------------------->| key k claimed ... 503 from the charge step: the layer releases k
//!   |<---------------------- 503 |
//!   | POST k (retry)             |
//!   |--------------------------->| claimed, charged ch_1, 201 stored by the layer
//!   |<---------------------- 201 |
//!
//!   | POST j (Fault::After)      |
//!   |--------------------------->| claimed, charged ch_2, 201 stored by the layer, then turned into a 503
//!   |<---------------------- 503 | (the client cannot tell that the money moved)
//!   | POST j (retry)             |
//!   |--------------------------->| the layer replays
//!   |<---- 201 ch_2, Idempotent-Replayed: true
//! ```
//!
//! # A process that dies
//!
//! With its keys in DynamoDB, a payments API killed in flight and started again on the same table answers as one
//! API: a key it completed is replayed, a key it held is refused (`409`) until that claim's lease
//! ([`PaymentsApiBuilder::lease`]) and sqsafe's takeover margin have passed, then taken over and charged once. With
//! a [`ledger_file`](PaymentsApiBuilder::ledger_file) the charges outlive the process too. A kill between a charge
//! and the layer's completion of its record would charge again on the takeover: the two are separate writes (see
//! [`PaymentsApiBuilder::hold_in_flight`], the kill point the fault suite uses).

mod config;
mod fault;
mod hold;
mod http;
mod ledger;
mod server;
mod shared;

pub use config::{PaymentsApi, PaymentsApiBuilder, ProcessingDelay};
pub use fault::Fault;
pub use ledger::{Charge, Stats};
pub use server::RunningPayments;
