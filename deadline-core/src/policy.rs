pub use crate::backoff::{Backoff, Jitter, Multiplier};
#[cfg(feature = "advice")]
pub use crate::dependency_policy::AdvicePolicy;
pub use crate::dependency_policy::{HedgePolicy, Idempotence, Necessity, RetryPolicy};
pub use crate::policy_error::PolicyError;
pub use crate::quantile::Quantile;
