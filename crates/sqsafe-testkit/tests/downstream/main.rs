//! FakeDownstream's tests, in one test binary: as scripted (`downstream`), and behind sqsafe's idempotency layer
//! on moto (`downstream_honoured`, with the feature `honoured-keys`, which `cargo test --workspace` turns on through
//! sqsafe's dev-dependency; without it, as before, those tests are not built).

mod common;

mod downstream;
#[cfg(feature = "honoured-keys")]
mod downstream_honoured;
