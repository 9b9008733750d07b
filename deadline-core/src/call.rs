pub use crate::call_context::Call;
pub use crate::call_timeout::{Decision, Limits, Shortfall, call_timeout};
