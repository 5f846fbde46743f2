//! apply-ledger against DynamoDB's and SQS's real APIs (moto server, started by `make test`), driven by the sample
//! event `events/apply-ledger-fifo.json`.

use std::collections::HashMap;

use apply_ledger::{AppliedEntry, ApplyLedger, BALANCE_SK, LedgerEntryV1, entry_sk};
use aws_lambda_events::sqs::SqsEvent;
use aws_sdk_dynamodb::types::AttributeValue;
use aws_sdk_sqs::types::MessageSystemAttributeName;
use serde::Deserialize;
use sqsafe::{App, Consumer, Context, Effect, Env, Intent, RecordError, Setup};
use sqsafe_local::stack::{LocalStack, StackOptions};
use sqsafe_testkit::{RequestCounter, event_file, invocation, sdk_config, unique_name};

struct Fixture {
    dynamodb: aws_sdk_dynamodb::Client,
    sqs: aws_sdk_sqs::Client,
    setup: Setup,
    idempotency_table: String,
    ledger_table: String,
    dlq_url: String,
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
    let aws = sdk_config().await;
    let sqs = aws_sdk_sqs::Client::new(&aws);
    // The function's tables and queues as template.yaml defines them, and its environment as the template sets it.
    let stack = LocalStack::for_function(
        &sqs,
        &dynamodb,
        "apply-ledger",
        StackOptions {
            prefix: unique_name("al"),
            ..StackOptions::default()
        },
    )
    .await
    .expect("the template's resources for apply-ledger");
    let idempotency_table = stack.tables["IdempotencyTable"].clone();
    let ledger_table = stack.tables["LedgerTable"].clone();
    let dlq_url = stack
        .dead_letter_queue("apply-ledger")
        .expect("DLQ")
        .url
        .clone();
    let env = Env::from_pairs(stack.function_env("apply-ledger"));
    let mut setup = Setup::new(env, aws).expect("setup");
    setup.dynamodb = dynamodb.clone();
    Fixture {
        dynamodb,
        sqs,
        setup,
        idempotency_table,
        ledger_table,
        dlq_url,
        _proxy: proxy,
    }
}

impl Fixture {
    fn consumer(&self) -> App<ApplyLedger> {
        sqsafe::consumer::<ApplyLedger>()
            .build(&self.setup)
            .expect("consumer")
    }

    fn next_build(&self) -> App<NextBuild> {
        sqsafe::consumer::<NextBuild>()
            .build(&self.setup)
            .expect("next build")
    }

    async fn ledger(&self) -> HashMap<(String, String), HashMap<String, AttributeValue>> {
        let items = self
            .dynamodb
            .scan()
            .table_name(&self.ledger_table)
            .send()
            .await
            .expect("scan")
            .items;
        items
            .unwrap_or_default()
            .into_iter()
            .map(|item| {
                let s = |k: &str| {
                    item.get(k)
                        .and_then(|v| v.as_s().ok())
                        .cloned()
                        .unwrap_or_default()
                };
                ((s("pk"), s("sk")), item)
            })
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
        let items = self
            .dynamodb
            .scan()
            .table_name(&self.idempotency_table)
            .send()
            .await
            .expect("scan")
            .items;
        let mut keys: Vec<String> = items
            .unwrap_or_default()
            .iter()
            .filter_map(|i| i.get("pk").and_then(|v| v.as_s().ok()).cloned())
            .collect();
        keys.sort();
        keys
    }

    async fn dead_letters(&self) -> Vec<aws_sdk_sqs::types::Message> {
        self.sqs
            .receive_message()
            .queue_url(&self.dlq_url)
            .message_attribute_names("All")
            .message_system_attribute_names(MessageSystemAttributeName::MessageGroupId)
            .max_number_of_messages(10)
            .send()
            .await
            .expect("receive")
            .messages
            .unwrap_or_default()
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

fn first_entry(message_id: &str, edit: impl Fn(&mut serde_json::Value)) -> SqsEvent {
    let mut event = event_file("apply-ledger-fifo.json");
    event.records.truncate(1);
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
    let consumer = fx.consumer();
    let response = consumer
        .handle(invocation(event_file("apply-ledger-fifo.json"), "req-1"))
        .await
        .expect("batch");
    assert!(
        response.batch_item_failures.is_empty(),
        "{:?}",
        response.batch_item_failures
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

    let dead = fx.dead_letters().await;
    assert_eq!(dead.len(), 1);
    let get = |field: &str| sqsafe_testkit::dlq_context(&dead[0], field).unwrap_or_default();
    assert_eq!(get("error_kind"), "insufficient_funds");
    assert_eq!(get("original_message_id"), "7c2f-0004");
    assert_eq!(get("consumer"), "apply-ledger");
    assert_eq!(
        sqsafe_testkit::message_attribute(&dead[0], "correlationId").as_deref(),
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
    let group = dead[0]
        .attributes()
        .and_then(|a| a.get(&MessageSystemAttributeName::MessageGroupId))
        .cloned();
    assert_eq!(group.as_deref(), Some("acct-A"));
}

#[tokio::test]
async fn a_redelivered_batch_changes_nothing() {
    let fx = fixture().await;
    let consumer = fx.consumer();
    consumer
        .handle(invocation(event_file("apply-ledger-fifo.json"), "req-1"))
        .await
        .expect("first");
    let before = fx.ledger().await;
    let again = consumer
        .handle(invocation(event_file("apply-ledger-fifo.json"), "req-2"))
        .await
        .expect("again");
    assert!(again.batch_item_failures.is_empty());
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
    let mut broken = fx.setup.clone();
    broken.settings.idempotency_table = "no-such-table".into();
    let consumer = sqsafe::consumer::<ApplyLedger>()
        .build(&broken)
        .expect("consumer");
    let response = consumer
        .handle(invocation(event_file("apply-ledger-fifo.json"), "req-1"))
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
        fx.dead_letters().await.is_empty(),
        "transient failures come back; they are not dead-lettered"
    );
}

#[tokio::test]
async fn a_poison_entry_goes_to_the_dlq_and_its_group_goes_on() {
    let fx = fixture().await;
    let mut event = event_file("apply-ledger-fifo.json");
    event.records.truncate(2); // e-1 (acct-A), e-2 (acct-B)
    let mut poison = event.records[0].clone();
    poison.message_id = Some("poison-1".into());
    poison.body = Some(r#"{"version":"7","entry_id":"e-x"}"#.into());
    event.records.insert(0, poison);
    let response = fx
        .consumer()
        .handle(invocation(event, "req-1"))
        .await
        .expect("batch");
    assert!(response.batch_item_failures.is_empty());
    assert_eq!(
        fx.balance("acct-A").await.as_deref(),
        Some("1000"),
        "the group went on after the DLQ took the poison"
    );
    let dead = fx.dead_letters().await;
    assert_eq!(dead.len(), 1);
    let kind = sqsafe_testkit::dlq_context(&dead[0], "error_kind");
    assert_eq!(kind.as_deref(), Some("bad_payload"));
}

#[tokio::test]
async fn a_build_whose_event_gains_an_optional_field_replays_what_the_previous_build_applied() {
    let fx = fixture().await;
    let consumer = fx.consumer();
    let applied = consumer
        .handle(invocation(first_entry("7c2f-0001", |_| {}), "req-1"))
        .await
        .expect("v1");
    assert!(applied.batch_item_failures.is_empty());
    assert_eq!(fx.balance("acct-A").await.as_deref(), Some("1000"));

    // The next build (version 1 plus an optional `memo`) gets the redelivery as it was, and a copy republished by a
    // producer that already sends the new field.
    for (id, memo) in [("7c2f-0001", None), ("republished-with-memo", Some("rent"))] {
        let event = first_entry(id, |b| {
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
    let changed = first_entry("another-amount", |b| b["amount"] = 999.into());
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
    let dead: Vec<(String, String)> = fx
        .dead_letters()
        .await
        .iter()
        .map(|m| {
            let get = |field: &str| sqsafe_testkit::dlq_context(m, field).unwrap_or_default();
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
    let response = fx
        .consumer()
        .handle(invocation(event_file("apply-ledger-fifo.json"), "req-size"))
        .await
        .expect("batch");
    assert!(response.batch_item_failures.is_empty());
    let completed = sqsafe_testkit::completed_records(&fx.dynamodb, &fx.idempotency_table).await;
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
