//! [`find`]: an error of one type among another error's sources, as the classifiers of a
//! client's errors look for the failure they know (a connect that failed, tonic's timer, a
//! stream the server refused: [`refused_stream`]).

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

/// Whether `error`'s chain holds the server's HTTP/2 reset of the request's stream with
/// `REFUSED_STREAM`, which says the stream was closed before any processing (RFC 9113,
/// 8.7): the request never ran, and may be sent again, idempotent or not. (A `GOAWAY` is not
/// read so: a stream the server had taken may fail with it too, after it ran.)
pub(crate) fn refused_stream(error: &(dyn Error + 'static)) -> bool {
    find::<h2::Error>(error).is_some_and(|h2| {
        h2.is_reset() && h2.is_remote() && h2.reason() == Some(h2::Reason::REFUSED_STREAM)
    })
}
