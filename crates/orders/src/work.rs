//! What a persister knows and has left to do: the sales, the masters and
//! which of them rest, the sales to read whatever their news, and what it
//! committed since the last trim. Bookkeeping only, no Redis: the
//! persister locks it between awaits.

use std::collections::{HashMap, HashSet};
use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::failures::Failures;
use crate::news::{Follower, Topology};

/// Most sales one read takes from a master's news set, and most named.
pub(crate) const SALES_PER_READ: usize = 500;

/// A sale with commits is trimmed at least this often; sooner once a
/// batch's worth of entries was committed since.
const TRIM_EVERY: Duration = Duration::from_secs(300);

/// What a persister knows. Locked only between awaits.
#[derive(Default)]
pub(crate) struct State {
    /// The masters and their signal keys; `None` until read, or after a
    /// sign that they changed.
    pub topology: Option<Arc<Topology>>,
    /// Sales in the registry, by id.
    pub known: HashSet<String>,
    /// Place in the registry's log.
    pub follower: Follower,
    /// Sales to read whether or not they have news.
    pub to_read: HashSet<String>,
    /// Masters (by address) left out of the reads until then.
    pub resting: HashMap<String, Instant>,
    /// Masters (by address) with a read sent and not yet answered.
    pub reading: HashSet<String>,
    /// Look for abandoned batches in every sale at the next housekeeping.
    pub claim_all: bool,
    /// Look for ledgers no master's keys name (see
    /// `Topology::orphan_ledgers`) at the next housekeeping.
    pub look_for_orphans: bool,
    /// Such ledgers, drained at each housekeeping until empty.
    pub orphans: Vec<String>,
    /// When every sale is read next.
    pub next_full_read: Option<Instant>,
    /// When the cluster's masters are asked for next (see `watch_masters`).
    pub next_watch: Option<Instant>,
    /// Whether the first housekeeping (which trims every sale) ran.
    pub started: bool,
    /// Sales this persister committed to, with entries since their last
    /// trim and when that was.
    pub committed: HashMap<String, (usize, Instant)>,
    /// How housekeeping's steps log while they keep failing.
    pub failing: Steps,
}

/// Housekeeping's steps that can fail, each logged as [`Failures`] says.
pub(crate) struct Steps {
    pub registry: Failures,
    pub readers: Failures,
    pub claims: Failures,
}

impl Default for Steps {
    fn default() -> Self {
        Self {
            registry: Failures::new("learning of new sales"),
            readers: Failures::new("looking at the other persisters"),
            claims: Failures::new("taking over abandoned batches"),
        }
    }
}

impl State {
    /// Reads every known sale at the next rounds: a signal may be lost.
    pub fn read_every_sale(&mut self) {
        let all: Vec<String> = self.known.iter().cloned().collect();
        self.to_read.extend(all);
    }

    /// Per master, `None` if it is resting or its last read is still
    /// unanswered, else up to [`SALES_PER_READ`] sales to read there
    /// whatever their news; and whether a master to read has more of them
    /// left. A sale whose master is left out, or that no master serves now,
    /// stays to be read later.
    pub fn take_named(&mut self, topology: &Topology) -> (Vec<Option<Vec<String>>>, bool) {
        let now = Instant::now();
        let mut named: Vec<Option<Vec<String>>> = (0..topology.len())
            .map(|i| {
                let addr = topology.addr(i);
                let resting = self.resting.get(&addr);
                (resting.is_none_or(|until| *until <= now) && !self.reading.contains(&addr))
                    .then(Vec::new)
            })
            .collect();
        let (mut taken, mut more) = (Vec::new(), false);
        for sale in &self.to_read {
            if let Some(Some(list)) = topology.of(sale).map(|i| &mut named[i]) {
                if list.len() < SALES_PER_READ {
                    list.push(sale.clone());
                    taken.push(sale.clone());
                } else {
                    more = true;
                }
            }
        }
        for sale in taken {
            self.to_read.remove(&sale);
        }
        (named, more)
    }

    /// Counts `entries` committed to sale `sale`.
    pub fn committed(&mut self, sale: String, entries: usize) {
        self.committed.entry(sale).or_insert((0, Instant::now())).0 += entries;
    }

    /// The sales to trim now, counted as trimmed: `all` known, else those
    /// committed to a `batch`'s worth since their last trim, or to at all
    /// [`TRIM_EVERY`] ago.
    pub fn due_for_trim(&mut self, batch: usize, all: bool) -> Vec<String> {
        let now = Instant::now();
        let due: Vec<String> = if all {
            self.known.iter().cloned().collect()
        } else {
            self.committed
                .iter()
                .filter(|(_, (n, at))| *n >= batch || (*n > 0 && now >= *at + TRIM_EVERY))
                .map(|(sale, _)| sale.clone())
                .collect()
        };
        for sale in &due {
            self.committed.insert(sale.clone(), (0, now));
        }
        due
    }
}
