//! The sample stream event round-trips through the DynamoDB event type and holds what events/README.md says.

use std::collections::HashMap;

use aws_lambda_events::dynamodb::Event;
use aws_sdk_dynamodb::types::AttributeValue;
use sqsafe_outbox::{OutboxRecord, Status};

fn sample() -> Event {
    let path = sqsafe_testkit::events_dir().join("outbox-relay-stream.json");
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    serde_json::from_str(&text).expect("a DynamoDB stream event")
}

#[test]
fn the_stream_sample_round_trips_and_holds_one_outbox_insert() {
    let event = sample();
    let json = serde_json::to_string(&event).expect("serialise");
    let back: Event = serde_json::from_str(&json).expect("parse again");
    assert_eq!(back, event);
    let names: Vec<&str> = event
        .records
        .iter()
        .map(|r| r.event_name.as_str())
        .collect();
    assert_eq!(names, ["INSERT", "INSERT", "MODIFY"]);
    assert!(
        event.records.iter().all(|r| r
            .change
            .sequence_number
            .as_deref()
            .is_some_and(|s| !s.is_empty())),
        "every record can be reported"
    );

    let outbox: Vec<OutboxRecord> = event
        .records
        .iter()
        .filter(|r| r.event_name == "INSERT")
        .filter_map(|r| {
            let image: HashMap<String, AttributeValue> = r.change.new_image.clone().into();
            OutboxRecord::from_item(r.change.keys.clone().into(), &image).expect("valid")
        })
        .collect();
    assert_eq!(outbox.len(), 1, "the second INSERT is not an outbox item");
    let record = &outbox[0];
    assert_eq!(record.status(), Status::Pending);
    assert_eq!(record.event().event_id(), "order-o-2001/payment");
    assert_eq!(record.event().correlation_id(), "checkout-2001");
    let payment: charge_payment::PaymentRequested =
        serde_json::from_str(record.event().payload()).expect("charge-payment reads the payload");
    let _ = payment;
}
