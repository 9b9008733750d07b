//! [`GrpcCode`]: gRPC's status codes, with their names in gRPC and in the Connect protocol.

use core::fmt;

/// A gRPC status code, as `grpc-status` carries it (gRPC's `statuscodes.md`).
///
/// One table for every protocol the library speaks: its number on the wire
/// ([`as_u8`](Self::as_u8), [`parse`](Self::parse)), its name in gRPC ([`name`](Self::name))
/// and in the Connect protocol ([`connect_name`](Self::connect_name)), and the HTTP status
/// Connect gives a unary error with this code ([`connect_http_status`](Self::connect_http_status)).
///
/// ```
/// use deadline_core::wire::GrpcCode;
///
/// assert_eq!(GrpcCode::parse(b"4"), Some(GrpcCode::DeadlineExceeded));
/// assert_eq!(GrpcCode::DeadlineExceeded.name(), "DEADLINE_EXCEEDED");
/// assert_eq!(GrpcCode::DeadlineExceeded.connect_name(), "deadline_exceeded");
/// assert_eq!(GrpcCode::Cancelled.connect_name(), "canceled");
/// assert_eq!(GrpcCode::parse(b"17"), None);
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
#[repr(u8)]
pub enum GrpcCode {
    /// 0: not an error.
    Ok = 0,
    /// 1: the operation was cancelled, typically by the caller.
    Cancelled = 1,
    /// 2: an error of an unknown kind (also what a client reads for a code it does not know).
    Unknown = 2,
    /// 3: the client sent an argument that is wrong whatever the state of the server (a
    /// malformed `grpc-timeout`).
    InvalidArgument = 3,
    /// 4: the deadline expired before the operation could complete.
    DeadlineExceeded = 4,
    /// 5: some requested entity was not found.
    NotFound = 5,
    /// 6: the entity a client tried to create already exists.
    AlreadyExists = 6,
    /// 7: the caller may not do this.
    PermissionDenied = 7,
    /// 8: some resource has been exhausted, or the caller must slow down.
    ResourceExhausted = 8,
    /// 9: the system is not in the state the operation needs.
    FailedPrecondition = 9,
    /// 10: the operation was aborted (a concurrency conflict, for one).
    Aborted = 10,
    /// 11: the operation went past the valid range.
    OutOfRange = 11,
    /// 12: the operation is not implemented or not supported.
    Unimplemented = 12,
    /// 13: an internal error.
    Internal = 13,
    /// 14: the service is currently unavailable; a retry may succeed.
    Unavailable = 14,
    /// 15: unrecoverable data loss or corruption.
    DataLoss = 15,
    /// 16: the request has no valid authentication credentials.
    Unauthenticated = 16,
}

impl GrpcCode {
    /// Every code, by number.
    pub const ALL: [GrpcCode; 17] = [
        GrpcCode::Ok,
        GrpcCode::Cancelled,
        GrpcCode::Unknown,
        GrpcCode::InvalidArgument,
        GrpcCode::DeadlineExceeded,
        GrpcCode::NotFound,
        GrpcCode::AlreadyExists,
        GrpcCode::PermissionDenied,
        GrpcCode::ResourceExhausted,
        GrpcCode::FailedPrecondition,
        GrpcCode::Aborted,
        GrpcCode::OutOfRange,
        GrpcCode::Unimplemented,
        GrpcCode::Internal,
        GrpcCode::Unavailable,
        GrpcCode::DataLoss,
        GrpcCode::Unauthenticated,
    ];

    /// The number sent in `grpc-status`.
    #[must_use]
    pub const fn as_u8(self) -> u8 {
        self as u8
    }

    /// The code with this number, if there is one.
    #[must_use]
    pub const fn from_u8(number: u8) -> Option<GrpcCode> {
        match number {
            0 => Some(GrpcCode::Ok),
            1 => Some(GrpcCode::Cancelled),
            2 => Some(GrpcCode::Unknown),
            3 => Some(GrpcCode::InvalidArgument),
            4 => Some(GrpcCode::DeadlineExceeded),
            5 => Some(GrpcCode::NotFound),
            6 => Some(GrpcCode::AlreadyExists),
            7 => Some(GrpcCode::PermissionDenied),
            8 => Some(GrpcCode::ResourceExhausted),
            9 => Some(GrpcCode::FailedPrecondition),
            10 => Some(GrpcCode::Aborted),
            11 => Some(GrpcCode::OutOfRange),
            12 => Some(GrpcCode::Unimplemented),
            13 => Some(GrpcCode::Internal),
            14 => Some(GrpcCode::Unavailable),
            15 => Some(GrpcCode::DataLoss),
            16 => Some(GrpcCode::Unauthenticated),
            _ => None,
        }
    }

    /// Reads a `grpc-status` value: ASCII digits (at most three, leading zeros allowed),
    /// with the whitespace around them removed. `None` for anything else, and for a number
    /// that is not a code (a client reads those as [`GrpcCode::Unknown`]).
    #[must_use]
    pub fn parse(value: &[u8]) -> Option<GrpcCode> {
        let digits = value.trim_ascii();
        if digits.is_empty() || digits.len() > 3 {
            return None;
        }
        let mut number: u8 = 0;
        for &byte in digits {
            let digit = byte.wrapping_sub(b'0');
            if digit > 9 {
                return None;
            }
            // At most three digits: at most 999, which `checked_*` keeps out of a `u8`.
            number = number.checked_mul(10)?.checked_add(digit)?;
        }
        GrpcCode::from_u8(number)
    }

    /// The code's name in gRPC: `DEADLINE_EXCEEDED`.
    #[must_use]
    pub const fn name(self) -> &'static str {
        match self {
            GrpcCode::Ok => "OK",
            GrpcCode::Cancelled => "CANCELLED",
            GrpcCode::Unknown => "UNKNOWN",
            GrpcCode::InvalidArgument => "INVALID_ARGUMENT",
            GrpcCode::DeadlineExceeded => "DEADLINE_EXCEEDED",
            GrpcCode::NotFound => "NOT_FOUND",
            GrpcCode::AlreadyExists => "ALREADY_EXISTS",
            GrpcCode::PermissionDenied => "PERMISSION_DENIED",
            GrpcCode::ResourceExhausted => "RESOURCE_EXHAUSTED",
            GrpcCode::FailedPrecondition => "FAILED_PRECONDITION",
            GrpcCode::Aborted => "ABORTED",
            GrpcCode::OutOfRange => "OUT_OF_RANGE",
            GrpcCode::Unimplemented => "UNIMPLEMENTED",
            GrpcCode::Internal => "INTERNAL",
            GrpcCode::Unavailable => "UNAVAILABLE",
            GrpcCode::DataLoss => "DATA_LOSS",
            GrpcCode::Unauthenticated => "UNAUTHENTICATED",
        }
    }

    /// The code's name in the Connect protocol: `deadline_exceeded` (and `canceled`, as
    /// Connect spells it). `ok` for [`GrpcCode::Ok`], which Connect never sends as an error.
    #[must_use]
    pub const fn connect_name(self) -> &'static str {
        match self {
            GrpcCode::Ok => "ok",
            GrpcCode::Cancelled => "canceled",
            GrpcCode::Unknown => "unknown",
            GrpcCode::InvalidArgument => "invalid_argument",
            GrpcCode::DeadlineExceeded => "deadline_exceeded",
            GrpcCode::NotFound => "not_found",
            GrpcCode::AlreadyExists => "already_exists",
            GrpcCode::PermissionDenied => "permission_denied",
            GrpcCode::ResourceExhausted => "resource_exhausted",
            GrpcCode::FailedPrecondition => "failed_precondition",
            GrpcCode::Aborted => "aborted",
            GrpcCode::OutOfRange => "out_of_range",
            GrpcCode::Unimplemented => "unimplemented",
            GrpcCode::Internal => "internal",
            GrpcCode::Unavailable => "unavailable",
            GrpcCode::DataLoss => "data_loss",
            GrpcCode::Unauthenticated => "unauthenticated",
        }
    }

    /// The HTTP status of a Connect unary response failing with this code (the Connect
    /// protocol's table): 504 for `deadline_exceeded`, 503 for `unavailable`, 429 for
    /// `resource_exhausted`, 400 for `invalid_argument`, and so on; 200 for
    /// [`GrpcCode::Ok`].
    #[must_use]
    pub const fn connect_http_status(self) -> u16 {
        match self {
            GrpcCode::Ok => 200,
            GrpcCode::Cancelled => 499,
            GrpcCode::Unknown | GrpcCode::Internal | GrpcCode::DataLoss => 500,
            GrpcCode::InvalidArgument | GrpcCode::FailedPrecondition | GrpcCode::OutOfRange => 400,
            GrpcCode::DeadlineExceeded => 504,
            GrpcCode::NotFound => 404,
            GrpcCode::AlreadyExists | GrpcCode::Aborted => 409,
            GrpcCode::PermissionDenied => 403,
            GrpcCode::ResourceExhausted => 429,
            GrpcCode::Unimplemented => 501,
            GrpcCode::Unavailable => 503,
            GrpcCode::Unauthenticated => 401,
        }
    }
}

impl fmt::Display for GrpcCode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}
