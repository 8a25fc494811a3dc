//! Body fields read as `openapi.json`, which is JSON Schema, says: a
//! whole number may be written `2.0`, and an optional field that is sent
//! holds a value (`null` is refused).

/// For an optional body field that, when sent, holds a value: absent is
/// `None` (with `#[serde(default)]`), `null` is refused as the wrong type,
/// as `openapi.json` gives such fields no null.
pub fn present<'de, D, T>(deserializer: D) -> Result<Option<T>, D::Error>
where
    D: serde::Deserializer<'de>,
    T: serde::Deserialize<'de>,
{
    T::deserialize(deserializer).map(Some)
}

/// A whole number that may also be written `2.0`: JSON Schema's integers
/// include numbers with a zero fraction, and `openapi.json` is JSON Schema.
pub fn whole<'de, D, T>(deserializer: D) -> Result<T, D::Error>
where
    D: serde::Deserializer<'de>,
    T: TryFrom<u64>,
{
    deserializer.deserialize_any(Whole(std::marker::PhantomData))
}

/// [`whole`] for an optional field, as [`present`]: absent is `None`,
/// `null` refused.
pub fn present_whole<'de, D, T>(deserializer: D) -> Result<Option<T>, D::Error>
where
    D: serde::Deserializer<'de>,
    T: TryFrom<u64>,
{
    whole(deserializer).map(Some)
}

struct Whole<T>(std::marker::PhantomData<T>);

impl<T: TryFrom<u64>> serde::de::Visitor<'_> for Whole<T> {
    type Value = T;

    fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
        f.write_str("a whole number, 0 or more")
    }

    fn visit_u64<E: serde::de::Error>(self, v: u64) -> Result<T, E> {
        T::try_from(v).map_err(|_| E::custom("the number is too large"))
    }

    fn visit_i64<E: serde::de::Error>(self, v: i64) -> Result<T, E> {
        match u64::try_from(v) {
            Ok(v) => self.visit_u64(v),
            Err(_) => Err(E::invalid_value(serde::de::Unexpected::Signed(v), &self)),
        }
    }

    fn visit_f64<E: serde::de::Error>(self, v: f64) -> Result<T, E> {
        // 2^64: the first float past u64.
        if v.fract() == 0.0 && (0.0..18_446_744_073_709_551_616.0).contains(&v) {
            self.visit_u64(v as u64)
        } else {
            Err(E::invalid_value(serde::de::Unexpected::Float(v), &self))
        }
    }
}
