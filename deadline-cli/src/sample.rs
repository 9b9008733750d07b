//! Measured latencies: reading a sample file.
//!
//! A sample file holds latencies in milliseconds, one or more to a line, separated by spaces
//! or commas; `#` starts a comment. A line `8 x 45` means forty-five calls at 8 ms. An `ms`
//! suffix is allowed (`8ms`, `8 ms x 45`). Latencies may have decimals (`0.25`).
//!
//! ```text
//! # seed 001's preset: a hundred measured calls
//! 8 x 45
//! 11 x 25
//! 400
//! ```

use std::time::Duration;

use crate::error::InputError;

/// The largest latency a file may state, in milliseconds (about 31 years): anything larger is
/// a typo, and it keeps every sum of latencies far from overflow.
pub const MAX_MS: f64 = 1e12;

/// The most calls one `x COUNT` line may stand for.
pub const MAX_COUNT: u64 = 100_000_000;

/// Parses one latency in milliseconds (`12`, `12.5`, `12ms`) into a [`Duration`] rounded to the
/// microsecond. Errors say what is wrong, without a location.
///
/// # Errors
///
/// Not a number, negative, not finite, or larger than [`MAX_MS`].
pub fn parse_ms(text: &str) -> Result<Duration, String> {
    let number = text.trim().strip_suffix("ms").unwrap_or(text).trim();
    let value: f64 = number
        .parse()
        .map_err(|_| format!("`{text}` is not a latency in milliseconds"))?;
    ms_to_duration(value)
}

/// Converts milliseconds to a [`Duration`], rounded to the microsecond.
///
/// # Errors
///
/// A negative, non-finite or too large value (over [`MAX_MS`]).
pub fn ms_to_duration(value: f64) -> Result<Duration, String> {
    if !value.is_finite() {
        return Err(format!("{value} is not a finite number of milliseconds"));
    }
    if value < 0.0 {
        return Err(format!("a latency cannot be negative ({value} ms)"));
    }
    if value > MAX_MS {
        return Err(format!("{value} ms is too large (at most {MAX_MS} ms)"));
    }
    // In range: 0 <= value * 1000 <= 1e15 < 2^53, so the cast is exact after rounding.
    #[allow(clippy::cast_possible_truncation, clippy::cast_sign_loss)]
    let micros = (value * 1000.0).round() as u64;
    Ok(Duration::from_micros(micros))
}

/// Reads latencies from the text of a sample file named `file` (for messages).
///
/// # Errors
///
/// An [`InputError`] naming the file and line of the first bad entry, with field `latency`
/// or `count`; also when the file holds no latency at all.
pub fn parse(file: &str, text: &str) -> Result<Vec<Duration>, InputError> {
    let mut out = Vec::new();
    for (index, raw) in text.lines().enumerate() {
        let line = index + 1;
        let content = raw.split('#').next().unwrap_or("");
        let tokens: Vec<&str> = content
            .split(|c: char| c.is_whitespace() || c == ',')
            .filter(|t| !t.is_empty())
            .collect();
        let err =
            |field: &str, message: String| InputError::new(file, Some(line), Some(field), message);
        match tokens.as_slice() {
            [] => {}
            [value, "ms", x, count] | [value, x, count]
                if x.eq_ignore_ascii_case("x") || *x == "×" =>
            {
                let latency = parse_ms(value).map_err(|m| err("latency", m))?;
                let count: u64 = count.parse().map_err(|_| {
                    err("count", format!("`{count}` is not a whole count of calls"))
                })?;
                if count > MAX_COUNT {
                    return Err(err(
                        "count",
                        format!("{count} calls on one line is more than {MAX_COUNT}"),
                    ));
                }
                let count = usize::try_from(count)
                    .map_err(|_| err("count", format!("{count} is too many calls")))?;
                out.extend(std::iter::repeat_n(latency, count));
            }
            values => {
                let mut iter = values.iter().peekable();
                while let Some(value) = iter.next() {
                    // `12 ms` written with a space.
                    if iter.peek() == Some(&&"ms") {
                        iter.next();
                    }
                    out.push(parse_ms(value).map_err(|m| err("latency", m))?);
                }
            }
        }
    }
    if out.is_empty() {
        return Err(InputError::new(
            file,
            None,
            Some("latency"),
            "the sample holds no latency",
        ));
    }
    Ok(out)
}

/// Reads a sample file from disk.
///
/// # Errors
///
/// The file cannot be read, or [`parse`] rejects it.
pub fn read(path: &str) -> Result<Vec<Duration>, InputError> {
    let text = std::fs::read_to_string(path)
        .map_err(|e| InputError::new(path, None, None, format!("cannot read: {e}")))?;
    parse(path, &text)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counts_values_and_repeats() {
        let s = parse("s", "# c\n8 x 45\n11ms x 2, \n 400, 0.5\n3 ms\n").unwrap();
        assert_eq!(s.len(), 45 + 2 + 3);
        assert_eq!(
            s.iter().filter(|d| **d == Duration::from_millis(8)).count(),
            45
        );
        assert!(s.contains(&Duration::from_micros(500)));
        assert!(s.contains(&Duration::from_millis(3)));
    }

    #[test]
    fn negative_latency_names_its_line() {
        let e = parse("lat.txt", "10\n20\n-5\n").unwrap_err();
        assert_eq!(e.line, Some(3));
        assert_eq!(e.field.as_deref(), Some("latency"));
        assert!(e.message.contains("negative"), "{e}");
    }

    #[test]
    fn bad_count_and_empty_file_are_errors() {
        let e = parse("lat.txt", "8 x many\n").unwrap_err();
        assert_eq!((e.line, e.field.as_deref()), (Some(1), Some("count")));
        assert!(parse("lat.txt", "# nothing\n\n").is_err());
        assert!(parse("lat.txt", "1e400\n").is_err());
    }
}
