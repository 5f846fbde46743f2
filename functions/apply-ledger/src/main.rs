//! `apply-ledger`: wiring only. The consumer is in `handler.rs`.

#[tokio::main]
async fn main() -> Result<(), sqsafe::Error> {
    sqsafe::run_transact::<apply_ledger::ApplyLedger>().await
}
