//! [`PropagateError`]: the error of a [`PropagateLayer`](super::PropagateLayer)'s service.

use core::fmt;

use deadline_core::Error;

/// The error of a [`PropagateService`](super::PropagateService): the deadline's, or the inner
/// service's.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum PropagateError<E> {
    /// No time was left: the request was not made because nothing was left to send after
    /// the allowance, or it was dropped when the time sent ran out, or it failed in a way
    /// that is the deadline's. Always [`Error::DeadlineExceeded`] (HTTP 504, gRPC
    /// `DEADLINE_EXCEEDED`).
    Deadline(Error),
    /// The inner service failed.
    Inner(E),
}

impl<E> PropagateError<E> {
    /// The deadline error, if that is what this is.
    pub fn deadline(&self) -> Option<Error> {
        match self {
            PropagateError::Deadline(error) => Some(*error),
            PropagateError::Inner(_) => None,
        }
    }

    /// The inner service's error, if that is what this is.
    pub fn into_inner(self) -> Option<E> {
        match self {
            PropagateError::Deadline(_) => None,
            PropagateError::Inner(error) => Some(error),
        }
    }
}

impl<E: fmt::Display> fmt::Display for PropagateError<E> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            PropagateError::Deadline(error) => error.fmt(f),
            PropagateError::Inner(error) => error.fmt(f),
        }
    }
}

/// The error's source: the inner service's error, or for a deadline the core [`Error`]; with
/// feature `tonic`, a deadline's source is a `tonic::Status` with `DEADLINE_EXCEEDED` instead,
/// which a tonic client finds when it turns a service error into a status (without it,
/// tonic would report `UNKNOWN`).
impl<E: core::error::Error + 'static> core::error::Error for PropagateError<E> {
    fn source(&self) -> Option<&(dyn core::error::Error + 'static)> {
        match self {
            #[cfg(feature = "tonic")]
            PropagateError::Deadline(error) => Some(super::tonic_status::status_of(*error)),
            #[cfg(not(feature = "tonic"))]
            PropagateError::Deadline(error) => Some(error),
            PropagateError::Inner(error) => Some(error),
        }
    }
}

/// `?` in an axum or hyper handler: the deadline's error is its status (504), the inner
/// service's a 502 (Bad Gateway).
///
/// ```
/// use deadline_core::Error;
/// use deadline_tokio::layer::PropagateError;
/// use http::StatusCode;
///
/// let spent: PropagateError<std::io::Error> = PropagateError::Deadline(Error::DeadlineExceeded);
/// assert_eq!(StatusCode::from(spent), StatusCode::GATEWAY_TIMEOUT);
/// ```
impl<E> From<PropagateError<E>> for http::StatusCode {
    fn from(error: PropagateError<E>) -> Self {
        match error {
            PropagateError::Deadline(error) => error.into(),
            // The core's status for a dependency's own failure (502).
            PropagateError::Inner(error) => deadline_core::CallError::Attempt(error).into(),
        }
    }
}

/// `?` in a tonic handler: the deadline's error is its status (`DEADLINE_EXCEEDED`); the
/// inner service's becomes a status as tonic makes one of any error
/// ([`tonic::Status::from_error`]: a status found in its source chain, else `UNKNOWN`).
///
/// ```
/// use deadline_core::Error;
/// use deadline_tokio::layer::PropagateError;
///
/// let spent: PropagateError<std::io::Error> = PropagateError::Deadline(Error::DeadlineExceeded);
/// assert_eq!(tonic::Status::from(spent).code(), tonic::Code::DeadlineExceeded);
/// ```
#[cfg(feature = "tonic")]
impl<E> From<PropagateError<E>> for tonic::Status
where
    E: Into<Box<dyn std::error::Error + Send + Sync>>,
{
    fn from(error: PropagateError<E>) -> Self {
        match error {
            PropagateError::Deadline(error) => tonic::Status::from(error),
            PropagateError::Inner(error) => tonic::Status::from_error(error.into()),
        }
    }
}
