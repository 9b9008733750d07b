#[cfg(feature = "drive")]
pub use crate::drive::manual::{ManualSleep, ManualTimer, Stalled};
#[cfg(feature = "drive")]
pub use crate::drive::manual_runtime::ManualRuntime;
pub use crate::manual_clock::ManualClock;
