//! The sample events for this function round-trip through the SQS event type and hold what `events/README.md` says.

use aws_lambda_events::sqs::SqsEvent;
use charge_payment::PaymentRequested;
use sqsafe_testkit::event_file;

fn round_trip(event: &SqsEvent) {
    let json = serde_json::to_string(event).expect("serialise");
    let back: SqsEvent = serde_json::from_str(&json).expect("parse again");
    assert_eq!(&back, event);
}

fn payment(event: &SqsEvent, i: usize) -> Option<PaymentRequested> {
    serde_json::from_str(event.records[i].body.as_deref()?).ok()
}

#[test]
fn the_batch_sample_has_two_payments_a_duplicate_and_a_poison_record() {
    let event = event_file("charge-payment-batch.json");
    round_trip(&event);
    assert_eq!(event.records.len(), 4);
    let ids: std::collections::HashSet<_> = event
        .records
        .iter()
        .filter_map(|r| r.message_id.clone())
        .collect();
    assert_eq!(ids.len(), 4, "distinct message ids");
    assert_eq!(
        payment(&event, 0),
        payment(&event, 2),
        "record 3 republishes record 1"
    );
    assert!(payment(&event, 1).is_some());
    assert!(payment(&event, 3).is_none(), "record 4 is poison");
}

#[test]
fn the_mismatch_sample_reuses_a_key_with_another_amount() {
    let batch = event_file("charge-payment-batch.json");
    let mismatch = event_file("charge-payment-mismatch.json");
    round_trip(&mismatch);
    let (Some(PaymentRequested::V1(first)), Some(PaymentRequested::V1(changed))) =
        (payment(&batch, 0), payment(&mismatch, 0))
    else {
        panic!("both parse");
    };
    assert_eq!(
        (first.payment_id.as_str(), first.tenant.as_str()),
        (changed.payment_id.as_str(), changed.tenant.as_str())
    );
    assert_ne!(first.amount, changed.amount);
}
