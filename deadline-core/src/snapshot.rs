//! [`DependencySnapshot`]: one dependency's counters, latency histogram and policy at one
//! moment, with the advice read from them (feature `advice`; `Serialize` with feature
//! `serde`).

use core::time::Duration;

use crate::advice::Advice;
use crate::counters::CounterSnapshot;
use crate::dependency_policy::Policy;
use crate::latency::DependencyHistogram;

/// One dependency at one moment, from [`Dependency::snapshot`](crate::Dependency::snapshot):
/// its policy, the cap in use (the adaptive one, if it moved), its counters, a copy of its
/// latency histogram and a copy of the histogram of those latencies that are attempts that
/// timed out. A plain value, no heap: read it at leisure, or serialise it (feature `serde`) for an endpoint or a
/// file that `deadline plan --live` reads.
///
/// With feature `serde` it serialises as one object, microseconds as whole numbers and `null`
/// for no value (no bound, nothing stated):
///
/// ```text
/// {"dependency": "pricing", "cap_us": 110000, "configured_cap_us": 110000, "floor_us": 30000,
///  "attempts": 3, "cap_quantile_ppm": 999000, "cap_margin_us": 10000, "slice_us": 250000,
///  "adaptive_cap_us": null,
///  "counters": {"calls": 5120, "successes": 5101, "timeouts": 19, ...},
///  "latency": {"recorded": 5171, "timed_out": 19, "buckets": [[28672, 29183, 12], ...],
///              "timeouts": [[108544, 110591, 19]]},
///  "advice": {"kill_fraction": 0.0037, "timed_out_share": 0.0037, "stated_rate": 0.001,
///             "p50_us": [30719, 30719, 30719], "p99_us": [...],
///             "p999_us": [110591, null, null], "quantile_us": [110591, null, null],
///             "suggested_cap_us": [120591, null, null],
///             "worst_case_us": 360000, "fits": false, "enough": true,
///             "kills_too_many": true}}
/// ```
///
/// `counters` has one field per [`CounterEvent::name`](crate::observe::CounterEvent::name);
/// each bucket is `[low_us, high_us, count]`, the smallest and largest latency it holds
/// (`null` for the last bucket, which holds everything beyond); `timeouts` are the buckets
/// of the attempts that timed out, each at its timeout, `timed_out` of them in all (a
/// bucket's timeouts are among its `count`); each quantile is
/// `[at_least_us, estimate_us, at_most_us]` ([`Reading`](crate::advice::Reading)); `advice`
/// is `null` while nothing is recorded.
#[derive(Clone, Debug)]
pub struct DependencySnapshot<'n> {
    policy: Policy<'n>,
    cap: Duration,
    counters: CounterSnapshot,
    latency: DependencyHistogram,
    timeouts: DependencyHistogram,
}

impl<'n> DependencySnapshot<'n> {
    /// A snapshot of a dependency called as `policy` with `cap` in use: its `counters`, a copy
    /// of its `latency` histogram and of its `timeouts`, the latencies among them that are
    /// attempts that timed out. A bucket's timeouts are kept to at most its latencies (copies
    /// taken while latencies are recorded may hold a few more).
    pub(crate) fn new(
        policy: Policy<'n>,
        cap: Duration,
        counters: CounterSnapshot,
        (latency, timeouts): (DependencyHistogram, DependencyHistogram),
    ) -> Self {
        let kept = DependencyHistogram::with_layout();
        {
            let mut buckets = latency.buckets().peekable();
            for t in timeouts.buckets() {
                while buckets.next_if(|b| b.low < t.low).is_some() {}
                if let Some(b) = buckets.next_if(|b| b.low == t.low) {
                    kept.record_n(t.low, t.count.min(b.count));
                }
            }
        }
        DependencySnapshot {
            policy,
            cap,
            counters,
            latency,
            timeouts: kept,
        }
    }

    /// The dependency's name.
    #[must_use]
    pub const fn name(&self) -> &'n str {
        self.policy.name
    }

    /// Its policy.
    #[must_use]
    pub const fn policy(&self) -> &Policy<'n> {
        &self.policy
    }

    /// The cap in use: the policy's, or the adaptive cap where it moved.
    #[must_use]
    pub const fn cap(&self) -> Duration {
        self.cap
    }

    /// Its counters.
    #[must_use]
    pub const fn counters(&self) -> &CounterSnapshot {
        &self.counters
    }

    /// Its latency histogram, as it was.
    #[must_use]
    pub const fn latency(&self) -> &DependencyHistogram {
        &self.latency
    }

    /// The histogram's latencies that are attempts that timed out, each at its timeout, as
    /// they were: in each bucket, at most its latencies.
    #[must_use]
    pub const fn timeouts(&self) -> &DependencyHistogram {
        &self.timeouts
    }

    /// The advice for the cap in use; `None` while nothing is recorded.
    #[must_use]
    pub fn advice(&self) -> Option<Advice> {
        Advice::assess(
            self.latency.buckets(),
            self.timeouts.buckets(),
            &self.policy,
            self.cap,
        )
    }
}

#[cfg(feature = "serde")]
mod json {
    //! The snapshot's JSON shape (any serde format), written with serde's own serializers.

    use core::time::Duration;

    use serde::ser::{Serialize, SerializeMap, SerializeSeq, SerializeStruct, Serializer};

    use super::DependencySnapshot;
    use crate::advice::{Advice, Reading};
    use crate::counters::{CounterEvent, CounterSnapshot};
    use crate::latency::DependencyHistogram;
    use crate::time::duration_to_micros;

    /// Whole microseconds, `None` for [`Duration::MAX`] (no bound).
    fn us(d: Duration) -> Option<u64> {
        (d != Duration::MAX).then(|| duration_to_micros(d))
    }

    /// The counters, one field per event.
    struct Counters<'a>(&'a CounterSnapshot);

    impl Serialize for Counters<'_> {
        fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
            let mut map = s.serialize_map(Some(CounterEvent::ALL.len()))?;
            for event in CounterEvent::ALL {
                map.serialize_entry(event.name(), &self.0.get(event))?;
            }
            map.end()
        }
    }

    /// The non-empty buckets, each `[low_us, high_us, count]`.
    struct Buckets<'a>(&'a DependencyHistogram);

    impl Serialize for Buckets<'_> {
        fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
            let mut seq = s.serialize_seq(None)?;
            for b in self.0.buckets() {
                seq.serialize_element(&(us(b.low), us(b.high), b.count))?;
            }
            seq.end()
        }
    }

    /// The histogram: its count, its timed-out attempts, its buckets, theirs.
    struct Latency<'a>(&'a DependencySnapshot<'a>);

    impl Serialize for Latency<'_> {
        fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
            let mut st = s.serialize_struct("Latency", 4)?;
            st.serialize_field("recorded", &self.0.latency.count())?;
            st.serialize_field("timed_out", &self.0.timeouts.count())?;
            st.serialize_field("buckets", &Buckets(&self.0.latency))?;
            st.serialize_field("timeouts", &Buckets(&self.0.timeouts))?;
            st.end()
        }
    }

    /// A quantile's lower bound, estimate and upper bound.
    fn bounds(r: &Reading) -> (Option<u64>, Option<u64>, Option<u64>) {
        (
            us(r.at_least),
            r.estimate.and_then(us),
            r.at_most.and_then(us),
        )
    }

    /// The advice's figures.
    struct Figures<'a>(&'a Advice);

    impl Serialize for Figures<'_> {
        fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
            let a = self.0;
            let mut st = s.serialize_struct("Advice", 12)?;
            st.serialize_field("kill_fraction", &a.kill_fraction)?;
            st.serialize_field("timed_out_share", &a.timed_out_share)?;
            st.serialize_field("stated_rate", &a.stated_rate)?;
            st.serialize_field("p50_us", &bounds(&a.p50))?;
            st.serialize_field("p99_us", &bounds(&a.p99))?;
            st.serialize_field("p999_us", &bounds(&a.p999))?;
            st.serialize_field("quantile_us", &bounds(&a.quantile))?;
            st.serialize_field("suggested_cap_us", &bounds(&a.suggested_cap))?;
            st.serialize_field("worst_case_us", &us(a.worst_case))?;
            st.serialize_field("fits", &a.fits)?;
            st.serialize_field("enough", &a.enough)?;
            st.serialize_field("kills_too_many", &a.kills_too_many)?;
            st.end()
        }
    }

    impl Serialize for DependencySnapshot<'_> {
        fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
            let p = &self.policy;
            let settings = p.advice();
            let adaptive = settings.adaptive_cap().map(|(min, max)| (us(min), us(max)));
            let mut st = s.serialize_struct("DependencySnapshot", 12)?;
            st.serialize_field("dependency", p.name())?;
            st.serialize_field("cap_us", &us(self.cap))?;
            st.serialize_field("configured_cap_us", &us(p.cap()))?;
            st.serialize_field("floor_us", &us(p.floor()))?;
            st.serialize_field("attempts", &p.retry().attempts())?;
            st.serialize_field("cap_quantile_ppm", &settings.quantile().as_ppm())?;
            st.serialize_field("cap_margin_us", &us(settings.margin()))?;
            st.serialize_field("slice_us", &settings.slice().and_then(us))?;
            st.serialize_field("adaptive_cap_us", &adaptive)?;
            st.serialize_field("counters", &Counters(&self.counters))?;
            st.serialize_field("latency", &Latency(self))?;
            st.serialize_field("advice", &self.advice().as_ref().map(Figures))?;
            st.end()
        }
    }
}
