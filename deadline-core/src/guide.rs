//! The library at length: what each part is for, the rules it keeps, and why. The item docs
//! say what each type does; this page says how they fit together. The README has the short
//! version and a table of the one way to do each job.
//!
//! # One deadline per request
//!
//! A request gets one deadline, once, when it arrives: the budget its caller sent (in a
//! `grpc-timeout`, `connect-timeout-ms`, `x-deadline-ms` or Envoy's
//! `x-envoy-expected-rq-timeout-ms` header), clamped to what the server is willing to spend, or
//! a default budget when the caller sent none. Everything below it reads that one deadline:
//! no function takes a timeout parameter, and no timeout is configured anywhere as a fixed
//! number of its own. A [`Deadline`](crate::Deadline) is an instant, not a duration, so it does not need to be
//! passed around and decremented: the time left is always `deadline - now`.
//!
//! A server sets it with a layer (deadline-tokio's `DeadlineLayer`, one line on an axum, hyper
//! or tonic server); any other program with a *scope*: `scope_timeout(budget, work)` runs
//! `work` with the deadline current and **bounds it**: at the deadline `work` is dropped, which
//! cancels everything it was waiting for, and the result is
//! [`Error::DeadlineExceeded`](crate::Error::DeadlineExceeded). A scope inside a scope keeps the earlier of the two
//! deadlines; `propagate` carries the current deadline into a spawned task, which would not
//! see it otherwise. [`runtime::with_deadline`](crate::runtime::with_deadline) (in
//! deadline-tokio, `low_level::with_deadline`) sets the deadline without bounding the work,
//! for work that bounds itself.
//!
//! # A call's timeout from the time left
//!
//! Each call to a dependency gets its timeout when it starts, from the time left:
//!
//! ```text
//! timeout = min(left - reserve, cap)      and no call when timeout < floor
//! ```
//!
//! - the **cap** is what the dependency is worth waiting for at most: its p99.9 plus a margin;
//! - the **floor** is the least worth calling with: its p50, under which the call would
//!   mostly time out anyway;
//! - the **reserve** is what must be left after the call: the request's own work, plus the
//!   floors of the required calls still to come.
//!
//! A call whose timeout would fall under its floor is not made. An *optional* dependency (one
//! the request has a fallback for) is then **skipped**, and the request goes on without it; a
//! *required* one **fails** the request at once, while there is still time to say so. A
//! [`Policy`](crate::Policy) holds the cap, the floor and whether the dependency is required;
//! [`call::call_timeout`](crate::call::call_timeout) is the formula, and its
//! [`Decision`](crate::call::Decision) is `Call` (with the attempt's
//! [`Limits`](crate::call::Limits)), `Skip` or `Fail`.
//!
//! A policy whose settings could never act (a cap under a microsecond, a floor above the cap,
//! a fixed hedge delay at or past the cap; with an adaptive cap, its lower bound stands in
//! for the cap) is refused where its [`Dependency`](crate::Dependency) is made: a compile
//! error in a `static` or a `const`, a panic at run time (a deadline-only dependency, which
//! makes one attempt, refuses any retry or hedge at all). [`Policy::check`](crate::Policy::check) names the
//! setting beforehand, without the panic, as a [`PolicyError`](crate::policy::PolicyError):
//! for a policy read from a configuration file.
//!
//! The caps may add up to more than the budget, and that is the point: a fixed split of the
//! budget would starve a fast request's later calls to keep room for a slow request's earlier
//! ones. Each call gets its full cap only when enough time is left for it. A request that calls
//! several dependencies in turn names them once, in order, in a [`Steps`](crate::Steps) plan, and each call
//! keeps the reserve the formula needs, computed for it.
//!
//! ```
//! use deadline_core::{Deadline, Instant, Policy, ms};
//! use deadline_core::call::{Decision, call_timeout};
//!
//! let c = Policy::optional("recommendations").with_cap(ms(60)).with_floor(ms(25));
//! let deadline = Deadline::after(Instant::ZERO, ms(200));
//! // At 115 ms, keeping 20 ms for our own work: min(200 - 115 - 20, 60) = 60 ms.
//! assert_eq!(call_timeout(&c, deadline, ms(20), Instant::from_millis(115)).timeout(), Some(ms(60)));
//! // At 156 ms: 24 ms is under the 25 ms floor, and C is optional: skipped.
//! assert!(matches!(call_timeout(&c, deadline, ms(20), Instant::from_millis(156)), Decision::Skip(_)));
//! ```
//!
//! A dependency's connect limit ([`Policy::with_connect`](crate::Policy::with_connect)) bounds the connection apart from the
//! call: within one data centre a connection takes milliseconds, and a connect that has not
//! finished by then will not; the attempt is then over, and retried as the policy says. The
//! limit is handed to the attempt ([`Limits::connect`](crate::call::Limits::connect)); a
//! client applies it where it connects: `deadline-std`'s `net::connect`, `deadline-tokio`'s
//! `Connector` for hyper-util and tonic. reqwest takes one connect timeout per client, set
//! when it is built, so there it is the client's to set.
//!
//! # Retries, and what may be repeated
//!
//! A policy that retries must first say whether a call may be repeated:
//!
//! - [`Policy::idempotent`](crate::Policy::idempotent): repeating it is safe (a read, a write with an idempotency key).
//!   Any failure may be retried, and the call may be hedged.
//! - [`Policy::not_idempotent`](crate::Policy::not_idempotent): it must not run twice. Only an attempt that provably never
//!   reached the server is retried: [`Outcome::Refused`](crate::Outcome::Refused) (the connection was refused) or
//!   [`Outcome::Pushback`](crate::Outcome::Pushback) (the server declined it and said when to come back). It is never
//!   hedged. An attempt that ran out of its own time before it could send (below, "Timeouts are timeouts") is a
//!   timeout, and not retried either: whatever else it may have sent first, the library cannot see.
//!
//! [`Policy::with_retries`](crate::Policy::with_retries) and the hedge settings on a policy that has said neither stop the
//! build when the policy is a `static` or a `const` (a compile-time panic, error E0080, that
//! names the rule), and panic when a policy is built at run time: a policy never retries
//! nothing in silence. Nor does a call: one to a dependency that is not idempotent, with
//! retries, awaited without a classifier (whose default never says `Refused` or `Pushback`)
//! panics in a debug build and says so.
//!
//! Each failed attempt is read as an [`Outcome`](crate::Outcome): by default every `Err` is
//! [`Outcome::Failed`](crate::Outcome::Failed); a classifier (`Run::classify`, a layer's `classify_error`) says which
//! errors are refusals, pushbacks, timeouts, final answers or the server broken. Before each retry, checked in this
//! order (the first that fails ends the call):
//!
//! 1. The outcome is retryable: not [`Outcome::Fatal`](crate::Outcome::Fatal) nor [`Outcome::Broken`](crate::Outcome::Broken), not a [`Pushback::DontRetry`](crate::Pushback::DontRetry).
//! 2. The attempt cannot have run twice: a call that is not idempotent is retried only after
//!    [`Outcome::Refused`](crate::Outcome::Refused) or [`Outcome::Pushback`](crate::Outcome::Pushback).
//! 3. Attempts are left under [`RetryPolicy::attempts`](crate::policy::RetryPolicy::attempts).
//! 4. The wait (the server's pushback when it gave one, else the [`Backoff`](crate::policy::Backoff))
//!    ends before the request's deadline.
//! 5. The call timeout computed again for a start at the end of the backoff is at least the
//!    dependency's floor.
//! 6. The retry budget grants a token. It is asked last, so no token is taken for a retry
//!    that one of the checks above rules out.
//!
//! The token is taken at the decision, before the backoff is slept. A driver that wakes so
//! late that the retry no longer fits, or whose circuit breaker then refuses it, makes no
//! retry, and the token is not given back; nor is it when the call ends during the backoff
//! (another copy answered, or the caller went away), which a hedged call whose hedge failed
//! fast and whose first copy then won does. The budget errs towards fewer retries, never
//! more.
//! [`call::RetryState`](crate::call::RetryState) is this decision, sans-IO: it takes `now`
//! and answers with the instant to retry at and the retry's limits, or the reason to give up.
//!
//! A server's pushback is honoured: HTTP `Retry-After` and gRPC's `grpc-retry-pushback-ms`
//! ([`wire::parse_retry_after`](crate::wire::parse_retry_after),
//! [`wire::parse_grpc_pushback`](crate::wire::parse_grpc_pushback)) are the wait before the
//! retry, in place of the backoff, which starts over from its first step for any retry after
//! that one (gRFC A6: "retry in n ms; if this attempt also fails, retry delay will reset to
//! initial backoff"; `Retry-After` asks for no sooner, which the exact wait keeps). A
//! pushback that would end after the deadline ends the call instead of waiting for it. The
//! server's word counts whenever it comes: said by one copy while another copy's retry backs
//! off, "retry after" postpones that retry, and "do not retry" calls it off; and a copy that
//! fails after it, with no word of its own, is not retried before the server's time (nor at
//! all, when that time is past the deadline). It times a
//! retry; it does not make one safe: a gRPC `DEADLINE_EXCEEDED` or `CANCELLED` may have run
//! on the server whatever it says, so only its "do not retry" is heard, and a call that is
//! not idempotent is not repeated.
//!
//! # Hedged requests
//!
//! A retry waits for a failure; for a slow call that means waiting for its timeout, and by
//! then little time is left. A hedge does not wait: once an attempt has run longer than the
//! dependency's p95, a copy is sent with the call timeout computed from the time left at that
//! moment. Whichever answers first is used, and the others are cancelled (The Tail at Scale:
//! about 5% more calls for a much shorter tail).
//!
//! Each hedge is sent `delay` after the latest send of the call: the first attempt, the
//! previous hedge, or a retry. With no retry and no refusal in between, hedge `k` goes out at
//! `first_start + k × delay`, gRPC's hedging schedule. A retry starts the schedule again from
//! the retry's start, and a hedge the budget refused moves it on by one delay. The delay is
//! the policy's fixed one ([`Policy::with_hedge_after`](crate::Policy::with_hedge_after)) or the live p95 of the dependency's
//! own latency histogram ([`Policy::with_hedge_at_p95`](crate::Policy::with_hedge_at_p95), with a fixed fallback until the
//! histogram holds enough calls). The histogram holds an attempt that timed out at its
//! timeout, where its latency was at least that: when many callers arrive with less time
//! than the dependency's slow answers take, their cut attempts pull the live p95 down, and
//! more calls are hedged than the 5% a p95 means, as many as the retry budget lets through.
//!
//! A hedge is sent only when all of these hold, checked in this order: the policy hedges and
//! is idempotent; fewer than its most hedges have been sent for this call; its time has come;
//! its call timeout, computed at that moment, is at least the floor; and the retry budget
//! (the same one retries draw from) grants a token. A driver with a circuit breaker also asks
//! it for leave, just before, and spends no token on a hedge it refuses.
//! [`call::HedgeState`](crate::call::HedgeState) is this decision.
//!
//! A copy that fails while others still run is retried at once, as the rules above allow: a
//! hedge that fails fast does not wait for a slow first copy to end, its retry starts after
//! its backoff in the slot it left, and whichever copy answers first is used. With no retry
//! allowed, the call waits for the copies still running.
//!
//! # Timeouts are timeouts
//!
//! An attempt that runs out of time ends as the library's timeout, whichever timer noticed
//! first: counted in the dependency's `timeouts`, retried as a timeout, and, when the call
//! gives up, [`Error::Timeout`](crate::Error::Timeout) (HTTP 504, gRPC `DEADLINE_EXCEEDED`), never a failed
//! dependency (502). The driver cuts every attempt off at its own deadline; a client library's
//! own timer may fire first, and its error is the attempt's timeout too. deadline-tokio's
//! reqwest integration sets reqwest's timer a per-hop allowance *after* the attempt's
//! deadline, as a backstop, so the library's timer wins that race unless a loaded runtime
//! runs it late; a tonic `Channel` times a call by the `grpc-timeout` it sends, the
//! attempt's time less the allowance, so its timer fires first. Any failure that comes at or
//! after the attempt's deadline and is not the server's own answer
//! ([`Outcome::Fatal`](crate::Outcome::Fatal), [`Outcome::Broken`](crate::Outcome::Broken),
//! [`Outcome::Pushback`](crate::Outcome::Pushback)) is read as the attempt's timeout.
//!
//! A next service that runs out of the time it was sent answers so (a 504, gRPC
//! `DEADLINE_EXCEEDED`) before the attempt's own deadline: the time sent is the attempt's
//! less the per-hop allowance, and it answers its reply margin before that. An adapter that
//! sends the time left with a request whose answer the attempt reads (reqwest's
//! `.time_left()`, deadline-tokio's `PropagateLayer`) tells the runtime what it sent
//! ([`runtime::note_sent`](crate::runtime::note_sent)); a failure a retry may fix that the
//! attempt then returns once the time sent is running out
//! ([`Sent::running_out_from`](crate::wire::Sent::running_out_from)) is the attempt's
//! timeout too, whatever error it was made of. A database's statement timeout is a deadline
//! sent onward as well: deadline-tokio's PostgreSQL and sqlx queries note it
//! ([`StatementTimeout::running_out_from`](crate::statement::StatementTimeout::running_out_from)),
//! so a query the database ends at its statement timeout, the policy's margin before the
//! attempt's end, is the attempt's timeout. A tower client (`DependencyLayer`) sees every
//! answer itself, so it reads them by the narrower rule of
//! [`Sent::is_deadline_failure`](crate::wire::Sent::is_deadline_failure): once the time sent
//! is running out, only a failure of the deadline's shape (a transport error, a 408, 502, 503
//! or 504, a Connect unary call's 499, a gRPC `CANCELLED`, `UNAVAILABLE` or
//! `DEADLINE_EXCEEDED`, none saying when to retry) is the attempt's
//! timeout, and a 500 or a 429 then is still the dependency's answer. An attempt whose time
//! is too short to send anything (under the allowance, or a statement's floor) tells the
//! runtime so ([`Onward::Nothing`](crate::runtime::Onward::Nothing)): it never reached the
//! dependency, so the breaker does not count it (callers that arrive with too little time
//! cannot open the breaker of a dependency they never reach), and it says the least time it
//! needed. Whose time was short decides the rest. When it was the attempt's own (its cap
//! ended it, and it spent its time before sending, waiting for a pooled connection, say,
//! where an attempt starting then would have what it needed), it ran out of time, as if cut
//! off then: counted as a timeout, retried as a timeout is, and the call's error is
//! [`Error::Timeout`](crate::Error::Timeout) if it then gives up. Otherwise (what is left
//! of the deadline is too short, or no attempt could have what it needs) no retry or hedge
//! follows, each meeting the same refusal, and the call ends with
//! [`Error::DeadlineExceeded`](crate::Error::DeadlineExceeded), or, when an earlier attempt
//! failed, with that failure, as when the floor stops a retry before it starts.
//!
//! A next service told a deadline answers its 504 (`DEADLINE_EXCEEDED`) by its own margins
//! before it: its reply margin, and a database's statement timeout a margin before its
//! handler's deadline, which its caller cannot know. So an explicit 504 or
//! `DEADLINE_EXCEEDED` is the attempt running out of time whenever it comes
//! ([`ResponseHead::classify`](crate::wire::ResponseHead::classify) reads it as
//! [`Outcome::TimedOut`](crate::Outcome::TimedOut), unless its `grpc-retry-pushback-ms` says
//! not to retry), where a failure of another kind is the
//! attempt's timeout only once the time sent is running out. `DependencyLayer` and
//! deadline-tokio's `reqwest::classify` read responses with it.
//!
//! # The retry budget
//!
//! Retrying inside one request is bounded by the attempt cap; retrying across *all* requests
//! must be bounded too, or a dependency that starts failing receives `attempts x` its normal
//! load exactly when it can least take it (a retry budget, such as at most 10%
//! extra calls). A [`RetryBudget`](crate::budget::RetryBudget) is that bound:
//!
//! - every original call [`deposit`](crate::budget::RetryBudget::deposit)s a fraction of a token (10% of one
//!   token by default);
//! - every retry and every hedge must [`try_withdraw`](crate::budget::RetryBudget::try_withdraw) one whole
//!   token, and is not sent when it gets none;
//! - besides the deposits, each second of the budget's clock grants a few extra tokens (the
//!   *floor*), so a client with little traffic can still retry a little; the floor cannot be
//!   saved up: what a second does not use is gone.
//!
//! ## The bound
//!
//! Over any run, with `D` deposits, a ratio of `p` percent and a floor of `f` per second, the
//! number of withdrawals granted is at most
//!
//! ```text
//! floor(D x p / 100)  +  f x W
//! ```
//!
//! where `W` is the number of distinct seconds (of the instants passed to `try_withdraw`) in
//! which the floor was drawn on: at most `last second - first second + 1`. Against a
//! dependency that always fails, `R` requests therefore cause at most
//! `R + floor(R x p / 100) + f x (seconds spanned + 1)` calls, however many attempts each
//! request's policy allows. The bound holds under any interleaving of threads whose readings of
//! the clock are at most 64 seconds out of order (below); the tests of the repository check it
//! with equality where it is reached.
//!
//! ## How it differs from tower's `TpsBudget`
//!
//! - **Exact ratio.** The balance is kept in *milli-tokens* in integers: at 10% a deposit adds
//!   100 and a withdrawal takes 1000, so ten deposits buy exactly one retry. tower derives its
//!   amounts from `1.0 / retry_percent` as a float cast to an integer, which truncates: at 60%
//!   a deposit buys a whole retry (tower's issue 857,
//!   <https://github.com/tower-rs/tower/issues/857>). Here any whole percentage, and any per-mille
//!   ratio ([`RetryBudget::per_mille`](crate::budget::RetryBudget::per_mille)), is exact.
//! - **No over-draw under races.** tower's withdrawal reads the sum, compares, and then
//!   subtracts: two threads can both pass the comparison and both subtract. Here a withdrawal
//!   is one compare-and-swap that checks and takes in the same step, so the balance never goes
//!   below zero and no grant is counted twice. The floor's per-second count is one packed
//!   32-bit word (second, grants used) updated by a single compare-and-swap as well.
//! - **No lock, no heap, no clock.** Two `AtomicU32`s, `const` construction (usable in a
//!   `static`), `now` passed in. On targets without compare-and-swap (thumbv6m),
//!   `portable-atomic` supplies the same operations as the final binary chooses (the crate
//!   docs, "On a microcontroller").
//! - **Bounded savings.** Deposits do not expire, but the balance is capped
//!   ([`RetryBudget::with_max_balance`](crate::budget::RetryBudget::with_max_balance)): a long healthy spell cannot bank an unlimited burst
//!   of retries to pour onto a dependency the moment it fails.
//!
//! ## Clocks that step back
//!
//! Instants are only used to tell seconds apart. An instant up to 64 seconds earlier than the
//! current floor window (two threads whose readings of the clock arrive out of order, a
//! thread that read the clock and was then preempted) is counted in the current window: it
//! never opens a new one, so it never mints floor tokens. Any other instant opens a fresh
//! window, however long the floor went unused: a quiet device that draws on its floor once a
//! month gets it whole each time. Windows are identified by the second modulo 2^22 (about
//! 48.5 days), so the one exception is a reading up to 64 seconds short of an exact multiple
//! of 2^22 seconds after the last floor grant: it is counted in that old second, so for up to
//! 64 seconds the floor grants at most what that second had left (withheld, never
//! over-granted). A reading more than 64 seconds behind the current window is taken for a
//! new second: a clock stepping back that far, again and again, could mint a floor each time
//! (no clock this library reads does; an instant of the caller's own making could).
//! Deposits, and retries paid from them, are unaffected.
//!
//! # The circuit breaker
//!
//! Timeouts are the last line of defence; a breaker is the first: after enough
//! failures it stops spending request budgets on a dependency that is known to be down, and
//! after a cooldown it lets a *bounded* number of probe calls through to see whether the
//! dependency is back.
//!
//! ```text
//!            N consecutive failures, or failure ratio over the window
//!   Closed ──────────────────────────────────────────────────────────▶ Open
//!     ▲                                                                 │ cooldown over
//!     │ every probe succeeded                                           ▼ (first acquire)
//!     └───────────────────────────── HalfOpen ◀─────────────────────────┘
//!                                  (at most `probes` calls) ── a probe fails ──▶ Open
//! ```
//!
//! - **Closed**: every call is let through; outcomes go into a window of the last `window`
//!   outcomes (up to 24). It opens on `consecutive_failures` failures in a row, or when at
//!   least `failure_percent` percent of the window failed once it holds `min_calls` outcomes.
//!   A timeout counts as a failure.
//! - **Open**: every call fails at once with [`Error::CircuitOpen`](crate::Error::CircuitOpen) until the cooldown is over.
//! - **HalfOpen**: at most `probes` calls are let through (failsafe-rs lets every call through
//!   in half-open; this does not). When all of them succeed the breaker closes with a fresh
//!   window; when one fails it opens for another cooldown.
//!
//! ## Permits: matching results to calls
//!
//! [`try_acquire`](crate::breaker::CircuitBreaker::try_acquire) returns a [`Permit`](crate::breaker::Permit) that carries the breaker's
//! *generation* (bumped at every transition) and whether it is a probe. Hand it back with the
//! call's [`BreakerOutcome`](crate::breaker::BreakerOutcome) to [`record`](crate::breaker::CircuitBreaker::record). A result whose generation is over
//! is ignored: a slow call admitted while closed cannot close or reopen a breaker that has
//! moved on, and a probe of an earlier half-open round cannot be counted in a later one.
//!
//! A permit is plain data: it borrows nothing, so it can travel into a `'static` future. It has
//! no `Drop` hook, hence these rules for a permit that never comes back:
//!
//! - a closed breaker's permit costs nothing: its outcome is simply not counted;
//! - a probe permit can be returned at once with [`BreakerOutcome::Abandoned`](crate::breaker::BreakerOutcome::Abandoned) (the call was cancelled
//!   for reasons of the caller's own), which frees its slot for another probe;
//! - a probe permit that is dropped holds its slot until the round's `probe_timeout` has
//!   passed; the next acquire after that starts a new round that keeps the old round's
//!   successes and frees the slots of its unanswered probes (whose results, if they come, are
//!   then ignored). So a lost permit delays recovery by at most `probe_timeout`, never leaks a
//!   slot forever, and probes that come slower than one round still close the breaker. Keep
//!   `probe_timeout` longer than a probe's call timeout: a probe that answers after its round
//!   is over is ignored, a failure as much as a success, while the round's successes count.
//!
//! The core's driver (feature `drive`, with
//! [`Call::with_breaker`](crate::call::Call::with_breaker)) asks for a permit before every
//! attempt and hands every one back: with the attempt's result, or as
//! [`BreakerOutcome::Abandoned`](crate::breaker::BreakerOutcome::Abandoned) for an attempt cancelled because another won, and for one still
//! running when the driver's future is dropped.
//!
//! ## Concurrency
//!
//! The breaker is `Sync` and lock-free: three `AtomicU32`s, each changed by compare-and-swap
//! only. The state word packs the mode, the generation and the half-open round's counts, so a
//! half-open breaker hands out no more than `probes` permits however many threads race for
//! them. The outcome window is a second word tagged with the generation it belongs to, and the
//! end of the cooldown (or of a probe round) a third, tagged the same way; a thread that finds
//! the deadline of the current generation unwritten (its writer was preempted) writes it from
//! its own `now` rather than waiting, so no thread ever blocks another.
//!
//! ## Time
//!
//! Deadlines are kept in whole milliseconds, modulo 2^28 ms (about 3.1 days): the breaker
//! half-opens no earlier than the cooldown after it opened, and at most 1 ms later. Durations
//! are clamped to [`BreakerConfig::MAX_DURATION`](crate::breaker::BreakerConfig::MAX_DURATION). An instant up to about 65 s earlier than the
//! one that started a cooldown (a clock that steps back, or threads whose readings arrive out
//! of order) keeps the breaker open. The price of the modular clock, documented rather than
//! hidden: a breaker left untouched for more than 3.1 days while open can, with a probability
//! of about `(cooldown + 65 s) / 3.1 days`, wait up to that long again before half-opening.
//!
//! ## Code size
//!
//! A breaker's fast paths (a closed breaker's permit, a success into a window of successes)
//! are a load and a compare, inlined where the driver asks. Its slow paths are reached through
//! a table of functions that [`CircuitBreaker::new`](crate::breaker::CircuitBreaker::new) puts in the breaker: a program that makes
//! no breaker (its dependencies have none) never refers to that table, and none of the slow
//! paths' code is linked into it. On a microcontroller that is over a kilobyte of flash.
//!
//! # Latency histograms
//!
//! ## Buckets
//!
//! Latencies are recorded in whole microseconds, **rounded up**, then in whole units of
//! `2^UNIT_BITS` µs, rounded up again (one unit is one microsecond unless `UNIT_BITS` says
//! otherwise). With `SUB_BITS = s` there are `2^s` sub-buckets per power of two (HdrHistogram's
//! layout):
//!
//! - values under `2^(s+1)` units each have a bucket of their own (exact, to the unit);
//! - above that, the range `[2^k, 2^(k+1))` is split into `2^s` equal buckets of width
//!   `2^(k−s)`.
//!
//! A bucket's width is therefore at most `1/2^s` of its lower bound: every value the histogram
//! reports is within **`1/2^s` above** the true one (3.125% for the default `s = 5`, 6.25% for
//! `s = 4`), plus the rounding up to a whole unit. The last of the `N` buckets also holds every
//! value beyond its range ([`Histogram::OVERFLOW`](crate::observe::Histogram::OVERFLOW) and up); a quantile that lands there reports
//! [`Duration::MAX`](core::time::Duration::MAX).
//!
//! ## Size
//!
//! The histogram is `N` atomic counters and nothing else: `4 × N` bytes with `u32` counters,
//! `2 × N` with `u16` ones, no heap. A bucket saturates at its counter's maximum
//! (`u32::MAX`, or 65 535) instead of wrapping.
//!
//! | type | buckets | unit | bytes | reported at most | bound holds below ([`OVERFLOW`](crate::observe::Histogram::OVERFLOW)) |
//! |---|---|---|---|---|---|
//! | [`Histogram`](crate::observe::Histogram) (`Histogram<736, 5>`) | 736 | 1 µs | 2944 | 3.125% high | 132.1 s |
//! | [`SmallHistogram`](crate::observe::SmallHistogram) (`Histogram<384, 4>`) | 384 | 1 µs | 1536 | 6.25% high | 130.0 s |
//! | [`CompactHistogram`](crate::observe::CompactHistogram) (`Histogram<88, 3, 10, u16>`) | 88 | 1.024 ms | 176 | 12.5% high, plus up to 1.024 ms | 7.9 s |
//!
//! With `s` sub-bucket bits, `N = (K − s + 1) · 2^s` buckets reach `2^K` units, the last of
//! them shared with everything above.
//!
//! ## Concurrency
//!
//! [`record`](crate::observe::Histogram::record) takes `&self` and is lock-free wherever compare-and-swap is
//! (thumbv7m, thumbv7em and every server target; on thumbv6m `portable-atomic` makes it as
//! the final binary chooses, see the crate docs): one histogram can sit in a `static` and be
//! fed by every task, thread and interrupt handler. An empty histogram is all zeros, so a
//! `static` one costs no flash for its initial value. Queries read the buckets one at a time,
//! so a query concurrent with recording sees some of the new values and not others, but never
//! a torn count.
//!
//! ## Errs high
//!
//! Every quantile is reported as the **upper bound** of the bucket that holds it, so it is
//! never below the true nearest-rank value of the recorded latencies. A cap derived from it
//! would have timed out at most the intended share of the recorded calls, and a hedge delay
//! from it fires no earlier than intended.
//!
//! A dependency's live histogram is halved every 4 096 latencies, so that older latencies
//! fade. Counts are whole numbers, so halving an odd count keeps or drops its odd half: it
//! is kept in every other bucket and dropped in the others, which ones alternating from one
//! halving to the next. A tail of latencies each alone in its bucket keeps about its share
//! over the halvings, where rounding every count down would forget each at the first one;
//! but at any one halving, the tail's latencies in the buckets that round down that time are
//! dropped, and a quantile held up by them (a sparse tail's p99.9) can read low until the
//! next latencies come.
//!
//! # Passing the deadline on
//!
//! Each request a service sends carries the time left, less a per-hop **allowance** for the
//! network and the next service's queue (5 ms by default, [`wire::Propagation`](crate::wire::Propagation)),
//! in the header the client is set up to write ([`wire::DeadlineHeader`](crate::wire::DeadlineHeader)): `grpc-timeout` for gRPC
//! peers, `connect-timeout-ms` for Connect, `x-deadline-ms` for plain HTTP (the default of
//! deadline-tokio's reqwest `.time_left()`: a gRPC or Connect peer reads none but its own, so
//! name it). Every deadline header the request already carries is written down to the same
//! time, Envoy's `x-envoy-upstream-rq-timeout-ms` among them. [`Propagation::send`](crate::wire::Propagation::send)
//! decides what goes out: the time left less the allowance, or a shorter timeout the request
//! already carries (a tonic `Request::set_timeout(50 ms)` inside a 1 s scope goes out with
//! 50 ms), or nothing at all when nothing is left to send, and then the request is not made.
//!
//! Reading, a server believes every deadline header present and keeps the **earliest**
//! ([`wire::Incoming`](crate::wire::Incoming)), so more headers can only shorten a request's time:
//! a gRPC call through Envoy carries both the caller's `grpc-timeout` and Envoy's own
//! `x-envoy-expected-rq-timeout-ms`, and the server knows its budget whichever is shorter. The
//! budget is clamped to the server's maximum ([`Propagation::with_max`](crate::wire::Propagation::with_max))
//! before it becomes a local deadline.
//!
//! Behind Envoy, the server's own answers are Envoy's to read too. Its 504 (the deadline
//! passed, perhaps with the handler part way through) and 503 (shed before the handler ran)
//! match Envoy's `retry_on: 5xx` and `gateway-error`, as gRPC `DEADLINE_EXCEEDED` and
//! `UNAVAILABLE` match `deadline-exceeded` and `unavailable`: a retry there repeats a request
//! whose handler may have run, with less time than the first attempt had (an `UNAVAILABLE`
//! also comes from a handler's own `?`: a dependency's open breaker, a lost database
//! connection, a dependency's own `UNAVAILABLE`). Let Envoy retry what never reached the
//! service (`reset-before-request`, `connect-failure`, `refused-stream`; plain `reset` also
//! fires once the service has the request), and leave the rest to the caller's
//! client, which knows the deadline and whether the call is idempotent. Envoy's outlier
//! detection counts the same answers as the host failing (`consecutive_5xx`,
//! `consecutive_gateway_failure`, gRPC statuses read as their HTTP ones): a healthy host whose
//! callers send short deadlines can be ejected, so give those thresholds room for them.
//!
//! A failure that comes back from the next service when the time sent has run out (or is
//! within the allowance of it) is the deadline's, not the dependency's: a transport error, an
//! HTTP 408, 502, 503 or 504 (or 499, Connect's `canceled`, to a Connect unary call), a gRPC
//! `CANCELLED`, `UNAVAILABLE` or `DEADLINE_EXCEEDED`
//! ([`Sent::is_deadline_failure`](crate::wire::Sent::is_deadline_failure)). It is reported as
//! `DEADLINE_EXCEEDED` / 504, so a caller three hops up reads the deadline, not a failed
//! dependency. With time left, every answer is relayed as it came. Which response is retried
//! is the core's rule too ([`ResponseHead::classify`](crate::wire::ResponseHead::classify)): a
//! 500, 502, 503, 408 or 429 (gRPC `UNAVAILABLE`, `RESOURCE_EXHAUSTED`, `CANCELLED`; a 499,
//! Connect's `canceled`, to a Connect unary call) is a failure a retry may fix; a 504 (gRPC
//! `DEADLINE_EXCEEDED`) is the attempt's timeout, retried as one; any other 4xx or 5xx ends
//! the call. Of those, the server failing is held against the dependency's breaker (gRPC
//! `INTERNAL`, `UNKNOWN`, `DATA_LOSS` or a status that cannot be read; a 5xx other than 501
//! and 505; a 500 that answers a Connect unary request, Connect's `unknown`, `internal` or
//! `data_loss`, which gRPC's rule does not retry either:
//! [`ResponseHead::for_request`](crate::wire::ResponseHead::for_request));
//! the server's answer is not (a 400, a 404, a 501, a 505, gRPC `NOT_FOUND`...).
//!
//! # Clients that time their own calls
//!
//! The handler's deadline is the request's less the [reply margin](crate::wire::ServerPolicy::reply_margin) (by
//! default [`DEFAULT_REPLY_MARGIN`](crate::wire::ServerPolicy::DEFAULT_REPLY_MARGIN), 5 ms): that much is kept for
//! the answer to travel back. It matters because a client that times its own call gives up
//! at the same instant the server's deadline falls, and whichever acts first decides what
//! the client reads. tonic's `Channel`, for one, times each call whose `grpc-timeout` it
//! sends and fails it with `CANCELLED` (not `DEADLINE_EXCEEDED`) when its timer fires before
//! the answer arrives (grpc-java, grpc-dotnet and grpc-swift report their own timer as
//! `DEADLINE_EXCEEDED`). What a server can do about that:
//!
//! - **It can answer early**: with a margin longer than the answer's trip back (the network,
//!   the server's write, the client's read and scheduling), the server's
//!   `DEADLINE_EXCEEDED` arrives before the client's timer fires. On one machine, loopback,
//!   idle, 5 ms suffices; with twenty calls in flight on a loaded two-core machine, a tonic
//!   client read `CANCELLED` for most calls at 5 ms and for none at 20 ms. Pick the p99 of
//!   your response path under load, plus a few milliseconds.
//! - **It cannot change what the client's own timer reports**: a request that spends longer
//!   than the margin in transit or in a queue arrives with the client's timer already
//!   running out, and that client reads its timer's `CANCELLED`. Only the client side can fix
//!   that: deadline-tokio's `PropagateLayer` under the client reports such a failure as the
//!   deadline's ([`Sent::is_deadline_failure`](crate::wire::Sent::is_deadline_failure)).
//!
//! The margin is part of the budget, like a reserve: what the handler passes on to the next
//! service is the request's time less the margin.
//!
//! # At the deadline instant: one complete answer
//!
//! The instant a deadline passes is where answers go wrong: the handler finishes a millisecond
//! before it, and the server's timer fires a millisecond after. The rules that make every
//! client get one complete answer, with the right code:
//!
//! - **The work is polled before the timer**, as tokio's own `timeout` does: an answer that is
//!   ready is never thrown away for a timer, even at the deadline.
//! - **A response complete by the deadline is delivered whole**, even when its body is read a
//!   moment later (what it may send after the deadline is bounded, so that a stream that
//!   never waits still ends: [`wire::LateFrames`](crate::wire::LateFrames)). A body still streaming at the deadline (server-streaming gRPC, SSE, a
//!   chunked download) is cut there as its protocol says ([`wire::Protocol::cut`](crate::wire::Protocol::cut)):
//!   a gRPC stream ends with `grpc-status: 4` in its trailers, an HTTP one is reset. A stream
//!   of gRPC or Connect messages is cut after a whole message, however its frames split them
//!   ([`wire::Envelopes`](crate::wire::Envelopes)): part of a message before the status is a
//!   broken stream to a client that reads whole messages.
//! - **Every answer the server makes itself is in the request's protocol**
//!   ([`wire::Answer`](crate::wire::Answer)): a gRPC request gets HTTP 200 with `grpc-status`
//!   and `grpc-message` (trailers-only), a Connect request Connect's error (a JSON body, or an
//!   end-of-stream message), any other an HTTP status with a short text. A gRPC client never
//!   reads a deadline as `UNAVAILABLE` or an empty reply.
//!
//! [`wire::ServerPolicy::accept`](crate::wire::ServerPolicy::accept) is the server's one
//! decision per request: its deadline, or the answer to give at once (a malformed header 400 /
//! `INVALID_ARGUMENT`, naming it; a deadline already passed 504 / `DEADLINE_EXCEEDED`; too
//! little time for the [`wire::Admission`](crate::wire::Admission) rule 503 / `UNAVAILABLE`).
//!
//! # Databases
//!
//! A query is the last hop, and a database does not read a deadline header. Two things stand
//! in for it:
//!
//! - **A statement timeout from the time left**
//!   ([`statement::statement_timeout`](crate::statement::statement_timeout)): the query runs
//!   in a transaction with `SET LOCAL statement_timeout` set to the time left less a margin
//!   (5 ms by default), so the server ends the statement itself just before the client's
//!   deadline, and says so with its own error (PostgreSQL's SQLSTATE 57014, reported as the
//!   library's timeout). A query whose timeout would fall under the policy's floor is not
//!   started.
//! - **A cancel when nobody waits any more**: when the query's future is dropped (the request
//!   gave up, its client went away), the query is cancelled on the server. A cancel is
//!   addressed to a connection, not to a query, so it must never reach the *next* query on
//!   that connection: the connection is held until the server has acted on the cancel, and
//!   only then goes back to its pool (or is closed, if the cancel failed). The margin above
//!   makes the race rare in the first place: the server's own timeout answers before the
//!   client's deadline drops the future.
//!
//! deadline-tokio does both for tokio-postgres (a `postgres::Session`, over the connection's
//! own TLS) and sqlx (`sqlx::fetch_all` / `execute`).
//!
//! # Runtimes, and the driver
//!
//! Every decision above is sans-IO: it takes `now` and returns data. What waits is the driver
//! ([`drive`](crate::drive), feature `drive`), which runs a call's attempts, sleeps on a
//! [`Timer`](crate::Timer) and reads that timer's clock after every wake-up. A [`runtime::Runtime`](crate::runtime::Runtime)
//! names a timer, a random source and where the current deadline is kept; a [`Dependency`](crate::Dependency)
//! is fixed to one, and its one-line call ([`Dependency::run`](crate::Dependency::run)) is the same on every runtime:
//! tokio (deadline-tokio), async-std and smol, plain threads (deadline-std), embassy
//! (deadline-embassy), and virtual time for tests ([`virtual_time`](crate::virtual_time)). A
//! runtime the library does not know, or firmware with no executor of its own, uses the
//! driver directly.
//!
//! A dependency made with [`Dependency::deadline_only`](crate::Dependency::deadline_only) never retries nor hedges: its calls
//! make one attempt with its timeout from the time left, and link none of the code for
//! retries, backoff, hedges, the budget or the breaker (a policy with retries or hedges is
//! refused where it is made: they would never be made). On a Cortex-M0 that is the
//! difference between about 4 KiB and 10 KiB of the library's code in the firmware (the
//! project's benchmarks, "Does it fit a microcontroller?").
//!
//! # Observing a dependency
//!
//! Each [`Dependency`](crate::Dependency) counts its calls ([`observe::Counters`](crate::observe::Counters):
//! calls, attempts, retries, hedges, timeouts, skips, budget refusals, breaker refusals, ...)
//! and records their latencies in a histogram ([`Dependency::latency`](crate::Dependency::latency)), whose p95 is the live
//! hedge delay. With feature `tracing` every step of a call is a `tracing` event; with feature
//! `metrics` every call reaches the `metrics` facade, labelled with the dependency's name.
//!
//! # Rules the core keeps
//!
//! - A timeout that is armed or sent never exceeds the time left, minus the reserve and the
//!   per-hop allowance. No attempt, retry or hedge starts when its timeout would be under the
//!   dependency's floor, or when its backoff would end after the deadline.
//! - No time, header or sample panics it (the policy builders refuse a setting that could
//!   never act with a panic, documented on each): all time arithmetic saturates; a clock
//!   that steps back counts as no time passed. A deadline set at arrival ([`Deadline::after`](crate::Deadline::after)) remembers the arrival, so a
//!   reading before it counts as the arrival itself: the time left, and every timeout armed
//!   from it, never exceed the budget.
//! - Fixed capacity (const generics, `heapless`); randomness injected, so every decision is
//!   deterministic in a test. A program injects `deadline_std::Entropy` (re-exported by
//!   deadline-tokio): a generator per thread seeded from the operating system, so requests
//!   that fail together do not retry together. Seeded generators
//!   ([`rng::SplitMix64`](crate::rng::SplitMix64)) are for tests and simulations.
//! - Instants are whole microseconds since the clock's origin, in a `u64`.
//!
//! # Security: what a hostile header can and cannot do
//!
//! A server that reads deadline headers lets its callers choose how long it works for them.
//! What the server layer and the core's codecs guarantee, and what they leave to you:
//!
//! - **A caller cannot buy more than the server's maximum.** Every incoming budget is clamped
//!   to the maximum before it becomes a local deadline (`now + min(budget, max)`, saturating).
//!   `99999999H` (over 11,000 years, the largest value `grpc-timeout` can carry) or
//!   `x-deadline-ms: 18446744073709551615` gets exactly the maximum, so pick a maximum you can
//!   afford to spend on one request; pair it with admission control and a concurrency limit.
//! - **It can ask for little or nothing.** `0m` or `1n` is a deadline that has already passed:
//!   the answer is 504 (gRPC `DEADLINE_EXCEEDED`) at once, without calling the handler; with
//!   [`wire::Admission`](crate::wire::Admission), a budget under the handler's need is shed
//!   (503, `UNAVAILABLE`) the same way. Either costs one parse.
//! - **A malformed value is refused, not guessed at.** Signs, whitespace inside the value, a
//!   missing or unknown unit, a byte that is not a digit, more than 8 digits for
//!   `grpc-timeout` or 20 for `x-deadline-ms`: 400 (gRPC `INVALID_ARGUMENT`), naming the
//!   header and the problem in fixed words, and the handler is not called. Only the first
//!   value of a header is read, whitespace around it removed; every deadline header present
//!   is checked, and the earliest deadline wins.
//! - **No header injection.** The answers are built from fixed text (the header's name and a
//!   fixed reason); nothing the caller sent is echoed back, but the media type and codec of a
//!   gRPC or Connect streaming request in a codec other than protobuf or JSON, which its
//!   client checks the answer against (`ContentType::Request`): up to 32 bytes of a value the
//!   `http` crate validated. Outgoing, the time left is
//!   computed by the library and encoded by the core, which only ever writes ASCII digits and
//!   one unit letter; a timeout already on a request is read as a number and re-encoded,
//!   never copied.
//! - **Bounded memory everywhere.** The codecs decode into and encode from fixed buffers
//!   inside small `Copy` values; the core never allocates. A server's pushback is bounded
//!   too: `grpc-retry-pushback-ms` is at most `i32::MAX` ms, and any pushback or backoff that
//!   would end after the deadline ends the call instead of waiting.
//! - **No panic on any input.** The parsers are fuzzed with these properties as assertions
//!   (no panic; encode then decode round-trips within one unit; a decoded budget never
//!   exceeds the maximum; the server's decision answers 400 or serves), under `cargo fuzz`
//!   and, in the test suite, as property tests on stable.
