use std::time::Duration;

use sqsafe_batch::VisibilityHeartbeat;

/// What the function needs from its environment.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Config {
    /// `IDEMPOTENCY_TABLE`: the idempotency table.
    pub idempotency_table: String,
    /// `PAYMENTS_API_URL`: base URL of the payments API (`https://…`, no trailing path).
    pub payments_api_url: String,
    /// `DLQ_URL`: the dead-letter queue for poison messages, with their context.
    pub dlq_url: String,
    /// `QUEUE_URL`: the queue this function consumes. A record that fails transiently, or finds its payment in
    /// progress elsewhere, changes its own message's visibility there (`sqs:ChangeMessageVisibility`).
    pub queue_url: String,
    /// `MAX_ATTEMPTS` (default 5): deliveries before a transient failure is dead-lettered; at most the queue's
    /// `maxReceiveCount`.
    pub max_attempts: u32,
    /// `PAYMENTS_TIMEOUT_MS` (default 5000): per request to the payments API.
    pub payments_timeout: Duration,
    /// `IDEMPOTENCY_WINDOW_DAYS` (default 30): how long a completed payment suppresses duplicates. Must cover the
    /// queue's retention + the DLQ's retention + the time to redrive (template.yaml checks it).
    pub idempotency_window: Duration,
    /// `BACKOFF_BASE_SECONDS` (default 60): a transient failure on delivery `n` comes back after a jittered delay in
    /// `[d/2, d]`, `d = min(backoff_max, backoff_base × 2^(n-1))`, instead of the queue's visibility timeout. With the
    /// defaults and `MAX_ATTEMPTS` 5, a failing record is retried for 7.5 to 15 minutes before it is dead-lettered.
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
    #[error("environment variable {name} = {value:?} is not valid: {reason}")]
    Invalid {
        /// The variable.
        name: &'static str,
        /// Its value.
        value: String,
        /// What was expected.
        reason: &'static str,
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
        let number =
            |name: &'static str, default: u64| -> Result<u64, ConfigError> {
                match get(name) {
                    None => Ok(default),
                    Some(v) => v.trim().parse::<u64>().ok().filter(|n| *n > 0).ok_or(
                        ConfigError::Invalid {
                            name,
                            value: v,
                            reason: "a positive whole number",
                        },
                    ),
                }
            };
        let payments_api_url = required("PAYMENTS_API_URL")?
            .trim_end_matches('/')
            .to_owned();
        if !payments_api_url.starts_with("http://") && !payments_api_url.starts_with("https://") {
            return Err(ConfigError::Invalid {
                name: "PAYMENTS_API_URL",
                value: payments_api_url,
                reason: "an http:// or https:// URL",
            });
        }
        let max_attempts =
            u32::try_from(number("MAX_ATTEMPTS", 5)?).map_err(|_| ConfigError::Invalid {
                name: "MAX_ATTEMPTS",
                value: get("MAX_ATTEMPTS").unwrap_or_default(),
                reason: "at most 4294967295",
            })?;
        let seconds =
            |name: &'static str, default: u64| number(name, default).map(Duration::from_secs);
        Ok(Self {
            idempotency_table: required("IDEMPOTENCY_TABLE")?,
            payments_api_url,
            dlq_url: required("DLQ_URL")?,
            queue_url: required("QUEUE_URL")?,
            max_attempts,
            payments_timeout: Duration::from_millis(number("PAYMENTS_TIMEOUT_MS", 5000)?),
            idempotency_window: Duration::from_secs(
                86_400 * number("IDEMPOTENCY_WINDOW_DAYS", 30)?.min(3650),
            ),
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
    use std::collections::HashMap;

    use super::*;

    fn vars(pairs: &[(&str, &str)]) -> impl Fn(&str) -> Option<String> {
        let map: HashMap<String, String> = pairs
            .iter()
            .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
            .collect();
        move |name| map.get(name).cloned()
    }

    const BASE: &[(&str, &str)] = &[
        ("IDEMPOTENCY_TABLE", "idem"),
        ("PAYMENTS_API_URL", "https://pay.example/"),
        ("DLQ_URL", "https://q/dlq"),
        ("QUEUE_URL", "https://q/source"),
    ];

    #[test]
    fn reads_required_settings_and_documented_defaults() {
        let config = Config::from_vars(vars(BASE)).expect("valid");
        assert_eq!(config.payments_api_url, "https://pay.example");
        assert_eq!(config.max_attempts, 5);
        assert_eq!(config.payments_timeout, Duration::from_secs(5));
        assert_eq!(config.idempotency_window, Duration::from_secs(30 * 86_400));
        assert_eq!(config.queue_url, "https://q/source");
        assert_eq!(
            (config.backoff_base, config.backoff_max),
            (Duration::from_secs(60), Duration::from_secs(900))
        );
        assert_eq!(
            config.visibility_heartbeat,
            VisibilityHeartbeat {
                every: Duration::from_secs(20),
                extend_to: Duration::from_secs(400)
            }
        );
    }

    #[test]
    fn names_the_missing_or_bad_variable() {
        for missing in [
            "IDEMPOTENCY_TABLE",
            "PAYMENTS_API_URL",
            "DLQ_URL",
            "QUEUE_URL",
        ] {
            let pairs: Vec<_> = BASE
                .iter()
                .copied()
                .filter(|(k, _)| *k != missing)
                .collect();
            assert_eq!(
                Config::from_vars(vars(&pairs)),
                Err(ConfigError::Missing(missing))
            );
        }
        let mut pairs = BASE.to_vec();
        pairs.push(("MAX_ATTEMPTS", "zero"));
        let err = Config::from_vars(vars(&pairs)).expect_err("bad number");
        assert!(err.to_string().contains("MAX_ATTEMPTS"), "{err}");
        let bad_url = [
            ("IDEMPOTENCY_TABLE", "t"),
            ("PAYMENTS_API_URL", "pay.example"),
            ("DLQ_URL", "q"),
            ("QUEUE_URL", "q"),
        ];
        assert!(matches!(
            Config::from_vars(vars(&bad_url)),
            Err(ConfigError::Invalid {
                name: "PAYMENTS_API_URL",
                ..
            })
        ));
    }
}
