//! [`find`]: an error of one type among another error's sources, as the classifiers of a
//! client's errors look for the failure they know (a connect that failed, tonic's timer).

use std::error::Error;

/// The first error of type `T` in `error`'s chain, `error` itself first, then each
/// [`source`](Error::source) in turn. A chain is a handful of links; the bound of 64 only
/// guards against a cycle.
pub(crate) fn find<'e, T: Error + 'static>(error: &'e (dyn Error + 'static)) -> Option<&'e T> {
    let mut link = Some(error);
    for _ in 0..64 {
        let error = link?;
        if let Some(found) = error.downcast_ref::<T>() {
            return Some(found);
        }
        link = error.source();
    }
    None
}
