//! The `tonic::Status` a library error reads as in an error's source chain (feature `tonic`).

use std::sync::OnceLock;

use deadline_core::Error;

/// The status a library error reads as for a tonic client that finds it in an error's
/// source chain (tonic's `Status::from_error` looks there for a `Status`): one value per kind
/// of error for the process, so that an error's `source` can point at it, made from the
/// core's one mapping (`From<Error> for tonic::Status`: the error's gRPC code and text; for a
/// timeout or a shortfall, the text without its figures, which are each call's own).
pub(crate) fn status_of(error: Error) -> &'static tonic::Status {
    static STATUSES: [OnceLock<tonic::Status>; 7] = [const { OnceLock::new() }; 7];
    // One slot per kind; a kind the core adds later shares the first slot with the
    // deadline's, and reads as that (the core's errors of a call that did not answer).
    let (slot, error) = match error {
        Error::InsufficientTime { .. } => (1, error),
        Error::Timeout { .. } => (2, error),
        Error::CircuitOpen => (3, error),
        Error::Shed => (4, error),
        Error::Throttled => (5, error),
        Error::MalformedDeadline => (6, error),
        _ => (0, Error::DeadlineExceeded),
    };
    STATUSES[slot].get_or_init(|| {
        let status = tonic::Status::from(error);
        // The figures of a timeout or a shortfall differ from one call to the next: the
        // status made once says what happened without them (the error itself has them).
        match error {
            Error::Timeout { .. } => tonic::Status::new(status.code(), "timed out"),
            Error::InsufficientTime { .. } => tonic::Status::new(
                status.code(),
                "not called: the time available is under the floor",
            ),
            _ => status,
        }
    })
}

/// The status a request too long to keep for the attempts reads as for a tonic client
/// ([`DependencyError::BodyTooLarge`](super::DependencyError::BodyTooLarge)):
/// `RESOURCE_EXHAUSTED`, gRPC's code for a message over a limit. Made once for the process;
/// the error itself says the limit.
pub(crate) fn too_large() -> &'static tonic::Status {
    static STATUS: OnceLock<tonic::Status> = OnceLock::new();
    STATUS.get_or_init(|| {
        tonic::Status::resource_exhausted(
            "the request is longer than what is kept to send it again",
        )
    })
}

#[cfg(test)]
mod tests {
    use deadline_core::{Error, ms};

    use super::status_of;

    /// The status is made once per kind: a later call's timeout must not read as the first
    /// call's ("timed out after 50000 us" for a call that ran 80 ms).
    #[test]
    fn a_timeouts_status_carries_no_other_calls_figures() {
        let first = status_of(Error::Timeout { after: ms(50) });
        let later = status_of(Error::Timeout { after: ms(80) });
        assert!(core::ptr::eq(first, later));
        assert_eq!(later.code(), tonic::Code::DeadlineExceeded);
        assert_eq!(later.message(), "timed out");
        let short = status_of(Error::InsufficientTime {
            available: ms(3),
            floor: ms(10),
        });
        assert_eq!(short.code(), tonic::Code::DeadlineExceeded);
        assert!(!short.message().contains("us"), "{}", short.message());
    }
}
