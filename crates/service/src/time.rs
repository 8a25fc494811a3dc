//! Times in the API: RFC 3339 strings out (`2026-11-23T10:00:00Z`); in,
//! RFC 3339 strings with any offset or integer milliseconds since the
//! Unix epoch, as clients of JSON APIs send either.

use serde::de::{self, Deserializer, Visitor};

/// What a time field accepts, said in every error about one.
pub const EXPECTED: &str =
    "an RFC 3339 time such as \"2026-11-23T10:00:00Z\" or milliseconds since 1970-01-01 UTC";

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
                "expected {EXPECTED}, got {ms}, after the year 9999"
            )));
        }
        Ok(Millis(ms))
    }

    fn visit_i64<E: de::Error>(self, ms: i64) -> Result<Millis, E> {
        u64::try_from(ms)
            .map(Millis)
            .map_err(|_| E::custom(format!("expected {EXPECTED}, got {ms}, before 1970")))
    }

    fn visit_str<E: de::Error>(self, text: &str) -> Result<Millis, E> {
        parse(text)
            .map(Millis)
            .ok_or_else(|| E::custom(format!("expected {EXPECTED}, got {:?}", truncate(text))))
    }
}

/// An RFC 3339 time as ms since the epoch; `None` if it is not one or is
/// before 1970.
pub fn parse(text: &str) -> Option<u64> {
    let at: jiff::Timestamp = text.parse().ok()?;
    u64::try_from(at.as_millisecond())
        .ok()
        .filter(|ms| *ms <= LATEST)
}

/// 9999-12-31T23:59:59.999Z: the last time RFC 3339 can write, so every
/// time taken in can be given back.
const LATEST: u64 = 253_402_300_799_999;

/// Ms since the epoch as RFC 3339 in UTC, with milliseconds only when
/// there are some.
pub fn format(ms: u64) -> String {
    i64::try_from(ms)
        .ok()
        .and_then(|ms| jiff::Timestamp::from_millisecond(ms).ok())
        .map_or_else(|| ms.to_string(), |at| at.to_string())
}

/// Serializes an optional ms time as an RFC 3339 string or null.
pub fn serialize_opt<S: serde::Serializer>(ms: &Option<u64>, s: S) -> Result<S::Ok, S::Error> {
    match ms {
        Some(ms) => s.serialize_str(&format(*ms)),
        None => s.serialize_none(),
    }
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
        let read: Millis = serde_json::from_str(&utc.to_string()).unwrap();
        assert_eq!(read, Millis(utc));
        let read: Millis = serde_json::from_str("\"2026-11-23T10:00:00Z\"").unwrap();
        assert_eq!(read, Millis(utc));
        assert_eq!(format(utc), "2026-11-23T10:00:00Z");
        assert_eq!(format(utc + 250), "2026-11-23T10:00:00.25Z");
    }

    #[test]
    fn anything_else_is_refused_saying_what_a_time_is() {
        for bad in [
            "253402300800000",
            "\"tomorrow\"",
            "\"2026-13-01T00:00:00Z\"",
            "-5",
            "1.5",
            "true",
            "\"1969-12-31T23:59:59Z\"",
        ] {
            let err = serde_json::from_str::<Millis>(bad).unwrap_err().to_string();
            assert!(err.contains("RFC 3339"), "{bad}: {err}");
        }
    }
}
