//! The device on its own thread, for throughput runs.
//!
//! The thread steps the device ([`Device::step`]) in a loop: each step
//! observes the UAR pages (SQ doorbells, BlueFlame copies, CQ arms), runs
//! every SQ that was rung up to its doorbell record, delivers over the
//! loopback fabric and writes the CQEs. When a step finds nothing to do the
//! thread yields, and after a while of idling it naps briefly, so an idle
//! device does not burn a CPU.
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
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::thread::JoinHandle;
use std::time::Duration;

/// What the device thread did.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ThreadStats {
    /// Steps taken.
    pub steps: u64,
    /// Send WQEs executed.
    pub wqes: u64,
    /// Send WQEs flushed.
    pub flushed: u64,
}

/// Idle steps before the thread starts napping between steps.
const SPIN_STEPS: u32 = 256;
/// The nap of an idle device thread.
const NAP: Duration = Duration::from_micros(20);

/// A device running on its own thread.
#[derive(Debug)]
pub struct DeviceThread {
    dev: Arc<Mutex<Device>>,
    stop: Arc<AtomicBool>,
    handle: Option<JoinHandle<ThreadStats>>,
}

fn lock(dev: &Mutex<Device>) -> MutexGuard<'_, Device> {
    // A panic on the device thread poisons the lock; the device state is
    // still whatever the last step left, which is what a test wants to see.
    dev.lock().unwrap_or_else(|e| e.into_inner())
}

impl DeviceThread {
    /// Moves `dev` to a new thread that steps it until [`Self::stop`].
    pub fn spawn(dev: Device) -> std::io::Result<Self> {
        let dev = Arc::new(Mutex::new(dev));
        let stop = Arc::new(AtomicBool::new(false));
        let (d, s) = (Arc::clone(&dev), Arc::clone(&stop));
        let handle = std::thread::Builder::new()
            .name("mlx5dp-emu".into())
            .spawn(move || run(&d, &s))?;
        Ok(Self {
            dev,
            stop,
            handle: Some(handle),
        })
    }

    /// Runs `f` on the device between two steps (control path).
    pub fn with<R>(&self, f: impl FnOnce(&mut Device) -> R) -> R {
        f(&mut lock(&self.dev))
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
            if let Some(h) = self.handle.take() {
                let _ = h.join();
            }
        }
    }
}

/// The device thread's loop.
fn run(dev: &Mutex<Device>, stop: &AtomicBool) -> ThreadStats {
    let mut stats = ThreadStats::default();
    let mut idle = 0u32;
    // Acquire: pairs with the Release store in `DeviceThread::join`/`drop`.
    while !stop.load(Ordering::Acquire) {
        let rep: StepReport = lock(dev).step();
        stats.steps += 1;
        stats.wqes += u64::from(rep.wqes);
        stats.flushed += u64::from(rep.flushed);
        if rep.wqes > 0 || rep.flushed > 0 {
            idle = 0;
        } else if idle < SPIN_STEPS {
            idle += 1;
            std::thread::yield_now();
        } else {
            std::thread::sleep(NAP);
        }
    }
    stats
}
