//! Per-message CPU cost of the idempotency core without I/O: key derivation, fingerprint, and claim/complete on the
//! in-memory store. Run with `make bench` (or `cargo bench -p sqsafe-idempotency`); figures go to `benches/RESULTS.md`.

use std::hint::black_box;
use std::sync::atomic::{AtomicU64, Ordering};

use criterion::{Criterion, criterion_group, criterion_main};
use serde_json::{Value, json};
use sqsafe_idempotency::{
    CacheConfig, Fingerprint, FingerprintFields, Idempotency, InMemoryStore, KeyBuilder,
};

fn payment(id: u64) -> Value {
    json!({
        "type": "PaymentRequested", "version": 1, "payment_id": format!("pay-{id}"), "tenant": "acme",
        "amount": 1250, "currency": "EUR", "customer": { "id": "cus-77", "email": "zoe@example.com" },
        "sent_at": "2026-11-30T10:00:00Z", "lines": [ { "sku": "A-1", "qty": 2 }, { "sku": "B-9", "qty": 1 } ]
    })
}

fn key_and_fingerprint(c: &mut Criterion) {
    let body = payment(42);
    c.bench_function("key: build from 4 parts", |b| {
        b.iter(|| {
            KeyBuilder::new("charge-payment", 1)
                .tenant(black_box("acme"))
                .intent("payment", black_box("pay-42"))
                .build()
        })
    });
    c.bench_function("fingerprint: whole payload", |b| {
        b.iter(|| Fingerprint::of_value(black_box(&body), &FingerprintFields::All))
    });
    let only = FingerprintFields::only(["/payment_id", "/amount", "/currency", "/customer/id"]);
    c.bench_function("fingerprint: 4 selected fields", |b| {
        b.iter(|| Fingerprint::of_value(black_box(&body), &only))
    });
}

fn claim_complete(c: &mut Criterion) {
    let rt = tokio::runtime::Builder::new_current_thread()
        .build()
        .expect("runtime");
    let idem = Idempotency::builder(InMemoryStore::new(), "charge-payment", 1)
        .build()
        .expect("config");
    let next = AtomicU64::new(0);
    c.bench_function(
        "message: key + fingerprint + claim + effect + complete (fresh, in-memory)",
        |b| {
            b.iter(|| {
                let id = next.fetch_add(1, Ordering::Relaxed);
                let body = payment(id);
                let key = KeyBuilder::new("charge-payment", 1)
                    .tenant("acme")
                    .intent("payment", format!("pay-{id}"))
                    .build()?;
                rt.block_on(idem.run(key, &body, || async { Ok::<_, String>("ch_1".to_owned()) }))
            })
        },
    );

    let body = payment(7);
    let key = KeyBuilder::new("charge-payment", 1)
        .tenant("acme")
        .intent("payment", "pay-7")
        .build()
        .expect("key");
    rt.block_on(idem.run(key.clone(), &body, || async {
        Ok::<_, String>("ch_1".to_owned())
    }))
    .expect("seed");
    c.bench_function(
        "message: duplicate replayed from the store (in-memory)",
        |b| {
            b.iter(|| {
                rt.block_on(idem.run(key.clone(), &body, || async {
                    Ok::<_, String>("ch_2".to_owned())
                }))
            })
        },
    );

    let cached = Idempotency::builder(InMemoryStore::new(), "charge-payment", 1)
        .cache(CacheConfig::default())
        .build()
        .expect("config");
    rt.block_on(cached.run(key.clone(), &body, || async {
        Ok::<_, String>("ch_1".to_owned())
    }))
    .expect("seed");
    c.bench_function("message: duplicate answered by the local cache", |b| {
        b.iter(|| {
            rt.block_on(cached.run(key.clone(), &body, || async {
                Ok::<_, String>("ch_2".to_owned())
            }))
        })
    });
}

criterion_group!(benches, key_and_fingerprint, claim_complete);
criterion_main!(benches);
