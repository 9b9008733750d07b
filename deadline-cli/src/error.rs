//! [`InputError`]: what is wrong with an input file, and where.
//!
//! Every message names the file, the line and, where there is one, the field, so a person can
//! go straight to the mistake. The binary prints it and exits with [`InputError::EXIT_CODE`].

use std::fmt;
use std::ops::Range;

/// A mistake in an input file (a table or a sample), or a file that cannot be read.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct InputError {
    /// The file, as the user named it (or the name of a built-in default).
    pub file: String,
    /// The 1-based line of the mistake, when it has one.
    pub line: Option<usize>,
    /// The field at fault (`p50_ms`, `dependency[2].cap_ms`, `latency`), when there is one.
    pub field: Option<String>,
    /// What is wrong.
    pub message: String,
}

impl InputError {
    /// The exit code for bad input (a usage error, as clap uses for bad arguments).
    pub const EXIT_CODE: i32 = 2;

    /// An error at `line` of `file`, about `field`.
    #[must_use]
    pub fn new(
        file: &str,
        line: Option<usize>,
        field: Option<&str>,
        message: impl Into<String>,
    ) -> Self {
        InputError {
            file: file.to_owned(),
            line,
            field: field.map(str::to_owned),
            message: message.into(),
        }
    }

    /// An error about the value at byte range `span` of `source` (the text of `file`).
    #[must_use]
    pub fn at_span(
        file: &str,
        source: &str,
        span: &Range<usize>,
        field: Option<&str>,
        message: impl Into<String>,
    ) -> Self {
        InputError::new(file, Some(line_of(source, span.start)), field, message)
    }

    /// Converts a TOML parse or type error: the line from the error's span, the field from the
    /// message (``missing field `x` ``) or else from the key written before the value.
    #[must_use]
    pub fn from_toml(file: &str, source: &str, err: &toml::de::Error) -> Self {
        let message = err.message().trim().to_owned();
        let Some(span) = err.span() else {
            return InputError::new(file, None, None, message);
        };
        let field = field_in_message(&message).or_else(|| key_before(source, span.start));
        InputError::new(
            file,
            Some(line_of(source, span.start)),
            field.as_deref(),
            message,
        )
    }
}

impl fmt::Display for InputError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.file)?;
        if let Some(line) = self.line {
            write!(f, ":{line}")?;
        }
        if let Some(field) = &self.field {
            write!(f, ": field `{field}`")?;
        }
        write!(f, ": {}", self.message)
    }
}

impl std::error::Error for InputError {}

/// The 1-based line holding byte `offset` of `source`.
#[must_use]
pub fn line_of(source: &str, offset: usize) -> usize {
    let end = offset.min(source.len());
    source
        .as_bytes()
        .get(..end)
        .map_or(0, |b| b.iter().filter(|&&c| c == b'\n').count())
        + 1
}

/// The field a serde message names: ``missing field `p50_ms` `` or ``unknown field `x` ``.
fn field_in_message(message: &str) -> Option<String> {
    let rest = message
        .strip_prefix("missing field `")
        .or_else(|| message.strip_prefix("unknown field `"))
        .or_else(|| message.strip_prefix("duplicate field `"))?;
    rest.split('`').next().map(str::to_owned)
}

/// The key written just before byte `offset` on its line (`p50_ms = 'ten'` gives `p50_ms`).
fn key_before(source: &str, offset: usize) -> Option<String> {
    let before = source.get(..offset)?;
    let line = before.rsplit('\n').next()?;
    let key = line.trim_end().strip_suffix('=')?.trim_end();
    let start = key
        .rfind(|c: char| !(c.is_alphanumeric() || c == '_' || c == '-' || c == '.'))
        .map_or(0, |i| i + 1);
    let key = key.get(start..)?;
    (!key.is_empty()).then(|| key.to_owned())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn line_of_counts_newlines_before_the_offset() {
        let src = "a = 1\nb = 2\nc = 3\n";
        assert_eq!(line_of(src, 0), 1);
        assert_eq!(line_of(src, src.find('b').unwrap()), 2);
        assert_eq!(line_of(src, src.find('c').unwrap()), 3);
        assert_eq!(line_of(src, 10_000), 4);
    }

    #[test]
    fn key_before_reads_plain_and_inline_keys() {
        let src = "x = 1\np50_ms = 'ten'\n";
        assert_eq!(
            key_before(src, src.find('\'').unwrap()).as_deref(),
            Some("p50_ms")
        );
        let src = "d = [{name='A', p95_ms='x'}]";
        assert_eq!(
            key_before(src, src.rfind('\'').unwrap() - 2).as_deref(),
            Some("p95_ms")
        );
        assert_eq!(key_before("[[dependency]]", 2), None);
    }

    #[test]
    fn display_names_file_line_and_field() {
        let e = InputError::new("t.toml", Some(7), Some("p50_ms"), "must not be negative");
        assert_eq!(
            e.to_string(),
            "t.toml:7: field `p50_ms`: must not be negative"
        );
    }
}
