//! The JSON log layer: one line per event, every field at the top level.
//!
//! A line holds `timestamp`, `level`, `target`, the event's `message` and fields, the fields of every span the event
//! is inside (the invocation's, the record's, the handler's own), and `name`, the innermost span's name. Span fields
//! are encoded once, when the span is created or a field is recorded, and copied into each line as they are: a line
//! costs one pass over its spans' encoded fields, with no map built and no value re-serialised per line (what
//! `json-subscriber`'s flattened span list does, and what made it half of the toolkit's CPU per record).
//!
//! No line holds a key twice: when two spans name the same field, the innermost wins; an event field named like a
//! key already on the line is written as `event.<name>`; a span field named like one of the line's own keys
//! (`timestamp`, `level`, `target`, `message`, `name`) as `span.<name>`.

use std::cell::RefCell;
use std::fmt;
use std::io::Write as _;
use std::ops::Range;
use std::time::SystemTime;

use smallvec::SmallVec;
use tracing::field::{Field, Visit};
use tracing::span::{Attributes, Id, Record};
use tracing::{Event, Level, Subscriber};
use tracing_subscriber::Layer;
use tracing_subscriber::fmt::MakeWriter;
use tracing_subscriber::layer::Context;
use tracing_subscriber::registry::LookupSpan;

use crate::timestamp::Rfc3339Millis;

/// The keys every line has, whatever its fields.
const LINE_KEYS: [&str; 5] = ["timestamp", "level", "target", "message", "name"];

/// The JSON layer; `clock` stamps each line.
pub(crate) struct JsonLayer<W, C> {
    make_writer: W,
    timer: Rfc3339Millis<C>,
}

impl<W, C> JsonLayer<W, C>
where
    C: Fn() -> SystemTime,
{
    pub(crate) fn new(make_writer: W, clock: C) -> Self {
        Self {
            make_writer,
            timer: Rfc3339Millis::new(clock),
        }
    }
}

/// One span's fields, encoded: `"key":value` fragments in `json`, one range per field.
#[derive(Debug, Default)]
struct SpanFields {
    json: Vec<u8>,
    fields: Vec<(&'static str, Range<usize>)>,
}

impl SpanFields {
    fn fragment(&self, range: &Range<usize>) -> &[u8] {
        self.json.get(range.clone()).unwrap_or_default()
    }

    /// Encodes `value` as the field `name`, replacing an earlier value of the same field.
    fn set(&mut self, name: &'static str, value: Value<'_>) {
        if self.fields.iter().any(|(n, _)| *n == name) {
            self.remove(name);
        }
        let start = self.json.len();
        let key = if LINE_KEYS.contains(&name) {
            Key::Prefixed("span.", name)
        } else {
            Key::Plain(name)
        };
        write_member(&mut self.json, key, value);
        self.fields.push((name, start..self.json.len()));
    }

    /// Rare (a field recorded twice): rebuilds the buffer without `name`.
    fn remove(&mut self, name: &str) {
        let mut json = Vec::with_capacity(self.json.len());
        let mut fields = Vec::with_capacity(self.fields.len());
        for (n, range) in &self.fields {
            if *n != name {
                let start = json.len();
                json.extend_from_slice(self.fragment(range));
                fields.push((*n, start..json.len()));
            }
        }
        self.json = json;
        self.fields = fields;
    }
}

/// A field value, as `tracing` hands it over.
enum Value<'a> {
    Str(&'a str),
    Bool(bool),
    I64(i64),
    U64(u64),
    I128(i128),
    U128(u128),
    F64(f64),
    Debug(&'a dyn fmt::Debug),
    Error(&'a (dyn std::error::Error + 'static)),
}

/// A member's key: the field's name, or the name under a prefix.
#[derive(Clone, Copy)]
enum Key<'a> {
    Plain(&'a str),
    Prefixed(&'static str, &'a str),
}

/// Appends `"key":value` (no separator).
fn write_member(out: &mut Vec<u8>, key: Key<'_>, value: Value<'_>) {
    match key {
        Key::Plain(name) => write_json(out, name),
        Key::Prefixed(prefix, name) => write_json(out, &format_args!("{prefix}{name}")),
    }
    out.push(b':');
    match value {
        Value::Str(s) => write_json(out, s),
        Value::Bool(b) => write_json(out, &b),
        Value::I64(n) => write_json(out, &n),
        Value::U64(n) => write_json(out, &n),
        Value::I128(n) => write_json(out, &n),
        Value::U128(n) => write_json(out, &n),
        Value::F64(n) if n.is_finite() => write_json(out, &n),
        // JSON has no NaN or infinity (serde_json would write null): those are written as strings.
        Value::F64(n) => write_json(out, &format_args!("{n}")),
        Value::Debug(d) => write_json(out, &format_args!("{d:?}")),
        Value::Error(e) => write_json(out, &format_args!("{e}")),
    }
}

/// Appends `value` as JSON with serde_json: a string quoted and escaped (RFC 8259), formatted text (`fmt::Arguments`)
/// escaped as it is formatted, without an intermediate string; a number or a boolean as itself.
fn write_json(out: &mut Vec<u8>, value: &(impl serde::Serialize + ?Sized)) {
    // Writing strings, numbers and formatted text to a Vec cannot fail (a Debug impl that errors leaves the
    // line's value cut short, still a line).
    let _ = serde_json::to_writer(&mut *out, value);
}

/// Hands each field of a span or an event to `F` as a [`Value`].
struct Fields<F>(F);

impl<F: FnMut(&'static str, Value<'_>)> Visit for Fields<F> {
    fn record_str(&mut self, field: &Field, value: &str) {
        (self.0)(field.name(), Value::Str(value));
    }
    fn record_bool(&mut self, field: &Field, value: bool) {
        (self.0)(field.name(), Value::Bool(value));
    }
    fn record_i64(&mut self, field: &Field, value: i64) {
        (self.0)(field.name(), Value::I64(value));
    }
    fn record_u64(&mut self, field: &Field, value: u64) {
        (self.0)(field.name(), Value::U64(value));
    }
    fn record_i128(&mut self, field: &Field, value: i128) {
        (self.0)(field.name(), Value::I128(value));
    }
    fn record_u128(&mut self, field: &Field, value: u128) {
        (self.0)(field.name(), Value::U128(value));
    }
    fn record_f64(&mut self, field: &Field, value: f64) {
        (self.0)(field.name(), Value::F64(value));
    }
    fn record_error(&mut self, field: &Field, value: &(dyn std::error::Error + 'static)) {
        (self.0)(field.name(), Value::Error(value));
    }
    fn record_debug(&mut self, field: &Field, value: &dyn fmt::Debug) {
        (self.0)(field.name(), Value::Debug(value));
    }
}

/// Records a span's fields into `fields`.
fn span_fields(fields: &mut SpanFields) -> Fields<impl FnMut(&'static str, Value<'_>) + '_> {
    Fields(move |name: &'static str, value: Value<'_>| fields.set(name, value))
}

fn level_name(level: &Level) -> &'static str {
    match *level {
        Level::TRACE => "TRACE",
        Level::DEBUG => "DEBUG",
        Level::INFO => "INFO",
        Level::WARN => "WARN",
        Level::ERROR => "ERROR",
    }
}

thread_local! {
    /// The line being written, kept between lines so writing one allocates nothing once it has grown.
    static LINE: RefCell<Vec<u8>> = const { RefCell::new(Vec::new()) };
}

/// Key names of one line; a record's lines have about a dozen.
type Keys = SmallVec<[&'static str; 24]>;

/// Lines longer than this give their buffer back instead of keeping it for the next line.
const KEPT_CAPACITY: usize = 16 * 1024;

impl<S, W, C> Layer<S> for JsonLayer<W, C>
where
    S: Subscriber + for<'a> LookupSpan<'a>,
    W: for<'w> MakeWriter<'w> + 'static,
    C: Fn() -> SystemTime + 'static,
{
    fn on_new_span(&self, attrs: &Attributes<'_>, id: &Id, ctx: Context<'_, S>) {
        let Some(span) = ctx.span(id) else { return };
        let mut fields = SpanFields::default();
        attrs.record(&mut span_fields(&mut fields));
        span.extensions_mut().replace(fields);
    }

    fn on_record(&self, id: &Id, values: &Record<'_>, ctx: Context<'_, S>) {
        let Some(span) = ctx.span(id) else { return };
        let mut extensions = span.extensions_mut();
        if let Some(fields) = extensions.get_mut::<SpanFields>() {
            values.record(&mut span_fields(fields));
        }
    }

    fn on_event(&self, event: &Event<'_>, ctx: Context<'_, S>) {
        let write = |line: &mut Vec<u8>| {
            line.clear();
            self.format(event, &ctx, line);
            let mut writer = self.make_writer.make_writer_for(event.metadata());
            // A log line that cannot be written has nowhere else to go.
            let _ = writer.write_all(line);
        };
        // tracing does not dispatch an event from inside a layer's callback, so the buffer is free; were it not
        // (a future tracing), the line gets a buffer of its own rather than a panic.
        let reused = LINE.try_with(|cell| {
            if let Ok(mut line) = cell.try_borrow_mut() {
                write(&mut line);
                if line.capacity() > KEPT_CAPACITY {
                    *line = Vec::new();
                }
                true
            } else {
                false
            }
        });
        if reused != Ok(true) {
            write(&mut Vec::new());
        }
    }
}

impl<W, C> JsonLayer<W, C>
where
    C: Fn() -> SystemTime,
{
    fn format<S>(&self, event: &Event<'_>, ctx: &Context<'_, S>, line: &mut Vec<u8>)
    where
        S: Subscriber + for<'a> LookupSpan<'a>,
    {
        let meta = event.metadata();
        // Writing to a Vec cannot fail.
        let _ = write!(line, "{{\"timestamp\":\"{:.3}\"", self.timer.now());
        line.extend_from_slice(b",\"level\":\"");
        line.extend_from_slice(level_name(meta.level()).as_bytes());
        line.extend_from_slice(b"\",\"target\":");
        write_json(line, meta.target());

        // The spans' keys, innermost first, each once: the innermost span wins.
        let scope = ctx.event_scope(event);
        let mut taken: Keys = SmallVec::new();
        let mut innermost = None;
        if let Some(scope) = scope {
            for span in scope {
                innermost.get_or_insert(span.name());
                if let Some(fields) = span.extensions().get::<SpanFields>() {
                    for (name, _) in &fields.fields {
                        if !taken.contains(name) {
                            taken.push(name);
                        }
                    }
                }
            }
        }

        // An event field named like a key already on the line is written as `event.<name>`.
        event.record(&mut Fields(|name: &'static str, value: Value<'_>| {
            let key = if name != "message" && (LINE_KEYS.contains(&name) || taken.contains(&name)) {
                Key::Prefixed("event.", name)
            } else {
                Key::Plain(name)
            };
            line.push(b',');
            write_member(line, key, value);
        }));

        if let Some(scope) = ctx.event_scope(event) {
            let mut written: Keys = SmallVec::new();
            for span in scope {
                let extensions = span.extensions();
                let Some(fields) = extensions.get::<SpanFields>() else {
                    continue;
                };
                for (name, range) in &fields.fields {
                    if !written.contains(name) {
                        written.push(name);
                        line.push(b',');
                        line.extend_from_slice(fields.fragment(range));
                    }
                }
            }
        }
        if let Some(name) = innermost {
            line.extend_from_slice(b",\"name\":");
            write_json(line, name);
        }
        line.extend_from_slice(b"}\n");
    }
}
