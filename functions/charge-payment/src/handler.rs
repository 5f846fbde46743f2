//! Charges each `PaymentRequested` once: the intent is the payment, the effect a call to the payments API that
//! carries the intent's `Idempotency-Key`.

use sqsafe::{Consumer, Context, Effect, Intent, RecordError, Setup};

use crate::event::{PaymentRequested, PaymentV1};
use crate::payments::{Charge, PaymentsClient};

/// The consumer: the payments API client is all it keeps.
#[derive(Debug, Clone)]
pub struct ChargePayment {
    payments: PaymentsClient,
}

impl Consumer for ChargePayment {
    const NAME: &'static str = "charge-payment";
    // Part of every key: bump it only when charging changes meaning (a new version charges duplicates of payments
    // charged under the old one again); never for a change of the event's or the result's shape.
    const EFFECT_VERSION: u32 = 1;
    // The body fields that define a payment. The `version` tag is left out on purpose: a version 2 that keeps these
    // fields names the same payment the same way.
    const INTENT_FIELDS: &'static [&'static str] = &[
        "/tenant",
        "/payment_id",
        "/amount",
        "/currency",
        "/customer_id",
    ];
    // The payments API applies an `Idempotency-Key` once (as Stripe-style APIs do), and every charge sends the
    // intent's: the keyed mode (`SQSAFE_IDEMPOTENCY_MODE=keyed`, one write per fresh payment) is safe for it.
    const DOWNSTREAM_KEYED: bool = true;
    type Payload = PaymentRequested;
    type Output = Charge;

    /// `PAYMENTS_API_URL` (required, `http(s)://`), `PAYMENTS_TIMEOUT_MS` (default 5000, 1..=60000).
    fn new(setup: &Setup) -> Result<Self, sqsafe::Error> {
        let url = setup.env.url("PAYMENTS_API_URL")?;
        let timeout = setup.env.millis("PAYMENTS_TIMEOUT_MS", 5000, 1..=60_000)?;
        let payments = PaymentsClient::new(url, timeout)?;
        Ok(Self { payments })
    }

    fn intent(event: &PaymentRequested) -> Intent {
        let payment = event.payment();
        Intent::new(&payment.tenant, "payment", &payment.payment_id)
    }

    fn validate(event: &PaymentRequested) -> Result<(), RecordError> {
        event.payment().validate()
    }

    /// A call: one charge, made once the payment's intent is claimed.
    fn effect<'a>(
        &'a self,
        event: PaymentRequested,
        cx: &'a Context<'a>,
    ) -> Result<Effect<'a, Charge>, RecordError> {
        Ok(Effect::call(async move {
            self.charge(event.payment(), cx).await
        }))
    }
}

impl ChargePayment {
    /// One charge through the payments API, under the intent's downstream key and the record's correlation id.
    pub async fn charge(
        &self,
        payment: &PaymentV1,
        cx: &Context<'_>,
    ) -> Result<Charge, RecordError> {
        let charge = self.payments.charge(payment, cx).await?;
        tracing::info!(payment_id = %payment.payment_id, charge_id = %charge.id, "payment charged");
        Ok(charge)
    }
}
