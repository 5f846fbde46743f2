//! sqsafe-local's integration tests, in one test binary (each binary links the AWS SDK): the harness a consumer's
//! tests start from (`harness`), the local stack read from template.yaml and created in moto (`stack`), a
//! stream-fed function's resources (`stream_function`), and a table's stream read as Lambda's poller reads it
//! (`stream_mapping`).

mod harness;
mod stack;
mod stream_function;
mod stream_mapping;
