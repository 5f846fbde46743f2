//! The environment every consumer reads, parsed once, with errors that name the variable and the reason.

use std::fmt;
use std::str::FromStr;
use std::sync::Arc;
use std::time::Duration;

use sqsafe_batch::VisibilityHeartbeat;

/// A setting that is missing or does not parse: names the variable, its value and what was expected.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("environment variable {variable}{}: {reason}", value_part(.value))]
pub struct ConfigError {
    /// The variable.
    pub variable: String,
    /// Its value, when it was set.
    pub value: Option<String>,
    /// What was expected.
    pub reason: String,
}

fn value_part(value: &Option<String>) -> String {
    match value {
        Some(v) => format!(" = {v:?}"),
        None => String::new(),
    }
}

type Lookup = dyn Fn(&str) -> Option<String> + Send + Sync;

/// Reads settings from the process environment, or from a map in tests. Cheap to clone.
#[derive(Clone)]
pub struct Env {
    get: Arc<Lookup>,
}

impl fmt::Debug for Env {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Env").finish_non_exhaustive()
    }
}

impl Env {
    /// The process environment.
    pub fn process() -> Self {
        Self::from_fn(|name| std::env::var(name).ok())
    }

    /// Variables from `get` (tests pass a map).
    pub fn from_fn(get: impl Fn(&str) -> Option<String> + Send + Sync + 'static) -> Self {
        Self { get: Arc::new(get) }
    }

    /// Variables from pairs.
    pub fn from_pairs<K: Into<String>, V: Into<String>>(
        pairs: impl IntoIterator<Item = (K, V)>,
    ) -> Self {
        let map: std::collections::HashMap<String, String> = pairs
            .into_iter()
            .map(|(k, v)| (k.into(), v.into()))
            .collect();
        Self::from_fn(move |name| map.get(name).cloned())
    }

    /// The value, if set and not blank.
    pub fn get(&self, name: &str) -> Option<String> {
        (self.get)(name).filter(|v| !v.trim().is_empty())
    }

    /// A required value.
    pub fn required(&self, name: &str) -> Result<String, ConfigError> {
        self.get(name).ok_or_else(|| ConfigError {
            variable: name.to_owned(),
            value: None,
            reason: "is required".to_owned(),
        })
    }

    /// A required `https://` URL, or an `http://` one on loopback (`127.0.0.0/8`, `localhost`, `[::1]`: a local
    /// run's services), without a trailing `/`. Plain http across a network would carry the requests in clear.
    pub fn url(&self, name: &str) -> Result<String, ConfigError> {
        let url = self.required(name)?;
        match sqsafe_aws::HttpUrl::parse(&url) {
            Some(parsed) if parsed.is_https() || parsed.is_loopback() => {
                Ok(url.trim_end_matches('/').to_owned())
            }
            _ => Err(invalid(
                name,
                &url,
                "an https:// URL (plain http:// only on loopback, for local runs)",
            )),
        }
    }

    /// A number, `default` when unset; it must parse as `T` and lie in `range`.
    pub fn number<T>(
        &self,
        name: &str,
        default: T,
        range: std::ops::RangeInclusive<T>,
    ) -> Result<T, ConfigError>
    where
        T: FromStr + PartialOrd + fmt::Display + Copy,
    {
        let Some(raw) = self.get(name) else {
            return Ok(default);
        };
        match raw.trim().parse::<T>() {
            Ok(n) if range.contains(&n) => Ok(n),
            _ => Err(invalid(
                name,
                &raw,
                &format!("a whole number from {} to {}", range.start(), range.end()),
            )),
        }
    }

    /// A duration in whole seconds, `default` when unset, within `range` seconds.
    pub fn seconds(
        &self,
        name: &str,
        default: u64,
        range: std::ops::RangeInclusive<u64>,
    ) -> Result<Duration, ConfigError> {
        self.number(name, default, range).map(Duration::from_secs)
    }

    /// A duration in milliseconds, `default` when unset, within `range` milliseconds.
    pub fn millis(
        &self,
        name: &str,
        default: u64,
        range: std::ops::RangeInclusive<u64>,
    ) -> Result<Duration, ConfigError> {
        self.number(name, default, range).map(Duration::from_millis)
    }
}

fn invalid(name: &str, value: &str, reason: &str) -> ConfigError {
    ConfigError {
        variable: name.to_owned(),
        value: Some(value.to_owned()),
        reason: format!("expected {reason}"),
    }
}

/// The variable that chooses the [`IdempotencyMode`].
pub(crate) const MODE_VARIABLE: &str = "SQSAFE_IDEMPOTENCY_MODE";

/// What every sqsafe consumer reads from its environment (template.yaml sets each of these).
///
/// # Default
/// | variable | default | meaning |
/// |---|---|---|
/// | `IDEMPOTENCY_TABLE` | required | the idempotency table |
/// | `DLQ_URL` | required | the dead-letter queue sqsafe sends failed records to, with their context |
/// | `QUEUE_URL` | none | the queue consumed (an SQS consumer sets it: backoff, in-progress waits and the visibility heartbeat change visibility there; without it they are off, said once); a stream consumer has none |
/// | `MAX_ATTEMPTS` | 5 (1..=1000) | deliveries before a record that keeps failing transiently is dead-lettered |
/// | `IDEMPOTENCY_WINDOW_DAYS` | 30 (1..=3650) | how long a completed intent suppresses its duplicates; each dead letter records when it ends (`expires` in its `sqsafe.context`), so that `sqsafe dlq redrive` refuses what it no longer covers |
/// | `BACKOFF_BASE_SECONDS` | 60 (1..=43200) | first backoff delay of a transient failure |
/// | `BACKOFF_MAX_SECONDS` | 900 (1..=43200) | longest backoff delay |
/// | `VISIBILITY_HEARTBEAT_SECONDS` | 20 (1..=43199) | how often a running record's visibility is extended |
/// | `VISIBILITY_EXTEND_SECONDS` | 400 (2..=43200) | the visibility each extension sets |
/// | `SQSAFE_IDEMPOTENCY_MODE` | `claim` | `claim`: claim the intent before the effect, complete it after (two writes per fresh message); `keyed`: read the batch's records at once, run the effect under its downstream key, then one write (see [`IdempotencyMode`]; only for a consumer that declares [`Consumer::DOWNSTREAM_KEYED`](crate::Consumer::DOWNSTREAM_KEYED)) |
/// | `DLQ_MAX_MESSAGE_SIZE` | 262144 (1024..=1048576) | the DLQ's MaximumMessageSize, in bytes: a dead-letter copy (body, attributes and sqsafe's context) is fitted to it; template.yaml sets it from the queue's own attribute (SQS takes up to 1 MiB) |
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Settings {
    /// `IDEMPOTENCY_TABLE`.
    pub idempotency_table: String,
    /// `DLQ_URL`.
    pub dlq_url: String,
    /// `QUEUE_URL` (none: a stream consumer, or an SQS consumer without visibility changes).
    pub queue_url: Option<String>,
    /// `MAX_ATTEMPTS`.
    pub max_attempts: u32,
    /// `IDEMPOTENCY_WINDOW_DAYS`, as a duration.
    pub idempotency_window: Duration,
    /// `BACKOFF_BASE_SECONDS`.
    pub backoff_base: Duration,
    /// `BACKOFF_MAX_SECONDS`.
    pub backoff_max: Duration,
    /// `VISIBILITY_HEARTBEAT_SECONDS` and `VISIBILITY_EXTEND_SECONDS`.
    pub visibility_heartbeat: VisibilityHeartbeat,
    /// `DLQ_MAX_MESSAGE_SIZE`, bytes.
    pub dlq_max_message_size: usize,
    /// `SQSAFE_IDEMPOTENCY_MODE`.
    pub idempotency_mode: IdempotencyMode,
}

/// How a consumer keeps its effects to one per intent (`SQSAFE_IDEMPOTENCY_MODE`). The book's How it works compares
/// them, with what each costs.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum IdempotencyMode {
    /// `claim`, the default: one conditional write claims the intent before the effect, a second completes it after
    /// (a duplicate costs one refused write). Safe for any effect.
    #[default]
    Claim,
    /// `keyed`: the records of a whole batch are read in one strongly consistent request; a completed intent replays
    /// with no write; otherwise the effect runs under its downstream `Idempotency-Key` and one conditional write
    /// completes it. One write and one read unit per fresh message, no write per duplicate. Safe only when the
    /// downstream applies that key at most once within the idempotency window: two deliveries that read before either
    /// completed both make the call. A consumer opts in with [`Consumer::DOWNSTREAM_KEYED`](crate::Consumer::DOWNSTREAM_KEYED).
    /// Effects made of DynamoDB writes ([`Effect::writes`](crate::Effect::writes)) commit with their record as in the
    /// claim mode.
    Keyed,
}

impl IdempotencyMode {
    /// The setting's value: `claim` or `keyed`.
    pub fn as_str(self) -> &'static str {
        match self {
            IdempotencyMode::Claim => "claim",
            IdempotencyMode::Keyed => "keyed",
        }
    }
}

impl Settings {
    /// Reads and checks every setting.
    pub fn from_env(env: &Env) -> Result<Self, ConfigError> {
        let settings = Self {
            idempotency_table: env.required("IDEMPOTENCY_TABLE")?,
            dlq_url: env.required("DLQ_URL")?,
            queue_url: env
                .get("QUEUE_URL")
                .map(|url| url.trim().to_owned())
                .filter(|url| !url.is_empty()),
            max_attempts: env.number("MAX_ATTEMPTS", 5, 1..=1000)?,
            idempotency_window: Duration::from_secs(
                86_400 * env.number("IDEMPOTENCY_WINDOW_DAYS", 30u64, 1..=3650)?,
            ),
            backoff_base: env.seconds("BACKOFF_BASE_SECONDS", 60, 1..=43_200)?,
            backoff_max: env.seconds("BACKOFF_MAX_SECONDS", 900, 1..=43_200)?,
            visibility_heartbeat: VisibilityHeartbeat {
                every: env.seconds("VISIBILITY_HEARTBEAT_SECONDS", 20, 1..=43_199)?,
                extend_to: env.seconds("VISIBILITY_EXTEND_SECONDS", 400, 2..=43_200)?,
            },
            dlq_max_message_size: env.number(
                "DLQ_MAX_MESSAGE_SIZE",
                262_144usize,
                1_024..=1_048_576,
            )?,
            idempotency_mode: match env.get(MODE_VARIABLE).as_deref().map(str::trim) {
                None | Some("claim") => IdempotencyMode::Claim,
                Some("keyed") => IdempotencyMode::Keyed,
                Some(other) => {
                    return Err(invalid(MODE_VARIABLE, other, "`claim` or `keyed`"));
                }
            },
        };
        if settings.backoff_base > settings.backoff_max {
            return Err(ConfigError {
                variable: "BACKOFF_BASE_SECONDS".into(),
                value: Some(settings.backoff_base.as_secs().to_string()),
                reason: "must not exceed BACKOFF_MAX_SECONDS".into(),
            });
        }
        if settings.visibility_heartbeat.every >= settings.visibility_heartbeat.extend_to {
            return Err(ConfigError {
                variable: "VISIBILITY_HEARTBEAT_SECONDS".into(),
                value: Some(settings.visibility_heartbeat.every.as_secs().to_string()),
                reason: "must be less than VISIBILITY_EXTEND_SECONDS".into(),
            });
        }
        Ok(settings)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const BASE: [(&str, &str); 3] = [
        ("IDEMPOTENCY_TABLE", "idem"),
        ("DLQ_URL", "https://q/dlq"),
        ("QUEUE_URL", "https://q/source"),
    ];

    #[test]
    fn reads_the_required_settings_and_the_documented_defaults() {
        let s = Settings::from_env(&Env::from_pairs(BASE)).expect("valid");
        assert_eq!(s.max_attempts, 5);
        assert_eq!(s.idempotency_window, Duration::from_secs(30 * 86_400));
        assert_eq!(
            (s.backoff_base, s.backoff_max),
            (Duration::from_secs(60), Duration::from_secs(900))
        );
        assert_eq!(
            s.visibility_heartbeat,
            VisibilityHeartbeat {
                every: Duration::from_secs(20),
                extend_to: Duration::from_secs(400)
            }
        );
        assert_eq!(s.idempotency_mode, IdempotencyMode::Claim);
        assert_eq!(s.queue_url.as_deref(), Some("https://q/source"));
    }

    #[test]
    fn a_stream_consumer_has_no_queue_url() {
        for unset in [None, Some(" ")] {
            let mut pairs: Vec<(&str, &str)> = BASE[..2].to_vec();
            if let Some(blank) = unset {
                pairs.push(("QUEUE_URL", blank));
            }
            let s = Settings::from_env(&Env::from_pairs(pairs)).expect("valid");
            assert_eq!(s.queue_url, None, "{unset:?}");
        }
    }

    #[test]
    fn the_idempotency_mode_is_claim_unless_it_says_keyed() {
        let mode = |value: &str| {
            let mut pairs = BASE.to_vec();
            pairs.push(("SQSAFE_IDEMPOTENCY_MODE", value));
            Settings::from_env(&Env::from_pairs(pairs)).map(|s| s.idempotency_mode)
        };
        assert_eq!(mode("claim"), Ok(IdempotencyMode::Claim));
        assert_eq!(mode(" keyed "), Ok(IdempotencyMode::Keyed));
        assert_eq!(mode(""), Ok(IdempotencyMode::Claim), "blank is unset");
        let err = mode("Keyed").expect_err("case matters");
        assert_eq!(
            err.to_string(),
            "environment variable SQSAFE_IDEMPOTENCY_MODE = \"Keyed\": expected `claim` or `keyed`"
        );
    }

    #[test]
    fn errors_name_the_variable_its_value_and_the_reason() {
        for missing in ["IDEMPOTENCY_TABLE", "DLQ_URL"] {
            let env = Env::from_pairs(BASE.into_iter().filter(|(k, _)| *k != missing));
            let err = Settings::from_env(&env).expect_err("missing");
            assert_eq!(err.variable, missing);
            assert_eq!(
                err.to_string(),
                format!("environment variable {missing}: is required")
            );
        }
        let mut pairs = BASE.to_vec();
        pairs.push(("MAX_ATTEMPTS", "0"));
        let err = Settings::from_env(&Env::from_pairs(pairs)).expect_err("zero");
        assert_eq!(
            err.to_string(),
            "environment variable MAX_ATTEMPTS = \"0\": expected a whole number from 1 to 1000"
        );
        let mut pairs = BASE.to_vec();
        pairs.push(("IDEMPOTENCY_WINDOW_DAYS", "99999"));
        let err =
            Settings::from_env(&Env::from_pairs(pairs)).expect_err("too large, never clamped");
        assert_eq!(err.variable, "IDEMPOTENCY_WINDOW_DAYS");
        let mut pairs = BASE.to_vec();
        pairs.push(("BACKOFF_BASE_SECONDS", "1000"));
        let err = Settings::from_env(&Env::from_pairs(pairs)).expect_err("base over max");
        assert!(err.to_string().contains("BACKOFF_MAX_SECONDS"), "{err}");
        let env = Env::from_pairs([("U", "ftp://x")]);
        assert!(
            env.url("U")
                .expect_err("scheme")
                .to_string()
                .contains("https://")
        );
        assert_eq!(
            Env::from_pairs([("U", "https://x/")])
                .url("U")
                .expect("url"),
            "https://x"
        );
    }

    /// Plain http:// carries the request (a card, a customer) and the Idempotency-Key in clear: only to a service on
    /// this machine (a local run's fake API), never across a network.
    #[test]
    fn a_plain_http_url_is_accepted_only_on_loopback() {
        for local in [
            "http://127.0.0.1:8080",
            "http://127.9.0.1/v1",
            "http://localhost:3000/",
            "http://[::1]:9000",
        ] {
            let env = Env::from_pairs([("PAYMENTS_API_URL", local)]);
            assert!(env.url("PAYMENTS_API_URL").is_ok(), "{local}");
        }
        for remote in [
            "http://payments.example.com",
            "http://10.0.0.7:8080",
            "http://127.0.0.1.attacker.example",
            "http://localhost.attacker.example/x",
            "http://user@127.0.0.1.example",
        ] {
            let err = Env::from_pairs([("PAYMENTS_API_URL", remote)])
                .url("PAYMENTS_API_URL")
                .expect_err(remote);
            assert_eq!(err.variable, "PAYMENTS_API_URL");
            assert!(err.to_string().contains("https://"), "{err}");
            assert!(err.to_string().contains("loopback"), "{err}");
        }
    }
}
