//! sqsafe-cli's integration tests, in one test binary (each binary links the AWS SDK): `dlq inspect` and `redrive`
//! against moto (`dlq`), `sqsafe local` as a user runs it (`local`), the book's dead-letter runbook run as written
//! (`runbook`), and the one-line errors without a region or credentials (`setup`, whose environment is the child
//! process's only).

mod common;

mod dlq;
mod local;
mod runbook;
mod setup;
