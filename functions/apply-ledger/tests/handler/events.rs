//! The sample event for this function round-trips through the SQS event type and holds what its README says.

use apply_ledger::LedgerEntryRequested;
use aws_lambda_events::sqs::SqsEvent;
use sqsafe_testkit::event_file;

#[test]
fn the_fifo_sample_round_trips_and_parses() {
    let event = event_file("apply-ledger-fifo.json");
    let json = serde_json::to_string(&event).expect("serialise");
    let back: SqsEvent = serde_json::from_str(&json).expect("parse again");
    assert_eq!(back, event);
    assert!(event.records.iter().all(|r| {
        r.event_source_arn
            .as_deref()
            .is_some_and(|a| a.ends_with(".fifo"))
    }));
    let groups: std::collections::BTreeSet<_> = event
        .records
        .iter()
        .filter_map(|r| r.attributes.get("MessageGroupId").cloned())
        .collect();
    assert_eq!(groups.into_iter().collect::<Vec<_>>(), ["acct-A", "acct-B"]);
    for record in &event.records {
        let body = record.body.as_deref().expect("body");
        let _: LedgerEntryRequested =
            serde_json::from_str(body).expect("every record is a valid entry");
    }
}
