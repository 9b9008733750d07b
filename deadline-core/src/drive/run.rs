//! The async driver's loop: a short loop over the [`CallMachine`], which makes every
//! decision. The loop keeps the attempt futures and one sleep, polls them, and tells the
//! machine what they did.

use core::future::Future;
use core::pin::Pin;
use core::task::{Context, Poll};
use core::time::Duration;

use crate::rng::Rng;
use crate::time::{Instant, micros_to_duration};
use crate::timer::Timer;

use super::attempt::Attempt;
use super::call_machine::{Action, CallMachine};
use super::classify::{Classify, counts_once_sent, once_sent};
use super::event::Observer;
use super::mode::sealed::Room;
use super::mode::{Mode, Slots};
use super::report::Called;
use super::runtime::Onward;
use crate::outcome::Outcome;

/// Everything the loop keeps between polls, apart from the pinned futures.
pub(super) struct Run<'c, Tm, R, C, A, O, T, E, M: Mode> {
    pub(super) machine: CallMachine<'c, E, M>,
    pub(super) timer: Tm,
    pub(super) rng: R,
    pub(super) classify: C,
    pub(super) attempt: A,
    pub(super) observer: O,
    /// The winner's answer, from when it comes until the call returns it.
    pub(super) value: Option<T>,
    /// The instant the sleep is armed for, while there is one.
    pub(super) sleep_at: Instant,
}

impl<Tm, R, C, A, O, F, T, E, M: Mode> Run<'_, Tm, R, C, A, O, T, E, M>
where
    Tm: Timer,
    R: Rng,
    C: Classify<E>,
    A: Attempt<Future = F>,
    F: Future<Output = Result<T, E>>,
    O: Observer,
{
    /// One poll of the whole call: the attempts first (this poll is a wake-up, and any of
    /// them may have moved), then the machine's actions until it waits or is done. A sleep is
    /// armed only when an attempt is pending, so a call whose first attempt answers at once
    /// never touches the timer.
    #[inline]
    pub(super) fn poll(
        &mut self,
        cx: &mut Context<'_>,
        mut slots: Pin<&mut <M as Room>::Slots<F>>,
        sleep: &mut Pin<&mut Option<Tm::Sleep>>,
    ) -> Poll<Called<T, E>> {
        let mut now = self.timer.now();
        if self.machine.has_started() {
            // A wake-up: any attempt may have moved.
            self.poll_attempts(cx, slots.as_mut(), now);
            if self.spare(now, cx) {
                return Poll::Pending;
            }
        }
        loop {
            match self.machine.poll(now, &mut self.rng, &mut self.observer) {
                Action::Start { slot, limits } => {
                    self.started(slot, limits, cx, slots.as_mut(), &mut now);
                }
                Action::Cancel { slot } => slots.as_mut().slot(slot).set(None),
                Action::Done => {
                    for slot in 0..<M::Slots<F> as Slots<F>>::LEN {
                        slots.as_mut().slot(slot).set(None);
                    }
                    sleep.set(None);
                    return Poll::Ready(self.machine.finish(self.value.take(), now));
                }
                Action::Wait { until } => {
                    if sleep.is_none() || self.sleep_at != until {
                        sleep.set(Some(self.timer.sleep_until(until)));
                        self.sleep_at = until;
                    }
                    let Some(timer) = sleep.as_mut().as_pin_mut() else {
                        continue;
                    };
                    if timer.poll(cx).is_pending() {
                        return Poll::Pending;
                    }
                    sleep.set(None);
                    // The clock, not the wake-up, says what is due: read it again, and give
                    // the attempts their chance before their timeouts are looked at.
                    now = self.timer.now();
                    self.poll_attempts(cx, slots.as_mut(), now);
                    if self.spare(now, cx) {
                        return Poll::Pending;
                    }
                }
            }
        }
    }

    /// Whether to give the attempts one more poll before the machine cuts one off at `now`,
    /// when the task's budget is spent ([`Timer::budget_spent`]), as their "pending" may then
    /// be the budget's: never twice without the machine polled between, which cuts off what
    /// is still due. The task is woken for that poll.
    #[inline]
    fn spare(&mut self, now: Instant, cx: &mut Context<'_>) -> bool {
        // The budget first: a constant `false` on a runtime that has none, where none of this
        // is then compiled (asked after the machine, it left 184 bytes of code in the
        // Cortex-M0's full-mode firmware: `bash scripts/firmware.sh`).
        if !self.timer.budget_spent() || !self.machine.would_cut(now) {
            return false;
        }
        self.machine.spare();
        cx.waker().wake_by_ref();
        true
    }

    /// Starts an attempt in `slot` with `limits` and polls it at once (if it answers, no
    /// timer is armed). Its value, if it answered, is kept as the call's winner: the machine
    /// then cancels whatever else runs and says the call is done.
    ///
    /// An attempt that ends in its first poll may have done its whole call there (a blocking
    /// attempt, on the blocking runtime, does): the clock is read again, and `now` moves
    /// there, so that what is decided next (whether it ran out of time, a retry's timeout)
    /// sees the time it took. An attempt that ends at a later poll ended in a poll that
    /// began at the wake-up, when `now` was read.
    #[inline(always)]
    fn started(
        &mut self,
        slot: usize,
        limits: crate::call_timeout::Limits,
        cx: &mut Context<'_>,
        mut slots: Pin<&mut <M as Room>::Slots<F>>,
        now: &mut Instant,
    ) {
        let mut fut = slots.as_mut().slot(slot);
        let polled = self.attempt.start_in(limits, fut.as_mut(), cx);
        if polled.is_ready() {
            *now = self.timer.now().max(*now);
        }
        if let Some(value) = self.ended(slot, &mut fut, polled, *now) {
            self.value = Some(value);
        }
    }

    /// Polls every attempt in flight, and tells the machine of
    /// each that ended.
    fn poll_attempts(
        &mut self,
        cx: &mut Context<'_>,
        mut slots: Pin<&mut <M as Room>::Slots<F>>,
        now: Instant,
    ) {
        for slot in 0..<M::Slots<F> as Slots<F>>::LEN {
            let mut fut = slots.as_mut().slot(slot);
            let Some(running) = fut.as_mut().as_pin_mut() else {
                continue;
            };
            let polled = running.poll(cx);
            if let Some(value) = self.ended(slot, &mut fut, polled, now) {
                // The winner: the call is over once the others are cancelled.
                self.value = Some(value);
                return;
            }
        }
    }

    /// Tells the machine how the attempt in `slot` did at its latest poll, at `now`, and
    /// empties the slot if it ended. Its value when it answered: the call's winner.
    #[inline]
    fn ended(
        &mut self,
        slot: usize,
        fut: &mut Pin<&mut Option<F>>,
        polled: Poll<Result<T, E>>,
        now: Instant,
    ) -> Option<T> {
        let Poll::Ready(result) = polled else {
            return None;
        };
        // What a failed attempt sent onward, read before its future goes.
        let sent = match &result {
            Ok(_) => None,
            Err(_) => fut.as_ref().as_pin_ref().and_then(A::onward),
        };
        fut.set(None);
        match (result, sent) {
            (Ok(value), _) => {
                self.machine.succeeded(slot, now, &mut self.observer);
                Some(value)
            }
            // It could send nothing: the dependency never saw it, whatever its error says.
            (Err(_), Some(Onward::Nothing { needed_micros })) => {
                self.unsent(slot, micros_to_duration(needed_micros), now);
                None
            }
            (Err(error), sent) => {
                let mut outcome = self.classify.classify(&error);
                if let Some(Onward::RunningOutFrom(from)) = sent {
                    outcome = self.once_sent(outcome, from, now);
                }
                self.machine
                    .failed(slot, error, outcome, now, &mut self.observer);
                None
            }
        }
    }

    /// Tells the machine that the attempt in `slot`, found in a poll that began at `now`, sent
    /// nothing for want of `needed` left. It was refused during the poll, by the attempt's
    /// own clock: the clock is read again, so that a refusal for want of time is not taken
    /// for one with time to spare. Out of line, as it is seldom taken: inlined into the poll
    /// of every attempt's answer, it cost an armed `Dependency::run` whose answer is pending
    /// once 13 instructions more (2 797 against 2 784, `bash scripts/instructions.sh
    /// dependency_run_armed_pending`), and saved one that answers at once 5 (712 against
    /// 717, `dependency_run_armed`).
    #[cold]
    #[inline(never)]
    fn unsent(&mut self, slot: usize, needed: Duration, now: Instant) {
        let refused_at = self.timer.now().max(now);
        self.machine
            .unsent(slot, needed, refused_at, now, &mut self.observer);
    }

    /// How a failure of `outcome`, found in a poll that began at `now`, counts once what its
    /// attempt sent onward runs out from `running_out_from` ([`once_sent`]).
    ///
    /// The failure may have come while the poll was under way (its thread preempted after
    /// `now` was read, on a busy machine). Where that can change the verdict (a failure that
    /// counts as the deadline's from `running_out_from` on, found before then by `now`), the
    /// clock is read again and decides. The machine is still told of the failure at `now`,
    /// as of everything else the poll found: its time never goes back.
    fn once_sent(&self, outcome: Outcome, running_out_from: Instant, now: Instant) -> Outcome {
        if now < running_out_from && counts_once_sent(outcome) {
            once_sent(outcome, running_out_from, self.timer.now())
        } else {
            once_sent(outcome, running_out_from, now)
        }
    }
}
