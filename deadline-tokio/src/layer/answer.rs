//! The core's [`Answer`] as an `http` response.

use bytes::Bytes;
use deadline_core::wire::{Answer, CONTENT_TYPE, GRPC_MESSAGE, GRPC_STATUS};
use http::{Response, StatusCode};

use super::headers::set;
use super::server_body::DeadlineBody;

/// `answer`, as a response whose body is a [`DeadlineBody`]: none at all to a `HEAD` request
/// (`head`), whose answer has the same status and headers but for the length.
pub(crate) fn render<B>(answer: Answer, head: bool) -> Response<DeadlineBody<B>> {
    let body = if head {
        Bytes::new()
    } else {
        Bytes::copy_from_slice(answer.body().as_bytes())
    };
    let mut response = Response::new(DeadlineBody::answer(body));
    *response.status_mut() =
        StatusCode::from_u16(answer.status()).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
    let headers = response.headers_mut();
    set(headers, CONTENT_TYPE, answer.content_type().as_bytes());
    if let Some(code) = answer.grpc_status() {
        set(headers, GRPC_STATUS, code.as_u8().to_string().as_bytes());
        set(headers, GRPC_MESSAGE, answer.message().as_bytes());
    }
    response
}
