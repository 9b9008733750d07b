//! What the benches share: reading criterion's estimates of the current run back, so that a
//! bench can print a ratio of two things it measured.

use std::time::SystemTime;

/// Criterion's point estimate of the mean, in nanoseconds, of `group/bench`, from a
/// `new/estimates.json` written at or after `since` (the start of this run); `None` when this
/// run wrote none (with `--test`, criterion measures nothing), so an earlier run's figure is
/// never printed as this run's.
pub(crate) fn mean_ns(group: &str, bench: &str, since: SystemTime) -> Option<f64> {
    let dir = std::env::var_os("CARGO_TARGET_DIR")
        .map(std::path::PathBuf::from)
        .unwrap_or_else(|| std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../target"));
    let path = dir
        .join("criterion")
        .join(group)
        .join(bench)
        .join("new/estimates.json");
    let written = std::fs::metadata(&path).ok()?.modified().ok()?;
    if written < since {
        return None;
    }
    let text = std::fs::read_to_string(path).ok()?;
    let mean = text.split("\"mean\"").nth(1)?;
    let point = mean.split("\"point_estimate\":").nth(1)?;
    point.split([',', '}']).next()?.trim().parse().ok()
}
