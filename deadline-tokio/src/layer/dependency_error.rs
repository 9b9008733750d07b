//! [`DependencyError`]: why a request sent through a [`DependencyLayer`](crate::DependencyLayer)
//! has no response.

use core::fmt;

use deadline_core::CallError;
use deadline_core::Error;

use super::propagate_error::PropagateError;

/// Why a request sent through a [`DependencyService`](crate::layer::DependencyService) has no response.
///
/// A response of the dependency is the service's `Ok` whatever its status, when the call ends
/// with one, except a response that is the attempt running out of time: a 504 or gRPC
/// `DEADLINE_EXCEEDED` whose pushback, if any, does not say "do not retry" ([`ResponseHead::classify`](deadline_core::wire::ResponseHead::classify)),
/// or a failure of the deadline's shape (a transport error, a 408, 502 or 503, a gRPC
/// `CANCELLED` or `UNAVAILABLE`) that comes once the time sent is running out
/// ([`Sent::is_deadline_failure`](deadline_core::wire::Sent::is_deadline_failure)). The call then ends as the
/// library's timeout ([`Error::Timeout`], counted as one), which answers the same 504 or
/// `DEADLINE_EXCEEDED`.
#[derive(Debug)]
#[non_exhaustive]
pub enum DependencyError<E> {
    /// The call to the dependency ended without a response:
    ///
    /// - [`CallError::Attempt`]: the last attempt failed with the inner service's own error
    ///   (a connection refused or reset, ...), and no retry followed;
    /// - [`CallError::Library`]: the library's error: [`Error::DeadlineExceeded`] (the
    ///   deadline passed, or nothing was left to send), [`Error::Timeout`] (the last
    ///   attempt's timeout fired), [`Error::CircuitOpen`] (the breaker refused the call),
    ///   [`Error::InsufficientTime`] (a required dependency with too little time for it);
    /// - [`CallError::Skipped`]: an optional dependency with too little time for it was not
    ///   called.
    Call(CallError<E>),
    /// The request's body could not be read to be kept for the attempts
    /// ([`DependencyLayer::buffered`](crate::DependencyLayer::buffered)): the body's own error. Nothing was sent.
    Body(Box<dyn core::error::Error + Send + Sync>),
    /// The request's body is longer than the limit of what is kept for the attempts
    /// ([`DependencyLayer::buffered`](crate::DependencyLayer::buffered)). Nothing was sent.
    BodyTooLarge {
        /// The limit, in bytes.
        limit: usize,
    },
}

impl<E> DependencyError<E> {
    /// The call's error, if that is what this is.
    #[must_use]
    pub const fn call_error(&self) -> Option<&CallError<E>> {
        match self {
            DependencyError::Call(error) => Some(error),
            DependencyError::Body(_) | DependencyError::BodyTooLarge { .. } => None,
        }
    }

    /// The library's error the call ended on, if it did.
    #[must_use]
    pub const fn library(&self) -> Option<Error> {
        match self {
            DependencyError::Call(error) => error.library(),
            DependencyError::Body(_) | DependencyError::BodyTooLarge { .. } => None,
        }
    }

    /// The inner service's error the last attempt failed with, if it did.
    #[must_use]
    pub fn into_inner(self) -> Option<E> {
        match self {
            DependencyError::Call(CallError::Attempt(error)) => Some(error),
            _ => None,
        }
    }

    /// An error of the inner service's readiness.
    pub(super) fn of_inner(error: PropagateError<E>) -> Self {
        match error {
            PropagateError::Inner(error) => DependencyError::Call(CallError::Attempt(error)),
            PropagateError::Deadline(error) => DependencyError::Call(CallError::Library(error)),
        }
    }
}

impl<E> From<CallError<E>> for DependencyError<E> {
    fn from(error: CallError<E>) -> Self {
        DependencyError::Call(error)
    }
}

impl<E: fmt::Display> fmt::Display for DependencyError<E> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            DependencyError::Call(error) => error.fmt(f),
            DependencyError::Body(error) => {
                write!(f, "the request body could not be read: {error}")
            }
            DependencyError::BodyTooLarge { limit } => write!(
                f,
                "the request body is longer than the {limit} bytes kept to send it again"
            ),
        }
    }
}

/// The error's source: the inner service's error, or the body's; for the library's error,
/// the core [`Error`], or with feature `tonic` a `tonic::Status` with its gRPC code
/// (`DEADLINE_EXCEEDED`, `UNAVAILABLE`), which a tonic client finds when it turns a service
/// error into a status (without it, tonic would report `UNKNOWN`); with feature `tonic`, a
/// request too long to keep is `RESOURCE_EXHAUSTED` there too.
impl<E: core::error::Error + 'static> core::error::Error for DependencyError<E> {
    fn source(&self) -> Option<&(dyn core::error::Error + 'static)> {
        match self {
            DependencyError::Call(CallError::Attempt(error)) => Some(error),
            #[cfg(feature = "tonic")]
            DependencyError::Call(CallError::Library(error)) => {
                Some(super::tonic_status::status_of(*error))
            }
            #[cfg(feature = "tonic")]
            DependencyError::Call(CallError::Skipped(shortfall)) => {
                Some(super::tonic_status::status_of(shortfall.error()))
            }
            #[cfg(feature = "tonic")]
            DependencyError::BodyTooLarge { .. } => Some(super::tonic_status::too_large()),
            #[cfg(not(feature = "tonic"))]
            DependencyError::Call(CallError::Library(error)) => Some(error),
            DependencyError::Body(error) => Some(&**error),
            _ => None,
        }
    }
}

/// `?` in an axum or hyper handler: the call's error is its status
/// ([`CallError::http_status`]: 504 for a deadline, a timeout or a skip, 503 for an open
/// breaker, 502 for the dependency's own failure); a request body that could not be kept
/// to send again is a 500.
///
/// ```
/// use deadline_core::Error;
/// use deadline_core::CallError;
/// use deadline_tokio::layer::DependencyError;
/// use http::StatusCode;
///
/// let timeout: DependencyError<std::io::Error> =
///     CallError::Library(Error::Timeout { after: deadline_core::ms(50) }).into();
/// assert_eq!(StatusCode::from(timeout), StatusCode::GATEWAY_TIMEOUT);
/// ```
impl<E> From<DependencyError<E>> for http::StatusCode {
    fn from(error: DependencyError<E>) -> Self {
        match error {
            DependencyError::Call(error) => error.into(),
            DependencyError::Body(_) | DependencyError::BodyTooLarge { .. } => {
                http::StatusCode::INTERNAL_SERVER_ERROR
            }
        }
    }
}

/// `?` in a tonic handler: the call's error is its status (the core's `From<CallError>`:
/// `DEADLINE_EXCEEDED` for a deadline, a timeout or a skip, `UNAVAILABLE` for an open
/// breaker); the last attempt's own error becomes a status as tonic makes one of any error
/// ([`tonic::Status::from_error`]); a request body that could not be kept to send again is
/// its body's error, or `RESOURCE_EXHAUSTED` when it was longer than the limit.
///
/// ```
/// use deadline_core::Error;
/// use deadline_core::CallError;
/// use deadline_tokio::layer::DependencyError;
///
/// let timeout: DependencyError<std::io::Error> =
///     CallError::Library(Error::Timeout { after: deadline_core::ms(50) }).into();
/// assert_eq!(tonic::Status::from(timeout).code(), tonic::Code::DeadlineExceeded);
/// let open: DependencyError<std::io::Error> = CallError::Library(Error::CircuitOpen).into();
/// assert_eq!(tonic::Status::from(open).code(), tonic::Code::Unavailable);
/// let inner: DependencyError<tonic::Status> =
///     CallError::Attempt(tonic::Status::not_found("no such price")).into();
/// assert_eq!(tonic::Status::from(inner).code(), tonic::Code::NotFound);
/// ```
#[cfg(feature = "tonic")]
impl<E> From<DependencyError<E>> for tonic::Status
where
    E: Into<Box<dyn std::error::Error + Send + Sync>>,
{
    fn from(error: DependencyError<E>) -> Self {
        match error {
            DependencyError::Call(error) => {
                tonic::Status::from(error.map_attempt(|e| tonic::Status::from_error(e.into())))
            }
            DependencyError::Body(error) => tonic::Status::from_error(error),
            DependencyError::BodyTooLarge { limit } => tonic::Status::resource_exhausted(format!(
                "the request is longer than the {limit} bytes kept to send it again"
            )),
        }
    }
}
