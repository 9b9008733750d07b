//! [`LateFrames`]: what a response body may still send once its deadline has passed.

/// What a response body may still send once its deadline has passed: the frames it has
/// ready, [`FRAMES`](Self::FRAMES) of them whatever their size, then more up to
/// [`BYTES`](Self::BYTES) in all (a frame counting at least [`FRAME_AT_LEAST`](Self::FRAME_AT_LEAST)
/// bytes), and the frame that ends it (trailers, or a last frame) whatever came before. A
/// server layer that reads a body's messages (deadline-tokio's `DeadlineLayer`) sends the
/// frame that ends a stream's last message (gRPC-Web's trailer frame, Connect's end-stream
/// message) so too, once.
///
/// So an answer that is complete when the deadline comes (its head given out in time, every
/// frame of its body ready: in memory, in a few large chunks or in many small ones) reaches
/// the client whole, a moment late; a body that has to wait for a frame after the deadline
/// is cut there, and one that never waits (an endless stream with a frame always ready) is
/// cut once it is past both bounds. The adapters ask once per frame that comes after the
/// deadline.
///
/// ```
/// use deadline_core::wire::LateFrames;
///
/// // Two chunks of 3 MiB, ready after the deadline: both are sent.
/// let mut late = LateFrames::new();
/// assert!((0..2).all(|_| late.send(3 << 20, false)));
/// // Forty chunks of 1 KiB: each is sent.
/// let mut late = LateFrames::new();
/// assert!((0..40).all(|_| late.send(1024, false)));
/// // An endless stream of 64 KiB chunks is cut once it has sent 4 MiB late.
/// let mut endless = LateFrames::new();
/// assert_eq!((0..).take_while(|_| endless.send(64 << 10, false)).count(), 64);
/// // An endless stream of empty frames, once it has sent 4 096.
/// let mut empty = LateFrames::new();
/// assert_eq!((0..).take_while(|_| empty.send(0, false)).count(), 4096);
/// // The frame that ends a body is sent whatever has gone before.
/// assert!(endless.send(64 << 10, true));
/// ```
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct LateFrames {
    frames: u32,
    bytes: u64,
}

impl LateFrames {
    /// The frames a body may send after its deadline whatever their size.
    pub const FRAMES: u32 = 16;
    /// The bytes a body may send after its deadline in all, past its first
    /// [`FRAMES`](Self::FRAMES): 4 MiB.
    pub const BYTES: u64 = 4 * 1024 * 1024;
    /// What a frame counts at least against [`BYTES`](Self::BYTES), so that a body of
    /// empty or tiny frames is cut after 4 096 of them.
    pub const FRAME_AT_LEAST: u64 = 1024;

    /// Nothing sent late yet.
    #[must_use]
    pub const fn new() -> Self {
        LateFrames {
            frames: 0,
            bytes: 0,
        }
    }

    /// Whether a frame of `len` bytes, ready after the deadline, is sent (`true`) or the
    /// body is cut there (`false`). `ends`: the frame ends the body (trailers, or a body
    /// that says it has ended), which is always sent.
    #[must_use]
    pub fn send(&mut self, len: usize, ends: bool) -> bool {
        if ends {
            return true;
        }
        let counted = u64::try_from(len)
            .unwrap_or(u64::MAX)
            .max(Self::FRAME_AT_LEAST);
        let bytes = self.bytes.saturating_add(counted);
        if self.frames >= Self::FRAMES && bytes > Self::BYTES {
            return false;
        }
        self.frames = self.frames.saturating_add(1);
        self.bytes = bytes;
        true
    }
}
