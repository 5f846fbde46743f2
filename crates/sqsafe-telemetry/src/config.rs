use crate::traces::Traces;

/// The target of this crate's spans; the log filter always lets it through.
pub(crate) const SPAN_TARGET: &str = "sqsafe_telemetry::spans";

/// The level used when neither `AWS_LAMBDA_LOG_LEVEL` nor `RUST_LOG` is set.
pub(crate) const DEFAULT_LEVEL: &str = "info";

/// How log lines are written.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum LogFormat {
    /// One JSON object per line, in the shape shown in the crate docs. The default: sqsafe's value is structured
    /// logs that CloudWatch Logs Insights can filter by `message_id` or `correlation_id`.
    #[default]
    Json,
    /// `tracing-subscriber`'s compact human-readable format, without ANSI colours (CloudWatch shows them as escapes).
    Text,
}

/// Logging settings, normally read from the environment Lambda provides ([`LogConfig::from_env`]).
///
/// # Default
///
/// Level `info`, [`LogFormat::Json`], no function name, [`Traces::Off`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LogConfig {
    /// A `tracing-subscriber` filter directive: `info`, `warn,sqsafe_batch=debug`, ...
    pub level: String,
    /// JSON or text lines.
    pub format: LogFormat,
    /// The Lambda function's name; [`init_with`](crate::init_with) puts it on every invocation span.
    pub function_name: Option<String>,
    /// Whether spans are exported with OpenTelemetry ([`Traces::from_vars`]).
    pub traces: Traces,
}

impl Default for LogConfig {
    fn default() -> Self {
        Self {
            level: DEFAULT_LEVEL.to_owned(),
            format: LogFormat::Json,
            function_name: None,
            traces: Traces::Off,
        }
    }
}

impl LogConfig {
    /// Reads the settings from the process environment; see [`LogConfig::from_vars`] for the rules.
    pub fn from_env() -> Self {
        Self::from_vars(|name| std::env::var(name).ok())
    }

    /// Reads the settings through `get`, which answers an environment variable's value (tests pass a map).
    ///
    /// Empty or blank values count as unset.
    ///
    /// - **level**: `AWS_LAMBDA_LOG_LEVEL` (Lambda's advanced logging controls: `TRACE`, `DEBUG`, `INFO`, `WARN`,
    ///   `ERROR`, `FATAL`, any case; `FATAL` becomes `error`, since `tracing` has no fatal level) wins; a value
    ///   outside that list is ignored. Else `RUST_LOG`, as written. Else `info`.
    /// - **format**: `AWS_LAMBDA_LOG_FORMAT`: `Text` (any case) gives [`LogFormat::Text`]; `JSON`, unset or anything
    ///   else gives [`LogFormat::Json`].
    /// - **function_name**: `AWS_LAMBDA_FUNCTION_NAME`.
    /// - **traces**: `SQSAFE_TRACES` and OpenTelemetry's endpoint variables, as [`Traces::from_vars`] reads them.
    pub fn from_vars(get: impl Fn(&str) -> Option<String>) -> Self {
        let var = |name: &str| {
            get(name)
                .map(|v| v.trim().to_owned())
                .filter(|v| !v.is_empty())
        };
        let level = var("AWS_LAMBDA_LOG_LEVEL")
            .and_then(|v| lambda_level(&v))
            .map(str::to_owned)
            .or_else(|| var("RUST_LOG"))
            .unwrap_or_else(|| DEFAULT_LEVEL.to_owned());
        let format = match var("AWS_LAMBDA_LOG_FORMAT") {
            Some(v) if v.eq_ignore_ascii_case("text") => LogFormat::Text,
            _ => LogFormat::Json,
        };
        Self {
            level,
            format,
            function_name: var("AWS_LAMBDA_FUNCTION_NAME"),
            traces: Traces::from_vars(&get),
        }
    }
}

/// Maps a Lambda log level to a `tracing` level directive.
fn lambda_level(value: &str) -> Option<&'static str> {
    const LEVELS: [(&str, &str); 6] = [
        ("TRACE", "trace"),
        ("DEBUG", "debug"),
        ("INFO", "info"),
        ("WARN", "warn"),
        ("ERROR", "error"),
        ("FATAL", "error"),
    ];
    LEVELS
        .iter()
        .find(|(lambda, _)| lambda.eq_ignore_ascii_case(value))
        .map(|&(_, directive)| directive)
}

#[cfg(test)]
mod tests {
    use std::collections::HashMap;

    use super::*;

    fn config(vars: &[(&str, &str)]) -> LogConfig {
        let vars: HashMap<String, String> = vars
            .iter()
            .map(|&(k, v)| (k.to_owned(), v.to_owned()))
            .collect();
        LogConfig::from_vars(|name| vars.get(name).cloned())
    }

    #[test]
    fn defaults_to_info_json_and_no_function_name() {
        assert_eq!(config(&[]), LogConfig::default());
        assert_eq!(config(&[]).level, "info");
        assert_eq!(config(&[]).format, LogFormat::Json);
        assert_eq!(config(&[]).function_name, None);
    }

    #[test]
    fn lambda_level_wins_over_rust_log() {
        let c = config(&[("AWS_LAMBDA_LOG_LEVEL", "WARN"), ("RUST_LOG", "debug")]);
        assert_eq!(c.level, "warn");
    }

    #[test]
    fn rust_log_is_used_as_written_when_lambda_level_is_unset() {
        let c = config(&[("RUST_LOG", "info,sqsafe_batch=debug")]);
        assert_eq!(c.level, "info,sqsafe_batch=debug");
    }

    #[test]
    fn lambda_levels_are_case_insensitive_and_fatal_is_error() {
        for (value, expected) in [
            ("trace", "trace"),
            ("Debug", "debug"),
            ("INFO", "info"),
            ("wArN", "warn"),
            ("ERROR", "error"),
            ("FATAL", "error"),
            ("fatal", "error"),
        ] {
            assert_eq!(
                config(&[("AWS_LAMBDA_LOG_LEVEL", value)]).level,
                expected,
                "{value}"
            );
        }
    }

    #[test]
    fn unknown_or_blank_lambda_level_falls_through() {
        let c = config(&[("AWS_LAMBDA_LOG_LEVEL", "verbose"), ("RUST_LOG", "debug")]);
        assert_eq!(c.level, "debug");
        let c = config(&[("AWS_LAMBDA_LOG_LEVEL", "  "), ("RUST_LOG", "")]);
        assert_eq!(c.level, "info");
    }

    #[test]
    fn format_is_json_unless_text() {
        for (value, expected) in [
            ("JSON", LogFormat::Json),
            ("json", LogFormat::Json),
            ("Text", LogFormat::Text),
            ("TEXT", LogFormat::Text),
            ("xml", LogFormat::Json),
            ("", LogFormat::Json),
        ] {
            assert_eq!(
                config(&[("AWS_LAMBDA_LOG_FORMAT", value)]).format,
                expected,
                "{value}"
            );
        }
    }

    #[test]
    fn function_name_comes_from_lambda() {
        let c = config(&[("AWS_LAMBDA_FUNCTION_NAME", "charge-payment")]);
        assert_eq!(c.function_name.as_deref(), Some("charge-payment"));
        assert_eq!(
            config(&[("AWS_LAMBDA_FUNCTION_NAME", "")]).function_name,
            None
        );
    }
}
