//! A local payments HTTP API that treats idempotency keys the way a careful real one does (Stripe, and the IETF
//! `Idempotency-Key` header draft), with faults injected on purpose.
//!
//! # Endpoints
//!
//! | request | answer |
//! |---|---|
//! | `POST /v1/charges` with `Idempotency-Key` | `201` and the charge; see below |
//! | `GET /v1/charges` | `200` and the ledger, a JSON array of [`Charge`] |
//! | `GET /health` | `200` |
//! | another path / another method | `404` / `405` (with `Allow`) |
//!
//! Errors are JSON objects `{"error": "<code>", "message": "<text>"}`.
//!
//! # Charges and keys
//!
//! The body is `{"payment_id": str, "amount": u64 (minor units, > 0), "currency": str (3 letters),
//! "customer_id": str}`; other members are allowed and are part of the fingerprint. An `x-correlation-id` header
//! is stored with the charge. The **fingerprint** is the SHA-256 of the body's canonical JSON (keys sorted, no
//! whitespace), so key order and spacing do not change it.
//!
//! | the key is | the body's fingerprint | answer |
//! |---|---|---|
//! | missing, empty, over 255 characters | — | `400 missing_idempotency_key` / `invalid_idempotency_key` |
//! | any (body not JSON, not a charge) | — | `400 invalid_json` / `invalid_request`; the key is not stored |
//! | new | — | marked in flight, processed, charged: `201` (stored for replay) |
//! | in flight | same | `409 request_in_flight` |
//! | done | same | the stored status and body, with `Idempotent-Replayed: true` |
//! | in flight or done | different | `422 idempotency_key_reused` |
//!
//! # Injected faults
//!
//! Each new request gets a [`Fault`]: the next one queued with [`RunningPayments::force_next`], otherwise one drawn
//! from an RNG seeded with [`PaymentsApiBuilder::seed`].
//!
//! ```text
//! client                       payments API
//!   | POST k (Fault::Before)     |
//!   |--------------------------->| key k in flight ... forgotten, nothing charged
//!   |<---------------------- 503 |
//!   | POST k (retry)             |
//!   |--------------------------->| charged ch_1, 201 stored
//!   |<---------------------- 201 |
//!
//!   | POST j (Fault::After)      |
//!   |--------------------------->| charged ch_2, 201 stored
//!   |<---------------------- 503 | (the client cannot tell that the money moved)
//!   | POST j (retry)             |
//!   |--------------------------->| replay
//!   |<---- 201 ch_2, Idempotent-Replayed: true
//! ```

mod config;
mod fault;
mod fingerprint;
mod http;
mod ledger;
mod server;

pub use config::{PaymentsApi, PaymentsApiBuilder, ProcessingDelay};
pub use fault::Fault;
pub use ledger::{Charge, Stats};
pub use server::RunningPayments;
