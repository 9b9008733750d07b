//! [`WireError`]: why a header value was not decoded, or why no header value is sent.

use core::fmt;

use crate::error::Error;

/// Why a header value was not decoded, or why no header value is sent.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
#[non_exhaustive]
pub enum WireError {
    /// Decoding: the value has no digits (it is empty, or a `grpc-timeout` holds a unit alone).
    Empty,
    /// Decoding: the value holds ASCII whitespace (leading, trailing or inside). Strip the
    /// optional whitespace around a header value before decoding it, as HTTP parsers do.
    Whitespace,
    /// Decoding: the value starts with `+` or `-`. Both headers carry unsigned numbers.
    Sign,
    /// Decoding: a byte where a digit belongs is not an ASCII digit (letters, punctuation,
    /// any non-ASCII byte).
    InvalidDigit,
    /// Decoding: more digits than the header allows: 8 for `grpc-timeout`, as the gRPC
    /// protocol specifies; 10 for `connect-timeout-ms`, as the Connect protocol specifies;
    /// [`DeadlineMs::MAX_DIGITS`](crate::wire::DeadlineMs::MAX_DIGITS) for `x-deadline-ms`.
    TooManyDigits,
    /// Decoding `x-deadline-ms`: the digits fit in [`DeadlineMs::MAX_DIGITS`](crate::wire::DeadlineMs::MAX_DIGITS) but the value is
    /// past `u64::MAX` milliseconds. It is rejected like a longer value, never read as the
    /// largest one. (`grpc-timeout`'s 8 digits always fit.)
    TooLarge,
    /// Decoding `grpc-timeout`: the digits are not followed by a unit.
    MissingUnit,
    /// Decoding `grpc-timeout`: the unit is not one of `H M S m u n`.
    UnknownUnit,
    /// Encoding: the time left (after the per-hop allowance, once rounded down to the unit)
    /// is zero. Nothing is sent, and the call is not made: report the deadline as exceeded.
    Spent,
}

impl WireError {
    /// What is wrong, in a few fixed words (the [`Display`](fmt::Display) text): for the body
    /// or `grpc-message` of the answer to a request whose header was rejected.
    #[must_use]
    pub const fn reason(self) -> &'static str {
        match self {
            WireError::Empty => "header value has no digits",
            WireError::Whitespace => "header value contains whitespace",
            WireError::Sign => "header value has a sign",
            WireError::InvalidDigit => "header value has a byte that is not an ASCII digit",
            WireError::TooManyDigits => "header value has too many digits",
            WireError::TooLarge => "header value is past u64::MAX milliseconds",
            WireError::MissingUnit => "grpc-timeout value has no unit",
            WireError::UnknownUnit => "grpc-timeout unit is not one of H M S m u n",
            WireError::Spent => "no time left to send: the call is not made",
        }
    }
}

impl fmt::Display for WireError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.reason())
    }
}

impl core::error::Error for WireError {}

/// A header that could not be decoded is [`Error::MalformedDeadline`] (HTTP 400, gRPC
/// `INVALID_ARGUMENT`); a budget spent before it could be sent ([`WireError::Spent`]) is
/// [`Error::DeadlineExceeded`] (HTTP 504, gRPC `DEADLINE_EXCEEDED`).
///
/// ```
/// use deadline_core::Error;
/// use deadline_core::wire::WireError;
///
/// assert_eq!(Error::from(WireError::Spent), Error::DeadlineExceeded);
/// assert_eq!(Error::from(WireError::Sign), Error::MalformedDeadline);
/// assert_eq!(Error::from(WireError::Sign).http_status(), 400);
/// ```
impl From<WireError> for Error {
    fn from(error: WireError) -> Self {
        match error {
            WireError::Spent => Error::DeadlineExceeded,
            WireError::Empty
            | WireError::Whitespace
            | WireError::Sign
            | WireError::InvalidDigit
            | WireError::TooManyDigits
            | WireError::MissingUnit
            | WireError::UnknownUnit
            | WireError::TooLarge => Error::MalformedDeadline,
        }
    }
}
