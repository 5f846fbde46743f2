use jiff::{SignedDuration, Span, SpanRelativeTo, SpanRound, Unit};

/// Parses a duration as people write it (`30d`, `19 days`, `36h`, `1d 12h`, ISO 8601 `P30D`), days counted as 24 h.
///
/// ```
/// use jiff::SignedDuration;
/// assert_eq!(sqsafe_cli::parse_duration("30d"), Ok(SignedDuration::from_hours(720)));
/// assert_eq!(sqsafe_cli::parse_duration("1d 12h"), Ok(SignedDuration::from_hours(36)));
/// assert!(sqsafe_cli::parse_duration("-1d").is_err());
/// ```
///
/// # Errors
/// A message that says what was expected, for text that is not a duration or is negative.
pub fn parse_duration(text: &str) -> Result<SignedDuration, String> {
    let expected = || format!("`{text}` is not a duration: write e.g. 30d, 36h, 1d 12h or P30D");
    let span: Span = text.trim().parse().map_err(|_| expected())?;
    let duration = span
        .to_duration(SpanRelativeTo::days_are_24_hours())
        .map_err(|_| expected())?;
    if duration.is_negative() {
        return Err(format!("`{text}` is negative"));
    }
    Ok(duration)
}

/// A duration for people: days, hours and minutes (seconds too below an hour), e.g. `29d 20h 5m`; negative ones
/// with a leading `-`.
///
/// ```
/// use jiff::SignedDuration;
/// assert_eq!(sqsafe_cli::human_duration(SignedDuration::from_secs(90)), "1m 30s");
/// assert_eq!(sqsafe_cli::human_duration(SignedDuration::from_secs(2_592_060)), "30d 1m");
/// ```
pub fn human_duration(duration: SignedDuration) -> String {
    let smallest = if duration.abs() < SignedDuration::from_hours(1) {
        Unit::Second
    } else {
        Unit::Minute
    };
    let rounded = Span::try_from(duration).and_then(|span| {
        span.round(
            SpanRound::new()
                .largest(Unit::Day)
                .smallest(smallest)
                .days_are_24_hours(),
        )
    });
    match rounded {
        Ok(span) if span.is_zero() => "0s".to_owned(),
        Ok(span) => {
            let text = format!("{span:#}");
            // jiff writes a negative span as "1h ago"; a leading sign reads better in a column.
            match text.strip_suffix(" ago") {
                Some(positive) => format!("-{positive}"),
                None => text,
            }
        }
        Err(_) => format!("{}s", duration.as_secs()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations_parse_in_the_forms_an_operator_types() {
        for (text, hours) in [
            ("30d", 720),
            ("30 days", 720),
            ("P30D", 720),
            ("36h", 36),
            ("1d 12h", 36),
            ("1w", 168),
        ] {
            assert_eq!(
                parse_duration(text),
                Ok(SignedDuration::from_hours(hours)),
                "{text}"
            );
        }
        assert_eq!(parse_duration("90s"), Ok(SignedDuration::from_secs(90)));
        assert!(parse_duration("soon").is_err());
        assert!(parse_duration("").is_err());
        assert!(
            parse_duration("-2h")
                .expect_err("negative")
                .contains("negative")
        );
    }

    #[test]
    fn durations_print_for_people() {
        assert_eq!(human_duration(SignedDuration::ZERO), "0s");
        assert_eq!(human_duration(SignedDuration::from_millis(1500)), "2s");
        assert_eq!(
            human_duration(SignedDuration::from_secs(3 * 3600 + 125)),
            "3h 2m"
        );
        assert_eq!(
            human_duration(SignedDuration::from_secs(-(86_400 + 3600))),
            "-1d 1h"
        );
        assert_eq!(human_duration(SignedDuration::from_hours(720)), "30d");
    }
}
