pub use crate::call_context::Call;
pub use crate::call_timeout::{Decision, Limits, Shortfall, call_timeout};
pub use crate::hedge::{HedgeDecision, HedgeState, NoHedge};
pub use crate::retry::{GiveUp, Retry, RetryDecision, RetryState};
