//! Shared output helpers: milliseconds for people and for JSON.
//!
//! Durations are shown in milliseconds. In JSON a whole number of milliseconds is written as
//! an integer (`"start_ms": 0`), anything else as a decimal (`"mean_ms": 18.27`).

use std::time::Duration;

use serde::Serializer;

/// A duration in milliseconds, as a float (exact to the microsecond for any real latency).
#[must_use]
pub fn ms_f64(d: Duration) -> f64 {
    d.as_secs_f64() * 1000.0
}

/// A duration in milliseconds for a person: `10`, `18.27`, `0.5` (at most 2 decimals).
#[must_use]
pub fn fmt_ms(d: Duration) -> String {
    fmt_num(ms_f64(d), 2)
}

/// A number with at most `decimals` decimals, trailing zeros removed.
#[must_use]
pub fn fmt_num(value: f64, decimals: usize) -> String {
    let s = format!("{value:.decimals$}");
    if s.contains('.') {
        s.trim_end_matches('0').trim_end_matches('.').to_owned()
    } else {
        s
    }
}

/// A fraction as a percentage for a person: `15%`, `0.01%`, `1e-8%` for tiny ones; a
/// fraction under one is given as many decimals as it takes not to read `100%`, up to twelve
/// (`99.999%`: one request in a hundred thousand lost is not none).
#[must_use]
pub fn fmt_percent(fraction: f64) -> String {
    let p = fraction * 100.0;
    if p == 0.0 || p >= 0.01 {
        let mut decimals = 2;
        while p < 100.0 && decimals < 12 && fmt_num(p, decimals) == "100" {
            decimals += 1;
        }
        format!("{}%", fmt_num(p, decimals))
    } else {
        format!("{p:.1e}%")
    }
}

/// A JSON number for milliseconds: an integer when whole, else rounded to the microsecond.
#[must_use]
pub fn ms_json(d: Duration) -> serde_json::Value {
    let micros = d.as_micros();
    if micros % 1000 == 0 {
        let whole = u64::try_from(micros / 1000).unwrap_or(u64::MAX);
        serde_json::Value::from(whole)
    } else {
        // Through nanoseconds, so 18.27 ms prints as 18.27 and not 18.270000000000003.
        serde_json::Value::from(d.as_nanos() as f64 / 1e6)
    }
}

/// `serialize_with` for a [`Duration`] field written in milliseconds.
///
/// # Errors
///
/// Whatever the serializer returns.
pub fn ser_ms<S: Serializer>(d: &Duration, s: S) -> Result<S::Ok, S::Error> {
    serde::Serialize::serialize(&ms_json(*d), s)
}

/// `serialize_with` for an optional [`Duration`] field: milliseconds, or `null`.
///
/// # Errors
///
/// Whatever the serializer returns.
pub fn ser_opt_ms<S: Serializer>(d: &Option<Duration>, s: S) -> Result<S::Ok, S::Error> {
    match d {
        Some(d) => ser_ms(d, s),
        None => s.serialize_none(),
    }
}

/// `serialize_with` for a float rounded to `1e-9`, so shares print as `0.95`, not
/// `0.9500000000000001`.
///
/// # Errors
///
/// Whatever the serializer returns.
pub fn ser_rounded<S: Serializer>(v: &f64, s: S) -> Result<S::Ok, S::Error> {
    s.serialize_f64(round_to(*v, 9))
}

/// `v` rounded to `decimals` decimal places (through its decimal text, so it is the float
/// nearest the rounded decimal).
#[must_use]
pub fn round_to(v: f64, decimals: usize) -> f64 {
    format!("{v:.decimals$}").parse().unwrap_or(v)
}

/// Pads or truncates `s` to `width` characters, left-aligned.
#[must_use]
pub fn pad(s: &str, width: usize) -> String {
    let n = s.chars().count();
    if n >= width {
        s.chars().take(width).collect()
    } else {
        format!("{s}{}", " ".repeat(width - n))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn whole_milliseconds_are_integers_in_json() {
        assert_eq!(ms_json(Duration::from_millis(160)).to_string(), "160");
        assert_eq!(ms_json(Duration::from_micros(18_270)).to_string(), "18.27");
    }

    #[test]
    fn people_see_short_numbers() {
        assert_eq!(fmt_ms(Duration::from_micros(18_270)), "18.27");
        assert_eq!(fmt_ms(Duration::from_millis(50)), "50");
        assert_eq!(fmt_percent(0.15), "15%");
        assert_eq!(fmt_percent(0.0001), "0.01%");
        // Under one never reads as all: it rounded to "100%".
        assert_eq!(fmt_percent(0.99999), "99.999%");
        assert_eq!(fmt_percent(0.999_999_9), "99.99999%");
        assert_eq!(fmt_percent(1.0), "100%");
        assert_eq!(round_to(0.950_000_000_000_1, 9), 0.95);
    }
}
