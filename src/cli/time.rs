//! Times in the JSON contract: `*_at` as RFC 3339 UTC, `*_ms` as epoch milliseconds.

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use time::format_description::well_known::Rfc3339;
use time::OffsetDateTime;

/// `2026-12-02T18:50:08.123Z`: millisecond precision, always UTC, years 0000-9999 (clamped).
/// Written digit by digit: `dream-gate` formats one per listed session.
pub fn rfc3339(at: SystemTime) -> String {
    const MAX_MS: i64 = 253_402_300_799_999; // 9999-12-31T23:59:59.999Z
    const MIN_MS: i64 = -62_167_219_200_000; // 0000-01-01T00:00:00.000Z
    let ms = epoch_ms(at).clamp(MIN_MS, MAX_MS);
    let days = ms.div_euclid(86_400_000);
    let in_day = ms.rem_euclid(86_400_000);
    let (year, month, day) = civil_from_days(days);
    let fields: [(i64, usize, u8); 7] = [
        (year, 4, b'-'),
        (month, 2, b'-'),
        (day, 2, b'T'),
        (in_day / 3_600_000, 2, b':'),
        (in_day / 60_000 % 60, 2, b':'),
        (in_day / 1000 % 60, 2, b'.'),
        (in_day % 1000, 3, b'Z'),
    ];
    let mut out = Vec::with_capacity(24);
    for (value, width, separator) in fields {
        let start = out.len();
        let mut v = value;
        for _ in 0..width {
            out.push(b'0' + (v % 10) as u8);
            v /= 10;
        }
        out[start..].reverse();
        out.push(separator);
    }
    // Only ASCII digits and separators were written.
    String::from_utf8(out).unwrap_or_default()
}

/// Days since 1970-01-01 to (year, month, day) in the proleptic Gregorian calendar
/// (Howard Hinnant's `civil_from_days`).
fn civil_from_days(days: i64) -> (i64, i64, i64) {
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + i64::from(month <= 2);
    (year, month, day)
}

/// Parses an RFC 3339 timestamp (any offset) such as the `timestamp` of a transcript record.
pub fn parse_rfc3339(text: &str) -> Option<SystemTime> {
    let dt = OffsetDateTime::parse(text, &Rfc3339).ok()?;
    let nanos = dt.unix_timestamp_nanos();
    if nanos >= 0 {
        UNIX_EPOCH.checked_add(Duration::from_nanos(u64::try_from(nanos).ok()?))
    } else {
        UNIX_EPOCH.checked_sub(Duration::from_nanos(u64::try_from(-nanos).ok()?))
    }
}

/// Milliseconds since the Unix epoch (negative before it).
pub fn epoch_ms(at: SystemTime) -> i64 {
    match at.duration_since(UNIX_EPOCH) {
        Ok(d) => i64::try_from(d.as_millis()).unwrap_or(i64::MAX),
        Err(e) => -i64::try_from(e.duration().as_millis()).unwrap_or(i64::MAX),
    }
}

/// The inverse of [`epoch_ms`].
pub fn from_epoch_ms(ms: i64) -> SystemTime {
    if ms >= 0 {
        UNIX_EPOCH + Duration::from_millis(ms.unsigned_abs())
    } else {
        UNIX_EPOCH - Duration::from_millis(ms.unsigned_abs())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn agrees_with_the_time_crate_across_the_calendar() {
        let mut ms: i64 = -62_000_000_000_000;
        while ms < 253_000_000_000_000 {
            let expected = OffsetDateTime::from_unix_timestamp(ms.div_euclid(1000))
                .unwrap()
                .format(&Rfc3339)
                .unwrap();
            let ours = rfc3339(from_epoch_ms(ms));
            assert_eq!(ours[..19], expected[..19], "{ms}");
            assert_eq!(ours[19..], format!(".{:03}Z", ms.rem_euclid(1000)), "{ms}");
            ms += 7_777_777_777_777 / 1000 * 13 + 1;
        }
        assert_eq!(
            rfc3339(from_epoch_ms(951_782_400_000)),
            "2000-02-29T00:00:00.000Z"
        );
        assert_eq!(rfc3339(from_epoch_ms(i64::MAX)), "9999-12-31T23:59:59.999Z");
    }

    #[test]
    fn formats_utc_with_millis() {
        let t = UNIX_EPOCH + Duration::from_millis(1_764_701_408_123);
        assert_eq!(rfc3339(t), "2025-12-02T18:50:08.123Z");
        assert_eq!(rfc3339(UNIX_EPOCH), "1970-01-01T00:00:00.000Z");
    }

    #[test]
    fn parses_what_claude_code_writes_and_other_offsets() {
        let t = parse_rfc3339("2025-12-02T18:50:08.123Z").unwrap();
        assert_eq!(epoch_ms(t), 1_764_701_408_123);
        let t2 = parse_rfc3339("2025-12-02T19:50:08.123+01:00").unwrap();
        assert_eq!(t, t2);
        assert!(parse_rfc3339("yesterday").is_none());
    }

    #[test]
    fn epoch_ms_round_trips() {
        for ms in [0, 1, 1_764_701_408_123, -5000] {
            assert_eq!(epoch_ms(from_epoch_ms(ms)), ms);
        }
    }
}
