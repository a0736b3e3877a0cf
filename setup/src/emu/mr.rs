//! Protection domains' memory regions and memory windows: keys, bounds,
//! access rights, binds, invalidation.
//!
//! Keys look like mlx5 mkeys: `index << 8 | variant`, where the variant byte
//! changes every time an index is reused, so a stale key is caught. The
//! variant a region gets is never 0, so no region key equals
//! `MLX5_INVALID_LKEY` (0x100). The lkey and the rkey of a region are the
//! same mkey, as on mlx5.
//!
//! Memory windows (`ibv_alloc_mw`) take their mkeys from the same index
//! space. A window is allocated free; a bind (a UMR WQE, [`MrTable::umr`])
//! points it at a range of a region with rights of its own and gives it
//! the variant byte the WQE carries, so its rkey becomes
//! `(old rkey & !0xff) | variant`; an unbind or an invalidation frees it
//! again. The rules are the IBA's (chapter 10.6.7 and the compliance
//! statements rxe cites in `rxe_mw.c`), checked in the order rxe checks
//! them, plus the QPN checks the mlx5 UMR control segment asks for
//! (`MLX5_WQE_UMR_CTRL_FLAG_CHECK_FREE`, `_CHECK_QPN`). A window key is an
//! rkey only: it is never accepted where an lkey is needed.
#![forbid(unsafe_code)]

use super::mem::{DmaBlock, MemError, Region, UserRegion};
use super::wqe::UmrBind;
use super::{Access, EmuError, MwType, Pdn, Qpn};
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
    /// A memory window in the wrong state for the operation, or used
    /// through a QP it is not bound to ([`super::VendorSyndrome::MwState`]).
    MwState,
}

/// A memory window (`struct ibv_mw`): what [`super::Device::alloc_mw`]
/// returns. The rkey is the one at allocation; each bind changes its
/// variant byte, and the user keeps track of it (as `ibv_mw.rkey`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Mw {
    /// Protection domain.
    pub pd: Pdn,
    /// The window's mkey (`index << 8 | variant`).
    pub rkey: u32,
    /// Type 1 (bound to the PD) or type 2 (bound to a QP).
    pub mw_type: MwType,
}

/// What a bound window maps.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct MwBinding {
    /// The first remote address the window answers to (the mkey's start
    /// address: 0 for a zero-based window).
    pub addr: u64,
    /// Length in bytes (non-zero).
    pub len: u64,
    /// Rights the window grants (independent of the region's remote rights).
    pub access: Access,
    /// Key of the region the window lies in.
    pub mr_key: u32,
    /// Where `addr` lands in the region (its address there).
    pub mr_addr: u64,
    /// Whether remote addresses are offsets from the window's start
    /// (`IBV_ACCESS_ZERO_BASED`: the mkey's start address is not the
    /// region address it maps).
    pub zero_based: bool,
    /// The QP a type-2 window is bound to; `None` for type 1.
    pub qpn: Option<Qpn>,
}

/// A memory window in the table.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Window {
    /// The current mkey.
    key: u32,
    pd: Pdn,
    mw_type: MwType,
    /// `None`: free (no key works).
    binding: Option<MwBinding>,
}

/// The mkey context's QPN field of a key bound to no QP.
const NO_QPN: u32 = mlx5dp::prm::umr::MKEY_QPN_NONE;

/// The memory-region and memory-window table of one device.
#[derive(Debug, Default)]
pub struct MrTable {
    by_index: BTreeMap<u32, Mr>,
    windows: BTreeMap<u32, Window>,
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
        let key = self
            .new_key()
            .ok_or_else(|| EmuError::no_memory("reg_mr"))?;
        let index = key >> 8;
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

    /// A fresh mkey: the next free index (shared by regions and windows)
    /// and the next variant (never 0).
    fn new_key(&mut self) -> Option<u32> {
        // 2^24 - 1 indices: at most that many tries to find a free one.
        for _ in 0..0x00ff_ffff {
            self.next_index = self.next_index.wrapping_add(1).max(1) & 0x00ff_ffff;
            let index = self.next_index.max(1);
            if self.by_index.contains_key(&index) || self.windows.contains_key(&index) {
                continue;
            }
            self.variant = self.variant.wrapping_add(0x5b);
            if self.variant == 0 {
                self.variant = 0x5b;
            }
            return Some((index << 8) | u32::from(self.variant));
        }
        None
    }

    /// Deregisters the region with `key`. A region with windows bound to it
    /// stays (`EBUSY`): IBA 10.6.7.2.6, as rxe's `rxe_dereg_mr` refuses
    /// ("mr has mw's bound").
    pub fn deregister(&mut self, key: u32) -> Result<(), EmuError> {
        if self
            .windows
            .values()
            .any(|w| w.binding.is_some_and(|b| b.mr_key == key))
        {
            return Err(EmuError::busy("dereg_mr", "memory windows are bound to it"));
        }
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

    /// Invalidates `key` for QP `qpn` of PD `pd` (a local invalidate posted
    /// on `qpn`, or a send with invalidate arriving on it).
    ///
    /// A region key goes invalid if it may be (it has
    /// [`Access::INVALIDATE`]) and is in `pd`; otherwise [`KeyFault::BadKey`].
    /// A window key frees a type-2 window bound to `qpn`: a type-1 window
    /// cannot be invalidated (IBA o10-37.2.26, rxe
    /// `rxe_check_invalidate_mw`), and a type-2 window only from the QP it
    /// is bound to (libmlx5 sets `CHECK_QPN` on its local invalidate; the
    /// IBA type-2B rule for use through other QPs) → [`KeyFault::MwState`].
    pub fn invalidate(&mut self, pd: Pdn, qpn: Qpn, key: u32) -> Result<(), KeyFault> {
        let index = key >> 8;
        if let Some(w) = self.windows.get_mut(&index) {
            let b = w.binding.filter(|_| w.key == key).ok_or(KeyFault::BadKey)?;
            if w.pd != pd {
                return Err(KeyFault::PdMismatch);
            }
            if w.mw_type == MwType::Type1 || b.qpn != Some(qpn) {
                return Err(KeyFault::MwState);
            }
            w.binding = None;
            return Ok(());
        }
        match self.by_index.get_mut(&index) {
            Some(mr) if mr.key == key && mr.pd == pd && mr.access.contains(Access::INVALIDATE) => {
                mr.valid = false;
                Ok(())
            }
            _ => Err(KeyFault::BadKey),
        }
    }

    /// Allocates a free memory window of `mw_type` in `pd` (`ibv_alloc_mw`).
    pub fn alloc_window(&mut self, pd: Pdn, mw_type: MwType) -> Result<Mw, EmuError> {
        let key = self
            .new_key()
            .ok_or_else(|| EmuError::no_memory("alloc_mw"))?;
        self.windows.insert(
            key >> 8,
            Window {
                key,
                pd,
                mw_type,
                binding: None,
            },
        );
        Ok(Mw {
            pd,
            rkey: key,
            mw_type,
        })
    }

    /// Deallocates the window whose mkey index `rkey` names (any variant:
    /// the rkey changes with every bind), bound or not (`ibv_dealloc_mw`;
    /// rxe `rxe_mw_cleanup` unbinds it).
    pub fn dealloc_window(&mut self, rkey: u32) -> Result<(), EmuError> {
        self.windows
            .remove(&(rkey >> 8))
            .map(|_| ())
            .ok_or_else(|| EmuError::not_found("dealloc_mw"))
    }

    /// The window whose mkey index `rkey` names: its current key and what
    /// it maps (`None` when free).
    pub fn window(&self, rkey: u32) -> Option<(u32, Option<MwBinding>)> {
        self.windows.get(&(rkey >> 8)).map(|w| (w.key, w.binding))
    }

    /// Executes a UMR posted on QP `qpn` of PD `pd` on the key `key` (the
    /// control segment's `imm`): a memory-window bind, an unbind, or a
    /// local invalidate (a free of a region key keeps the region
    /// invalidation of [`Self::invalidate`]).
    ///
    /// The checks, each failing the bind:
    /// - `key` names a window of `pd` (a bound window by its current key,
    ///   rxe `rxe_bind_mw`; a free one has no key, so its index names it)
    ///   → [`KeyFault::BadKey`], [`KeyFault::PdMismatch`] (IBA C10-72);
    /// - the control segment's checks: `CHECK_FREE` needs the window free,
    ///   `CHECK_QPN` needs it bound to `qpn` → [`KeyFault::MwState`];
    /// - the form of the UMR against the window's type (libmlx5
    ///   `set_umr_control_seg`, `set_umr_mkey_seg`): a type-2 bind checks
    ///   free (IBA o10-37.2.30) and writes `qpn`, a type-2 free checks the
    ///   QPN; a type-1 bind writes no QP and is not zero-based (IBA
    ///   o10-36.2.2; libmlx5 `mlx5_bind_mw` refuses `IBV_ACCESS_ZERO_BASED`)
    ///   → [`KeyFault::MwState`];
    /// - the KLM's key names a valid region of `pd` → `BadKey`,
    ///   `PdMismatch`; registered with [`Access::MW_BIND`] (IBA C10-73) and,
    ///   for remote write or atomic rights, with local write (C10-74) →
    ///   [`KeyFault::Access`]; the range inside it (C10-75) →
    ///   [`KeyFault::Bounds`].
    ///
    /// A bind gives the window the variant byte the UMR writes (when its
    /// mask selects the mkey field; rxe `rxe_do_bind_mw`: `(rkey & ~0xff)
    /// | key`) and records the range, rights, zero-basedness and (type 2)
    /// the QP; a free unbinds it.
    pub fn umr(&mut self, pd: Pdn, qpn: Qpn, key: u32, b: &UmrBind) -> Result<(), KeyFault> {
        let index = key >> 8;
        if b.range.is_none() && !self.windows.contains_key(&index) {
            // libmlx5's local invalidate of a region (fast-registration) key.
            return self.invalidate(pd, qpn, key);
        }
        let w = *self.windows.get(&index).ok_or(KeyFault::BadKey)?;
        if w.binding.is_some() && w.key != key {
            return Err(KeyFault::BadKey);
        }
        if w.pd != pd {
            return Err(KeyFault::PdMismatch);
        }
        let bound_qp = w.binding.and_then(|x| x.qpn);
        if (b.check_free && w.binding.is_some()) || (b.check_qpn && bound_qp != Some(qpn)) {
            return Err(KeyFault::MwState);
        }
        let type2 = w.mw_type == MwType::Type2;
        let binding = match b.range {
            None => {
                // A type-2 window is unbound only from its QP (CHECK_QPN,
                // checked above); a type-1 free writes no QP.
                if type2 != b.check_qpn || (!type2 && b.qpn.is_some_and(|q| q != NO_QPN)) {
                    return Err(KeyFault::MwState);
                }
                None
            }
            Some(r) => {
                let zero_based = r.start_addr != r.klm_address;
                let form_ok = if type2 {
                    b.check_free && b.qpn == Some(qpn.0)
                } else {
                    b.qpn.is_none_or(|q| q == NO_QPN) && !zero_based
                };
                if !form_ok {
                    return Err(KeyFault::MwState);
                }
                let mr = self
                    .get(r.klm_mkey)
                    .filter(|mr| mr.valid)
                    .ok_or(KeyFault::BadKey)?;
                if mr.pd != pd {
                    return Err(KeyFault::PdMismatch);
                }
                let writes = Access::REMOTE_WRITE | Access::REMOTE_ATOMIC;
                if !mr.access.contains(Access::MW_BIND)
                    || (r.access.intersects(writes) && !mr.access.contains(Access::LOCAL_WRITE))
                {
                    return Err(KeyFault::Access);
                }
                let end = r.klm_address.checked_add(r.len).ok_or(KeyFault::Bounds)?;
                if r.klm_address < mr.addr || end > mr.addr + mr.len {
                    return Err(KeyFault::Bounds);
                }
                Some(MwBinding {
                    addr: r.start_addr,
                    len: r.len,
                    access: r.access,
                    mr_key: r.klm_mkey,
                    mr_addr: r.klm_address,
                    zero_based,
                    qpn: type2.then_some(qpn),
                })
            }
        };
        if let Some(w) = self.windows.get_mut(&index) {
            if let Some(v) = b.variant {
                w.key = (w.key & !0xff) | u32::from(v);
            }
            w.binding = binding;
        }
        Ok(())
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

    /// Looks up a remote access to `[addr, addr + len)` under the rkey
    /// `key`, arriving on QP `qpn` of PD `pd`, for `need`: a region key as
    /// [`Self::check`] does; a window key within the window's range and
    /// rights, through its QP for type 2 (IBA: a type-2 window is used only
    /// through the QP it is bound to; rxe `rxe_lookup_mw`), translated to
    /// the region (zero-based: `addr` 0 is the window's start).
    pub fn check_remote(
        &self,
        pd: Pdn,
        qpn: Qpn,
        key: u32,
        addr: u64,
        len: u64,
        need: Access,
    ) -> Result<(&Region, usize), KeyFault> {
        let Some(w) = self.windows.get(&(key >> 8)) else {
            return self.check(pd, key, addr, len, need);
        };
        let b = w.binding.filter(|_| w.key == key).ok_or(KeyFault::BadKey)?;
        if w.pd != pd {
            return Err(KeyFault::PdMismatch);
        }
        if b.qpn.is_some_and(|q| q != qpn) {
            return Err(KeyFault::MwState);
        }
        let end = addr.checked_add(len).ok_or(KeyFault::Bounds)?;
        if addr < b.addr || end > b.addr + b.len {
            return Err(KeyFault::Bounds);
        }
        if !b.access.contains(need) {
            return Err(KeyFault::Access);
        }
        // The window's rights stand for the region's remote rights (IBA
        // 10.6.7: the region needs only MW_BIND, checked at bind time).
        self.check(pd, b.mr_key, b.mr_addr + (addr - b.addr), len, Access::NONE)
    }

    /// Reads `[addr, addr + buf.len())` under the rkey `key` for a remote
    /// access on `qpn` ([`Self::check_remote`]).
    pub fn read_remote(
        &self,
        pd: Pdn,
        qpn: Qpn,
        key: u32,
        addr: u64,
        buf: &mut [u8],
        need: Access,
    ) -> Result<(), KeyFault> {
        let (region, off) = self.check_remote(pd, qpn, key, addr, buf.len() as u64, need)?;
        region.read(off, buf).map_err(mem_fault)
    }

    /// Writes `data` at `addr` under the rkey `key` for a remote access on
    /// `qpn` ([`Self::check_remote`]).
    pub fn write_remote(
        &self,
        pd: Pdn,
        qpn: Qpn,
        key: u32,
        addr: u64,
        data: &[u8],
        need: Access,
    ) -> Result<(), KeyFault> {
        let (region, off) = self.check_remote(pd, qpn, key, addr, data.len() as u64, need)?;
        region.write(off, data).map_err(mem_fault)
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
