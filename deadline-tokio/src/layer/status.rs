//! tonic's statuses for the layers' errors (feature `tonic`).

use std::sync::OnceLock;

use deadline_core::Error;
use deadline_core::drive::CallError;

use super::client::PropagateError;
use super::dependency::DependencyError;

/// A deadline error is its core error's status (`DEADLINE_EXCEEDED`); the inner service's
/// error becomes a status as tonic makes one of any error ([`tonic::Status::from_error`]:
/// a status found in its source chain, else `UNKNOWN`).
///
/// ```
/// use deadline_core::Error;
/// use deadline_tokio::layer::PropagateError;
///
/// let spent: PropagateError<std::io::Error> = PropagateError::Deadline(Error::DeadlineExceeded);
/// assert_eq!(tonic::Status::from(spent).code(), tonic::Code::DeadlineExceeded);
/// ```
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

/// A call that ended on one of the library's errors is that error's status
/// (`DEADLINE_EXCEEDED` for a deadline or a timeout, `UNAVAILABLE` for an open circuit
/// breaker); a skipped call is `DEADLINE_EXCEEDED` (too little time was left for it); the
/// last attempt's own error becomes a status as tonic makes one of any error
/// ([`tonic::Status::from_error`]); a request body that could not be kept to send again is
/// its body's error, or `RESOURCE_EXHAUSTED` when it was longer than the limit.
///
/// ```
/// use deadline_core::Error;
/// use deadline_core::drive::CallError;
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
impl<E> From<DependencyError<E>> for tonic::Status
where
    E: Into<Box<dyn std::error::Error + Send + Sync>>,
{
    fn from(error: DependencyError<E>) -> Self {
        match error {
            DependencyError::Call(CallError::Attempt(error)) => {
                tonic::Status::from_error(error.into())
            }
            DependencyError::Call(CallError::Library(error)) => tonic::Status::from(error),
            DependencyError::Call(CallError::Skipped(shortfall)) => {
                tonic::Status::from(shortfall.error())
            }
            DependencyError::Body(error) => tonic::Status::from_error(error),
            DependencyError::BodyTooLarge { limit } => tonic::Status::resource_exhausted(format!(
                "the request is longer than the {limit} bytes kept to send it again"
            )),
            // A kind of call error this crate does not know of yet: no answer came.
            DependencyError::Call(_) => tonic::Status::unavailable("no answer"),
        }
    }
}

/// The status a library error reads as for a tonic client that finds it in an error's
/// source chain: one value per kind of error for the process (so that an error's
/// `source` can point at it), with the error's gRPC code and its fixed
/// [`reason`](Error::reason) as the message.
pub(crate) fn status_of(error: Error) -> &'static tonic::Status {
    static STATUSES: [OnceLock<tonic::Status>; 7] = [const { OnceLock::new() }; 7];
    let slot = match error {
        Error::InsufficientTime { .. } => 1,
        Error::Timeout { .. } => 2,
        Error::CircuitOpen => 3,
        Error::Shed => 4,
        Error::Throttled => 5,
        Error::MalformedDeadline => 6,
        // `DeadlineExceeded`, and a kind of error added to the core later.
        _ => 0,
    };
    let error = if slot == 0 {
        Error::DeadlineExceeded
    } else {
        error
    };
    STATUSES[slot].get_or_init(|| {
        let code = tonic::Code::from_i32(i32::from(error.grpc_code().as_u8()));
        tonic::Status::new(code, error.reason())
    })
}
