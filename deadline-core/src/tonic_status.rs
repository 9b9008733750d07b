//! `From<Error> for tonic::Status` (feature `tonic`): `?` in a tonic handler answers with the
//! error's gRPC status.

use alloc::string::ToString;

use crate::error::Error;

/// The error's gRPC status ([`Error::grpc_code`]), with its [`Display`](core::fmt::Display)
/// text as the message.
///
/// ```
/// use deadline_core::Error;
///
/// let status = tonic::Status::from(Error::DeadlineExceeded);
/// assert_eq!(status.code(), tonic::Code::DeadlineExceeded);
/// assert_eq!(status.message(), "deadline exceeded");
/// assert_eq!(tonic::Status::from(Error::Shed).code(), tonic::Code::Unavailable);
/// ```
impl From<Error> for tonic::Status {
    fn from(error: Error) -> Self {
        let code = tonic::Code::from_i32(i32::from(error.grpc_code().as_u8()));
        tonic::Status::new(code, error.to_string())
    }
}

/// The status a tonic handler answers with when a call to a dependency fails (`?` on a
/// [`Dependency::run`](crate::Dependency::run) whose attempts return `tonic::Status`): the
/// dependency's own status for its own failure, passed through; `DEADLINE_EXCEEDED` for a
/// dependency skipped for want of time; the library error's status otherwise
/// (`DEADLINE_EXCEEDED` for a deadline or a timeout, never `UNAVAILABLE`).
///
/// ```
/// use deadline_core::Error;
/// use deadline_core::CallError;
///
/// let spent = CallError::<tonic::Status>::Library(Error::Timeout { after: deadline_core::ms(50) });
/// assert_eq!(tonic::Status::from(spent).code(), tonic::Code::DeadlineExceeded);
/// let own = CallError::Attempt(tonic::Status::not_found("no such price"));
/// assert_eq!(tonic::Status::from(own).code(), tonic::Code::NotFound);
/// ```
#[cfg(feature = "drive")]
impl<E: Into<tonic::Status>> From<crate::drive::CallError<E>> for tonic::Status {
    fn from(error: crate::drive::CallError<E>) -> Self {
        use crate::drive::CallError;
        match error {
            CallError::Attempt(e) => e.into(),
            CallError::Library(e) => e.into(),
            CallError::Skipped(s) => tonic::Status::deadline_exceeded(s.error().to_string()),
        }
    }
}
