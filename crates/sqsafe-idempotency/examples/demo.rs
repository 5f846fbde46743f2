//! The idempotency core alone against DynamoDB's API, one delivery at a time (the full pipeline is `make demo`).
//! Run it with moto server up: `make moto` in one terminal, its `export` lines applied, then
//! `cargo run -p sqsafe-idempotency --example demo`. Every figure printed is counted during the run.
//!
//! Deliveries: three payments, two of them redelivered, one republished with a changed amount under the same key,
//! and one whose first attempt crashes after its claim (then is redelivered before and after its lease passes).

use std::sync::atomic::{AtomicU32, Ordering};
use std::time::Duration;

use aws_sdk_dynamodb::types::{
    AttributeDefinition, BillingMode, KeySchemaElement, KeyType, ScalarAttributeType,
};
use serde_json::json;
use sqsafe_idempotency::{
    Claim, DynamoDbStore, Error, Idempotency, KeyBuilder, ManualClock, Outcome, RunError,
};

struct Delivery {
    payment_id: &'static str,
    amount: u64,
    note: &'static str,
}

const DELIVERIES: &[Delivery] = &[
    Delivery {
        payment_id: "p-1",
        amount: 1250,
        note: "first delivery",
    },
    Delivery {
        payment_id: "p-2",
        amount: 990,
        note: "first delivery",
    },
    Delivery {
        payment_id: "p-1",
        amount: 1250,
        note: "redelivered after a visibility timeout",
    },
    Delivery {
        payment_id: "p-3",
        amount: 4000,
        note: "first delivery",
    },
    Delivery {
        payment_id: "p-2",
        amount: 990,
        note: "republished by the publisher",
    },
    Delivery {
        payment_id: "p-1",
        amount: 9999,
        note: "same key, changed amount",
    },
    Delivery {
        payment_id: "p-1",
        amount: 1250,
        note: "redelivered again",
    },
];

#[tokio::main(flavor = "current_thread")]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let endpoint = std::env::var("AWS_ENDPOINT_URL").map_err(
        |_| "AWS_ENDPOINT_URL is not set: start moto with `make moto` and apply the export lines it prints",
    )?;
    let config = sqsafe_aws::load().await;
    let client = aws_sdk_dynamodb::Client::new(&config);
    let table = format!("sqsafe-demo-{}", std::process::id());
    create_table(&client, &table).await?;
    println!("DynamoDB (moto server) at {endpoint}, table {table}\n");

    // sqsafe consumer.
    let clock = ManualClock::at_millis(1_800_000_000_000);
    let idem = Idempotency::builder(
        DynamoDbStore::builder(client.clone(), &table).build()?,
        "charge-payment",
        1,
    )
    .clock(clock.clone())
    .default_lease(Duration::from_secs(30))
    .build()?;
    let charges = AtomicU32::new(0);
    let charged_total = AtomicU32::new(0);
    let (mut replayed, mut refused, mut retry_later) = (0, 0, 0);

    println!(
        "{:<3} {:<6} {:>6}  {:<40} outcome",
        "#", "key", "amount", "delivery"
    );
    for (i, d) in DELIVERIES.iter().enumerate() {
        let key = KeyBuilder::new("charge-payment", 1)
            .tenant("acme")
            .intent("payment", d.payment_id)
            .build()?;
        let body = json!({ "payment_id": d.payment_id, "amount": d.amount, "currency": "EUR" });
        let outcome = idem
            .run(key, &body, || async {
                let n = charges.fetch_add(1, Ordering::SeqCst) + 1;
                charged_total.fetch_add(
                    u32::try_from(d.amount).unwrap_or(u32::MAX),
                    Ordering::SeqCst,
                );
                Ok::<_, String>(format!("ch_{n}"))
            })
            .await;
        let said = match outcome {
            Ok(Outcome::Executed(charge)) => format!("charged, {charge}"),
            Ok(Outcome::Replayed { result, .. }) => {
                replayed += 1;
                format!("replayed {result:?}, not charged")
            }
            Err(RunError::Idempotency(e)) if e.is_payload_mismatch() => {
                refused += 1;
                "refused: payload mismatch (permanent, to the DLQ)".to_owned()
            }
            Err(e) => return Err(e.to_string().into()),
        };
        println!(
            "{:<3} {:<6} {:>6}  {:<40} {said}",
            i + 1,
            d.payment_id,
            d.amount,
            d.note
        );
    }

    // A crash after the claim: the record stays IN_PROGRESS until its lease passes, then a redelivery takes over.
    let key = KeyBuilder::new("charge-payment", 1)
        .tenant("acme")
        .intent("payment", "p-4")
        .build()?;
    let body = json!({ "payment_id": "p-4", "amount": 500, "currency": "EUR" });
    let request = idem.request(key.clone(), &body)?;
    if let Claim::Acquired(guard) = idem.claim::<String>(&request).await? {
        drop(guard); // the process dies here, before charging
    }
    println!(
        "8   p-4       500  claimed, then the process crashed       (record left IN_PROGRESS)"
    );
    let mut deliveries = DELIVERIES.len() + 1;
    for (after, note) in [
        (5, "redelivered 5 s later"),
        (31, "redelivered after the 30 s lease"),
    ] {
        clock.advance(Duration::from_secs(after));
        deliveries += 1;
        let run = idem
            .execute(&request, || async {
                let n = charges.fetch_add(1, Ordering::SeqCst) + 1;
                charged_total.fetch_add(500, Ordering::SeqCst);
                Ok::<_, String>(format!("ch_{n}"))
            })
            .await;
        let said = match run {
            Ok(Outcome::Executed(charge)) => format!("taken over and charged, {charge}"),
            Err(RunError::Idempotency(Error::InProgress { .. })) => {
                retry_later += 1;
                "in progress elsewhere: retry later (transient)".to_owned()
            }
            other => format!("{other:?}"),
        };
        println!(
            "{:<3} {:<6} {:>6}  {:<40} {said}",
            deliveries, "p-4", 500, note
        );
    }

    let intents = 4;
    println!("\nsummary (counted during this run)");
    println!("  deliveries                      {deliveries}");
    println!("  distinct intents                {intents}");
    println!(
        "  sqsafe: charges                 {} (total {} cents)",
        charges.load(Ordering::SeqCst),
        charged_total.load(Ordering::SeqCst)
    );
    println!("  sqsafe: replayed                {replayed}");
    println!("  sqsafe: refused (mismatch)      {refused}");
    println!("  sqsafe: in progress, retried    {retry_later}");
    let stored = client.scan().table_name(&table).send().await?.count();
    println!("  records in {table}: {stored}");
    if charges.load(Ordering::SeqCst) != intents {
        return Err("sqsafe charged more or less than once per intent".into());
    }
    Ok(())
}

async fn create_table(
    client: &aws_sdk_dynamodb::Client,
    table: &str,
) -> Result<(), Box<dyn std::error::Error>> {
    client
        .create_table()
        .table_name(table)
        .billing_mode(BillingMode::PayPerRequest)
        .attribute_definitions(
            AttributeDefinition::builder()
                .attribute_name("pk")
                .attribute_type(ScalarAttributeType::S)
                .build()?,
        )
        .key_schema(
            KeySchemaElement::builder()
                .attribute_name("pk")
                .key_type(KeyType::Hash)
                .build()?,
        )
        .send()
        .await?;
    Ok(())
}
