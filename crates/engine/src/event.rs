//! The order events a sale's stream carries: the one place that knows
//! their format, for the engine and for the persister.
//!
//! An entry of a sale's stream is one of:
//! - a purchase: `b <generation>`, then one pair per order bought, in order:
//!   `<user> <qty>` or `<user> <qty>|<request id>`. Order `i` of entry
//!   `<ms>-<n>` has the id `<sale>-<generation>-<ms>-<n>-<i>`, and it is
//!   bought at `<ms>`.
//! - a change of state: `<paid|cancelled|expired> <generation>`, then one
//!   pair per order: `<ms>-<n>-<i> <user>|<qty>`;
//! - the entry that opens the stream when the sale is created: `o
//!   <generation>`, no order (see `lua/create_sale.lua`).
//!
//! Pairs are read in order and names repeat (a buyer may buy twice in one
//! batch), so entries are read as lists, never as maps.

use std::fmt;

use redis::Value;

use crate::error::{Error, Result};
use crate::order_id::OrderId;
use crate::state::OrderState;

/// One stream entry as Redis holds it: its id and its pairs, in order.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct StreamEntry {
    /// The entry id, `<ms>-<n>`.
    pub id: String,
    /// Its name/value pairs, in stream order (names can repeat).
    pub fields: Vec<(String, String)>,
}

impl StreamEntry {
    /// The entries of an `XRANGE` reply, or of one stream of an
    /// `XRANGE` or one stream of an `XREADGROUP` reply: `[[id, [name, value, …]], …]`.
    /// A deleted entry (no pairs) comes back with none.
    pub fn list(value: Value) -> Result<Vec<Self>> {
        let bad = |v: &dyn fmt::Debug| Error::Batch(format!("not a list of stream entries: {v:?}"));
        let items = match value {
            Value::Array(items) => items,
            Value::Nil => return Ok(Vec::new()),
            other => return Err(bad(&other)),
        };
        // Taken apart by value: a persister reads thousands of entries a
        // round, and each string moves out of the reply instead of a copy.
        items
            .into_iter()
            .map(|item| {
                let Value::Array(parts) = item else {
                    return Err(bad(&item));
                };
                let mut parts = parts.into_iter();
                let id = parts
                    .next()
                    .map(owned_text)
                    .ok_or_else(|| bad(&"no id"))??;
                let fields = match parts.next() {
                    Some(Value::Array(flat)) => {
                        let mut fields = Vec::with_capacity(flat.len() / 2);
                        let mut flat = flat.into_iter();
                        while let Some(name) = flat.next() {
                            let value = flat.next().ok_or_else(|| bad(&"odd field list"))?;
                            fields.push((owned_text(name)?, owned_text(value)?));
                        }
                        fields
                    }
                    _ => Vec::new(),
                };
                Ok(Self { id, fields })
            })
            .collect()
    }

    /// Every entry of stream `key` from `from` on (an `XRANGE` start: `-`,
    /// an id, or `(id` for after it), read in pages.
    pub async fn read(
        conn: &mut (impl redis::aio::ConnectionLike + Send + Sync),
        key: &str,
        from: &str,
    ) -> Result<Vec<Self>> {
        Self::range(conn, key, from, "+").await
    }

    /// The entries of stream `key` from id `from` to id `to`, both
    /// included, read in pages.
    pub async fn range(
        conn: &mut (impl redis::aio::ConnectionLike + Send + Sync),
        key: &str,
        from: &str,
        to: &str,
    ) -> Result<Vec<Self>> {
        use redis::AsyncCommands;
        const PAGE: usize = 10_000;
        let mut all = Vec::new();
        let mut start = from.to_owned();
        loop {
            let page: Value = conn.xrange_count(key, &start, to, PAGE).await?;
            let page = Self::list(page)?;
            let full = page.len() == PAGE;
            if let Some(last) = page.last() {
                start = format!("({}", last.id);
            }
            all.extend(page);
            if !full {
                return Ok(all);
            }
        }
    }

    /// How many entries stream `key` holds, less the entry that opened it
    /// when its sale was created, which carries no order.
    pub async fn count(
        conn: &mut (impl redis::aio::ConnectionLike + Send + Sync),
        key: &str,
    ) -> Result<u64> {
        let (first, len): (Value, u64) = redis::pipe()
            .xrange_count(key, "-", "+", 1)
            .xlen(key)
            .query_async(conn)
            .await?;
        let opened = Self::list(first)?
            .first()
            .is_some_and(|e| e.fields.first().is_some_and(|(kind, _)| kind == "o"));
        Ok(len - u64::from(opened))
    }

    /// The entry's time (ms since the Unix epoch).
    pub fn ms(&self) -> Option<u64> {
        self.id.split('-').next()?.parse().ok()
    }
}

/// A reply string, moved out of the reply.
fn owned_text(value: Value) -> Result<String> {
    match value {
        Value::BulkString(bytes) => String::from_utf8(bytes)
            .map_err(|e| Error::Batch(format!("stream entry not UTF-8: {e}"))),
        Value::SimpleString(s) => Ok(s),
        other => Err(Error::Batch(format!("not a stream string: {other:?}"))),
    }
}

/// One order event, decoded from a stream entry.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Event {
    /// The order id, as [`OrderId`] formats it.
    pub order_id: String,
    /// The sale the order belongs to.
    pub sale_id: String,
    /// The sale's generation (creation time in ms) the order was bought in.
    pub generation: i64,
    /// The buyer.
    pub user_id: String,
    /// Units of the order.
    pub quantity: i64,
    /// Only purchases carry it.
    pub request_id: Option<String>,
    /// `PendingPayment` for a purchase; the new state for pay, cancel, expiry.
    pub state: OrderState,
    /// When the order was bought (ms since the Unix epoch).
    pub created_ms: i64,
    /// When this event happened (ms since the Unix epoch).
    pub at_ms: i64,
}

impl Event {
    /// The order events entry `entry` of sale `sale_id`'s stream carries;
    /// none for an entry that is not an order event.
    ///
    /// ```
    /// use seckill_engine::{Event, OrderState, StreamEntry};
    /// let entry = StreamEntry {
    ///     id: "1795392000500-0".into(),
    ///     fields: vec![("b".into(), "1795392000000".into()), ("alice".into(), "2|r-1".into())],
    /// };
    /// let events = Event::decode("drop", &entry);
    /// assert_eq!(events[0].order_id, "drop-1795392000000-1795392000500-0-0");
    /// assert_eq!(events[0].request_id.as_deref(), Some("r-1"));
    /// assert_eq!(events[0].state, OrderState::PendingPayment);
    /// ```
    pub fn decode(sale_id: &str, entry: &StreamEntry) -> Vec<Self> {
        let fields: Vec<&str> = entry
            .fields
            .iter()
            .flat_map(|(name, value)| [name.as_str(), value.as_str()])
            .collect();
        let mut events = Vec::new();
        decode_into(sale_id, &entry.id, &fields, &mut events);
        events
    }

    /// The order events of stream entries flattened to text, appended to
    /// `events`; answers the first entry's id, `None` for no entries.
    ///
    /// The text has one entry per line: its id, then its names and values,
    /// each after one space. Nothing a sale's stream holds contains a space
    /// or a newline (ids are `A-Z a-z 0-9 _ -`, the rest numbers and `|`),
    /// so a script can flatten a read with two `table.concat`s, and a
    /// reader then parses one string instead of seven reply values per
    /// entry: for the persister, most of its CPU per order.
    ///
    /// ```
    /// use seckill_engine::Event;
    /// let mut events = Vec::new();
    /// let text = "1795392000500-0 b 1795392000000 alice 2|r-1\n1795392000501-0 b 1795392000000 bob 1";
    /// assert_eq!(Event::decode_lines("drop", text, &mut events), Some("1795392000500-0"));
    /// assert_eq!(events.len(), 2);
    /// assert_eq!(events[1].order_id, "drop-1795392000000-1795392000501-0-0");
    /// ```
    pub fn decode_lines<'a>(
        sale_id: &str,
        text: &'a str,
        events: &mut Vec<Self>,
    ) -> Option<&'a str> {
        let mut first = None;
        let mut fields = Vec::new();
        for line in text.split('\n').filter(|l| !l.is_empty()) {
            let mut words = line.split(' ');
            let Some(id) = words.next() else { continue };
            first.get_or_insert(id);
            fields.clear();
            fields.extend(words);
            decode_into(sale_id, id, &fields, events);
        }
        first
    }
}

/// Appends the order events of entry `entry_id` of sale `sale_id`'s stream,
/// whose names and values are `fields` in turn; none for an entry that is
/// not an order event.
fn decode_into(sale_id: &str, entry_id: &str, fields: &[&str], events: &mut Vec<Event>) {
    let [kind, generation, pairs @ ..] = fields else {
        return;
    };
    let Ok(generation) = generation.parse::<u64>() else {
        return;
    };
    // Checked once per entry: every order of it shares the id up to its index.
    let Some(at_ms) = entry_id
        .split_once('-')
        .filter(|(_, seq)| seq.parse::<u64>().is_ok())
        .and_then(|(ms, _)| ms.parse::<u64>().ok())
    else {
        return;
    };
    let event = |order_id: String,
                 created_ms: u64,
                 user: &str,
                 quantity: &str,
                 request: Option<&str>,
                 state| {
        let quantity: i64 = quantity.parse().ok().filter(|q| *q > 0)?;
        Some(Event {
            created_ms: created_ms as i64,
            order_id,
            sale_id: sale_id.to_owned(),
            generation: generation as i64,
            user_id: user.to_owned(),
            quantity,
            request_id: request.map(str::to_owned),
            state,
            at_ms: at_ms as i64,
        })
    };
    let pairs = pairs.chunks_exact(2).map(|pair| (pair[0], pair[1]));
    if *kind == "b" {
        let stem = format!("{sale_id}-{generation}-{entry_id}-");
        events.extend(pairs.enumerate().filter_map(|(index, (user, value))| {
            let (quantity, request) = match value.split_once('|') {
                Some((q, r)) => (q, Some(r)),
                None => (value, None),
            };
            let mut order_id = String::with_capacity(stem.len() + 4);
            order_id.push_str(&stem);
            // Writing to a String cannot fail.
            let _ = fmt::Write::write_fmt(&mut order_id, format_args!("{index}"));
            event(
                order_id,
                at_ms,
                user,
                quantity,
                request,
                OrderState::PendingPayment,
            )
        }));
        return;
    }
    let Some(state) = OrderState::parse(kind).filter(|s| *s != OrderState::PendingPayment) else {
        return;
    };
    events.extend(pairs.filter_map(|(local, value)| {
        let order = OrderId::from_local(sale_id, generation, local)?;
        let (user, quantity) = value.split_once('|')?;
        event(order.to_string(), order.ms, user, quantity, None, state)
    }));
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_batch_entry_carries_one_event_per_order_even_for_the_same_buyer() {
        let entry = StreamEntry {
            id: "5-1".into(),
            fields: [("b", "9"), ("al", "1"), ("al", "2|r")]
                .map(|(k, v)| (k.to_owned(), v.to_owned()))
                .to_vec(),
        };
        let events = Event::decode("s", &entry);
        let ids: Vec<&str> = events.iter().map(|e| e.order_id.as_str()).collect();
        assert_eq!(ids, ["s-9-5-1-0", "s-9-5-1-1"]);
        assert_eq!(events[1].quantity, 2);
        let settled = StreamEntry {
            id: "8-0".into(),
            fields: [("expired", "9"), ("5-1-1", "al|2")]
                .map(|(k, v)| (k.to_owned(), v.to_owned()))
                .to_vec(),
        };
        let events = Event::decode("s", &settled);
        assert_eq!(events[0].order_id, "s-9-5-1-1");
        assert_eq!(events[0].state, OrderState::Expired);
        assert_eq!((events[0].created_ms, events[0].at_ms), (5, 8));
    }

    #[test]
    fn entries_flattened_to_lines_decode_as_the_entries_do() {
        let entries = [
            ("5-1", vec!["b", "9", "al", "1", "al", "2|r"]),
            ("6-0", vec![]),
            ("7-0", vec!["b", "9", "bo", "3|q-1"]),
            (
                "8-0",
                vec!["expired", "9", "5-1-1", "al|2", "7-0-0", "bo|3"],
            ),
            ("9-0", vec!["restock", "4"]),
        ];
        let mut text = String::new();
        let mut expected = Vec::new();
        for (id, flat) in &entries {
            let entry = StreamEntry {
                id: id.to_string(),
                fields: flat
                    .chunks(2)
                    .map(|p| (p[0].to_owned(), p[1].to_owned()))
                    .collect(),
            };
            expected.extend(Event::decode("s", &entry));
            text.push_str(
                &[*id]
                    .into_iter()
                    .chain(flat.iter().copied())
                    .collect::<Vec<_>>()
                    .join(" "),
            );
            text.push('\n');
        }
        let mut events = Vec::new();
        assert_eq!(Event::decode_lines("s", &text, &mut events), Some("5-1"));
        assert_eq!(events, expected);
        assert_eq!(events.len(), 5);
        assert_eq!(Event::decode_lines("s", "", &mut events), None);
    }
}
