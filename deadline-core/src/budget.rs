pub use crate::retry_budget::RetryBudget;
