//! charge-payment's tests, in one test binary (each binary links the AWS SDK): the handler against moto and the local
//! payments API (`handler`) and the sample events (`events`).

mod events;
mod handler;
