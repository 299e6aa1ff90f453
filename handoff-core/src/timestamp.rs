//! The one timestamp format handoff writes and reads: ISO-8601 UTC with milliseconds
//! (`2025-01-31T12:34:56.789Z`), so that timestamps sort as text. The `time` crate does every
//! calendar computation.

use time::format_description::BorrowedFormatItem;
use time::format_description::well_known::Rfc3339;
use time::macros::format_description;
use time::parsing::Parsed;
use time::{OffsetDateTime, UtcOffset};

/// `2025-01-31T12:34:56.789Z`.
const ISO_MILLIS: &[BorrowedFormatItem<'static>] =
    format_description!("[year]-[month]-[day]T[hour]:[minute]:[second].[subsecond digits:3]Z");

/// ISO-8601 UTC with milliseconds.
pub fn now_iso() -> String {
    iso(OffsetDateTime::now_utc())
}

/// `ms` milliseconds since the Unix epoch as ISO-8601 UTC with milliseconds; `None` outside the
/// years 0000 to 9999.
pub fn iso_from_unix_ms(ms: i64) -> Option<String> {
    let t = OffsetDateTime::from_unix_timestamp_nanos(i128::from(ms) * 1_000_000).ok()?;
    (0..=9999).contains(&t.year()).then(|| iso(t))
}

/// The moment an RFC 3339 timestamp (as [`now_iso`] writes it) names.
pub fn parse_iso(at: &str) -> Option<std::time::SystemTime> {
    OffsetDateTime::parse(at, &Rfc3339).ok().map(Into::into)
}

/// `t` as ISO-8601 UTC with milliseconds.
pub(crate) fn iso(t: OffsetDateTime) -> String {
    t.to_offset(UtcOffset::UTC)
        .format(ISO_MILLIS)
        .unwrap_or_default()
}

/// Whether `at` is a timestamp as [`now_iso`] writes it, naming a real moment: exactly that
/// shape, a valid calendar date and time of day, and a leap second (`:60`) only where one can
/// occur (the last second of a month).
pub(crate) fn is_iso(at: &str) -> bool {
    // The shape, component by component (a leap second parses here and is judged below).
    let mut parsed = Parsed::new();
    let shape = at.len() == 24
        && parsed
            .parse_items(at.as_bytes(), ISO_MILLIS)
            .is_ok_and(|rest| rest.is_empty());
    // The calendar: RFC 3339 knows month lengths, leap years and where a leap second may be.
    shape && OffsetDateTime::parse(at, &Rfc3339).is_ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn formats_utc_with_milliseconds() {
        let t = OffsetDateTime::from_unix_timestamp_nanos(1_738_326_896_789_000_000).unwrap();
        assert_eq!(iso(t), "2025-01-31T12:34:56.789Z");
        let plus_two = t.to_offset(UtcOffset::from_hms(2, 0, 0).unwrap());
        assert_eq!(iso(plus_two), "2025-01-31T12:34:56.789Z");
        assert_eq!(iso(OffsetDateTime::UNIX_EPOCH), "1970-01-01T00:00:00.000Z");
        assert!(is_iso(&now_iso()));
    }

    #[test]
    fn reads_only_real_moments_in_the_exact_shape() {
        for good in [
            "2025-01-31T12:34:56.789Z",
            "2024-02-29T00:00:00.000Z",
            "2025-01-31T23:59:60.999Z",
            "2025-06-30T23:59:60.000Z",
        ] {
            assert!(is_iso(good), "{good}");
        }
        for bad in [
            "",
            "2025-01-31T12:34:56Z",
            "2025-01-31 12:34:56.789Z",
            "2025-01-31t12:34:56.789z",
            "2025-13-31T12:34:56.789Z",
            "2025-02-29T12:34:56.789Z",
            "2025-04-31T12:34:56.789Z",
            "2025-01-31T24:00:00.000Z",
            "2025-01-30T23:59:60.000Z",
            "2025-01-31T12:34:56.789+00:00",
            "2025-01-31T12:34:56.7890",
            "+2025-01-31T12:34:56.789Z",
            "2025-01-31T12:34:56.78Z ",
        ] {
            assert!(!is_iso(bad), "{bad}");
        }
    }
}

#[cfg(test)]
mod unix_ms_tests {
    use super::*;

    #[test]
    fn milliseconds_since_the_epoch_read_as_iso() {
        assert_eq!(
            iso_from_unix_ms(0).as_deref(),
            Some("1970-01-01T00:00:00.000Z")
        );
        assert_eq!(
            iso_from_unix_ms(1_740_787_200_123).as_deref(),
            Some("2025-03-01T00:00:00.123Z")
        );
        assert_eq!(
            iso_from_unix_ms(-1).as_deref(),
            Some("1969-12-31T23:59:59.999Z")
        );
        assert_eq!(
            iso_from_unix_ms(-62_167_219_200_000).as_deref(),
            Some("0000-01-01T00:00:00.000Z")
        );
        assert_eq!(
            iso_from_unix_ms(253_402_300_799_999).as_deref(),
            Some("9999-12-31T23:59:59.999Z")
        );
        assert_eq!(iso_from_unix_ms(253_402_300_800_000), None);
        assert_eq!(iso_from_unix_ms(-62_167_219_200_001), None);
        assert_eq!(iso_from_unix_ms(i64::MAX), None);
    }
}
