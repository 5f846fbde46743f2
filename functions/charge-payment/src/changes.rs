//! The same charge fed by a DynamoDB table's stream instead of a queue: each payment request is an item of the table
//! (a `PaymentV1` with `payment_id` as its key), and each insert or modification of one is a change to charge.
//!
//! The fault-injection suite runs it on moto's DynamoDB Streams (its main is the example `charge-payment-changes`,
//! built only with the `fault-injection` feature); template.yaml deploys the queue consumer, not this one.

use sqsafe::{Change, ChangeKind, Consumer, Context, Effect, Intent, RecordError, Setup};

use crate::event::PaymentV1;
use crate::handler::ChargePayment;
use crate::payments::Charge;

/// The consumer of the payment requests table's changes: the queue consumer's charge, keyed by the payment.
#[derive(Debug, Clone)]
pub struct ChargePaymentChanges {
    charge: ChargePayment,
}

impl Consumer for ChargePaymentChanges {
    const NAME: &'static str = "charge-payment-changes";
    const EFFECT_VERSION: u32 = 1;
    // The item's fields that define a payment, as the change's new image shows them: a modification that touches
    // anything else (a producer writing the same request again with a timestamp of its own) is the same payment and
    // replays; the same payment with another amount is a mismatch, never a second charge.
    const INTENT_FIELDS: &'static [&'static str] = &[
        "/newImage/tenant",
        "/newImage/payment_id",
        "/newImage/amount",
        "/newImage/currency",
        "/newImage/customer_id",
    ];
    const DOWNSTREAM_KEYED: bool = true;
    type Payload = Change<PaymentV1>;
    type Output = Charge;

    /// As [`ChargePayment`]: `PAYMENTS_API_URL`, `PAYMENTS_TIMEOUT_MS`.
    fn new(setup: &Setup) -> Result<Self, sqsafe::Error> {
        Ok(Self {
            charge: ChargePayment::new(setup)?,
        })
    }

    /// The payment the change is about; a change without a new image is refused by [`validate`](Self::validate)
    /// before any effect, under the record's own identity.
    fn intent(change: &Change<PaymentV1>) -> Intent {
        match &change.new_image {
            Some(payment) => Intent::new(&payment.tenant, "payment", &payment.payment_id),
            None => Intent::of_record(),
        }
    }

    /// An insert or a modification with its new image, of a valid payment. A removal is not a request to charge: a
    /// permanent `not_a_request` error, in the failure queue with its content.
    fn validate(change: &Change<PaymentV1>) -> Result<(), RecordError> {
        match (&change.event_name, &change.new_image) {
            (ChangeKind::Remove, _) => Err(RecordError::permanent(
                "not_a_request",
                "a removed payment request is not a request to charge",
            )),
            (_, None) => Err(RecordError::permanent(
                "no_new_image",
                "a change without its new image: give the table's stream a view with new images",
            )),
            (_, Some(payment)) => payment.validate(),
        }
    }

    /// A call: one charge, made once the payment's intent is claimed.
    fn effect<'a>(
        &'a self,
        change: Change<PaymentV1>,
        cx: &'a Context<'a>,
    ) -> Result<Effect<'a, Charge>, RecordError> {
        let Some(payment) = change.new_image else {
            return Err(RecordError::permanent(
                "no_new_image",
                "a change without its new image",
            ));
        };
        Ok(Effect::call(async move {
            self.charge.charge(&payment, cx).await
        }))
    }
}
