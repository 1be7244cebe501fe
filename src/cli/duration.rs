//! Durations on the command line: `600`, `1.5`, `250ms`, `30s`, `10m`, `2h`.

use std::time::Duration;

/// Parses a plain number of seconds or a number with a unit `ms`, `s`, `m` or `h`.
/// Used as a clap `value_parser`, so the error text ends up in the usage error.
pub fn parse_duration(text: &str) -> Result<Duration, String> {
    let text = text.trim();
    let split = text
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .unwrap_or(text.len());
    let (number, unit) = text.split_at(split);
    let scale = match unit.trim() {
        "" | "s" => 1.0,
        "ms" => 0.001,
        "m" => 60.0,
        "h" => 3600.0,
        other => {
            return Err(format!(
                "unknown unit {other:?} in {text:?} (use a number of seconds, or ms, s, m, h)"
            ))
        }
    };
    let value: f64 = number
        .parse()
        .map_err(|_| format!("{text:?} is not a duration (examples: 600, 10m, 1.5h, 250ms)"))?;
    Duration::try_from_secs_f64(value * scale).map_err(|_| format!("{text:?} is out of range"))
}

/// A thousand years: more is a typo, not a policy.
const MAX_HOURS: f64 = 24.0 * 365.0 * 1000.0;

/// Parses a non-negative, finite number of hours (`--min-hours`).
pub fn parse_hours(text: &str) -> Result<f64, String> {
    match text.trim().parse::<f64>() {
        Ok(h) if (0.0..=MAX_HOURS).contains(&h) => Ok(h),
        _ => Err(format!(
            "{text:?} is not a number of hours (example: 24, 0.5)"
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn plain_numbers_are_seconds() {
        assert_eq!(parse_duration("600"), Ok(Duration::from_secs(600)));
        assert_eq!(parse_duration("1.5"), Ok(Duration::from_millis(1500)));
        assert_eq!(parse_duration("0"), Ok(Duration::ZERO));
    }

    #[test]
    fn units() {
        assert_eq!(parse_duration("250ms"), Ok(Duration::from_millis(250)));
        assert_eq!(parse_duration("30s"), Ok(Duration::from_secs(30)));
        assert_eq!(parse_duration("10m"), Ok(Duration::from_secs(600)));
        assert_eq!(parse_duration("2h"), Ok(Duration::from_secs(7200)));
    }

    #[test]
    fn rejects_garbage_negative_and_overflow() {
        for bad in ["", "m", "-5", "10d", "1e9999", "ten", "5 mins", "1.2.3"] {
            assert!(parse_duration(bad).is_err(), "{bad:?} accepted");
        }
    }

    #[test]
    fn hours() {
        assert_eq!(parse_hours("24"), Ok(24.0));
        assert_eq!(parse_hours("0.5"), Ok(0.5));
        for bad in ["-1", "NaN", "inf", "x", ""] {
            assert!(parse_hours(bad).is_err(), "{bad:?} accepted");
        }
    }
}
