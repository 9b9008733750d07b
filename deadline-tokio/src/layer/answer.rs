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
#[derive(Clone, Copy, Debug)]
pub(crate) struct Asked {
    head: bool,
    content_type: Option<Kept>,
}

/// What a request's answer repeats of its `content-type` ([`ContentType::repeated`]: its media
/// type and codec), copied: up to [`Kept::CAPACITY`] bytes (`application/grpc-web+flatbuffers`
/// is 32); a longer one is not kept, and the answer names protobuf. Copied, not kept as the
/// request's `HeaderValue`, so that the response future of every request has nothing more to
/// drop: with a `Box<HeaderValue>` in it, a request through `DeadlineLayer` around an axum
/// router took 92 more instructions in process, with these bytes 44 (`bash
/// scripts/instructions.sh axum_request axum_request_deadline_layer_around`: 14 461 and
/// 14 414, against 14 369 with no content type kept).
#[derive(Clone, Copy, Debug)]
struct Kept {
    len: u8,
    bytes: [u8; Kept::CAPACITY],
}

impl Kept {
    /// The longest `content-type` kept.
    const CAPACITY: usize = 32;

    /// What the answer repeats of `value`, if it is no longer than
    /// [`CAPACITY`](Self::CAPACITY).
    fn of(value: &HeaderValue) -> Option<Kept> {
        let value = ContentType::repeated(value.as_bytes());
        let len = u8::try_from(value.len())
            .ok()
            .filter(|len| usize::from(*len) <= Self::CAPACITY)?;
        let mut bytes = [0; Self::CAPACITY];
        bytes[..value.len()].copy_from_slice(value);
        Some(Kept { len, bytes })
    }

    /// The `content-type` kept.
    fn value(&self) -> &[u8] {
        &self.bytes[..usize::from(self.len)]
    }
}

impl Asked {
    /// What the answer to `request`, in `protocol`, needs of it.
    pub(crate) fn of<B>(request: &Request<B>, protocol: Protocol) -> Asked {
        Asked {
            // HTTP/2 servers send what they are given, and its clients reset a stream whose
            // answer to `HEAD` carries a body.
            head: request.method() == http::Method::HEAD,
            content_type: if protocol.answer_repeats_content_type() {
                request
                    .headers()
                    .get(http::header::CONTENT_TYPE)
                    .and_then(Kept::of)
            } else {
                None
            },
        }
    }
}

/// `answer`, as a response whose body is a [`DeadlineBody`]: none at all to a `HEAD` request,
/// whose answer has the same status and headers but for the length.
pub(crate) fn render<B>(answer: Answer, asked: &Asked) -> Response<DeadlineBody<B>> {
    let body = Bytes::copy_from_slice(answer.body_to(asked.head).as_bytes());
    let mut response = Response::new(DeadlineBody::answer(body));
    *response.status_mut() =
        StatusCode::from_u16(answer.status()).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
    let headers = response.headers_mut();
    let content_type = match (answer.content_type(), &asked.content_type) {
        (ContentType::Fixed(fixed), _) => fixed.as_bytes(),
        (ContentType::Request { .. }, Some(kept)) => kept.value(),
        // Longer than what is kept.
        (ContentType::Request { fallback }, None) => fallback.as_bytes(),
    };
    set(headers, CONTENT_TYPE, content_type);
    if let Some(code) = answer.grpc_status() {
        set(headers, GRPC_STATUS, code.as_u8().to_string().as_bytes());
        set(headers, GRPC_MESSAGE, answer.message().as_bytes());
    }
    response
}
