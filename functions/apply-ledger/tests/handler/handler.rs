//! apply-ledger against DynamoDB's and SQS's real APIs (moto server, started by `make test`), driven by the sample
//! event `events/apply-ledger-fifo.json`, on the tables and queues template.yaml defines for it (sqsafe_local's
//! `Harness`).

use std::collections::HashMap;

use apply_ledger::{AppliedEntry, ApplyLedger, BALANCE_SK, LedgerEntryV1, entry_sk};
use aws_lambda_events::sqs::SqsEvent;
use aws_sdk_sqs::types::MessageSystemAttributeName;
use serde::Deserialize;
use sqsafe::{App, Consumer, Context, Effect, Intent, RecordError, Setup};
use sqsafe_local::harness::{Harness, Item};
use sqsafe_testkit::{RequestCounter, invocation, item_string};

/// apply-ledger on its template's resources, its DynamoDB requests through the proxy (which lives as long).
struct Fixture {
    h: Harness<ApplyLedger>,
    _proxy: sqsafe_test_servers::RunningProxy,
}

async fn fixture() -> Fixture {
    // Groups run concurrently and duplicates cancel transactions: moto's rollback of a cancelled transaction restores
    // a copy of the tables and erases concurrent writes. The transparent proxy runs each transaction alone, as
    // DynamoDB's atomicity requires (see sqsafe_test_servers::proxy).
    let proxy = sqsafe_test_servers::FaultProxy::start(sqsafe_test_servers::FaultProxyConfig::new(
        sqsafe_testkit::endpoint(),
    ))
    .await
    .expect("proxy");
    let dynamodb = sqsafe_testkit::dynamodb_at(&proxy.endpoint(), &RequestCounter::default()).await;
    let h = Harness::builder()
        .dynamodb(dynamodb)
        .sample("apply-ledger-fifo.json")
        .start()
        .await
        .expect("apply-ledger on its template's resources");
    Fixture { h, _proxy: proxy }
}

impl Fixture {
    fn next_build(&self) -> App<NextBuild> {
        sqsafe::consumer::<NextBuild>()
            .build(self.h.setup())
            .expect("next build")
    }

    async fn ledger(&self) -> HashMap<(String, String), Item> {
        self.h
            .items("LEDGER_TABLE")
            .await
            .into_iter()
            .map(|item| ((item_string(&item, "pk"), item_string(&item, "sk")), item))
            .collect()
    }

    async fn balance(&self, account: &str) -> Option<String> {
        let ledger = self.ledger().await;
        ledger
            .get(&(account.to_owned(), BALANCE_SK.to_owned()))?
            .get("balance")?
            .as_n()
            .ok()
            .cloned()
    }

    async fn idempotency_keys(&self) -> Vec<String> {
        let items = self.h.items("IDEMPOTENCY_TABLE").await;
        let mut keys: Vec<String> = items.iter().map(|i| item_string(i, "pk")).collect();
        keys.sort();
        keys
    }
}

/// `LedgerEntryRequested` as a later build reads it: version 1 with an optional field added.
#[derive(Debug, Deserialize)]
#[serde(tag = "version")]
enum LedgerEntryRequestedNext {
    #[serde(rename = "1")]
    V1 {
        #[serde(flatten)]
        entry: EntryFields,
        /// Read by the next build; not part of the intent.
        #[serde(default)]
        #[allow(dead_code)]
        memo: Option<String>,
    },
}

#[derive(Debug, Deserialize)]
struct EntryFields {
    entry_id: String,
    account_id: String,
    tenant: String,
    amount: i64,
    currency: String,
}

impl LedgerEntryRequestedNext {
    fn entry(&self) -> LedgerEntryV1 {
        let LedgerEntryRequestedNext::V1 { entry: e, memo: _ } = self;
        LedgerEntryV1 {
            entry_id: e.entry_id.clone(),
            account_id: e.account_id.clone(),
            tenant: e.tenant.clone(),
            amount: e.amount,
            currency: e.currency.clone(),
        }
    }
}

/// The next build of apply-ledger: the same consumer (name, version, intent fields, writes) reading the new type.
struct NextBuild(ApplyLedger);

impl Consumer for NextBuild {
    const NAME: &'static str = ApplyLedger::NAME;
    const EFFECT_VERSION: u32 = ApplyLedger::EFFECT_VERSION;
    const INTENT_FIELDS: &'static [&'static str] = ApplyLedger::INTENT_FIELDS;
    type Payload = LedgerEntryRequestedNext;
    type Output = AppliedEntry;

    fn new(setup: &Setup) -> Result<Self, sqsafe::Error> {
        ApplyLedger::new(setup).map(NextBuild)
    }

    fn intent(event: &LedgerEntryRequestedNext) -> Intent {
        let e = event.entry();
        Intent::new(&e.tenant, "ledger-entry", &e.entry_id)
    }

    fn effect<'a>(
        &'a self,
        event: LedgerEntryRequestedNext,
        cx: &'a Context<'a>,
    ) -> Result<Effect<'a, AppliedEntry>, RecordError> {
        let entry = event.entry();
        let (writes, applied) = self.0.entry_writes(&entry, cx)?;
        Ok(Effect::writes(writes, applied)
            .refused(move |index, item| self.0.entry_refused(&entry, index, item)))
    }
}

fn first_entry(
    h: &Harness<ApplyLedger>,
    message_id: &str,
    edit: impl Fn(&mut serde_json::Value),
) -> SqsEvent {
    let mut event = h.sample_first();
    let record = &mut event.records[0];
    let mut body: serde_json::Value =
        serde_json::from_str(record.body.as_deref().unwrap_or_default()).expect("json body");
    edit(&mut body);
    record.body = Some(body.to_string());
    record.message_id = Some(message_id.to_owned());
    event
}

fn key(entry: &str) -> String {
    format!("apply-ledger#v1#acme#ledger-entry:{entry}")
}

#[tokio::test]
async fn the_sample_fifo_batch_applies_each_entry_once_and_dead_letters_the_overdraft() {
    let fx = fixture().await;
    let delivery = fx.h.deliver(fx.h.sample()).await;
    assert!(
        delivery.response.batch_item_failures.is_empty(),
        "{delivery:?}"
    );

    // acct-A: +1000 -300 (-5000 refused) +50; acct-B: +500 -200, then e-2 redelivered (replayed, not applied again).
    assert_eq!(fx.balance("acct-A").await.as_deref(), Some("750"));
    assert_eq!(fx.balance("acct-B").await.as_deref(), Some("300"));

    // Atomicity: an entry item exists exactly when its idempotency record does.
    let ledger = fx.ledger().await;
    let entries: Vec<String> = ledger
        .keys()
        .filter_map(|(_, sk)| sk.strip_prefix("ENTRY#").map(str::to_owned))
        .collect();
    let mut expected_keys: Vec<String> = entries.iter().map(|e| key(e)).collect();
    expected_keys.sort();
    assert_eq!(
        fx.idempotency_keys().await,
        expected_keys,
        "marker and effect, both or neither"
    );
    assert_eq!(entries.len(), 5, "e-1, e-2, e-3, e-5, e-6: {entries:?}");
    assert!(
        !ledger.contains_key(&("acct-A".to_owned(), entry_sk("e-4"))),
        "the refused debit wrote nothing"
    );

    let dead = fx.h.dead_letter().await;
    let get = |field: &str| dead.context(field).unwrap_or_default();
    assert_eq!(get("error_kind"), "insufficient_funds");
    assert_eq!(get("original_message_id"), "7c2f-0004");
    assert_eq!(get("consumer"), "apply-ledger");
    assert_eq!(
        sqsafe_testkit::message_attribute(&dead.message, "correlationId").as_deref(),
        Some("corr-b4")
    );
    // The refusal says what was refused, never the account's balance: a dead letter's context is read by operators
    // and kept for days, and the balance is not the message's data.
    assert!(
        get("error").contains("cannot cover a debit of 5000"),
        "{}",
        get("error")
    );
    assert!(
        !get("error").contains("700"),
        "no balance: {}",
        get("error")
    );
    let group = dead
        .message
        .attributes()
        .and_then(|a| a.get(&MessageSystemAttributeName::MessageGroupId))
        .cloned();
    assert_eq!(group.as_deref(), Some("acct-A"));
}

#[tokio::test]
async fn a_redelivered_batch_changes_nothing() {
    let fx = fixture().await;
    fx.h.deliver(fx.h.sample()).await;
    let before = fx.ledger().await;
    let again = fx.h.deliver(fx.h.sample()).await;
    assert!(again.response.batch_item_failures.is_empty(), "{again:?}");
    assert_eq!(
        fx.ledger().await,
        before,
        "every entry replayed, no balance moved"
    );
}

#[tokio::test]
async fn a_transient_failure_holds_back_the_rest_of_its_group() {
    let fx = fixture().await;
    // The idempotency table does not exist: every transaction fails with a transient store error.
    let mut broken = fx.h.setup().clone();
    broken.settings.idempotency_table = "no-such-table".into();
    let consumer = sqsafe::consumer::<ApplyLedger>()
        .build(&broken)
        .expect("consumer");
    let response = consumer
        .handle(invocation(fx.h.sample(), "req-1"))
        .await
        .expect("batch");
    let reported: Vec<&str> = response
        .batch_item_failures
        .iter()
        .map(|f| f.item_identifier.as_str())
        .collect();
    assert_eq!(
        reported,
        [
            "7c2f-0001",
            "7c2f-0002",
            "7c2f-0003",
            "7c2f-0004",
            "7c2f-0005",
            "7c2f-0006",
            "7c2f-0007"
        ],
        "each group's first record failed, the rest of each group was held back, in event order"
    );
    assert!(fx.ledger().await.is_empty(), "nothing applied");
    assert!(
        fx.h.dead_letters().await.is_empty(),
        "transient failures come back; they are not dead-lettered"
    );
}

#[tokio::test]
async fn a_poison_entry_goes_to_the_dlq_and_its_group_goes_on() {
    let fx = fixture().await;
    let mut event = fx.h.sample();
    event.records.truncate(2); // e-1 (acct-A), e-2 (acct-B)
    let mut poison = event.records[0].clone();
    poison.message_id = Some("poison-1".into());
    poison.body = Some(r#"{"version":"7","entry_id":"e-x"}"#.into());
    event.records.insert(0, poison);
    let delivery = fx.h.deliver(event).await;
    assert!(
        delivery.response.batch_item_failures.is_empty(),
        "{delivery:?}"
    );
    assert_eq!(
        fx.balance("acct-A").await.as_deref(),
        Some("1000"),
        "the group went on after the DLQ took the poison"
    );
    let kind = fx.h.dead_letter().await.context("error_kind");
    assert_eq!(kind.as_deref(), Some("bad_payload"));
}

#[tokio::test]
async fn a_build_whose_event_gains_an_optional_field_replays_what_the_previous_build_applied() {
    let fx = fixture().await;
    let applied = fx.h.deliver(first_entry(&fx.h, "7c2f-0001", |_| {})).await;
    assert!(applied.response.batch_item_failures.is_empty());
    assert_eq!(fx.balance("acct-A").await.as_deref(), Some("1000"));

    // The next build (version 1 plus an optional `memo`) gets the redelivery as it was, and a copy republished by a
    // producer that already sends the new field.
    for (id, memo) in [("7c2f-0001", None), ("republished-with-memo", Some("rent"))] {
        let event = first_entry(&fx.h, id, |b| {
            if let Some(memo) = memo {
                b["memo"] = memo.into();
            }
        });
        let response = fx
            .next_build()
            .handle(invocation(event, "req-next"))
            .await
            .expect("next build");
        assert!(response.batch_item_failures.is_empty(), "{id}");
    }
    assert_eq!(
        fx.balance("acct-A").await.as_deref(),
        Some("1000"),
        "replayed, not applied again"
    );

    // What defines the entry still counts: another amount under the same entry id is refused.
    let changed = first_entry(&fx.h, "another-amount", |b| b["amount"] = 999.into());
    let response = fx
        .next_build()
        .handle(invocation(changed, "req-changed"))
        .await
        .expect("next build");
    assert!(
        response.batch_item_failures.is_empty(),
        "permanent: dead-lettered"
    );
    assert_eq!(fx.balance("acct-A").await.as_deref(), Some("1000"));
    let dead: Vec<(String, String)> =
        fx.h.dead_letters()
            .await
            .iter()
            .map(|m| {
                let get = |field: &str| m.context(field).unwrap_or_default();
                (get("error_kind"), get("original_message_id"))
            })
            .collect();
    assert_eq!(
        dead,
        [("payload_mismatch".to_owned(), "another-amount".to_owned())],
        "only the changed amount is a mismatch"
    );
}

/// What a completed record of apply-ledger costs, by DynamoDB's sizing rules (`sqsafe_idempotency::size`), as
/// charge-payment's test measures its own: at most 1 KB, one write unit (it is written in the same
/// `TransactWriteItems` as the ledger entry; a transaction consumes two units per item of it).
#[tokio::test]
async fn a_completed_record_is_measured_by_dynamodbs_sizing_rules() {
    use sqsafe::layers::idempotency::size;
    let fx = fixture().await;
    let delivery = fx.h.deliver(fx.h.sample()).await;
    assert!(delivery.response.batch_item_failures.is_empty());
    let setup = fx.h.setup();
    let completed =
        sqsafe_testkit::completed_records(&setup.dynamodb, &setup.settings.idempotency_table).await;
    let sizes: Vec<usize> = completed.iter().map(size::item_bytes).collect();
    assert!(!sizes.is_empty(), "{completed:?}");
    let largest = sizes.iter().copied().max().unwrap_or_default();
    println!(
        "apply-ledger's completed records: {sizes:?} bytes; the largest takes {} write unit(s) written alone, {} in a transaction",
        size::write_units(largest),
        2 * size::write_units(largest)
    );
    assert!(sizes.iter().all(|&b| b > 100), "{sizes:?}");
    assert_eq!(size::write_units(largest), 1, "one write unit: {sizes:?}");
}
