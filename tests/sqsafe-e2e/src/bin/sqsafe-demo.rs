//! `make demo`: see `sqsafe_e2e::demo`.

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() -> std::process::ExitCode {
    match sqsafe_e2e::demo::run().await {
        Ok(report) => {
            sqsafe_e2e::demo::print(&report);
            let naive = &report.consumers[0];
            let (claim, keyed) = (&report.consumers[2], &report.consumers[3]);
            let once = |c: &sqsafe_e2e::demo::ConsumerFigures| {
                c.charges == report.intents && c.charges_by_payment.values().all(|n| *n == 1)
            };
            if once(claim) && once(keyed) && naive.charges > report.intents {
                println!(
                    "\nsqsafe: exactly one charge per intent in both modes ({} DynamoDB writes in the claim mode, {} \
                     in the keyed mode); the naive consumer charged {} times for {} intents.",
                    claim.dynamodb_writes(),
                    keyed.dynamodb_writes(),
                    naive.charges,
                    report.intents
                );
                std::process::ExitCode::SUCCESS
            } else {
                eprintln!(
                    "\nunexpected: sqsafe made {} charges (claim mode) and {} (keyed mode) for {} intents (naive {})",
                    claim.charges, keyed.charges, report.intents, naive.charges
                );
                std::process::ExitCode::FAILURE
            }
        }
        Err(e) => {
            eprintln!("demo failed: {e}");
            std::process::ExitCode::FAILURE
        }
    }
}
