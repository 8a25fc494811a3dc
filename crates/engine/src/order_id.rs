//! [`OrderId`]: the id of an order, `<sale>-<generation>-<ms>-<n>-<i>`:
//! order `i` of entry `<ms>-<n>` of the sale's stream (see `event`), and
//! the stream entry ids it is made of.

use std::fmt;

use crate::error::{Error, Result};
use crate::keys::check_sale_key;

/// Longest order id this system makes, in bytes.
pub const MAX_ORDER_ID_LEN: usize = 160;

/// Whether `s` is written as an order id may be: 1-[`MAX_ORDER_ID_LEN`]
/// bytes of `[A-Za-z0-9_~-]` (`~` joins a shard's tag to its sale). Such a
/// string that names no order is an unknown order, not a bad request.
pub fn is_order_id_shaped(s: &str) -> bool {
    !s.is_empty()
        && s.len() <= MAX_ORDER_ID_LEN
        && s.bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'_' | b'~' | b'-'))
}

/// An order id: `<sale>-<generation>-<ms>-<n>-<i>`, order `i` of the
/// purchase entry `<ms>-<n>` of one generation of a sale.
///
/// ```
/// let id: seckill_engine::OrderId = "drop-1-1795392000000-1795392000123-0-4".parse().unwrap();
/// assert_eq!(id.sale, "drop-1");
/// assert_eq!(id.to_string(), "drop-1-1795392000000-1795392000123-0-4");
/// ```
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct OrderId {
    /// The sale id.
    pub sale: String,
    /// The sale's generation (its creation time in ms), which tells apart
    /// two sales that reused an id.
    pub generation: u64,
    /// Time of the purchase entry, ms since the Unix epoch.
    pub ms: u64,
    /// Sequence of the entry within its millisecond.
    pub seq: u64,
    /// Place of the order within its entry.
    pub index: u32,
}

impl OrderId {
    /// Bounds, in byte order, of the ids of sale `sale`'s orders (of one
    /// generation, if given): each of them is `> .0` and `< .1`. Ids of
    /// other sales can fall between (sale `a` holds `a-b`'s range), so
    /// a range query still filters on the sale.
    ///
    /// ```
    /// use seckill_engine::OrderId;
    /// assert_eq!(OrderId::bounds("drop", Some(2)), ("drop-2-".to_owned(), "drop-2.".to_owned()));
    /// ```
    pub fn bounds(sale: &str, generation: Option<u64>) -> (String, String) {
        let stem = match generation {
            Some(g) => format!("{sale}-{g}"),
            None => sale.to_owned(),
        };
        // '.' is the byte after '-'.
        (format!("{stem}-"), format!("{stem}."))
    }

    /// The order's key within its sale: `<ms>-<n>-<i>`.
    pub(crate) fn local(&self) -> String {
        format!("{}-{}-{}", self.ms, self.seq, self.index)
    }

    /// Its purchase entry's id: `<ms>-<n>`.
    pub(crate) fn entry(&self) -> String {
        format!("{}-{}", self.ms, self.seq)
    }

    /// Order `index` of stream entry `entry` (`<ms>-<n>`) of a sale generation.
    pub(crate) fn in_entry(sale: &str, generation: u64, entry: &str, index: u32) -> Option<Self> {
        let (ms, seq) = entry.split_once('-')?;
        Some(Self {
            sale: sale.to_owned(),
            generation,
            ms: ms.parse().ok()?,
            seq: seq.parse().ok()?,
            index,
        })
    }

    /// The order `local` (`<ms>-<n>-<i>`) of a sale generation.
    pub(crate) fn from_local(sale: &str, generation: u64, local: &str) -> Option<Self> {
        let (entry, index) = local.rsplit_once('-')?;
        Self::in_entry(sale, generation, entry, index.parse().ok()?)
    }
}

impl fmt::Display for OrderId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{}-{}-{}-{}-{}",
            self.sale, self.generation, self.ms, self.seq, self.index
        )
    }
}

impl std::str::FromStr for OrderId {
    type Err = Error;

    fn from_str(s: &str) -> Result<Self> {
        let invalid = || Error::Invalid {
            field: "order_id",
            reason: "not an order id of this system".to_owned(),
        };
        if s.len() > MAX_ORDER_ID_LEN {
            return Err(invalid());
        }
        let mut parts = s.rsplitn(5, '-');
        let mut number = || -> Result<u64> {
            let part = parts.next().ok_or_else(invalid)?;
            if part.is_empty() || !part.bytes().all(|b| b.is_ascii_digit()) {
                return Err(invalid());
            }
            part.parse().map_err(|_| invalid())
        };
        let index = u32::try_from(number()?).map_err(|_| invalid())?;
        let seq = number()?;
        let ms = number()?;
        let generation = number()?;
        let sale = parts.next().ok_or_else(invalid)?;
        check_sale_key("order_id", sale).map_err(|_| invalid())?;
        Ok(Self {
            sale: sale.to_owned(),
            generation,
            ms,
            seq,
            index,
        })
    }
}

/// The smallest stream entry id after `id` (`<ms>-<n>`): where a range that
/// keeps nothing up to `id` starts.
pub fn next_entry_id(id: &str) -> String {
    let (ms, seq) = entry_number(id);
    match seq.checked_add(1) {
        Some(seq) => format!("{ms}-{seq}"),
        None => format!("{}-0", ms.saturating_add(1)),
    }
}

/// A stream entry id (`<ms>-<n>`) as numbers, for comparing.
pub fn entry_number(id: &str) -> (u64, u64) {
    let (ms, seq) = id.split_once('-').unwrap_or((id, "0"));
    (ms.parse().unwrap_or(0), seq.parse().unwrap_or(0))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn order_ids_round_trip_and_name_their_sale() {
        let id: OrderId = "drop-1-17-1795392000000-3-12".parse().unwrap();
        assert_eq!(id.sale, "drop-1");
        assert_eq!(
            (id.generation, id.ms, id.seq, id.index),
            (17, 1795392000000, 3, 12)
        );
        assert_eq!(id.to_string(), "drop-1-17-1795392000000-3-12");
        assert_eq!(id.local(), "1795392000000-3-12");
        for bad in [
            "a-1-2-3",
            "a-b-1-2-3",
            "-1-2-3-4",
            "a-1-2-3-",
            "x y-1-2-3-4",
            "",
        ] {
            assert!(bad.parse::<OrderId>().is_err(), "{bad}");
        }
    }
}
