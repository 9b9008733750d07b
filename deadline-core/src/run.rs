pub use crate::dependency::{Recorder, Run, RunFuture, WithReport, WithReportFuture};
