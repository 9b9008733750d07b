//! Measured latencies: reading a sample file.
//!
//! A sample file holds latencies in milliseconds, one or more to a line, separated by spaces
//! or commas; `#` starts a comment. A line `8 x 45` means forty-five calls at 8 ms. An `ms`
//! suffix is allowed (`8ms`, `8 ms x 45`). Latencies may have decimals (`0.25`). A file may
//! stand for at most [`MAX_CALLS`] calls in all, and so may all of one table's files together.
//!
//! ```text
//! # the lab's preset sample: a hundred measured calls
//! 8 x 45
//! 11 x 25
//! 400
//! ```

use std::time::Duration;

use crate::error::InputError;

/// The largest latency a file may state, in milliseconds (about 31 years): anything larger is
/// a typo, and it keeps every sum of latencies far from overflow.
pub const MAX_MS: f64 = 1e12;

/// The most calls a sample file may stand for, counting every `x COUNT`, and all of one
/// table's files together ([`parse_after`]): ten million latencies take 160 MB in memory, and
/// percentiles settle long before that.
pub const MAX_CALLS: usize = 10_000_000;

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
/// or `count`; also when the file holds no latency at all, or more than [`MAX_CALLS`] calls
/// (named at the line that passes the limit, before anything is stored for it).
pub fn parse(file: &str, text: &str) -> Result<Vec<Duration>, InputError> {
    parse_after(file, text, 0)
}

/// [`parse`], for a file read after others whose samples stand for `earlier` calls (a table's,
/// whose samples are all held at once): the limit of [`MAX_CALLS`] is for them all.
///
/// # Errors
///
/// As [`parse`], when this file takes the calls of them all past [`MAX_CALLS`].
pub fn parse_after(file: &str, text: &str, earlier: usize) -> Result<Vec<Duration>, InputError> {
    let limit = MAX_CALLS.saturating_sub(earlier);
    let too_many = |before: usize, adding: u64| too_many(earlier, before, adding);
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
                let total = usize::try_from(count)
                    .ok()
                    .and_then(|c| c.checked_add(out.len()))
                    .filter(|&total| total <= limit);
                let Some(total) = total else {
                    return Err(err("count", too_many(out.len(), count)));
                };
                out.resize(total, latency);
            }
            values => {
                let mut iter = values.iter().peekable();
                while let Some(value) = iter.next() {
                    // `12 ms` written with a space.
                    if iter.peek() == Some(&&"ms") {
                        iter.next();
                    }
                    let latency = parse_ms(value).map_err(|m| err("latency", m))?;
                    if out.len() >= limit {
                        return Err(err("latency", too_many(out.len(), 1)));
                    }
                    out.push(latency);
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

/// The message for a line that takes the sample past [`MAX_CALLS`], with `before` calls in
/// the file before it, and `earlier` in the files read before this one.
fn too_many(earlier: usize, before: usize, adding: u64) -> String {
    if earlier == 0 {
        format!(
            "{adding} more calls after {before} would pass the limit of {MAX_CALLS} calls per \
             sample file"
        )
    } else {
        format!(
            "{adding} more calls after {before} would pass the limit of {MAX_CALLS} calls in \
             all the table's samples ({earlier} in those read before this file)"
        )
    }
}

/// Reads a sample file from disk.
///
/// # Errors
///
/// The file cannot be read, or [`parse`] rejects it.
pub fn read(path: &str) -> Result<Vec<Duration>, InputError> {
    let text = crate::read::read_text(std::path::Path::new(path))
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
    fn a_sample_past_the_call_limit_is_an_error_at_its_line() {
        // One huge count: refused before anything is stored for it.
        let e = parse("big.txt", "# huge\n8 x 100000000\n").unwrap_err();
        assert_eq!(e.file, "big.txt");
        assert_eq!((e.line, e.field.as_deref()), (Some(2), Some("count")));
        assert!(e.message.contains(&MAX_CALLS.to_string()), "{e}");
        // Counts that pass the limit only together.
        let half = MAX_CALLS / 2;
        let text = format!("1 x {half}\n2 x {half}\n3 x 1\n");
        let e = parse("sum.txt", &text).unwrap_err();
        assert_eq!((e.line, e.field.as_deref()), (Some(3), Some("count")));
        // A plain latency after the limit is reached.
        let text = format!("1 x {MAX_CALLS}\n5\n");
        let e = parse("one.txt", &text).unwrap_err();
        assert_eq!((e.line, e.field.as_deref()), (Some(2), Some("latency")));
        // Exactly the limit is fine.
        assert_eq!(
            parse("ok.txt", &format!("1 x {MAX_CALLS}\n"))
                .unwrap()
                .len(),
            MAX_CALLS
        );
        // A count past u64 is not a count at all.
        let e = parse("huge.txt", "1 x 99999999999999999999999\n").unwrap_err();
        assert_eq!(e.field.as_deref(), Some("count"));
    }

    #[test]
    fn bad_count_and_empty_file_are_errors() {
        let e = parse("lat.txt", "8 x many\n").unwrap_err();
        assert_eq!((e.line, e.field.as_deref()), (Some(1), Some("count")));
        assert!(parse("lat.txt", "# nothing\n\n").is_err());
        assert!(parse("lat.txt", "1e400\n").is_err());
    }
}
