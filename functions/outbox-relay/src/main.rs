//! `outbox-relay`: wiring only. The relay is in `handler.rs`.

use lambda_runtime::{LambdaEvent, service_fn};

// mimalloc: about a fifth less CPU per record than the system allocator (see `sqsafe::Allocator`).
#[global_allocator]
static ALLOCATOR: sqsafe::Allocator = sqsafe::Allocator;

fn main() -> Result<(), sqsafe::Error> {
    // The runtime sqsafe's consumers run on: one thread while Lambda sends one invocation at a time.
    sqsafe::runtime()?.block_on(async {
        let clients = sqsafe::Clients::from_env().await?; // logging, environment, AWS clients
        let relay = outbox_relay::OutboxRelay::from_clients(&clients)?;
        lambda_runtime::run(service_fn(|event: LambdaEvent<_>| relay.handle(event)))
            .await
            .map_err(sqsafe::Error::Runtime)
    })
}
