//! Tower layers that carry the deadline across HTTP hops (feature `tower`).
//!
//! - [`DeadlineLayer`](crate::DeadlineLayer), on a server: each request's deadline comes from its deadline headers
//!   (the earliest of `grpc-timeout`, `connect-timeout-ms`, `x-deadline-ms` and Envoy's
//!   `x-envoy-expected-rq-timeout-ms`), clamped to the server's maximum, and the handler runs
//!   in a [`scope`](crate::scope) with it. A request with no time to be served is answered at
//!   once, without calling the handler; a handler still running at the deadline is dropped,
//!   and the answer is 504 (`DEADLINE_EXCEEDED` for gRPC). With axum, wrap the whole router
//!   and serve that: `axum::serve(listener, layer.layer(router))` (feature `axum`,
//!   `AxumService`). `Router::layer(layer)` works too, at the cost of one more boxed
//!   service and future on every route; it is the way when the router is served with
//!   `into_make_service_with_connect_info`.
//! - [`PropagateLayer`], on a client: each request made inside a scope carries the time left,
//!   minus the per-hop allowance, in a header; a request with nothing left to send is not
//!   made, the call and its response body are bounded by what was sent, and a downstream
//!   failure that is the deadline's is reported as the deadline's.
//! - [`DependencyLayer`](crate::DependencyLayer), on a client: each request is one call to a
//!   [`Dependency`](crate::Dependency), with the retries, hedges, retry budget and circuit
//!   breaker of its policy; each attempt sends a copy of the request through
//!   [`PropagateService`], with the attempt's own time left in its header. Requests with a
//!   body that is not `Clone` (tonic's) are read into memory once and sent again
//!   ([`DependencyLayer::buffered`](crate::DependencyLayer::buffered), [`ReplayBody`]).
//!
//! Every protocol rule is the core's, in [`deadline_core::wire`]: which header wins
//! ([`Incoming`](deadline_core::wire::Incoming)), what is sent
//! ([`Propagation::send`](deadline_core::wire::Propagation::send)), which failure is the
//! deadline's ([`Sent::is_deadline_failure`](deadline_core::wire::Sent::is_deadline_failure)),
//! which response is retried ([`ResponseHead::classify`](deadline_core::wire::ResponseHead::classify)),
//! and every answer in every protocol ([`Answer`](deadline_core::wire::Answer)). The layers
//! read headers, read the clock, call those and write what they return. Every future and
//! body is bounded the same way, as tokio's own `timeout` bounds a future: the work first,
//! then a timer armed only when it is pending (here made only then, too).
//!
//! The futures are written by hand, not boxed: a layer allocates nothing per request beyond
//! what `http` itself does (the header value a client writes), the short text of an answer
//! it makes itself, the timer of a response body that has to wait for a frame (a body
//! complete when it is answered, as most are, never needs one; kept off the body, the timer
//! leaves it small to move and to box), the reader of a body of gRPC, gRPC-Web or Connect
//! streaming messages, and, around a whole axum router (`AxumService`), the box of axum's
//! `Body` that holds a response's body there. A body cut at the deadline allocates what it
//! ends with (gRPC's trailers, gRPC-Web's or Connect's last frame), and gRPC trailers
//! relayed near the end of the time sent, when they are the deadline's, are rewritten,
//! which allocates.
//!
//! # One layer on the server, one on its client
//!
//! A request arrives with 200 ms. The server keeps 5 ms to answer in (its reply margin), so
//! its handler has 195 ms. It works for 50 ms, then calls the next service, which is told
//! 195 - 50 - 5 = 140 ms (5 ms are kept for the network):
//!
//! ```
//! use std::convert::Infallible;
//!
//! use deadline_core::ms;
//! use deadline_core::wire::Propagation;
//! use deadline_core::wire::DeadlineHeader;
//! use deadline_tokio::DeadlineLayer;
//! use deadline_tokio::layer::PropagateLayer;
//! use http::{Request, Response};
//! use http_body_util::BodyExt;
//! use tower::{Layer, ServiceExt, service_fn};
//!
//! // Kept back per hop: 5 ms. The most a caller is believed: 10 s.
//! static HOP: Propagation = Propagation::DEFAULT.with_allowance(ms(5)).with_max(ms(10_000));
//!
//! # #[tokio::main(flavor = "current_thread", start_paused = true)]
//! # async fn main() {
//! // The next service: it answers with the header it was sent.
//! let next = service_fn(|req: Request<()>| async move {
//!     let sent = req.headers().get("grpc-timeout").cloned();
//!     Ok::<_, Infallible>(Response::new(sent))
//! });
//! let client = PropagateLayer::new(HOP, DeadlineHeader::GrpcTimeout).layer(next);
//!
//! // Our server: one layer around the handler. Without a header, a request gets 1 s.
//! let server = DeadlineLayer::new(HOP, ms(1_000)).layer(service_fn(move |_req: Request<()>| {
//!     let client = client.clone();
//!     async move {
//!         tokio::time::sleep(ms(50)).await; // our own work
//!         let sent = client.oneshot(Request::new(())).await.unwrap().into_body();
//!         let sent = sent.into_inner().unwrap().unwrap();
//!         Ok::<_, Infallible>(Response::new(sent.to_str().unwrap().to_owned()))
//!     }
//! }));
//!
//! let request = Request::builder().header("grpc-timeout", "200m").body(()).unwrap();
//! let response = server.oneshot(request).await.unwrap();
//! assert_eq!(response.into_body().collect().await.unwrap().to_bytes(), "140000u");
//! # }
//! ```
//!
//! # DeadlineLayer in detail
//!
//! For each request, when the layer is called:
//!
//! 1. **The deadline** is the earliest of the request's `grpc-timeout`,
//!    `connect-timeout-ms`, `x-deadline-ms` and Envoy's `x-envoy-expected-rq-timeout-ms`
//!    headers ([`Incoming::budget`](deadline_core::wire::Incoming::budget)), or the default budget; clamped to
//!    [`Propagation::max`](deadline_core::wire::Propagation::max); less the [reply margin](deadline_core::wire::ServerPolicy::reply_margin), kept for
//!    the answer to reach the caller in time ([`ServerPolicy::accept`](deadline_core::wire::ServerPolicy::accept)).
//! 2. **A request that cannot be served** is answered at once, without calling the
//!    handler: a malformed deadline header 400 (`INVALID_ARGUMENT`), naming it; a deadline
//!    already passed 504 (`DEADLINE_EXCEEDED`); too little time for the
//!    [admission](crate::DeadlineLayer::with_admission) rule 503 (`UNAVAILABLE`).
//! 3. **The handler** runs in a [`scope`](deadline_core::runtime::scope) with the deadline,
//!    from the inner service's `call` on: [`current`](crate::current),
//!    [`remaining`](crate::remaining), [`decide`](crate::low_level::decide),
//!    [`Dependency::run`](deadline_core::Dependency::run), [`PropagateLayer`] and
//!    the database helpers inside it read it there, the one place the request's deadline is
//!    kept (a task the handler spawns takes it along with [`propagate`](crate::propagate)).
//! 4. **At the deadline** a handler still running is dropped, which cancels its work, and
//!    the answer is `DEADLINE_EXCEEDED`. A handler that has answered is never thrown away
//!    for the timer, and its body is bounded as [`DeadlineBody`] says: a response complete
//!    at the deadline is delivered whole, and a gRPC, gRPC-Web (binary or base64) or Connect
//!    stream cut there ends after a whole message (of up to 4 MiB), with the deadline's
//!    status. (Around a whole axum router, `AxumService`, a body already whole when the
//!    handler answers is sent as it is, with nothing left to bound; that first look at the
//!    body, made as the handler answers, reads no clock, and a body it finds waiting is left
//!    to the layer's body, which does at its next poll.)
//!    Every poll that finds the handler or its body waiting reads the clock, so one still
//!    waiting when its task is polled after the deadline ends there, even if tokio's timer
//!    driver, behind on a loaded runtime, has not fired the layer's timer yet. When the task's
//!    cooperative budget was spent before that poll (tokio's resources then read pending
//!    whatever they hold), the handler or the body is polled once more, in the task's next
//!    poll, so that an answer that came in time is not lost to the budget.
//!
//! tonic's server keeps a timer of its own for `grpc-timeout` around every layer, and
//! answers its expiry as `CANCELLED`. It runs out the [reply margin](crate::DeadlineLayer::with_reply_margin)
//! after the layer's deadline, and each poll reaches the layer before it, so the layer
//! answers first unless the thread stalls for longer than the margin between the two, inside
//! one poll (seen only with the test machine's two cores saturated by busy loops at a higher
//! priority: about one call in 5 000). A wider margin makes that rarer. Its timer also takes
//! `Server::timeout`, when one is set: one shorter than a request's budget fires first, and
//! the caller reads `CANCELLED`. Leave it unset, or at the layer's
//! [maximum](deadline_core::wire::Propagation::with_max) or more: the layer bounds every
//! request.
//!
//! Every answer the layer makes is in the request's protocol ([`Answer`](deadline_core::wire::Answer)): a gRPC request
//! gets HTTP 200 trailers-only with `grpc-status`, in its own media type and codec (a
//! gRPC-Web request the same, in gRPC-Web's), a Connect request Connect's error, any other an HTTP status with
//! a short text. A service error that comes within the failure window before the deadline
//! (two of the layer's hop allowances and a millisecond:
//! [`ServerPolicy::failure_window`](deadline_core::wire::ServerPolicy::failure_window)) or
//! after it is answered the same, as the deadline's (a client layer inside, such as
//! `PropagateLayer`, sending with the same allowance, fails as its deadline there: what it
//! sent running out, nothing left to send, or this deadline, by which it is bounded too), and
//! so is a response body that fails then. The window goes by time alone: the error itself is
//! dropped, and any failure in that last stretch, a service's own included, reads as the
//! deadline. An error before the window is the service's, passed on, whatever made it: a
//! client layer whose allowance is larger than the layer's fails as its deadline before the
//! window, and a `DependencyLayer`'s own errors (a floor not met, its cap, a call skipped)
//! often come before it too. The HTTP server closes the connection or resets the stream on
//! such an error, so answer it inside (axum's `HandleErrorLayer`; a [`DependencyError`] gives
//! its `http::StatusCode` with `From`).
//! What margin to pick, and what a server can and cannot do about a client's own timer, is
//! in [the guide](deadline_core::guide#clients-that-time-their-own-calls).
//!
//! **Browsers (gRPC-Web, connect-web): put CORS outside.** The layer's own answers (a
//! request refused on arrival, a handler dropped at the deadline) are made by the layer, so
//! a CORS layer inside it (on the router it wraps) never sees them; a browser drops a
//! cross-origin answer without `access-control-allow-origin`, and the page reads a network
//! failure instead of `DEADLINE_EXCEEDED`. With tonic, add the CORS layer before this one
//! (`Server::builder().layer(cors).layer(deadline)`: the first is outermost); with axum,
//! serve an outer router that wraps the whole app:
//! `Router::new().fallback_service(layer.layer(app)).layer(cors)` (tower-http's
//! `CorsLayer`, or any layer that adds the headers).
//!
//! **Limits: put them inside.** A request's budget runs from when it arrived. A layer inside
//! this one that makes requests wait for the service to be ready (tower's
//! `ConcurrencyLimit` or `RateLimit`, a `Buffer`) holds them in `poll_ready`, before this
//! layer's `call`: the layer notes when `poll_ready` first found the service behind it not
//! ready, spends that wait from the budget, and answers a request whose deadline passed
//! while it waited at once, without calling the handler (or sheds it, if what is left is
//! less than the admission rule needs). A limit outside this layer holds requests before
//! the layer sees them, and that wait is not counted. (A `Buffer` inside it runs the services
//! behind it on its worker's task, outside the request's scope, where they do not see its
//! deadline: keep the client layers out from behind one, as below.)
//!
//! # PropagateLayer in detail
//!
//! For each request, when the service is called ([`Propagation::send`](deadline_core::wire::Propagation::send) decides):
//!
//! - **The header** chosen ([`DeadlineHeader`](deadline_core::wire::DeadlineHeader)) is set to the time left less the
//!   [allowance](deadline_core::wire::Propagation::allowance), or to a shorter timeout the request already
//!   carries (tonic's `Request::set_timeout(50 ms)` inside a 1 s scope goes out with
//!   50 ms). Every other deadline header the request carries is set to the same, so that
//!   none tells the next service more than is left (a longer one, a stale one a proxy
//!   passed on, one that cannot be read). With nothing left to send, the request is not made:
//!   [`PropagateError::Deadline`]`(`[`Error::DeadlineExceeded`](deadline_core::Error::DeadlineExceeded)`)`.
//! - **The call** (and its response body, [`PropagateBody`]) is bounded by what was sent
//!   plus the allowance, never past the scope's deadline ([`Sent::deadline`](deadline_core::wire::Sent::deadline)): the library's
//!   timer, not a client's below it, decides.
//! - **A failure that is the deadline's** is reported as the deadline's, 504 /
//!   `DEADLINE_EXCEEDED`, not as a failed dependency: a transport error, an HTTP 408, 502,
//!   503 or 504 (or 499, Connect's `canceled`, to a Connect unary call), a gRPC
//!   `CANCELLED`, `UNAVAILABLE` or `DEADLINE_EXCEEDED` (none with a
//!   `Retry-After` or `grpc-retry-pushback-ms`, the server's own word), arriving when
//!   the time sent has run out or is within the allowance of it
//!   ([`Sent::is_deadline_failure`](deadline_core::wire::Sent::is_deadline_failure)). With time left, every answer is relayed as it came.
//! - **Inside a [`Dependency::run`](deadline_core::Dependency::run) attempt**, the layer tells
//!   the runtime what it sent ([`note_sent`](deadline_core::runtime::note_sent)): whatever
//!   error the attempt makes of a failure that comes once that is running out (the layer's
//!   own [`PropagateError::Deadline`], a 504 turned into an error), if its classifier reads
//!   it as one a retry may fix ([`Outcome::Failed`](deadline_core::Outcome::Failed) or
//!   [`Outcome::Refused`](deadline_core::Outcome::Refused), as the default classifier reads
//!   any error), the call counts it as the attempt's timeout and answers [`Error::Timeout`](deadline_core::Error::Timeout) (504)
//!   if it then gives up, never a failed dependency (502). An attempt that had nothing left
//!   to send never reached the dependency ([`Onward::Nothing`](deadline_core::runtime::Onward::Nothing)):
//!   the breaker does not count it. With the call's time short, no retry or hedge follows,
//!   the timeouts do not count it, and the call ends with
//!   [`Error::DeadlineExceeded`](deadline_core::Error::DeadlineExceeded) (504), or with an
//!   earlier attempt's failure if one failed before it; with only the attempt's own time
//!   short (its cap), it ran out of time, and is retried as a timeout is, as the guide says ("Timeouts
//!   are timeouts").
//! - **Outside any scope** the request passes through unchanged and unbounded.
//!
//! The deadline is read when the service is *called*: put this layer where it is called
//! from the request's task, not behind a `Buffer`, whose worker runs in a task of its own.
//!
//! # DependencyLayer in detail
//!
//! For each request, [`Dependency::run`](deadline_core::Dependency::run) (here
//! [`run_attempt`](deadline_core::Dependency::run_attempt)) runs the call under the current
//! deadline (the request's [`scope`](crate::scope), if there is one), keeping the
//! [`reserve`](crate::DependencyLayer::reserve) after it:
//!
//! - **A timeout the request carries** (tonic's `Request::set_timeout(50 ms)`, a deadline
//!   header set by hand: the shortest that can be read) is for the whole call, from when the
//!   service is called: the call runs within it as within a scope, so a retry or a hedge goes
//!   out with what is left of those 50 ms, less the allowance, and a call whose attempts hang
//!   ends when they run out. (The reserve does not come off it: that is for the work after
//!   the call. A buffered request's body is read before the first attempt, unbounded by it,
//!   as by the scope: the read counts against the 50 ms, not cut at their end.)
//! - **Attempts.** Each attempt (the first, each retry, each hedge) sends its own copy of the
//!   request through the inner service, wrapped in [`PropagateService`]: the copy carries the
//!   attempt's own time left (its timeout, `min(left - reserve, cap)`, as it runs down) less
//!   the per-hop allowance, in the [`DeadlineHeader`](deadline_core::wire::DeadlineHeader) chosen, and is not sent when nothing
//!   is left of it. Every attempt is bounded by its timeout; a hedge that loses, and every
//!   attempt still running when the call ends, is dropped (which, on a hyper or tonic
//!   connection, resets its stream). The response body of the attempt that answers is
//!   bounded by that attempt's deadline, as [`PropagateLayer`] bounds it. A retry or a hedge
//!   waits for its copy of the inner service to be ready within its own timeout: a limit
//!   below the layer (`ConcurrencyLimit`, `RateLimit`, a full `Buffer`) that holds it until
//!   then counts as the dependency's timeout, and against its breaker. Put such limits above
//!   the layer, where the caller's `poll_ready` waits for them.
//! - **Retries, hedges, budget, breaker**: all the dependency's, as for any call to it: its
//!   policy's retries and hedges, its retry budget, its circuit breaker, and every call
//!   recorded in its counters and latency histogram.
//! - **Responses** are classified by the core ([`ResponseHead::classify`](deadline_core::wire::ResponseHead::classify)): a 2xx or 3xx (a gRPC status 0)
//!   is the answer; a 500, 502, 503, 408 or 429 (gRPC `UNAVAILABLE`, `RESOURCE_EXHAUSTED` or
//!   `CANCELLED`; a 499 to a Connect unary call, Connect's `canceled`; but a 500 to a Connect
//!   unary call is Connect's `unknown`, `internal` or `data_loss`, not retried as gRPC's
//!   `INTERNAL` is not) is an attempt that failed,
//!   retried as the policy allows, after the server's `Retry-After` (in seconds, or an HTTP
//!   date, read on the system clock) or `grpc-retry-pushback-ms` if it sent one; a 504 (gRPC
//!   `DEADLINE_EXCEEDED`) is the attempt's timeout, whenever it comes (the next service
//!   answers it by its own margins before the time it was sent), counted and retried as
//!   one, and answered as the library's timeout when the call gives up, unless a gRPC
//!   server says not to retry (`grpc-retry-pushback-ms`: with `UNAVAILABLE` or
//!   `RESOURCE_EXHAUSTED` its wait is heard too, and the request is taken as declined; with
//!   `DEADLINE_EXCEEDED` or `CANCELLED`, which may have run, only its "do not retry"; never
//!   with a final status); any other 4xx or
//!   5xx (gRPC status) ends the call at once, held against the breaker when it is the
//!   server failing (gRPC `INTERNAL`, `UNKNOWN`, `DATA_LOSS`, that Connect 500, a 5xx but
//!   501 and 505: [`Outcome::Broken`](deadline_core::Outcome::Broken)) and not when it is
//!   its answer (a 4xx, `NOT_FOUND`...; an intermediary's gRPC answer of `INTERNAL` or
//!   `UNKNOWN`, as an Envoy's local reply to a malformed request, counts as the server
//!   failing too, while its plain HTTP 400 or 413 is read as HTTP's, final). **With time left, a response is never
//!   lost**, but for that 504: when the call gives up after an attempt that answered, the
//!   caller gets that (last) response, as `Ok`, as it came, exactly as it would without the
//!   layer. Near the end of
//!   the time an attempt sent, the rule is [`PropagateLayer`]'s outside a call: a failure
//!   of the deadline's shape is the attempt's timeout, and any other answer (a 500, a 429, a
//!   gRPC `RESOURCE_EXHAUSTED`, one that says when to retry) is still the dependency's own,
//!   counted as a failure. (Inside your own [`Dependency::run`](deadline_core::Dependency::run)
//!   attempt, which makes its own errors of the answers, any failure then that its
//!   classifier reads as one a retry may fix is the timeout: above.)
//! - **The inner service's errors** (a connection refused, reset, ...) are
//!   [`Outcome::Failed`](deadline_core::Outcome::Failed) unless [`classify_error`](crate::DependencyLayer::classify_error) says otherwise,
//!   and retried as the policy allows (not for a call that is not idempotent, unless the
//!   outcome is [`Outcome::Refused`](deadline_core::Outcome::Refused): the request never left). When the call ends on one, it
//!   is [`DependencyError::Call`]`(`[`CallError::Attempt`](deadline_core::CallError::Attempt)`(e))`.
//! - **The call's own ends**: no time for it, the breaker open, the last attempt timed out,
//!   the deadline passed: [`DependencyError::Call`] with the [`CallError`](deadline_core::CallError). As
//!   [`PropagateLayer`] reads them, a failure of the deadline's shape (as in
//!   `PropagateLayer`'s list: a transport or body error, a 408, 502, 503 or 504, a Connect
//!   499, a gRPC `CANCELLED`, `UNAVAILABLE` or `DEADLINE_EXCEEDED`, none saying when to
//!   retry) that arrives when the attempt's time sent has run out or is within the allowance
//!   of it is the attempt's deadline running out at the next hop: a timeout of the attempt,
//!   not a response, and the call's error if it then gives up.
//!
//! **Requests are sent more than once**, so each attempt needs its own copy. With the
//! layer as made by [`new`](crate::DependencyLayer::new), the service takes `http::Request<B>` with
//! `B: Clone` (`String`, `Bytes`-backed bodies such as `http_body_util::Full<Bytes>` or
//! `Empty`, hyper-util's legacy `Client` with either): each attempt sends a clone. A body
//! that is not `Clone`, such as tonic's `tonic::body::Body` (a tonic `Channel`, or
//! `tonic::client::Grpc` over any client), needs [`buffered`](crate::DependencyLayer::buffered): the body is
//! read into memory once, before the first attempt, up to a limit, and each attempt sends
//! it again ([`ReplayBody`]). That suits unary and server-streaming gRPC calls, whose
//! request is one message; a client-streaming call would be read whole before it is sent,
//! so send those without this layer.
//!
//! The gRPC status of a response is read from its head only: a trailers-only response,
//! which is how a gRPC server answers a failure before any message, such as tonic's answer
//! to a handler's `Err(Status)`. A status that comes in the trailers, after a streamed
//! body, cannot be read without reading the body, which the layer leaves to the caller:
//! such a response is the answer.
//!
//! The deadline is read from the task when the future is first polled, so put this layer
//! where it is polled from the request's task: not behind a `Buffer`, whose worker runs in
//! a task of its own (a `Buffer` *below* it, such as the one inside tonic's `Channel`, is
//! fine). The layer's future is written by hand, not boxed: the call's state, its attempts
//! in flight and its one sleep are all inside it; besides what the inner service does, each
//! attempt costs a clone of the inner service and of the request.

mod answer;
#[cfg(feature = "axum")]
mod axum_serve;
mod bounded_body;
pub(crate) mod dependency;
mod dependency_attempt;
mod dependency_error;
mod dependency_future;
pub(crate) mod headers;
mod messages;
#[cfg(feature = "axum")]
mod primed_body;
pub(crate) mod propagate;
mod propagate_body;
mod propagate_error;
mod replay;
pub(crate) mod server;
mod server_body;
#[cfg(feature = "tonic")]
mod tonic_status;

#[cfg(feature = "axum")]
pub use axum_serve::{AxumFuture, AxumService};
pub use dependency::{Buffered, Cloned, DependencyService};
pub use dependency_error::DependencyError;
pub use dependency_future::{BufferedFuture, DependencyFuture};
pub use propagate::{PropagateFuture, PropagateLayer, PropagateService};
pub use propagate_body::PropagateBody;
pub use propagate_error::PropagateError;
pub use replay::ReplayBody;
pub use server::{DeadlineFuture, DeadlineService};
pub use server_body::{BodyError, DeadlineBody};
