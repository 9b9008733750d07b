//! The retry-and-hedge budget. SKELETON: the API is fixed, the implementation is pending.

use crate::time::Instant;

/// One budget shared by the retries and the hedges of a dependency (or a whole client).
#[derive(Debug)]
pub struct RetryBudget {
    _percent: u32,
    _floor_per_sec: u32,
}

impl RetryBudget {
    /// A budget that allows `percent` extra calls per original call, plus `floor_per_sec`
    /// extra calls per second whatever the traffic.
    #[must_use]
    pub const fn new(percent: u32, floor_per_sec: u32) -> Self {
        RetryBudget {
            _percent: percent,
            _floor_per_sec: floor_per_sec,
        }
    }

    /// Records one original call (not a retry or a hedge) at `now`.
    pub fn deposit(&self, now: Instant) {
        let _ = now;
    }

    /// Takes the allowance for one retry or hedge at `now`; `false` when the budget is spent.
    pub fn try_withdraw(&self, now: Instant) -> bool {
        let _ = now;
        true
    }
}
