//! How long a test runs, and the progress bar that shows it.
//!
//! A run ends after a number of iterations (`--iters`) or after a wall
//! time (`--duration`). The bar is drawn on stderr only when stderr is a
//! terminal ([`std::io::IsTerminal`]) and only once the run has lasted a
//! second, so short runs, pipes and tests never see it; stdout carries the
//! report alone.
#![forbid(unsafe_code)]

use std::io::{IsTerminal, Write};
use std::time::{Duration, Instant};

/// When a run ends.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Goal {
    /// After this many iterations (messages, round trips, packets).
    Iters(u64),
    /// After this much wall time.
    Time(Duration),
}

/// A run in progress: its goal, its clock and its progress bar.
#[derive(Debug)]
pub struct Run {
    goal: Goal,
    start: Instant,
    bar: Option<Bar>,
    /// Iterations between two clock reads in [`Run::done`] (time goals).
    check_every: u64,
    next_check: u64,
    over: bool,
}

#[derive(Debug)]
struct Bar {
    label: String,
    next_draw: Duration,
    drawn: bool,
}

/// Redraw period of the bar.
const DRAW_EVERY: Duration = Duration::from_millis(100);
/// The bar appears only on runs longer than this.
const SHOW_AFTER: Duration = Duration::from_secs(1);

impl Run {
    /// Starts the clock. `label` names the test on the bar.
    pub fn start(goal: Goal, label: &str) -> Self {
        let bar = std::io::stderr().is_terminal().then(|| Bar {
            label: label.to_string(),
            next_draw: SHOW_AFTER,
            drawn: false,
        });
        Self {
            goal,
            start: Instant::now(),
            bar,
            check_every: 64,
            next_check: 0,
            over: false,
        }
    }

    /// Time since the start.
    pub fn elapsed(&self) -> Duration {
        self.start.elapsed()
    }

    /// Whether the run is over after `n` iterations; reads the clock only
    /// every so often (and draws the bar then).
    pub fn done(&mut self, n: u64) -> bool {
        if self.over {
            return true;
        }
        if let Goal::Iters(total) = self.goal {
            if n >= total {
                self.over = true;
                return true;
            }
            if self.bar.is_none() {
                return false;
            }
        }
        if n < self.next_check {
            return false;
        }
        self.next_check = n + self.check_every;
        let t = self.elapsed();
        if let Goal::Time(d) = self.goal {
            if t >= d {
                self.over = true;
                return true;
            }
        }
        self.draw(n, t);
        false
    }

    /// How many iterations may still start (all of them for a time goal).
    pub fn remaining(&self, n: u64) -> u64 {
        match self.goal {
            Goal::Iters(total) => total.saturating_sub(n),
            Goal::Time(_) => u64::MAX,
        }
    }

    fn draw(&mut self, n: u64, t: Duration) {
        let goal = self.goal;
        let Some(bar) = self.bar.as_mut() else {
            return;
        };
        if t < bar.next_draw {
            return;
        }
        bar.next_draw = t + DRAW_EVERY;
        let frac = match goal {
            Goal::Iters(total) => n as f64 / total.max(1) as f64,
            Goal::Time(d) => t.as_secs_f64() / d.as_secs_f64().max(1e-9),
        }
        .clamp(0.0, 1.0);
        let width = 30;
        let full = (frac * width as f64) as usize;
        let line = format!(
            "\r{} [{}{}] {:5.1}% {:.1}s",
            bar.label,
            "#".repeat(full),
            " ".repeat(width - full),
            frac * 100.0,
            t.as_secs_f64()
        );
        let mut e = std::io::stderr().lock();
        let _ = e.write_all(line.as_bytes());
        let _ = e.flush();
        bar.drawn = true;
    }

    /// Stops the clock, clears the bar and returns the wall time.
    pub fn finish(self) -> Duration {
        let t = self.elapsed();
        if let Some(bar) = &self.bar {
            if bar.drawn {
                let mut e = std::io::stderr().lock();
                let _ = write!(e, "\r{}\r", " ".repeat(bar.label.len() + 50));
                let _ = e.flush();
            }
        }
        t
    }
}
