//! [`Plan`]: the calls of one request, in order, handing out each call's decision.

use core::time::Duration;

use heapless::Vec;

use crate::call_context::Call;
use crate::call_timeout::{Decision, call_timeout};
use crate::deadline::Deadline;
use crate::dependency_policy::Policy;
use crate::time::Instant;

/// The index of a step in a [`Plan`].
pub type StepId = usize;

/// The plan is full: it already holds its capacity of steps.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct PlanFull;

impl core::fmt::Display for PlanFull {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.write_str("the plan holds no more steps")
    }
}

impl core::error::Error for PlanFull {}

#[derive(Clone, Copy, Debug)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
struct Step<'p> {
    policy: &'p Policy<'p>,
    /// Steps with the same group run side by side and share the wall clock.
    group: usize,
}

/// The downstream calls of one request, with its deadline and its own work, in a list of at
/// most `N` steps (no heap).
///
/// Steps run in order; a step added with [`Plan::alongside`] runs in parallel with the step
/// before it, so the two share the wall clock. [`Plan::decide`] gives a step's decision at the
/// instant it starts, with the reserve
///
/// ```text
/// reserve = own work + Σ over later sequential groups of (the largest floor of its required steps)
/// ```
///
/// Optional steps reserve nothing; parallel steps reserve the largest floor among them, once,
/// because they wait together. Calls in one parallel group are each sized from the same time
/// left.
///
/// ```
/// use deadline_core::{Deadline, Instant, ms, Policy};
/// use deadline_core::plan::Plan;
///
/// // Three parallel dependencies can each have close to the whole budget.
/// let [x, y, z] = ["X", "Y", "Z"].map(|n| Policy::required(n).with_cap(ms(900)).with_floor(ms(100)));
/// let mut plan: Plan<'_, 3> = Plan::new(Deadline::after(Instant::ZERO, ms(1000)), ms(50));
/// let sx = plan.then(&x).unwrap();
/// let sy = plan.alongside(&y).unwrap();
/// let sz = plan.alongside(&z).unwrap();
/// for s in [sx, sy, sz] {
///     assert_eq!(plan.decide(s, Instant::ZERO).timeout(), Some(ms(900)));
/// }
/// ```
#[derive(Clone, Debug)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct Plan<'p, const N: usize> {
    deadline: Deadline,
    own_work: Duration,
    steps: Vec<Step<'p>, N>,
}

impl<'p, const N: usize> Plan<'p, N> {
    /// An empty plan for a request with `deadline` whose own work, after its calls, takes
    /// `own_work` (merging, serializing, the trip back to the caller).
    #[must_use]
    pub const fn new(deadline: Deadline, own_work: Duration) -> Self {
        Plan {
            deadline,
            own_work,
            steps: Vec::new(),
        }
    }

    /// Adds a step that starts after every step before it has finished.
    ///
    /// # Errors
    ///
    /// [`PlanFull`] when the plan already holds `N` steps.
    pub fn then(&mut self, policy: &'p Policy<'p>) -> Result<StepId, PlanFull> {
        let group = match self.steps.last() {
            Some(last) => last.group.saturating_add(1),
            None => 0,
        };
        self.push(Step { policy, group })
    }

    /// Adds a step that runs in parallel with the step added just before it (or starts the
    /// plan, if it is empty).
    ///
    /// # Errors
    ///
    /// [`PlanFull`] when the plan already holds `N` steps.
    pub fn alongside(&mut self, policy: &'p Policy<'p>) -> Result<StepId, PlanFull> {
        let group = self.steps.last().map_or(0, |last| last.group);
        self.push(Step { policy, group })
    }

    fn push(&mut self, step: Step<'p>) -> Result<StepId, PlanFull> {
        let id = self.steps.len();
        self.steps.push(step).map_err(|_| PlanFull)?;
        Ok(id)
    }

    /// The request's deadline.
    #[must_use]
    pub const fn deadline(&self) -> Deadline {
        self.deadline
    }

    /// Our own work after the calls.
    #[must_use]
    pub const fn own_work(&self) -> Duration {
        self.own_work
    }

    /// The number of steps.
    #[must_use]
    pub fn len(&self) -> usize {
        self.steps.len()
    }

    /// Whether the plan has no steps.
    #[must_use]
    pub fn is_empty(&self) -> bool {
        self.steps.is_empty()
    }

    /// The policy of a step, or `None` for an index past the end.
    #[must_use]
    pub fn policy(&self, step: StepId) -> Option<&'p Policy<'p>> {
        self.steps.get(step).map(|s| s.policy)
    }

    /// Whether `a` and `b` run in parallel (same group).
    #[must_use]
    pub fn parallel(&self, a: StepId, b: StepId) -> bool {
        match (self.steps.get(a), self.steps.get(b)) {
            (Some(x), Some(y)) => x.group == y.group,
            _ => false,
        }
    }

    /// The [`Call`] of `step`, for a driver: its policy, the request's deadline and the
    /// step's [`reserve`](Plan::reserve); `None` for a step this plan does not have.
    #[must_use]
    pub fn call(&self, step: StepId) -> Option<Call<'p>> {
        self.policy(step)
            .map(|policy| Call::new(policy, self.deadline, self.reserve(step)))
    }

    /// The time a step must leave when it starts: own work plus, for each later group, the
    /// largest floor among its required steps (the [`critical_path`](Plan::critical_path)
    /// of the required floors after the step's group). A step past the end reserves own work
    /// only.
    #[must_use]
    pub fn reserve(&self, step: StepId) -> Duration {
        let Some(current) = self.steps.get(step).map(|s| s.group) else {
            return self.own_work;
        };
        let later = self.path_from_group(current.saturating_add(1), &mut required_floor);
        self.own_work.saturating_add(later)
    }

    /// The length of the plan from step `from` on, when each step takes `f(step, policy)`:
    /// for every group from the one holding `from` to the last, the largest `f` among the
    /// group's steps, summed (saturating). Zero for a step past the end.
    ///
    /// The rule: sequential calls add up, and parallel calls share the wall
    /// clock, so a group lasts as long as its longest step. [`reserve`](Plan::reserve) is
    /// built on it (the required floors of the later groups); pass the p50s for the typical
    /// request, the worst cases for the worst one, or the required floors from the first step
    /// for the least time a success needs (plus own work, in each case). To leave a step out,
    /// return zero for it.
    ///
    /// ```
    /// use core::time::Duration;
    /// use deadline_core::{Deadline, Instant, ms, Policy};
    /// use deadline_core::plan::Plan;
    ///
    /// // A, then B and C side by side, then D.
    /// let a = Policy::required("A").with_cap(ms(50)).with_floor(ms(10));
    /// let b = Policy::required("B").with_cap(ms(110)).with_floor(ms(30));
    /// let c = Policy::optional("C").with_cap(ms(60)).with_floor(ms(25));
    /// let d = Policy::required("D").with_cap(ms(40)).with_floor(ms(5));
    /// let mut plan: Plan<'_, 4> = Plan::new(Deadline::after(Instant::ZERO, ms(300)), ms(20));
    /// let sa = plan.then(&a).unwrap();
    /// let sb = plan.then(&b).unwrap();
    /// plan.alongside(&c).unwrap();
    /// plan.then(&d).unwrap();
    ///
    /// // Every step at its cap: 50 + max(110, 60) + 40.
    /// assert_eq!(plan.critical_path(sa, |_, p| p.cap()), ms(200));
    /// // The required floors from B on: max(30, C optional) + 5.
    /// let floors = |_, p: &Policy| if p.is_required() { p.floor() } else { Duration::ZERO };
    /// assert_eq!(plan.critical_path(sb, floors), ms(35));
    /// // ... which is what A reserves, with the 20 ms of own work.
    /// assert_eq!(plan.reserve(sa), ms(20 + 35));
    /// ```
    #[must_use]
    pub fn critical_path(
        &self,
        from: StepId,
        mut f: impl FnMut(StepId, &Policy) -> Duration,
    ) -> Duration {
        match self.steps.get(from) {
            Some(step) => self.path_from_group(step.group, &mut f),
            None => Duration::ZERO,
        }
    }

    /// The critical path over the groups numbered `first` and later (groups are numbered in
    /// step order, so their steps are a tail of the list).
    fn path_from_group(
        &self,
        first: usize,
        f: &mut impl FnMut(StepId, &Policy) -> Duration,
    ) -> Duration {
        let mut total = Duration::ZERO;
        let mut group = None;
        let mut longest = Duration::ZERO;
        for (id, s) in self.steps.iter().enumerate() {
            if s.group < first {
                continue;
            }
            if group != Some(s.group) {
                total = total.saturating_add(longest);
                group = Some(s.group);
                longest = Duration::ZERO;
            }
            longest = longest.max(f(id, s.policy));
        }
        total.saturating_add(longest)
    }

    /// The decision for `step` if it starts at `now`: see [`call_timeout`]. A step index past
    /// the end gets a failure with no time available, never a panic.
    pub fn decide(&self, step: StepId, now: Instant) -> Decision {
        match self.steps.get(step) {
            Some(s) => call_timeout(s.policy, self.deadline, self.reserve(step), now),
            None => Decision::Fail(crate::call_timeout::Shortfall::from_micros(0, 0, 0)),
        }
    }
}

/// A step's share of a reserve: its floor if it is required, nothing if it is optional.
fn required_floor(_: StepId, policy: &Policy) -> Duration {
    if policy.is_required() {
        policy.floor()
    } else {
        Duration::ZERO
    }
}
