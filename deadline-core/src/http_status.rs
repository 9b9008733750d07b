//! `From<..> for http::StatusCode` (feature `http`): `?` in an HTTP handler (axum, hyper)
//! answers with the status of the library's error, or of a failed dependency call.

use crate::error::Error;

/// The error's HTTP status ([`Error::http_status`]): 504 for a deadline or a timeout.
///
/// ```
/// use deadline_core::Error;
///
/// assert_eq!(http::StatusCode::from(Error::DeadlineExceeded), http::StatusCode::GATEWAY_TIMEOUT);
/// ```
impl From<Error> for http::StatusCode {
    fn from(error: Error) -> Self {
        status(error.http_status())
    }
}

/// The status of a failed dependency call ([`CallError::http_status`](crate::CallError::http_status)):
/// 504 for a deadline, a timeout or a skip, 503 for an open breaker, 502 for the dependency's
/// own failure.
///
/// ```
/// use deadline_core::CallError;
///
/// let failed = CallError::Attempt("connection reset");
/// assert_eq!(http::StatusCode::from(failed), http::StatusCode::BAD_GATEWAY);
/// ```
#[cfg(feature = "drive")]
impl<E> From<crate::drive::CallError<E>> for http::StatusCode {
    fn from(error: crate::drive::CallError<E>) -> Self {
        status(error.http_status())
    }
}

/// A status the library produces (every one is valid), or 500 if it were not.
fn status(code: u16) -> http::StatusCode {
    http::StatusCode::from_u16(code).unwrap_or(http::StatusCode::INTERNAL_SERVER_ERROR)
}
