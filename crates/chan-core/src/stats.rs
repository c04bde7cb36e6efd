//! What a channel counts: the figures the paper's analysis needs.

use crate::mode::ModeKind;
use serde::ser::{SerializeStruct, Serializer};
use serde::{Deserialize, Deserializer, Serialize};

/// Exact counts for values `0..BUCKETS-1`, one overflow bucket above, and a count of negative
/// values (staleness is negative when the sender is ahead of the receiver); count, sum, min
/// and max over every value. Allocated once, at channel creation: recording never allocates.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Histogram {
    counts: Box<[u64]>,
    negative: u64,
    count: u64,
    sum: i128,
    min: i64,
    max: i64,
}

impl Histogram {
    /// Values at or above this land in the overflow bucket (still counted in sum/min/max).
    pub const BUCKETS: usize = 257;

    /// An empty histogram.
    pub fn new() -> Self {
        Histogram {
            counts: vec![0; Self::BUCKETS].into_boxed_slice(),
            negative: 0,
            count: 0,
            sum: 0,
            min: i64::MAX,
            max: i64::MIN,
        }
    }

    /// Record one value. A negative value is counted apart (and in sum/min/max), in no bucket.
    #[inline]
    pub fn record(&mut self, v: i64) {
        if v < 0 {
            self.negative += 1;
        } else {
            let b = (v as u64).min(Self::BUCKETS as u64 - 1) as usize;
            self.counts[b] += 1;
        }
        self.count += 1;
        self.sum += v as i128;
        self.min = self.min.min(v);
        self.max = self.max.max(v);
    }

    /// Number of negative values recorded.
    pub fn negative(&self) -> u64 {
        self.negative
    }

    /// Number of values recorded.
    pub fn count(&self) -> u64 {
        self.count
    }

    /// Sum of the values recorded.
    pub fn sum(&self) -> i128 {
        self.sum
    }

    /// Mean, or `None` when empty.
    pub fn mean(&self) -> Option<f64> {
        (self.count > 0).then(|| self.sum as f64 / self.count as f64)
    }

    /// Smallest value, or `None` when empty.
    pub fn min(&self) -> Option<i64> {
        (self.count > 0).then_some(self.min)
    }

    /// Largest value, or `None` when empty.
    pub fn max(&self) -> Option<i64> {
        (self.count > 0).then_some(self.max)
    }

    /// How many values fell in bucket `v` (exact for `v < BUCKETS - 1`).
    pub fn bucket(&self, v: usize) -> u64 {
        self.counts.get(v).copied().unwrap_or(0)
    }

    /// `(value, count)` for every non-empty bucket.
    pub fn nonzero(&self) -> impl Iterator<Item = (usize, u64)> + '_ {
        self.counts
            .iter()
            .enumerate()
            .filter(|(_, &c)| c > 0)
            .map(|(v, &c)| (v, c))
    }

    /// Add another histogram's values into this one.
    pub fn merge(&mut self, other: &Histogram) {
        for (a, b) in self.counts.iter_mut().zip(other.counts.iter()) {
            *a += b;
        }
        self.negative += other.negative;
        self.count += other.count;
        self.sum += other.sum;
        self.min = self.min.min(other.min);
        self.max = self.max.max(other.max);
    }
}

impl Default for Histogram {
    fn default() -> Self {
        Self::new()
    }
}

impl Serialize for Histogram {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let mut st = s.serialize_struct("Histogram", 6)?;
        st.serialize_field("count", &self.count)?;
        st.serialize_field("negative", &self.negative)?;
        st.serialize_field("mean", &self.mean())?;
        st.serialize_field("min", &self.min())?;
        st.serialize_field("max", &self.max())?;
        let buckets: Vec<(usize, u64)> = self.nonzero().collect();
        st.serialize_field("buckets", &buckets)?;
        st.end()
    }
}

/// A histogram as its JSON form says it (what [`Histogram`]'s `Serialize` writes).
#[derive(Deserialize)]
#[serde(rename = "Histogram")]
struct HistogramForm {
    count: u64,
    negative: u64,
    mean: Option<f64>,
    min: Option<i64>,
    max: Option<i64>,
    buckets: Vec<(usize, u64)>,
}

/// Reads back what `Serialize` wrote. The sum is not written: it is recovered as
/// `mean × count` rounded, exact while it is below 2⁵³ in magnitude (far beyond any run's).
impl<'de> Deserialize<'de> for Histogram {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        use serde::de::Error;
        let f = HistogramForm::deserialize(d)?;
        let mut h = Histogram::new();
        for (v, c) in f.buckets {
            let slot = h.counts.get_mut(v).ok_or_else(|| {
                D::Error::custom(format!(
                    "histogram bucket {v} beyond the last ({})",
                    Self::BUCKETS - 1
                ))
            })?;
            *slot += c;
        }
        h.negative = f.negative;
        h.count = f.count;
        if f.count > 0 {
            let (Some(mean), Some(min), Some(max)) = (f.mean, f.min, f.max) else {
                return Err(D::Error::custom(
                    "a non-empty histogram needs its mean, min and max",
                ));
            };
            h.sum = (mean * f.count as f64).round() as i128;
            h.min = min;
            h.max = max;
        }
        Ok(h)
    }
}

/// Statistics of one end of a channel, returned by [`crate::Channel::close`] and readable any
/// time with [`crate::Channel::stats`].
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ChannelStats {
    /// Sync, Async or Racy.
    pub mode: ModeKind,
    /// The rank at the other end.
    pub peer: usize,
    /// The channel's tag.
    pub tag: u32,
    /// Message length in f64.
    pub len: usize,
    /// R.
    pub max_in_flight: usize,
    /// Messages sent.
    pub sent: u64,
    /// `try_send` calls that sent nothing because all R slots were busy.
    pub skipped: u64,
    /// Messages that arrived (Racy: sends that completed into the view).
    pub received: u64,
    /// Messages that arrived but were discarded unread because a newer one arrived (Async).
    pub superseded: u64,
    /// Messages that arrived but were still unread when the channel closed.
    pub unread_at_close: u64,
    /// Messages the peer sent in all, as it announced at close (0 until closed). After a
    /// close, `received == peer_sent`: every message was received or drained.
    pub peer_sent: u64,
    /// How many new messages each receive found (Async, Racy: each receive that found at
    /// least one; Sync: always 1).
    pub batches: Histogram,
    /// Receiver's iteration minus the sender's stamp, at each receive that delivered data.
    pub staleness: Histogram,
}

impl ChannelStats {
    pub(crate) fn new(mode: ModeKind, peer: usize, tag: u32, len: usize, r: usize) -> Self {
        ChannelStats {
            mode,
            peer,
            tag,
            len,
            max_in_flight: r,
            sent: 0,
            skipped: 0,
            received: 0,
            superseded: 0,
            unread_at_close: 0,
            peer_sent: 0,
            batches: Histogram::new(),
            staleness: Histogram::new(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn histogram_counts_and_overflow() {
        let mut h = Histogram::new();
        for v in [1, 1, 5, 1000, -3] {
            h.record(v);
        }
        assert_eq!(h.count(), 5);
        assert_eq!(h.bucket(1), 2);
        assert_eq!(h.bucket(5), 1);
        assert_eq!(h.bucket(Histogram::BUCKETS - 1), 1);
        assert_eq!(h.bucket(0), 0);
        assert_eq!(h.negative(), 1);
        assert_eq!((h.min(), h.max()), (Some(-3), Some(1000)));
        assert_eq!(h.mean(), Some(1004.0 / 5.0));
        let mut g = Histogram::new();
        g.record(2);
        g.merge(&h);
        assert_eq!(g.count(), 6);
        assert_eq!(g.bucket(2), 1);
        assert_eq!(g.min(), Some(-3));
    }
}
