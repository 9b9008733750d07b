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
