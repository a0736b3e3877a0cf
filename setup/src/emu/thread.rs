//! The device on its own thread, for throughput runs.
//!
//! The thread steps the device ([`Device::step`]) in a loop: each step
//! observes the UAR pages (SQ doorbells, BlueFlame copies, CQ arms), runs
//! every SQ that was rung up to its doorbell record, delivers over the
//! loopback fabric and writes the CQEs. When steps find nothing to do the
//! thread idles like a poll-mode driver ([`IdlePolicy`]): it spins for a
//! bounded number of empty steps, then yields the CPU on each, and only
//! then parks briefly, so a loaded device answers within one step and an
//! idle one does not burn a CPU. Yielding on every empty step (as this
//! thread once did) hands the CPU to whatever else runs for a scheduler
//! slice between two bursts: under load `mlx5dp perf raw-tx` fell from
//! 5–6.5 Mpps to 0.8 Mpps. (Spinning cannot help past a point: when more
//! threads are runnable than there are cores, the rate is bounded by what
//! the SQ ring holds per scheduler slice.)
//!
//! All memory the core shares with the device is accessed from this thread
//! through [`super::mem`] only (atomic loads and stores, acquire on the
//! doorbell records and UAR words, release on the CQE hand-over byte), so
//! the device side adds no data race. Control calls (create a QP, register
//! memory, inject a fault) reach the device through [`DeviceThread::with`],
//! which takes the same lock the thread holds while it steps.
//!
//! Shutdown is clean: [`DeviceThread::stop`] (or dropping the handle) asks
//! the thread to finish its current step, joins it, and gives the device
//! back.
#![forbid(unsafe_code)]

use super::device::{Device, StepReport};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::thread::JoinHandle;
use std::time::Duration;

/// How the device thread waits when its steps find nothing to do, counted
/// in consecutive empty steps (a step that executes or flushes a send WQE
/// starts the count again).
///
/// The phases follow the poll-mode idiom (DPDK lcores spin with
/// `rte_pause`; `rte_power_pmd_mgmt` pauses, then sleeps, after a number
/// of empty polls): a spin keeps the CPU and answers a doorbell within one
/// step; a yield lets other threads of the machine run but comes back at
/// the scheduler's whim; a park sleeps for `park` (control calls and
/// [`DeviceThread::stop`] cut it short).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct IdlePolicy {
    /// Empty steps that spin (`core::hint::spin_loop`) before the thread
    /// starts yielding.
    pub spin: u32,
    /// Empty steps after the spin phase that yield the CPU
    /// (`std::thread::yield_now`) before the thread starts parking.
    pub yield_: u32,
    /// How long each empty step after that parks the thread
    /// (`std::thread::park_timeout`); [`Duration::ZERO`] never parks (the
    /// thread keeps yielding).
    pub park: Duration,
}

impl IdlePolicy {
    /// The default, for throughput runs: 2^17 empty steps of spinning
    /// (about 13 ms: an empty step costs about 100 ns; this outlasts the
    /// scheduler slice another process takes from a loaded 2-core
    /// machine), 1024 yields, then 50 µs naps (timer slack adds about as
    /// much again). `mlx5dp perf raw-tx --emu-idle frugal|throughput|busy`
    /// compares the policies (figures in `benches/README.md`). Scenario
    /// tests on a loaded machine
    /// run faster with [`Self::FRUGAL`] (the device then takes no CPU from
    /// the test threads).
    pub const THROUGHPUT: IdlePolicy = IdlePolicy {
        spin: 1 << 17,
        yield_: 1024,
        park: Duration::from_micros(50),
    };
    /// Never gives the CPU away (a dedicated core, as a PMD has).
    pub const BUSY: IdlePolicy = IdlePolicy {
        spin: u32::MAX,
        yield_: 0,
        park: Duration::ZERO,
    };
    /// Gives the CPU away at once: yields a little, then naps (a shared
    /// machine where the device mostly idles).
    pub const FRUGAL: IdlePolicy = IdlePolicy {
        spin: 0,
        yield_: 256,
        park: Duration::from_micros(20),
    };

    /// What to do after `idle` consecutive empty steps (1 for the first).
    fn phase(&self, idle: u32) -> Idle {
        if idle <= self.spin {
            Idle::Spin
        } else if idle - self.spin <= self.yield_ || self.park.is_zero() {
            Idle::Yield
        } else {
            Idle::Park
        }
    }
}

impl Default for IdlePolicy {
    fn default() -> Self {
        Self::THROUGHPUT
    }
}

/// One idle step's wait.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Idle {
    Spin,
    Yield,
    Park,
}

/// What the device thread did.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ThreadStats {
    /// Steps taken.
    pub steps: u64,
    /// Send WQEs executed.
    pub wqes: u64,
    /// Send WQEs flushed.
    pub flushed: u64,
    /// Empty steps followed by a spin.
    pub spins: u64,
    /// Empty steps followed by a yield.
    pub yields: u64,
    /// Empty steps followed by a park.
    pub parks: u64,
}

/// A device running on its own thread.
#[derive(Debug)]
pub struct DeviceThread {
    dev: Arc<Mutex<Device>>,
    stop: Arc<AtomicBool>,
    /// Control calls waiting for the lock (see [`run`]).
    callers: Arc<AtomicUsize>,
    handle: Option<JoinHandle<ThreadStats>>,
}

/// Counts one control call in [`DeviceThread::callers`] while it lives
/// (a panic in the call still uncounts it).
struct Caller<'a>(&'a AtomicUsize);

impl<'a> Caller<'a> {
    fn enter(n: &'a AtomicUsize) -> Self {
        // Relaxed: a scheduling hint that guards no data (the mutex does).
        n.fetch_add(1, Ordering::Relaxed);
        Self(n)
    }
}

impl Drop for Caller<'_> {
    fn drop(&mut self) {
        // Relaxed: as in `enter`.
        self.0.fetch_sub(1, Ordering::Relaxed);
    }
}

fn lock(dev: &Mutex<Device>) -> MutexGuard<'_, Device> {
    // A panic on the device thread poisons the lock; the device state is
    // still whatever the last step left, which is what a test wants to see.
    dev.lock().unwrap_or_else(|e| e.into_inner())
}

impl DeviceThread {
    /// Moves `dev` to a new thread that steps it until [`Self::stop`],
    /// idling as its configuration says ([`DeviceConfig::idle`]).
    ///
    /// [`DeviceConfig::idle`]: super::DeviceConfig::idle
    pub fn spawn(dev: Device) -> std::io::Result<Self> {
        let idle = dev.config().idle;
        Self::spawn_with(dev, idle)
    }

    /// Moves `dev` to a new thread that steps it until [`Self::stop`],
    /// idling as `idle` says.
    pub fn spawn_with(dev: Device, idle: IdlePolicy) -> std::io::Result<Self> {
        let dev = Arc::new(Mutex::new(dev));
        let stop = Arc::new(AtomicBool::new(false));
        let callers = Arc::new(AtomicUsize::new(0));
        let (d, s, c) = (Arc::clone(&dev), Arc::clone(&stop), Arc::clone(&callers));
        let handle = std::thread::Builder::new()
            .name("mlx5dp-emu".into())
            .spawn(move || run(&d, &s, &c, idle))?;
        Ok(Self {
            dev,
            stop,
            callers,
            handle: Some(handle),
        })
    }

    /// Runs `f` on the device between two steps (control path), then
    /// wakes the thread if it is parked, so what `f` changed is seen at
    /// once.
    pub fn with<R>(&self, f: impl FnOnce(&mut Device) -> R) -> R {
        let r = {
            let _caller = Caller::enter(&self.callers);
            f(&mut lock(&self.dev))
        };
        self.unpark();
        r
    }

    /// Cuts a park short (an unpark token makes the next park return at
    /// once when the thread is not parked).
    fn unpark(&self) {
        if let Some(h) = &self.handle {
            h.thread().unpark();
        }
    }

    /// Whether the thread is still running.
    pub fn is_running(&self) -> bool {
        self.handle.as_ref().is_some_and(|h| !h.is_finished())
    }

    /// Stops the thread after its current step, joins it and returns the
    /// device with what the thread did. A panic on the device thread is
    /// resumed here.
    pub fn stop(mut self) -> (Device, ThreadStats) {
        let stats = self.join();
        let dev = std::mem::take(&mut *lock(&self.dev));
        (dev, stats)
    }

    fn join(&mut self) -> ThreadStats {
        // Release: pairs with the Acquire load at the top of `run`'s loop.
        self.stop.store(true, Ordering::Release);
        self.unpark();
        match self.handle.take().map(JoinHandle::join) {
            Some(Ok(stats)) => stats,
            Some(Err(panic)) => std::panic::resume_unwind(panic),
            None => ThreadStats::default(),
        }
    }
}

impl Drop for DeviceThread {
    fn drop(&mut self) {
        if self.handle.is_some() {
            // Release: pairs with the Acquire load in `run`.
            self.stop.store(true, Ordering::Release);
            self.unpark();
            if let Some(h) = self.handle.take() {
                let _ = h.join();
            }
        }
    }
}

/// The device thread's loop: step, and after an empty step wait as the
/// policy's phase for the number of empty steps in a row says.
fn run(
    dev: &Mutex<Device>,
    stop: &AtomicBool,
    callers: &AtomicUsize,
    policy: IdlePolicy,
) -> ThreadStats {
    let mut stats = ThreadStats::default();
    let mut idle = 0u32;
    // Acquire: pairs with the Release store in `DeviceThread::join`/`drop`.
    while !stop.load(Ordering::Acquire) {
        // Control calls go first: the std mutex is not fair, and a thread
        // that locks again right after unlocking (a spinning device)
        // starves a caller woken from the lock's wait queue.
        // Relaxed: a hint, as in `Caller::enter`.
        if callers.load(Ordering::Relaxed) > 0 {
            std::thread::yield_now();
            continue;
        }
        // The lock is released before the thread waits, so control calls
        // get in between two steps.
        let rep: StepReport = lock(dev).step();
        stats.steps += 1;
        stats.wqes += u64::from(rep.wqes);
        stats.flushed += u64::from(rep.flushed);
        if rep.wqes > 0 || rep.flushed > 0 {
            idle = 0;
            continue;
        }
        idle = idle.saturating_add(1);
        match policy.phase(idle) {
            Idle::Spin => {
                stats.spins += 1;
                core::hint::spin_loop();
            }
            Idle::Yield => {
                stats.yields += 1;
                std::thread::yield_now();
            }
            Idle::Park => {
                stats.parks += 1;
                std::thread::park_timeout(policy.park);
            }
        }
    }
    stats
}

#[cfg(test)]
mod tests {
    use super::{Device, DeviceThread, Idle, IdlePolicy};
    use std::time::Duration;

    #[test]
    fn idle_phases_spin_then_yield_then_park() {
        let p = IdlePolicy {
            spin: 2,
            yield_: 3,
            park: Duration::from_micros(1),
        };
        let phases: Vec<Idle> = (1..=7).map(|i| p.phase(i)).collect();
        assert_eq!(
            phases,
            [
                Idle::Spin,
                Idle::Spin,
                Idle::Yield,
                Idle::Yield,
                Idle::Yield,
                Idle::Park,
                Idle::Park
            ]
        );
        assert_eq!(IdlePolicy::BUSY.phase(u32::MAX), Idle::Spin);
        let no_park = IdlePolicy {
            park: Duration::ZERO,
            ..p
        };
        assert_eq!(no_park.phase(1000), Idle::Yield);
        assert_eq!(IdlePolicy::FRUGAL.phase(1), Idle::Yield);
    }

    #[test]
    fn control_calls_and_stop_cut_a_park_short() {
        // The thread parks for 10 s after its first empty step: control
        // calls and stop must not wait for that.
        let policy = IdlePolicy {
            spin: 0,
            yield_: 0,
            park: Duration::from_secs(10),
        };
        // A run where the thread got no CPU before `stop` (a loaded
        // machine) parked nowhere and proves nothing: tried again.
        let mut parked = false;
        for _ in 0..20 {
            let t0 = std::time::Instant::now();
            let t = DeviceThread::spawn_with(Device::default(), policy).expect("spawn");
            std::thread::sleep(Duration::from_millis(5));
            for _ in 0..3 {
                let _ = t.with(Device::alloc_pd);
                std::thread::sleep(Duration::from_millis(1));
            }
            let (_, stats) = t.stop();
            assert!(t0.elapsed() < Duration::from_secs(5), "{:?}", t0.elapsed());
            if stats.parks >= 1 {
                parked = true;
                break;
            }
        }
        assert!(parked, "the device thread never parked in 20 runs");
    }

    #[test]
    fn control_calls_get_the_lock_from_a_spinning_device() {
        // A device that never gives the CPU away re-locks right after each
        // step; control calls still get in.
        let t = DeviceThread::spawn_with(Device::default(), IdlePolicy::BUSY).expect("spawn");
        for _ in 0..1000 {
            let _ = t.with(Device::alloc_pd);
        }
        let (_, stats) = t.stop();
        assert_eq!((stats.yields, stats.parks), (0, 0));
    }
}
