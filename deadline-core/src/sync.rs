//! The atomics behind the shared-state types (the retry budget, the breaker, the histogram,
//! the counters): `portable-atomic`'s, or, when built with `--cfg loom`, the loom model
//! checker's, so that `tests/loom.rs` explores every interleaving of the real code.
//!
//! `AtomicU64` exists only where the target has 64-bit atomics: elsewhere (thumbv6m,
//! thumbv7m, thumbv7em) portable-atomic would make one from a global lock table, so the
//! shared state keeps 32-bit (or narrower) atomics there, and a 64-bit one cannot creep back
//! in unnoticed.
//!
//! Loom's atomics cannot be made in a `const fn`, and every type here is `const`-constructible
//! (for `static`s). Under loom each atomic therefore keeps its initial value and makes its loom
//! atomic on first use, inside the model run that uses it. The loom atomic is touched under a
//! std mutex that loom does not see; loom runs one model thread at a time, so that mutex adds
//! no interleavings and hides none.

#[cfg(all(not(loom), target_has_atomic = "64"))]
pub(crate) use portable_atomic::AtomicU64;
#[cfg(not(loom))]
pub(crate) use portable_atomic::{AtomicU16, AtomicU32, Ordering};

#[cfg(loom)]
pub(crate) use self::model::{AtomicU16, AtomicU32, AtomicU64, Ordering};

// Each type uses only some of the operations.
#[cfg(loom)]
#[allow(dead_code)]
mod model {
    pub(crate) use core::sync::atomic::Ordering;

    use std::boxed::Box;
    use std::sync::Mutex;
    use std::vec::Vec;

    /// Where each model atomic's loom atomic lives, once made: leaked, so that the types
    /// holding them keep no drop glue (their `const fn`s take and return `self`). A test
    /// process makes a few thousand; the leak is the test's.
    static MADE16: Mutex<Vec<&'static loom::sync::atomic::AtomicU16>> = Mutex::new(Vec::new());
    static MADE32: Mutex<Vec<&'static loom::sync::atomic::AtomicU32>> = Mutex::new(Vec::new());
    static MADE64: Mutex<Vec<&'static loom::sync::atomic::AtomicU64>> = Mutex::new(Vec::new());

    /// Not made yet.
    const UNMADE: usize = usize::MAX;

    macro_rules! model_atomic {
        ($name:ident, $int:ty, $made:ident) => {
            /// A loom atomic with a `const` constructor: made on first use.
            // `pub` (in this private module), as portable-atomic's are: the histogram's
            // counters name it in a public trait's associated type.
            #[allow(unreachable_pub)]
            pub struct $name {
                init: $int,
                slot: core::sync::atomic::AtomicUsize,
            }

            impl $name {
                pub(crate) const fn new(init: $int) -> Self {
                    $name {
                        init,
                        slot: core::sync::atomic::AtomicUsize::new(UNMADE),
                    }
                }

                fn get(&self) -> &'static loom::sync::atomic::$name {
                    let mut made = $made.lock().unwrap_or_else(|e| e.into_inner());
                    let mut slot = self.slot.load(Ordering::SeqCst);
                    if slot == UNMADE {
                        made.push(Box::leak(Box::new(loom::sync::atomic::$name::new(
                            self.init,
                        ))));
                        slot = made.len().saturating_sub(1);
                        self.slot.store(slot, Ordering::SeqCst);
                    }
                    made.get(slot).copied().expect("made above")
                }

                pub(crate) fn load(&self, order: Ordering) -> $int {
                    self.get().load(order)
                }

                pub(crate) fn store(&self, value: $int, order: Ordering) {
                    self.get().store(value, order);
                }

                pub(crate) fn fetch_add(&self, value: $int, order: Ordering) -> $int {
                    self.get().fetch_add(value, order)
                }

                pub(crate) fn compare_exchange(
                    &self,
                    current: $int,
                    new: $int,
                    success: Ordering,
                    failure: Ordering,
                ) -> Result<$int, $int> {
                    self.get().compare_exchange(current, new, success, failure)
                }

                pub(crate) fn compare_exchange_weak(
                    &self,
                    current: $int,
                    new: $int,
                    success: Ordering,
                    failure: Ordering,
                ) -> Result<$int, $int> {
                    self.get()
                        .compare_exchange_weak(current, new, success, failure)
                }

                pub(crate) fn fetch_update<F>(
                    &self,
                    set: Ordering,
                    fetch: Ordering,
                    f: F,
                ) -> Result<$int, $int>
                where
                    F: FnMut($int) -> Option<$int>,
                {
                    self.get().fetch_update(set, fetch, f)
                }
            }

            impl Default for $name {
                fn default() -> Self {
                    $name::new(0)
                }
            }

            impl core::fmt::Debug for $name {
                fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
                    f.debug_tuple(stringify!($name))
                        .field(&self.load(Ordering::Relaxed))
                        .finish()
                }
            }
        };
    }

    model_atomic!(AtomicU16, u16, MADE16);
    model_atomic!(AtomicU32, u32, MADE32);
    model_atomic!(AtomicU64, u64, MADE64);
}
