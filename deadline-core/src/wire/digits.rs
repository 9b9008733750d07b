//! The ASCII digits every header value is made of: read strictly, written without leading
//! zeros.

use core::time::Duration;

use super::error::WireError;

/// The checks both headers share, in the order that names the problem best: empty, any
/// whitespace, a leading sign.
pub(super) fn check_prefix(value: &[u8]) -> Result<(), WireError> {
    match value.first() {
        None => Err(WireError::Empty),
        Some(_) if value.iter().any(u8::is_ascii_whitespace) => Err(WireError::Whitespace),
        Some(b'+' | b'-') => Err(WireError::Sign),
        Some(_) => Ok(()),
    }
}

/// A header value that is a number of 1 to `max_digits` ASCII digits: its value, or why not,
/// as [`check_prefix`] and then [`parse_digits`] name it. Nearly every value is a few digits:
/// those are read in one pass; anything else is looked at again by those two, so the error
/// is the same whichever way the value came.
///
/// Inlined into each header's reader: called out of line from the five that read digits, a
/// request through `DeadlineLayer` around an axum router took 8 instructions more in process
/// (`bash scripts/instructions.sh axum_request_deadline_layer_around`).
#[inline]
pub(super) fn read_number(value: &[u8], max_digits: usize) -> Result<u64, WireError> {
    if !value.is_empty() && value.len() <= max_digits && value.len() < 20 {
        let mut number = 0u64;
        let mut digits = true;
        for &byte in value {
            let digit = byte.wrapping_sub(b'0');
            digits &= digit <= 9;
            // Fewer than 20 digits: below 10^19, which cannot wrap.
            number = number.wrapping_mul(10).wrapping_add(u64::from(digit));
        }
        if digits {
            return Ok(number);
        }
    }
    check_prefix(value)?;
    parse_digits(value, max_digits)
}

/// Reads 1 to `max_digits` ASCII digits; a value past `u64::MAX` is [`WireError::TooLarge`].
/// A byte that is not a digit is [`WireError::InvalidDigit`] wherever it is, then too many
/// digits [`WireError::TooManyDigits`], then a value past `u64::MAX`: one pass reads them all.
pub(super) fn parse_digits(digits: &[u8], max_digits: usize) -> Result<u64, WireError> {
    if digits.is_empty() {
        return Err(WireError::Empty);
    }
    let mut value = Some(0u64);
    for &byte in digits {
        let digit = byte.wrapping_sub(b'0');
        if digit > 9 {
            return Err(WireError::InvalidDigit);
        }
        value = match value {
            Some(v) => match v.checked_mul(10) {
                Some(v) => v.checked_add(u64::from(digit)),
                None => None,
            },
            None => None,
        };
    }
    if digits.len() > max_digits {
        return Err(WireError::TooManyDigits);
    }
    value.ok_or(WireError::TooLarge)
}

/// The whole milliseconds to send for `left` (rounded down, saturating at `u64::MAX`), in
/// `u64` arithmetic; or [`WireError::Spent`] under one millisecond: the millisecond headers'
/// one rule for sending.
pub(super) fn millis_to_send(left: Duration) -> Result<u64, WireError> {
    let millis = left
        .as_secs()
        .saturating_mul(1_000)
        .saturating_add(u64::from(left.subsec_millis()));
    if millis == 0 {
        Err(WireError::Spent)
    } else {
        Ok(millis)
    }
}

/// Writes `value` in decimal at the front of `out` and returns the number of bytes written
/// (never more than `out.len()`; the callers' buffers always fit the value).
///
/// The digits of a value past `u32::MAX` (only a millisecond header's, past 49 days) are taken
/// in `u64` until the rest fits a `u32`; every other digit in `u32`, a multiply-high, where a
/// 64-bit division is a call into the division builtin on a 32-bit microcontroller.
pub(super) fn write_decimal(value: u64, out: &mut [u8]) -> usize {
    // The digits, the last first, at the front of `out`, then turned around in place.
    let mut len = 0usize;
    let mut push = |digit: u8| {
        if let Some(slot) = out.get_mut(len) {
            *slot = b'0'.wrapping_add(digit);
            len = len.wrapping_add(1);
        }
    };
    let mut wide = value;
    let mut narrow = loop {
        if let Ok(narrow) = u32::try_from(wide) {
            break narrow;
        }
        // `wide % 10` is below 10: the cast cannot truncate.
        push((wide % 10) as u8);
        wide /= 10;
    };
    loop {
        // `narrow % 10` is below 10: the cast cannot truncate.
        push((narrow % 10) as u8);
        narrow /= 10;
        if narrow == 0 {
            break;
        }
    }
    if let Some(digits) = out.get_mut(..len) {
        digits.reverse();
    }
    len
}

#[cfg(test)]
mod tests {
    use super::{check_prefix, parse_digits, read_number, write_decimal};
    use crate::wire::WireError;

    /// `read_number` gives what `check_prefix` then `parse_digits` give, value or error, for
    /// every string of up to 5 bytes over digits, whitespace, signs and a letter, and for the
    /// longest values around `u64::MAX`, at every limit from 0 to 21 digits.
    #[test]
    #[cfg_attr(
        miri,
        ignore = "half a million cases: run natively, too slow under miri"
    )]
    fn one_pass_reads_as_the_two_checks() {
        const BYTES: [u8; 7] = [b'0', b'1', b'9', b' ', b'+', b'-', b'x'];
        let mut values: std::vec::Vec<std::vec::Vec<u8>> = std::vec![std::vec![]];
        let mut last = values.clone();
        for _ in 0..5 {
            last = last
                .iter()
                .flat_map(|v| BYTES.iter().map(move |&b| [v.as_slice(), &[b]].concat()))
                .collect();
            values.extend(last.iter().cloned());
        }
        for text in [
            "9999999999999999999",
            "18446744073709551615",
            "18446744073709551616",
            "99999999999999999999",
            "184467440737095516150",
            "1844674407370955161 ",
        ] {
            values.push(text.as_bytes().to_vec());
        }
        for value in &values {
            for max in 0..=21 {
                let two_checks = check_prefix(value).and_then(|()| parse_digits(value, max));
                assert_eq!(
                    read_number(value, max),
                    two_checks,
                    "{value:?}, at most {max}"
                );
            }
        }
    }

    /// `write_decimal` writes every `u64` as `format!` does, past `u32::MAX` too, and
    /// `parse_digits` reads it back.
    #[test]
    #[cfg_attr(
        miri,
        ignore = "a grid of many thousand cases: run natively, too slow under miri"
    )]
    fn written_digits_read_back() {
        let mut x = 0x9E37_79B9_7F4A_7C15_u64;
        let mut samples = std::vec![0, 9, 10, u64::from(u32::MAX), 1 << 32, u64::MAX];
        for _ in 0..10_000 {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            samples.extend([x, x >> 16, x >> 31, x >> 33]);
        }
        for value in samples {
            let mut out = [0u8; 20];
            let len = write_decimal(value, &mut out);
            assert_eq!(&out[..len], std::format!("{value}").as_bytes());
            assert_eq!(parse_digits(&out[..len], 20), Ok(value));
        }
        assert_eq!(
            parse_digits(b"18446744073709551616", 20),
            Err(WireError::TooLarge)
        );
        assert_eq!(parse_digits(b"123", 2), Err(WireError::TooManyDigits));
        assert_eq!(parse_digits(b"1x3", 20), Err(WireError::InvalidDigit));
    }
}
