//! The core's [`Answer`] as an `http` response.

use bytes::Bytes;
use deadline_core::wire::{Answer, CONTENT_TYPE, ContentType, GRPC_MESSAGE, GRPC_STATUS, Protocol};
use http::{HeaderValue, Request, Response, StatusCode};

use super::headers::set;
use super::server_body::DeadlineBody;

/// What the layer's own answer to a request needs of the request, kept from its arrival:
/// whether it is a `HEAD` (its answer has no body), and its `content-type` when the answer
/// repeats it ([`Protocol::answer_repeats_content_type`]: a codec other than protobuf or
/// JSON), which is kept only then.
#[derive(Clone, Debug)]
pub(crate) struct Asked {
    head: bool,
    content_type: Option<HeaderValue>,
}

impl Asked {
    /// What the answer to `request`, in `protocol`, needs of it.
    pub(crate) fn of<B>(request: &Request<B>, protocol: Protocol) -> Asked {
        Asked {
            // HTTP/2 servers send what they are given, and its clients reset a stream whose
            // answer to `HEAD` carries a body.
            head: request.method() == http::Method::HEAD,
            content_type: if protocol.answer_repeats_content_type() {
                request.headers().get(http::header::CONTENT_TYPE).cloned()
            } else {
                None
            },
        }
    }
}

/// `answer`, as a response whose body is a [`DeadlineBody`]: none at all to a `HEAD` request,
/// whose answer has the same status and headers but for the length.
pub(crate) fn render<B>(answer: Answer, asked: &Asked) -> Response<DeadlineBody<B>> {
    let body = if asked.head {
        Bytes::new()
    } else {
        Bytes::copy_from_slice(answer.body().as_bytes())
    };
    let mut response = Response::new(DeadlineBody::answer(body));
    *response.status_mut() =
        StatusCode::from_u16(answer.status()).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
    let headers = response.headers_mut();
    match (answer.content_type(), &asked.content_type) {
        (ContentType::Fixed(fixed), _) => set(headers, CONTENT_TYPE, fixed.as_bytes()),
        (ContentType::Request, Some(request)) => {
            headers.insert(http::header::CONTENT_TYPE, request.clone());
        }
        // Kept whenever the protocol says the answer repeats it: the request had none to
        // repeat, which a request read as such a protocol always has.
        (ContentType::Request, None) => {}
    }
    if let Some(code) = answer.grpc_status() {
        set(headers, GRPC_STATUS, code.as_u8().to_string().as_bytes());
        set(headers, GRPC_MESSAGE, answer.message().as_bytes());
    }
    response
}
