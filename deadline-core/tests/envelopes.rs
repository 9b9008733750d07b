//! `Envelopes`: a streamed body of length-prefixed messages, read frame by frame, sends only
//! whole messages, however its frames split them; a message too long to hold passes as it
//! comes, and a body cut inside it is reset.

use deadline_core::wire::{Codec, Cut, Envelopes, Protocol};
use proptest::prelude::*;

const GRPC: Protocol = Protocol::Grpc {
    codec: Codec::Proto,
};

fn envelope(flags: u8, message: &[u8]) -> Vec<u8> {
    let mut bytes = vec![flags];
    bytes.extend_from_slice(&u32::try_from(message.len()).unwrap().to_be_bytes());
    bytes.extend_from_slice(message);
    bytes
}

/// Frames that are whole envelopes go as they are; an empty message is whole at its prefix;
/// an empty frame sends nothing.
#[test]
fn whole_envelopes_go_as_they_are() {
    let mut sent = Envelopes::of(GRPC).unwrap();
    let mut two = envelope(0, b"hello");
    two.extend(envelope(1, b""));
    assert_eq!(sent.read(&two), two.len());
    assert_eq!(sent.read(&envelope(0x80, b"trailers")), 13);
    assert_eq!(sent.read(&[]), 0);
    assert_eq!(Some(sent), Envelopes::of(GRPC), "between messages again");
}

/// A message split byte by byte goes at its last byte: its length is read across frames.
#[test]
fn a_message_split_anywhere_goes_when_it_is_whole() {
    let bytes = envelope(0, &[7; 300]);
    let mut sent = Envelopes::of(GRPC).unwrap();
    for (i, byte) in bytes.iter().enumerate() {
        let send = sent.read(&[*byte]);
        assert_eq!(send, usize::from(i == bytes.len() - 1), "byte {i}");
        assert!(matches!(sent.cut(GRPC), Cut::Trailers { .. }), "byte {i}");
    }
}

/// A message longer than the most held passes as it comes, and a body cut inside it is
/// reset; once it has ended, messages are held again.
#[test]
fn a_message_too_long_to_hold_passes_and_its_cut_is_a_reset() {
    let mut sent = Envelopes::of(GRPC).unwrap();
    let long = Envelopes::HOLD_AT_MOST + 1;
    let mut prefix = vec![0];
    prefix.extend_from_slice(&long.to_be_bytes());
    assert_eq!(sent.read(&prefix[..3]), 0, "its length is not known yet");
    assert_eq!(sent.read(&prefix[3..]), 2, "now it is: it passes");
    assert_eq!(sent.read(&[1; 1000]), 1000);
    assert!(!sent.sent_whole_messages());
    assert_eq!(sent.cut(GRPC), Cut::Reset);
    // The rest of it, 64 KiB at a time, then its last byte and the first byte of the next
    // message: that byte is held.
    let mut rest = usize::try_from(long).unwrap() - 1000 - 1;
    let chunk = vec![1; 64 * 1024];
    while rest > 0 {
        let piece = &chunk[..rest.min(chunk.len())];
        assert_eq!(sent.read(piece), piece.len());
        rest -= piece.len();
    }
    assert_eq!(sent.read(&[1, 0]), 1);
    assert!(sent.sent_whole_messages());
    assert!(matches!(sent.cut(GRPC), Cut::Trailers { .. }));
    // A message of exactly the most held is held.
    let mut held = Envelopes::of(GRPC).unwrap();
    let mut prefix = vec![0];
    prefix.extend_from_slice(&Envelopes::HOLD_AT_MOST.to_be_bytes());
    assert_eq!(held.read(&prefix), 0);
    assert_eq!(held.read(&[1; 1000]), 0);
    assert!(held.sent_whole_messages());
}

/// A body that has sent its protocol's last message (gRPC-Web's trailer frame, flag `0x80`;
/// Connect's end-stream message, flag `0x02`) ends there when cut: nothing is added after it.
/// gRPC has no such message (its status is in HTTP trailers): a flag there is a message's.
#[test]
fn a_body_that_sent_its_last_message_ends_there() {
    let web = Protocol::GrpcWeb {
        text: false,
        codec: Codec::Proto,
    };
    let connect = Protocol::ConnectStream {
        codec: Codec::Proto,
    };
    for (protocol, last) in [(web, 0x80), (connect, 0x02)] {
        let mut sent = Envelopes::of(protocol).unwrap();
        assert_eq!(sent.read(&envelope(0, b"reply")), 10);
        assert_eq!(sent.cut(protocol), protocol.cut(), "{protocol:?}");
        assert_eq!(sent.read(&envelope(last, b"end")), 8);
        assert_eq!(sent.cut(protocol), Cut::Ended, "{protocol:?}");
        // Compressed (flag 1) is not the end.
        let mut sent = Envelopes::of(protocol).unwrap();
        assert_eq!(sent.read(&envelope(1, b"reply")), 10);
        assert_eq!(sent.cut(protocol), protocol.cut(), "{protocol:?}");
    }
    let mut sent = Envelopes::of(GRPC).unwrap();
    assert_eq!(sent.read(&envelope(0x80, b"x")), 6);
    assert!(matches!(sent.cut(GRPC), Cut::Trailers { .. }));
}

/// A response head with this `content-type` and `content-encoding`, read as the core reads
/// one: the value of a header by its name.
fn head(
    content_type: Option<&'static str>,
    encoding: Option<&'static str>,
) -> impl Fn(&'static str) -> Option<&'static [u8]> + Copy {
    move |name| match name {
        "content-type" => content_type.map(str::as_bytes),
        "content-encoding" => encoding.map(str::as_bytes),
        _ => None,
    }
}

/// A response's body is read as envelopes when the request's protocol and the response's
/// `content-type` both say so, framed as the request's protocol ends them (for gRPC, any
/// binary envelopes; gRPC-Web in the request's form, binary or base64 text), and no
/// `content-encoding` compresses it whole.
#[test]
fn a_response_is_enveloped_when_its_head_says_so() {
    let web = Protocol::GrpcWeb {
        text: false,
        codec: Codec::Proto,
    };
    let web_text = Protocol::GrpcWeb {
        text: true,
        codec: Codec::Proto,
    };
    let connect = Protocol::ConnectStream { codec: Codec::Json };
    for (protocol, content_type) in [
        (GRPC, "application/grpc"),
        (GRPC, "application/grpc+proto"),
        // gRPC's trailers go beside the body: any binary envelopes are read.
        (GRPC, "application/grpc-web+proto"),
        (GRPC, "application/connect+proto"),
        (web, "application/grpc-web+proto"),
        (web_text, "application/grpc-web-text"),
        (web_text, "application/grpc-web-text+proto"),
        (connect, "application/connect+json"),
    ] {
        for encoding in [None, Some("identity"), Some(" Identity ")] {
            let read = Envelopes::of_response(protocol, head(Some(content_type), encoding));
            assert_eq!(read, Envelopes::of(protocol), "{content_type} {encoding:?}");
        }
        let gzip = Envelopes::of_response(protocol, head(Some(content_type), Some("gzip")));
        assert_eq!(gzip, None, "{content_type}: compressed whole");
    }
    for (protocol, content_type) in [
        (GRPC, None),
        (GRPC, Some("text/plain")),
        (GRPC, Some("text/event-stream")),
        (GRPC, Some("application/grpc-web-text")),
        (GRPC, Some("application/proto")),
        (Protocol::Http, Some("application/grpc")),
        (Protocol::ConnectUnary, Some("application/connect+proto")),
        (web, Some("application/grpc-web-text")),
        (web_text, Some("application/grpc-web")),
        (web_text, Some("application/grpc")),
        (web, Some("application/connect+proto")),
        (connect, Some("application/grpc-web")),
    ] {
        let read = Envelopes::of_response(protocol, head(content_type, None));
        assert_eq!(read, None, "{protocol:?} answered {content_type:?}");
    }
}

/// A body not read as messages ends at its deadline as its protocol ends one, unless that
/// ending goes into the body (gRPC-Web's trailer frame, Connect's end-stream message) and the
/// response says the body is something else (another content type, or compressed whole):
/// then as a cut stream, with nothing written into it. gRPC's trailers go beside any body.
#[test]
fn a_body_not_read_as_messages_ends_without_corrupting_it() {
    let web = Protocol::GrpcWeb {
        text: false,
        codec: Codec::Proto,
    };
    let web_text = Protocol::GrpcWeb {
        text: true,
        codec: Codec::Proto,
    };
    let connect = Protocol::ConnectStream {
        codec: Codec::Proto,
    };
    for protocol in [web, web_text, connect] {
        let own = match protocol {
            Protocol::GrpcWeb { text: true, .. } => "application/grpc-web-text+proto",
            Protocol::GrpcWeb { .. } => "application/grpc-web+proto",
            _ => "application/connect+json",
        };
        // Saying nothing, or its own type uncompressed: the protocol's ending.
        for (content_type, encoding) in [
            (None, None),
            (Some(own), None),
            (Some(own), Some("identity")),
        ] {
            let cut = Envelopes::cut_unread(protocol, head(content_type, encoding));
            assert_eq!(
                cut,
                protocol.cut(),
                "{protocol:?} {content_type:?} {encoding:?}"
            );
        }
        // Something else: a cut stream.
        for (content_type, encoding) in [
            (Some(own), Some("gzip")),
            (None, Some("br")),
            (Some("text/html"), None),
            (Some("text/event-stream"), None),
            (Some("application/grpc"), None),
        ] {
            let cut = Envelopes::cut_unread(protocol, head(content_type, encoding));
            assert_eq!(
                cut,
                Cut::Reset,
                "{protocol:?} {content_type:?} {encoding:?}"
            );
        }
    }
    // Binary and text gRPC-Web end alike only with their own framing.
    let cut = Envelopes::cut_unread(web_text, head(Some("application/grpc-web+proto"), None));
    assert_eq!(cut, Cut::Reset);
    // gRPC's trailers, and plain HTTP's and Connect unary's reset, whatever the response.
    for (content_type, encoding) in [(None, None), (Some("text/html"), Some("gzip"))] {
        let head = head(content_type, encoding);
        assert_eq!(Envelopes::cut_unread(GRPC, head), GRPC.cut());
        assert_eq!(Envelopes::cut_unread(Protocol::Http, head), Cut::Reset);
        assert_eq!(
            Envelopes::cut_unread(Protocol::ConnectUnary, head),
            Cut::Reset
        );
    }
}

#[test]
fn only_enveloped_protocols_are_read() {
    for protocol in [
        GRPC,
        Protocol::Grpc { codec: Codec::Json },
        Protocol::GrpcWeb {
            text: false,
            codec: Codec::Proto,
        },
        // Read through its base64 text.
        Protocol::GrpcWeb {
            text: true,
            codec: Codec::Proto,
        },
        Protocol::ConnectStream { codec: Codec::Json },
    ] {
        assert!(Envelopes::of(protocol).is_some(), "{protocol:?}");
    }
    for protocol in [Protocol::ConnectUnary, Protocol::Http] {
        assert!(Envelopes::of(protocol).is_none(), "{protocol:?}");
    }
}

proptest! {
    /// Messages of any lengths (none too long to hold), their bytes split into frames
    /// anywhere: after each frame, the bytes sent in all are exactly the bytes of the
    /// messages that have ended, and the held bytes are sent with the frame that ends their
    /// message.
    #[test]
    fn what_is_sent_is_always_the_whole_messages(
        messages in prop::collection::vec((any::<u8>(), 0usize..600), 0..12),
        cuts in prop::collection::vec(0usize..8_000, 0..20),
    ) {
        let mut body = Vec::new();
        let mut ends = vec![0];
        for &(flags, len) in &messages {
            body.extend(envelope(flags, &vec![0xA5; len]));
            ends.push(body.len());
        }
        let mut cuts: Vec<usize> = cuts.into_iter().map(|c| c % (body.len() + 1)).collect();
        cuts.push(body.len());
        cuts.sort_unstable();
        let mut sent = Envelopes::of(Protocol::ConnectStream { codec: Codec::Proto }).unwrap();
        let (mut read, mut out) = (0, 0);
        for cut in cuts {
            let frame = &body[read..cut];
            let send = sent.read(frame);
            prop_assert!(send <= frame.len());
            if send > 0 {
                // The held bytes go with this frame's first `send`.
                out = read + send;
            }
            read = cut;
            let whole = *ends.iter().rev().find(|&&end| end <= read).unwrap();
            prop_assert_eq!(out, whole, "after {} bytes", read);
            prop_assert!(sent.sent_whole_messages());
        }
        prop_assert_eq!(out, body.len());
    }
}
