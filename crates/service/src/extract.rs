//! Extractors whose every rejection is a documented 4xx in plain words.

use std::sync::Arc;

use axum::extract::path::ErrorKind;
use axum::extract::rejection::{JsonRejection, PathRejection, QueryRejection};
use axum::extract::{FromRequest, FromRequestParts, Request};
use axum::http::StatusCode;
use axum::http::request::Parts;
use serde::de::DeserializeOwned;

use crate::error::{ApiError, Code};
use crate::state::AppState;

/// Like `axum::Json`, but malformed JSON, wrong types, unknown fields and a
/// missing content type answer `400 invalid_request` naming the field and
/// what it takes, an oversized body `413 payload_too_large`, and a body not
/// all there within the header timeout `408 request_timeout`.
pub struct Body<T>(pub T);

impl<T: DeserializeOwned> FromRequest<Arc<AppState>> for Body<T> {
    type Rejection = ApiError;

    async fn from_request(req: Request, state: &Arc<AppState>) -> Result<Self, Self::Rejection> {
        // A body that trickles in would hold its connection (and a place
        // under the cap) for as long as the client likes.
        let deadline = state.body_deadline;
        match tokio::time::timeout(deadline, axum::Json::<T>::from_request(req, state)).await {
            Ok(Ok(axum::Json(value))) => Ok(Self(value)),
            Ok(Err(rejection)) => Err(reject(rejection)),
            Err(_) => Err(late(deadline)),
        }
    }
}

/// The caller, as the request's credentials and address show it; never
/// rejects by itself: each route asks for the role it needs.
impl FromRequestParts<Arc<AppState>> for crate::auth::Caller {
    type Rejection = std::convert::Infallible;

    async fn from_request_parts(
        parts: &mut Parts,
        state: &Arc<AppState>,
    ) -> Result<Self, Self::Rejection> {
        Ok(state.auth.caller(parts).await)
    }
}

/// The body as bytes (a signature covers them exactly), with [`Body`]'s
/// size limit and deadline.
pub struct RawBody(pub bytes::Bytes);

impl FromRequest<Arc<AppState>> for RawBody {
    type Rejection = ApiError;

    async fn from_request(req: Request, state: &Arc<AppState>) -> Result<Self, Self::Rejection> {
        let deadline = state.body_deadline;
        match tokio::time::timeout(deadline, bytes::Bytes::from_request(req, state)).await {
            Ok(Ok(bytes)) => Ok(Self(bytes)),
            Ok(Err(rejection)) if rejection.status() == StatusCode::PAYLOAD_TOO_LARGE => {
                Err(too_large())
            }
            Ok(Err(_)) => Err(ApiError::invalid("the body could not be read")),
            Err(_) => Err(late(deadline)),
        }
    }
}

fn too_large() -> ApiError {
    ApiError::new(
        StatusCode::PAYLOAD_TOO_LARGE,
        Code::PayloadTooLarge,
        "request bodies are limited to 16 KiB",
    )
}

fn late(deadline: std::time::Duration) -> ApiError {
    ApiError::new(
        StatusCode::REQUEST_TIMEOUT,
        Code::RequestTimeout,
        format!("the request body did not arrive within {deadline:?}"),
    )
}

/// Like `axum::extract::Query`, with rejections as [`Body`]'s.
pub struct Query<T>(pub T);

impl<S: Send + Sync, T: DeserializeOwned> FromRequestParts<S> for Query<T> {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, state: &S) -> Result<Self, Self::Rejection> {
        match axum::extract::Query::<T>::from_request_parts(parts, state).await {
            Ok(axum::extract::Query(value)) => Ok(Self(value)),
            Err(QueryRejection::FailedToDeserializeQueryString(e)) => {
                Err(ApiError::invalid(plain(&e.body_text())))
            }
            Err(other) => Err(ApiError::invalid(plain(&other.body_text()))),
        }
    }
}

/// Like `axum::extract::Path`, with rejections as [`Body`]'s (a path
/// segment that is not UTF-8, say) instead of a plain-text answer.
pub struct Path<T>(pub T);

impl<S: Send + Sync, T: DeserializeOwned + Send> FromRequestParts<S> for Path<T> {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, state: &S) -> Result<Self, Self::Rejection> {
        match axum::extract::Path::<T>::from_request_parts(parts, state).await {
            Ok(axum::extract::Path(value)) => Ok(Self(value)),
            Err(PathRejection::FailedToDeserializePathParams(e)) => match e.into_kind() {
                ErrorKind::InvalidUtf8InPathParam { key } => Err(ApiError::invalid(format!(
                    "{key}: only A-Z a-z 0-9 _ - are allowed"
                ))),
                kind => Err(ApiError::invalid(plain(&kind.to_string()))),
            },
            Err(_) => Err(ApiError::invalid("the path could not be read")),
        }
    }
}

fn reject(rejection: JsonRejection) -> ApiError {
    if rejection.status() == StatusCode::PAYLOAD_TOO_LARGE {
        return too_large();
    }
    let detail = match &rejection {
        JsonRejection::JsonDataError(e) => plain(&e.body_text()),
        JsonRejection::JsonSyntaxError(e) => syntax(&e.body_text()),
        JsonRejection::MissingJsonContentType(_) => {
            "expected `Content-Type: application/json`".to_owned()
        }
        _ => "the body could not be read".to_owned(),
    };
    ApiError::invalid(detail)
}

/// A JSON syntax error with its place: `the body is not valid JSON: <what>
/// (line L, column C)`.
fn syntax(text: &str) -> String {
    let (_, message) = split_path(strip_preamble(text));
    let (what, place) = match message.rfind(" at line ") {
        Some(at) => (
            &message[..at],
            message[at + " at line ".len()..].replace(" column ", ", column "),
        ),
        None => (message, String::new()),
    };
    let what = what.replace("EOF while parsing", "the body ended inside");
    if place.is_empty() {
        format!("the body is not valid JSON: {what}")
    } else {
        format!("the body is not valid JSON: {what} (line {place})")
    }
}

/// The framework's preamble off a rejection's text.
fn strip_preamble(text: &str) -> &str {
    const PREAMBLES: [&str; 4] = [
        "Failed to deserialize the JSON body into the target type: ",
        "Failed to parse the request body as JSON: ",
        "Failed to deserialize query string: ",
        "Failed to deserialize query string",
    ];
    PREAMBLES
        .iter()
        .find_map(|p| text.strip_prefix(p))
        .unwrap_or(text)
}

/// A deserializer's complaint as `<field>: <what it takes>[, got <what
/// came>]`, in words a client's author reads without knowing the server's
/// language: no preamble, no positions, no type names like `u64`.
pub fn plain(text: &str) -> String {
    let text = strip_preamble(text);
    let text = match text.rfind(" at line ") {
        Some(at) if text[at..].contains(" column ") => &text[..at],
        _ => text,
    };
    let (path, message) = split_path(text);
    let (path, message) = if let Some(field) = message
        .strip_prefix("missing field `")
        .and_then(|m| m.strip_suffix('`'))
    {
        (join(path, field), "required".to_owned())
    } else if let Some(rest) = message.strip_prefix("unknown field `") {
        let (field, known) = rest.split_once('`').unwrap_or((rest, ""));
        let known = known
            .strip_prefix(", expected one of ")
            .or_else(|| known.strip_prefix(", expected "))
            .map(|k| format!("; the fields are {}", k.replace('`', "")))
            .unwrap_or_default();
        (
            join(path, field),
            format!("not a field of this request{known}"),
        )
    } else if let Some(rest) = message
        .strip_prefix("invalid type: ")
        .or_else(|| message.strip_prefix("invalid value: "))
    {
        let (got, expected) = rest
            .split_once(", expected ")
            .unwrap_or((rest, "another value"));
        (
            path.to_owned(),
            format!("expected {}, got {}", kind(expected), value(got)),
        )
    } else if let Some(rest) = message.strip_prefix("unknown variant `") {
        let (got, known) = rest.split_once('`').unwrap_or((rest, ""));
        let known = known
            .strip_prefix(", expected one of ")
            .or_else(|| known.strip_prefix(", expected "))
            .unwrap_or("")
            .replace('`', "");
        (
            path.to_owned(),
            format!("expected one of {known}, got {got}"),
        )
    } else if message.contains("invalid digit") || message.contains("cannot parse integer") {
        (path.to_owned(), "expected a whole number".to_owned())
    } else if message.contains("number too large") || message.contains("too large to fit") {
        (path.to_owned(), "the number is too large".to_owned())
    } else {
        (path.to_owned(), message.to_owned())
    };
    if path.is_empty() || path == "." {
        message
    } else if path.starts_with('[') {
        // Read as a struct from a list: the body is not an object.
        "the body must be a JSON object".to_owned()
    } else {
        format!("{path}: {message}")
    }
}

/// `field: message` → (`field`, `message`); a message with no field path.
fn split_path(text: &str) -> (&str, &str) {
    match text.split_once(": ") {
        Some((path, message))
            if !path.is_empty()
                && path
                    .chars()
                    .all(|c| c.is_ascii_alphanumeric() || matches!(c, '_' | '.' | '[' | ']')) =>
        {
            (path, message)
        }
        _ => ("", text),
    }
}

fn join(path: &str, field: &str) -> String {
    if path.is_empty() || path == "." {
        field.to_owned()
    } else if path == field || path.ends_with(&format!(".{field}")) {
        // Some paths already end at the field named.
        path.to_owned()
    } else {
        format!("{path}.{field}")
    }
}

/// A deserializer's "expected" in plain words.
fn kind(expected: &str) -> String {
    match expected {
        "u8" | "u16" | "u32" | "u64" | "usize" => "a whole number, 0 or more".to_owned(),
        "i8" | "i16" | "i32" | "i64" | "isize" => "a whole number".to_owned(),
        "f32" | "f64" => "a number".to_owned(),
        "a sequence" => "a list".to_owned(),
        "a map" => "an object".to_owned(),
        "a boolean" | "a string" => expected.to_owned(),
        e if e.starts_with("struct ") || e.starts_with("a map") => "an object".to_owned(),
        e => e.to_owned(),
    }
}

/// A deserializer's "got" in plain words.
fn value(got: &str) -> String {
    for (prefix, word) in [
        ("integer ", ""),
        ("floating point ", ""),
        ("boolean ", ""),
        ("string ", "the string "),
    ] {
        if let Some(rest) = got.strip_prefix(prefix) {
            return format!("{word}{}", rest.trim_matches('`'));
        }
    }
    match got {
        "map" => "an object".to_owned(),
        "sequence" => "a list".to_owned(),
        "unit value" | "null" => "null".to_owned(),
        other => other.to_owned(),
    }
}

#[cfg(test)]
mod tests {
    use super::plain;

    #[test]
    fn rejections_read_as_field_and_expectation() {
        let cases = [
            (
                "Failed to deserialize the JSON body into the target type: stock: invalid type: string \"x\", expected u64 at line 1 column 85",
                "stock: expected a whole number, 0 or more, got the string \"x\"",
            ),
            (
                "Failed to deserialize the JSON body into the target type: missing field `stock` at line 1 column 30",
                "stock: required",
            ),
            (
                "Failed to deserialize the JSON body into the target type: unknown field `color`, expected one of `id`, `name` at line 1 column 9",
                "color: not a field of this request; the fields are id, name",
            ),
            (
                "Failed to deserialize the JSON body into the target type: color: unknown field `color`, expected `id` at line 1 column 9",
                "color: not a field of this request; the fields are id",
            ),
            (
                "Failed to deserialize query string: limit: invalid digit found in string",
                "limit: expected a whole number",
            ),
            (
                "Failed to deserialize the JSON body into the target type: quantity: invalid value: integer `-1`, expected u32 at line 1 column 9",
                "quantity: expected a whole number, 0 or more, got -1",
            ),
        ];
        for (raw, want) in [
            (
                "Failed to deserialize query string: status: unknown variant `x`, expected one of `upcoming`, `ended`",
                "status: expected one of upcoming, ended, got x",
            ),
            (
                "Failed to deserialize the JSON body into the target type: [0]: invalid type: integer `1`, expected a string at line 1 column 2",
                "the body must be a JSON object",
            ),
        ]
        .into_iter()
        .chain(cases)
        {
            assert_eq!(plain(raw), want);
        }
        assert_eq!(
            super::syntax(
                "Failed to parse the request body as JSON: user_id: EOF while parsing a value at line 1 column 12"
            ),
            "the body is not valid JSON: the body ended inside a value (line 1, column 12)"
        );
    }
}
