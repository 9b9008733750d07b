//! reqwest requests under the current deadline (feature `reqwest`).
//!
//! [`DeadlineRequest::deadline`] sets a request's deadline header to the time left less the
//! per-hop allowance, the way [`PropagateLayer`](crate::layer::PropagateLayer) does; with
//! nothing left to send, it refuses, and the request is never made (inside a
//! [`Dependency::run`](deadline_core::Dependency::run) attempt, the dependency's breaker does
//! not count the attempt, which never reached it; the call then ends as out of time,
//! [`Error::DeadlineExceeded`], unless an earlier attempt failed, whose failure it returns,
//! or, when only the attempt's cap was short, the attempt ran out of time, and is retried as
//! a timeout is). It also sets reqwest's
//! own timeout (which covers the whole exchange, the body included), one allowance *after*
//! the deadline, as a backstop: the library's timer (the scope's, or the attempt's under
//! `Dependency::run`) always fires first, so a request that runs out of time ends as the
//! library's timeout (counted, retried and answered as one), never as reqwest's error.
//!
//! What comes back is the attempt's own to read: the library never sees reqwest's response.
//! A next service that runs out of the time it was sent answers (a 504, say) an allowance
//! and its own reply margin before the attempt's end. So the request tells the runtime what
//! it sent ([`note_sent`](deadline_core::runtime::note_sent)): inside a [`Dependency::run`](deadline_core::Dependency::run)
//! attempt, a failure that comes once that is running out (an error made of that answer with
//! [`error_for_status`], a connection closed) is the attempt running out of time, by the
//! core's rule ([`Sent::running_out_from`](deadline_core::wire::Sent::running_out_from)):
//! counted and retried as a timeout, and a 504 through the axum answer if the call then gives
//! up, never a 502: the library cannot tell an error made of a 500 from one made of the
//! deadline, so any failure then counts as the deadline's. A server's word on when to retry
//! stands whenever it comes: a `Retry-After` that [`error_for_status`] keeps is not read as
//! the deadline's. A tower client (hyper-util) under
//! [`DependencyLayer`](crate::DependencyLayer) sees each answer itself, and reads as the
//! deadline's only the failures of its shape
//! ([`Sent::is_deadline_failure`](deadline_core::wire::Sent::is_deadline_failure)): a 500
//! then is still the dependency's. Which of reqwest's other errors may be retried, [`classify`] says: a refused
//! connection is the one failure a policy that is not idempotent retries (a connect that
//! ran out of the client's connect timeout is a timeout, as the library's `Connector` reads
//! one: counted and answered as one, and not retried by such a policy).
//!
//! The policy's connect limit ([`Policy::with_connect`](deadline_core::Policy::with_connect))
//! does not reach reqwest, which takes one connect timeout per client, set when it is built
//! (`ClientBuilder::connect_timeout`), and none per request: give the client your
//! dependency's connect limit there. Here a connect is bounded by the request's time alone.
//! A hyper-util or tonic client is given the policy's limit per request by this crate's
//! `Connector` (feature `hyper-util`).
//!
//! ```
//! use deadline_core::wire::Propagation;
//! use deadline_core::{Error, ms};
//! use deadline_core::wire::DeadlineHeader;
//! use deadline_tokio::reqwest::DeadlineRequest;
//! use deadline_tokio::scope_timeout;
//!
//! static HOP: Propagation = Propagation::DEFAULT.with_allowance(ms(5)).with_max(ms(10_000));
//!
//! # #[tokio::main(flavor = "current_thread", start_paused = true)]
//! # async fn main() {
//! let client = reqwest::Client::new();
//! scope_timeout(ms(200), async {
//!     let request = client
//!         .get("http://127.0.0.1:9/prices")
//!         .deadline(&HOP, DeadlineHeader::DeadlineMs)
//!         .unwrap()
//!         .build()
//!         .unwrap();
//!     assert_eq!(request.headers()["x-deadline-ms"], "195");
//!     // reqwest's own timer, a backstop one allowance after the library's.
//!     assert_eq!(request.timeout(), Some(&ms(205)));
//!
//!     tokio::time::sleep(ms(196)).await;
//!     // 4 ms left, 5 ms kept per hop: not sent.
//!     let spent = client.get("http://127.0.0.1:9/prices").deadline(&HOP, DeadlineHeader::DeadlineMs);
//!     assert_eq!(spent.unwrap_err(), Error::DeadlineExceeded);
//! })
//! .await;
//! # }
//! ```

use core::fmt;
use core::time::Duration;

use deadline_core::wire::{DeadlineHeader, Incoming, Outgoing, Propagation, ResponseHead};
use deadline_core::{Clock, Deadline, Error, Instant, Outcome};
use http::HeaderMap;
use reqwest::RequestBuilder;

use crate::clock::TokioClock;
use crate::context::current;
use crate::layer::headers::{Scanned, dated, lookup, set};
use crate::layer::propagate::{noted, refusal};

/// The deadline on a reqwest [`RequestBuilder`]: see the [module](self).
pub trait DeadlineRequest: Sized {
    /// Inside a [`scope`](crate::scope): sets `header` to the time left less `propagation`'s
    /// allowance (or to a shorter timeout the request already carries in `grpc-timeout`,
    /// `connect-timeout-ms`, `x-deadline-ms`, Envoy's `x-envoy-expected-rq-timeout-ms` or
    /// `x-envoy-upstream-rq-timeout-ms`), and every deadline header the request
    /// already carries to that too, so that none says more than is left (a longer or
    /// unreadable one included); and reqwest's own timeout one allowance
    /// after the deadline, as a backstop the library's timer beats. A shorter timeout set
    /// with reqwest's [`RequestBuilder::timeout`] is the request's deadline: it stays
    /// reqwest's timeout, and the header carries it less the allowance. A client-wide
    /// `ClientBuilder::timeout` is not seen, and reqwest lets the request's own win over it.
    /// Outside any scope, the request is returned unchanged.
    ///
    /// A request whose body cannot be copied (a stream) cannot be read before it is built:
    /// there its own shorter timeout is replaced, and the deadline headers it already carries
    /// are not read, so only `header` is written. Set no other deadline header on such a
    /// request yourself (a gateway copying its caller's headers, say: leave theirs out).
    ///
    /// The values are the time left when this is called: call it just before `send`. reqwest
    /// sends the same headers again on a redirect it follows, with the time that redirect
    /// took spent; a service that must be told exactly turns redirects off
    /// (`redirect::Policy::none()`) and makes each hop a call of its own.
    ///
    /// # Errors
    ///
    /// [`Error::DeadlineExceeded`] when nothing is left to send: do not make the call.
    fn deadline(self, propagation: &Propagation, header: DeadlineHeader) -> Result<Self, Error>;

    /// [`deadline`](Self::deadline) with the defaults: 5 ms kept per hop
    /// ([`Propagation::DEFAULT`]) and the time left in `x-deadline-ms`. Inside a
    /// [`Dependency::run`](deadline_core::Dependency::run) attempt, the time left is the
    /// attempt's.
    ///
    /// # Errors
    ///
    /// [`Error::DeadlineExceeded`] when nothing is left to send: do not make the call.
    fn time_left(self) -> Result<Self, Error> {
        self.deadline(&Propagation::DEFAULT, DeadlineHeader::DeadlineMs)
    }
}

impl DeadlineRequest for RequestBuilder {
    fn deadline(self, propagation: &Propagation, header: DeadlineHeader) -> Result<Self, Error> {
        let Some(deadline) = current() else {
            return Ok(self);
        };
        let now = TokioClock.now();
        // The request is looked into and changed in a copy, which is what is returned: a
        // builder's request cannot be read in place. A builder that holds an error, or a
        // body that cannot be copied (a stream), has no copy: its headers are then replaced
        // without being read, and an error stays in the builder for `send` to return.
        let Some((client, Ok(mut request))) = self.try_clone().map(RequestBuilder::build_split)
        else {
            let outgoing = noted(
                propagation.send(deadline, now, Incoming::NONE, header),
                refusal(propagation),
            )?;
            let mut headers = HeaderMap::with_capacity(2);
            for (name, value) in outgoing.headers() {
                set(&mut headers, name, value);
            }
            // `headers` replaces values of the same name, where `header` would append.
            return Ok(self
                .timeout(backstop(&outgoing, now, propagation))
                .headers(headers));
        };
        // A shorter timeout already on the request is kept: in its headers, what the next
        // service is told (and no header it carries says more than is left); reqwest's own,
        // a deadline for this request.
        let scanned = Scanned::new(request.headers());
        let already = Incoming::read_outgoing(scanned.lookup());
        let own = request.timeout().copied();
        let deadline = own.map_or(deadline, |own| deadline.min(Deadline::after(now, own)));
        let outgoing = noted(
            propagation.send(deadline, now, already, header),
            refusal(propagation),
        )?;
        for (name, value) in outgoing.headers() {
            set(request.headers_mut(), name, value);
        }
        let backstop = backstop(&outgoing, now, propagation);
        *request.timeout_mut() = Some(own.map_or(backstop, |own| own.min(backstop)));
        Ok(RequestBuilder::from_parts(client, request))
    }
}

/// Classifies an attempt's error for a call ([`Run::classify`](deadline_core::run::Run::classify)),
/// when it is, or boxes, a reqwest error: a limit of the client's own that ran out
/// ([`reqwest::Error::is_timeout`]: its `ClientBuilder::connect_timeout` or `read_timeout`)
/// is [`Outcome::TimedOut`], as a connect limit that runs out in this crate's `Connector` is:
/// counted in the dependency's timeouts, retried as a timeout is, and answered as the
/// library's timeout (504) if the call then gives up; any other connection that was never made
/// ([`reqwest::Error::is_connect`]: refused, or failed while connecting) is
/// [`Outcome::Refused`], the one failure a policy that is not idempotent retries, since the
/// request never left; an error made of a response is read by its status
/// ([`ResponseHead::classify`]: a 4xx, 501 or 505 is final, a 408, 429, 500, 502 or 503 may
/// be retried, a 504 is the attempt running out of time, so that the call answers it as the
/// library's timeout, whenever the next service sent it, any other 5xx is the server failing,
/// not retried but held against the dependency's breaker), and, made by this module's
/// [`error_for_status`], by the server's `Retry-After` too (reqwest's own
/// `error_for_status` drops the headers: a 429 or 503 is then a plain failure); anything else
/// is [`Outcome::Failed`], as by default. The status is read as plain HTTP's: for a Connect
/// unary call (as [`Protocol::read`](deadline_core::wire::Protocol::read) tells one: by its `content-type`
/// or its Connect headers, `connect-timeout-ms` included), whose 500 is not retried, classify with
/// [`ResponseHead::for_request`]`(`[`Protocol::ConnectUnary`]`)` instead, which reads its 499
/// (Connect's `canceled`) as a failure a retry may fix. (Read as plain HTTP's, a 499 is final,
/// as any 4xx.)
///
/// [`Protocol::ConnectUnary`]: deadline_core::wire::Protocol::ConnectUnary
///
/// ```
/// use deadline_core::policy::Backoff;
/// use deadline_core::{CallError, Policy, ms};
/// use deadline_tokio::reqwest::{DeadlineRequest, classify, error_for_status};
/// use deadline_tokio::{Dependency, scope_timeout};
///
/// type BoxError = Box<dyn std::error::Error + Send + Sync>;
///
/// // A payment: never sent twice, but a connection that was refused may be tried again.
/// static PAY: Dependency = Dependency::new(
///     Policy::required("pay")
///         .not_idempotent()
///         .with_cap(ms(500))
///         .with_retries(2)
///         .with_backoff(Backoff::constant(ms(1))),
/// );
///
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() {
/// // A port with nothing listening on it: each connection is refused.
/// let closed = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap();
/// let url = format!("http://{closed}/pay");
/// // No proxy from the environment: the request goes to the refused port itself.
/// let client = reqwest::Client::builder().no_proxy().build().unwrap();
/// let called = scope_timeout(ms(5_000), async {
///     PAY.run(|_| async {
///         let response = client.post(&url).time_left()?.send().await?;
///         Ok::<_, BoxError>(error_for_status(response)?.status())
///     })
///     .classify(|e| classify(&**e))
///     .report()
///     .await
/// })
/// .await
/// .expect("inside its scope");
/// // Refused three times: the first attempt and both retries were made.
/// assert!(matches!(called.result, Err(CallError::Attempt(_))));
/// assert_eq!(called.report.attempts, 3);
/// # }
/// ```
#[must_use]
pub fn classify(error: &(dyn std::error::Error + 'static)) -> Outcome {
    if let Some(error) = error.downcast_ref::<StatusError>() {
        return error.outcome;
    }
    match error.downcast_ref::<reqwest::Error>() {
        // Before `is_connect`: a connect timeout is both.
        Some(error) if error.is_timeout() => Outcome::TimedOut,
        Some(error) if error.is_connect() => Outcome::Refused,
        Some(error) => error
            .status()
            .and_then(|status| ResponseHead::read(status.as_u16(), |_| None).classify())
            .unwrap_or(Outcome::Failed),
        None => Outcome::Failed,
    }
}

/// `response` itself when its status is not an error, else the error of its status (400 to
/// 599) with what the server said about trying again: reqwest's `Response::error_for_status`
/// for a call under [`Dependency::run`](deadline_core::Dependency::run), which [`classify`]
/// reads.
///
/// reqwest's own `error_for_status` keeps the status alone, so [`classify`] reads a 429 or a
/// 503 made into a `reqwest::Error` as a plain failure: retried after the policy's backoff,
/// whatever the server asked, and never by a policy that is not idempotent. This one keeps
/// the server's word: a 429's or a 503's `Retry-After` (seconds, or an HTTP date on the
/// system clock; a date already past says nothing) is [`Outcome::Pushback`], so the retry
/// waits as long as the server asked (and is not made when that is past the deadline), and a
/// policy that is not idempotent may retry it, the server having refused it unprocessed.
///
/// ```no_run
/// use deadline_core::{Policy, ms};
/// use deadline_tokio::reqwest::{DeadlineRequest, classify, error_for_status};
/// use deadline_tokio::{Dependency, scope_timeout};
///
/// type BoxError = Box<dyn std::error::Error + Send + Sync>;
///
/// static PRICING: Dependency = Dependency::new(
///     Policy::required("pricing").idempotent().with_cap(ms(200)).with_retries(2),
/// );
///
/// # async fn price(client: reqwest::Client) -> Result<(), BoxError> {
/// let price = scope_timeout(ms(1_000), async {
///     PRICING
///         .run(|_| async {
///             let response = client.get("http://127.0.0.1:8080/price").time_left()?.send().await?;
///             Ok::<_, BoxError>(error_for_status(response)?.text().await?)
///         })
///         .classify(|e| classify(&**e))
///         .await
/// })
/// .await??;
/// # let _ = price;
/// # Ok(())
/// # }
/// ```
///
/// # Errors
///
/// [`StatusError`] when the status is a client error (4xx) or a server error (5xx); the
/// response, and its body, are dropped.
pub fn error_for_status(response: reqwest::Response) -> Result<reqwest::Response, StatusError> {
    let status = response.status();
    if !status.is_client_error() && !status.is_server_error() {
        return Ok(response);
    }
    let code = status.as_u16();
    let outcome = ResponseHead::read(code, lookup(response.headers()))
        .classify()
        .unwrap_or(Outcome::Failed);
    Err(StatusError {
        status,
        outcome: dated(outcome, code, response.headers()),
        url: response.url().clone(),
    })
}

/// An answer whose status is an error, and what the server said about trying again: made by
/// [`error_for_status`], read by [`classify`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct StatusError {
    status: reqwest::StatusCode,
    url: reqwest::Url,
    outcome: Outcome,
}

impl StatusError {
    /// The answer's status.
    #[must_use]
    pub const fn status(&self) -> reqwest::StatusCode {
        self.status
    }

    /// The address that answered (after any redirect reqwest followed).
    #[must_use]
    pub const fn url(&self) -> &reqwest::Url {
        &self.url
    }

    /// What the answer says of the call ([`classify`] gives it): a 4xx, 501 or 505 is final,
    /// a 408, 429, 500, 502 or 503 may be retried (after the server's `Retry-After`, if it
    /// sent one), a 504 is the attempt running out of time, any other 5xx is the server
    /// failing ([`Outcome::Broken`]).
    #[must_use]
    pub const fn outcome(&self) -> Outcome {
        self.outcome
    }
}

impl fmt::Display for StatusError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} answered {}", self.url, self.status)
    }
}

impl std::error::Error for StatusError {}

/// reqwest's own timeout: a backstop one allowance after the library's deadline, so that the
/// library's timer decides.
fn backstop(outgoing: &Outgoing, now: Instant, propagation: &Propagation) -> Duration {
    outgoing
        .sent()
        .deadline()
        .remaining(now)
        .saturating_add(propagation.allowance())
}

#[cfg(test)]
mod tests {
    use deadline_core::wire::{DeadlineHeader, Propagation};
    use deadline_core::{Error, ms};

    use super::DeadlineRequest;
    use crate::scope_timeout;

    const URL: &str = "http://127.0.0.1:9/prices";

    /// A request made in a 200 ms scope with the header `name` already set to `value`, then
    /// given the time left.
    async fn with_header(name: &'static str, value: &'static str) -> reqwest::Request {
        let client = reqwest::Client::new();
        scope_timeout(ms(200), async {
            client
                .get(URL)
                .header(name, value)
                .time_left()
                .expect("time is left")
                .build()
                .expect("a valid request")
        })
        .await
        .expect("inside its scope")
    }

    /// A shorter `x-deadline-ms` already on the request is kept; a longer one is replaced by
    /// the time left (195 ms: 200 less the 5 kept for the hop); either way one value is sent,
    /// and reqwest's backstop is one allowance after the deadline sent (50 ms sent is a
    /// deadline 55 ms away here).
    #[tokio::test(flavor = "current_thread", start_paused = true)]
    async fn the_shorter_of_the_time_left_and_a_timeout_already_set_is_sent() {
        for (already, sent, backstop) in [("50", "50", ms(60)), ("500", "195", ms(205))] {
            let request = with_header("x-deadline-ms", already).await;
            let values: Vec<_> = request.headers().get_all("x-deadline-ms").iter().collect();
            assert_eq!(values, [sent], "with {already} ms already set");
            assert_eq!(
                request.timeout(),
                Some(&backstop),
                "with {already} ms already set"
            );
        }
    }

    /// A deadline header already on the request that is not the one written, and says more
    /// than is left (a caller's `grpc-timeout` of an hour), is written down to the time left
    /// too: a gRPC server reading only that header would otherwise work for an hour.
    #[tokio::test(flavor = "current_thread", start_paused = true)]
    async fn no_header_already_on_the_request_says_more_than_is_left() {
        let request = with_header("grpc-timeout", "1H").await;
        assert_eq!(request.headers()["x-deadline-ms"], "195");
        assert_eq!(request.headers()["grpc-timeout"], "195000u");
    }

    /// reqwest's own timeout set shorter than the time left (50 ms in a 200 ms scope) is the
    /// request's deadline: it is kept as reqwest's timeout, and the header tells the next
    /// service 45 ms (50 less the 5 ms allowance). A longer one gives way to the time left.
    #[tokio::test(flavor = "current_thread", start_paused = true)]
    async fn a_shorter_reqwest_timeout_is_kept_and_sent() {
        let client = reqwest::Client::new();
        for (own, sent, timeout) in [(ms(50), "45", ms(50)), (ms(500), "195", ms(205))] {
            let request = scope_timeout(ms(200), async {
                client
                    .get(URL)
                    .timeout(own)
                    .time_left()
                    .expect("time is left")
                    .build()
                    .expect("a valid request")
            })
            .await
            .expect("inside its scope");
            assert_eq!(request.headers()["x-deadline-ms"], sent, "{own:?}");
            assert_eq!(request.timeout(), Some(&timeout), "{own:?}");
        }
    }

    /// An error made of a response is read by its status, as the core reads one; an error
    /// that is not reqwest's fails as by default.
    #[test]
    fn a_response_error_is_classified_by_its_status() {
        use deadline_core::Outcome;

        use super::classify;

        let error_of = |status: u16| {
            let response = http::Response::builder().status(status).body("").unwrap();
            reqwest::Response::from(response)
                .error_for_status()
                .unwrap_err()
        };
        assert_eq!(classify(&error_of(503)), Outcome::Failed);
        assert_eq!(classify(&error_of(404)), Outcome::Fatal);
        assert_eq!(classify(&error_of(504)), Outcome::TimedOut);
        assert_eq!(classify(&Error::DeadlineExceeded), Outcome::Failed);
    }

    /// This module's `error_for_status` keeps what the server said about trying again:
    /// `Retry-After` in seconds or as an HTTP date (an hour ahead on the system clock, read
    /// as at most that), which reqwest's own drops; a success is the response itself.
    #[test]
    fn error_for_status_keeps_the_servers_word() {
        use std::time::{Duration, SystemTime};

        use deadline_core::{Outcome, Pushback};

        use super::{StatusError, classify, error_for_status};

        let answer = |status: u16, retry_after: Option<String>| {
            let mut response = http::Response::builder().status(status);
            if let Some(value) = retry_after {
                response = response.header("retry-after", value);
            }
            reqwest::Response::from(response.body("").unwrap())
        };
        let kept = |status: u16, retry_after: Option<String>| {
            let error: StatusError = error_for_status(answer(status, retry_after)).unwrap_err();
            assert_eq!(error.status().as_u16(), status);
            assert_eq!(classify(&error), error.outcome());
            error.outcome()
        };
        let busy = Outcome::Pushback(Pushback::After(Duration::from_secs(30)));
        assert_eq!(kept(503, Some("30".into())), busy);
        assert_eq!(kept(429, Some("30".into())), busy);
        let in_an_hour = httpdate::fmt_http_date(SystemTime::now() + Duration::from_secs(3_600));
        match kept(503, Some(in_an_hour)) {
            Outcome::Pushback(Pushback::After(wait)) => {
                assert!(wait <= Duration::from_secs(3_600) && wait > Duration::from_secs(3_000));
            }
            other => panic!("the date's wait, not {other:?}"),
        }
        assert_eq!(kept(503, None), Outcome::Failed);
        assert_eq!(kept(404, Some("30".into())), Outcome::Fatal);
        assert_eq!(kept(504, None), Outcome::TimedOut);
        // reqwest's own: the header is gone.
        let dropped = answer(503, Some("30".into()))
            .error_for_status()
            .unwrap_err();
        assert_eq!(classify(&dropped), Outcome::Failed);
        // A success, or a redirect, is the response itself.
        for status in [200, 204, 304] {
            let response = error_for_status(answer(status, None)).expect("not an error");
            assert_eq!(response.status().as_u16(), status);
        }
    }

    #[tokio::test(flavor = "current_thread", start_paused = true)]
    async fn a_builder_that_holds_an_error_keeps_it() {
        let client = reqwest::Client::new();
        let built = scope_timeout(ms(200), async {
            client
                .get(URL)
                .header("a name with spaces", "1")
                .deadline(&Propagation::DEFAULT, DeadlineHeader::GrpcTimeout)
                .expect("time is left")
                .build()
        })
        .await
        .expect("inside its scope");
        assert!(built.expect_err("the builder's own error").is_builder());
    }

    /// Inside a `Dependency::run` attempt with less time than the allowance, the refusal
    /// sends nothing: the call is out of time (answered 504), neither a failed dependency
    /// (502) nor a timeout of the dependency's.
    #[tokio::test(flavor = "current_thread", start_paused = true)]
    async fn a_refusal_inside_an_attempt_is_out_of_time() {
        use deadline_core::Policy;
        use deadline_core::drive::DeadlineOnly;

        use crate::Dependency;

        static SPENT: Dependency<DeadlineOnly> =
            Dependency::deadline_only(Policy::required("spent").with_cap(ms(100)));
        let client = reqwest::Client::new();
        // 4 ms left: under the 5 ms allowance.
        let called = scope_timeout(
            ms(4),
            SPENT.run(|_| async {
                // Refused before anything is sent: no connection is made.
                let request = client.get(URL).time_left()?;
                Ok::<_, Box<dyn std::error::Error + Send + Sync>>(request.send().await?.status())
            }),
        )
        .await
        .expect("inside its scope");
        let error = called.expect_err("nothing could be sent");
        assert_eq!(error.library(), Some(Error::DeadlineExceeded), "{error:?}");
        let counted = SPENT.counters().snapshot();
        assert_eq!((counted.timeouts, counted.deadline_exceeded), (0, 1));
    }

    #[tokio::test(flavor = "current_thread", start_paused = true)]
    async fn with_nothing_left_to_send_the_request_is_refused() {
        let client = reqwest::Client::new();
        let refused = scope_timeout(ms(200), async {
            tokio::time::sleep(ms(196)).await;
            client.get(URL).time_left().map(|_| ())
        })
        .await
        .expect("inside its scope");
        assert_eq!(refused, Err(Error::DeadlineExceeded));
    }

    #[tokio::test(flavor = "current_thread", start_paused = true)]
    async fn outside_any_scope_the_request_is_unchanged() {
        let request = reqwest::Client::new()
            .get(URL)
            .time_left()
            .expect("no deadline, nothing refused")
            .build()
            .expect("a valid request");
        assert!(request.headers().is_empty());
        assert_eq!(request.timeout(), None);
    }
}
