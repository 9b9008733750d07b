pub use crate::counters::{CounterEvent, CounterSnapshot, Counters};
pub use crate::histogram::{Bucket, Histogram, SmallHistogram};
pub use crate::latency::{CompactHistogram, Count, DependencyHistogram};
#[cfg(feature = "advice")]
pub use crate::snapshot::DependencySnapshot;
