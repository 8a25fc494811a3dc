//! Times in the API: RFC 3339 strings out (`2026-11-23T10:00:00Z`); in,
//! RFC 3339 strings with any offset or integer milliseconds since the
//! Unix epoch, as clients of JSON APIs send either.

use serde::de::{self, Deserializer, Visitor};

/// What a time field accepts, said in every error about one.
pub const EXPECTED: &str =
    "an RFC 3339 time such as \"2026-11-23T10:00:00Z\" or milliseconds since 1970-01-01 UTC";

/// The forms a time takes in, as the API's document describes them.
pub const FORMS: &str = "RFC 3339, e.g. 2026-11-23T10:00:00Z or 2026-11-23T18:00:00+08:00, or ms \
     since the Unix epoch; RFC 3339 with T and Z in capitals, seconds, an optional fraction, \
     years 1971-9998";

/// A time read from a request: ms since the Unix epoch.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Millis(pub u64);

impl<'de> serde::Deserialize<'de> for Millis {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        deserializer.deserialize_any(MillisVisitor)
    }
}

struct MillisVisitor;

impl Visitor<'_> for MillisVisitor {
    type Value = Millis;

    fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
        f.write_str(EXPECTED)
    }

    fn visit_u64<E: de::Error>(self, ms: u64) -> Result<Millis, E> {
        if ms > LATEST {
            return Err(E::custom(format!(
                "expected {EXPECTED}, got {ms}, after 9999-01-01"
            )));
        }
        Ok(Millis(ms))
    }

    fn visit_i64<E: de::Error>(self, ms: i64) -> Result<Millis, E> {
        u64::try_from(ms)
            .map(Millis)
            .map_err(|_| E::custom(format!("expected {EXPECTED}, got {ms}, before 1970")))
    }

    /// `1.0` is an integer to JSON Schema, and so to the document.
    fn visit_f64<E: de::Error>(self, ms: f64) -> Result<Millis, E> {
        if ms.fract() == 0.0 && (0.0..=LATEST as f64).contains(&ms) {
            self.visit_u64(ms as u64)
        } else {
            Err(E::custom(format!("expected {EXPECTED}, got {ms}")))
        }
    }

    fn visit_str<E: de::Error>(self, text: &str) -> Result<Millis, E> {
        parse(text)
            .map(Millis)
            .ok_or_else(|| E::custom(format!("expected {EXPECTED}, got {:?}", truncate(text))))
    }
}

/// The times `openapi.json` allows (with `format: date-time`, which adds
/// only that the day exists): RFC 3339 with `T` and `Z` in capitals, years
/// 1971-9998, so that with any offset the instant is after 1970 and can be
/// written back. The parser takes more; this keeps the service to exactly
/// what the document says.
pub const DATE_TIME_PATTERN: &str = concat!(
    r"^(197[1-9]|19[89][0-9]|[2-8][0-9]{3}|9[0-8][0-9]{2}|99[0-8][0-9]|999[0-8])",
    r"-(0[1-9]|1[0-2])-(0[1-9]|[12][0-9]|3[01])",
    r"T([01][0-9]|2[0-3]):[0-5][0-9]:[0-5][0-9](\.[0-9]{1,9})?",
    r"(Z|[+-]([01][0-9]|2[0-3]):[0-5][0-9])$",
);

static DATE_TIME: std::sync::LazyLock<regex::Regex> =
    std::sync::LazyLock::new(|| regex::Regex::new(DATE_TIME_PATTERN).expect("a valid pattern"));

/// An RFC 3339 time as ms since the epoch; `None` if it is not one as
/// [`DATE_TIME_PATTERN`] says, or names a day that does not exist.
pub fn parse(text: &str) -> Option<u64> {
    if !DATE_TIME.is_match(text) {
        return None;
    }
    let at: jiff::Timestamp = text.parse().ok()?;
    u64::try_from(at.as_millisecond())
        .ok()
        .filter(|ms| *ms <= LATEST)
}

/// 9999-01-01T23:59:59.999Z: the latest instant a time of
/// [`DATE_TIME_PATTERN`] names (9998-12-31 at -23:59), well before the last
/// one the time library writes (late 9999), so every time taken in can be
/// given back.
pub const LATEST: u64 = 253_370_851_199_999;

/// Ms since the epoch as RFC 3339 in UTC, with milliseconds only when
/// there are some.
pub fn format(ms: u64) -> String {
    i64::try_from(ms)
        .ok()
        .and_then(|ms| jiff::Timestamp::from_millisecond(ms).ok())
        .map_or_else(|| ms.to_string(), |at| at.to_string())
}

/// At most 64 characters of a client's text, for an error message.
fn truncate(text: &str) -> String {
    text.chars().take(64).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn strings_with_any_offset_and_integers_mean_the_same_instant() {
        let utc = parse("2026-11-23T10:00:00Z").unwrap();
        assert_eq!(parse("2026-11-23T18:00:00+08:00"), Some(utc));
        assert_eq!(parse("2026-11-23T10:00:00.250Z"), Some(utc + 250));
        assert_eq!(parse("2026-11-23T10:00:00-00:00"), Some(utc));
        assert_eq!(parse("2026-11-23T10:00:00.123456789Z"), Some(utc + 123));
        assert!(parse("1971-01-01T00:00:00+23:59").is_some());
        assert!(parse("9998-12-31T23:59:59.999-23:59").is_some());
        let read: Millis = serde_json::from_str(&utc.to_string()).unwrap();
        assert_eq!(read, Millis(utc));
        let read: Millis = serde_json::from_str(&format!("{utc}.0")).unwrap();
        assert_eq!(read, Millis(utc));
        let read: Millis = serde_json::from_str("\"2026-11-23T10:00:00Z\"").unwrap();
        assert_eq!(read, Millis(utc));
        assert_eq!(format(utc), "2026-11-23T10:00:00Z");
        assert_eq!(format(utc + 250), "2026-11-23T10:00:00.25Z");
    }

    #[test]
    fn anything_else_is_refused_saying_what_a_time_is() {
        for bad in [
            "253370851200000",
            "\"9999-01-01T00:00:00Z\"",
            "\"1970-06-01T00:00:00Z\"",
            "\"2026-11-23t10:00:00z\"",
            "\"2026-11-23T10:00Z\"",
            "\"2026-11-23T10:00:00+08\"",
            "\"2026-02-30T10:00:00Z\"",
            "\"tomorrow\"",
            "\"2026-13-01T00:00:00Z\"",
            "-5",
            "1.5",
            "-1.0",
            "true",
            "\"1969-12-31T23:59:59Z\"",
        ] {
            let err = serde_json::from_str::<Millis>(bad).unwrap_err().to_string();
            assert!(err.contains("RFC 3339"), "{bad}: {err}");
        }
    }
}
