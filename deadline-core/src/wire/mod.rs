//! The time left, on the wire: every protocol rule of the library, as data in and data out.
//!
//! A deadline crosses machines as the *time left*, never as a timestamp, so clock skew between
//! machines does not matter: the receiver turns the budget back into a local [`Deadline`](crate::Deadline)
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
//! - [`Propagation`]: the allowance and the maximum, and the trip from a [`Deadline`](crate::Deadline) to a
//!   header value and back.
//!
//! The codecs write into fixed buffers inside small `Copy` values, never allocate and never
//! panic. Encoding rounds down (a callee is never told it has more time than we do) and refuses
//! to send zero: a spent budget is not sent, because the call is not made
//! ([`WireError::Spent`]).
//!
//! The rules an HTTP or gRPC adapter follows, each one function here, so that every adapter
//! agrees and none decides anything:
//!
//! | job | the rule |
//! |---|---|
//! | a server reads a request's deadline, and refuses what it cannot serve | [`ServerPolicy::accept`] (over [`Incoming::budget`]: the earliest header wins) |
//! | a server answers in the request's protocol | [`Protocol::read`], [`Answer`], [`Protocol::cut`], after whole messages: [`Envelopes::cut`] |
//! | a client writes the time left | [`Propagation::send`] (over the request's [`Incoming`] headers: a shorter timeout already set is kept, and no header it carries tells more than is left) |
//! | a client reads a failure as the deadline's | [`Sent::is_deadline_failure`] |
//! | a client decides whether to retry a response | [`ResponseHead::classify`], [`parse_retry_after`], [`parse_grpc_pushback`] |
//! | gRPC and Connect status codes | [`GrpcCode`] |
//!
//! ```
//! use deadline_core::wire::{GRPC_TIMEOUT, Propagation};
//! use deadline_core::{Deadline, Instant, ms};
//!
//! // Client: 200 ms left at 0 ms; keep 5 ms of it for the network.
//! let client = Propagation::DEFAULT.with_allowance(ms(5)).with_max(ms(30_000));
//! let deadline = Deadline::after(Instant::ZERO, ms(200));
//! let header = client.encode_grpc_timeout(deadline, Instant::ZERO).unwrap();
//! assert_eq!((GRPC_TIMEOUT, header.as_str()), ("grpc-timeout", "195000u"));
//!
//! // Server, on its own clock (which reads 7 s): the local deadline is 195 ms away.
//! let server = Propagation::DEFAULT.with_allowance(ms(5)).with_max(ms(10_000));
//! let arrival = Instant::from_secs(7);
//! let local = server.decode_grpc_timeout(header.as_bytes(), arrival).unwrap();
//! assert_eq!(local.remaining(arrival), ms(195));
//! ```

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

mod answer;
mod digits;
mod envelope;
mod error;
mod grpc_timeout;
mod headers;
mod late;
mod millis;
mod propagation;
mod protocol;
mod response;
mod sent;
mod serve;

pub use crate::admit::{Admission, QueueAdmission};
pub use crate::grpc_code::GrpcCode;
pub use answer::{Answer, ContentType, Cut, Text};
pub use envelope::Envelopes;
pub use error::WireError;
pub use grpc_timeout::{GrpcTimeout, GrpcUnit};
pub use headers::{
    CONNECT_PROTOCOL_VERSION, CONNECT_TIMEOUT_MS, CONTENT_ENCODING, CONTENT_TYPE, DeadlineHeader,
    ENVOY_EXPECTED_RQ_TIMEOUT_MS, ENVOY_UPSTREAM_RQ_TIMEOUT_MS, GRPC_MESSAGE,
    GRPC_RETRY_PUSHBACK_MS, GRPC_STATUS, GRPC_STATUS_DETAILS_BIN, GRPC_TIMEOUT, Incoming,
    Malformed, RETRY_AFTER, X_DEADLINE_MS,
};
pub use late::LateFrames;
pub use millis::{ConnectTimeout, DeadlineMs};
pub use propagation::{Outgoing, Propagation};
pub use protocol::{Codec, Protocol};
pub use response::{ResponseHead, classify_grpc, parse_grpc_pushback, parse_retry_after};
pub use sent::{Failure, Sent};
pub use serve::{FailureWindow, ServerPolicy};
