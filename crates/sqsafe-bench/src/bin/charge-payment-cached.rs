//! `charge-payment` with the idempotency layer's local cache of completed keys turned on through the façade's hook:
//! the bench's cache-hit figures. Everything else is the deployed function.

use sqsafe::layers::idempotency::CacheConfig;

#[tokio::main]
async fn main() -> Result<(), sqsafe::Error> {
    sqsafe::consumer::<charge_payment::ChargePayment>()
        .idempotency(|i| i.cache(CacheConfig::default()))
        .run()
        .await
}
