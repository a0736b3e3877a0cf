//! Latency percentiles and histograms, bandwidth and rate figures.
#![forbid(unsafe_code)]

use std::time::Duration;

/// Latency figures of a run, in nanoseconds.
#[derive(Clone, Debug, PartialEq)]
pub struct Latency {
    /// Samples.
    pub samples: usize,
    /// Smallest.
    pub min: u64,
    /// Median (50th percentile).
    pub median: u64,
    /// Mean.
    pub avg: f64,
    /// Standard deviation.
    pub stdev: f64,
    /// 99th percentile.
    pub p99: u64,
    /// 99.9th percentile.
    pub p999: u64,
    /// Largest.
    pub max: u64,
    /// Histogram buckets.
    pub histogram: Vec<Bucket>,
}

/// One histogram bucket: samples in `[lo, hi)` nanoseconds.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Bucket {
    /// Lower bound, ns (inclusive).
    pub lo: u64,
    /// Upper bound, ns (exclusive).
    pub hi: u64,
    /// Samples in the bucket.
    pub count: u64,
}

/// The nearest-rank percentile `p` (0..=1) of sorted samples.
pub fn percentile(sorted: &[u64], p: f64) -> u64 {
    if sorted.is_empty() {
        return 0;
    }
    let rank = (p * sorted.len() as f64).ceil() as usize;
    sorted[rank.clamp(1, sorted.len()) - 1]
}

/// Histogram bucket bounds: four buckets per power of two (each 2^(1/4)
/// wider than the last, rounded to whole nanoseconds).
fn bucket_of(ns: u64) -> u32 {
    if ns < 4 {
        return ns as u32;
    }
    let exp = 63 - ns.leading_zeros();
    // The two bits below the leading one pick the quarter.
    let quarter = ((ns >> (exp - 2)) & 3) as u32;
    exp * 4 + quarter - 4
}

fn bucket_lo(b: u32) -> u64 {
    if b < 4 {
        return u64::from(b);
    }
    let exp = (b + 4) / 4;
    let quarter = u64::from((b + 4) % 4);
    (4 + quarter) << (exp - 2)
}

impl Latency {
    /// Figures of `samples` (ns); `None` without samples.
    pub fn from_samples(mut samples: Vec<u64>) -> Option<Self> {
        if samples.is_empty() {
            return None;
        }
        samples.sort_unstable();
        let n = samples.len() as f64;
        let avg = samples.iter().map(|&s| s as f64).sum::<f64>() / n;
        let var = samples
            .iter()
            .map(|&s| (s as f64 - avg) * (s as f64 - avg))
            .sum::<f64>()
            / n;
        let mut histogram: Vec<Bucket> = Vec::new();
        for &s in &samples {
            let b = bucket_of(s);
            match histogram.last_mut() {
                Some(last) if last.lo == bucket_lo(b) => last.count += 1,
                _ => histogram.push(Bucket {
                    lo: bucket_lo(b),
                    hi: bucket_lo(b + 1),
                    count: 1,
                }),
            }
        }
        Some(Self {
            samples: samples.len(),
            min: samples[0],
            median: percentile(&samples, 0.5),
            avg,
            stdev: var.sqrt(),
            p99: percentile(&samples, 0.99),
            p999: percentile(&samples, 0.999),
            max: samples[samples.len() - 1],
            histogram,
        })
    }
}

/// Bandwidth figures of a run.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Throughput {
    /// Messages (or packets) completed.
    pub messages: u64,
    /// Bytes per message.
    pub bytes: u64,
    /// Wall time.
    pub elapsed: Duration,
    /// Highest rate over one sampling interval, messages per second.
    pub peak_rate: f64,
}

impl Throughput {
    /// Messages per second over the whole run.
    pub fn rate(&self) -> f64 {
        let s = self.elapsed.as_secs_f64();
        if s > 0.0 {
            self.messages as f64 / s
        } else {
            0.0
        }
    }

    /// Average bandwidth, MB/s (10^6 bytes per second).
    pub fn avg_mb_s(&self) -> f64 {
        self.rate() * self.bytes as f64 / 1e6
    }

    /// Peak bandwidth, MB/s.
    pub fn peak_mb_s(&self) -> f64 {
        self.peak_rate.max(self.rate()) * self.bytes as f64 / 1e6
    }
}

/// Samples the completion count every few milliseconds to find the peak rate.
#[derive(Clone, Copy, Debug)]
pub struct PeakMeter {
    last_t: Duration,
    last_n: u64,
    peak: f64,
}

/// The sampling interval of [`PeakMeter`].
const PEAK_INTERVAL: Duration = Duration::from_millis(5);

impl Default for PeakMeter {
    fn default() -> Self {
        Self::new()
    }
}

impl PeakMeter {
    /// A meter starting at time 0 with nothing done.
    pub const fn new() -> Self {
        Self {
            last_t: Duration::ZERO,
            last_n: 0,
            peak: 0.0,
        }
    }

    /// Records that `n` messages were done at `t` since the start.
    pub fn sample(&mut self, t: Duration, n: u64) {
        let dt = t.saturating_sub(self.last_t);
        if dt >= PEAK_INTERVAL {
            let rate = (n - self.last_n.min(n)) as f64 / dt.as_secs_f64();
            self.peak = self.peak.max(rate);
            self.last_t = t;
            self.last_n = n;
        }
    }

    /// The highest rate sampled, messages per second (0 if the run was
    /// shorter than one interval).
    pub fn peak(&self) -> f64 {
        self.peak
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn percentiles_are_nearest_rank() {
        let v: Vec<u64> = (1..=1000).collect();
        assert_eq!(percentile(&v, 0.5), 500);
        assert_eq!(percentile(&v, 0.99), 990);
        assert_eq!(percentile(&v, 0.999), 999);
        assert_eq!(percentile(&v, 1.0), 1000);
        assert_eq!(percentile(&[7], 0.999), 7);
    }

    #[test]
    fn histogram_covers_every_sample_in_order() {
        let v: Vec<u64> = (0..5000).map(|i| (i * 7919) % 100_000).collect();
        let l = Latency::from_samples(v).expect("samples");
        assert_eq!(l.histogram.iter().map(|b| b.count).sum::<u64>(), 5000);
        for w in l.histogram.windows(2) {
            assert!(w[0].hi <= w[1].lo);
        }
        for b in &l.histogram {
            assert!(b.lo < b.hi);
        }
        assert!(l.min <= l.median && l.median <= l.p99 && l.p99 <= l.p999 && l.p999 <= l.max);
    }

    #[test]
    fn bucket_bounds_are_monotonic() {
        for ns in [0u64, 1, 3, 4, 5, 7, 8, 1000, 1023, 1024, 1 << 40] {
            let b = bucket_of(ns);
            assert!(bucket_lo(b) <= ns && ns < bucket_lo(b + 1), "{ns}");
        }
    }
}
