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
                let mut out = BytesMut::from(STANDARD.encode(self.held.split()).as_bytes());
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
        let mut out = BytesMut::new();
        if !self.held.is_empty() {
            out.extend_from_slice(STANDARD.encode(self.held.split()).as_bytes());
        }
        out.extend_from_slice(&text.partial.split());
        (!out.is_empty()).then(|| out.freeze())
    }

    /// Whether anything is held.
    pub(super) fn holds_any(&self) -> bool {
        !self.held.is_empty() || self.text.as_ref().is_some_and(|t| !t.partial.is_empty())
    }

    /// How many bytes are held (at least what their sending takes).
    pub(super) fn held_len(&self) -> usize {
        self.held.len() + self.text.as_ref().map_or(0, |t| t.partial.len())
    }

    /// How the body ends when it is cut at its deadline ([`Envelopes::cut`]); as a cut stream
    /// when its text was not base64.
    pub(super) fn cut(&self, protocol: Protocol) -> Cut {
        if self.text.as_ref().is_some_and(|t| t.invalid) {
            Cut::Reset
        } else {
            self.read.cut(protocol)
        }
    }
}

impl Text {
    /// Decodes `data`, after the characters of a quantum kept from before: the bytes of its
    /// whole quanta, keeping the characters of one not yet whole; or, when it is not base64,
    /// the text not decoded (those characters, then `data`).
    fn decode(&mut self, data: &[u8]) -> Result<Vec<u8>, Bytes> {
        self.partial.extend_from_slice(data);
        let whole = self.partial.len() / 4 * 4;
        let quanta = self.partial.split_to(whole);
        let mut bytes = Vec::with_capacity(whole / 4 * 3);
        // Runs of quanta that end at a padded one, each valid base64 on its own.
        let mut runs = quanta.chunks(4).peekable();
        let mut start = 0;
        let mut end = 0;
        while let Some(quantum) = runs.next() {
            end += quantum.len();
            if quantum.contains(&b'=') || runs.peek().is_none() {
                let run = quanta.get(start..end).unwrap_or_default();
                if STANDARD.decode_vec(run, &mut bytes).is_err() {
                    let mut raw = BytesMut::from(quanta.as_ref());
                    raw.extend_from_slice(&self.partial.split());
                    return Err(raw.freeze());
                }
                start = end;
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
    use deadline_core::wire::{Envelopes, Protocol};
    use proptest::prelude::*;

    use super::Messages;

    const TEXT: Protocol = Protocol::GrpcWeb {
        text: true,
        json: false,
    };

    /// What a gRPC-Web client reads from base64 text: each 4-character quantum in turn.
    fn decode(text: &[u8]) -> Vec<u8> {
        text.chunks(4)
            .flat_map(|quantum| STANDARD.decode(quantum).unwrap())
            .collect()
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

    proptest! {
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
