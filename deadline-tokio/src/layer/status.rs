//! tonic's statuses for the layers' errors (feature `tonic`).

use super::client::PropagateError;

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
