//! Durations on the command line: `600`, `1.5`, `250ms`, `30s`, `10m`, `2h`; and durations
//! written for people (`12 s`, `10m`).

use std::time::Duration;

/// Parses a plain number of seconds or a number with a unit `ms`, `s`, `m` or `h`.
/// Used as a clap `value_parser`, so the error text ends up in the usage error.
pub fn parse_duration(text: &str) -> Result<Duration, String> {
    parse_with_plain_unit(text, 1.0, "a number of seconds")
}

/// A number with an optional unit; a plain number is `plain_scale` seconds.
fn parse_with_plain_unit(text: &str, plain_scale: f64, plain: &str) -> Result<Duration, String> {
    let text = text.trim();
    let split = text
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .unwrap_or(text.len());
    let (number, unit) = text.split_at(split);
    let scale = match unit.trim() {
        "" => plain_scale,
        "s" => 1.0,
        "ms" => 0.001,
        "m" => 60.0,
        "h" => 3600.0,
        other => {
            return Err(format!(
                "unknown unit {other:?} in {text:?} (use {plain}, or a number with ms, s, m or h)"
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

/// Parses a non-negative, finite number of hours (`--min-hours`): a plain number is hours
/// (`24`, `0.5`), and any duration with a unit is accepted too (`24h`, `90m`).
pub fn parse_hours(text: &str) -> Result<f64, String> {
    let hours = parse_with_plain_unit(text, 3600.0, "a number of hours")
        .map(|d| d.as_secs_f64() / 3600.0)
        .map_err(|_| format!("{text:?} is not a number of hours (examples: 24, 0.5, 24h, 90m)"))?;
    if hours > MAX_HOURS {
        return Err(format!(
            "{text:?} is out of range (at most {MAX_HOURS} hours)"
        ));
    }
    Ok(hours)
}

/// The shortest exact form that [`parse_duration`] reads back: `10m`, `90s`, `2h`, `250ms`.
pub fn format_duration(d: Duration) -> String {
    let ms = d.as_millis();
    match ms {
        0 => "0".to_string(),
        _ if ms.is_multiple_of(3_600_000) => format!("{}h", ms / 3_600_000),
        _ if ms.is_multiple_of(60_000) => format!("{}m", ms / 60_000),
        _ if ms.is_multiple_of(1000) => format!("{}s", ms / 1000),
        _ => format!("{ms}ms"),
    }
}

/// An elapsed time for a person, rounded down: `12 s`, `25 min`, `3.5 h`.
pub fn format_elapsed(d: Duration) -> String {
    let secs = d.as_secs();
    if secs < 120 {
        format!("{secs} s")
    } else if secs < 2 * 3600 {
        format!("{} min", secs / 60)
    } else {
        format!("{:.1} h", d.as_secs_f64() / 3600.0)
    }
}

/// `1 session`, `2 sessions`: a count with its noun in the right number.
pub fn count(n: impl Into<u64>, one: &str, many: &str) -> String {
    let n = n.into();
    format!("{n} {}", if n == 1 { one } else { many })
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
    fn hours_plain_or_with_a_unit() {
        assert_eq!(parse_hours("24"), Ok(24.0));
        assert_eq!(parse_hours("0.5"), Ok(0.5));
        assert_eq!(parse_hours("24h"), Ok(24.0));
        assert_eq!(parse_hours("90m"), Ok(1.5));
        assert_eq!(parse_hours("1800s"), Ok(0.5));
        assert_eq!(parse_hours(" 0 "), Ok(0.0));
        for bad in ["-1", "NaN", "inf", "x", "", "24d", "9000000", "1e9999"] {
            let err = parse_hours(bad).unwrap_err();
            assert!(err.contains("hours"), "{bad:?}: {err}");
        }
    }

    #[test]
    fn formatted_durations_read_back() {
        for (d, text) in [
            (Duration::from_secs(600), "10m"),
            (Duration::from_secs(90), "90s"),
            (Duration::from_secs(7200), "2h"),
            (Duration::from_millis(250), "250ms"),
            (Duration::ZERO, "0"),
        ] {
            assert_eq!(format_duration(d), text);
            assert_eq!(parse_duration(text), Ok(d));
        }
        assert_eq!(format_elapsed(Duration::from_millis(12_900)), "12 s");
        assert_eq!(format_elapsed(Duration::from_secs(25 * 60 + 3)), "25 min");
        assert_eq!(
            format_elapsed(Duration::from_secs(3 * 3600 + 1800)),
            "3.5 h"
        );
        assert_eq!(count(1u32, "turn", "turns"), "1 turn");
        assert_eq!(count(0u32, "turn", "turns"), "0 turns");
    }
}
