//! `sqsafe-payments`: the local payments API on 127.0.0.1, until Ctrl-C or SIGTERM (what `make local` stops it with).

use std::io::Write;
use std::net::{Ipv4Addr, SocketAddr};
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use sqsafe_test_servers::PaymentsApi;

const USAGE: &str = "usage: sqsafe-payments [--port N] [--seed N] [--fail-before RATE] [--fail-after RATE]
                       [--dynamodb URL --table NAME] [--lease SECS] [--ledger FILE] [--hold PAYMENT_ID]

  --port N            port on 127.0.0.1 (default 0: a free port)
  --seed N            seed of the fault RNG (default: from the clock, printed)
  --fail-before RATE  probability of a 503 before charging (default 0)
  --fail-after RATE   probability of a 503 after charging (default 0)
  --dynamodb URL      a local DynamoDB (moto) to keep the Idempotency-Keys in, in the table --table NAME
                      (partition key pk, a string; it must exist). Without them the keys are kept in this
                      process's memory and a restart forgets them
  --lease SECS        how long a claimed key is held: the longest a charge may take, and how long a claim left by
                      a killed process blocks its key (default 30)
  --ledger FILE       append each charge to FILE as a JSON line, and start with the charges already there
  --hold PAYMENT_ID   hold that payment's first request in flight for good, and every charge after it; prints
                      `held N` once no charge is without its stored answer, N the requests then waiting, claimed
                      and not charged (a point for tests to kill the process)";

#[derive(Debug)]
struct Args {
    port: u16,
    seed: Option<u64>,
    fail_before: f64,
    fail_after: f64,
    dynamodb: Option<String>,
    table: Option<String>,
    lease: Option<u64>,
    ledger: Option<PathBuf>,
    hold: Option<String>,
}

#[tokio::main]
async fn main() -> ExitCode {
    let args = match parse(std::env::args().skip(1)) {
        Ok(Some(args)) => args,
        Ok(None) => {
            println!("{USAGE}");
            return ExitCode::SUCCESS;
        }
        Err(message) => {
            eprintln!("sqsafe-payments: {message}\n\n{USAGE}");
            return ExitCode::from(2);
        }
    };
    let seed = args.seed.unwrap_or_else(clock_seed);
    let mut builder = PaymentsApi::builder()
        .seed(seed)
        .fail_before_rate(args.fail_before)
        .fail_after_rate(args.fail_after);
    let keys = match (&args.dynamodb, &args.table) {
        (Some(endpoint), Some(table)) => {
            let config = sqsafe_testkit::sdk_config_at(endpoint).await;
            builder = builder.keys_in_dynamodb(aws_sdk_dynamodb::Client::new(&config), table);
            format!("keys in DynamoDB at {endpoint}, table {table}")
        }
        (None, None) => {
            builder = builder.keys_in_memory();
            "keys in memory: a restart forgets them (--dynamodb URL --table NAME keeps them)"
                .to_owned()
        }
        _ => {
            eprintln!("sqsafe-payments: --dynamodb and --table go together\n\n{USAGE}");
            return ExitCode::from(2);
        }
    };
    if let Some(secs) = args.lease {
        builder = builder.lease(Duration::from_secs(secs));
    }
    if let Some(path) = &args.ledger {
        builder = builder.ledger_file(path);
    }
    if let Some(payment_id) = &args.hold {
        builder = builder.hold_in_flight(payment_id);
    }
    let started = builder
        .start(SocketAddr::from((Ipv4Addr::LOCALHOST, args.port)))
        .await;
    let payments = match started {
        Ok(payments) => payments,
        Err(e) => {
            eprintln!("sqsafe-payments: {e}");
            return ExitCode::FAILURE;
        }
    };
    println!(
        "payments API listening on {} (seed {seed}; {keys})",
        payments.base_url()
    );
    // Whoever started the process reads these lines as they come (scripts/local.sh, the fault suite).
    let _ = std::io::stdout().flush();

    let stopped = tokio::select! {
        stopped = stop_signal() => stopped,
        () = async {
            let waiting = payments.held().await;
            println!("held {waiting}");
            let _ = std::io::stdout().flush();
            std::future::pending::<()>().await;
        } => Ok(()),
    };
    let stats = payments.stats();
    payments.shutdown().await;
    println!("stats: {stats}");
    match stopped {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("sqsafe-payments: {e}");
            ExitCode::FAILURE
        }
    }
}

/// Ctrl-C (SIGINT) or SIGTERM, whichever comes first.
async fn stop_signal() -> Result<(), String> {
    use tokio::signal::unix::{SignalKind, signal};
    let listen = |kind, name| signal(kind).map_err(|e| format!("cannot watch {name}: {e}"));
    let mut interrupt = listen(SignalKind::interrupt(), "SIGINT")?;
    let mut terminate = listen(SignalKind::terminate(), "SIGTERM")?;
    tokio::select! {
        _ = interrupt.recv() => Ok(()),
        _ = terminate.recv() => Ok(()),
    }
}

/// `Ok(None)` for `--help`.
fn parse(mut argv: impl Iterator<Item = String>) -> Result<Option<Args>, String> {
    let mut args = Args {
        port: 0,
        seed: None,
        fail_before: 0.0,
        fail_after: 0.0,
        dynamodb: None,
        table: None,
        lease: None,
        ledger: None,
        hold: None,
    };
    while let Some(arg) = argv.next() {
        let (flag, inline) = match arg.split_once('=') {
            Some((flag, value)) => (flag.to_owned(), Some(value.to_owned())),
            None => (arg, None),
        };
        if flag == "-h" || flag == "--help" {
            return Ok(None);
        }
        let mut value = || {
            inline
                .clone()
                .or_else(|| argv.next())
                .ok_or_else(|| format!("{flag} needs a value"))
        };
        match flag.as_str() {
            "--port" => args.port = number(&flag, &value()?)?,
            "--seed" => args.seed = Some(number(&flag, &value()?)?),
            "--fail-before" => args.fail_before = number(&flag, &value()?)?,
            "--fail-after" => args.fail_after = number(&flag, &value()?)?,
            "--dynamodb" => args.dynamodb = Some(value()?),
            "--table" => args.table = Some(value()?),
            "--lease" => args.lease = Some(number(&flag, &value()?)?),
            "--ledger" => args.ledger = Some(PathBuf::from(value()?)),
            "--hold" => args.hold = Some(value()?),
            _ => return Err(format!("unknown argument `{flag}`")),
        }
    }
    Ok(Some(args))
}

fn number<T: std::str::FromStr>(flag: &str, value: &str) -> Result<T, String> {
    value
        .parse()
        .map_err(|_| format!("{flag}: `{value}` is not a valid number"))
}

fn clock_seed() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_nanos() as u64)
        .unwrap_or(0)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse_args(args: &[&str]) -> Result<Option<Args>, String> {
        parse(args.iter().map(|s| s.to_string()))
    }

    #[test]
    fn parses_all_flags_in_both_forms() {
        let args = parse_args(&[
            "--port",
            "8080",
            "--seed=42",
            "--fail-before",
            "0.1",
            "--fail-after=0.25",
            "--dynamodb",
            "http://127.0.0.1:5000",
            "--table=payments-keys",
            "--lease",
            "5",
            "--ledger",
            "/tmp/ledger.jsonl",
            "--hold=p-7",
        ])
        .expect("valid")
        .expect("not help");
        assert_eq!(args.dynamodb.as_deref(), Some("http://127.0.0.1:5000"));
        assert_eq!(args.table.as_deref(), Some("payments-keys"));
        assert_eq!(args.lease, Some(5));
        assert_eq!(args.ledger, Some(PathBuf::from("/tmp/ledger.jsonl")));
        assert_eq!(args.hold.as_deref(), Some("p-7"));
        assert_eq!(args.port, 8080);
        assert_eq!(args.seed, Some(42));
        assert_eq!(args.fail_before, 0.1);
        assert_eq!(args.fail_after, 0.25);
    }

    #[test]
    fn defaults_and_help() {
        let args = parse_args(&[]).expect("valid").expect("not help");
        assert_eq!(
            (args.port, args.seed, args.fail_before, args.fail_after),
            (0, None, 0.0, 0.0)
        );
        assert!(parse_args(&["--help"]).expect("valid").is_none());
    }

    #[test]
    fn rejects_bad_input() {
        assert!(parse_args(&["--port"]).is_err());
        assert!(parse_args(&["--port", "70000"]).is_err());
        assert!(parse_args(&["--seed", "-1"]).is_err());
        assert!(parse_args(&["--verbose"]).is_err());
        assert!(parse_args(&["--lease", "soon"]).is_err());
    }
}
