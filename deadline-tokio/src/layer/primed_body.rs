//! [`Primed`]: a body whose first frame was polled before it was handed on.

use core::pin::Pin;
use core::task::{Context, Poll};

use bytes::Buf;
use http_body::{Body, Frame, SizeHint};

pin_project_lite::pin_project! {
    /// A body whose first poll has been made already: what that poll gave (a frame, or the
    /// body's error), then the rest of the body.
    pub(crate) struct Primed<B: Body> {
        first: Option<Result<Frame<B::Data>, B::Error>>,
        #[pin]
        body: B,
    }
}

impl<B: Body> Primed<B> {
    /// `body`, whose first poll gave `first` (`None`: it gave nothing yet).
    pub(crate) const fn new(first: Option<Result<Frame<B::Data>, B::Error>>, body: B) -> Self {
        Primed { first, body }
    }
}

impl<B: Body> Body for Primed<B> {
    type Data = B::Data;
    type Error = B::Error;

    fn poll_frame(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<B::Data>, B::Error>>> {
        let this = self.project();
        match this.first.take() {
            Some(first) => Poll::Ready(Some(first)),
            None => this.body.poll_frame(cx),
        }
    }

    fn is_end_stream(&self) -> bool {
        self.first.is_none() && self.body.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        let mut hint = self.body.size_hint();
        let held = match &self.first {
            Some(Ok(frame)) => frame.data_ref().map_or(0, Buf::remaining),
            _ => 0,
        };
        let held = u64::try_from(held).unwrap_or(u64::MAX);
        // The upper bound first: `set_lower` panics above it.
        if let Some(upper) = hint.upper() {
            hint.set_upper(upper.saturating_add(held));
        }
        hint.set_lower(hint.lower().saturating_add(held));
        hint
    }
}

#[cfg(test)]
mod tests {
    use core::pin::Pin;
    use core::task::{Context, Poll};

    use bytes::Bytes;
    use http_body::{Body, Frame, SizeHint};
    use http_body_util::{BodyExt, Full};

    use super::Primed;

    /// A body that fails at its first poll or ends there, and says it holds what `hint`
    /// says.
    struct Odd {
        fails: bool,
        hint: SizeHint,
    }

    impl Odd {
        fn failing() -> Self {
            Odd {
                fails: true,
                hint: SizeHint::new(),
            }
        }

        fn sized(hint: SizeHint) -> Self {
            Odd { fails: false, hint }
        }
    }

    impl Body for Odd {
        type Data = Bytes;
        type Error = &'static str;

        fn poll_frame(
            self: Pin<&mut Self>,
            _: &mut Context<'_>,
        ) -> Poll<Option<Result<Frame<Bytes>, &'static str>>> {
            Poll::Ready(self.fails.then_some(Err("the rest failed")))
        }

        fn size_hint(&self) -> SizeHint {
            self.hint
        }
    }

    #[tokio::test]
    async fn the_frame_polled_first_comes_first_and_counts_in_the_size() {
        let primed = Primed::new(
            Some(Ok(Frame::data(Bytes::from_static(b"abc")))),
            Full::new(Bytes::from_static(b"defg")),
        );
        assert_eq!(primed.size_hint().exact(), Some(7));
        assert!(!primed.is_end_stream());
        let whole = primed.collect().await.unwrap().to_bytes();
        assert_eq!(whole, "abcdefg");
    }

    #[tokio::test]
    async fn an_error_polled_first_comes_first() {
        let primed = Primed::new(Some(Err("the first poll failed")), Odd::failing());
        assert_eq!(primed.collect().await.unwrap_err(), "the first poll failed");
        let unprimed = Primed::new(None, Odd::failing());
        assert_eq!(unprimed.collect().await.unwrap_err(), "the rest failed");
    }

    #[test]
    fn held_trailers_add_nothing_to_the_size_and_are_not_the_end() {
        let mut trailers = http::HeaderMap::new();
        trailers.insert("x-checksum", http::HeaderValue::from_static("abc"));
        let primed = Primed::new(Some(Ok(Frame::trailers(trailers))), Full::new(Bytes::new()));
        assert_eq!(primed.size_hint().exact(), Some(0));
        assert!(!primed.is_end_stream());
    }

    #[test]
    fn a_size_with_no_upper_bound_keeps_none() {
        let mut at_least_two = SizeHint::new();
        at_least_two.set_lower(2);
        let primed = Primed::new(
            Some(Ok(Frame::data(Bytes::from_static(b"abc")))),
            Odd::sized(at_least_two),
        );
        let hint = primed.size_hint();
        assert_eq!((hint.lower(), hint.upper()), (5, None));
    }

    #[test]
    fn a_size_past_the_largest_saturates() {
        let primed = Primed::new(
            Some(Ok(Frame::data(Bytes::from_static(b"x")))),
            Odd::sized(SizeHint::with_exact(u64::MAX)),
        );
        assert_eq!(primed.size_hint().exact(), Some(u64::MAX));
    }
}
