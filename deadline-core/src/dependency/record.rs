//! [`Recorder`]: the observer of a dependency's calls, feeding its latency histogram (and,
//! with feature `tracing`, a tracing event per step).

use core::marker::PhantomData;

use crate::drive::{Event, EventKind, Full, Mode, Observer};
use crate::quantile::Quantile;

use super::latency::LiveLatency;

/// Hears every step of one call to a dependency: records each attempt's latency in the
/// dependency's histogram (an answer with its own latency, a timeout with its timeout, which
/// the attempt took at least), and with feature `tracing` emits a tracing event per step.
/// [`Dependency::run`](crate::Dependency::run) uses one; a driver of your own takes
/// [`Dependency::recorder`](crate::Dependency::recorder).
#[derive(Clone, Debug)]
pub struct Recorder<'d> {
    name: &'d str,
    latency: &'d LiveLatency,
    live: Option<Quantile>,
}

impl<'d> Recorder<'d> {
    /// A recorder into `latency`, naming the dependency `name` in its traces and keeping the
    /// `live` quantile's hedge delay up to date.
    pub(crate) const fn new(
        name: &'d str,
        latency: &'d LiveLatency,
        live: Option<Quantile>,
    ) -> Self {
        Recorder {
            name,
            latency,
            live,
        }
    }
}

impl Recorder<'_> {
    /// Hears `event` of a call made in mode `M`: a deadline-only call never hedges, so it
    /// keeps no live hedge delay (a constant: none of the code that reads one is linked).
    #[inline]
    fn hear<M: Mode>(&mut self, event: &Event) {
        let live = if M::FULL { self.live } else { None };
        match event.kind {
            EventKind::Succeeded { took, .. } => self.latency.record(took, live),
            EventKind::TimedOut { after, .. } => self.latency.record(after, live),
            _ => {}
        }
        #[cfg(feature = "tracing")]
        crate::trace::emit(self.name, event);
        #[cfg(not(feature = "tracing"))]
        let _ = self.name;
    }
}

impl Observer for Recorder<'_> {
    #[inline]
    fn on_event(&mut self, event: &Event) {
        self.hear::<Full>(event);
    }
}

/// A [`Recorder`] for the calls of [`Dependency::run`](crate::Dependency::run) in mode `M`.
#[derive(Clone, Debug)]
pub(crate) struct ModeRecorder<'d, M> {
    recorder: Recorder<'d>,
    mode: PhantomData<fn() -> M>,
}

impl<'d, M> ModeRecorder<'d, M> {
    pub(crate) const fn new(recorder: Recorder<'d>) -> Self {
        ModeRecorder {
            recorder,
            mode: PhantomData,
        }
    }
}

impl<M: Mode> Observer for ModeRecorder<'_, M> {
    #[inline]
    fn on_event(&mut self, event: &Event) {
        self.recorder.hear::<M>(event);
    }
}
