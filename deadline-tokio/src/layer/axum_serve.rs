//! `axum::serve(listener, layer.layer(router))`: a whole axum router behind
//! [`DeadlineLayer`](crate::DeadlineLayer), served as axum serves a router (feature `axum`).

use core::convert::Infallible;
use core::future::{Future, Ready, ready};
use core::pin::Pin;
use core::task::{Context, Poll};

use axum::Router;
use axum::body::Body;
use axum::extract::Request;
use axum::response::Response;
use axum::routing::future::RouteFuture;
use axum::serve::{IncomingStream, Listener};
use tower_service::Service;

use http_body::Body as _;

use super::answer::render;
use super::primed_body::Primed;
use super::server::{Bound, DeadlineFuture, DeadlineService, bounded};
use crate::context::in_scope;

/// A router wrapped whole in [`DeadlineLayer`](crate::DeadlineLayer) is what
/// [`axum::serve`](fn@axum::serve) takes, as it takes the router itself: each connection gets an
/// [`AxumService`].
///
/// ```no_run
/// use axum::{Router, routing::get};
/// use deadline_core::{ms, wire::Propagation};
/// use deadline_tokio::{DeadlineLayer, remaining};
/// use tower::Layer;
///
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() {
/// let app = Router::new().route("/", get(|| async { format!("{:?} left", remaining()) }));
/// let layer = DeadlineLayer::new(Propagation::DEFAULT.with_max(ms(10_000)), ms(1_000));
/// let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
/// axum::serve(listener, layer.layer(app)).await.unwrap();
/// # }
/// ```
impl<L: Listener> Service<IncomingStream<'_, L>> for DeadlineService<Router> {
    type Response = AxumService;
    type Error = Infallible;
    type Future = Ready<Result<AxumService, Infallible>>;

    fn poll_ready(&mut self, _cx: &mut Context<'_>) -> Poll<Result<(), Infallible>> {
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, _stream: IncomingStream<'_, L>) -> Self::Future {
        ready(Ok(AxumService::new(self)))
    }
}

/// A router wrapped whole in [`DeadlineLayer`](crate::DeadlineLayer), answering with axum's
/// own [`Response`]: what [`axum::serve`](fn@axum::serve) serves for each connection when given
/// `layer.layer(router)`.
///
/// Wrapping the whole router costs a request less than adding the layer with
/// [`Router::layer`], which puts every route behind one more boxed service and boxed
/// future.
///
/// The body of each response the handler gives is polled once as it answers, in the
/// request's scope. A body that is then whole (axum's answers from a `String`, `Json`,
/// bytes) is sent as it is, with the length it declares: with nothing left to wait for,
/// there is nothing to bound, to cut or to frame again (a whole gRPC-Web or Connect stream
/// body too, which [`DeadlineBody`](super::DeadlineBody) would send without its length, as it
/// sends it through `Router::layer`). Any other body is bounded by the layer's, boxed once
/// into axum's [`Body`], as `Router::layer` boxes it too. That first poll is made whether or
/// not the response is then sent: a body that starts its work when first polled starts it
/// as the handler answers.
#[derive(Clone, Debug)]
pub struct AxumService {
    inner: DeadlineService<Router>,
}

impl AxumService {
    /// The service for one connection. As `axum::serve` does with a router, the router's
    /// handlers are made into routes here, once per connection
    /// ([`Router::with_state`]); a router called as it is would make each request's route
    /// again (a clone and an allocation per request).
    fn new(service: &DeadlineService<Router>) -> Self {
        AxumService {
            inner: service.map_ref(|router| router.clone().with_state(())),
        }
    }
}

/// What `axum::serve` makes for each connection, made by hand: to call the wrapped router in
/// process (a test, a benchmark) as `axum::serve` calls it.
impl From<DeadlineService<Router>> for AxumService {
    fn from(service: DeadlineService<Router>) -> Self {
        AxumService::new(&service)
    }
}

impl Service<Request> for AxumService {
    type Response = Response;
    type Error = Infallible;
    type Future = AxumFuture;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Infallible>> {
        Service::<Request>::poll_ready(&mut self.inner, cx)
    }

    fn call(&mut self, request: Request) -> AxumFuture {
        AxumFuture {
            inner: self.inner.call(request),
        }
    }
}

pin_project_lite::pin_project! {
    /// The response future of [`AxumService`]: [`DeadlineService`]'s, its body sent as it
    /// is when it is whole as the handler answers, else bounded, and boxed into axum's
    /// [`Body`].
    #[must_use = "futures do nothing unless polled"]
    pub struct AxumFuture {
        #[pin]
        inner: DeadlineFuture<RouteFuture<Infallible>>,
    }
}

impl Future for AxumFuture {
    type Output = Result<Response, Infallible>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        self.project()
            .inner
            .poll_with(cx, whole_or_bounded, |answer, asked| {
                render::<Body>(answer, asked).map(Body::new)
            })
    }
}

/// The handler's `response` as axum serves it: its body as it is when it is whole, else
/// bounded as [`DeadlineBody`](super::DeadlineBody) bounds it; boxed into
/// axum's [`Body`] either way.
///
/// The body is polled once first, in the request's scope, as its first frame would be. Most
/// answers (axum's from a `String`, `Json`, bytes) are then whole: a body with nothing left
/// to send has nothing to bound, and it is sent as it is, with the length it declares. That
/// spares a request the layer's body around the handler's and its polling at each frame
/// (about 380 instructions through the router in process, the allocations the same: `bash
/// scripts/instructions.sh axum_request_deadline_layer_around`). Any other body goes on
/// under the layer's, with what its first poll gave sent first ([`Primed`]).
fn whole_or_bounded(mut response: Response, bound: Bound, cx: &mut Context<'_>) -> Response {
    let body = response.body_mut();
    let first = match in_scope(bound.deadline, || Pin::new(&mut *body).poll_frame(cx)) {
        Poll::Ready(None) => {
            *body = Body::empty();
            return response;
        }
        Poll::Ready(Some(Ok(frame))) if body.is_end_stream() => match frame.into_data() {
            Ok(whole) => {
                *body = Body::from(whole);
                return response;
            }
            // Trailers that end it go under the layer's body, as any frame but a whole body.
            Err(trailers) => Some(Ok(trailers)),
        },
        Poll::Ready(first) => first,
        Poll::Pending => None,
    };
    let response = response.map(|body| Primed::new(first, body));
    bounded(response, bound).map(Body::new)
}
