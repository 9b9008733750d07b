//! The time left, on the wire: the `grpc-timeout`, `connect-timeout-ms` and `x-deadline-ms`
//! headers.
//!
//! A deadline crosses machines as the *time left*, never as a timestamp, so clock skew between
//! machines does not matter: the receiver turns the budget back into a local [`Deadline`]
//! measured on its own clock. Each hop sends a little less than it has left (the network's
//! share, [`Propagation::allowance`]), and a server clamps what it is told to a maximum of its
//! own ([`Propagation::max`]), so a hostile or broken client cannot make it wait for years.
//!
//! - [`GrpcTimeout`]: gRPC's `grpc-timeout` (PROTOCOL-HTTP2: 1 to 8 ASCII digits, then a unit
//!   among `H M S m u n`).
//! - [`DeadlineMs`]: `x-deadline-ms`, whole milliseconds as 1 to 20 ASCII digits, at most
//!   `u64::MAX` (a larger value is rejected, [`WireError::TooLarge`]).
//! - [`ConnectTimeout`]: the Connect protocol's `connect-timeout-ms` (connect-go, connect-es,
//!   connect-rust): 1 to 10 ASCII digits of milliseconds.
//! - [`Propagation`]: the allowance and the maximum, and the trip from a [`Deadline`] to a
//!   header value and back.
//!
//! Both codecs write into fixed buffers inside small `Copy` values, never allocate and never
//! panic. Encoding rounds down (a callee is never told it has more time than we do) and refuses
//! to send zero: a spent budget is not sent, because the call is not made
//! ([`WireError::Spent`]).
//!
//! ```
//! use deadline_core::wire::{GRPC_TIMEOUT, Propagation};
//! use deadline_core::{Deadline, Instant, ms};
//!
//! // Client: 200 ms left at 0 ms; keep 5 ms of it for the network.
//! let client = Propagation::DEFAULT.allowance(ms(5)).max(ms(30_000));
//! let deadline = Deadline::after(Instant::ZERO, ms(200));
//! let header = client.encode_grpc_timeout(deadline, Instant::ZERO).unwrap();
//! assert_eq!((GRPC_TIMEOUT, header.as_str()), ("grpc-timeout", "195000u"));
//!
//! // Server, on its own clock (which reads 7 s): the local deadline is 195 ms away.
//! let server = Propagation::DEFAULT.allowance(ms(5)).max(ms(10_000));
//! let arrival = Instant::from_secs(7);
//! let local = server.decode_grpc_timeout(header.as_bytes(), arrival).unwrap();
//! assert_eq!(local.remaining(arrival), ms(195));
//! ```

use core::fmt;
use core::str::FromStr;
use core::time::Duration;

use crate::deadline::Deadline;
use crate::error::Error;
use crate::time::{Instant, duration_min, duration_saturating_sub, mul_wide};

/// What both header values share: their text (`as_bytes`, `as_str`), parsing from text,
/// encoding from a [`Duration`], and printing as the header text (`Display`, `Debug`, `defmt`).
macro_rules! header_value_traits {
    ($ty:ident) => {
        impl $ty {
            /// The header value, as bytes (for `http::HeaderValue::from_bytes` and the like).
            #[must_use]
            pub fn as_bytes(&self) -> &[u8] {
                self.bytes.get(..usize::from(self.len)).unwrap_or(&[])
            }

            /// The header value, as text.
            #[must_use]
            pub fn as_str(&self) -> &str {
                core::str::from_utf8(self.as_bytes()).unwrap_or("")
            }
        }

        impl FromStr for $ty {
            type Err = WireError;

            fn from_str(s: &str) -> Result<Self, Self::Err> {
                $ty::parse(s.as_bytes())
            }
        }

        impl TryFrom<Duration> for $ty {
            type Error = WireError;

            fn try_from(left: Duration) -> Result<Self, Self::Error> {
                $ty::from_duration(left)
            }
        }

        impl fmt::Display for $ty {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str(self.as_str())
            }
        }

        impl fmt::Debug for $ty {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                write!(f, concat!(stringify!($ty), "({:?})"), self.as_str())
            }
        }

        #[cfg(feature = "defmt")]
        impl defmt::Format for $ty {
            fn format(&self, f: defmt::Formatter<'_>) {
                defmt::write!(f, "{=str}({=str})", stringify!($ty), self.as_str());
            }
        }
    };
}

/// The name of gRPC's timeout header, lowercase as HTTP/2 requires.
pub const GRPC_TIMEOUT: &str = "grpc-timeout";

/// The name of the plain-HTTP header that carries the time left in whole milliseconds.
pub const X_DEADLINE_MS: &str = "x-deadline-ms";

/// The name of the Connect protocol's timeout header: the time left in whole milliseconds,
/// 1 to 10 digits.
pub const CONNECT_TIMEOUT_MS: &str = "connect-timeout-ms";

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
    /// [`DeadlineMs::MAX_DIGITS`] for `x-deadline-ms`.
    TooManyDigits,
    /// Decoding `x-deadline-ms`: the digits fit in [`DeadlineMs::MAX_DIGITS`] but the value is
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

/// A `grpc-timeout` unit.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub enum GrpcUnit {
    /// `n`: nanoseconds.
    Nanos,
    /// `u`: microseconds.
    Micros,
    /// `m`: milliseconds.
    Millis,
    /// `S`: seconds.
    Seconds,
    /// `M`: minutes.
    Minutes,
    /// `H`: hours.
    Hours,
}

impl GrpcUnit {
    /// Every unit, the most precise first: the order in which encoding tries them.
    pub const ALL: [GrpcUnit; 6] = [
        GrpcUnit::Nanos,
        GrpcUnit::Micros,
        GrpcUnit::Millis,
        GrpcUnit::Seconds,
        GrpcUnit::Minutes,
        GrpcUnit::Hours,
    ];

    /// The unit's letter on the wire.
    ///
    /// ```
    /// use deadline_core::wire::GrpcUnit;
    ///
    /// assert_eq!(GrpcUnit::Millis.as_byte(), b'm');
    /// assert_eq!(GrpcUnit::Minutes.as_byte(), b'M');
    /// ```
    #[must_use]
    pub const fn as_byte(self) -> u8 {
        match self {
            GrpcUnit::Nanos => b'n',
            GrpcUnit::Micros => b'u',
            GrpcUnit::Millis => b'm',
            GrpcUnit::Seconds => b'S',
            GrpcUnit::Minutes => b'M',
            GrpcUnit::Hours => b'H',
        }
    }

    /// The unit a letter stands for (case-sensitive: `m` is milliseconds, `M` minutes).
    ///
    /// ```
    /// use deadline_core::wire::GrpcUnit;
    ///
    /// assert_eq!(GrpcUnit::from_byte(b'H'), Some(GrpcUnit::Hours));
    /// assert_eq!(GrpcUnit::from_byte(b'h'), None);
    /// ```
    #[must_use]
    pub const fn from_byte(byte: u8) -> Option<GrpcUnit> {
        match byte {
            b'n' => Some(GrpcUnit::Nanos),
            b'u' => Some(GrpcUnit::Micros),
            b'm' => Some(GrpcUnit::Millis),
            b'S' => Some(GrpcUnit::Seconds),
            b'M' => Some(GrpcUnit::Minutes),
            b'H' => Some(GrpcUnit::Hours),
            _ => None,
        }
    }

    /// The length of one unit: the most an encoded value can fall short of the duration it
    /// was encoded from.
    ///
    /// ```
    /// use core::time::Duration;
    /// use deadline_core::wire::GrpcUnit;
    ///
    /// assert_eq!(GrpcUnit::Minutes.as_duration(), Duration::from_secs(60));
    /// ```
    #[must_use]
    pub const fn as_duration(self) -> Duration {
        self.times(1)
    }

    /// `count` units, as [`times`](GrpcUnit::times) gives them, for a count that fits a `u32`
    /// (every `grpc-timeout` value does): each division is of a `u32` by a constant, where
    /// `Duration::from_nanos` and its kin divide a `u64` (a builtin call on a 32-bit
    /// microcontroller).
    const fn times_u32(self, count: u32) -> Duration {
        match self {
            GrpcUnit::Nanos => Duration::new((count / 1_000_000_000) as u64, count % 1_000_000_000),
            GrpcUnit::Micros => Duration::new(
                (count / 1_000_000) as u64,
                (count % 1_000_000).wrapping_mul(1_000),
            ),
            GrpcUnit::Millis => Duration::new(
                (count / 1_000) as u64,
                (count % 1_000).wrapping_mul(1_000_000),
            ),
            GrpcUnit::Seconds => Duration::from_secs(count as u64),
            // Below 2^32 × 3 600: no wrap.
            GrpcUnit::Minutes => Duration::from_secs((count as u64).wrapping_mul(60)),
            GrpcUnit::Hours => Duration::from_secs((count as u64).wrapping_mul(3_600)),
        }
    }

    /// `count` units, as a [`Duration`]. It cannot overflow for the counts `grpc-timeout`
    /// carries, and saturates for any larger count.
    #[must_use]
    pub const fn times(self, count: u64) -> Duration {
        match self {
            GrpcUnit::Nanos => Duration::from_nanos(count),
            GrpcUnit::Micros => Duration::from_micros(count),
            GrpcUnit::Millis => Duration::from_millis(count),
            GrpcUnit::Seconds => Duration::from_secs(count),
            GrpcUnit::Minutes => Duration::from_secs(count.saturating_mul(60)),
            GrpcUnit::Hours => Duration::from_secs(count.saturating_mul(3_600)),
        }
    }
}

/// A `grpc-timeout` header value: 1 to 8 ASCII digits and a unit, held in a 9-byte buffer.
///
/// Build one from the time left with [`GrpcTimeout::from_duration`] (or, with the per-hop
/// allowance, [`Propagation::encode_grpc_timeout`]), and read a peer's with
/// [`GrpcTimeout::parse`] (or [`Propagation::decode_grpc_timeout`]).
///
/// Encoding picks the most precise unit whose value fits in 8 digits and rounds down, so the
/// value sent is at most the duration and less than it by under one unit. Durations beyond
/// `99999999H` (over 11 000 years) are sent as `99999999H`.
///
/// Decoding follows the grammar strictly: no sign, no whitespace, 1 to 8 digits (leading
/// zeros allowed), one unit. A zero value (`0S`), which some peers send, is accepted and
/// means no time is left. Every value decodes without overflow: the largest, `99999999H`, is
/// far inside [`Duration`]'s range (clamp it with [`Propagation::max`]).
///
/// Two values are equal when their text is equal (`1S` and `1000m` are not).
///
/// ```
/// use core::time::Duration;
/// use deadline_core::wire::{GrpcTimeout, GrpcUnit, WireError};
///
/// let t = GrpcTimeout::from_duration(Duration::from_millis(250)).unwrap();
/// assert_eq!(t.as_str(), "250000u");
/// assert_eq!(t.unit(), GrpcUnit::Micros);
///
/// // 100 s does not fit in 8 digits of microseconds: milliseconds it is.
/// let t = GrpcTimeout::from_duration(Duration::from_secs(100)).unwrap();
/// assert_eq!(t.as_str(), "100000m");
///
/// // A spent budget is not sent.
/// assert_eq!(GrpcTimeout::from_duration(Duration::ZERO), Err(WireError::Spent));
///
/// let t: GrpcTimeout = "0005S".parse().unwrap();
/// assert_eq!(t.duration(), Duration::from_secs(5));
/// assert_eq!(t.as_str(), "5S");
/// assert_eq!(GrpcTimeout::parse(b"-5S"), Err(WireError::Sign));
/// assert_eq!(GrpcTimeout::parse(b"123456789S"), Err(WireError::TooManyDigits));
/// ```
#[derive(Clone, Copy, PartialEq, Eq, Hash)]
pub struct GrpcTimeout {
    value: u32,
    unit: GrpcUnit,
    bytes: [u8; 9],
    len: u8,
}

impl GrpcTimeout {
    /// The largest value `grpc-timeout` carries: 8 digits.
    pub const MAX_VALUE: u32 = 99_999_999;
    /// The most digits a `grpc-timeout` value has.
    pub const MAX_DIGITS: usize = 8;

    /// The value to send for `left`, the time left: the most precise unit whose value fits in
    /// 8 digits, rounded down.
    ///
    /// # Errors
    ///
    /// [`WireError::Spent`] if `left` is zero: nothing is sent and the call is not made.
    pub fn from_duration(left: Duration) -> Result<GrpcTimeout, WireError> {
        const MAX: u32 = GrpcTimeout::MAX_VALUE;
        let secs = left.as_secs();
        let nanos = left.subsec_nanos();
        // The finest unit whose count fits 8 digits, picked by comparing the seconds: under
        // 100 s the microseconds fit (at most 99 999 999), under 100 000 s the milliseconds.
        // The products are in u32: each bound keeps them below 10^8.
        let (count, unit) = if secs == 0 {
            if nanos == 0 {
                return Err(WireError::Spent);
            }
            if nanos <= MAX {
                (nanos, GrpcUnit::Nanos)
            } else {
                (nanos / 1_000, GrpcUnit::Micros)
            }
        } else if secs < 100 {
            let micros = (secs as u32).wrapping_mul(1_000_000);
            (micros.wrapping_add(nanos / 1_000), GrpcUnit::Micros)
        } else if secs < 100_000 {
            let millis = (secs as u32).wrapping_mul(1_000);
            (millis.wrapping_add(nanos / 1_000_000), GrpcUnit::Millis)
        } else if secs <= u64::from(MAX) {
            (secs as u32, GrpcUnit::Seconds)
        } else if secs < 6_000_000_000 {
            // Under (MAX + 1) minutes: `secs / 4` fits a u32, and `secs / 60` is its fifteenth.
            (((secs >> 2) as u32) / 15, GrpcUnit::Minutes)
        } else {
            (hours(secs).min(MAX), GrpcUnit::Hours)
        };
        Ok(GrpcTimeout::new(count, unit))
    }

    /// Decodes a `grpc-timeout` header value.
    ///
    /// # Errors
    ///
    /// [`WireError::Empty`], [`WireError::Whitespace`], [`WireError::Sign`],
    /// [`WireError::InvalidDigit`], [`WireError::TooManyDigits`], [`WireError::MissingUnit`]
    /// or [`WireError::UnknownUnit`], for a value outside the grammar.
    ///
    /// ```
    /// use core::time::Duration;
    /// use deadline_core::wire::{GrpcTimeout, WireError};
    ///
    /// assert_eq!(GrpcTimeout::parse(b"1M").unwrap().duration(), Duration::from_secs(60));
    /// assert_eq!(GrpcTimeout::parse(b"1 S"), Err(WireError::Whitespace));
    /// assert_eq!(GrpcTimeout::parse(b"15"), Err(WireError::MissingUnit));
    /// assert_eq!(GrpcTimeout::parse(b"15s"), Err(WireError::UnknownUnit));
    /// ```
    pub fn parse(value: &[u8]) -> Result<GrpcTimeout, WireError> {
        // The one-pass reading of a well-formed value, on 64-bit targets. On 32-bit ones the
        // careful reading below is the only one, in less code: it gives the same value (a
        // well-formed value re-encodes to its own text, less any leading zeros).
        #[cfg(target_pointer_width = "64")]
        if let Some(timeout) = Self::parse_well_formed(value) {
            return Ok(timeout);
        }
        Self::parse_carefully(value)
    }

    /// [`parse`](GrpcTimeout::parse) one check at a time, in the order that names what is
    /// wrong best.
    fn parse_carefully(value: &[u8]) -> Result<GrpcTimeout, WireError> {
        check_prefix(value)?;
        let Some((&last, digits)) = value.split_last() else {
            return Err(WireError::Empty);
        };
        let unit = match GrpcUnit::from_byte(last) {
            Some(unit) => unit,
            None if last.is_ascii_digit() => return Err(WireError::MissingUnit),
            None => return Err(WireError::UnknownUnit),
        };
        let count = parse_digits(digits, Self::MAX_DIGITS)?;
        // At most 8 digits: the count is at most MAX_VALUE.
        let count = u32::try_from(count).map_or(Self::MAX_VALUE, |c| c.min(Self::MAX_VALUE));
        Ok(GrpcTimeout::new(count, unit))
    }

    /// The value, if it is well formed: 1 to 8 ASCII digits and a unit, read in one pass.
    /// `None` for anything else, which [`parse`](GrpcTimeout::parse) then reads carefully, to
    /// say what is wrong.
    #[cfg_attr(not(target_pointer_width = "64"), allow(dead_code))]
    fn parse_well_formed(value: &[u8]) -> Option<GrpcTimeout> {
        let (&last, digits) = value.split_last()?;
        if digits.is_empty() || digits.len() > Self::MAX_DIGITS {
            return None;
        }
        let unit = GrpcUnit::from_byte(last)?;
        let (head, ninth) = load_nine(value);
        let count = eight_digits_swar(head, digits.len())?;
        // Without leading zeros the value is already in its canonical form: keep its bytes.
        if digits.first() != Some(&b'0') || digits.len() == 1 {
            let [b0, b1, b2, b3, b4, b5, b6, b7] = head.to_le_bytes();
            return Some(GrpcTimeout {
                value: count,
                unit,
                bytes: [b0, b1, b2, b3, b4, b5, b6, b7, ninth],
                len: u8::try_from(value.len()).unwrap_or(0),
            });
        }
        Some(GrpcTimeout::new(count, unit))
    }

    /// The value with `value <= MAX_VALUE` (callers guarantee it) in `unit`.
    fn new(value: u32, unit: GrpcUnit) -> GrpcTimeout {
        let mut bytes = [0u8; 9];
        let n = grpc_digits(value, &mut bytes);
        // `n` is 1 to 8: the unit goes right after the digits.
        if let Some(slot) = bytes.get_mut(n) {
            *slot = unit.as_byte();
        }
        GrpcTimeout {
            value,
            unit,
            bytes,
            len: u8::try_from(n.saturating_add(1)).unwrap_or(0),
        }
    }

    /// The number before the unit.
    #[must_use]
    pub const fn value(&self) -> u32 {
        self.value
    }

    /// The unit.
    #[must_use]
    pub const fn unit(&self) -> GrpcUnit {
        self.unit
    }

    /// The time the value stands for.
    #[must_use]
    pub const fn duration(&self) -> Duration {
        self.unit.times_u32(self.value)
    }
}

header_value_traits!(GrpcTimeout);

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
        check_prefix(value)?;
        parse_digits(value, Self::MAX_DIGITS).map(DeadlineMs::new)
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
        check_prefix(value)?;
        // At most 10 digits: the value is at most MAX_MILLIS.
        parse_digits(value, Self::MAX_DIGITS).map(|m| ConnectTimeout::new(m.min(Self::MAX_MILLIS)))
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

/// How the time left crosses a hop: what a client keeps back for the network, and the most a
/// server believes.
///
/// - Sending: the budget sent is the time left minus [`allowance`](Propagation::allowance),
///   so the callee gives up a little before we do and its answer (or its error) still
///   arrives in time. When nothing is left after the allowance, nothing is sent and the call
///   is not made ([`WireError::Spent`]).
/// - Receiving: the local deadline is `now + min(budget, max)`, on the receiver's own clock.
///
/// Pass a call's own deadline ([`Limits::deadline`](crate::Limits::deadline)) to send that
/// call's timeout, or the request's [`Deadline`] to send all the time left.
///
/// ```
/// use deadline_core::wire::{Propagation, WireError};
/// use deadline_core::{Deadline, Instant, Policy, call_timeout, ms};
///
/// static HOP: Propagation = Propagation::DEFAULT.allowance(ms(2)).max(ms(5_000));
///
/// // The budget table: B starts with 1700 ms left and its cap is 500 ms.
/// let b = Policy::required("B").cap(ms(500)).floor(ms(100));
/// let deadline = Deadline::after(Instant::ZERO, ms(2_000));
/// let now = Instant::from_millis(300);
/// let limits = call_timeout(&b, deadline, ms(0), now).limits().unwrap();
/// assert_eq!(HOP.outgoing(limits.deadline(), now), Ok(ms(498)));
/// assert_eq!(HOP.encode_deadline_ms(limits.deadline(), now).unwrap().as_str(), "498");
///
/// // At the deadline, or within the allowance of it, nothing is sent.
/// assert_eq!(HOP.outgoing(deadline, Instant::from_millis(1_999)), Err(WireError::Spent));
///
/// // A client that claims a day gets the server's maximum.
/// let local = HOP.decode_deadline_ms(b"86400000", now).unwrap();
/// assert_eq!(local.remaining(now), ms(5_000));
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
#[non_exhaustive]
pub struct Propagation {
    /// Subtracted from the time left before it is sent: the network's share of one hop (the
    /// trip there and back, serialization). A few milliseconds within a data center.
    pub allowance: Duration,
    /// The largest budget this server accepts from a caller: incoming budgets are clamped to
    /// it, whatever the header says.
    pub max: Duration,
}

/// The deadline headers of an incoming request, as the bytes of each one's first value (see
/// [`Propagation::incoming_deadline`]).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct Incoming<'a> {
    /// `grpc-timeout`.
    pub grpc_timeout: Option<&'a [u8]>,
    /// `connect-timeout-ms`.
    pub connect_timeout_ms: Option<&'a [u8]>,
    /// `x-deadline-ms`.
    pub x_deadline_ms: Option<&'a [u8]>,
}

impl Incoming<'_> {
    /// No deadline header at all.
    pub const NONE: Incoming<'static> = Incoming {
        grpc_timeout: None,
        connect_timeout_ms: None,
        x_deadline_ms: None,
    };
}

/// Which deadline headers an outgoing request carries (see [`Propagation::encode_headers`]).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct HeaderSet {
    /// `grpc-timeout`, for gRPC peers.
    pub grpc_timeout: bool,
    /// `x-deadline-ms`, whole milliseconds.
    pub x_deadline_ms: bool,
    /// `connect-timeout-ms`, for Connect peers.
    pub connect_timeout_ms: bool,
}

/// The values of an outgoing request's deadline headers (see
/// [`Propagation::encode_headers`]): one for each header of the [`HeaderSet`].
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Outgoing {
    /// `grpc-timeout`'s value, if it is sent.
    pub grpc_timeout: Option<GrpcTimeout>,
    /// `x-deadline-ms`'s value, if it is sent.
    pub x_deadline_ms: Option<DeadlineMs>,
    /// `connect-timeout-ms`'s value, if it is sent.
    pub connect_timeout_ms: Option<ConnectTimeout>,
}

impl Propagation {
    /// Keeps back 5 ms per hop when sending; clamps incoming budgets to 30 s. Adjust with
    /// [`allowance`](Self::allowance) and [`max`](Self::max).
    pub const DEFAULT: Propagation = Propagation {
        allowance: Duration::from_millis(5),
        max: Duration::from_secs(30),
    };

    /// The same propagation, keeping back `allowance` when sending: the network's share of
    /// one hop.
    #[must_use]
    pub const fn allowance(mut self, allowance: Duration) -> Self {
        self.allowance = allowance;
        self
    }

    /// The same propagation, clamping incoming budgets to `max`.
    #[must_use]
    pub const fn max(mut self, max: Duration) -> Self {
        self.max = max;
        self
    }

    /// The budget to send at `now` for work that must end by `deadline`: the time left minus
    /// the allowance (saturating).
    ///
    /// # Errors
    ///
    /// [`WireError::Spent`] when that is zero: do not make the call.
    pub fn outgoing(&self, deadline: Deadline, now: Instant) -> Result<Duration, WireError> {
        let left = duration_saturating_sub(deadline.remaining(now), self.allowance);
        if left.is_zero() {
            Err(WireError::Spent)
        } else {
            Ok(left)
        }
    }

    /// The budget to send at `now` for work that must end by `deadline`, on a request that
    /// already carries a timeout of its own (`already`, decoded from the header a caller set,
    /// such as tonic's `Request::set_timeout`): [`outgoing`](Propagation::outgoing), but never
    /// more than `already`. A shorter timeout already on the request wins; a longer one is
    /// replaced by the time left.
    ///
    /// ```
    /// use deadline_core::wire::{Propagation, WireError};
    /// use deadline_core::{Deadline, Instant, ms};
    ///
    /// let hop = Propagation::DEFAULT.allowance(ms(5)).max(ms(10_000));
    /// let now = Instant::ZERO;
    /// let deadline = Deadline::after(now, ms(1_000));
    /// // The request asks for 50 ms: 50 ms is sent, not 995.
    /// assert_eq!(hop.outgoing_within(deadline, now, Some(ms(50))), Ok(ms(50)));
    /// // It asks for 5 s: the time left, 995 ms, is sent.
    /// assert_eq!(hop.outgoing_within(deadline, now, Some(ms(5_000))), Ok(ms(995)));
    /// assert_eq!(hop.outgoing_within(deadline, now, None), Ok(ms(995)));
    /// // A zero timeout on the request: nothing to send, no call.
    /// assert_eq!(hop.outgoing_within(deadline, now, Some(ms(0))), Err(WireError::Spent));
    /// ```
    ///
    /// # Errors
    ///
    /// [`WireError::Spent`] when the result is zero: do not make the call.
    pub fn outgoing_within(
        &self,
        deadline: Deadline,
        now: Instant,
        already: Option<Duration>,
    ) -> Result<Duration, WireError> {
        let left = self.outgoing(deadline, now)?;
        match already {
            Some(already) if already.is_zero() => Err(WireError::Spent),
            Some(already) => Ok(duration_min(left, already)),
            None => Ok(left),
        }
    }

    /// One hop of a request: the time left for work that must end by `deadline` is written
    /// into `x-deadline-ms` when it is sent at `sent`, and read back by the next service when it
    /// arrives there at `arrived`, on that service's clock ([`encode_deadline_ms`] then
    /// [`decode_deadline_ms`]): what the next service's deadline is.
    ///
    /// [`encode_deadline_ms`]: Propagation::encode_deadline_ms
    /// [`decode_deadline_ms`]: Propagation::decode_deadline_ms
    ///
    /// ```
    /// use deadline_core::wire::{Propagation, WireError};
    /// use deadline_core::{Deadline, Instant, ms};
    ///
    /// let hop = Propagation::DEFAULT.allowance(ms(5)).max(ms(10_000));
    /// let deadline = Deadline::after(Instant::ZERO, ms(200));
    /// // Sent at 50 ms with 145 ms to send, it arrives 2 ms later: 145 ms from then.
    /// let next = hop.hop(deadline, Instant::from_millis(50), Instant::from_millis(52)).unwrap();
    /// assert_eq!(next.instant(), Instant::from_millis(197));
    /// // Nothing left to send: the call is not made.
    /// let spent = hop.hop(deadline, Instant::from_millis(196), Instant::from_millis(198));
    /// assert_eq!(spent, Err(WireError::Spent));
    /// ```
    ///
    /// # Errors
    ///
    /// [`WireError::Spent`] when nothing is left to send: do not make the call.
    pub fn hop(
        &self,
        deadline: Deadline,
        sent: Instant,
        arrived: Instant,
    ) -> Result<Deadline, WireError> {
        let header = self.encode_deadline_ms(deadline, sent)?;
        self.decode_deadline_ms(header.as_bytes(), arrived)
    }

    /// The local deadline for a request that arrived at `now` with `budget`:
    /// `now + min(budget, max)`, saturating. A zero budget gives a deadline that has already
    /// passed.
    ///
    /// ```
    /// use deadline_core::wire::Propagation;
    /// use deadline_core::{Instant, ms};
    ///
    /// let server = Propagation::DEFAULT.allowance(ms(0)).max(ms(1_000));
    /// let now = Instant::from_millis(40);
    /// assert_eq!(server.incoming(ms(250), now).instant(), Instant::from_millis(290));
    /// assert_eq!(server.incoming(ms(9_000), now).instant(), Instant::from_millis(1_040));
    /// ```
    #[must_use]
    pub fn incoming(&self, budget: Duration, now: Instant) -> Deadline {
        Deadline::after(now, duration_min(budget, self.max))
    }

    /// The `grpc-timeout` value to send at `now` for work that must end by `deadline`:
    /// [`outgoing`](Propagation::outgoing), encoded (rounded down).
    ///
    /// # Errors
    ///
    /// [`WireError::Spent`] when nothing is left to send: do not make the call.
    pub fn encode_grpc_timeout(
        &self,
        deadline: Deadline,
        now: Instant,
    ) -> Result<GrpcTimeout, WireError> {
        self.outgoing(deadline, now)
            .and_then(GrpcTimeout::from_duration)
    }

    /// The `x-deadline-ms` value to send at `now` for work that must end by `deadline`:
    /// [`outgoing`](Propagation::outgoing), in whole milliseconds (rounded down).
    ///
    /// # Errors
    ///
    /// [`WireError::Spent`] when less than one millisecond is left to send: do not make the
    /// call.
    pub fn encode_deadline_ms(
        &self,
        deadline: Deadline,
        now: Instant,
    ) -> Result<DeadlineMs, WireError> {
        self.outgoing(deadline, now)
            .and_then(DeadlineMs::from_duration)
    }

    /// The `connect-timeout-ms` value to send at `now` for work that must end by `deadline`:
    /// [`outgoing`](Propagation::outgoing), in whole milliseconds (rounded down).
    ///
    /// ```
    /// use deadline_core::wire::Propagation;
    /// use deadline_core::{Deadline, Instant, ms};
    ///
    /// let hop = Propagation::DEFAULT.allowance(ms(5)).max(ms(10_000));
    /// let deadline = Deadline::after(Instant::ZERO, ms(300));
    /// let sent = hop.encode_connect_timeout(deadline, Instant::from_millis(6)).unwrap();
    /// assert_eq!(sent.as_str(), "289");
    /// let local = hop.decode_connect_timeout(sent.as_bytes(), Instant::ZERO).unwrap();
    /// assert_eq!(local.remaining(Instant::ZERO), ms(289));
    /// ```
    ///
    /// # Errors
    ///
    /// [`WireError::Spent`] when less than one millisecond is left to send: do not make the
    /// call.
    pub fn encode_connect_timeout(
        &self,
        deadline: Deadline,
        now: Instant,
    ) -> Result<ConnectTimeout, WireError> {
        self.outgoing(deadline, now)
            .and_then(ConnectTimeout::from_duration)
    }

    /// The local deadline for a request that arrived at `now` with this `connect-timeout-ms`
    /// value: [`ConnectTimeout::parse`], then [`incoming`](Propagation::incoming).
    ///
    /// # Errors
    ///
    /// A decoding error from [`ConnectTimeout::parse`].
    pub fn decode_connect_timeout(
        &self,
        value: &[u8],
        now: Instant,
    ) -> Result<Deadline, WireError> {
        ConnectTimeout::parse(value).map(|t| self.incoming(t.duration(), now))
    }

    /// The deadline of a request that arrived at `now` with these deadline headers: the one
    /// rule every server layer follows.
    ///
    /// `grpc-timeout` is read if the request has one, else `connect-timeout-ms`, else
    /// `x-deadline-ms`; the other headers are not looked at (a malformed `x-deadline-ms` beside
    /// a good `grpc-timeout` is no error). The whitespace around a value is removed first, as
    /// HTTP allows it there. A request with none of them gets `default_budget`. Every budget
    /// is clamped to [`max`](Propagation::max).
    ///
    /// ```
    /// use deadline_core::wire::{Incoming, Propagation, WireError};
    /// use deadline_core::{Instant, ms};
    ///
    /// let server = Propagation::DEFAULT.allowance(ms(5)).max(ms(10_000));
    /// let now = Instant::ZERO;
    /// let both = Incoming { grpc_timeout: Some(b" 200m"), x_deadline_ms: Some(b"-1"), ..Incoming::NONE };
    /// assert_eq!(server.incoming_deadline(both, ms(1_000), now).unwrap().remaining(now), ms(200));
    /// let none = server.incoming_deadline(Incoming::NONE, ms(1_000), now).unwrap();
    /// assert_eq!(none.remaining(now), ms(1_000));
    /// let bad = Incoming { x_deadline_ms: Some(b"50ms"), ..Incoming::NONE };
    /// assert_eq!(
    ///     server.incoming_deadline(bad, ms(1_000), now),
    ///     Err(("x-deadline-ms", WireError::InvalidDigit))
    /// );
    /// ```
    ///
    /// # Errors
    ///
    /// The header that was read and could not be decoded, with why: answer
    /// [`Error::MalformedDeadline`] (HTTP 400, gRPC `INVALID_ARGUMENT`), naming it.
    pub fn incoming_deadline(
        &self,
        headers: Incoming<'_>,
        default_budget: Duration,
        now: Instant,
    ) -> Result<Deadline, (&'static str, WireError)> {
        if let Some(value) = headers.grpc_timeout {
            self.decode_grpc_timeout(value.trim_ascii(), now)
                .map_err(|error| (GRPC_TIMEOUT, error))
        } else if let Some(value) = headers.connect_timeout_ms {
            self.decode_connect_timeout(value.trim_ascii(), now)
                .map_err(|error| (CONNECT_TIMEOUT_MS, error))
        } else if let Some(value) = headers.x_deadline_ms {
            self.decode_deadline_ms(value.trim_ascii(), now)
                .map_err(|error| (X_DEADLINE_MS, error))
        } else {
            Ok(self.incoming(default_budget, now))
        }
    }

    /// The values of the headers in `set`, for `left` to send: all of them, or none. Under
    /// a millisecond, `x-deadline-ms` and `connect-timeout-ms` cannot carry the time left, and
    /// then nothing is sent (rather than leave a peer that reads one of them with no deadline
    /// at all).
    ///
    /// ```
    /// use core::time::Duration;
    /// use deadline_core::wire::{HeaderSet, Propagation, WireError};
    /// use deadline_core::ms;
    ///
    /// let hop = Propagation::DEFAULT.allowance(ms(5)).max(ms(10_000));
    /// let both = HeaderSet { grpc_timeout: true, x_deadline_ms: true, connect_timeout_ms: false };
    /// let out = hop.encode_headers(ms(145), both).unwrap();
    /// assert_eq!(out.grpc_timeout.unwrap().as_str(), "145000u");
    /// assert_eq!(out.x_deadline_ms.unwrap().as_str(), "145");
    /// assert!(out.connect_timeout_ms.is_none());
    /// // Half a millisecond: grpc-timeout could say it, x-deadline-ms cannot; neither is sent.
    /// assert_eq!(hop.encode_headers(Duration::from_micros(500), both), Err(WireError::Spent));
    /// ```
    ///
    /// # Errors
    ///
    /// [`WireError::Spent`] when one of them cannot carry `left`: do not make the call.
    pub fn encode_headers(&self, left: Duration, set: HeaderSet) -> Result<Outgoing, WireError> {
        Ok(Outgoing {
            grpc_timeout: set
                .grpc_timeout
                .then(|| GrpcTimeout::from_duration(left))
                .transpose()?,
            x_deadline_ms: set
                .x_deadline_ms
                .then(|| DeadlineMs::from_duration(left))
                .transpose()?,
            connect_timeout_ms: set
                .connect_timeout_ms
                .then(|| ConnectTimeout::from_duration(left))
                .transpose()?,
        })
    }

    /// The local deadline for a request that arrived at `now` with this `grpc-timeout` value:
    /// [`GrpcTimeout::parse`], then [`incoming`](Propagation::incoming).
    ///
    /// # Errors
    ///
    /// A decoding error from [`GrpcTimeout::parse`]. What to do then (reject the request, or
    /// use a default budget) is the server's choice.
    pub fn decode_grpc_timeout(&self, value: &[u8], now: Instant) -> Result<Deadline, WireError> {
        GrpcTimeout::parse(value).map(|t| self.incoming(t.duration(), now))
    }

    /// The local deadline for a request that arrived at `now` with this `x-deadline-ms`
    /// value: [`DeadlineMs::parse`], then [`incoming`](Propagation::incoming).
    ///
    /// # Errors
    ///
    /// A decoding error from [`DeadlineMs::parse`].
    pub fn decode_deadline_ms(&self, value: &[u8], now: Instant) -> Result<Deadline, WireError> {
        DeadlineMs::parse(value).map(|t| self.incoming(t.duration(), now))
    }
}

/// Writes `value` (at most 99 999 999) in ASCII digits at the front of `bytes` and returns how
/// many digits that is (1 to 8, no leading zeros; zero is one digit): eight at once on 64-bit
/// targets ([`eight_ascii_digits_swar`]); on 32-bit ones, where that takes more code, the
/// digit loop the other headers share ([`write_decimal`], in `u32` for such a value).
fn grpc_digits(value: u32, bytes: &mut [u8; 9]) -> usize {
    #[cfg(target_pointer_width = "64")]
    {
        let (ascii, n) = eight_ascii_digits_swar(value);
        if let Some(head) = bytes.first_chunk_mut::<8>() {
            *head = ascii.to_le_bytes();
        }
        n
    }
    #[cfg(not(target_pointer_width = "64"))]
    {
        write_decimal(u64::from(value), bytes)
    }
}

/// `secs / 3 600`, exactly, for `secs` under 2^52 (and at least the true quotient past that,
/// where callers clamp it to 8 digits anyway): the high half of `secs × ceil(2^64 / 3 600)`,
/// a multiply instead of a 64-bit division. (With `m = ceil(2^64 / 3 600)` and
/// `e = m × 3 600 - 2^64 < 3 600`, `secs × m / 2^64` exceeds `secs / 3 600` by
/// `secs × e / (3 600 × 2^64)`, under `1 / 3 600` while `secs × e < 2^64`.)
const fn hours(secs: u64) -> u32 {
    const M: u64 = u64::MAX / 3_600 + 1;
    let h = mul_wide(secs, M).0;
    if h > u32::MAX as u64 {
        u32::MAX
    } else {
        h as u32
    }
}

/// `value` (at most 99 999 999) in ASCII digits, the first digit in the lowest byte, and how
/// many digits that is (1 to 8, no leading zeros; zero is one digit).
///
/// All eight at once, in one `u64`: `value` is split into two halves of four digits (a
/// division by 10 000 in u32), each half into two of two and each of those into two digits,
/// in lanes of 32, 16 and 8 bits, by multiply-high divisions that stay inside their lanes.
/// The leading zeros are the low zero bytes, shifted out.
#[cfg_attr(not(target_pointer_width = "64"), allow(dead_code))]
fn eight_ascii_digits_swar(value: u32) -> (u64, usize) {
    const LANES: u64 = 0x0101_0101_0101_0101;
    let high = value / 10_000;
    let low = value.wrapping_sub(high.wrapping_mul(10_000));
    // Lanes of 32 bits, each below 10 000; the first digits in the low lane.
    let x = u64::from(high) | (u64::from(low) << 32);
    // `x / 100` in each lane: `(x × 5 243) >> 19` is exact below 43 699, and the product
    // stays below 2^26 in its lane.
    let q = (x.wrapping_mul(5_243) >> 19) & 0x0000_007F_0000_007F;
    let x = q | (x.wrapping_sub(q.wrapping_mul(100)) << 16);
    // `x / 10` in each 16-bit lane (below 100): `(x × 103) >> 10` is exact below 179.
    let q = (x.wrapping_mul(103) >> 10) & 0x000F_000F_000F_000F;
    let digits = q | (x.wrapping_sub(q.wrapping_mul(10)) << 8);
    // The leading zero digits are the low zero bytes; keep at least one digit.
    let zeros = ((digits.trailing_zeros() / 8) as usize).min(7);
    let ascii = (digits | LANES.wrapping_mul(b'0' as u64)) >> zeros.wrapping_mul(8);
    (ascii, 8usize.wrapping_sub(zeros))
}

/// `value` (2 to 9 bytes: callers check) as its first eight bytes, zero-padded, in a `u64`
/// (the first byte the lowest), and its ninth byte (or zero).
///
/// In two loads of one fixed size (8, 4 or 2 bytes) that overlap in the middle, one from each
/// end of `value`, joined in a register: no `memcpy` call for a copy of `value.len()` bytes,
/// and no load of bytes just stored (a store the processor cannot forward to the load).
#[cfg_attr(not(target_pointer_width = "64"), allow(dead_code))]
fn load_nine(value: &[u8]) -> (u64, u8) {
    let n = value.len();
    // The bytes of the last chunk go to the top of the first `n` (the overlap is the same
    // bytes twice, so or-ing them changes nothing); `n - W` is below 8.
    let shift = |w: usize| (n.saturating_sub(w).wrapping_mul(8) & 63) as u32;
    let head = match (
        value.first_chunk::<8>(),
        value.first_chunk::<4>(),
        value.first_chunk::<2>(),
    ) {
        (Some(first), _, _) => u64::from_le_bytes(*first),
        (None, Some(first), _) => {
            let last = value
                .last_chunk::<4>()
                .map_or(0, |l| u32::from_le_bytes(*l));
            u64::from(u32::from_le_bytes(*first)) | (u64::from(last) << shift(4))
        }
        (None, None, Some(first)) => {
            let last = value
                .last_chunk::<2>()
                .map_or(0, |l| u16::from_le_bytes(*l));
            u64::from(u16::from_le_bytes(*first)) | (u64::from(last) << shift(2))
        }
        (None, None, None) => value.first().map_or(0, |&b| u64::from(b)),
    };
    (head, value.get(8).copied().unwrap_or(0))
}

/// The number that the first `n` bytes of `ascii` (1 to 8 of them, the first the lowest) write
/// in ASCII digits, or `None` if one of them is not a digit.
///
/// All eight at once, in one `u64` (the first byte the lowest): `^ 0x30` turns a digit into
/// its value in its own byte (any other byte into something above 9), shifting the `n` bytes
/// to the top drops the rest and puts zeros (leading zeros) before them, one test finds a
/// byte above 9 in any lane, and three multiply-and-add steps join neighbouring lanes: pairs
/// of digits, then fours, then all eight.
#[cfg_attr(not(target_pointer_width = "64"), allow(dead_code))]
fn eight_digits_swar(ascii: u64, n: usize) -> Option<u32> {
    const LANES: u64 = 0x0101_0101_0101_0101;
    // `n` is 1 to 8 (callers guarantee it): a shift of 0 to 56 bits.
    let shift = 8usize.wrapping_sub(n).wrapping_mul(8) & 63;
    let d = (ascii ^ LANES.wrapping_mul(b'0' as u64)) << shift;
    // A lane above 9 has a bit in its high half, or gets one by adding 6. (A carry out of a
    // lane only ever comes from a lane already found above 9.)
    if (d | d.wrapping_add(LANES.wrapping_mul(6))) & LANES.wrapping_mul(0xF0) != 0 {
        return None;
    }
    // Each step: a lane times its weight, plus the next lane, kept in the low half of the
    // wider lane. Every value stays under its lane's limit (99, 9 999, 99 999 999).
    let d = d.wrapping_mul(10).wrapping_add(d >> 8) & 0x00FF_00FF_00FF_00FF;
    let d = d.wrapping_mul(100).wrapping_add(d >> 16) & 0x0000_FFFF_0000_FFFF;
    let d = d.wrapping_mul(10_000).wrapping_add(d >> 32);
    // Below 10^8: the low 32 bits are all of it.
    Some(d as u32)
}

/// The checks both headers share, in the order that names the problem best: empty, any
/// whitespace, a leading sign.
fn check_prefix(value: &[u8]) -> Result<(), WireError> {
    match value.first() {
        None => Err(WireError::Empty),
        Some(_) if value.iter().any(u8::is_ascii_whitespace) => Err(WireError::Whitespace),
        Some(b'+' | b'-') => Err(WireError::Sign),
        Some(_) => Ok(()),
    }
}

/// Reads 1 to `max_digits` ASCII digits; a value past `u64::MAX` is [`WireError::TooLarge`].
/// A byte that is not a digit is [`WireError::InvalidDigit`] wherever it is, then too many
/// digits [`WireError::TooManyDigits`], then a value past `u64::MAX`: one pass reads them all.
// One copy on 32-bit targets: every header's parser calls it.
#[cfg_attr(not(target_pointer_width = "64"), inline(never))]
fn parse_digits(digits: &[u8], max_digits: usize) -> Result<u64, WireError> {
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
fn millis_to_send(left: Duration) -> Result<u64, WireError> {
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
fn write_decimal(value: u64, out: &mut [u8]) -> usize {
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
    use super::{
        GrpcTimeout, GrpcUnit, eight_ascii_digits_swar, eight_digits_swar, hours, load_nine,
        write_decimal,
    };

    /// Values to write and read: every value up to 100 000, every 9 973rd after that, and
    /// each power of ten with its neighbours, up to the largest, 99 999 999.
    fn values() -> impl Iterator<Item = u32> {
        let powers = (0..8).flat_map(|e| {
            let p = 10u32.pow(e);
            [p.saturating_sub(1), p, p + 1]
        });
        // Under miri, which runs these a thousand times slower, a sparser grid.
        let (dense, step) = if cfg!(miri) {
            (1_000, 999_983)
        } else {
            (100_000, 9_973)
        };
        (0..dense)
            .chain((dense..100_000_000).step_by(step))
            .chain(powers)
            .chain([99_999_998, 99_999_999])
    }

    /// Both ways of writing eight digits agree with `format!`, and reading them back gives the
    /// value.
    #[test]
    #[cfg_attr(
        miri,
        ignore = "a grid of many thousand cases: run natively, too slow under miri"
    )]
    fn the_digit_writers_and_readers_agree() {
        for value in values() {
            let text = std::format!("{value}");
            let mut written = [0u8; 8];
            let len = write_decimal(u64::from(value), &mut written);
            assert_eq!(&written[..len], text.as_bytes(), "{value}");
            let looped = (u64::from_le_bytes(written), len);
            for (ascii, n) in [eight_ascii_digits_swar(value), looped] {
                assert_eq!(n, text.len(), "{value}");
                let bytes = ascii.to_le_bytes();
                assert_eq!(&bytes[..n], text.as_bytes(), "{value}");
                assert!(bytes[n..].iter().all(|&b| b == 0), "{value}");
                let mut nine = [0u8; 9];
                nine[..8].copy_from_slice(&bytes);
                nine[n] = b'm';
                let head = u64::from_le_bytes(nine[..8].try_into().unwrap());
                assert_eq!(eight_digits_swar(head, n), Some(value), "{value}");
                assert_eq!(load_nine(&nine[..=n]), (head, nine[8]), "{value}");
            }
        }
    }

    /// The eight-digit reader refuses every byte that is not a digit, at every position of
    /// every length, reads the rest as a fold does, and ignores what follows the digits.
    #[test]
    #[cfg_attr(
        miri,
        ignore = "a grid of many thousand cases: run natively, too slow under miri"
    )]
    fn the_digit_reader_refuses_what_is_not_a_digit() {
        for n in 1..=8 {
            for position in 0..n {
                for byte in 0..=255u8 {
                    let mut nine = [b'7'; 9];
                    nine[position] = byte;
                    nine[n] = b'S';
                    let digits = &nine[..n];
                    let folded = digits
                        .iter()
                        .all(u8::is_ascii_digit)
                        .then(|| digits.iter().fold(0, |v, &d| v * 10 + u32::from(d - b'0')));
                    let head = u64::from_le_bytes(nine[..8].try_into().unwrap());
                    assert_eq!(eight_digits_swar(head, n), folded, "{n} {position} {byte}");
                    assert_eq!(
                        folded.is_some(),
                        byte.is_ascii_digit(),
                        "{n} {position} {byte}"
                    );
                }
            }
        }
    }

    /// The one-pass reading of a well-formed `grpc-timeout` value and the careful one (the
    /// only one on 32-bit targets) give the same value, leading zeros or not.
    #[test]
    #[cfg_attr(
        miri,
        ignore = "a grid of many thousand cases: run natively, too slow under miri"
    )]
    fn both_grpc_readings_agree() {
        for value in values() {
            for unit in GrpcUnit::ALL {
                for zeros in 0..8 {
                    let digits = std::format!("{value}");
                    if digits.len() + zeros > 8 {
                        break;
                    }
                    let text = std::format!(
                        "{}{digits}{}",
                        "0".repeat(zeros),
                        char::from(unit.as_byte())
                    );
                    let fast = GrpcTimeout::parse_well_formed(text.as_bytes());
                    assert!(fast.is_some(), "{text}");
                    assert_eq!(
                        fast,
                        GrpcTimeout::parse_carefully(text.as_bytes()).ok(),
                        "{text}"
                    );
                }
            }
        }
    }

    /// `write_decimal` writes every `u64` as `format!` does, past `u32::MAX` too.
    #[test]
    #[cfg_attr(
        miri,
        ignore = "a grid of many thousand cases: run natively, too slow under miri"
    )]
    fn write_decimal_writes_every_width() {
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
        }
    }

    /// `load_nine` reads every length from 2 to 9, with zeros after.
    #[test]
    #[cfg_attr(
        miri,
        ignore = "a grid of many thousand cases: run natively, too slow under miri"
    )]
    fn load_nine_reads_every_length() {
        let source = *b"123456789";
        for len in 2..=9 {
            let mut nine = [0u8; 9];
            nine[..len].copy_from_slice(&source[..len]);
            let head = u64::from_le_bytes(nine[..8].try_into().unwrap());
            assert_eq!(load_nine(&source[..len]), (head, nine[8]), "{len}");
        }
    }

    /// `hours` is `secs / 3 600` (at most `u32::MAX`) below 2^52 seconds, past the range
    /// `from_duration` uses it in, and at least that beyond.
    #[test]
    #[cfg_attr(
        miri,
        ignore = "a grid of many thousand cases: run natively, too slow under miri"
    )]
    fn hours_is_the_quotient() {
        let mut x = 0x9E37_79B9_7F4A_7C15_u64;
        let mut samples = std::vec![0, 1, 3_599, 3_600, 3_601, 6_000_000_000, 360_000_000_000];
        for _ in 0..100_000 {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            samples.extend([x >> 12, x >> 25, x]);
        }
        for secs in samples {
            let want = (secs / 3_600).min(u64::from(u32::MAX));
            let got = u64::from(hours(secs));
            if secs < 1 << 52 {
                assert_eq!(got, want, "{secs}");
            } else {
                assert!(got >= want, "{secs}");
            }
        }
    }
}
