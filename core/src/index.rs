//! Ring index arithmetic, in one place (STYLE point 9).
//!
//! Every ring in mlx5 is a power-of-two array addressed by a free-running
//! counter: the slot is `counter & (size - 1)`, the number of completed
//! passes is `counter >> log2(size)`. The owner bit of the basic CQE layout
//! is the parity of the pass, the validity byte of the enhanced layout is
//! the pass count modulo 256. Counters are kept as `u32` and wrap; the
//! hardware sees them truncated to 16 bits (WQ producer counters, WQE index)
//! or 24 bits (CQ consumer index).
#![forbid(unsafe_code)]

use crate::prm::{CQ_CI_MASK, WQ_PI_MASK};

/// The size of a ring: a non-zero power of two, checked at construction.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RingSize {
    log2: u8,
}

impl RingSize {
    /// A ring of `entries` slots; `None` unless `entries` is a power of two
    /// (1 to 2^31).
    pub const fn new(entries: u32) -> Option<Self> {
        if entries == 0 || !entries.is_power_of_two() {
            return None;
        }
        Some(Self {
            log2: entries.trailing_zeros() as u8,
        })
    }

    /// A ring of `2^log2` slots; `None` when `log2 > 31`.
    pub const fn from_log2(log2: u8) -> Option<Self> {
        if log2 > 31 {
            None
        } else {
            Some(Self { log2 })
        }
    }

    /// Number of slots.
    #[inline(always)]
    pub const fn entries(self) -> u32 {
        1 << self.log2
    }

    /// log2 of the number of slots.
    #[inline(always)]
    pub const fn log2(self) -> u8 {
        self.log2
    }

    /// Mask that turns a counter into a slot index.
    #[inline(always)]
    pub const fn mask(self) -> u32 {
        self.entries() - 1
    }

    /// The slot a free-running counter points at.
    #[inline(always)]
    pub const fn slot(self, counter: u32) -> usize {
        (counter & self.mask()) as usize
    }

    /// How many times the counter has gone round the ring.
    #[inline(always)]
    pub const fn pass(self, counter: u32) -> u32 {
        counter >> self.log2
    }

    /// The owner bit software expects at `counter` (basic CQE layout):
    /// the parity of the pass.
    #[inline(always)]
    pub const fn owner_parity(self, counter: u32) -> bool {
        self.pass(counter) & 1 == 1
    }

    /// The validity iteration count software expects at `counter`
    /// (enhanced CQE layout): the pass modulo 256.
    #[inline(always)]
    pub const fn iteration(self, counter: u32) -> u8 {
        self.pass(counter) as u8
    }

    /// Slots from `counter` to the end of the ring (before it wraps to 0).
    #[inline(always)]
    pub const fn until_wrap(self, counter: u32) -> u32 {
        self.entries() - (counter & self.mask())
    }
}

/// Number of entries between a consumer and a producer counter
/// (`producer - consumer`, wrapping).
#[inline(always)]
pub const fn in_flight(producer: u32, consumer: u32) -> u32 {
    producer.wrapping_sub(consumer)
}

/// The 16-bit value a WQ producer counter takes in the doorbell record and in
/// the control segment's WQE index.
#[inline(always)]
pub const fn wq_counter16(counter: u32) -> u16 {
    (counter & WQ_PI_MASK) as u16
}

/// The 24-bit value the CQ consumer index takes in the doorbell record.
#[inline(always)]
pub const fn cq_ci24(counter: u32) -> u32 {
    counter & CQ_CI_MASK
}

/// How far a 16-bit counter the device reported (a CQE's `wqe_counter`)
/// lies behind the free-running `reference` counter, modulo 2^16. A caller
/// checks the distance against the number of entries in flight before
/// trusting the report as an index.
#[inline(always)]
pub const fn behind16(reference: u32, reported: u16) -> u16 {
    (reference as u16).wrapping_sub(reported)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes_must_be_powers_of_two() {
        assert!(RingSize::new(0).is_none());
        assert!(RingSize::new(3).is_none());
        assert!(RingSize::new(96).is_none());
        let r = RingSize::new(64).unwrap();
        assert_eq!((r.entries(), r.log2(), r.mask()), (64, 6, 63));
        assert_eq!(RingSize::new(1 << 31).unwrap().log2(), 31);
        assert!(RingSize::from_log2(32).is_none());
    }

    #[test]
    fn slot_pass_owner_iteration() {
        let r = RingSize::new(8).unwrap();
        assert_eq!(r.slot(13), 5);
        assert_eq!(r.pass(13), 1);
        assert!(!r.owner_parity(7));
        assert!(r.owner_parity(8));
        assert!(!r.owner_parity(16));
        assert_eq!(r.iteration(8 * 256 + 8), 1);
        assert_eq!(r.until_wrap(13), 3);
        assert_eq!(r.until_wrap(16), 8);
    }

    #[test]
    fn counters_wrap() {
        let r = RingSize::new(4).unwrap();
        let c = u32::MAX; // slot 3, then wraps to 0 with the same arithmetic
        assert_eq!(r.slot(c), 3);
        assert_eq!(r.slot(c.wrapping_add(1)), 0);
        assert_eq!(in_flight(2, u32::MAX - 1), 4);
        assert_eq!(wq_counter16(0x1_2345), 0x2345);
        assert_eq!(cq_ci24(0x1234_5678), 0x34_5678);
        assert_eq!(behind16(0x1_0002, 0xfffe), 4);
    }
}
