//! [`Run`]: one call to a [`Dependency`], adjusted by name and awaited in one line.

use core::future::{Future, IntoFuture};
use core::pin::Pin;
use core::task::{Context, Poll};
use core::time::Duration;

use crate::deadline::Deadline;
use crate::drive::{
    Attempt, CallError, CallMachine, Called, Classify, Drive, Full, InScope, InScopeFuture, Mode,
    Runtime,
};
use crate::outcome::Outcome;
use crate::rng::Rng;

use super::Dependency;
use super::record::ModeRecorder;
use super::steps::Steps;

/// One call to a [`Dependency`], not yet started: what [`Dependency::run`] returns. Adjust
/// it by name, then `.await` it for `Result<T, CallError<E>>`.
#[must_use = "a call does nothing until it is awaited"]
#[derive(Debug)]
pub struct Run<'d, 'n, Rt, A, C, R, M = Full> {
    dep: &'d Dependency<'n, Rt, M>,
    attempt: A,
    reserve: Duration,
    deadline: Option<Deadline>,
    classify: C,
    /// Whether `classify` was given ([`Run::classify`]) rather than the default.
    classified: bool,
    rng: R,
}

impl<'d, 'n, Rt, A, C, R> Run<'d, 'n, Rt, A, C, R, Full> {
    /// Draws the backoff's jitter from `rng` rather than the runtime's default source (a
    /// seeded generator, in a test or a simulation). (A deadline-only call has no backoff:
    /// it has no such setting.)
    pub fn rng<R2: Rng>(self, rng: R2) -> Run<'d, 'n, Rt, A, C, R2, Full> {
        Run {
            dep: self.dep,
            attempt: self.attempt,
            reserve: self.reserve,
            deadline: self.deadline,
            classify: self.classify,
            classified: self.classified,
            rng,
        }
    }
}

impl<'d, 'n, Rt, A, C, R, M> Run<'d, 'n, Rt, A, C, R, M> {
    pub(super) const fn new(
        dep: &'d Dependency<'n, Rt, M>,
        attempt: A,
        classify: C,
        rng: R,
    ) -> Self {
        Run {
            dep,
            attempt,
            reserve: Duration::ZERO,
            deadline: None,
            classify,
            classified: false,
            rng,
        }
    }

    /// Keeps `reserve` after the call, for the work that follows it (the request's own work
    /// and the floors of the required calls still to come): each attempt's timeout is
    /// `min(left - reserve, cap)`. Zero unless set. It replaces a reserve set before, by this
    /// or by [`in_plan`](Self::in_plan): the last one set is kept.
    pub const fn reserve(mut self, reserve: Duration) -> Self {
        self.reserve = reserve;
        self
    }

    /// Keeps the reserve that `steps` computes for this dependency ([`Steps::reserve_for`]).
    /// It replaces a reserve set before, by this or by [`reserve`](Self::reserve): the last
    /// one set is kept.
    pub fn in_plan<const N: usize>(mut self, steps: &Steps<'_, '_, Rt, N, M>) -> Self {
        self.reserve = steps.reserve_for(self.dep);
        self
    }

    /// Runs the call within `deadline` (or the current one, if that is earlier), rather than
    /// the current deadline alone: for code with no scope around it.
    pub const fn deadline(mut self, deadline: Deadline) -> Self {
        self.deadline = Some(deadline);
        self
    }

    /// Classifies each attempt's error with `classify` ([`Outcome`]): what may be retried,
    /// what ends the call. By default every error is [`Outcome::Failed`]. The closure needs no
    /// annotation:
    /// `.classify(|e| if e.is_timeout() { Outcome::TimedOut } else { Outcome::Fatal })`.
    ///
    /// A call to a dependency that is [not idempotent](crate::Policy::not_idempotent) and
    /// allows retries needs one: it is retried only after [`Outcome::Refused`] or
    /// [`Outcome::Pushback`], which the default never says, so without one no retry would
    /// ever start. In a debug build such a call panics when it is awaited, saying so.
    pub fn classify<C2, F, T, E>(self, classify: C2) -> Run<'d, 'n, Rt, A, C2, R, M>
    where
        A: Attempt<Future = F>,
        F: Future<Output = Result<T, E>>,
        C2: FnMut(&E) -> Outcome,
    {
        Run {
            dep: self.dep,
            attempt: self.attempt,
            reserve: self.reserve,
            deadline: self.deadline,
            classify,
            classified: true,
            rng: self.rng,
        }
    }

    /// The same call, giving its whole [`Called`] (the result and the [`Report`](crate::drive::Report):
    /// attempts, retries, hedges, timeouts) when awaited.
    pub const fn report(self) -> WithReport<Self> {
        WithReport(self)
    }
}

impl<'d, 'n, Rt, A, C, R, F, T, E, M> IntoFuture for Run<'d, 'n, Rt, A, C, R, M>
where
    Rt: Runtime,
    M: Mode,
    A: Attempt<Future = F>,
    F: Future<Output = Result<T, E>>,
    C: Classify<E>,
    R: Rng,
{
    type Output = Result<T, CallError<E>>;
    type IntoFuture = RunFuture<'d, 'n, Rt, A, C, R, F, T, E, M>;

    // Inlined where it is awaited, so that the future is built in place there (not built in
    // a frame of its own and copied over).
    #[inline]
    fn into_future(self) -> Self::IntoFuture {
        RunFuture {
            calling: Calling::new(self),
        }
    }
}

/// A [`Run`] that gives its whole [`Called`]: see [`Run::report`].
#[must_use = "a call does nothing until it is awaited"]
#[derive(Debug)]
pub struct WithReport<Run>(Run);

impl<'d, 'n, Rt, A, C, R, F, T, E, M> IntoFuture for WithReport<Run<'d, 'n, Rt, A, C, R, M>>
where
    Rt: Runtime,
    M: Mode,
    A: Attempt<Future = F>,
    F: Future<Output = Result<T, E>>,
    C: Classify<E>,
    R: Rng,
{
    type Output = Called<T, E>;
    type IntoFuture = WithReportFuture<'d, 'n, Rt, A, C, R, F, T, E, M>;

    #[inline]
    fn into_future(self) -> Self::IntoFuture {
        WithReportFuture {
            calling: Calling::new(self.0),
        }
    }
}

/// The driver's future of one call, as a [`Run`] sets it up.
type DriveOf<'d, 'n, Rt, A, C, R, F, T, E, M> = Drive<
    'd,
    <Rt as Runtime>::Timer,
    R,
    C,
    InScope<Rt, A>,
    ModeRecorder<'d, 'n, Rt, M>,
    InScopeFuture<Rt, F>,
    T,
    E,
    M,
>;

pin_project_lite::pin_project! {
    /// The call in progress: the driver's future, and the dependency it records into.
    ///
    /// A call is recorded once, whatever became of it: when it ends, and otherwise when its
    /// future is dropped after it started (its caller went away: a `select!`, a `try_join!`
    /// whose other branch failed, a client that disconnected). Such a call counts as a call,
    /// with the timeouts, retries, hedges and refusals it made before it was dropped.
    struct Calling<'d, 'n, Rt: Runtime, A, C, R, F, T, E, M: Mode> {
        #[pin]
        drive: DriveOf<'d, 'n, Rt, A, C, R, F, T, E, M>,
        dep: &'d Dependency<'n, Rt, M>,
    }

    impl<'d, 'n, Rt: Runtime, A, C, R, F, T, E, M: Mode> PinnedDrop for Calling<'d, 'n, Rt, A, C, R, F, T, E, M> {
        #[inline]
        fn drop(this: Pin<&mut Self>) {
            let this = this.project();
            let dep = *this.dep;
            let machine = this.drive.machine_mut();
            if machine.is_unfinished() {
                record_dropped(dep, machine);
            }
        }
    }
}

/// Records the call of `machine`, dropped before it ended, into `dep`'s counters (and the
/// `metrics` recorder): out of line, as a call that ended was recorded then.
#[cold]
#[inline(never)]
fn record_dropped<Rt, E, M: Mode>(dep: &Dependency<'_, Rt, M>, machine: &CallMachine<'_, E, M>) {
    machine.record_steps(dep.counters());
    #[cfg(feature = "metrics")]
    super::metrics::publish_dropped(dep.name(), &machine.report());
}

impl<'d, 'n, Rt, A, C, R, F, T, E, M> Calling<'d, 'n, Rt, A, C, R, F, T, E, M>
where
    Rt: Runtime,
    M: Mode,
    A: Attempt<Future = F>,
    F: Future<Output = Result<T, E>>,
    C: Classify<E>,
    R: Rng,
{
    #[inline]
    fn new(run: Run<'d, 'n, Rt, A, C, R, M>) -> Self {
        let dep = run.dep;
        debug_assert!(
            run.classified || !retries_only_what_the_default_never_says(dep),
            "the call to `{}` would never be retried: its policy is not idempotent, so it is \
             retried only after Outcome::Refused or Outcome::Pushback, and the default \
             classifier reads every error as Outcome::Failed; give the call .classify(..) \
             (deadline_tokio::reqwest::classify for reqwest, ClassifyConnect for a client \
             that connects through deadline_tokio's Connector, deadline_tokio::postgres::classify \
             or deadline_tokio::sqlx::classify for a database, or your own)",
            dep.name(),
        );
        // The deadline given with `Run::deadline`, if any: at the first poll, inside whatever
        // scope runs it, the call's deadline becomes the earlier of it and the current one.
        let call = dep.call(run.deadline.unwrap_or(Deadline::NEVER), run.reserve);
        Calling {
            drive: Drive::new(
                CallMachine::with_mode(call, None),
                Rt::timer(),
                run.rng,
                run.classify,
                InScope::new(run.attempt),
                ModeRecorder::new(dep),
            ),
            dep,
        }
    }

    #[inline]
    fn poll_called(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Called<T, E>> {
        let mut this = self.project();
        let machine = this.drive.as_mut().machine_mut();
        if !machine.has_started() {
            // The first poll: the call's deadline becomes the earlier of its own (the one
            // given, or none) and the current one.
            let current = Rt::current().unwrap_or(Deadline::NEVER);
            machine.settle(current, this.dep.live_hedge_delay());
        }
        let called = core::task::ready!(this.drive.poll(cx));
        called.record(this.dep.counters());
        #[cfg(feature = "metrics")]
        super::metrics::publish(this.dep.name(), &called);
        Poll::Ready(called)
    }
}

pin_project_lite::pin_project! {
    /// The future of an awaited [`Run`]: `Result<T, CallError<E>>`. No allocation: the
    /// attempts in flight, the sleep and the call's state are all inside it. Dropping it
    /// drops every attempt still running, which cancels them.
    #[must_use = "futures do nothing unless polled"]
    pub struct RunFuture<'d, 'n, Rt: Runtime, A, C, R, F, T, E, M: Mode> {
        #[pin]
        calling: Calling<'d, 'n, Rt, A, C, R, F, T, E, M>,
    }
}

impl<Rt, A, C, R, F, T, E, M> Future for RunFuture<'_, '_, Rt, A, C, R, F, T, E, M>
where
    Rt: Runtime,
    M: Mode,
    A: Attempt<Future = F>,
    F: Future<Output = Result<T, E>>,
    C: Classify<E>,
    R: Rng,
{
    type Output = Result<T, CallError<E>>;

    #[inline]
    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        self.project()
            .calling
            .poll_called(cx)
            .map(|called| called.result)
    }
}

pin_project_lite::pin_project! {
    /// The future of an awaited [`WithReport`]: the whole [`Called`].
    #[must_use = "futures do nothing unless polled"]
    pub struct WithReportFuture<'d, 'n, Rt: Runtime, A, C, R, F, T, E, M: Mode> {
        #[pin]
        calling: Calling<'d, 'n, Rt, A, C, R, F, T, E, M>,
    }
}

impl<Rt, A, C, R, F, T, E, M> Future for WithReportFuture<'_, '_, Rt, A, C, R, F, T, E, M>
where
    Rt: Runtime,
    M: Mode,
    A: Attempt<Future = F>,
    F: Future<Output = Result<T, E>>,
    C: Classify<E>,
    R: Rng,
{
    type Output = Called<T, E>;

    #[inline]
    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Called<T, E>> {
        self.project().calling.poll_called(cx)
    }
}

/// Whether `dep` allows retries that only [`Outcome::Refused`] or [`Outcome::Pushback`]
/// start (it is not idempotent), which the default classifier never says. A deadline-only
/// dependency has no retries (it refuses a policy with any).
fn retries_only_what_the_default_never_says<Rt, M: Mode>(dep: &Dependency<'_, Rt, M>) -> bool {
    let policy = dep.policy();
    M::FULL && !policy.is_idempotent() && policy.retry().max_attempts > 1
}
