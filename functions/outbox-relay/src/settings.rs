//! What the relay reads from its environment (template.yaml sets each of these).

use std::time::Duration;

use sqsafe::{ConfigError, Env};

/// The relay's settings.
///
/// # Default
/// | variable | default | meaning |
/// |---|---|---|
/// | `OUTBOX_TABLE` | required | the table whose outbox items it marks sent (the one whose stream feeds it) |
/// | `OUTBOX_DESTINATIONS` | required | comma-separated queue URLs it may publish to; an event for any other fails |
/// | `SENT_RETENTION_DAYS` | 7 (1..=365) | how long a `SENT` item is kept before the table's TTL may delete it |
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Settings {
    /// `OUTBOX_TABLE`.
    pub table: String,
    /// `OUTBOX_DESTINATIONS`.
    pub destinations: Vec<String>,
    /// `SENT_RETENTION_DAYS`, as a duration.
    pub sent_retention: Duration,
}

impl Settings {
    /// Reads and checks every setting.
    pub fn from_env(env: &Env) -> Result<Self, ConfigError> {
        let raw = env.required("OUTBOX_DESTINATIONS")?;
        let destinations: Vec<String> = raw
            .split(',')
            .map(|d| d.trim().to_owned())
            .filter(|d| !d.is_empty())
            .collect();
        if destinations.is_empty()
            || destinations
                .iter()
                .any(|d| !(d.starts_with("https://") || d.starts_with("http://")))
        {
            return Err(ConfigError {
                variable: "OUTBOX_DESTINATIONS".into(),
                value: Some(raw),
                reason: "expected comma-separated http:// or https:// queue URLs".into(),
            });
        }
        Ok(Self {
            table: env.required("OUTBOX_TABLE")?,
            destinations,
            sent_retention: Duration::from_secs(
                86_400 * env.number("SENT_RETENTION_DAYS", 7u64, 1..=365)?,
            ),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_the_table_the_destinations_and_the_default_retention() {
        let env = Env::from_pairs([
            ("OUTBOX_TABLE", "outbox"),
            ("OUTBOX_DESTINATIONS", "https://q/a, https://q/b.fifo"),
        ]);
        let s = Settings::from_env(&env).expect("valid");
        assert_eq!(s.table, "outbox");
        assert_eq!(s.destinations, ["https://q/a", "https://q/b.fifo"]);
        assert_eq!(s.sent_retention, Duration::from_secs(7 * 86_400));
    }

    #[test]
    fn errors_name_the_variable() {
        let err = Settings::from_env(&Env::from_pairs([("OUTBOX_TABLE", "t")])).expect_err("none");
        assert_eq!(err.variable, "OUTBOX_DESTINATIONS");
        let err = Settings::from_env(&Env::from_pairs([
            ("OUTBOX_TABLE", "t"),
            ("OUTBOX_DESTINATIONS", "https://q/a,payments"),
        ]))
        .expect_err("not a URL");
        assert!(err.to_string().contains("queue URLs"), "{err}");
        let err = Settings::from_env(&Env::from_pairs([
            ("OUTBOX_TABLE", "t"),
            ("OUTBOX_DESTINATIONS", "https://q/a"),
            ("SENT_RETENTION_DAYS", "0"),
        ]))
        .expect_err("zero");
        assert_eq!(err.variable, "SENT_RETENTION_DAYS");
    }
}
