//! The effect and the record in one DynamoDB transaction (moto server, started by `make test`).

use std::collections::HashMap;

use aws_sdk_dynamodb::Client;
use aws_sdk_dynamodb::types::{
    AttributeValue, ReturnValuesOnConditionCheckFailure, TransactWriteItem, Update,
};
use sqsafe_idempotency::{
    Claim, DynamoDbStore, Error, Idempotency, IdempotencyStore, ManualClock, ReplaySource,
    Replayed, Status, TransactOutcome,
};

use crate::common::scenarios::{key, payment};
use crate::common::{RequestCounter, T0_MS, builder, create_table, dynamodb_client, table_name};

struct Ledger {
    client: Client,
    table: String,
    idem: Idempotency<DynamoDbStore>,
    requests: RequestCounter,
    _clock: ManualClock,
}

async fn ledger() -> Ledger {
    let requests = RequestCounter::default();
    let client = dynamodb_client(&requests).await;
    let idem_table = table_name("idem");
    let table = table_name("ledger");
    create_table(&client, &idem_table, "pk", None).await;
    create_table(&client, &table, "pk", None).await;
    client
        .put_item()
        .table_name(&table)
        .item("pk", AttributeValue::S("acct-1".into()))
        .item("balance", AttributeValue::N("100".into()))
        .send()
        .await
        .expect("seed balance");
    let clock = ManualClock::at_millis(T0_MS);
    let store = DynamoDbStore::builder(client.clone(), idem_table)
        .build()
        .expect("store");
    let idem = builder(store, &clock).build().expect("config");
    requests.take();
    Ledger {
        client,
        table,
        idem,
        requests,
        _clock: clock,
    }
}

impl Ledger {
    /// Debits `amount` if the balance allows it.
    fn debit(&self, amount: i64) -> TransactWriteItem {
        let update = Update::builder()
            .table_name(&self.table)
            .key("pk", AttributeValue::S("acct-1".into()))
            .update_expression("SET balance = balance - :amount")
            .condition_expression("balance >= :amount")
            .expression_attribute_values(":amount", AttributeValue::N(amount.to_string()))
            .return_values_on_condition_check_failure(ReturnValuesOnConditionCheckFailure::AllOld)
            .build()
            .expect("update");
        TransactWriteItem::builder().update(update).build()
    }

    async fn balance(&self) -> String {
        let item = self
            .client
            .get_item()
            .table_name(&self.table)
            .key("pk", AttributeValue::S("acct-1".into()))
            .send()
            .await
            .expect("get")
            .item
            .expect("item");
        item.get("balance")
            .and_then(|v| v.as_n().ok())
            .cloned()
            .expect("balance")
    }

    async fn apply(&self, id: &str, amount: i64) -> Result<TransactOutcome<String>, Error> {
        let request = self
            .idem
            .request(key(id), &payment(id, amount.unsigned_abs()))
            .expect("request");
        self.idem
            .transact(&request, vec![self.debit(amount)], &format!("entry-{id}"))
            .await
    }
}

#[tokio::test]
async fn effect_and_record_commit_together_and_a_duplicate_changes_nothing() {
    let l = ledger().await;
    assert_eq!(
        l.apply("e-1", 30).await.expect("apply"),
        TransactOutcome::Committed
    );
    assert_eq!(
        l.requests.take(),
        ["TransactWriteItems"],
        "one transaction, no read"
    );
    assert_eq!(l.balance().await, "70");
    let record = l
        .idem
        .store()
        .get(&key("e-1"))
        .await
        .expect("get")
        .expect("marker present");
    assert_eq!(record.status, Status::Completed);
    assert_eq!(record.lease_expires_at, None);

    l.requests.take();
    let again = l.apply("e-1", 30).await.expect("duplicate");
    assert_eq!(
        again,
        TransactOutcome::Replayed {
            result: Replayed::Value("entry-e-1".into()),
            source: ReplaySource::Store
        }
    );
    assert_eq!(l.requests.take(), ["TransactWriteItems"]);
    assert_eq!(l.balance().await, "70", "debited once");
}

#[tokio::test]
async fn a_failed_precondition_writes_nothing_and_is_told_apart_from_a_duplicate() {
    let l = ledger().await;
    let refused = l.apply("e-2", 500).await.expect("outcome");
    let TransactOutcome::EffectRefused { index, item } = refused else {
        panic!("refused: {refused:?}")
    };
    assert_eq!(index, 0);
    let old: HashMap<_, _> = item.expect("ALL_OLD item of the refusing write");
    assert_eq!(
        old.get("balance")
            .and_then(|v| v.as_n().ok())
            .map(String::as_str),
        Some("100")
    );
    assert_eq!(l.balance().await, "100", "effect absent");
    assert_eq!(
        l.idem.store().get(&key("e-2")).await.expect("get"),
        None,
        "marker absent"
    );
    // Nothing was recorded, so the key is still free: a corrected request under it applies.
    assert_eq!(
        l.apply("e-2", 100).await.expect("apply"),
        TransactOutcome::Committed
    );
    assert_eq!(l.balance().await, "0");
}

#[tokio::test]
async fn the_same_key_with_other_content_is_a_mismatch() {
    let l = ledger().await;
    l.apply("e-3", 10).await.expect("apply");
    let err = l.apply("e-3", 20).await.expect_err("mismatch");
    assert!(err.is_payload_mismatch(), "{err}");
    assert_eq!(l.balance().await, "90");
}

#[tokio::test]
async fn a_live_claim_of_the_same_key_makes_the_transaction_wait() {
    let l = ledger().await;
    let request = l
        .idem
        .request(key("e-4"), &payment("e-4", 10))
        .expect("request");
    let Ok(Claim::Acquired(_held)) = l.idem.claim::<String>(&request).await else {
        panic!("claim")
    };
    let err = l.apply("e-4", 10).await.expect_err("in progress");
    assert!(err.is_in_progress() && err.is_retryable(), "{err}");
    assert_eq!(l.balance().await, "100");
}

/// A transaction is cut before the invocation's deadline like a claim: a DynamoDB that does not answer must not
/// carry the invocation past it. Against a listener that takes the connection and never answers: with 700 ms left,
/// the call is cut 500 ms before the deadline, as a retryable store error (the SDK alone would wait 3 s per attempt).
#[tokio::test]
async fn a_transaction_that_gets_no_answer_is_cut_before_the_deadline() {
    let silent = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind");
    let endpoint = format!("http://{}", silent.local_addr().expect("addr"));
    let held = tokio::spawn(async move {
        let mut open = Vec::new();
        while let Ok((socket, _)) = silent.accept().await {
            open.push(socket);
        }
    });
    let client = sqsafe_testkit::dynamodb_at(&endpoint, &RequestCounter::default()).await;
    let clock = ManualClock::at_millis(T0_MS);
    let store = DynamoDbStore::builder(client, "never-answers")
        .build()
        .expect("store");
    let idem = builder(store, &clock).build().expect("config");
    let request = idem
        .request(key("silent"), &payment("silent", 1))
        .expect("request")
        .deadline(std::time::UNIX_EPOCH + std::time::Duration::from_millis(T0_MS + 700));
    let started = std::time::Instant::now();
    let err = idem
        .transact(&request, Vec::new(), &"ch_1".to_owned())
        .await
        .expect_err("no answer");
    let spent = started.elapsed();
    held.abort();
    assert!(
        spent >= std::time::Duration::from_millis(200)
            && spent < std::time::Duration::from_millis(1_500),
        "cut at 200 ms: {spent:?}"
    );
    assert!(matches!(err, Error::Store { .. }), "{err}");
    assert!(err.is_retryable(), "{err}");
    assert!(err.to_string().contains("deadline"), "{err}");
}
