//! sqsafe-idempotency's integration tests, in one test binary (each binary links the AWS SDK): the state machine's
//! scenarios (`common::scenarios`) against DynamoDB's real API on moto (`dynamodb`) and on the in-memory store
//! (`memory`), the protocol's table of cases (`protocol_cases`), and the effect and record in one transaction
//! (`transact`).

mod common;

mod dynamodb;
mod memory;
mod protocol_cases;
mod transact;
