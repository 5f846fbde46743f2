use std::fmt;
use std::time::{SystemTime, UNIX_EPOCH};

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
}

impl<C> FormatTime for Rfc3339Millis<C>
where
    C: Fn() -> SystemTime,
{
    fn format_time(&self, w: &mut Writer<'_>) -> fmt::Result {
        write_rfc3339_millis(w, (self.clock)())
    }
}

/// Writes `t` as `YYYY-MM-DDTHH:MM:SS.mmmZ`. Times before the Unix epoch are written as the epoch: a Lambda clock is
/// never there, and a log line must not fail for it.
pub(crate) fn write_rfc3339_millis(w: &mut impl fmt::Write, t: SystemTime) -> fmt::Result {
    let since_epoch = t.duration_since(UNIX_EPOCH).unwrap_or_default();
    let secs = since_epoch.as_secs();
    let (year, month, day) = civil_from_days(secs / 86_400);
    let secs_of_day = secs % 86_400;
    write!(
        w,
        "{year:04}-{month:02}-{day:02}T{:02}:{:02}:{:02}.{:03}Z",
        secs_of_day / 3_600,
        secs_of_day % 3_600 / 60,
        secs_of_day % 60,
        since_epoch.subsec_millis(),
    )
}

/// Days since 1970-01-01 to a proleptic Gregorian (year, month, day), after Howard Hinnant's `civil_from_days`.
/// Unsigned because the input is never before the epoch.
fn civil_from_days(days: u64) -> (u64, u64, u64) {
    // Shift the epoch to 0000-03-01 so that leap days fall at the end of each 400-year era.
    let z = days + 719_468;
    let era = z / 146_097;
    let day_of_era = z % 146_097;
    let year_of_era =
        (day_of_era - day_of_era / 1_460 + day_of_era / 36_524 - day_of_era / 146_096) / 365;
    let day_of_year = day_of_era - (365 * year_of_era + year_of_era / 4 - year_of_era / 100);
    let month_from_march = (5 * day_of_year + 2) / 153;
    let day = day_of_year - (153 * month_from_march + 2) / 5 + 1;
    let month = if month_from_march < 10 {
        month_from_march + 3
    } else {
        month_from_march - 9
    };
    let year = year_of_era + era * 400 + u64::from(month <= 2);
    (year, month, day)
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

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
    fn clamps_times_before_the_epoch() {
        assert_eq!(
            format(UNIX_EPOCH - Duration::from_secs(1)),
            "1970-01-01T00:00:00.000Z"
        );
    }
}
