//! The deadline instant, on virtual time: whatever finishes at or near the deadline, the
//! caller gets one complete answer, and a downstream's deadline is reported as the deadline.
//!
//! - A response whose head was given out in time and whose body is complete is delivered
//!   whole, even when its body is read after the deadline (hyper reads it a moment after
//!   the head); only a body that has to wait past the deadline is cut.
//! - A failure that arrives when the time sent to the next service has run out, or is
//!   within the allowance of it, is the deadline's, measured against what was really sent:
//!   the shorter of the time left and a timeout already on the request.
//! - The clock, not the timer's wake-up, says when the deadline has passed: a handler, a
//!   scope or a stream still waiting at a poll after it ends there, though tokio's timer
//!   driver has not yet fired its timer.
//! - Except when the task's cooperative budget was spent before that poll: a tokio resource
//!   then reads "pending" whatever it holds, so the handler or the stream is polled once
//!   more, with a fresh budget, and an answer it holds is kept.

use std::convert::Infallible;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicU32, Ordering};
use std::task::{Context, Poll};
use std::time::Duration;

use bytes::Bytes;
use deadline_core::wire::{DeadlineHeader, GrpcTimeout, Propagation};
use deadline_core::{Clock, Error, ms};
use deadline_tokio::DeadlineLayer;
use deadline_tokio::layer::{BodyError, DeadlineBody, PropagateError, PropagateLayer};
use deadline_tokio::time::TokioClock;
use deadline_tokio::{Tokio, current, scope_timeout};
use http::{Request, Response, StatusCode};
use http_body::{Body, Frame};
use http_body_util::{BodyExt, Full};
use tower::{Layer, Service, ServiceExt, service_fn};

mod budget;
use budget::poll_starved;

const HOP: Propagation = Propagation::DEFAULT
    .with_allowance(ms(5))
    .with_max(ms(10_000));

fn request(headers: &[(&'static str, &'static str)]) -> Request<()> {
    let mut builder = Request::builder();
    for &(name, value) in headers {
        builder = builder.header(name, value);
    }
    builder.body(()).unwrap()
}

/// A handler that answers `Full` text half a millisecond before its deadline.
fn answers_just_in_time() -> impl Service<
    Request<()>,
    Response = Response<Full<Bytes>>,
    Error = Infallible,
    Future = impl Future<Output = Result<Response<Full<Bytes>>, Infallible>>,
> + Clone {
    service_fn(|_req: Request<()>| async {
        let deadline = current().unwrap();
        let left = deadline.remaining(TokioClock.now());
        tokio::time::sleep(left - Duration::from_micros(500)).await;
        Ok::<_, Infallible>(Response::new(Full::new(Bytes::from_static(b"complete"))))
    })
}

/// A response complete in time is delivered whole, though its body is read 2 ms after the
/// deadline, as hyper reads a body after the head it has written: the client must never
/// get an empty reply for an answer that was complete. (Before, the body checked its timer
/// first and failed, and hyper closed the connection: curl's "empty reply".)
#[tokio::test(start_paused = true)]
async fn a_response_complete_before_the_deadline_is_delivered_whole_after_it() {
    for (headers, protocol) in [
        (&[("x-deadline-ms", "50")][..], "http"),
        (
            &[
                ("grpc-timeout", "50m"),
                ("content-type", "application/grpc"),
            ][..],
            "grpc",
        ),
    ] {
        let server = DeadlineLayer::new(HOP, ms(1_000)).layer(answers_just_in_time());
        let response = server.oneshot(request(headers)).await.unwrap();
        assert_eq!(response.status(), StatusCode::OK, "{protocol}");
        assert!(
            response.headers().get("grpc-status").is_none(),
            "{protocol}"
        );
        // hyper writes the head, then reads the body: here, after the deadline.
        tokio::time::sleep(ms(2)).await;
        let body = response.into_body().collect().await.unwrap().to_bytes();
        assert_eq!(body, "complete", "{protocol}");
    }
}

/// A body that has a 64 KiB frame ready at every poll and never ends: past the deadline it
/// may still send what `LateFrames` allows (16 frames of any size, then up to 4 MiB in all:
/// 64 of these), then it is cut, as a stream that overran.
struct Endless;

impl Body for Endless {
    type Data = Bytes;
    type Error = Infallible;

    fn poll_frame(
        self: Pin<&mut Self>,
        _cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, Infallible>>> {
        Poll::Ready(Some(Ok(Frame::data(Bytes::from_static(
            &[b'x'; 64 * 1024],
        )))))
    }
}

#[tokio::test(start_paused = true)]
async fn a_body_that_never_waits_is_still_cut_after_the_deadline() {
    let server = DeadlineLayer::new(HOP, ms(1_000)).layer(service_fn(|_req: Request<()>| async {
        Ok::<_, Infallible>(Response::new(Endless))
    }));
    let response = server
        .oneshot(request(&[("x-deadline-ms", "50")]))
        .await
        .unwrap();
    tokio::time::sleep(ms(60)).await;
    let mut body = Box::pin(response.into_body());
    let mut frames = 0;
    let end = loop {
        match body.as_mut().frame().await {
            Some(Ok(_)) => frames += 1,
            other => break other,
        }
    };
    assert!(matches!(end, Some(Err(BodyError::Deadline(_)))), "{end:?}");
    assert_eq!(
        frames, 64,
        "the late frames it may send: 4 MiB of 64 KiB frames"
    );
}

/// An answer split into 40 chunks, all in memory, given out just after its deadline (the
/// handler's future was polled first, and answered): the client gets every chunk, not a
/// response cut at the 17th.
#[tokio::test(start_paused = true)]
async fn an_answer_in_many_chunks_all_ready_is_delivered_whole_after_the_deadline() {
    let server = DeadlineLayer::new(HOP, ms(1_000)).layer(service_fn(|_req: Request<()>| async {
        let frames = (0..40)
            .map(|i| Frame::data(Bytes::from(format!("chunk {i:02}\n"))))
            .collect();
        Ok::<_, Infallible>(Response::new(Ready(frames)))
    }));
    let response = server
        .oneshot(request(&[("x-deadline-ms", "50")]))
        .await
        .unwrap();
    assert_eq!(response.status(), StatusCode::OK);
    tokio::time::sleep(ms(60)).await;
    let body = response.into_body().collect().await.expect("a whole body");
    let expected: String = (0..40).map(|i| format!("chunk {i:02}\n")).collect();
    assert_eq!(body.to_bytes(), expected.as_bytes());
}

/// Frames all ready, one per poll, from a list; like a stream body, it does not say it has
/// ended until it is polled once more after the last one.
struct Ready(std::collections::VecDeque<Frame<Bytes>>);

impl Body for Ready {
    type Data = Bytes;
    type Error = Infallible;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        _cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, Infallible>>> {
        Poll::Ready(self.0.pop_front().map(Ok))
    }
}

/// A gRPC stream of 16 messages and its trailers, all ready, read after the deadline: the
/// messages are sent late, and the handler's own trailers end the body, with its own status,
/// since trailers are always the last frame.
#[tokio::test(start_paused = true)]
async fn a_streams_own_trailers_end_it_after_its_late_frames() {
    let server = DeadlineLayer::new(HOP, ms(1_000)).layer(service_fn(|_req: Request<()>| async {
        let mut trailers = http::HeaderMap::new();
        trailers.insert("grpc-status", http::HeaderValue::from_static("0"));
        let message = Bytes::from_static(b"\x00\x00\x00\x00\x01x");
        let mut frames: std::collections::VecDeque<_> =
            (0..16).map(|_| Frame::data(message.clone())).collect();
        frames.push_back(Frame::trailers(trailers));
        Ok::<_, Infallible>(
            Response::builder()
                .header("content-type", "application/grpc")
                .body(Ready(frames))
                .unwrap(),
        )
    }));
    let request = request(&[
        ("grpc-timeout", "50m"),
        ("content-type", "application/grpc"),
    ]);
    let response = server.oneshot(request).await.unwrap();
    tokio::time::sleep(ms(60)).await;
    let collected = response.into_body().collect().await.unwrap();
    let trailers = collected
        .trailers()
        .cloned()
        .expect("the stream's trailers");
    assert_eq!(trailers["grpc-status"], "0");
    assert_eq!(collected.to_bytes().len(), 16 * 6, "every message");
}

/// A gRPC-Web or Connect stream of 16 messages of 256 KiB, all ready, read after the
/// deadline, ends with its own last message (gRPC-Web's trailer frame, Connect's end-stream
/// message): that frame goes past what `LateFrames` allows (16 frames, then 4 MiB in all: the
/// messages took both), since it is the protocol's last, as gRPC's HTTP trailers are.
/// (Before, it was cut there, and the client read the layer's `DEADLINE_EXCEEDED` after
/// every message of an answer that was complete.) Once: what the body sends after it (a
/// message, then another last message) is counted, and cut, with nothing added.
#[tokio::test(start_paused = true)]
async fn a_streams_own_last_message_ends_it_after_its_late_frames() {
    const LEN: usize = 256 * 1024;
    let mut message = vec![0u8; 5 + LEN];
    message[1..5].copy_from_slice(&u32::try_from(LEN).unwrap().to_be_bytes());
    let message = Bytes::from(message);
    let grpc_web: (&'static str, u8, &'static [u8]) =
        ("application/grpc-web+proto", 0x80, b"grpc-status:0\r\n");
    let connect: (&'static str, u8, &'static [u8]) = ("application/connect+proto", 0x02, b"{}");
    for (content_type, flag, end) in [grpc_web, connect] {
        let mut last = vec![flag, 0, 0, 0, u8::try_from(end.len()).unwrap()];
        last.extend_from_slice(end);
        let last = Bytes::from(last);
        let message = message.clone();
        let handler_frames = move || {
            let mut frames: std::collections::VecDeque<_> =
                (0..16).map(|_| Frame::data(message.clone())).collect();
            frames.push_back(Frame::data(last.clone()));
            // Past the protocol's end: counted, and cut.
            frames.push_back(Frame::data(message.clone()));
            frames.push_back(Frame::data(last.clone()));
            frames
        };
        let server =
            DeadlineLayer::new(HOP, ms(1_000)).layer(service_fn(move |_req: Request<()>| {
                let frames = handler_frames();
                async move {
                    Ok::<_, Infallible>(
                        Response::builder()
                            .header("content-type", content_type)
                            .body(Ready(frames))
                            .unwrap(),
                    )
                }
            }));
        let request = if flag == 0x80 {
            request(&[("grpc-timeout", "50m"), ("content-type", content_type)])
        } else {
            request(&[("connect-timeout-ms", "50"), ("content-type", content_type)])
        };
        let response = server.oneshot(request).await.unwrap();
        tokio::time::sleep(ms(60)).await;
        let body = response.into_body().collect().await.unwrap().to_bytes();
        let messages = 16 * (5 + LEN);
        assert_eq!(
            body.len(),
            messages + 5 + end.len(),
            "{content_type}: every message, then its own end"
        );
        assert_eq!(body[messages], flag, "{content_type}");
        assert_eq!(
            &body[messages + 5..],
            end,
            "{content_type}: the handler's own end"
        );
    }
}

/// A body that sends a frame at once (`first`, if any), then waits, then sends one more
/// (`then`, if any) and ends.
struct Paced {
    first: Option<Bytes>,
    sleep: Pin<Box<tokio::time::Sleep>>,
    then: Option<Bytes>,
}

impl Paced {
    /// `first` at once, then a wait of a second for a next frame that never comes.
    fn first_then_wait(first: &'static [u8]) -> Self {
        Paced {
            first: Some(Bytes::from_static(first)),
            sleep: Box::pin(tokio::time::sleep(ms(1_000))),
            then: None,
        }
    }

    /// One frame, `then`, after `wait`.
    #[cfg(feature = "axum")]
    fn after(wait: Duration, then: &'static [u8]) -> Self {
        Paced {
            first: None,
            sleep: Box::pin(tokio::time::sleep(wait)),
            then: Some(Bytes::from_static(then)),
        }
    }
}

impl Body for Paced {
    type Data = Bytes;
    type Error = Infallible;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, Infallible>>> {
        if let Some(first) = self.first.take() {
            return Poll::Ready(Some(Ok(Frame::data(first))));
        }
        let this = &mut *self;
        this.sleep
            .as_mut()
            .poll(cx)
            .map(|()| this.then.take().map(|then| Ok(Frame::data(then))))
    }
}

/// The layer's response to a gRPC request with 50 ms left, whose handler answers a stream
/// that sends one message at once and then waits a second for the next.
async fn a_grpc_stream_that_waits_after_one_message() -> Response<DeadlineBody<Paced>> {
    let server = DeadlineLayer::new(HOP, ms(1_000)).layer(service_fn(|_req: Request<()>| async {
        Ok::<_, Infallible>(Response::new(Paced::first_then_wait(b"first")))
    }));
    server
        .oneshot(request(&[
            ("grpc-timeout", "50m"),
            ("content-type", "application/grpc"),
        ]))
        .await
        .unwrap()
}

/// A stream that must wait for its next frame at the deadline is cut there, the way its
/// protocol expects: a gRPC stream ends with `grpc-status: 4` in its trailers.
#[tokio::test(start_paused = true)]
async fn a_stream_still_waiting_at_the_deadline_ends_with_its_protocols_deadline() {
    let response = a_grpc_stream_that_waits_after_one_message().await;
    let start = TokioClock.now();
    let collected = response.into_body().collect().await.unwrap();
    let trailers = collected.trailers().cloned().unwrap();
    assert_eq!(trailers["grpc-status"], "4");
    assert_eq!(collected.to_bytes(), "first");
    assert!(TokioClock.now().saturating_duration_since(start) <= ms(46));
}

/// A connection that fails 8 ms before the request's deadline, with a 5 ms allowance: what
/// was sent ran out 3 ms ago less the trip back, so the failure is the deadline's (504), not a
/// failed dependency (502). (Before, only a failure within the allowance of the request's
/// own deadline counted, and this one went up as 502.)
#[tokio::test(start_paused = true)]
async fn a_transport_failure_near_the_time_sent_is_the_deadlines() {
    let client = PropagateLayer::new(HOP, DeadlineHeader::DeadlineMs).layer(service_fn(
        |_req: Request<()>| async {
            tokio::time::sleep(ms(92)).await;
            Err::<Response<Full<Bytes>>, _>(std::io::Error::other("connection closed"))
        },
    ));
    let failed = scope_timeout(ms(100), client.oneshot(request(&[])))
        .await
        .expect("inside its scope");
    let error = failed.unwrap_err();
    assert_eq!(error.deadline(), Some(Error::DeadlineExceeded));
    assert_eq!(StatusCode::from(error), StatusCode::GATEWAY_TIMEOUT);
    // Early in the budget the same failure is the dependency's own: 502.
    let client = PropagateLayer::new(HOP, DeadlineHeader::DeadlineMs).layer(service_fn(
        |_req: Request<()>| async {
            tokio::time::sleep(ms(20)).await;
            Err::<Response<Full<Bytes>>, _>(std::io::Error::other("connection refused"))
        },
    ));
    let failed = scope_timeout(ms(100), client.oneshot(request(&[])))
        .await
        .expect("inside its scope");
    let error = failed.unwrap_err();
    assert!(matches!(error, PropagateError::Inner(_)));
    assert_eq!(StatusCode::from(error), StatusCode::BAD_GATEWAY);
}

/// A request that carries its own 50 ms timeout (tonic's `Request::set_timeout`) inside a
/// 1 s scope: 50 ms go out, the call is bounded by them, and a client timer below that fires
/// at 50 ms (tonic's `Channel` answers `CANCELLED`) is the deadline's. (Before, the test of
/// "no time left" read the scope's 1 s, and the `CANCELLED` went up as it came.)
#[tokio::test(start_paused = true)]
async fn a_shorter_timeout_on_the_request_is_what_failures_are_measured_against() {
    let sent = Arc::new(AtomicU32::new(0));
    let seen = Arc::clone(&sent);
    // The client below times the header it is given, and fails with its own error when it
    // runs out, as tonic's `Channel` does.
    let timing_client = service_fn(move |req: Request<()>| {
        let told = GrpcTimeout::parse(req.headers()["grpc-timeout"].as_bytes())
            .unwrap()
            .duration();
        seen.store(u32::try_from(told.as_micros()).unwrap(), Ordering::SeqCst);
        async move {
            tokio::time::sleep(told).await;
            Err::<Response<Full<Bytes>>, _>(std::io::Error::other(
                "cancelled by the client's timer",
            ))
        }
    });
    let client = PropagateLayer::new(HOP, DeadlineHeader::GrpcTimeout).layer(timing_client);
    let start = TokioClock.now();
    let failed = scope_timeout(
        ms(1_000),
        client.oneshot(request(&[("grpc-timeout", "50m")])),
    )
    .await
    .expect("inside its scope");
    assert_eq!(sent.load(Ordering::SeqCst), 50_000);
    assert_eq!(
        failed.unwrap_err().deadline(),
        Some(Error::DeadlineExceeded)
    );
    assert_eq!(TokioClock.now().saturating_duration_since(start), ms(50));

    // A next service that never answers: the call ends at 50 ms plus the allowance, not at
    // the scope's 1 s.
    let client = PropagateLayer::new(HOP, DeadlineHeader::GrpcTimeout).layer(service_fn(
        |_req: Request<()>| std::future::pending::<Result<Response<Full<Bytes>>, Infallible>>(),
    ));
    let start = TokioClock.now();
    let failed = scope_timeout(
        ms(1_000),
        client.oneshot(request(&[("grpc-timeout", "50m")])),
    )
    .await
    .expect("inside its scope");
    assert_eq!(
        failed.unwrap_err(),
        PropagateError::Deadline(Error::DeadlineExceeded)
    );
    let took = TokioClock.now().saturating_duration_since(start);
    assert!(took >= ms(55) && took <= ms(56), "{took:?}");
}

/// A downstream answer complete just before the time sent runs out is relayed whole, though
/// its body is read after it.
#[tokio::test(start_paused = true)]
async fn a_downstream_answer_complete_in_time_is_relayed_whole() {
    let client = PropagateLayer::new(HOP, DeadlineHeader::DeadlineMs).layer(service_fn(
        |_req: Request<()>| async {
            tokio::time::sleep(ms(94)).await;
            Ok::<_, Infallible>(Response::new(Full::new(Bytes::from_static(b"price: 42"))))
        },
    ));
    let response = scope_timeout(ms(100), client.oneshot(request(&[])))
        .await
        .expect("inside its scope")
        .unwrap();
    // Read 10 ms after the scope's deadline: what was complete is all there.
    tokio::time::sleep(ms(10)).await;
    let body = response.into_body().collect().await.unwrap().to_bytes();
    assert_eq!(body, "price: 42");
}

/// Polls `fut` once with a waker that does nothing.
fn poll_once<F: Future + Unpin>(fut: &mut F) -> Poll<F::Output> {
    Pin::new(fut).poll(&mut Context::from_waker(std::task::Waker::noop()))
}

/// Moves the paused clock by `by` without letting tokio's timer driver run: what a loaded
/// server sees when a task is woken (by another timer, by its socket) after a stall, before
/// the driver has fired the timers that came due in it.
fn move_the_clock_only(by: Duration) {
    let mut advance = Box::pin(tokio::time::advance(by));
    // Its first poll moves the clock, then yields to the runtime, which is not run here.
    assert!(poll_once(&mut advance).is_pending());
}

/// The clock, not the timer's wake-up, says when the deadline has passed. A handler still
/// pending when the task is polled after its deadline is answered with the deadline's
/// answer at that poll, though tokio's timer driver has not yet fired the layer's timer:
/// whether it was polled in time before, or is first polled only then, as a request queued
/// behind a stall is. (A server around the layer may keep a later timer of its own, polled
/// after the layer: tonic's answers its expiry of `grpc-timeout` as `CANCELLED`.)
#[tokio::test(start_paused = true)]
async fn a_deadline_the_clock_has_passed_is_answered_before_its_timer_fires() {
    for (headers, status, grpc_status) in [
        (
            &[("x-deadline-ms", "50")][..],
            StatusCode::GATEWAY_TIMEOUT,
            None,
        ),
        (
            &[
                ("grpc-timeout", "50m"),
                ("content-type", "application/grpc"),
            ][..],
            StatusCode::OK,
            Some("4"),
        ),
    ] {
        let mut server =
            DeadlineLayer::new(HOP, ms(1_000)).layer(service_fn(|_req: Request<()>| async {
                std::future::pending::<Result<Response<Full<Bytes>>, Infallible>>().await
            }));
        // The deadline is 45 ms away: 50 ms less the 5 ms reply margin.
        let answered = |answer: &mut Pin<Box<_>>| {
            let Poll::Ready(response) = poll_once(answer) else {
                panic!("{headers:?}: still pending 1 ms after the deadline");
            };
            let response: Response<_> = Result::<_, Infallible>::unwrap(response);
            assert_eq!(response.status(), status, "{headers:?}");
            let grpc = response.headers().get("grpc-status");
            assert_eq!(
                grpc.map(|v| v.to_str().unwrap()),
                grpc_status,
                "{headers:?}"
            );
        };
        // Polled in time, then again after the deadline.
        let mut answer = Box::pin(server.call(request(headers)));
        assert!(poll_once(&mut answer).is_pending(), "{headers:?}");
        move_the_clock_only(ms(44));
        assert!(poll_once(&mut answer).is_pending(), "{headers:?}: in time");
        move_the_clock_only(ms(2));
        answered(&mut answer);
        // First polled only after the deadline.
        let mut late = Box::pin(server.call(request(headers)));
        move_the_clock_only(ms(46));
        answered(&mut late);
    }
}

/// The same for [`scope_timeout`], and for the core's generic scope on [`Tokio`]: work still
/// pending at a poll after its bound is answered with [`Error::DeadlineExceeded`] there,
/// whatever its timer says.
#[tokio::test(start_paused = true)]
async fn a_scope_the_clock_has_passed_ends_before_its_timer_fires() {
    fn check<F: Future<Output = Result<(), Error>>>(make: impl Fn() -> F) {
        // Polled in time, then again at its bound.
        let mut bounded = Box::pin(make());
        assert!(poll_once(&mut bounded).is_pending());
        move_the_clock_only(ms(29));
        assert!(poll_once(&mut bounded).is_pending());
        move_the_clock_only(ms(1));
        assert_eq!(
            poll_once(&mut bounded),
            Poll::Ready(Err(Error::DeadlineExceeded))
        );
        // First polled only after its bound.
        let mut late = Box::pin(make());
        move_the_clock_only(ms(31));
        assert_eq!(
            poll_once(&mut late),
            Poll::Ready(Err(Error::DeadlineExceeded))
        );
    }
    check(|| scope_timeout(ms(30), std::future::pending::<()>()));
    check(|| {
        deadline_core::runtime::scope_timeout::<Tokio, _>(ms(30), std::future::pending::<()>())
    });
}

/// The same for a response body: a gRPC stream waiting for its next message at a poll after
/// the deadline ends there with `grpc-status: 4`, though its timer has not fired.
#[tokio::test(start_paused = true)]
async fn a_stream_the_clock_has_passed_ends_before_its_timer_fires() {
    let response = a_grpc_stream_that_waits_after_one_message().await;
    let mut body = Box::pin(response.into_body());
    let mut frame = || {
        body.as_mut()
            .poll_frame(&mut Context::from_waker(std::task::Waker::noop()))
    };
    let Poll::Ready(Some(Ok(first))) = frame() else {
        panic!("the first message is ready");
    };
    assert_eq!(first.into_data().unwrap(), "first");
    assert!(frame().is_pending());
    move_the_clock_only(ms(44));
    assert!(frame().is_pending(), "still in time");
    move_the_clock_only(ms(2));
    let Poll::Ready(Some(Ok(last))) = frame() else {
        panic!("still waiting 1 ms after the deadline");
    };
    assert_eq!(last.into_trailers().unwrap()["grpc-status"], "4");
}

/// A response body fed by a tokio channel, as a streaming handler makes one.
struct Channel(tokio::sync::mpsc::Receiver<Bytes>);

impl Body for Channel {
    type Data = Bytes;
    type Error = Infallible;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, Infallible>>> {
        self.0.poll_recv(cx).map(|b| b.map(|b| Ok(Frame::data(b))))
    }
}

/// The layer's response, with 50 ms left, of a handler that answers with a body fed by `rx`.
async fn answering_from(rx: tokio::sync::mpsc::Receiver<Bytes>) -> Response<DeadlineBody<Channel>> {
    let mut rx = Some(rx);
    DeadlineLayer::new(HOP, ms(1_000))
        .layer(service_fn(move |_req: Request<()>| {
            let rx = rx.take().expect("one request");
            std::future::ready(Ok::<_, Infallible>(Response::new(Channel(rx))))
        }))
        .oneshot(request(&[("x-deadline-ms", "50")]))
        .await
        .unwrap()
}

/// An answer ready when the deadline comes is kept when the task's cooperative budget was
/// spent before the poll that finds it: a tokio resource then reads "pending" whatever it
/// holds (that "pending" is the budget's, not the handler's). The handler's future, and a
/// response body, get one more poll, in the task's next poll with a fresh budget: the client
/// gets the answer, not the deadline's.
#[tokio::test(start_paused = true)]
async fn an_answer_a_spent_budget_hid_at_the_deadline_is_kept() {
    // The handler: its answer arrives on a channel just before the deadline.
    let (tx, rx) = tokio::sync::oneshot::channel::<&'static str>();
    let rx = Arc::new(std::sync::Mutex::new(Some(rx)));
    let server = DeadlineLayer::new(HOP, ms(1_000)).layer(service_fn(move |_req: Request<()>| {
        let rx = rx.lock().unwrap().take().expect("one request");
        async move {
            let text = rx.await.expect("an answer");
            Ok::<_, Infallible>(Response::new(Full::new(Bytes::from_static(
                text.as_bytes(),
            ))))
        }
    }));
    let mut answer = Box::pin(server.oneshot(request(&[("x-deadline-ms", "50")])));
    assert!(poll_once(&mut answer).is_pending());
    tx.send("ready").unwrap();
    tokio::time::advance(ms(60)).await;
    assert!(
        poll_starved(&mut answer).await.is_pending(),
        "answered without its answer"
    );
    tokio::task::yield_now().await;
    let Poll::Ready(response) = poll_once(&mut answer) else {
        panic!("still pending with a fresh budget");
    };
    let response = response.unwrap();
    assert_eq!(response.status(), StatusCode::OK);
    let body = response.into_body().collect().await.unwrap().to_bytes();
    assert_eq!(body, "ready");

    // The body: its next frame arrives just before the deadline.
    let (tx, rx) = tokio::sync::mpsc::channel(1);
    let response = answering_from(rx).await;
    let mut body = Box::pin(response.into_body());
    let mut frame = Box::pin(std::future::poll_fn(move |cx| body.as_mut().poll_frame(cx)));
    assert!(poll_once(&mut frame).is_pending());
    tx.send(Bytes::from_static(b"last")).await.unwrap();
    drop(tx);
    tokio::time::advance(ms(60)).await;
    assert!(
        poll_starved(&mut frame).await.is_pending(),
        "cut with its frame ready"
    );
    tokio::task::yield_now().await;
    let Poll::Ready(Some(Ok(last))) = poll_once(&mut frame) else {
        panic!("no frame with a fresh budget");
    };
    assert_eq!(last.into_data().unwrap(), "last");
}

/// A streaming answer complete at the deadline, fed by a channel (as a streaming handler
/// makes one: here 300 small frames, queued before the deadline, the sender gone), is
/// delivered whole after it, though reading the channel spends the task's cooperative
/// budget again and again (each read takes one unit of it; tokio gives 128 per poll of the
/// task). Each time, the channel's "pending" is the budget's, and the body gets one more poll
/// with a fresh budget, as long as every poll gives frames. (Before, it got one such poll in
/// its life, and the answer was cut after about 256 frames.) It is still cut where it
/// waits, and after what `LateFrames` allows.
#[tokio::test(start_paused = true)]
async fn a_streaming_answer_complete_at_the_deadline_is_delivered_whole_whatever_it_costs_the_budget()
 {
    const FRAMES: usize = 300;
    let (tx, rx) = tokio::sync::mpsc::channel(FRAMES);
    for _ in 0..FRAMES {
        tx.send(Bytes::from_static(b"x")).await.unwrap();
    }
    drop(tx);
    let response = answering_from(rx).await;
    tokio::time::advance(ms(60)).await;
    let body = response
        .into_body()
        .collect()
        .await
        .expect("the whole answer, not cut")
        .to_bytes();
    assert_eq!(body.len(), FRAMES);
}

/// A streaming gRPC answer fed by a producer the handler spawns with `propagate` (a message
/// every 10 ms, for ever, into a channel of 4) ends with `DEADLINE_EXCEEDED` when it is read
/// after the deadline: `propagate` carries the deadline into the producer without bounding
/// it, so the producer does not close the channel at the deadline, which the body would read
/// as the stream complete, with no status of the layer's (a server would send `OK`). The
/// messages queued before the deadline all come.
#[tokio::test(start_paused = true)]
async fn a_stream_fed_by_a_propagated_producer_ends_with_the_deadlines_status() {
    let server = DeadlineLayer::new(HOP, ms(1_000)).layer(service_fn(|_req: Request<()>| async {
        let (tx, rx) = tokio::sync::mpsc::channel(4);
        tokio::spawn(deadline_tokio::propagate(async move {
            loop {
                // One gRPC message of one byte.
                let message = Bytes::from_static(&[0, 0, 0, 0, 1, b'x']);
                if tx.send(message).await.is_err() {
                    return;
                }
                tokio::time::sleep(ms(10)).await;
            }
        }));
        let mut response = Response::new(Channel(rx));
        response
            .headers_mut()
            .insert("content-type", "application/grpc".parse().unwrap());
        Ok::<_, Infallible>(response)
    }));
    let response = server
        .oneshot(request(&[
            ("content-type", "application/grpc"),
            ("grpc-timeout", "55m"),
        ]))
        .await
        .unwrap();
    // Read after the deadline (55 ms less the 5 ms reply margin: 50 ms), as a slow client
    // reads it; the producer has filled the channel and waits.
    tokio::time::sleep(ms(60)).await;
    let collected = response.into_body().collect().await.unwrap();
    let trailers = collected
        .trailers()
        .cloned()
        .expect("the deadline's trailers");
    assert_eq!(trailers["grpc-status"], "4");
    // The 4 queued, and one more if the producer ran while they were read.
    let messages = collected.to_bytes().len() / 6;
    assert!((4..=5).contains(&messages), "{messages} messages");
}

/// `DeadlineLayer` around a whole axum router, as `axum::serve(listener, layer.layer(router))`
/// serves it ([`AxumService`](deadline_tokio::layer::AxumService)): the same rules for every
/// kind of body. A body whole when the handler answers (axum's answers from a `String`,
/// `Json`, bytes) is sent as it is; any other is bounded by the deadline, with what its first
/// poll (made as the handler answered) gave sent first.
#[cfg(feature = "axum")]
mod around_an_axum_router {
    use axum::Router;
    use axum::body::Body as AxumBody;
    use axum::response::{IntoResponse, Response as AxumResponse};
    use axum::routing::get;
    use deadline_tokio::layer::AxumService;
    use deadline_tokio::remaining;
    use http::header;

    use super::*;

    /// One request to `path` of `router` behind the layer, with 50 ms left and `headers`.
    async fn serve(router: Router, path: &str, headers: &[(&str, &str)]) -> AxumResponse {
        let service = AxumService::from(DeadlineLayer::new(HOP, ms(1_000)).layer(router));
        let mut request = Request::get(path).header("x-deadline-ms", "50");
        for &(name, value) in headers {
            request = request.header(name, value);
        }
        service
            .oneshot(request.body(AxumBody::empty()).unwrap())
            .await
            .unwrap()
    }

    /// The layer's error, under axum's, from a body cut or failed.
    fn layer_error(error: &axum::Error) -> &BodyError<axum::Error> {
        std::error::Error::source(error)
            .and_then(|source| source.downcast_ref())
            .unwrap_or_else(|| panic!("not the layer's error: {error:?}"))
    }

    /// Waits until half a millisecond before the request's deadline.
    async fn just_in_time() {
        let left = current().unwrap().remaining(TokioClock.now());
        tokio::time::sleep(left - Duration::from_micros(500)).await;
    }

    /// An answer whole when it is given (half a millisecond before the deadline) is
    /// delivered whole, with its length, though it is read 1.5 ms after the deadline; one
    /// with no body is delivered empty.
    #[tokio::test(start_paused = true)]
    async fn a_whole_answer_is_delivered_whole_after_the_deadline() {
        let router = Router::new()
            .route(
                "/",
                get(|| async {
                    just_in_time().await;
                    "complete"
                }),
            )
            .route(
                "/none",
                get(|| async {
                    just_in_time().await;
                    StatusCode::NO_CONTENT
                }),
            );
        let response = serve(router.clone(), "/", &[]).await;
        assert_eq!(response.status(), StatusCode::OK);
        assert_eq!(response.headers()[header::CONTENT_LENGTH], "8");
        tokio::time::sleep(ms(2)).await;
        let body = response.into_body().collect().await.unwrap().to_bytes();
        assert_eq!(body, "complete");

        let response = serve(router, "/none", &[]).await;
        assert_eq!(response.status(), StatusCode::NO_CONTENT);
        tokio::time::sleep(ms(2)).await;
        let body = response.into_body();
        assert!(body.is_end_stream(), "an empty body ends at once");
        assert!(body.collect().await.unwrap().to_bytes().is_empty());
    }

    /// A body that never waits may send what `LateFrames` allows past the deadline, the
    /// frame polled as the handler answered among them (64 of 64 KiB), then it is cut.
    #[tokio::test(start_paused = true)]
    async fn a_body_that_never_waits_is_still_cut_after_the_deadline() {
        let router = Router::new().route("/", get(|| async { AxumBody::new(Endless) }));
        let response = serve(router, "/", &[]).await;
        tokio::time::sleep(ms(60)).await;
        let mut body = response.into_body();
        let mut frames = 0;
        let end = loop {
            match body.frame().await {
                Some(Ok(_)) => frames += 1,
                other => break other,
            }
        };
        let error = end.expect("an error, not an end").unwrap_err();
        assert!(matches!(layer_error(&error), BodyError::Deadline(_)));
        assert_eq!(frames, 64, "the late frames it may send: 4 MiB of 64 KiB");
    }

    /// A body with one frame ready: that frame goes first; waiting at the deadline for the
    /// next, it is cut there (45 ms in: 50 ms sent, less the 5 ms reply margin), as a cut
    /// stream.
    #[tokio::test(start_paused = true)]
    async fn a_frame_then_a_wait_is_sent_then_cut_at_the_deadline() {
        let router = Router::new().route(
            "/",
            get(|| async { AxumBody::new(Paced::first_then_wait(b"first")) }),
        );
        let start = TokioClock.now();
        let response = serve(router, "/", &[]).await;
        assert_eq!(response.status(), StatusCode::OK);
        let mut body = response.into_body();
        let first = body.frame().await.unwrap().unwrap().into_data().unwrap();
        assert_eq!(first, "first");
        let error = body.frame().await.unwrap().unwrap_err();
        assert!(matches!(layer_error(&error), BodyError::Deadline(_)));
        assert_eq!(TokioClock.now().saturating_duration_since(start), ms(45));
    }

    /// A body that fails at its first poll.
    struct Broken;

    impl Body for Broken {
        type Data = Bytes;
        type Error = std::io::Error;

        fn poll_frame(
            self: Pin<&mut Self>,
            _cx: &mut Context<'_>,
        ) -> Poll<Option<Result<Frame<Bytes>, std::io::Error>>> {
            Poll::Ready(Some(Err(std::io::Error::other(
                "the handler's stream broke",
            ))))
        }
    }

    /// Its error, polled as the handler answered, is the body's, as the handler's own.
    #[tokio::test(start_paused = true)]
    async fn a_body_failing_at_once_fails_with_its_own_error() {
        let router = Router::new().route("/", get(|| async { AxumBody::new(Broken) }));
        let response = serve(router, "/", &[]).await;
        let error = response.into_body().collect().await.unwrap_err();
        assert!(matches!(layer_error(&error), BodyError::Inner(_)));
        assert!(
            format!("{error:?}").contains("the handler's stream broke"),
            "{error:?}"
        );
    }

    /// A gRPC-Web stream whose first frame is a whole message and the start of the next,
    /// then waits: at the deadline it ends after the whole message, with its trailer frame
    /// saying `DEADLINE_EXCEEDED`; the part of a message is never sent.
    #[tokio::test(start_paused = true)]
    async fn a_grpc_web_stream_is_cut_after_its_whole_messages() {
        const GRPC_WEB: &str = "application/grpc-web+proto";
        let router = Router::new().route(
            "/",
            get(|| async {
                // A whole message of 1 byte, then the start of one of 5.
                let frame = b"\x00\x00\x00\x00\x01x\x00\x00\x00\x00\x05ab";
                let body = AxumBody::new(Paced::first_then_wait(frame));
                ([(header::CONTENT_TYPE, GRPC_WEB)], body).into_response()
            }),
        );
        let response = serve(router, "/", &[("content-type", GRPC_WEB)]).await;
        let body = response.into_body().collect().await.unwrap().to_bytes();
        let (message, trailer) = body.split_at(6);
        assert_eq!(message, b"\x00\x00\x00\x00\x01x", "the whole message");
        assert_eq!(
            trailer.first(),
            Some(&0x80),
            "then the trailer frame: {body:?}"
        );
        let trailer = String::from_utf8_lossy(&trailer[5..]);
        assert!(trailer.contains("grpc-status:4"), "{trailer}");
    }

    /// A whole body of messages, as a gRPC-Web handler answers a unary call (its message
    /// and its trailer frame in one buffer), is sent as the handler wrote it, with its
    /// length: it cannot be cut, so nothing is framed again or written into it. In the base64
    /// form too, whose text here is padded in the middle, as two encodings put end to end are.
    #[tokio::test(start_paused = true)]
    async fn a_whole_body_of_messages_is_sent_as_written_with_its_length() {
        const BINARY: &[u8] = b"\x00\x00\x00\x00\x02xy\x80\x00\x00\x00\x0fgrpc-status:0\r\n";
        const TEXT: &str = "AAAAAAJ4eQ==gAAAAA9ncnBjLXN0YXR1czowDQo=";
        for (content_type, written) in [
            ("application/grpc-web+proto", BINARY),
            ("application/grpc-web-text+proto", TEXT.as_bytes()),
        ] {
            let router = Router::new().route(
                "/",
                get(move || async move {
                    ([(header::CONTENT_TYPE, content_type)], written).into_response()
                }),
            );
            let response = serve(router, "/", &[("content-type", content_type)]).await;
            let length = written.len().to_string();
            assert_eq!(
                response.headers()[header::CONTENT_LENGTH],
                length.as_str(),
                "{content_type}"
            );
            let body = response.into_body();
            assert_eq!(body.size_hint().exact(), Some(written.len() as u64));
            let sent = body.collect().await.unwrap().to_bytes();
            assert_eq!(sent, written, "{content_type}");
        }
    }

    /// A body that waits at its first poll is bounded: one whose frame comes 10 ms later is
    /// delivered whole; one whose frame would come after the deadline is cut there.
    #[tokio::test(start_paused = true)]
    async fn a_body_waiting_at_its_first_poll_is_bounded() {
        let router = Router::new()
            .route(
                "/soon",
                get(|| async { AxumBody::new(Paced::after(ms(10), b"later")) }),
            )
            .route(
                "/late",
                get(|| async { AxumBody::new(Paced::after(ms(1_000), b"later")) }),
            );
        let response = serve(router.clone(), "/soon", &[]).await;
        let body = response.into_body().collect().await.unwrap().to_bytes();
        assert_eq!(body, "later");

        let start = TokioClock.now();
        let response = serve(router, "/late", &[]).await;
        let error = response.into_body().collect().await.unwrap_err();
        assert!(matches!(layer_error(&error), BodyError::Deadline(_)));
        assert_eq!(TokioClock.now().saturating_duration_since(start), ms(45));
    }

    /// A body of trailers alone, which says it has ended once it has given them.
    struct OnlyTrailers {
        sent: bool,
    }

    impl Body for OnlyTrailers {
        type Data = Bytes;
        type Error = Infallible;

        fn poll_frame(
            mut self: Pin<&mut Self>,
            _cx: &mut Context<'_>,
        ) -> Poll<Option<Result<Frame<Bytes>, Infallible>>> {
            if self.sent {
                return Poll::Ready(None);
            }
            self.sent = true;
            let mut trailers = http::HeaderMap::new();
            trailers.insert("x-checksum", http::HeaderValue::from_static("abc"));
            Poll::Ready(Some(Ok(Frame::trailers(trailers))))
        }

        fn is_end_stream(&self) -> bool {
            self.sent
        }
    }

    /// Trailers that end a body at its first poll reach the client.
    #[tokio::test(start_paused = true)]
    async fn trailers_that_end_a_body_at_once_are_sent() {
        let router = Router::new().route(
            "/",
            get(|| async { AxumBody::new(OnlyTrailers { sent: false }) }),
        );
        let response = serve(router, "/", &[]).await;
        let collected = response.into_body().collect().await.unwrap();
        assert_eq!(collected.trailers().unwrap()["x-checksum"], "abc");
        assert!(collected.to_bytes().is_empty());
    }

    /// A body that notes the time left in its scope when first polled, and is whole then.
    struct Noting(Arc<std::sync::Mutex<Option<Option<Duration>>>>);

    impl Body for Noting {
        type Data = Bytes;
        type Error = Infallible;

        fn poll_frame(
            self: Pin<&mut Self>,
            _cx: &mut Context<'_>,
        ) -> Poll<Option<Result<Frame<Bytes>, Infallible>>> {
            let mut noted = self.0.lock().unwrap();
            if noted.is_some() {
                return Poll::Ready(None);
            }
            *noted = Some(remaining());
            Poll::Ready(Some(Ok(Frame::data(Bytes::from_static(b"noted")))))
        }

        fn is_end_stream(&self) -> bool {
            self.0.lock().unwrap().is_some()
        }
    }

    /// The body is first polled, as the handler answers, in the request's scope: it sees
    /// the request's deadline (45 ms left: 50 ms sent, less the 5 ms reply margin).
    #[tokio::test(start_paused = true)]
    async fn a_body_is_first_polled_in_the_requests_scope() {
        let noted = Arc::new(std::sync::Mutex::new(None));
        let seen = Arc::clone(&noted);
        let router = Router::new().route(
            "/",
            get(move || {
                let noted = Arc::clone(&noted);
                async move { AxumBody::new(Noting(noted)) }
            }),
        );
        let response = serve(router, "/", &[]).await;
        assert_eq!(
            *seen.lock().unwrap(),
            Some(Some(ms(45))),
            "polled in the scope"
        );
        let body = response.into_body().collect().await.unwrap().to_bytes();
        assert_eq!(body, "noted");
    }
}
