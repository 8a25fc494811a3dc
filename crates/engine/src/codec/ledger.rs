//! A sharded sale's transfers as its scripts write them: the open
//! transfer in the sale's hash (`xopen`), the ledger's entries, and what
//! each transfer step (`lua/shard_*.lua`) answers.

use crate::error::{Error, Result};
use crate::event::StreamEntry;

/// Where a transfer takes units from.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Source {
    Pool,
    Shard(usize),
}

/// The transfer open on a sale: `<t>|<from>|<to>|<units>`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Open {
    pub number: u64,
    pub from: Source,
    pub to: usize,
    /// From the pool: the units taken. From a shard: the units asked (it
    /// may have fewer; what it gave is its `xout_n`).
    pub units: u64,
}

impl Open {
    /// Reads `<t>|<from>|<to>|<units>`, as `shard_begin.lua` writes it.
    pub fn read(text: &str) -> Option<Self> {
        let mut parts = text.split('|');
        let number = parts.next()?.parse().ok()?;
        let from = match parts.next()? {
            "p" => Source::Pool,
            shard => Source::Shard(shard.parse().ok()?),
        };
        let to = parts.next()?.parse().ok()?;
        let units = parts.next()?.parse().ok()?;
        Some(Self {
            number,
            from,
            to,
            units,
        })
    }
}

impl Source {
    /// As the transfer scripts take it: `p` for the pool, else the shard's
    /// index.
    pub fn arg(self) -> String {
        match self {
            Self::Pool => "p".to_owned(),
            Self::Shard(j) => j.to_string(),
        }
    }
}

/// One transfer of the ledger.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Transfer {
    /// Its number, from 1.
    pub number: u64,
    /// The shard index it took from; `None` for the pool.
    pub from: Option<usize>,
    /// The shard index it gave to.
    pub to: usize,
    /// Units moved.
    pub units: u64,
    /// Fence of the refiller that ended it.
    pub fence: u64,
}

impl Transfer {
    /// One entry of the ledger stream: fields `t`, `from`, `to`, `n`,
    /// `fence`; `None` for an entry that is not one.
    pub(crate) fn read(entry: &StreamEntry) -> Option<Self> {
        let field = |name: &str| {
            entry
                .fields
                .iter()
                .find(|(k, _)| k == name)
                .map(|(_, v)| v.as_str())
        };
        Some(Self {
            number: field("t")?.parse().ok()?,
            from: match field("from")? {
                "p" => None,
                j => Some(j.parse().ok()?),
            },
            to: field("to")?.parse().ok()?,
            units: field("n")?.parse().ok()?,
            fence: field("fence")?.parse().ok()?,
        })
    }
}

/// What a transfer step answers in words.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum Step {
    /// `shard_begin`: this transfer was open already; finish it first.
    Found(Open),
    /// `shard_begin`: this transfer is begun.
    Begun(Open),
    /// `shard_begin`: the source has nothing to give.
    Empty,
    /// Done now (`ok`), or done before (`done`).
    Ok,
    Done,
    /// `shard_mark`: units came back since the count it was given.
    Returned,
    /// `shard_take`: a later transfer took from the shard since.
    Stale,
    /// A refiller with a later fence has acted on the sale.
    Fenced,
    /// No sale of this generation.
    NoSale,
}

impl Step {
    pub fn read(answer: &str) -> Result<Self> {
        let open = |text: &str| {
            Open::read(text)
                .ok_or_else(|| Error::Batch(format!("unreadable open transfer {text:?}")))
        };
        if let Some(text) = answer.strip_prefix("open:") {
            return Ok(Self::Found(open(text)?));
        }
        if let Some(text) = answer.strip_prefix("new:") {
            return Ok(Self::Begun(open(text)?));
        }
        Ok(match answer {
            "empty" => Self::Empty,
            "ok" => Self::Ok,
            "done" => Self::Done,
            "returned" => Self::Returned,
            "stale" => Self::Stale,
            "fenced" => Self::Fenced,
            "no_sale" => Self::NoSale,
            other => {
                return Err(Error::Batch(format!(
                    "unexpected transfer script answer: {other:?}"
                )));
            }
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn steps_and_open_transfers_read_as_written() {
        let open = Open {
            number: 4,
            from: Source::Shard(2),
            to: 0,
            units: 10,
        };
        assert_eq!(
            Step::read("open:4|2|0|10").unwrap(),
            Step::Found(open.clone())
        );
        assert_eq!(
            Step::read("new:5|p|1|3").unwrap(),
            Step::Begun(Open {
                number: 5,
                from: Source::Pool,
                to: 1,
                units: 3
            })
        );
        assert_eq!(Step::read("fenced").unwrap(), Step::Fenced);
        assert!(Step::read("open:4|2|0").is_err());
        assert!(Step::read("maybe").is_err());
        assert_eq!(Source::Shard(2).arg(), "2");
        assert_eq!(Source::Pool.arg(), "p");
    }
}
