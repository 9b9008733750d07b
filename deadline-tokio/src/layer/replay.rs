//! [`ReplayBody`]: a request body read once into memory, sent again by each attempt.

use core::convert::Infallible;
use core::pin::Pin;
use core::task::{Context, Poll};

use bytes::{Buf, BufMut, Bytes, BytesMut};
use http::HeaderMap;
use http_body::{Body, Frame, SizeHint};

/// A request body held in memory, so that it can be sent once per attempt: what
/// [`DependencyLayer::buffered`](crate::DependencyLayer::buffered) reads a body into
/// before the first attempt. Cloning it is cheap (the bytes are shared).
///
/// It sends its bytes as one data frame, then its trailers, if it has any. With feature
/// `tonic`, `tonic::body::Body` is made from it (`From<ReplayBody>`); a body type of your
/// own that implements `From<ReplayBody>` can be buffered as well.
///
/// ```
/// use bytes::Bytes;
/// use deadline_tokio::layer::ReplayBody;
/// use http_body_util::BodyExt;
///
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() {
/// let body = ReplayBody::new(Bytes::from_static(b"price?"));
/// let again = body.clone();
/// assert_eq!(body.collect().await.unwrap().to_bytes(), "price?");
/// assert_eq!(again.collect().await.unwrap().to_bytes(), "price?");
/// # }
/// ```
#[derive(Clone, Debug, Default)]
pub struct ReplayBody {
    data: Option<Bytes>,
    trailers: Option<HeaderMap>,
}

impl ReplayBody {
    /// A body of `data`, without trailers.
    #[must_use]
    pub fn new(data: Bytes) -> Self {
        ReplayBody {
            data: Some(data).filter(|d| !d.is_empty()),
            trailers: None,
        }
    }

    /// The same body, ending with `trailers`.
    #[must_use]
    pub fn with_trailers(mut self, trailers: HeaderMap) -> Self {
        self.trailers = Some(trailers);
        self
    }

    /// The bytes still to send (all of them, before the body is polled).
    #[must_use]
    pub fn data(&self) -> &[u8] {
        self.data.as_deref().unwrap_or_default()
    }

    /// The trailers still to send, if any.
    #[must_use]
    pub fn trailers(&self) -> Option<&HeaderMap> {
        self.trailers.as_ref()
    }
}

impl From<Bytes> for ReplayBody {
    fn from(data: Bytes) -> Self {
        ReplayBody::new(data)
    }
}

impl Body for ReplayBody {
    type Data = Bytes;
    type Error = Infallible;

    fn poll_frame(
        self: Pin<&mut Self>,
        _cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, Infallible>>> {
        let this = self.get_mut();
        if let Some(data) = this.data.take() {
            return Poll::Ready(Some(Ok(Frame::data(data))));
        }
        Poll::Ready(this.trailers.take().map(|t| Ok(Frame::trailers(t))))
    }

    fn is_end_stream(&self) -> bool {
        self.data.is_none() && self.trailers.is_none()
    }

    fn size_hint(&self) -> SizeHint {
        SizeHint::with_exact(self.data.as_ref().map_or(0, |d| d.len() as u64))
    }
}

/// `tonic::body::Body::new` of the buffered body (feature `tonic`): a tonic client's
/// request, sent again by each attempt.
#[cfg(feature = "tonic")]
impl From<ReplayBody> for tonic::body::Body {
    fn from(body: ReplayBody) -> Self {
        tonic::body::Body::new(body)
    }
}

/// The bytes of a body being read, kept without a copy while they come in one piece.
#[derive(Debug, Default)]
pub(crate) struct Collected {
    data: Data,
    len: usize,
    trailers: Option<HeaderMap>,
}

#[derive(Debug, Default)]
enum Data {
    #[default]
    Empty,
    One(Bytes),
    Many(BytesMut),
}

/// A body longer than its limit.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct TooLarge;

impl Collected {
    /// Adds a frame of the body; `Err` when the data would exceed `limit` bytes.
    pub(crate) fn push<D: Buf>(&mut self, frame: Frame<D>, limit: usize) -> Result<(), TooLarge> {
        match frame.into_data() {
            Ok(mut data) => {
                let more = data.remaining();
                let len = self.len.checked_add(more).ok_or(TooLarge)?;
                if len > limit {
                    return Err(TooLarge);
                }
                self.len = len;
                if more == 0 {
                    return Ok(());
                }
                self.data = match core::mem::take(&mut self.data) {
                    Data::Empty => Data::One(data.copy_to_bytes(more)),
                    Data::One(first) => {
                        let mut all = BytesMut::with_capacity(len);
                        all.extend_from_slice(&first);
                        all.put(data);
                        Data::Many(all)
                    }
                    Data::Many(mut all) => {
                        all.put(data);
                        Data::Many(all)
                    }
                };
                Ok(())
            }
            Err(frame) => {
                if let Ok(trailers) = frame.into_trailers() {
                    match &mut self.trailers {
                        Some(kept) => kept.extend(trailers),
                        None => self.trailers = Some(trailers),
                    }
                }
                Ok(())
            }
        }
    }

    /// The whole body, to send again.
    pub(crate) fn finish(self) -> ReplayBody {
        let data = match self.data {
            Data::Empty => Bytes::new(),
            Data::One(data) => data,
            Data::Many(data) => data.freeze(),
        };
        let body = ReplayBody::new(data);
        match self.trailers {
            Some(trailers) => body.with_trailers(trailers),
            None => body,
        }
    }
}
