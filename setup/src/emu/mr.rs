//! Protection domains and the memory-region table: keys, bounds, access
//! rights, invalidation.
//!
//! Keys look like mlx5 mkeys: `index << 8 | variant`, where the variant byte
//! changes every time an index is reused, so a stale key is caught. The
//! variant is never 0, so no key equals `MLX5_INVALID_LKEY` (0x100). The
//! lkey and the rkey of a region are the same mkey, as on mlx5.
#![forbid(unsafe_code)]

use super::mem::{DmaBlock, MemError, Region, UserRegion};
use super::{Access, EmuError, Pdn};
use std::collections::BTreeMap;
use std::sync::Arc;

/// The memory behind a memory region.
#[derive(Debug)]
pub enum MrMemory {
    /// A device-allocated buffer (shared with whoever holds the `Arc`).
    Block(Arc<DmaBlock>),
    /// The user's own memory.
    User(UserRegion),
}

impl MrMemory {
    /// The region the device accesses.
    pub fn region(&self) -> &Region {
        match self {
            MrMemory::Block(b) => b,
            MrMemory::User(u) => u,
        }
    }
}

/// A registered memory region.
#[derive(Debug)]
pub struct Mr {
    /// The mkey (lkey = rkey).
    pub key: u32,
    /// Protection domain.
    pub pd: Pdn,
    /// First I/O virtual address (the process address of the memory).
    pub addr: u64,
    /// Length in bytes.
    pub len: u64,
    /// Access rights.
    pub access: Access,
    /// False once the key was invalidated (send with invalidate, local invalidate).
    pub valid: bool,
    /// The memory.
    pub mem: MrMemory,
}

/// Which check on a key failed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum KeyFault {
    /// No region has this key (unknown index, stale variant, invalidated).
    BadKey,
    /// The region belongs to another protection domain.
    PdMismatch,
    /// The range leaves the region (or wraps the address space).
    Bounds,
    /// The region lacks the access right.
    Access,
    /// The address is not aligned as the operation requires.
    Misaligned,
}

/// The memory-region table of one device.
#[derive(Debug, Default)]
pub struct MrTable {
    by_index: BTreeMap<u32, Mr>,
    next_index: u32,
    variant: u8,
}

impl MrTable {
    /// Registers `mem` as `[addr, addr + len)` with `access`. The IB rule
    /// that remote write and remote atomic need local write is enforced
    /// (`ibv_reg_mr` fails with `EINVAL` otherwise).
    pub fn register(&mut self, pd: Pdn, mem: MrMemory, access: Access) -> Result<u32, EmuError> {
        let needs_local = Access::REMOTE_WRITE | Access::REMOTE_ATOMIC;
        if access.intersects(needs_local) && !access.contains(Access::LOCAL_WRITE) {
            return Err(EmuError::invalid(
                "reg_mr",
                "remote write/atomic without local write",
            ));
        }
        let region = mem.region();
        let (addr, len) = (region.addr(), region.len() as u64);
        self.next_index = self.next_index.wrapping_add(1).max(1) & 0x00ff_ffff;
        let index = self.next_index.max(1);
        self.variant = self.variant.wrapping_add(0x5b);
        if self.variant == 0 {
            self.variant = 0x5b;
        }
        let key = (index << 8) | u32::from(self.variant);
        self.by_index.insert(
            index,
            Mr {
                key,
                pd,
                addr,
                len,
                access,
                valid: true,
                mem,
            },
        );
        Ok(key)
    }

    /// Deregisters the region with `key`.
    pub fn deregister(&mut self, key: u32) -> Result<(), EmuError> {
        match self.by_index.get(&(key >> 8)) {
            Some(mr) if mr.key == key => {
                self.by_index.remove(&(key >> 8));
                Ok(())
            }
            _ => Err(EmuError::not_found("dereg_mr")),
        }
    }

    /// The region with `key`, valid or not.
    pub fn get(&self, key: u32) -> Option<&Mr> {
        self.by_index.get(&(key >> 8)).filter(|mr| mr.key == key)
    }

    /// Marks `key` invalid; false if no region has it or it may not be
    /// invalidated (it lacks [`Access::INVALIDATE`]) or is in another PD.
    pub fn invalidate(&mut self, pd: Pdn, key: u32) -> bool {
        match self.by_index.get_mut(&(key >> 8)) {
            Some(mr) if mr.key == key && mr.pd == pd && mr.access.contains(Access::INVALIDATE) => {
                mr.valid = false;
                true
            }
            _ => false,
        }
    }

    /// Revalidates an invalidated key (the emulated fast-register).
    pub fn revalidate(&mut self, key: u32) -> bool {
        match self.by_index.get_mut(&(key >> 8)) {
            Some(mr) if mr.key == key => {
                mr.valid = true;
                true
            }
            _ => false,
        }
    }

    /// Looks up `[addr, addr + len)` under `key` for `need`, and returns the
    /// region and the offset of `addr` inside it.
    pub fn check(
        &self,
        pd: Pdn,
        key: u32,
        addr: u64,
        len: u64,
        need: Access,
    ) -> Result<(&Region, usize), KeyFault> {
        let mr = self
            .get(key)
            .filter(|mr| mr.valid)
            .ok_or(KeyFault::BadKey)?;
        if mr.pd != pd {
            return Err(KeyFault::PdMismatch);
        }
        let end = addr.checked_add(len).ok_or(KeyFault::Bounds)?;
        if addr < mr.addr || end > mr.addr + mr.len {
            return Err(KeyFault::Bounds);
        }
        if !mr.access.contains(need) {
            return Err(KeyFault::Access);
        }
        let off = usize::try_from(addr - mr.addr).map_err(|_| KeyFault::Bounds)?;
        Ok((mr.mem.region(), off))
    }

    /// Reads `[addr, addr + buf.len())` under `key`.
    pub fn read(
        &self,
        pd: Pdn,
        key: u32,
        addr: u64,
        buf: &mut [u8],
        need: Access,
    ) -> Result<(), KeyFault> {
        let (region, off) = self.check(pd, key, addr, buf.len() as u64, need)?;
        region.read(off, buf).map_err(mem_fault)
    }

    /// Writes `data` at `addr` under `key`.
    pub fn write(
        &self,
        pd: Pdn,
        key: u32,
        addr: u64,
        data: &[u8],
        need: Access,
    ) -> Result<(), KeyFault> {
        let (region, off) = self.check(pd, key, addr, data.len() as u64, need)?;
        region.write(off, data).map_err(mem_fault)
    }
}

fn mem_fault(e: MemError) -> KeyFault {
    match e {
        MemError::Misaligned => KeyFault::Misaligned,
        MemError::OutOfBounds | MemError::Alloc => KeyFault::Bounds,
    }
}
