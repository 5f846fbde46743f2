//! apply-ledger's tests, in one test binary (each binary links the AWS SDK): the handler against moto (`handler`) and
//! the sample event (`events`).

mod events;
mod handler;
