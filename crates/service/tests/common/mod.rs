//! Helpers shared by the service's test binaries.
#![allow(dead_code)]

/// Words that would show a framework's insides in an error message: a
/// serde or axum preamble, a parser position, a Rust type, a crate name.
const INTERNALS: [&str; 8] = [
    "deserializ",
    "Failed to",
    " at line ",
    "u64",
    "u32",
    "serde",
    "sqlx",
    "axum",
];

/// The first of those `message` shows, if any.
pub fn internal_word(message: &str) -> Option<&'static str> {
    INTERNALS.into_iter().find(|w| message.contains(w))
}
