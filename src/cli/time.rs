//! Times in the JSON contract: `*_at` as RFC 3339 UTC, `*_ms` as epoch milliseconds.

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use time::format_description::well_known::Rfc3339;
use time::OffsetDateTime;

/// `2026-12-02T18:50:08.123Z`: millisecond precision, always UTC.
pub fn rfc3339(at: SystemTime) -> String {
    let ms = epoch_ms(at);
    let secs = ms.div_euclid(1000);
    let millis = ms.rem_euclid(1000);
    match OffsetDateTime::from_unix_timestamp(secs) {
        Ok(dt) => format!(
            "{:04}-{:02}-{:02}T{:02}:{:02}:{:02}.{:03}Z",
            dt.year(),
            u8::from(dt.month()),
            dt.day(),
            dt.hour(),
            dt.minute(),
            dt.second(),
            millis
        ),
        // Only reachable for times beyond year 9999; still a valid, sortable string.
        Err(_) => "9999-12-31T23:59:59.999Z".to_string(),
    }
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
