pub use crate::drive::runtime::Runtime;
pub use crate::drive::scoped::{
    Scope, Scoped, current, enter, propagate, remaining, scope, scope_timeout, with_deadline,
};
#[cfg(feature = "std")]
pub use crate::drive::thread_deadline::ThreadDeadline;
