//! `make demo`: see `sqsafe_e2e::demo`.

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() -> std::process::ExitCode {
    match sqsafe_e2e::demo::run().await {
        Ok(report) => {
            sqsafe_e2e::demo::print(&report);
            let sqsafe = &report.consumers[2];
            let naive = &report.consumers[0];
            let once = sqsafe.charges == report.intents
                && sqsafe.charges_by_payment.values().all(|n| *n == 1);
            if once && naive.charges > report.intents {
                println!(
                    "\nsqsafe: exactly one charge per intent; the naive consumer charged {} times for {} intents.",
                    naive.charges, report.intents
                );
                std::process::ExitCode::SUCCESS
            } else {
                eprintln!(
                    "\nunexpected: sqsafe made {} charges for {} intents (naive {})",
                    sqsafe.charges, report.intents, naive.charges
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
