//! sqsafe-local's integration tests, in one test binary (each binary links the AWS SDK): the harness a consumer's
//! tests start from (`harness`), the local stack read from template.yaml and created in moto (`stack`), and a
//! stream-fed function's resources (`stream_function`).

mod harness;
mod stack;
mod stream_function;
