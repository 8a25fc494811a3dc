//! How `seckill` writes what it has to say: log lines as text (colour
//! only on a terminal) or JSON lines for a log pipeline, and an error
//! with each of its causes once.

use std::io::IsTerminal;

/// `--log-format`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, clap::ValueEnum)]
pub enum Format {
    /// Lines for people: `2026-11-25T07:27:26Z  WARN target: message key=value`.
    #[default]
    Text,
    /// One JSON object per line (timestamp, level, target, fields), for
    /// Loki, ELK and the like.
    Json,
}

/// What is logged unless `RUST_LOG` says otherwise: warnings, and a
/// failing task's recovery.
const DEFAULT_FILTER: &str = "warn,sqlx::query=error,seckill_orders::failures=info";

/// Starts logging to stderr in `format`.
pub fn init(format: Format) {
    let filter = tracing_subscriber::EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| DEFAULT_FILTER.into());
    let builder = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr);
    match format {
        Format::Text => builder.with_ansi(std::io::stderr().is_terminal()).init(),
        Format::Json => builder.json().with_current_span(false).init(),
    }
}

/// `error` and its causes, `: `-separated, leaving out a cause whose words
/// an outer one already says (many errors print their source in their
/// own message, and a chain would say it again).
pub fn chain(error: &anyhow::Error) -> String {
    let mut out = String::new();
    for cause in error.chain() {
        let text = cause.to_string();
        if out.contains(&text) {
            continue;
        }
        if !out.is_empty() {
            out.push_str(": ");
        }
        out.push_str(&text);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    /// An error that says its source in its own words, as many do.
    #[derive(Debug)]
    struct Wraps(std::io::Error);

    impl std::fmt::Display for Wraps {
        fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
            write!(f, "sql: {}", self.0)
        }
    }

    impl std::error::Error for Wraps {
        fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
            Some(&self.0)
        }
    }

    #[test]
    fn each_cause_is_said_once() {
        let inner = std::io::Error::other("role \"nobody\" does not exist");
        let e = anyhow::Error::from(Wraps(inner)).context("opening the database");
        assert_eq!(
            chain(&e),
            "opening the database: sql: role \"nobody\" does not exist"
        );
    }
}
