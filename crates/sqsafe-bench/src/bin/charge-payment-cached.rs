//! `charge-payment` with the idempotency layer's local cache of completed keys turned on through the façade's hook:
//! the bench's cache-hit figures. Everything else is the deployed function.

use sqsafe::layers::idempotency::CacheConfig;

// As the deployed function.
#[global_allocator]
static ALLOCATOR: sqsafe::Allocator = sqsafe::Allocator;

fn main() -> Result<(), sqsafe::Error> {
    sqsafe::runtime()?.block_on(
        sqsafe::consumer::<charge_payment::ChargePayment>()
            .idempotency(|i| i.cache(CacheConfig::default()))
            .run(),
    )
}
