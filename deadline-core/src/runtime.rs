pub use crate::drive::runtime::{KeepsSent, Onward, Runtime};
pub use crate::drive::scoped::{
    Scope, Scoped, current, enter, note_sent, propagate, remaining, scope, scope_timeout,
    with_deadline,
};
#[cfg(feature = "std")]
pub use crate::drive::thread_deadline::ThreadDeadline;
