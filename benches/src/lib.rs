//! The scenarios behind the Criterion benchmarks (`benches/sq.rs`,
//! `benches/cq.rs`) and the instruction counts (`src/bin/icount.rs`,
//! `icount.sh`): one definition of what is measured, used by both.
//!
//! Every queue lives in ordinary heap memory: the SQ buffer, the 8-byte
//! doorbell record, the 4 KiB UAR page, the CQE ring. The doorbell and
//! BlueFlame "register" writes therefore go to ordinary memory: the cost of
//! a real MMIO write (a posted PCIe write through a write-combining mapping)
//! is excluded, as the performance issue asks; the barriers around it
//! (`sfence` on x86-64) are included.
//!
//! A scenario has two halves:
//!
//! - [`Scenario::measured`] calls one `#[inline(never)]` function named
//!   `measured_*` that does the work under test for `n` units (WQEs posted,
//!   completions polled, minis expanded). Criterion times this call, and
//!   `icount.sh` counts its instructions with callgrind's
//!   `--toggle-collect=*measured_<name>*`: nothing else is counted.
//! - [`Scenario::prepare`] is the device's side, neither timed nor counted:
//!   it retires posted WQEs (the send queue never fills) or writes fresh
//!   CQEs ahead of the consumer.
//!
//! The memory of a scenario is leaked on purpose (a few dozen KiB per
//! scenario, once per process): the queues then borrow it for `'static`.

use std::time::{Duration, Instant};

pub mod cq;
pub mod rq;
pub mod sq;
pub mod tx;

/// One benchmark scenario (see the crate documentation).
pub trait Scenario {
    /// The scenario's name (the Criterion id and the `icount` argument).
    fn name(&self) -> &'static str;
    /// The measured function, as callgrind names it (a `--toggle-collect`
    /// pattern).
    fn symbol(&self) -> &'static str;
    /// What one unit is ("WQE", "completion", "mini").
    fn unit(&self) -> &'static str;
    /// Units per Criterion iteration (32 for a batch of 32 WQEs, the
    /// session length for a session expansion, else 1).
    fn granule(&self) -> u64 {
        1
    }
    /// Untimed: makes room (retires WQEs, writes CQEs); returns how many
    /// units the next [`Scenario::measured`] call may process, a non-zero
    /// multiple of [`Scenario::granule`].
    fn prepare(&mut self) -> u64;
    /// Timed and counted: processes `n` units, a multiple of the granule
    /// and at most what [`Scenario::prepare`] returned.
    fn measured(&mut self, n: u64);
}

/// Runs `units` units of `s` (rounded up to its granule) in as many
/// measured calls as the ring needs; returns the time spent inside the
/// measured calls only.
pub fn drive<S: Scenario + ?Sized>(s: &mut S, units: u64) -> Duration {
    let g = s.granule();
    let mut left = units.div_ceil(g) * g;
    let mut total = Duration::ZERO;
    while left > 0 {
        let room = s.prepare();
        let n = left.min(room) / g * g;
        assert!(n > 0, "{}: no room after prepare", s.name());
        let t0 = Instant::now();
        s.measured(n);
        total += t0.elapsed();
        left -= n;
    }
    total
}

/// Every scenario, in report order.
pub fn all() -> Vec<Box<dyn Scenario>> {
    let mut v = sq::all();
    v.extend(tx::all());
    v.extend(rq::all());
    v.extend(cq::all());
    v
}

/// The scenario called `name`.
pub fn by_name(name: &str) -> Option<Box<dyn Scenario>> {
    all().into_iter().find(|s| s.name() == name)
}

/// Leaks `v` and returns a raw pointer to its first element: memory that
/// only raw-pointer code (the queue, the device model) touches from now on.
fn leak_raw<T>(v: Vec<T>) -> *mut T {
    Box::into_raw(v.into_boxed_slice()).cast::<T>()
}

#[cfg(test)]
mod tests {
    /// Every scenario runs several ring passes without a post or poll
    /// error (the device models and the queues agree).
    #[test]
    fn every_scenario_runs() {
        for mut s in crate::all() {
            let units = 4 * 512 * s.granule();
            crate::drive(&mut *s, units);
        }
    }
}
