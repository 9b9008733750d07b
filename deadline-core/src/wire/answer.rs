//! [`Answer`]: the answer a server makes itself, in each protocol, for a request its handler
//! does not answer; and how a response body still streaming at the deadline ends
//! ([`Protocol::cut`]).

use core::fmt::{self, Write};

use super::headers::Malformed;
use super::protocol::{Codec, Protocol};
use crate::error::Error;
use crate::grpc_code::GrpcCode;

/// The room an [`Answer`]'s texts are written into: the longest, a Connect end-of-stream
/// message naming a malformed Envoy header, takes under 200 bytes.
const ROOM: usize = 256;

/// A short text or body made by the core: printable ASCII (and, for a Connect end-of-stream
/// message, its 5-byte prefix), in a fixed buffer.
#[derive(Clone, PartialEq, Eq, Hash)]
pub struct Text {
    bytes: heapless::Vec<u8, ROOM>,
}

impl Text {
    fn new() -> Text {
        Text {
            bytes: heapless::Vec::new(),
        }
    }

    /// The bytes.
    #[must_use]
    pub fn as_bytes(&self) -> &[u8] {
        &self.bytes
    }

    /// The bytes as text (empty if they are not UTF-8, which only the prefix of a Connect
    /// end-of-stream message or of a gRPC-Web trailer frame can make them).
    #[must_use]
    pub fn as_str(&self) -> &str {
        core::str::from_utf8(&self.bytes).unwrap_or("")
    }

    /// Whether there is nothing.
    #[must_use]
    pub fn is_empty(&self) -> bool {
        self.bytes.is_empty()
    }

    /// Appends `bytes`, as many as fit (the texts made here always fit).
    fn push(&mut self, bytes: &[u8]) {
        for &byte in bytes {
            if self.bytes.push(byte).is_err() {
                return;
            }
        }
    }
}

impl Write for Text {
    fn write_str(&mut self, s: &str) -> fmt::Result {
        self.push(s.as_bytes());
        Ok(())
    }
}

impl fmt::Debug for Text {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(&self.bytes.escape_ascii(), f)
    }
}

impl fmt::Display for Text {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Display::fmt(&self.bytes.escape_ascii(), f)
    }
}

/// An [`Answer`]'s `content-type`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub enum ContentType {
    /// This one.
    Fixed(&'static str),
    /// The request's own media type and codec, as they came
    /// ([`ContentType::repeated`]): the request names a codec other than protobuf or JSON
    /// ([`Codec::Other`]), and a client accepts an answer only in the codec it sent. A server
    /// that could not keep them (a bound on what it keeps of a request) answers with
    /// `fallback`, the protocol's protobuf type: a gRPC client that checks only the type's
    /// prefix reads the status still.
    Request {
        /// The protocol's protobuf type.
        fallback: &'static str,
    },
}

impl ContentType {
    /// What an answer repeats of a request's `content-type` for [`ContentType::Request`]: its
    /// media type and codec, without the parameters or the whitespace before them, which is
    /// what a client compares with the type it sent (connect-go's check is
    /// `application/grpc+` and the codec's name).
    ///
    /// ```
    /// use deadline_core::wire::ContentType;
    ///
    /// assert_eq!(ContentType::repeated(b"application/grpc+cbor"), b"application/grpc+cbor");
    /// assert_eq!(ContentType::repeated(b"application/grpc+Thrift ; charset=utf-8"), b"application/grpc+Thrift");
    /// ```
    #[must_use]
    pub fn repeated(request: &[u8]) -> &[u8] {
        let end = request
            .iter()
            .position(|byte| *byte == b';')
            .unwrap_or(request.len());
        let (kept, _) = request.split_at(end);
        kept.trim_ascii_end()
    }
}

/// The answer a server layer makes itself, in the protocol of the request: for a request it
/// refuses without calling the handler (no time left, shed, a malformed deadline header),
/// and for one whose handler it dropped at the deadline.
///
/// - **gRPC** and **gRPC-Web**: HTTP 200, trailers-only, in the request's codec's content
///   type ([`content_type`](Self::content_type)), with
///   [`grpc_status`](Self::grpc_status) and [`message`](Self::message) in the headers of a
///   response with no body. A gRPC client reads `DEADLINE_EXCEEDED`, never the
///   `UNAVAILABLE` or `INTERNAL` that gRPC's HTTP-to-status table makes of a bare 504, 503 or
///   400.
/// - **Connect, unary**: the HTTP status of the error's Connect code, with Connect's JSON
///   error body, `{"code":"deadline_exceeded","message":"deadline exceeded"}`.
/// - **Connect, streaming**: HTTP 200 and an end-of-stream message carrying that error.
/// - **Plain HTTP**: the error's status ([`Error::http_status`]: 504, 503, 429, 400), with
///   the reason as a short `text/plain` body.
///
/// Every text is fixed: nothing the caller sent is echoed back, but for the `content-type` of
/// a request whose codec the answer cannot name ([`ContentType::Request`]).
///
/// ```
/// use deadline_core::Error;
/// use deadline_core::wire::{Answer, Codec, GrpcCode, Protocol};
///
/// let http = Answer::new(Protocol::Http, Error::DeadlineExceeded);
/// assert_eq!((http.status(), http.body().as_str()), (504, "deadline exceeded\n"));
///
/// let grpc = Answer::new(Protocol::Grpc { codec: Codec::Proto }, Error::DeadlineExceeded);
/// assert_eq!(grpc.status(), 200);
/// assert_eq!(grpc.grpc_status(), Some(GrpcCode::DeadlineExceeded));
/// assert!(grpc.body().is_empty());
///
/// let connect = Answer::new(Protocol::ConnectUnary, Error::Shed);
/// assert_eq!(connect.status(), 503);
/// assert_eq!(
///     connect.body().as_str(),
///     r#"{"code":"unavailable","message":"request shed at admission"}"#,
/// );
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Answer {
    protocol: Protocol,
    error: Error,
    malformed: Option<Malformed>,
}

impl Answer {
    /// The answer to `protocol`'s request for `error`.
    #[must_use]
    pub const fn new(protocol: Protocol, error: Error) -> Answer {
        Answer {
            protocol,
            error,
            malformed: None,
        }
    }

    /// The answer to `protocol`'s request with a deadline header that could not be read:
    /// [`Error::MalformedDeadline`], naming the header and what is wrong with it.
    #[must_use]
    pub const fn malformed(protocol: Protocol, malformed: Malformed) -> Answer {
        Answer {
            protocol,
            error: Error::MalformedDeadline,
            malformed: Some(malformed),
        }
    }

    /// The error answered.
    #[must_use]
    pub const fn error(&self) -> Error {
        self.error
    }

    /// The protocol answered in.
    #[must_use]
    pub const fn protocol(&self) -> Protocol {
        self.protocol
    }

    /// The HTTP status.
    #[must_use]
    pub const fn status(&self) -> u16 {
        match self.protocol {
            Protocol::Grpc { .. } | Protocol::GrpcWeb { .. } | Protocol::ConnectStream { .. } => {
                200
            }
            Protocol::ConnectUnary => self.error.grpc_code().connect_http_status(),
            Protocol::Http => self.error.http_status(),
        }
    }

    /// The `content-type`: fixed, or the request's own when the request's codec is one the
    /// answer cannot name ([`Protocol::answer_repeats_content_type`]).
    ///
    /// ```
    /// use deadline_core::Error;
    /// use deadline_core::wire::{Answer, Codec, ContentType, Protocol};
    ///
    /// let json = Answer::new(Protocol::Grpc { codec: Codec::Json }, Error::DeadlineExceeded);
    /// assert_eq!(json.content_type(), ContentType::Fixed("application/grpc+json"));
    /// let cbor = Answer::new(Protocol::Grpc { codec: Codec::Other }, Error::DeadlineExceeded);
    /// assert_eq!(cbor.content_type(), ContentType::Request { fallback: "application/grpc" });
    /// ```
    #[must_use]
    pub const fn content_type(&self) -> ContentType {
        // Protobuf's name, for a codec the answer cannot name too: the fallback.
        let named = match self.protocol {
            Protocol::Grpc { codec: Codec::Json } => "application/grpc+json",
            Protocol::Grpc { .. } => "application/grpc",
            Protocol::GrpcWeb {
                text: false,
                codec: Codec::Json,
            } => "application/grpc-web+json",
            Protocol::GrpcWeb { text: false, .. } => "application/grpc-web+proto",
            Protocol::GrpcWeb {
                text: true,
                codec: Codec::Json,
            } => "application/grpc-web-text+json",
            Protocol::GrpcWeb { text: true, .. } => "application/grpc-web-text+proto",
            Protocol::ConnectUnary => "application/json",
            Protocol::ConnectStream { codec: Codec::Json } => "application/connect+json",
            Protocol::ConnectStream { .. } => "application/connect+proto",
            Protocol::Http => "text/plain; charset=utf-8",
        };
        if self.protocol.answer_repeats_content_type() {
            ContentType::Request { fallback: named }
        } else {
            ContentType::Fixed(named)
        }
    }

    /// The `grpc-status` to put in the response's head, for a gRPC answer (trailers-only).
    #[must_use]
    pub const fn grpc_status(&self) -> Option<GrpcCode> {
        match self.protocol {
            Protocol::Grpc { .. } | Protocol::GrpcWeb { .. } => Some(self.error.grpc_code()),
            _ => None,
        }
    }

    /// What the answer says, in a few fixed words: the error's reason
    /// ([`Error::reason`]), or for a malformed header which one and what is wrong
    /// (`malformed grpc-timeout header: header value has a sign`). Printable ASCII without
    /// `%`, so it is a valid `grpc-message` as it is.
    #[must_use]
    pub fn message(&self) -> Text {
        let mut text = Text::new();
        // Writing into a `Text` never fails.
        let _ = match self.malformed {
            Some(malformed) => write!(
                text,
                "malformed {} header: {}",
                malformed.header(),
                malformed.error().reason()
            ),
            None => text.write_str(self.error.reason()),
        };
        text
    }

    /// The response body to a request whose method is `HEAD` (`head`) or another: none at
    /// all to a `HEAD`, whose answer has the status and headers another method's would, and
    /// no content (RFC 9110 §9.3.2; an HTTP/2 client resets a stream whose answer to `HEAD`
    /// carries one); else [`body`](Self::body).
    ///
    /// ```
    /// use deadline_core::Error;
    /// use deadline_core::wire::{Answer, Protocol};
    ///
    /// let answer = Answer::new(Protocol::Http, Error::DeadlineExceeded);
    /// assert_eq!(answer.body_to(false).as_bytes(), b"deadline exceeded\n");
    /// assert!(answer.body_to(true).as_bytes().is_empty());
    /// ```
    #[must_use]
    pub fn body_to(&self, head: bool) -> Text {
        if head { Text::new() } else { self.body() }
    }

    /// The response body: empty for gRPC (its status travels in the headers), the text and
    /// a newline for plain HTTP, Connect's JSON error, or Connect's end-of-stream message.
    /// (To a `HEAD` request, none: [`body_to`](Self::body_to).)
    #[must_use]
    pub fn body(&self) -> Text {
        match self.protocol {
            Protocol::Grpc { .. } | Protocol::GrpcWeb { .. } => Text::new(),
            Protocol::Http => {
                let mut text = self.message();
                text.push(b"\n");
                text
            }
            Protocol::ConnectUnary => {
                let mut text = Text::new();
                self.connect_error(&mut text);
                text
            }
            Protocol::ConnectStream { .. } => {
                let mut json = Text::new();
                json.push(br#"{"error":"#);
                self.connect_error(&mut json);
                json.push(b"}");
                // Flags 0x02: the end of the stream.
                enveloped(0x02, &json)
            }
        }
    }

    /// gRPC-Web's trailer frame: the trailers as the last message of a body (flags `0x80`,
    /// the length of what follows, big-endian, then `grpc-status` and `grpc-message` as
    /// HTTP/1 header lines), for a body cut at the deadline ([`Cut::TrailerFrame`]), where
    /// a browser, which cannot read HTTP trailers, reads them.
    ///
    /// ```
    /// use deadline_core::Error;
    /// use deadline_core::wire::{Answer, Codec, Protocol};
    ///
    /// let frame = Answer::new(Protocol::GrpcWeb { text: false, codec: Codec::Proto }, Error::DeadlineExceeded).trailer_frame();
    /// let lines = b"grpc-status:4\r\ngrpc-message:deadline exceeded\r\n";
    /// assert_eq!(frame.as_bytes()[0], 0x80);
    /// assert_eq!(frame.as_bytes()[1..5], (lines.len() as u32).to_be_bytes());
    /// assert_eq!(&frame.as_bytes()[5..], lines);
    /// ```
    #[must_use]
    pub fn trailer_frame(&self) -> Text {
        let mut lines = Text::new();
        // Writing into a `Text` never fails.
        let _ = write!(
            lines,
            "grpc-status:{}\r\ngrpc-message:",
            self.error.grpc_code().as_u8()
        );
        lines.push(self.message().as_bytes());
        lines.push(b"\r\n");
        // Flags 0x80: trailers.
        enveloped(0x80, &lines)
    }

    /// Connect's JSON error object: `{"code":"deadline_exceeded","message":"..."}`.
    fn connect_error(&self, out: &mut Text) {
        out.push(br#"{"code":""#);
        out.push(self.error.grpc_code().connect_name().as_bytes());
        out.push(br#"","message":""#);
        // The messages are fixed printable ASCII; a quote or a backslash would be dropped.
        for &byte in self.message().as_bytes() {
            if byte != b'"' && byte != b'\\' {
                out.push(&[byte]);
            }
        }
        out.push(br#""}"#);
    }
}

/// How a response body still streaming at the deadline ends ([`Protocol::cut`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Cut {
    /// gRPC: trailers with this `grpc-status` and `grpc-message`.
    Trailers {
        /// The status: `DEADLINE_EXCEEDED`.
        grpc_status: GrpcCode,
        /// The message.
        grpc_message: &'static str,
    },
    /// Connect streaming: an end-of-stream message carrying this answer's error, as the
    /// last data frame ([`Answer::body`]).
    EndStream(Answer),
    /// gRPC-Web: the trailers as the body's last message ([`Answer::trailer_frame`]),
    /// base64-encoded before it is sent when the protocol is
    /// [`GrpcWeb { text: true, .. }`](Protocol::GrpcWeb) (`application/grpc-web-text`).
    TrailerFrame(Answer),
    /// Plain HTTP, Connect unary, and a body of messages cut in the middle of one too long
    /// to hold ([`Envelopes::cut`](super::Envelopes::cut)): the body fails, on which the
    /// server resets the HTTP/2 stream with [`Cut::RESET_CODE`] or closes the HTTP/1.1
    /// connection: the client sees a cut response, never one that looks complete. Except
    /// over HTTP/1.0 (a proxy's default, nginx's among them), for a body of no stated length:
    /// HTTP/1.0 has no chunked framing, so such a body ends where the connection closes, and
    /// the peer cannot tell the cut from the end. Give such a body a length, or speak
    /// HTTP/1.1 to the proxy (nginx: `proxy_http_version 1.1`).
    Reset,
    /// A body of gRPC-Web or Connect streaming messages that has already sent its protocol's
    /// last message (gRPC-Web's trailer frame, Connect's end-stream message): it ends where it
    /// is, with nothing added ([`Envelopes::cut`](super::Envelopes::cut)).
    Ended,
}

impl Cut {
    /// The HTTP/2 error code of the `RST_STREAM` that ends a [`Cut::Reset`] stream: `CANCEL`
    /// (0x8, RFC 9113 §7), the stream no longer needed. gRPC's table of reset codes reads a
    /// server's `CANCEL` as `CANCELLED` (grpc-go, tonic and connect-go do), a status of the
    /// shape a deadline running out makes; `INTERNAL_ERROR` (0x2), what an HTTP/2 server
    /// sends for a body that failed, reads as `INTERNAL`, a server's bug. (A client under
    /// this library's `PropagateLayer` reads any reset as the deadline's once the time it
    /// sent is running out: [`Failure::Body`](super::Failure::Body).)
    pub const RESET_CODE: u32 = 0x8;

    /// Whether a response whose body may end this way may declare its length in its head (a
    /// `content-length`, or an exact size a server writes one from): yes when it ends as a
    /// cut stream ([`Cut::Reset`]), short, which the declared length lets the client see,
    /// or has ended already ([`Cut::Ended`]). No for the others: the protocol's ending
    /// written at the cut, and the part of a message held back before it, are not what the
    /// length counted, and a client takes a body whose length disagrees with its head for a
    /// broken one (a malformed HTTP/2 stream, RFC 9113 §8.1.1; a connection closed early on
    /// HTTP/1.1), not for the deadline's answer. A server drops the length of a response
    /// whose body may be cut so.
    ///
    /// ```
    /// use deadline_core::wire::{Codec, Protocol};
    ///
    /// assert!(Protocol::Http.cut().keeps_declared_length());
    /// assert!(!Protocol::Grpc { codec: Codec::Proto }.cut().keeps_declared_length());
    /// ```
    #[must_use]
    pub const fn keeps_declared_length(&self) -> bool {
        matches!(self, Cut::Reset | Cut::Ended)
    }
}

impl Protocol {
    /// How a response body of this protocol's messages that is still streaming at its
    /// deadline ends, between two messages ([`Envelopes::cut`](super::Envelopes::cut) says
    /// when it is). A body that is not its messages ends as
    /// [`Envelopes::cut_unread`](super::Envelopes::cut_unread) says.
    ///
    /// ```
    /// use deadline_core::wire::{Codec, Cut, GrpcCode, Protocol};
    ///
    /// assert!(matches!(
    ///     Protocol::Grpc { codec: Codec::Proto }.cut(),
    ///     Cut::Trailers { grpc_status: GrpcCode::DeadlineExceeded, .. }
    /// ));
    /// assert_eq!(Protocol::Http.cut(), Cut::Reset);
    /// ```
    #[must_use]
    pub fn cut(self) -> Cut {
        let error = Error::DeadlineExceeded;
        match self {
            Protocol::Grpc { .. } => Cut::Trailers {
                grpc_status: error.grpc_code(),
                grpc_message: error.reason(),
            },
            Protocol::GrpcWeb { .. } => Cut::TrailerFrame(Answer::new(self, error)),
            Protocol::ConnectStream { .. } => Cut::EndStream(Answer::new(self, error)),
            Protocol::ConnectUnary | Protocol::Http => Cut::Reset,
        }
    }
}

/// `message` in the envelope gRPC-Web and Connect streaming share: a flags byte, the
/// message's length (big-endian, four bytes), then the message.
fn enveloped(flags: u8, message: &Text) -> Text {
    let mut text = Text::new();
    text.push(&[flags]);
    let len = u32::try_from(message.as_bytes().len()).unwrap_or(u32::MAX);
    text.push(&len.to_be_bytes());
    text.push(message.as_bytes());
    text
}
