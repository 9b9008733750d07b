//! [`classify`]: what a tonic client's `Status` means for retrying (feature `tonic`).
//!
//! A call whose attempts return `Result<T, tonic::Status>` (a tonic client's method, called
//! inside [`Dependency::run`](deadline_core::Dependency::run)) is classified by the status's
//! code as the core reads a gRPC status ([`classify_grpc`]): `DEADLINE_EXCEEDED` is the
//! attempt's timeout, `UNAVAILABLE`, `RESOURCE_EXHAUSTED` and `CANCELLED` may be retried
//! (a server's `CANCELLED` at or after the attempt's end is its timeout: tonic's server
//! answers so when the request's `grpc-timeout` runs out), the server's
//! `grpc-retry-pushback-ms` is heard (with `DEADLINE_EXCEEDED` and `CANCELLED`, which may
//! have run, only its "do not retry"), `INTERNAL`, `UNKNOWN` and `DATA_LOSS` are the server
//! failing (not retried, but held against the dependency's breaker: [`Outcome::Broken`]; but
//! an intermediary's plain HTTP answer, which tonic reads by gRPC's table, a 400 as
//! `INTERNAL` and a 500 as `UNKNOWN`, is read so too, where `DependencyLayer` reads the same
//! answer as HTTP's: a 400 final, a 500 retried),
//! and every other code is the server's answer, final. tonic's own timer running out (its
//! `CANCELLED`) is the attempt's timeout ([`classify`]).
//! Without it, every status is [`Outcome::Failed`]: a `NOT_FOUND` is retried and counted
//! against the dependency's breaker, and a `DEADLINE_EXCEEDED` is counted as a failure, not
//! as a timeout.
//!
//! A tonic `Channel` reports a refused connection as `UNAVAILABLE`, which a dependency that
//! is not idempotent does not retry; connected through deadline-tokio's `Connector` (feature
//! `hyper-util`), `ClassifyConnect::new().otherwise(classify)` reads the refused connect as
//! [`Outcome::Refused`], safe to retry.
//!
//! ```
//! use deadline_core::{Outcome, Policy, ms};
//! use deadline_tokio::{Dependency, scope_timeout};
//! use tonic::Status;
//!
//! static PRICES: Dependency = Dependency::new(
//!     Policy::required("prices").idempotent().with_cap(ms(80)).with_floor(ms(10)).with_retries(2),
//! );
//!
//! # #[tokio::main(flavor = "current_thread", start_paused = true)]
//! # async fn main() {
//! let tries = std::cell::Cell::new(0);
//! let price = scope_timeout(ms(1_000), async {
//!     PRICES
//!         .run(|_| {
//!             tries.set(tries.get() + 1);
//!             async { Err::<u32, _>(Status::not_found("no such item")) }
//!         })
//!         .classify(deadline_tokio::tonic::classify)
//!         .await
//! })
//! .await
//! .unwrap();
//! // NOT_FOUND is the server's answer: returned as it came, not retried.
//! assert_eq!(tonic::Status::from(price.unwrap_err()).code(), tonic::Code::NotFound);
//! assert_eq!(tries.get(), 1);
//! assert_eq!(deadline_tokio::tonic::classify(&Status::unavailable("busy")), Outcome::Failed);
//! # }
//! ```

use deadline_core::Outcome;
use deadline_core::wire::{GRPC_RETRY_PUSHBACK_MS, GrpcCode, classify_grpc};

/// What `status` means for retrying its attempt: its code and `grpc-retry-pushback-ms` read
/// as [`classify_grpc`] reads them (tonic reads a code gRPC does not define as `UNKNOWN`). A
/// status that says `OK`, which tonic never gives as an error, is final, [`Outcome::Fatal`].
///
/// Two kinds of status are the client's own and not the server's. A connection that broke or
/// was reset reaches the caller as the `UNKNOWN` or `INTERNAL` tonic makes of the transport's
/// error (kept as the status's source, which a status read off the wire never has): a
/// failure a retry may fix, [`Outcome::Failed`], not the server broken. And tonic's timer ran
/// out
/// ([`tonic::TimeoutExpired`], which tonic reports as `CANCELLED`). A `Channel` times each
/// call by its `grpc-timeout` ([`Request::set_timeout`](tonic::Request::set_timeout), as an
/// attempt sets it from its limits) or its `Endpoint::timeout`; that is the attempt running
/// out of time, [`Outcome::TimedOut`]: counted as a timeout, retried as one, and the call's
/// error the library's timeout (`DEADLINE_EXCEEDED` for `?`), never a final `CANCELLED`.
/// And a connection the channel could not make ([`tonic::ConnectError`] in the status's
/// sources, which tonic reports as `UNAVAILABLE`), or a stream the server reset with HTTP/2's
/// `REFUSED_STREAM` (closed before any processing): the request never ran,
/// [`Outcome::Refused`], the one failure a call that is not idempotent retries.
///
/// ```
/// use deadline_core::Outcome;
/// use tonic::{Status, TimeoutExpired};
///
/// // What a tonic client returns when its own timer fires.
/// let expired = Status::from_error(Box::new(TimeoutExpired(())));
/// assert_eq!(expired.code(), tonic::Code::Cancelled);
/// assert_eq!(deadline_tokio::tonic::classify(&expired), Outcome::TimedOut);
/// // A connection reset under the call: a failure a retry may fix, not the server broken.
/// let reset = std::io::Error::from(std::io::ErrorKind::ConnectionReset);
/// let reset = Status::from_error(Box::new(reset));
/// assert_eq!(reset.code(), tonic::Code::Unknown);
/// assert_eq!(deadline_tokio::tonic::classify(&reset), Outcome::Failed);
/// assert_eq!(deadline_tokio::tonic::classify(&Status::unknown("boom")), Outcome::Broken);
/// // A server's CANCELLED (its call cut short) is a failure, as the core reads it.
/// assert_eq!(deadline_tokio::tonic::classify(&Status::cancelled("gone")), Outcome::Failed);
/// ```
#[must_use]
pub fn classify(status: &tonic::Status) -> Outcome {
    if timer_expired(status) {
        return Outcome::TimedOut;
    }
    if never_connected(status) || refused_stream(status) {
        return Outcome::Refused;
    }
    let code = u8::try_from(i32::from(status.code()))
        .ok()
        .and_then(GrpcCode::from_u8);
    let pushback = status
        .metadata()
        .get(GRPC_RETRY_PUSHBACK_MS)
        .map(|value| value.as_bytes());
    match code.and_then(|code| classify_grpc(code, pushback)) {
        // Made by tonic from an error of its own (a status read off the wire has no source):
        // the connection broke or reset, not the server's word.
        Some(Outcome::Broken) if std::error::Error::source(status).is_some() => Outcome::Failed,
        outcome => outcome.unwrap_or(Outcome::Fatal),
    }
}

/// Whether `status` is the server's refusal of the call's HTTP/2 stream, before any
/// processing (`REFUSED_STREAM` in its sources).
fn refused_stream(status: &tonic::Status) -> bool {
    std::error::Error::source(status).is_some_and(crate::error_chain::refused_stream)
}

/// Whether `status` is tonic's channel failing to connect: a `ConnectError` in its sources.
fn never_connected(status: &tonic::Status) -> bool {
    std::error::Error::source(status)
        .and_then(crate::error_chain::find::<tonic::ConnectError>)
        .is_some()
}

/// Whether `status` is tonic's own timer running out: a `TimeoutExpired` in its sources.
fn timer_expired(status: &tonic::Status) -> bool {
    std::error::Error::source(status)
        .and_then(crate::error_chain::find::<tonic::TimeoutExpired>)
        .is_some()
}
