use std::sync::OnceLock;
use std::time::SystemTime;

use tracing::{Metadata, Subscriber};
use tracing_subscriber::Layer;
use tracing_subscriber::filter::{EnvFilter, FilterExt, ParseError, filter_fn};
use tracing_subscriber::fmt::{self, MakeWriter};
use tracing_subscriber::layer::SubscriberExt;
use tracing_subscriber::registry::LookupSpan;

use crate::config::{DEFAULT_LEVEL, LogConfig, LogFormat, SPAN_TARGET};
use crate::error::{Error, Result};
use crate::json::JsonLayer;
use crate::timestamp::Rfc3339Millis;
use crate::traces::Traces;

/// The function name given to [`init_with`], for [`invocation_span`](crate::invocation_span).
static FUNCTION_NAME: OnceLock<String> = OnceLock::new();

/// Installs the global subscriber configured from the environment: `init_with(LogConfig::from_env())`.
///
/// Call it once, first thing in `main`.
///
/// # Errors
///
/// As [`init_with`].
pub fn init() -> Result<()> {
    init_with(LogConfig::from_env())
}

/// Installs a global subscriber that writes [`layer`]'s lines to stdout, where Lambda sends them to CloudWatch Logs.
///
/// Also remembers `config.function_name`, which every later [`invocation_span`](crate::invocation_span) carries.
///
/// # Errors
///
/// - [`Error::InvalidLevel`] when `config.level` is not a valid filter directive; nothing is installed.
/// - [`Error::AlreadyInitialised`] when a global subscriber is already installed (by an earlier call or by
///   another library); the existing one stays.
/// - [`Error::InvalidTraces`] when `config.traces` is [`Traces::Invalid`]; [`Error::TracesUnavailable`] when spans
///   cannot be exported as it says (not an `http://` endpoint, or a build without the `otel` feature). Nothing is
///   installed.
///
/// With [`Traces::Otlp`], the subscriber also has OpenTelemetry's layer, and [`flush`](crate::traces::flush) sends
/// the spans.
pub fn init_with(config: LogConfig) -> Result<()> {
    filter(&config.level).map_err(|source| Error::InvalidLevel {
        directive: config.level.clone(),
        source,
    })?;
    let subscriber = tracing_subscriber::registry().with(layer(&config));
    match &config.traces {
        Traces::Off => tracing::subscriber::set_global_default(subscriber),
        Traces::Invalid(value) => {
            return Err(Error::InvalidTraces {
                value: value.clone(),
            });
        }
        #[cfg(feature = "otel")]
        Traces::Otlp {
            endpoint,
            service_name,
        } => {
            let service_name = service_name.as_deref().or(config.function_name.as_deref());
            let (otel, export) = crate::traces::install(endpoint, service_name)
                .map_err(|reason| Error::TracesUnavailable { reason })?;
            tracing::subscriber::set_global_default(subscriber.with(otel))
                .map(|()| crate::traces::activate(export))
        }
        #[cfg(not(feature = "otel"))]
        Traces::Otlp { .. } => {
            return Err(Error::TracesUnavailable {
                reason: "this build has no OpenTelemetry (sqsafe-telemetry's feature `otel`, on by default in \
                         sqsafe)"
                    .to_owned(),
            });
        }
    }
    .map_err(|_| Error::AlreadyInitialised)?;
    if let Some(name) = config.function_name {
        // Only the call that installed the subscriber gets here, so the cell is still empty.
        let _ = FUNCTION_NAME.set(name);
    }
    Ok(())
}

/// The formatting layer alone, filtered by `config.level` and writing to stdout, for composing a subscriber with
/// other layers (OpenTelemetry, a test capture).
///
/// The filter is attached to this layer only, so other layers keep their own. It always lets this crate's
/// [`invocation_span`](crate::invocation_span) and [`record_span`](crate::record_span) through: a `WARN` line inside
/// a record still carries `message_id` and `correlation_id` when the level is `warn`. An invalid `config.level`
/// falls back to `info` here; [`init_with`] refuses it instead.
pub fn layer<S>(config: &LogConfig) -> impl Layer<S> + Send + Sync
where
    S: Subscriber + for<'a> LookupSpan<'a> + 'static,
{
    layer_with_writer(config, std::io::stdout)
}

/// [`layer`] writing to `writer` instead of stdout (tests capture lines this way).
pub fn layer_with_writer<S, W>(config: &LogConfig, writer: W) -> impl Layer<S> + Send + Sync
where
    S: Subscriber + for<'a> LookupSpan<'a> + 'static,
    W: for<'a> MakeWriter<'a> + Send + Sync + 'static,
{
    layer_with_clock(config, writer, SystemTime::now)
}

/// [`layer_with_writer`] with the clock that stamps each line.
pub(crate) fn layer_with_clock<S, W, C>(
    config: &LogConfig,
    writer: W,
    clock: C,
) -> impl Layer<S> + Send + Sync
where
    S: Subscriber + for<'a> LookupSpan<'a> + 'static,
    W: for<'a> MakeWriter<'a> + Send + Sync + 'static,
    C: Fn() -> SystemTime + Send + Sync + 'static,
{
    let filter = filter(&config.level)
        .unwrap_or_else(|_| EnvFilter::builder().parse_lossy(directives(DEFAULT_LEVEL)))
        .and(filter_fn(not_the_runtime_span));
    match config.format {
        LogFormat::Json => JsonLayer::new(writer, clock).with_filter(filter).boxed(),
        LogFormat::Text => fmt::layer()
            .with_writer(writer)
            .with_ansi(false)
            .with_timer(Rfc3339Millis::new(clock))
            .compact()
            .with_filter(filter)
            .boxed(),
    }
}

/// The span `lambda_runtime::run` opens around each invocation (`Lambda runtime invoke`, with `requestId` and
/// `xrayTraceId`) is left out of this layer: [`invocation_span`](crate::invocation_span) carries the same ids, and a
/// line should carry the request id once, under one name.
fn not_the_runtime_span(meta: &Metadata<'_>) -> bool {
    !(meta.is_span()
        && meta.name() == RUNTIME_SPAN_NAME
        && meta.target().starts_with("lambda_runtime"))
}

const RUNTIME_SPAN_NAME: &str = "Lambda runtime invoke";

/// The function name given to [`init_with`], if any.
pub(crate) fn configured_function_name() -> Option<&'static str> {
    FUNCTION_NAME.get().map(String::as_str)
}

fn filter(level: &str) -> std::result::Result<EnvFilter, ParseError> {
    EnvFilter::builder().parse(directives(level))
}

/// Targets whose own DEBUG and TRACE lines carry whole requests, responses or events (message bodies, stored results,
/// items): the crates under the AWS SDK, and lambda_runtime's layer that logs every event it receives, whole, at
/// TRACE ("raw JSON event received from Lambda"). Kept at INFO or above whatever level is set, unless a directive
/// names them (or a module above them, as `lambda_runtime` does).
pub(crate) const WIRE_TARGETS: &[&str] = &[
    "lambda_runtime::layers::api_response",
    "aws_smithy_runtime",
    "aws_smithy_runtime_api",
    "aws_smithy_http",
    "aws_smithy_http_client",
    "aws_smithy_types",
    "aws_smithy_json",
    "aws_sdk_dynamodb",
    "aws_sdk_dynamodbstreams",
    "aws_sdk_sqs",
    "aws_runtime",
    "aws_sigv4",
    "aws_config",
    "hyper",
    "hyper_util",
    "h2",
    "reqwest",
    "rustls",
];

/// The user's directives plus one that keeps this crate's spans, whose fields are the point of the log lines; when
/// the default level is DEBUG or TRACE, `<target>=info` for each of [`WIRE_TARGETS`] the user did not name (a named
/// one is the user's opt-in, as written).
fn directives(level: &str) -> String {
    let level = level.trim();
    let level = if level.is_empty() {
        DEFAULT_LEVEL
    } else {
        level
    };
    let parts: Vec<&str> = level.split(',').map(str::trim).collect();
    let verbose = parts.iter().any(|d| {
        !d.contains('=') && (d.eq_ignore_ascii_case("trace") || d.eq_ignore_ascii_case("debug"))
    });
    let mut out = format!("{level},{SPAN_TARGET}=trace");
    if verbose {
        for target in WIRE_TARGETS {
            let named = parts.iter().any(|d| {
                let name = d.split(['=', '[']).next().unwrap_or_default();
                name == *target
                    || name.starts_with(&format!("{target}::"))
                    || target.starts_with(&format!("{name}::"))
            });
            if !named {
                out.push_str(&format!(",{target}=info"));
            }
        }
    }
    out
}

#[cfg(test)]
mod tests;
