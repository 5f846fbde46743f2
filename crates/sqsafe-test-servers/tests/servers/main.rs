//! sqsafe-test-servers' integration tests, in one test binary (each binary links the AWS SDK): sqsafe-local's Lambda
//! emulator against the echo function (`lambda`), the payments API over real HTTP (`payments`), and the fault proxy in
//! front of moto servers of its own (`proxy`).

mod lambda;
mod payments;
mod proxy;
