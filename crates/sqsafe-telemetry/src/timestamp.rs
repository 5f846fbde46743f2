use std::fmt;
use std::time::SystemTime;

use tracing_subscriber::fmt::format::Writer;
use tracing_subscriber::fmt::time::FormatTime;

/// RFC 3339 UTC timestamps with millisecond precision (`2024-05-01T12:00:00.250Z`), the precision Lambda uses in its own
/// JSON log lines. The clock is injected so tests can pin the time.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Rfc3339Millis<C> {
    clock: C,
}

impl<C> Rfc3339Millis<C>
where
    C: Fn() -> SystemTime,
{
    pub(crate) fn new(clock: C) -> Self {
        Self { clock }
    }

    /// Reads the clock: the time to write, already cut to the millisecond (`{:.3}` prints it as RFC 3339).
    pub(crate) fn now(&self) -> jiff::Timestamp {
        to_millis((self.clock)())
    }
}

impl<C> FormatTime for Rfc3339Millis<C>
where
    C: Fn() -> SystemTime,
{
    fn format_time(&self, w: &mut Writer<'_>) -> fmt::Result {
        write_rfc3339_millis(w, (self.clock)())
    }
}

/// Writes `t` as `YYYY-MM-DDTHH:MM:SS.mmmZ` (jiff's RFC 3339 printer, three fractional digits, truncated). Times
/// outside jiff's range (years before -9999 or after 9999) are written as the Unix epoch: a Lambda clock is never
/// there, and a log line must not fail for it.
pub(crate) fn write_rfc3339_millis(w: &mut impl fmt::Write, t: SystemTime) -> fmt::Result {
    write!(w, "{:.3}", to_millis(t))
}

/// `t` as a jiff timestamp cut (not rounded: a line never carries a time later than the clock read) to the
/// millisecond; the Unix epoch when `t` is outside jiff's range.
fn to_millis(t: SystemTime) -> jiff::Timestamp {
    let at = jiff::Timestamp::try_from(t).unwrap_or(jiff::Timestamp::UNIX_EPOCH);
    jiff::Timestamp::from_millisecond(at.as_millisecond()).unwrap_or(at)
}

#[cfg(test)]
mod tests {
    use std::time::{Duration, UNIX_EPOCH};

    use super::*;

    fn format(t: SystemTime) -> String {
        let mut s = String::new();
        write_rfc3339_millis(&mut s, t).expect("writing to a String cannot fail");
        s
    }

    fn at(secs: u64, millis: u64) -> SystemTime {
        UNIX_EPOCH + Duration::from_secs(secs) + Duration::from_millis(millis)
    }

    #[test]
    fn formats_known_instants() {
        assert_eq!(format(UNIX_EPOCH), "1970-01-01T00:00:00.000Z");
        assert_eq!(format(at(951_782_400, 0)), "2000-02-29T00:00:00.000Z");
        assert_eq!(format(at(1_714_564_800, 250)), "2024-05-01T12:00:00.250Z");
        assert_eq!(format(at(1_735_689_599, 999)), "2024-12-31T23:59:59.999Z");
        assert_eq!(format(at(4_107_542_400, 1)), "2100-03-01T00:00:00.001Z");
    }

    #[test]
    fn truncates_below_a_millisecond() {
        assert_eq!(
            format(UNIX_EPOCH + Duration::from_nanos(1_999_999)),
            "1970-01-01T00:00:00.001Z"
        );
    }

    #[test]
    fn times_before_the_epoch_are_still_written() {
        assert_eq!(
            format(UNIX_EPOCH - Duration::from_secs(1)),
            "1969-12-31T23:59:59.000Z"
        );
    }

    #[test]
    fn times_out_of_range_are_written_as_the_epoch() {
        assert_eq!(
            format(UNIX_EPOCH + Duration::from_secs(400_000_000_000)),
            "1970-01-01T00:00:00.000Z"
        );
    }
}
