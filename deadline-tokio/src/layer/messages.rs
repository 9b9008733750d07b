//! [`Messages`]: a response body of enveloped messages, read as it is sent so that what goes
//! is whole messages; in gRPC-Web's base64 form, read through its text.

use base64::Engine;
use base64::engine::general_purpose::STANDARD;
use bytes::{Bytes, BytesMut};
use deadline_core::wire::{Cut, Envelopes, Protocol};

/// Where a body of enveloped messages stands, and the bytes of a message not yet whole.
pub(super) struct Messages {
    read: Envelopes,
    held: BytesMut,
    /// For gRPC-Web's base64 form: the text, read as the bytes it decodes to.
    text: Option<Text>,
}

/// The text of a body in gRPC-Web's base64 form: 4-character base64 quanta, any of which
/// may be padded, decoded quantum by quantum ([`Envelopes::of`]).
struct Text {
    /// The characters of a quantum not yet whole (fewer than 4).
    partial: BytesMut,
    /// The text was not base64: it is sent as it comes from there, and cut as a cut stream.
    invalid: bool,
}

impl Messages {
    /// A body of `protocol`'s messages, read with `read` from its first byte.
    pub(super) fn new(read: Envelopes, protocol: Protocol) -> Self {
        let text = matches!(protocol, Protocol::GrpcWeb { text: true, .. }).then(|| Text {
            partial: BytesMut::new(),
            invalid: false,
        });
        Messages {
            read,
            held: BytesMut::new(),
            text,
        }
    }

    /// Reads the next data frame: what may be sent now (the held bytes first), or `None`
    /// while no message has ended.
    pub(super) fn whole(&mut self, data: Bytes) -> Option<Bytes> {
        let Some(text) = &mut self.text else {
            return self.whole_bytes(data);
        };
        if text.invalid {
            return Some(data);
        }
        match text.decode(&data) {
            Ok(bytes) if bytes.is_empty() => None,
            Ok(bytes) => self
                .whole_bytes(Bytes::from(bytes))
                .map(|whole| Bytes::from(STANDARD.encode(whole))),
            Err(raw) => {
                // Not base64: what is held goes, encoded again, then the text as it came.
                text.invalid = true;
                let mut out = held_text(&mut self.held);
                out.extend_from_slice(&raw);
                Some(out.freeze())
            }
        }
    }

    /// [`whole`](Self::whole) for the envelopes' own bytes.
    fn whole_bytes(&mut self, mut data: Bytes) -> Option<Bytes> {
        let send = self.read.read(&data);
        let rest = data.split_off(send);
        if self.held.is_empty() {
            // Most frames: whole messages, sent as they are.
            self.held.extend_from_slice(&rest);
            return (!data.is_empty() || rest.is_empty()).then_some(data);
        }
        if data.is_empty() {
            self.held.extend_from_slice(&rest);
            return None;
        }
        self.held.extend_from_slice(&data);
        let out = self.held.split().freeze();
        self.held.extend_from_slice(&rest);
        Some(out)
    }

    /// What is held, if anything: the bytes of a message not yet whole (encoded again, in
    /// the base64 form), then the characters of a quantum not yet whole, as they came.
    pub(super) fn take_held(&mut self) -> Option<Bytes> {
        let Some(text) = &mut self.text else {
            return (!self.held.is_empty()).then(|| self.held.split().freeze());
        };
        let mut out = held_text(&mut self.held);
        out.extend_from_slice(&text.partial.split());
        (!out.is_empty()).then(|| out.freeze())
    }

    /// Whether anything is held.
    pub(super) fn holds_any(&self) -> bool {
        !self.held.is_empty() || self.text.as_ref().is_some_and(|t| !t.partial.is_empty())
    }

    /// Where the body stands now: how it ends if it is cut there ([`Mark::cut`]).
    pub(super) fn mark(&self) -> Mark {
        Mark {
            read: self.read,
            invalid: self.text.as_ref().is_some_and(|t| t.invalid),
        }
    }

    /// Whether the frame last read ended the protocol's messages, the first time in the
    /// body ([`Envelopes::first_end`]).
    pub(super) fn first_end(&mut self) -> bool {
        self.read.first_end()
    }

    /// How the body ends when it is cut at its deadline ([`Envelopes::cut`]); as a cut stream
    /// when its text was not base64.
    pub(super) fn cut(&self, protocol: Protocol) -> Cut {
        self.mark().cut(protocol)
    }
}

/// Where a body of enveloped messages stood ([`Messages::mark`]).
#[derive(Clone, Copy)]
pub(super) struct Mark {
    read: Envelopes,
    invalid: bool,
}

impl Mark {
    /// How the body ends when it is cut here (what was read since is dropped with the body,
    /// unsent).
    pub(super) fn cut(self, protocol: Protocol) -> Cut {
        if self.invalid {
            Cut::Reset
        } else {
            self.read.cut(protocol)
        }
    }
}

/// The bytes `held`, taken, in base64 (nothing when there are none).
fn held_text(held: &mut BytesMut) -> BytesMut {
    if held.is_empty() {
        return BytesMut::new();
    }
    BytesMut::from(STANDARD.encode(held.split()).as_bytes())
}

impl Text {
    /// Decodes `data`, after the characters of a quantum kept from before: the bytes of its
    /// whole quanta, each decoded alone, keeping the characters of one not yet whole; or, when
    /// it is not base64, the text not decoded (those characters, then `data`).
    fn decode(&mut self, data: &[u8]) -> Result<Vec<u8>, Bytes> {
        self.partial.extend_from_slice(data);
        let whole = self.partial.len() / 4 * 4;
        let quanta = self.partial.split_to(whole);
        let mut bytes = Vec::with_capacity(whole / 4 * 3);
        for quantum in quanta.chunks(4) {
            if STANDARD.decode_vec(quantum, &mut bytes).is_err() {
                let mut raw = BytesMut::from(quanta.as_ref());
                raw.extend_from_slice(&self.partial.split());
                return Err(raw.freeze());
            }
        }
        Ok(bytes)
    }
}

#[cfg(test)]
mod tests {
    use base64::Engine;
    use base64::engine::general_purpose::STANDARD;
    use bytes::Bytes;
    use deadline_core::wire::{Codec, Cut, Envelopes, Protocol};
    use proptest::prelude::*;

    use super::Messages;

    const TEXT: Protocol = Protocol::GrpcWeb {
        text: true,
        codec: Codec::Proto,
    };

    /// What a gRPC-Web client reads from base64 text: each 4-character quantum in turn.
    fn decode(text: &[u8]) -> Vec<u8> {
        text.chunks(4)
            .flat_map(|quantum| STANDARD.decode(quantum).unwrap())
            .collect()
    }

    /// Text that stops being base64 after part of a message: the part held goes first,
    /// encoded again, then the text as it came, and from there the body is cut as a cut
    /// stream; nothing is lost.
    #[test]
    fn text_that_stops_being_base64_goes_as_it_came_after_what_was_held() {
        let mut messages = Messages::new(Envelopes::of(TEXT).unwrap(), TEXT);
        // The prefix of a 10-byte message and 4 of its bytes, of which the first 8
        // characters (the prefix and 1 byte) are fed: held.
        let part = [0, 0, 0, 0, 10, 1, 2];
        let text = STANDARD.encode([part.as_slice(), &[3, 4]].concat());
        let (whole, rest) = text.split_at(8);
        assert_eq!(
            messages.whole(Bytes::copy_from_slice(whole.as_bytes())),
            None
        );
        // 2 characters of a quantum, then text that is not base64.
        let mut raw = rest.as_bytes()[..2].to_vec();
        assert_eq!(messages.whole(Bytes::copy_from_slice(&raw)), None);
        raw.extend_from_slice(b"!?");
        let out = messages.whole(Bytes::from_static(b"!?")).unwrap();
        let mut expected = STANDARD.encode(&part[..6]).into_bytes();
        expected.extend_from_slice(&raw);
        assert_eq!(out, expected);
        assert_eq!(messages.cut(TEXT), Cut::Reset);
        // From there, every frame as it comes.
        assert_eq!(messages.whole(Bytes::from_static(b"QUJD")).unwrap(), "QUJD");
    }

    /// `bytes` in pieces of `sizes` (each at least 1) in turn, to its end.
    fn split<'a>(bytes: &'a [u8], sizes: &'a [usize]) -> impl Iterator<Item = &'a [u8]> {
        let mut rest = bytes;
        sizes.iter().cycle().map_while(move |size| {
            let (piece, after) = rest.split_at((*size).min(rest.len()));
            rest = after;
            (!piece.is_empty()).then_some(piece)
        })
    }

    /// `text` read as a gRPC-Web client reads it: quantum by quantum while each decodes; the
    /// bytes decoded, and the text from the first quantum that does not on.
    fn read_as_client(text: &[u8]) -> (Vec<u8>, Vec<u8>) {
        let mut decoded = Vec::new();
        for (i, quantum) in text.chunks(4).enumerate() {
            match STANDARD.decode(quantum) {
                Ok(bytes) if quantum.len() == 4 => decoded.extend(bytes),
                _ => return (decoded, text[i * 4..].to_vec()),
            }
        }
        (decoded, Vec::new())
    }

    proptest! {
        /// Any text at all (pieces of base64 characters and others, and the text of whole
        /// envelopes among them), in any frames: nothing panics, and what is sent, with what
        /// was held at the end, reads as the handler's text reads, byte for byte.
        #[test]
        fn any_text_reads_as_it_came(
            pieces in prop::collection::vec(
                prop_oneof![
                    prop::collection::vec(
                        prop::sample::select(b"AAAAQUJDZGVm+/09=!\n".to_vec()),
                        0..12,
                    ),
                    prop::collection::vec(any::<u8>(), 0..8).prop_map(|message| {
                        let mut envelope = vec![0];
                        envelope.extend_from_slice(&u32::try_from(message.len()).unwrap().to_be_bytes());
                        envelope.extend_from_slice(&message);
                        STANDARD.encode(envelope).into_bytes()
                    }),
                ],
                0..12,
            ),
            sizes in prop::collection::vec(1_usize..12, 1..10),
        ) {
            let text = pieces.concat();
            let mut messages = Messages::new(Envelopes::of(TEXT).unwrap(), TEXT);
            let mut sent = Vec::new();
            for frame in split(&text, &sizes) {
                if let Some(out) = messages.whole(Bytes::copy_from_slice(frame)) {
                    sent.extend_from_slice(&out);
                }
            }
            if let Some(held) = messages.take_held() {
                sent.extend_from_slice(&held);
            }
            prop_assert_eq!(read_as_client(&sent), read_as_client(&text));
        }

        /// Messages of any lengths, their text made either by one encoding or by encoding
        /// each of the handler's chunks alone (padded), then split into frames anywhere:
        /// after each frame, what was sent decodes to whole messages, the first ones; at the
        /// end, with what was held, to the whole stream.
        #[test]
        fn the_base64_form_goes_whole_message_by_whole_message(
            lengths in prop::collection::vec(0_usize..40, 1..6),
            chunks in prop::collection::vec(1_usize..30, 1..10),
            frames in prop::collection::vec(1_usize..12, 1..20),
            padded in any::<bool>(),
        ) {
            let mut stream = Vec::new();
            let mut ends = vec![0];
            for (i, len) in lengths.iter().enumerate() {
                stream.push(0);
                stream.extend_from_slice(&u32::try_from(*len).unwrap().to_be_bytes());
                stream.extend(core::iter::repeat_n(u8::try_from(i).unwrap(), *len));
                ends.push(stream.len());
            }
            let text = if padded {
                split(&stream, &chunks)
                    .flat_map(|chunk| STANDARD.encode(chunk).into_bytes())
                    .collect()
            } else {
                STANDARD.encode(&stream).into_bytes()
            };
            let mut messages = Messages::new(Envelopes::of(TEXT).unwrap(), TEXT);
            let mut sent = Vec::new();
            for frame in split(&text, &frames) {
                if let Some(out) = messages.whole(Bytes::copy_from_slice(frame)) {
                    sent.extend_from_slice(&out);
                }
                let so_far = decode(&sent);
                prop_assert!(ends.contains(&so_far.len()), "{} bytes", so_far.len());
                prop_assert_eq!(&so_far[..], &stream[..so_far.len()]);
            }
            if let Some(held) = messages.take_held() {
                sent.extend_from_slice(&held);
            }
            prop_assert_eq!(decode(&sent), stream);
        }
    }
}
