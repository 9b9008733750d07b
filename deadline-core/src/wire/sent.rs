//! [`Sent`]: what one outgoing request's next service was told, and the rule that says which
//! failures are that deadline's.

use core::time::Duration;

use super::response::{ResponseHead, is_deadline_code};
use crate::deadline::Deadline;
use crate::grpc_code::GrpcCode;
use crate::time::Instant;

/// What the next service was told on one outgoing request: the instant it was told to be
/// done by, when the client stops waiting for it, and which failures are that deadline's.
/// Made by [`Propagation::send`](super::Propagation::send).
///
/// The instant told is the request's effective outgoing deadline: the shorter of its time
/// left (less the per-hop allowance) and a timeout the request already carried, as its
/// header says it (rounded down to the header's unit: whole milliseconds in
/// `x-deadline-ms`). The client waits an allowance past it for the answer to come back,
/// never past its own deadline.
///
/// ```
/// use deadline_core::wire::{DeadlineHeader, Failure, Incoming, Propagation};
/// use deadline_core::{Deadline, Instant, ms};
///
/// let hop = Propagation::DEFAULT.with_allowance(ms(5));
/// let request = Deadline::after(Instant::ZERO, ms(1_000));
/// // The caller set a 50 ms timeout on this request (tonic's `Request::set_timeout`).
/// let already = Incoming::read(|name| (name == "grpc-timeout").then_some(&b"50m"[..]));
/// let out = hop.send(request, Instant::ZERO, already, DeadlineHeader::GrpcTimeout).unwrap();
/// let sent = out.sent();
/// assert_eq!(sent.until(), Instant::from_millis(50));
/// assert_eq!(sent.deadline().instant(), Instant::from_millis(55));
///
/// // The connection fails at 47 ms: within the allowance of what was sent, so it is the
/// // deadline running out (a client timer below fired), not a failed dependency.
/// assert!(sent.is_deadline_failure(Failure::Transport, Instant::from_millis(47)));
/// // At 20 ms it is the dependency's own failure.
/// assert!(!sent.is_deadline_failure(Failure::Transport, Instant::from_millis(20)));
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct Sent {
    until: Instant,
    deadline: Deadline,
    allowance: Duration,
}

impl Sent {
    /// What was sent at `now`: `told`, the time the headers say (after the allowance and
    /// any shorter timeout already on the request, rounded down to the headers' units), for
    /// work that must end by `request`.
    pub(super) const fn new(
        request: Deadline,
        now: Instant,
        told: Duration,
        allowance: Duration,
    ) -> Sent {
        let until = now.saturating_add(told);
        Sent {
            until,
            deadline: request.min(Deadline::at(until.saturating_add(allowance))),
            allowance,
        }
    }

    /// The instant the next service was told to be done by, on this side's clock.
    #[must_use]
    pub const fn until(&self) -> Instant {
        self.until
    }

    /// When to stop waiting for the answer: [`until`](Self::until) plus the allowance (the
    /// trip back), never past the request's own deadline. Bound the call, and its response
    /// body, by it.
    #[must_use]
    pub const fn deadline(&self) -> Deadline {
        self.deadline
    }

    /// Whether `failure`, arriving at `now`, is this deadline running out rather than the
    /// next service's own fault: a failure of the shape a deadline makes
    /// ([`Failure::is_deadline_shaped`]) that arrives when the time sent has passed or is
    /// within the allowance of passing. Report it as the deadline's (HTTP 504, gRPC
    /// `DEADLINE_EXCEEDED`), never as a failed dependency (502) or `CANCELLED`.
    #[must_use]
    pub fn is_deadline_failure(&self, failure: Failure<'_>, now: Instant) -> bool {
        failure.is_deadline_shaped() && self.is_running_out(now)
    }

    /// Whether the time sent has passed at `now`, or is within the allowance of passing: from
    /// [`running_out_from`](Self::running_out_from) on.
    #[must_use]
    pub fn is_running_out(&self, now: Instant) -> bool {
        now >= self.running_out_from()
    }

    /// The instant from which the time sent is running out: [`until`](Self::until) less the
    /// allowance. A failure of the deadline's shape that comes back from then on is the
    /// deadline's. Inside an attempt of a driven call, hand it to the runtime
    /// ([`runtime::note_sent`](crate::runtime::note_sent)), so that the call counts such a
    /// failure as the attempt running out of time, whatever error it comes back as.
    #[must_use]
    pub const fn running_out_from(&self) -> Instant {
        self.until.saturating_sub(self.allowance)
    }
}

/// How an outgoing call failed, for [`Sent::is_deadline_failure`].
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum Failure<'a> {
    /// No answer: the connection was refused, reset or closed, or a client's own timer below
    /// this one fired (tonic's `Channel` fails a call it timed with `CANCELLED`).
    Transport,
    /// A response came, with this head.
    Response(ResponseHead<'a>),
    /// A gRPC stream ended with these trailers: the values of their `grpc-status` and
    /// `grpc-retry-pushback-ms`.
    Trailers {
        /// The `grpc-status` value of the trailers, if they have one.
        grpc_status: Option<&'a [u8]>,
        /// The `grpc-retry-pushback-ms` value of the trailers, if they have one (gRFC A6 sends
        /// it in the trailing metadata).
        grpc_retry_pushback_ms: Option<&'a [u8]>,
    },
    /// A response body failed while it was being read.
    Body,
}

impl Failure<'_> {
    /// Whether this is the shape of a deadline running out: any transport or body failure;
    /// a response that [`ResponseHead::is_deadline_shaped`] says is one; trailers with gRPC
    /// `CANCELLED`, `DEADLINE_EXCEEDED` or `UNAVAILABLE` and no `grpc-retry-pushback-ms`. A
    /// server that says when to retry, or not to, answered on its own, and its word stands
    /// whenever it comes, in the trailers as in the head.
    ///
    /// ```
    /// use deadline_core::wire::Failure;
    ///
    /// let unavailable = |pushback| Failure::Trailers {
    ///     grpc_status: Some(&b"14"[..]),
    ///     grpc_retry_pushback_ms: pushback,
    /// };
    /// assert!(unavailable(None).is_deadline_shaped());
    /// // "Do not retry": the server's own answer.
    /// assert!(!unavailable(Some(&b"-1"[..])).is_deadline_shaped());
    /// ```
    #[must_use]
    pub fn is_deadline_shaped(&self) -> bool {
        match self {
            Failure::Transport | Failure::Body => true,
            Failure::Response(head) => head.is_deadline_shaped(),
            Failure::Trailers {
                grpc_status,
                grpc_retry_pushback_ms,
            } => {
                grpc_retry_pushback_ms.is_none()
                    && grpc_status
                        .and_then(GrpcCode::parse)
                        .is_some_and(is_deadline_code)
            }
        }
    }
}
