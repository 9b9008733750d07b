//! [`Steps`]: a request's calls in order, so that each call's reserve (the time kept for
//! what comes after it) is computed for it.

use core::time::Duration;

use super::Dependency;
use crate::drive::Full;
use crate::time::{duration_to_micros_ceil, micros_to_duration};

/// The dependencies one request calls, in order, and the request's own work after them:
/// enough to compute each call's reserve, the own work plus the floors of the required
/// dependencies still to come (the formula of [`crate::call::call_timeout`]). A `const`, so a
/// handler's plan is a `static` beside its dependencies; its deadline is the current one.
///
/// ```
/// use deadline_core::virtual_time::ManualRuntime;
/// use deadline_core::{Dependency, Policy, Steps, ms};
///
/// static A: Dependency<ManualRuntime> = Dependency::new(Policy::required("A").with_cap(ms(50)).with_floor(ms(10)));
/// static B: Dependency<ManualRuntime> = Dependency::new(Policy::required("B").with_cap(ms(110)).with_floor(ms(30)));
/// static C: Dependency<ManualRuntime> = Dependency::new(Policy::optional("C").with_cap(ms(60)).with_floor(ms(25)));
/// static CHECKOUT: Steps<ManualRuntime, 3> = Steps::new([&A, &B, &C]).own_work(ms(20));
///
/// assert_eq!(CHECKOUT.reserve_for(&A), ms(50)); // 20 + B's floor (C is optional)
/// assert_eq!(CHECKOUT.reserve_for(&B), ms(20));
/// assert_eq!(CHECKOUT.reserve_for(&C), ms(20));
/// ```
#[derive(Debug)]
pub struct Steps<'a, 'n, Rt, const N: usize, M = Full> {
    deps: [&'a Dependency<'n, Rt, M>; N],
    /// The request's own work after the calls, in whole microseconds, rounded up (as a
    /// call's reserve is kept).
    own_work_us: u64,
}

impl<'a, 'n, Rt, const N: usize, M> Steps<'a, 'n, Rt, N, M> {
    /// The request calls `deps`, in this order, with no work of its own after them (see
    /// [`own_work`](Self::own_work)).
    #[must_use]
    pub const fn new(deps: [&'a Dependency<'n, Rt, M>; N]) -> Self {
        Steps {
            deps,
            own_work_us: 0,
        }
    }

    /// The same plan, keeping `own_work` after the last call (merging, serializing, the trip
    /// back).
    #[must_use]
    pub const fn own_work(mut self, own_work: Duration) -> Self {
        self.own_work_us = duration_to_micros_ceil(own_work);
        self
    }

    /// The reserve of a call to `dep`: the own work plus the floors of the required
    /// dependencies after it, in whole microseconds (rounded up, as a call keeps its
    /// reserve). A dependency the plan does not hold reserves for every required one (the
    /// cautious reading). A dependency the plan holds more than once (a cache read first and
    /// written last) gets the reserve of its first place, whichever of its calls asks: the
    /// cautious reading again, which keeps the floors of the steps between for its later calls
    /// too; give a later call its own reserve with
    /// [`Run::reserve`](super::Run::reserve) instead of [`Run::in_plan`](super::Run::in_plan).
    #[must_use]
    pub fn reserve_for<'m, M2>(&self, dep: &Dependency<'m, Rt, M2>) -> Duration {
        let me = core::ptr::from_ref(dep).cast::<()>();
        let after = self
            .deps
            .iter()
            .position(|d| core::ptr::eq(core::ptr::from_ref(*d).cast::<()>(), me))
            .map_or(0, |i| i.saturating_add(1));
        // In whole microseconds, as the policies keep their floors: one conversion at the end
        // (summing `Duration`s, each step's carry of nanoseconds into seconds, unrolled for
        // each step, made 86 bytes more of the Cortex-M0's deadline-only library code: `bash
        // scripts/firmware.sh`).
        micros_to_duration(
            self.deps
                .iter()
                .skip(after)
                .filter(|d| d.policy().is_required())
                .fold(self.own_work_us, |sum, d| {
                    sum.saturating_add(d.policy().floor_micros())
                }),
        )
    }

    /// The dependencies, in order.
    #[must_use]
    pub const fn dependencies(&self) -> &[&'a Dependency<'n, Rt, M>; N] {
        &self.deps
    }
}
