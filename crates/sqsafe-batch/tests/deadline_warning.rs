//! A deadline that is a real point in time but already passed when the batch arrives (a clock set wrong, an emulator
//! that queued the invocation past it): the warning about it is said once per process, not once per invocation. Its
//! own test binary: the warning is per process, and other tests would have said it first. (`cargo lambda watch`'s
//! constant 600000 ms is no point in time and is not warned about: tests/emulator_deadline.rs.)

mod common;

#[tokio::test(flavor = "current_thread")]
async fn a_deadline_already_past_is_warned_about_once_per_process() {
    // Five seconds before the clock's now, in Lambda's epoch milliseconds.
    let past = 1_795_999_995_000;
    let text = common::deadline_logs(
        1_796_000_000,
        &[("req-1", past), ("req-2", past), ("req-3", past)],
    )
    .await;
    let warnings = text.matches("deadline has already passed").count();
    assert_eq!(warnings, 1, "one warning for three invocations:\n{text}");
}
