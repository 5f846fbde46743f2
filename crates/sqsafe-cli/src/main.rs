//! `sqsafe`: see the crate docs (`sqsafe --help`).

use std::process::ExitCode;

use clap::Parser;
use sqsafe_cli::{Cli, Command, SystemClock};

#[tokio::main]
async fn main() -> ExitCode {
    let cli = Cli::parse();
    if let Command::Check(args) = &cli.command {
        // Files only: no AWS configuration is loaded.
        return match sqsafe_cli::run_check(args, &mut std::io::stdout().lock()) {
            Ok(code) => ExitCode::from(code),
            Err(e) => {
                eprintln!("sqsafe: {e}");
                ExitCode::from(2)
            }
        };
    }
    if let Command::New(command) = cli.command {
        // Files only: no AWS configuration is loaded.
        return match sqsafe_cli::run_new(command, &mut std::io::stdout().lock()) {
            Ok(()) => ExitCode::SUCCESS,
            Err(e) => {
                eprintln!("sqsafe: {e}");
                ExitCode::from(2)
            }
        };
    }
    if let Command::Local(command) = cli.command {
        // Its own local AWS (moto) or the one at AWS_ENDPOINT_URL: no AWS configuration is checked here.
        return match sqsafe_local::cli::run(command).await {
            Ok(()) => ExitCode::SUCCESS,
            Err(e) => {
                eprintln!("sqsafe: {e}");
                ExitCode::FAILURE
            }
        };
    }
    // Long polls wait up to 20 s: the local tools' timeouts (read and attempt 25 s), not a function's.
    let config = sqsafe_aws::config_loader_with(sqsafe_aws::Timeouts::LOCAL_TOOLS)
        .load()
        .await;
    if let Err(e) = sqsafe_cli::check_aws(&config).await {
        eprintln!("sqsafe: {e}");
        return ExitCode::from(2);
    }
    let sqs = aws_sdk_sqs::Client::new(&config);
    let mut out = std::io::stdout().lock();
    match sqsafe_cli::run(cli, &sqs, &SystemClock, &mut out).await {
        Ok(status) => ExitCode::from(status.code()),
        Err(e) => {
            eprintln!("sqsafe: {e}");
            // 2 for arguments that make no sense, like clap's own usage errors.
            ExitCode::from(if matches!(e, sqsafe_cli::Error::Usage(_)) {
                2
            } else {
                1
            })
        }
    }
}
