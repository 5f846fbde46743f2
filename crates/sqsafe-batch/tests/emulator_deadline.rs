//! `cargo lambda watch` (1.9) answers every `GET /next` with `Lambda-Runtime-Deadline-Ms: 600000`, a constant (its
//! `functions_router.rs`), where Lambda sends a point in time: 600000 ms after the epoch. That is not a deadline that
//! passed but no point in time at all; treated as unknown, it is not warned about (it was: a WARN at every process
//! start under watch). Its own test binary: the warning is said once per process.

mod common;

#[tokio::test(flavor = "current_thread")]
async fn cargo_lambda_watch_constant_deadline_is_not_warned_about() {
    // cargo lambda watch's constant, and a default Context's 0.
    let text = common::deadline_logs(1_796_000_000, &[("req-600000", 600_000), ("req-0", 0)]).await;
    assert!(!text.contains("WARN"), "no warning:\n{text}");
}
