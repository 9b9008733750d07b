//! [`Envelopes`]: where a streamed body of length-prefixed messages (gRPC, gRPC-Web, Connect
//! streaming) stands between its messages, so that a body cut at its deadline ends after a
//! whole message.

use super::answer::Cut;
use super::headers::{CONTENT_ENCODING, CONTENT_TYPE};
use super::protocol::Protocol;

/// The bytes of an envelope's prefix: a flags byte, then the message's length (four bytes,
/// big-endian).
const PREFIX: u8 = 5;

/// Whether bodies of `a` and `b`, protocols whose ending is written into the body, end
/// alike: both gRPC-Web, binary or both base64 text, or both Connect streaming, whatever their
/// codecs. (gRPC's ending, its trailers, goes beside the body.)
const fn framed_alike(a: Protocol, b: Protocol) -> bool {
    match (a, b) {
        (Protocol::GrpcWeb { text: a, .. }, Protocol::GrpcWeb { text: b, .. }) => a == b,
        (Protocol::ConnectStream { .. }, Protocol::ConnectStream { .. }) => true,
        _ => false,
    }
}

/// Whether bodies of `protocol` are base64 text: gRPC-Web's text form.
const fn is_text(protocol: Protocol) -> bool {
    matches!(protocol, Protocol::GrpcWeb { text: true, .. })
}

/// Whether a response's `content-encoding` is over its whole body (any but `identity`).
fn encoded_whole<'a>(header: &mut impl FnMut(&'static str) -> Option<&'a [u8]>) -> bool {
    header(CONTENT_ENCODING)
        .is_some_and(|coding| !coding.trim_ascii().eq_ignore_ascii_case(b"identity"))
}

/// Where a response body of length-prefixed messages stands between its messages, read frame
/// by frame as it is sent.
///
/// gRPC, gRPC-Web and Connect streaming send each message in an envelope: a flags
/// byte, the message's length (four bytes, big-endian), then the message. A body's frames
/// need not be whole envelopes: a proxy passes on the frames it received, which split
/// messages wherever the network did. A body cut at its deadline in the middle of a message
/// would send the client part of a message followed by the deadline's status, and a client
/// that reads whole messages reads that as a broken stream (grpc-go: `INTERNAL`), not as
/// `DEADLINE_EXCEEDED`.
///
/// So the bytes of a message that has begun but not ended are held back until it ends
/// ([`read`](Self::read) says how many of a frame's bytes may go now). At the cut, what the
/// client has is whole messages, and the held part of the unfinished one is dropped with
/// the handler's body: the client gets whole messages, then the deadline's status
/// ([`cut`](Self::cut)). A body that has already sent its protocol's last message (gRPC-Web's
/// trailer frame, Connect's end-stream message) ends there, with nothing added.
///
/// One message is held at most [`HOLD_AT_MOST`](Self::HOLD_AT_MOST) bytes: a longer one is
/// passed on as it comes, and a body cut in the middle of it ends as a cut stream
/// ([`Cut::Reset`]), never with a status after a partial message.
///
/// ```
/// use deadline_core::wire::{Codec, Cut, Envelopes, Protocol};
///
/// let grpc = Protocol::Grpc { codec: Codec::Proto };
/// let mut sent = Envelopes::of(grpc).expect("gRPC's messages are enveloped");
/// // One whole message of 3 bytes, then the first 2 bytes of a message of 4.
/// let frame = [0, 0, 0, 0, 3, b'a', b'b', b'c', 0, 0];
/// assert_eq!(sent.read(&frame), 8, "the whole message goes; the rest is held");
/// assert!(matches!(sent.cut(grpc), Cut::Trailers { .. }));
/// // The rest of the second message: it goes, with the 2 bytes held before it.
/// assert_eq!(sent.read(&[0, 0, 4, b'w', b'x', b'y', b'z']), 7);
/// // Plain HTTP has no messages to keep whole.
/// assert_eq!(Envelopes::of(Protocol::Http), None);
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct Envelopes {
    /// The bytes of the current envelope's prefix read so far: 0 to 5, and 5 while its
    /// message is read.
    prefix: u8,
    /// The current envelope's flags.
    flags: u8,
    /// The flag of the protocol's last message: `0x80` for gRPC-Web's trailer frame, `0x02`
    /// for Connect's end-stream message; none for gRPC, whose status travels in HTTP
    /// trailers.
    end_flag: u8,
    /// The last whole message was the protocol's last message.
    ended: bool,
    /// [`first_end`](Self::first_end) has said so once.
    end_told: bool,
    /// The current message's length, as its prefix says (read as its bytes come).
    len: u32,
    /// The bytes of the current message still to come.
    left: u32,
}

impl Envelopes {
    /// The most of one message that is held back until it is whole: 4 MiB, the largest
    /// message that gRPC's clients (grpc-go, grpc-java, tonic) accept by default.
    pub const HOLD_AT_MOST: u32 = 4 * 1024 * 1024;

    /// A body of `protocol`'s, before its first byte, if its messages are enveloped: gRPC,
    /// gRPC-Web and Connect streaming. `None` for plain HTTP and Connect unary (no messages
    /// to keep whole).
    ///
    /// gRPC-Web's base64 form (`application/grpc-web-text`,
    /// [`GrpcWeb { text: true, .. }`](Protocol::GrpcWeb)) is the text of the envelopes: give
    /// [`read`](Self::read) the bytes the text decodes to, and send what may go encoded again.
    /// That text is a run of 4-character base64 quanta, any of which may be padded (a server
    /// pads wherever it flushes, as gRPC-Web's protocol allows), so it decodes quantum by
    /// quantum, as its clients decode it; and text that encodes whole messages, padded at its
    /// end, is what they read as those messages.
    #[must_use]
    pub const fn of(protocol: Protocol) -> Option<Envelopes> {
        let end_flag = match protocol {
            Protocol::Grpc { .. } => 0,
            Protocol::GrpcWeb { .. } => 0x80,
            Protocol::ConnectStream { .. } => 0x02,
            Protocol::ConnectUnary | Protocol::Http => return None,
        };
        Some(Envelopes {
            prefix: 0,
            flags: 0,
            end_flag,
            ended: false,
            end_told: false,
            len: 0,
            left: 0,
        })
    }

    /// The body of a response to a request of `protocol`, whose headers are read with `header`
    /// (the first value of the header of that lowercase name, if it has one), if it is
    /// enveloped messages: the request's protocol sends them ([`of`](Self::of)), and the
    /// response says its body is them, framed as the request's protocol ends them (for gRPC,
    /// whose trailers go beside the body, any binary envelopes: gRPC's, binary gRPC-Web's,
    /// Connect streaming's; for gRPC-Web, gRPC-Web's in the same form, binary or base64 text;
    /// for Connect streaming, Connect streaming's), with no `content-encoding` over the whole
    /// body (these protocols compress message by message, inside the envelopes).
    ///
    /// `None` for anything else (an error page, an event stream, a body compressed whole, a
    /// gRPC-Web body in the other form), which is sent as it comes.
    ///
    /// ```
    /// use deadline_core::wire::{Codec, Envelopes, Protocol};
    ///
    /// let grpc = Protocol::Grpc { codec: Codec::Proto };
    /// let typed = |value: &'static [u8]| move |name| (name == "content-type").then_some(value);
    /// assert!(Envelopes::of_response(grpc, typed(b"application/grpc")).is_some());
    /// assert!(Envelopes::of_response(grpc, typed(b"text/plain")).is_none());
    /// assert!(Envelopes::of_response(Protocol::Http, typed(b"application/grpc")).is_none());
    /// // gRPC-Web in the form the request asked for, and only in that form.
    /// let text = Protocol::GrpcWeb { text: true, codec: Codec::Proto };
    /// assert!(Envelopes::of_response(text, typed(b"application/grpc-web-text+proto")).is_some());
    /// assert!(Envelopes::of_response(text, typed(b"application/grpc-web")).is_none());
    /// ```
    #[inline]
    pub fn of_response<'a>(
        protocol: Protocol,
        mut header: impl FnMut(&'static str) -> Option<&'a [u8]>,
    ) -> Option<Envelopes> {
        let envelopes = Envelopes::of(protocol)?;
        let enveloped = header(CONTENT_TYPE)
            .and_then(Protocol::of_content_type)
            .is_some_and(|theirs| match protocol {
                // gRPC's ending goes beside the body: any binary envelopes will do.
                Protocol::Grpc { .. } => Envelopes::of(theirs).is_some() && !is_text(theirs),
                _ => framed_alike(theirs, protocol),
            });
        (enveloped && !encoded_whole(&mut header)).then_some(envelopes)
    }

    /// How a response body to a request of `protocol` that is not read as messages
    /// ([`of_response`](Self::of_response) is `None`) ends when it is still streaming at its
    /// deadline, the response's headers read with `header` as there.
    ///
    /// As the protocol ends a body ([`Protocol::cut`]), except where that ending is written
    /// into the body (gRPC-Web's trailer frame, Connect's end-stream message) and the response
    /// says its body is something else: a content type that is not the protocol's (an error
    /// page, an event stream), or a `content-encoding` over the whole body. The protocol's last
    /// message written into such a body would not end it but corrupt it (inside a gzip stream,
    /// say): it ends as a cut stream ([`Cut::Reset`]). gRPC's trailers travel beside the body
    /// and end any; a response that does not say what its body is keeps its protocol's ending.
    ///
    /// ```
    /// use deadline_core::wire::{Codec, Cut, Envelopes, Protocol};
    ///
    /// let connect = Protocol::ConnectStream { codec: Codec::Proto };
    /// let gzipped = |name| match name {
    ///     "content-type" => Some(&b"application/connect+proto"[..]),
    ///     "content-encoding" => Some(&b"gzip"[..]),
    ///     _ => None,
    /// };
    /// assert!(Envelopes::of_response(connect, gzipped).is_none());
    /// assert_eq!(Envelopes::cut_unread(connect, gzipped), Cut::Reset);
    /// assert!(matches!(Envelopes::cut_unread(connect, |_| None), Cut::EndStream(_)));
    /// ```
    #[must_use]
    #[inline]
    pub fn cut_unread<'a>(
        protocol: Protocol,
        mut header: impl FnMut(&'static str) -> Option<&'a [u8]>,
    ) -> Cut {
        let in_the_body = matches!(
            protocol,
            Protocol::GrpcWeb { .. } | Protocol::ConnectStream { .. }
        );
        if !in_the_body {
            return protocol.cut();
        }
        let other_type = header(CONTENT_TYPE).is_some_and(|value| {
            !Protocol::of_content_type(value).is_some_and(|theirs| framed_alike(theirs, protocol))
        });
        if other_type || encoded_whole(&mut header) {
            Cut::Reset
        } else {
            protocol.cut()
        }
    }

    /// Reads `frame`, the body's next bytes, and says how many of them may be sent now: every
    /// byte up to the end of the last message that ends in it, after the bytes held before
    /// it. The rest belong to a message not yet whole, and are held until it is.
    ///
    /// All of `frame` may go when it ends between two messages, or when the message it ends in
    /// is longer than [`HOLD_AT_MOST`](Self::HOLD_AT_MOST); none of it when no message ends in
    /// it.
    pub fn read(&mut self, frame: &[u8]) -> usize {
        let mut rest = frame;
        let mut send = 0;
        while let Some((&byte, after)) = rest.split_first() {
            if self.prefix < PREFIX {
                // Byte 0 is the flags; bytes 1 to 4 the length, most significant first.
                if self.prefix == 0 {
                    self.flags = byte;
                } else {
                    self.len = self.len.wrapping_shl(8) | u32::from(byte);
                }
                self.prefix = self.prefix.saturating_add(1);
                self.left = self.len;
                rest = after;
            } else {
                let take = rest
                    .len()
                    .min(usize::try_from(self.left).unwrap_or(usize::MAX));
                rest = rest.get(take..).unwrap_or_default();
                // `take` is at most `left`, a `u32`.
                self.left = self
                    .left
                    .saturating_sub(u32::try_from(take).unwrap_or(u32::MAX));
            }
            if self.prefix == PREFIX && self.left == 0 {
                self.ended = self.flags & self.end_flag != 0;
                self.prefix = 0;
                self.flags = 0;
                self.len = 0;
                send = frame.len().saturating_sub(rest.len());
            }
        }
        if self.passes_on() { frame.len() } else { send }
    }

    /// Whether the message being read is passed on as it comes, not held: it is longer than
    /// [`HOLD_AT_MOST`](Self::HOLD_AT_MOST).
    const fn passes_on(&self) -> bool {
        self.prefix == PREFIX && self.len > Self::HOLD_AT_MOST
    }

    /// Whether what has been sent ends between two messages: always, except in the middle
    /// of a message too long to hold.
    #[must_use]
    pub const fn sent_whole_messages(&self) -> bool {
        !self.passes_on()
    }

    /// Whether the protocol's last message (gRPC-Web's trailer frame, Connect's end-stream
    /// message) has been read, the first time this is asked since it was; `false` ever after.
    /// Asked after each frame is [`read`](Self::read), it says which frame ended the body's
    /// messages: that frame is the client's answer, sent whatever the time, as a body's
    /// trailers are ([`LateFrames`](super::LateFrames)'s frame that ends it). Once: a body
    /// that sends more after it (which neither protocol allows) cannot pass its frames off as
    /// its end again.
    ///
    /// ```
    /// use deadline_core::wire::{Codec, Envelopes, Protocol};
    ///
    /// let web = Protocol::GrpcWeb { text: false, codec: Codec::Proto };
    /// let mut sent = Envelopes::of(web).expect("gRPC-Web's messages are enveloped");
    /// sent.read(&[0, 0, 0, 0, 1, b'm']);
    /// assert!(!sent.first_end(), "a message");
    /// sent.read(b"\x80\x00\x00\x00\x0fgrpc-status:0\r\n");
    /// assert!(sent.first_end(), "the trailer frame");
    /// assert!(!sent.first_end(), "once");
    /// sent.read(&[0, 0, 0, 0, 1, b'm']);
    /// sent.read(b"\x80\x00\x00\x00\x0fgrpc-status:0\r\n");
    /// assert!(!sent.first_end(), "once in the body");
    /// ```
    pub fn first_end(&mut self) -> bool {
        let first = self.ended && !self.end_told;
        self.end_told |= first;
        first
    }

    /// How a body of `protocol`'s that has been read so far ends when it is cut at its
    /// deadline:
    ///
    /// - the way its protocol expects ([`Protocol::cut`]), when what was sent ends between
    ///   messages (the held part of an unfinished one is dropped);
    /// - with nothing added ([`Cut::Ended`]), when the last whole message was the protocol's
    ///   last (gRPC-Web's trailer frame, Connect's end-stream message): the client has its
    ///   answer;
    /// - as a cut stream ([`Cut::Reset`]), in the middle of a message too long to hold.
    #[must_use]
    pub fn cut(&self, protocol: Protocol) -> Cut {
        if !self.sent_whole_messages() {
            Cut::Reset
        } else if self.ended {
            Cut::Ended
        } else {
            protocol.cut()
        }
    }
}
