//! Peak stack use: cortex-m-rt paints the whole stack with [`STACK_PAINT_VALUE`] before
//! `main` (its `paint-stack` feature); the words still painted at the bottom were never
//! touched.

use cortex_m_rt::STACK_PAINT_VALUE;

unsafe extern "C" {
    /// The top of the stack (its first word is below it), from cortex-m-rt's linker script.
    static _stack_start: u32;
    /// The bottom of the stack: the end of static RAM, from cortex-m-rt's linker script.
    static _stack_end: u32;
}

/// The stack's size and the most of it ever used, in bytes.
pub fn peak() -> (usize, usize) {
    let bottom = (&raw const _stack_end).cast::<u32>();
    let top = (&raw const _stack_start).cast::<u32>();
    let size = (top as usize).saturating_sub(bottom as usize);
    let words = size / 4;
    let mut untouched = 0;
    while untouched < words {
        // SAFETY: `bottom + untouched` is a word-aligned address inside the stack region
        // (between `_stack_end` and `_stack_start`, both 4-aligned RAM addresses from the
        // linker script), below the stack pointer's deepest point so far or at it; a
        // volatile read of RAM there has no side effect.
        let word = unsafe { bottom.add(untouched).read_volatile() };
        if word != STACK_PAINT_VALUE {
            break;
        }
        untouched += 1;
    }
    (size, size - untouched * 4)
}
