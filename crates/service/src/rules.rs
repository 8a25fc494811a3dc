//! A sale's purchase rules as the API writes them, made from each rule's
//! [`RuleKind`] alone: a count is a whole number, an instant RFC 3339 out
//! and RFC 3339 or ms in. A rule added in `seckill_engine::rules` is read,
//! written and documented (`openapi.json`'s sale schemas and error codes)
//! with nothing added here.

use std::fmt;

use seckill_engine::{Rule, RuleKind, Rules};
use serde::de::{self, MapAccess, Visitor};
use serde::ser::SerializeMap;
use serde::{Deserialize, Deserializer, Serialize, Serializer};
use serde_json::{Value, json};

use crate::time::{self, Millis};

/// The rules of a sale in an answer: each rule by [`Rule::name`], `null`
/// for none. Requests are read by [`read`].
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct RuleFields(pub Rules);

impl Serialize for RuleFields {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let mut map = serializer.serialize_map(Some(Rule::ALL.len()))?;
        for rule in Rule::ALL {
            match (rule.kind(), self.0.get(rule)) {
                (RuleKind::Instant, Some(ms)) => {
                    map.serialize_entry(rule.name(), &time::format(ms))?
                }
                (_, value) => map.serialize_entry(rule.name(), &value)?,
            }
        }
        map.end()
    }
}

/// Reads a body's rules, as `#[serde(flatten, deserialize_with = …)]`:
/// given every field but the body's `own`, it refuses any that is no
/// rule's, listing what the body takes as serde would.
pub fn read<'de, D: Deserializer<'de>>(
    deserializer: D,
    own: &'static [&'static str],
) -> Result<Rules, D::Error> {
    deserializer.deserialize_map(FieldsVisitor(own))
}

struct FieldsVisitor(&'static [&'static str]);

impl<'de> Visitor<'de> for FieldsVisitor {
    type Value = Rules;

    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("a sale's fields")
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Rules, A::Error> {
        let mut rules = Rules::default();
        while let Some(key) = map.next_key::<String>()? {
            let Some(rule) = Rule::ALL.into_iter().find(|r| r.name() == key) else {
                let known: Vec<String> = (self.0.iter().copied())
                    .chain(Rule::ALL.map(Rule::name))
                    .map(|name| format!("`{name}`"))
                    .collect();
                return Err(de::Error::custom(format!(
                    "unknown field `{}`, expected one of {}",
                    key.chars().take(64).collect::<String>(),
                    known.join(", ")
                )));
            };
            let value: Value = map.next_value()?;
            let read = match rule.kind() {
                RuleKind::Count { .. } => crate::fields::whole::<_, u64>(&value),
                RuleKind::Instant => Millis::deserialize(&value).map(|m| m.0),
            };
            let value = read.map_err(|e| de::Error::custom(format!("{rule}: {e}")))?;
            rules = rules.with(rule, Some(value));
        }
        Ok(rules)
    }
}

/// Adds the rules to `doc`, the API's document: their properties to the
/// sale schemas (`NewSale` in, `Sale` and the dashboard's `DashboardSale`
/// out) and their refusals to the error codes.
pub fn document(doc: &mut Value) {
    let schemas = &mut doc["components"]["schemas"];
    for rule in Rule::ALL {
        schemas["NewSale"]["properties"][rule.name()] = input(rule);
        schemas["Sale"]["properties"][rule.name()] = output(rule);
        push(&mut schemas["Sale"]["required"], rule.name());
        schemas["DashboardSale"]["properties"][rule.key()] = json!({
            "type": ["integer", "null"],
            "description": format!("{}; ms since the Unix epoch for a time", rule.about()),
        });
        push(&mut schemas["DashboardSale"]["required"], rule.key());
        push(
            &mut schemas["Error"]["properties"]["code"]["enum"],
            rule.code(),
        );
    }
}

fn input(rule: Rule) -> Value {
    let about = format!("{}; absent for none", rule.about());
    match rule.kind() {
        RuleKind::Count { max } => json!({
            "type": "integer", "minimum": 1, "maximum": max, "description": about,
        }),
        RuleKind::Instant => json!({
            "oneOf": [
                {"type": "string", "format": "date-time", "pattern": time::DATE_TIME_PATTERN},
                {"type": "integer", "minimum": 0, "maximum": time::LATEST},
            ],
            "description": format!("{about}; {}", time::FORMS),
        }),
    }
}

fn output(rule: Rule) -> Value {
    let about = format!("{}; null for none", rule.about());
    match rule.kind() {
        RuleKind::Count { .. } => json!({"type": ["integer", "null"], "description": about}),
        RuleKind::Instant => {
            json!({"type": ["string", "null"], "format": "date-time", "description": about})
        }
    }
}

fn push(list: &mut Value, name: &str) {
    if let Some(list) = list.as_array_mut() {
        list.push(json!(name));
    }
}
