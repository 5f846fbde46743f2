use std::time::Duration;

use sqsafe_batch::VisibilityHeartbeat;

/// What the function needs from its environment.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Config {
    /// `IDEMPOTENCY_TABLE`: the idempotency table.
    pub idempotency_table: String,
    /// `LEDGER_TABLE`: the ledger (partition key `pk` = account, sort key `sk` = `BALANCE` or `ENTRY#<id>`).
    pub ledger_table: String,
    /// `DLQ_URL`: the dead-letter queue (FIFO) for refused entries, with their context.
    pub dlq_url: String,
    /// `QUEUE_URL`: the FIFO queue this function consumes. A record that fails transiently, or finds its entry in
    /// progress elsewhere, changes its own message's visibility there (`sqs:ChangeMessageVisibility`).
    pub queue_url: String,
    /// `MAX_ATTEMPTS` (default 5): deliveries before a transient failure is dead-lettered.
    pub max_attempts: u32,
    /// `IDEMPOTENCY_WINDOW_DAYS` (default 30): how long an applied entry suppresses duplicates. Must cover the
    /// queue's retention + the DLQ's retention + the time to redrive (template.yaml checks it).
    pub idempotency_window: Duration,
    /// `BACKOFF_BASE_SECONDS` (default 60): a transient failure on delivery `n` comes back after a jittered delay in
    /// `[d/2, d]`, `d = min(backoff_max, backoff_base × 2^(n-1))`, instead of the queue's visibility timeout. With the
    /// defaults and `MAX_ATTEMPTS` 5, a failing entry is retried for 7.5 to 15 minutes before it is dead-lettered.
    /// (On a FIFO queue the entry's group waits for it meanwhile.)
    pub backoff_base: Duration,
    /// `BACKOFF_MAX_SECONDS` (default 900): the longest backoff delay.
    pub backoff_max: Duration,
    /// `VISIBILITY_HEARTBEAT_SECONDS` (default 20) and `VISIBILITY_EXTEND_SECONDS` (default 400): every 20 s while a
    /// record runs, its message's visibility is set to 400 s from then. 400 s is the template's visibility
    /// timeout, so an extension never brings a message back sooner than the queue would; 20 s is a third of the
    /// longest function timeout (60 s), so a long record is extended twice before the invocation ends.
    pub visibility_heartbeat: VisibilityHeartbeat,
}

/// A missing or unreadable setting.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum ConfigError {
    /// A required variable is not set (or empty).
    #[error("environment variable {0} is required")]
    Missing(&'static str),
    /// A variable does not parse.
    #[error("environment variable {name} = {value:?} is not valid: a positive whole number")]
    Invalid {
        /// The variable.
        name: &'static str,
        /// Its value.
        value: String,
    },
}

impl Config {
    /// Reads the process environment.
    pub fn from_env() -> Result<Self, ConfigError> {
        Self::from_vars(|name| std::env::var(name).ok())
    }

    /// Reads settings through `get` (tests pass a map).
    pub fn from_vars(get: impl Fn(&str) -> Option<String>) -> Result<Self, ConfigError> {
        let required = |name: &'static str| {
            get(name)
                .filter(|v| !v.trim().is_empty())
                .ok_or(ConfigError::Missing(name))
        };
        let positive = |name: &'static str, default: u32| match get(name) {
            None => Ok(default),
            Some(v) => v
                .trim()
                .parse::<u32>()
                .ok()
                .filter(|n| *n > 0)
                .ok_or(ConfigError::Invalid { name, value: v }),
        };
        let max_attempts = positive("MAX_ATTEMPTS", 5)?;
        let window_days = positive("IDEMPOTENCY_WINDOW_DAYS", 30)?.min(3650);
        let seconds = |name: &'static str, default: u32| {
            positive(name, default).map(|s| Duration::from_secs(u64::from(s)))
        };
        Ok(Self {
            idempotency_table: required("IDEMPOTENCY_TABLE")?,
            ledger_table: required("LEDGER_TABLE")?,
            dlq_url: required("DLQ_URL")?,
            queue_url: required("QUEUE_URL")?,
            max_attempts,
            idempotency_window: Duration::from_secs(86_400 * u64::from(window_days)),
            backoff_base: seconds("BACKOFF_BASE_SECONDS", 60)?,
            backoff_max: seconds("BACKOFF_MAX_SECONDS", 900)?,
            visibility_heartbeat: VisibilityHeartbeat {
                every: seconds("VISIBILITY_HEARTBEAT_SECONDS", 20)?,
                extend_to: seconds("VISIBILITY_EXTEND_SECONDS", 400)?,
            },
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_what_is_missing_and_reads_defaults() {
        let all = |name: &str| match name {
            "IDEMPOTENCY_TABLE" => Some("i".to_owned()),
            "LEDGER_TABLE" => Some("l".to_owned()),
            "DLQ_URL" => Some("d".to_owned()),
            "QUEUE_URL" => Some("q".to_owned()),
            _ => None,
        };
        let config = Config::from_vars(all).expect("valid");
        assert_eq!(config.max_attempts, 5);
        assert_eq!(config.idempotency_window.as_secs(), 30 * 86_400);
        assert_eq!(config.queue_url, "q");
        assert_eq!(
            (config.backoff_base.as_secs(), config.backoff_max.as_secs()),
            (60, 900)
        );
        assert_eq!(
            config.visibility_heartbeat,
            VisibilityHeartbeat {
                every: Duration::from_secs(20),
                extend_to: Duration::from_secs(400)
            }
        );
        let no_queue = |name: &str| {
            if name == "QUEUE_URL" { None } else { all(name) }
        };
        assert_eq!(
            Config::from_vars(no_queue),
            Err(ConfigError::Missing("QUEUE_URL"))
        );
        let no_ledger = |name: &str| {
            if name == "LEDGER_TABLE" {
                None
            } else {
                all(name)
            }
        };
        assert_eq!(
            Config::from_vars(no_ledger),
            Err(ConfigError::Missing("LEDGER_TABLE"))
        );
        let bad = |name: &str| {
            if name == "MAX_ATTEMPTS" {
                Some("-1".to_owned())
            } else {
                all(name)
            }
        };
        assert!(matches!(
            Config::from_vars(bad),
            Err(ConfigError::Invalid {
                name: "MAX_ATTEMPTS",
                ..
            })
        ));
    }
}
