//! `sqsafe-payments`: the local payments API on 127.0.0.1, until Ctrl-C or SIGTERM (what `make local` stops it with).

use std::net::{Ipv4Addr, SocketAddr};
use std::process::ExitCode;
use std::time::{SystemTime, UNIX_EPOCH};

use sqsafe_test_servers::PaymentsApi;

const USAGE: &str =
    "usage: sqsafe-payments [--port N] [--seed N] [--fail-before RATE] [--fail-after RATE]

  --port N            port on 127.0.0.1 (default 0: a free port)
  --seed N            seed of the fault RNG (default: from the clock, printed)
  --fail-before RATE  probability of a 503 before charging (default 0)
  --fail-after RATE   probability of a 503 after charging (default 0)";

#[derive(Debug)]
struct Args {
    port: u16,
    seed: Option<u64>,
    fail_before: f64,
    fail_after: f64,
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
    let started = PaymentsApi::builder()
        .seed(seed)
        .fail_before_rate(args.fail_before)
        .fail_after_rate(args.fail_after)
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
        "payments API listening on {} (seed {seed})",
        payments.base_url()
    );

    let stopped = stop_signal().await;
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
        ])
        .expect("valid")
        .expect("not help");
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
    }
}
