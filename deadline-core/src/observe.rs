pub use crate::counters::{CounterEvent, CounterSnapshot, Counters};
#[cfg(all(feature = "metrics", feature = "drive"))]
pub use crate::dependency::metrics::describe_metrics;
pub use crate::histogram::{Bucket, Histogram, SmallHistogram};
pub use crate::latency::{CompactHistogram, Count, DependencyHistogram};
#[cfg(feature = "advice")]
pub use crate::snapshot::DependencySnapshot;
