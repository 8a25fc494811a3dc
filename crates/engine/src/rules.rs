//! Purchase rules: what a purchase must meet besides stock left and a new
//! request id. This module is each rule's one home: its name in the API,
//! JSON and SQL, its bounds, its field in the sale's Redis hash, its place
//! among the purchase scripts' arguments, its refusal and that refusal's
//! code and words. The service, `openapi.json`, the SQL store and the
//! restore read the rules from here by [`Rule::ALL`].
//!
//! Adding a rule is a variant of [`Rule`] with its arms below, its check
//! in the purchase scripts (`purchase.lua`, `purchase_batch.lua`) and, for
//! the classic baselines, in [`Rules::broken`], and its test in
//! `tests/rules.rs`.

use std::fmt;

use serde::de::{self, MapAccess, Visitor};
use serde::ser::SerializeMap;
use serde::{Deserialize, Deserializer, Serialize, Serializer};

use crate::error::{Error, Result};

/// Most units one sale may hold, and so the most one buyer may be allowed.
pub const MAX_STOCK: u64 = 1_000_000_000;

/// One purchase rule a sale may have.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Rule {
    /// The most units one buyer may hold: refused as `limit_exceeded`.
    PerUserLimit,
    /// No purchase before this instant: refused as `not_started`.
    StartsAt,
    /// No purchase from this instant on: refused as `ended`.
    EndsAt,
}

/// What a rule's value is, which decides how it is written in the API.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RuleKind {
    /// A whole number from 1 to `max`.
    Count {
        /// The largest value allowed.
        max: u64,
    },
    /// An instant, ms since the Unix epoch (RFC 3339 in the API).
    Instant,
}

impl Rule {
    /// Every rule, in the order of [`Rules`]' storage and of the scripts'
    /// arguments.
    pub const ALL: [Rule; 3] = [Self::PerUserLimit, Self::StartsAt, Self::EndsAt];

    /// Its name in the API and in a sale's JSON: `per_user_limit`.
    pub fn name(self) -> &'static str {
        match self {
            Self::PerUserLimit => "per_user_limit",
            Self::StartsAt => "starts_at",
            Self::EndsAt => "ends_at",
        }
    }

    /// Its name where values are plain numbers ([`Rules`]' serde form, the
    /// dashboard, SQL): the name, with `_ms` for an instant.
    pub fn key(self) -> &'static str {
        KEYS[self.index()]
    }

    /// What its value is.
    pub fn kind(self) -> RuleKind {
        match self {
            Self::PerUserLimit => RuleKind::Count { max: MAX_STOCK },
            Self::StartsAt | Self::EndsAt => RuleKind::Instant,
        }
    }

    /// What it means, in plain words (the API's description of it).
    pub fn about(self) -> &'static str {
        match self {
            Self::PerUserLimit => "the most units one buyer may hold",
            Self::StartsAt => "no purchase before this time",
            Self::EndsAt => "no purchase from this time on (moved to when a sale is ended early)",
        }
    }

    /// The stable code of a purchase it refuses: `limit_exceeded`.
    pub fn code(self) -> &'static str {
        match self {
            Self::PerUserLimit => "limit_exceeded",
            Self::StartsAt => "not_started",
            Self::EndsAt => "ended",
        }
    }

    /// Why it refused a purchase, in plain words.
    pub fn refusal(self) -> &'static str {
        match self {
            Self::PerUserLimit => "this user has bought the most units allowed",
            Self::StartsAt => "the sale has not started",
            Self::EndsAt => "the sale has ended",
        }
    }

    /// Its field in the sale's Redis hash.
    pub(crate) fn field(self) -> &'static str {
        match self {
            Self::PerUserLimit => "limit",
            Self::StartsAt => "start",
            Self::EndsAt => "end",
        }
    }

    /// Whether the purchase scripts take it as an argument. The end is
    /// read from the hash instead: ending a sale early moves it, and a
    /// purchaser made before must see that.
    fn is_argument(self) -> bool {
        !matches!(self, Self::EndsAt)
    }

    /// The rule a purchase script's refusal names, by the word it answers.
    pub(crate) fn from_answer(word: &str) -> Option<Self> {
        Some(match word {
            "limit" => Self::PerUserLimit,
            "not_started" => Self::StartsAt,
            "ended" => Self::EndsAt,
            _ => return None,
        })
    }

    /// Its place in [`Rule::ALL`], which lists the variants in order.
    fn index(self) -> usize {
        self as usize
    }
}

/// [`Rule::key`] of each rule, in [`Rule::ALL`]'s order.
const KEYS: [&str; Rule::ALL.len()] = ["per_user_limit", "starts_at_ms", "ends_at_ms"];

impl fmt::Display for Rule {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// A sale's rules: each [`Rule`] with its value, or none.
///
/// ```
/// use seckill_engine::{Rule, Rules};
/// let rules = Rules::default().with(Rule::PerUserLimit, Some(2));
/// assert_eq!(rules.per_user_limit(), Some(2));
/// assert_eq!(rules.broken(0, Some(3)), Some(Rule::PerUserLimit));
/// ```
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Rules([Option<u64>; Rule::ALL.len()]);

impl Rules {
    /// The value of `rule`, if the sale has it.
    pub fn get(&self, rule: Rule) -> Option<u64> {
        self.0[rule.index()]
    }

    /// These rules with `rule` set to `value` (`None`: without it).
    #[must_use]
    pub fn with(mut self, rule: Rule, value: Option<u64>) -> Self {
        self.0[rule.index()] = value;
        self
    }

    /// The most units one buyer may hold.
    pub fn per_user_limit(&self) -> Option<u64> {
        self.get(Rule::PerUserLimit)
    }

    /// The start, ms since the Unix epoch.
    pub fn starts_at_ms(&self) -> Option<u64> {
        self.get(Rule::StartsAt)
    }

    /// The end, ms since the Unix epoch.
    pub fn ends_at_ms(&self) -> Option<u64> {
        self.get(Rule::EndsAt)
    }

    /// The first rule a purchase breaks at `now_ms` (ms since the epoch)
    /// by which its buyer would hold `held` units (`None`: not known yet,
    /// the clock's rules alone). The classic baselines check here; the
    /// purchase scripts check the same in Redis.
    pub fn broken(&self, now_ms: u64, held: Option<u64>) -> Option<Rule> {
        Rule::ALL.into_iter().find(|&rule| {
            let Some(value) = self.get(rule) else {
                return false;
            };
            match rule {
                Rule::PerUserLimit => held.is_some_and(|held| held > value),
                Rule::StartsAt => now_ms < value,
                Rule::EndsAt => now_ms >= value,
            }
        })
    }

    /// Every value within its rule's bounds, and the rules agreeing.
    pub(crate) fn validate(&self) -> Result<()> {
        for rule in Rule::ALL {
            if let (Some(value), RuleKind::Count { max }) = (self.get(rule), rule.kind())
                && !(1..=max).contains(&value)
            {
                return Err(Error::Invalid {
                    field: rule.name(),
                    reason: format!("must be 1-{max} (omit it for none)"),
                });
            }
        }
        if let (Some(start), Some(end)) = (self.starts_at_ms(), self.ends_at_ms())
            && end <= start
        {
            return Err(Error::Inconsistent {
                field: Rule::EndsAt.name(),
                reason: format!("must be after {}", Rule::StartsAt.name()),
            });
        }
        Ok(())
    }

    /// The sale hash's fields, every rule with `0` for none, so that
    /// writing them replaces what a hash held.
    pub(crate) fn fields(&self) -> impl Iterator<Item = (&'static str, u64)> + '_ {
        Rule::ALL
            .into_iter()
            .map(|rule| (rule.field(), self.get(rule).unwrap_or(0)))
    }

    /// Read back from a sale hash's fields, by `field(name)`; `0` is none.
    pub(crate) fn from_fields(field: impl Fn(&str) -> Option<u64>) -> Self {
        Rule::ALL.into_iter().fold(Self::default(), |rules, rule| {
            rules.with(rule, field(rule.field()).filter(|v| *v > 0))
        })
    }

    /// The purchase scripts' rule arguments: each rule they take, in
    /// [`Rule::ALL`]'s order, `0` for none, up to the last one the sale
    /// has (a sale without rules passes none: each argument costs Redis
    /// time on every purchase).
    pub(crate) fn arguments(&self) -> Vec<u64> {
        let taken: Vec<Option<u64>> = Rule::ALL
            .into_iter()
            .filter(|r| r.is_argument())
            .map(|r| self.get(r))
            .collect();
        let used = taken.iter().rposition(Option::is_some).map_or(0, |i| i + 1);
        taken[..used].iter().map(|v| v.unwrap_or(0)).collect()
    }
}

/// A map of [`Rule::key`] to a number or null, every rule present.
impl Serialize for Rules {
    fn serialize<S: Serializer>(&self, serializer: S) -> std::result::Result<S::Ok, S::Error> {
        let mut map = serializer.serialize_map(Some(Rule::ALL.len()))?;
        for rule in Rule::ALL {
            map.serialize_entry(rule.key(), &self.get(rule))?;
        }
        map.end()
    }
}

/// The map [`Serialize`] writes; an absent key is a rule the sale lacks,
/// an unknown key an error.
impl<'de> Deserialize<'de> for Rules {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> std::result::Result<Self, D::Error> {
        deserializer.deserialize_map(RulesVisitor)
    }
}

struct RulesVisitor;

impl<'de> Visitor<'de> for RulesVisitor {
    type Value = Rules;

    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("a map of purchase rules")
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> std::result::Result<Rules, A::Error> {
        let mut rules = Rules::default();
        while let Some(key) = map.next_key::<String>()? {
            let Some(rule) = Rule::ALL.into_iter().find(|r| r.key() == key) else {
                return Err(de::Error::unknown_field(&key, &KEYS));
            };
            rules = rules.with(rule, map.next_value()?);
        }
        Ok(rules)
    }
}

impl Rules {
    /// As one JSON object of [`Rule::key`]s, as SQL stores it.
    pub fn to_json(&self) -> String {
        serde_json::to_string(self).unwrap_or_else(|_| "{}".to_owned())
    }
}

/// Read from [`Rules::to_json`]'s JSON (what SQL stores).
impl TryFrom<String> for Rules {
    type Error = serde_json::Error;

    fn try_from(json: String) -> std::result::Result<Self, Self::Error> {
        serde_json::from_str(&json)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn arguments_stop_at_the_last_rule_the_sale_has() {
        let none = Rules::default();
        assert!(none.arguments().is_empty());
        let limit = none.with(Rule::PerUserLimit, Some(3));
        assert_eq!(limit.arguments(), [3]);
        let start = none.with(Rule::StartsAt, Some(9));
        assert_eq!(start.arguments(), [0, 9]);
        // The end is read from the hash, never passed.
        assert!(none.with(Rule::EndsAt, Some(9)).arguments().is_empty());
    }

    #[test]
    fn every_rule_is_found_by_its_names_and_its_refusal() {
        for rule in Rule::ALL {
            assert_eq!(Rule::ALL[rule.index()], rule);
            let word = match rule {
                Rule::PerUserLimit => "limit",
                other => other.code(),
            };
            assert_eq!(Rule::from_answer(word), Some(rule));
        }
        let fields = Rules::default().with(Rule::EndsAt, Some(5));
        let read = Rules::from_fields(|f| fields.fields().find(|(k, _)| *k == f).map(|(_, v)| v));
        assert_eq!(read, fields);
        assert_eq!(Rules::try_from(fields.to_json()).unwrap(), fields);
        assert!(Rules::try_from(r#"{"limit": 1}"#.to_owned()).is_err());
    }

    #[test]
    fn broken_names_the_first_rule_a_purchase_breaks() {
        let rules = Rules::default()
            .with(Rule::PerUserLimit, Some(2))
            .with(Rule::StartsAt, Some(10))
            .with(Rule::EndsAt, Some(20));
        assert_eq!(rules.broken(5, Some(1)), Some(Rule::StartsAt));
        assert_eq!(rules.broken(15, Some(3)), Some(Rule::PerUserLimit));
        assert_eq!(rules.broken(15, None), None);
        assert_eq!(rules.broken(20, Some(1)), Some(Rule::EndsAt));
        assert!(rules.validate().is_ok());
        let backwards = rules.with(Rule::EndsAt, Some(10));
        assert!(matches!(
            backwards.validate(),
            Err(Error::Inconsistent { .. })
        ));
        let zero = rules.with(Rule::PerUserLimit, Some(0));
        assert!(matches!(zero.validate(), Err(Error::Invalid { .. })));
    }
}
