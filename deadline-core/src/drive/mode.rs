//! [`Mode`]: what a driven call may do besides its first attempt, and the room it keeps for
//! its attempts and their bookkeeping.
//!
//! The storage traits and types below are public only in name (this module is private): the
//! sealed supertrait of [`Mode`] names them.

use core::pin::Pin;

use super::flight::Attempt;
use super::followups::{Kept, Later};
use super::report::Report;
use super::tally::{OneAttempt, Tally};

/// What a driven call may do besides its first attempt, fixed in its type so that a call that
/// only keeps its deadline carries none of the code for the rest, and none of the room:
/// [`Full`] or [`DeadlineOnly`].
///
/// The mode also sizes the call: a [`Full`] call keeps room for [`MAX_IN_FLIGHT`] attempts
/// at once (the first or a retry, and its hedges), a [`DeadlineOnly`] one for its single
/// attempt, both in the machine's records and in the driver's future; only a [`Full`] call
/// keeps the state of its retries and hedges, and a [`DeadlineOnly`] call counts what it did
/// in a few bytes instead of a whole [`Report`](super::Report) until it ends. The trait is sealed:
/// these two are the modes.
///
/// [`MAX_IN_FLIGHT`]: super::MAX_IN_FLIGHT
pub trait Mode: sealed::Room {
    /// Whether retries, hedges, the retry budget and the circuit breaker are used.
    const FULL: bool;
}

/// Everything the policy asks for: retries with backoff, hedges, the retry budget and the
/// circuit breaker. The default.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct Full;

impl Mode for Full {
    const FULL: bool = true;
}

/// One attempt, with its timeout from the time left, and nothing else
/// ([`Driver::deadline_only`](super::Driver::deadline_only)).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct DeadlineOnly;

impl Mode for DeadlineOnly {
    const FULL: bool = false;
}

impl sealed::Room for Full {
    type Followups = Later;
    type Tally = Report;
    type Records = [Option<Attempt>; super::MAX_IN_FLIGHT];
    type Slots<F> = Four<F>;
}

impl sealed::Room for DeadlineOnly {
    type Followups = ();
    type Tally = OneAttempt;
    type Records = [Option<Attempt>; 1];
    type Slots<F> = One<F>;
}

/// The machine's records of the attempts in flight, one `Option` per slot.
pub trait Records {
    /// No attempt in flight.
    const EMPTY: Self;

    /// No attempt in flight, written slot by slot (where [`EMPTY`](Records::EMPTY), a
    /// constant, is copied whole from read-only memory).
    fn empty() -> Self;

    /// Every slot.
    fn all(&self) -> &[Option<Attempt>];

    /// Every slot, to change.
    fn all_mut(&mut self) -> &mut [Option<Attempt>];
}

impl<const N: usize> Records for [Option<Attempt>; N] {
    const EMPTY: Self = [const { None }; N];

    #[inline]
    fn empty() -> Self {
        core::array::from_fn(|_| None)
    }

    #[inline]
    fn all(&self) -> &[Option<Attempt>] {
        self
    }

    #[inline]
    fn all_mut(&mut self) -> &mut [Option<Attempt>] {
        self
    }
}

/// The driver's attempt futures, pinned inside its own future, one `Option` per slot.
pub trait Slots<F> {
    /// How many.
    const LEN: usize;

    /// No attempt running, written slot by slot (a constant of it may be copied whole from
    /// read-only memory).
    fn empty() -> Self;

    /// The future in `slot` (the last one for a `slot` past the end).
    fn slot(self: Pin<&mut Self>, slot: usize) -> Pin<&mut Option<F>>;
}

pin_project_lite::pin_project! {
    /// Room for one attempt future (a [`DeadlineOnly`] call's).
    pub struct One<F> {
        #[pin]
        s0: Option<F>,
    }
}

impl<F> Slots<F> for One<F> {
    const LEN: usize = 1;

    #[inline]
    fn empty() -> Self {
        One { s0: None }
    }

    #[inline]
    fn slot(self: Pin<&mut Self>, _slot: usize) -> Pin<&mut Option<F>> {
        self.project().s0
    }
}

pin_project_lite::pin_project! {
    /// Room for [`MAX_IN_FLIGHT`](super::MAX_IN_FLIGHT) attempt futures (a [`Full`] call's).
    pub struct Four<F> {
        #[pin]
        s0: Option<F>,
        #[pin]
        s1: Option<F>,
        #[pin]
        s2: Option<F>,
        #[pin]
        s3: Option<F>,
    }
}

impl<F> Slots<F> for Four<F> {
    const LEN: usize = 4;

    #[inline]
    fn empty() -> Self {
        Four {
            s0: None,
            s1: None,
            s2: None,
            s3: None,
        }
    }

    #[inline]
    fn slot(self: Pin<&mut Self>, slot: usize) -> Pin<&mut Option<F>> {
        let this = self.project();
        match slot {
            0 => this.s0,
            1 => this.s1,
            2 => this.s2,
            _ => this.s3,
        }
    }
}

pub(super) mod sealed {
    /// The room a mode keeps: the machine's attempt records and the driver's attempt futures.
    pub trait Room {
        /// The retry and hedge bookkeeping of a call.
        type Followups: super::Kept;
        /// What the call counts for its report.
        type Tally: super::Tally;
        /// The machine's records of the attempts in flight.
        type Records: super::Records + core::fmt::Debug;
        /// The driver's attempt futures.
        type Slots<F>: super::Slots<F>;
    }
}
