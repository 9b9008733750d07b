//! The headers that carry the time left in whole milliseconds: [`DeadlineMs`]
//! (`x-deadline-ms`, and Envoy's `x-envoy-expected-rq-timeout-ms`, which has the same form)
//! and [`ConnectTimeout`] (the Connect protocol's `connect-timeout-ms`).

use core::fmt;
use core::str::FromStr;
use core::time::Duration;

use super::digits::{millis_to_send, read_number, write_decimal};
use super::error::WireError;

/// An `x-deadline-ms` header value: the time left in whole milliseconds, as ASCII digits.
///
/// Encoding rounds down and refuses zero ([`WireError::Spent`]). Decoding takes ASCII digits
/// only (no sign, no whitespace, leading zeros allowed), at most [`DeadlineMs::MAX_DIGITS`] of
/// them; a value past `u64::MAX` milliseconds is rejected ([`WireError::TooLarge`]), as a
/// longer one is ([`WireError::TooManyDigits`]): no value is read as a larger or smaller one.
/// A zero value is accepted and means no time is left.
///
/// ```
/// use core::time::Duration;
/// use deadline_core::wire::{DeadlineMs, WireError};
///
/// let v = DeadlineMs::from_duration(Duration::from_micros(1_999)).unwrap();
/// assert_eq!(v.as_str(), "1"); // rounded down
/// assert_eq!(DeadlineMs::from_duration(Duration::from_micros(999)), Err(WireError::Spent));
///
/// let v: DeadlineMs = "850".parse().unwrap();
/// assert_eq!(v.duration(), Duration::from_millis(850));
/// assert_eq!(DeadlineMs::parse(b"850ms"), Err(WireError::InvalidDigit));
/// ```
#[derive(Clone, Copy, PartialEq, Eq, Hash)]
pub struct DeadlineMs {
    millis: u64,
    bytes: [u8; 20],
    len: u8,
}

impl DeadlineMs {
    /// The most digits a value may have: `u64::MAX` has 20. Longer values are rejected
    /// ([`WireError::TooManyDigits`]) rather than read without end.
    pub const MAX_DIGITS: usize = 20;

    /// The value to send for `left`, the time left: whole milliseconds, rounded down
    /// (saturating at `u64::MAX`).
    ///
    /// # Errors
    ///
    /// [`WireError::Spent`] if less than one millisecond is left: nothing is sent and the call
    /// is not made.
    pub fn from_duration(left: Duration) -> Result<DeadlineMs, WireError> {
        millis_to_send(left).map(DeadlineMs::new)
    }

    /// Decodes an `x-deadline-ms` header value.
    ///
    /// # Errors
    ///
    /// [`WireError::Empty`], [`WireError::Whitespace`], [`WireError::Sign`],
    /// [`WireError::InvalidDigit`], [`WireError::TooManyDigits`] or [`WireError::TooLarge`]
    /// (past `u64::MAX` milliseconds).
    ///
    /// ```
    /// use deadline_core::wire::{DeadlineMs, WireError};
    ///
    /// assert_eq!(DeadlineMs::parse(b"18446744073709551615").unwrap().millis(), u64::MAX);
    /// assert_eq!(DeadlineMs::parse(b"18446744073709551616"), Err(WireError::TooLarge));
    /// assert_eq!(DeadlineMs::parse(b"184467440737095516150"), Err(WireError::TooManyDigits));
    /// assert_eq!(DeadlineMs::parse(b""), Err(WireError::Empty));
    /// assert_eq!(DeadlineMs::parse(b"+5"), Err(WireError::Sign));
    /// ```
    pub fn parse(value: &[u8]) -> Result<DeadlineMs, WireError> {
        Self::parse_millis(value).map(DeadlineMs::new)
    }

    /// Decodes a value as [`parse`](Self::parse) does, to its milliseconds alone: for a
    /// reader that wants the budget, not the value's text.
    pub(super) fn parse_millis(value: &[u8]) -> Result<u64, WireError> {
        read_number(value, Self::MAX_DIGITS)
    }

    fn new(millis: u64) -> DeadlineMs {
        let mut bytes = [0u8; 20];
        let len = write_decimal(millis, &mut bytes);
        DeadlineMs {
            millis,
            bytes,
            len: u8::try_from(len).unwrap_or(0),
        }
    }

    /// The time left, in whole milliseconds.
    #[must_use]
    pub const fn millis(&self) -> u64 {
        self.millis
    }

    /// The time left.
    #[must_use]
    pub const fn duration(&self) -> Duration {
        Duration::from_millis(self.millis)
    }
}

header_value_traits!(DeadlineMs);

/// A `connect-timeout-ms` header value: the Connect protocol's time left, 1 to 10 ASCII
/// digits of whole milliseconds.
///
/// The same strictness as [`DeadlineMs`], with the Connect protocol's limit of 10 digits:
/// no sign, no whitespace, ASCII digits only, leading zeros allowed; 11 digits or more are
/// [`WireError::TooManyDigits`]. A zero value is accepted and means no time is left.
/// Encoding rounds down to whole milliseconds, refuses zero ([`WireError::Spent`]) and sends
/// at most [`ConnectTimeout::MAX_MILLIS`] (about 115 days).
///
/// ```
/// use core::time::Duration;
/// use deadline_core::wire::{ConnectTimeout, WireError};
///
/// let v = ConnectTimeout::from_duration(Duration::from_micros(250_900)).unwrap();
/// assert_eq!(v.as_str(), "250");
/// assert_eq!(ConnectTimeout::from_duration(Duration::from_micros(999)), Err(WireError::Spent));
///
/// let v: ConnectTimeout = "9999999999".parse().unwrap();
/// assert_eq!(v.millis(), 9_999_999_999);
/// assert_eq!(ConnectTimeout::parse(b"10000000000"), Err(WireError::TooManyDigits));
/// assert_eq!(ConnectTimeout::parse(b"-5"), Err(WireError::Sign));
/// ```
#[derive(Clone, Copy, PartialEq, Eq, Hash)]
pub struct ConnectTimeout {
    millis: u64,
    bytes: [u8; 10],
    len: u8,
}

impl ConnectTimeout {
    /// The most digits a value has, as the Connect protocol specifies.
    pub const MAX_DIGITS: usize = 10;
    /// The largest value: ten nines, in milliseconds.
    pub const MAX_MILLIS: u64 = 9_999_999_999;

    /// The value to send for `left`, the time left: whole milliseconds, rounded down, at most
    /// [`MAX_MILLIS`](Self::MAX_MILLIS).
    ///
    /// # Errors
    ///
    /// [`WireError::Spent`] if less than one millisecond is left: nothing is sent and the call
    /// is not made.
    pub fn from_duration(left: Duration) -> Result<ConnectTimeout, WireError> {
        millis_to_send(left).map(|millis| ConnectTimeout::new(millis.min(Self::MAX_MILLIS)))
    }

    /// Decodes a `connect-timeout-ms` header value.
    ///
    /// # Errors
    ///
    /// [`WireError::Empty`], [`WireError::Whitespace`], [`WireError::Sign`],
    /// [`WireError::InvalidDigit`] or [`WireError::TooManyDigits`].
    pub fn parse(value: &[u8]) -> Result<ConnectTimeout, WireError> {
        Self::parse_millis(value).map(ConnectTimeout::new)
    }

    /// Decodes a value as [`parse`](Self::parse) does, to its milliseconds alone.
    pub(super) fn parse_millis(value: &[u8]) -> Result<u64, WireError> {
        // At most 10 digits: the value is at most MAX_MILLIS.
        read_number(value, Self::MAX_DIGITS).map(|m| m.min(Self::MAX_MILLIS))
    }

    /// The value with `millis <= MAX_MILLIS` (callers guarantee it).
    fn new(millis: u64) -> ConnectTimeout {
        let mut bytes = [0u8; 10];
        let len = write_decimal(millis, &mut bytes);
        ConnectTimeout {
            millis,
            bytes,
            len: u8::try_from(len).unwrap_or(0),
        }
    }

    /// The time left, in whole milliseconds.
    #[must_use]
    pub const fn millis(&self) -> u64 {
        self.millis
    }

    /// The time left.
    #[must_use]
    pub const fn duration(&self) -> Duration {
        Duration::from_millis(self.millis)
    }
}

header_value_traits!(ConnectTimeout);
