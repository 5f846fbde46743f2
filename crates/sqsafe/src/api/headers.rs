//! The headers and bounds of the layer's protocol.

use http::header::HeaderName;

/// The header that carries the key (the IETF Idempotency-Key draft's).
pub const IDEMPOTENCY_KEY: HeaderName = HeaderName::from_static("idempotency-key");
/// Set on every replayed answer.
pub const REPLAYED: HeaderName = HeaderName::from_static("idempotent-replayed");
/// Set to `omitted` on a replay of an answer whose body was too large to store.
pub const REPLAY_BODY: HeaderName = HeaderName::from_static("idempotent-replay-body");
/// The longest key accepted, in characters.
pub const MAX_KEY_CHARS: usize = 255;
