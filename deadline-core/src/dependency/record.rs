//! [`Recorder`]: the observer of a dependency's calls, feeding its latency histogram (and,
//! with feature `tracing`, a tracing event per step).

use crate::drive::{Event, EventKind, MAX_IN_FLIGHT, Observer};
use crate::histogram::Histogram;
use crate::time::Instant;

/// How many attempts' start instants are kept: more than can run at once.
const STARTS: usize = MAX_IN_FLIGHT * 2;

/// Hears every step of one call to a dependency: records each attempt's latency in the
/// dependency's histogram (an answer with its own latency, a timeout with its timeout, which
/// the attempt took at least), and with feature `tracing` emits a tracing event per step.
/// [`Dependency::run`](crate::Dependency::run) uses one; a driver of your own takes
/// [`Dependency::recorder`](crate::Dependency::recorder).
#[derive(Clone, Debug)]
pub struct Recorder<'d> {
    name: &'d str,
    latency: &'d Histogram,
    starts: [Instant; STARTS],
}

impl<'d> Recorder<'d> {
    /// A recorder into `latency`, naming the dependency `name` in its traces.
    #[must_use]
    pub const fn new(name: &'d str, latency: &'d Histogram) -> Self {
        Recorder {
            name,
            latency,
            starts: [Instant::ZERO; STARTS],
        }
    }

    /// The start instant of attempt `attempt`.
    fn start_of(&mut self, attempt: u32) -> Option<&mut Instant> {
        let slot = usize::try_from(attempt).ok()? % STARTS;
        self.starts.get_mut(slot)
    }
}

impl Observer for Recorder<'_> {
    #[inline]
    fn on_event(&mut self, event: &Event) {
        match event.kind {
            EventKind::Started { attempt, .. } => {
                if let Some(start) = self.start_of(attempt) {
                    *start = event.at;
                }
            }
            EventKind::Succeeded { attempt } => {
                if let Some(start) = self.start_of(attempt) {
                    let took = event.at.saturating_duration_since(*start);
                    self.latency.record(took);
                }
            }
            EventKind::TimedOut { after, .. } => self.latency.record(after),
            _ => {}
        }
        #[cfg(feature = "tracing")]
        crate::trace::emit(self.name, event);
        #[cfg(not(feature = "tracing"))]
        let _ = self.name;
    }
}
