//! [`LateFrames`]: what a response body may still send once its deadline has passed.

/// What a response body may still send once its deadline has passed: the frames it has
/// ready, up to [`AT_MOST`](Self::AT_MOST) bytes in all (a frame with no data counts as one
/// byte), and the frame that ends it (trailers, or a last frame) whatever its size.
///
/// So an answer that is complete when the deadline comes (its head given out in time, every
/// frame of its body ready: in memory, however many chunks it is split into) reaches the
/// client whole, a moment late; a body that has to wait for a frame after the deadline is cut
/// there, and one that never waits (an endless stream with a frame always ready) is cut
/// after `AT_MOST` bytes. The adapters ask once per frame that comes after the deadline.
///
/// ```
/// use deadline_core::wire::LateFrames;
///
/// let mut late = LateFrames::new();
/// // Forty chunks of 1 KiB, all ready after the deadline: each is sent.
/// assert!((0..40).all(|_| late.send(1024, false)));
/// // An endless stream of 64 KiB chunks is cut once it has sent `AT_MOST` bytes late.
/// let mut endless = LateFrames::new();
/// let sent = (0..).take_while(|_| endless.send(64 * 1024, false)).count();
/// assert_eq!(sent, 64);
/// // The frame that ends a body is sent whatever has gone before.
/// assert!(endless.send(64 * 1024, true));
/// ```
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct LateFrames {
    sent: u32,
}

impl LateFrames {
    /// The bytes a body may send after its deadline before the frame that ends it: 4 MiB,
    /// as much as [`Envelopes`](super::Envelopes) holds of one message.
    pub const AT_MOST: u32 = 4 * 1024 * 1024;

    /// Nothing sent late yet.
    #[must_use]
    pub const fn new() -> Self {
        LateFrames { sent: 0 }
    }

    /// Whether a frame of `len` bytes, ready after the deadline, is sent (`true`) or the
    /// body is cut there (`false`). `ends`: the frame ends the body (trailers, or a body
    /// that says it has ended), which is always sent.
    #[must_use]
    pub fn send(&mut self, len: usize, ends: bool) -> bool {
        if ends {
            return true;
        }
        let len = u32::try_from(len.max(1)).unwrap_or(u32::MAX);
        match self.sent.checked_add(len) {
            Some(sent) if sent <= Self::AT_MOST => {
                self.sent = sent;
                true
            }
            _ => false,
        }
    }
}
