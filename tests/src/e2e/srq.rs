//! SRQ and striding-RQ posters for the scenarios: thin wrappers over the
//! core's [`Srq`] (libmlx5 `mlx5_post_srq_recv` / `mlx5_free_srq_wqe`) and
//! [`StridingRq`] (DPDK `mlx5_rx_burst_mprq`), built over the raw parts the
//! backend hands out, so that the emulated device's own parser checks what
//! the core writes.

use mlx5dp::cq::{LookupError, StrideCompletion};
use mlx5dp::rq::{MprqSlot, RecvWr, RqError, Sge, Srq, SrqSlot, StridingParams, StridingRq};
use mlx5dp_setup::backend::Buffer;
use mlx5dp_setup::emu::{CoreRq, EmuRqKind};

/// A shared receive queue (the core's [`Srq`]) and the SRQ number.
#[derive(Debug)]
pub struct TestSrq {
    srq: Srq<'static>,
    srqn: u32,
}

/// Why a receive could not be posted.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RecvPostError {
    /// No free WQE.
    Full,
    /// More SGEs than a WQE holds.
    TooManySges,
}

impl From<RqError> for RecvPostError {
    fn from(e: RqError) -> Self {
        match e {
            RqError::TooManySges { .. } => Self::TooManySges,
            _ => Self::Full,
        }
    }
}

impl TestSrq {
    /// An SRQ poster over `rq` (leaked: the parts borrow it for `'static`).
    pub fn new(rq: &'static CoreRq) -> Self {
        // SAFETY: called once per SRQ; the owner is leaked.
        let parts = unsafe { rq.raw_parts() }.expect("SRQ parts");
        assert_eq!(parts.kind, EmuRqKind::Srq);
        let slots = super::leak(vec![SrqSlot::EMPTY; parts.size.entries() as usize]);
        #[cfg_attr(not(target_arch = "x86_64"), allow(unused_mut))]
        let mut srq = Srq::new(parts.ring, parts.size, parts.wqe_shift, parts.dbrec, slots)
            .expect("Srq::new");
        // List posts through the SSE4.1 segment builder where the CPU has it.
        #[cfg(target_arch = "x86_64")]
        srq.set_sse41(mlx5dp_setup::cpu::sse41());
        Self {
            srq,
            srqn: parts.num,
        }
    }

    /// The SRQ number.
    pub fn srqn(&self) -> u32 {
        self.srqn
    }

    /// The core's SRQ.
    pub fn srq(&mut self) -> &mut Srq<'static> {
        &mut self.srq
    }

    /// SGEs per WQE.
    pub fn max_sge(&self) -> usize {
        self.srq.max_sge()
    }

    /// Posted WQEs not yet completed.
    pub fn outstanding(&self) -> usize {
        self.srq.outstanding() as usize
    }

    /// The wr_ids posted and not yet completed.
    pub fn posted_ids(&self) -> Vec<u64> {
        self.srq.outstanding_wr_ids().collect()
    }

    /// Writes one receive WQE (published by [`Self::commit`]).
    pub fn post(&mut self, wr_id: u64, sges: &[(u64, u32, u32)]) -> Result<(), RecvPostError> {
        let sges: Vec<Sge> = sges
            .iter()
            .map(|&(addr, lkey, length)| Sge { addr, length, lkey })
            .collect();
        self.srq.post(wr_id, &sges)?;
        Ok(())
    }

    /// Posts a list of one-SGE receives and publishes them, all or
    /// nothing (`Srq::post_list`): `(wr_id, (addr, lkey, length))` each.
    pub fn post_list(&mut self, wrs: &[(u64, (u64, u32, u32))]) -> Result<(), RecvPostError> {
        let wrs: Vec<RecvWr> = wrs
            .iter()
            .map(|&(wr_id, (addr, lkey, length))| RecvWr {
                wr_id,
                sge: Sge { addr, length, lkey },
            })
            .collect();
        self.srq.post_list(&wrs)?;
        Ok(())
    }

    /// Publishes the posted WQEs: the WQE counter in the doorbell record.
    pub fn commit(&mut self) {
        self.srq.commit();
    }

    /// Retires the WQE a completion names and links it after the tail.
    pub fn retire(&mut self, wqe_counter: u16) -> Result<u64, LookupError> {
        self.srq.retire(wqe_counter)
    }
}

/// A striding RQ (the core's [`StridingRq`]): each WQE is one buffer of
/// `2^log_num_strides` strides; packets take consecutive strides; a WQE is
/// done, and re-posted with the same buffer, when all its strides were
/// consumed (by packets or a filler).
#[derive(Debug)]
pub struct TestStridingRq {
    rq: StridingRq<'static>,
    /// The receive buffer: one region of `wqe_bytes` per ring slot.
    pub buf: Buffer,
    wqe_cnt: usize,
}

impl TestStridingRq {
    /// A striding-RQ poster over `rq`, receiving into `buf` (at least
    /// `wqe_cnt * strides * stride_bytes` bytes).
    pub fn new(rq: &'static CoreRq, buf: Buffer) -> Self {
        // SAFETY: called once per RQ; the owner is leaked.
        let parts = unsafe { rq.raw_parts() }.expect("striding RQ parts");
        let EmuRqKind::Striding {
            log_num_strides,
            log_stride_bytes,
        } = parts.kind
        else {
            panic!("not a striding RQ");
        };
        let n = parts.size.entries() as usize;
        let params = StridingParams {
            log_num_strides,
            log_stride_bytes,
        };
        let slots = super::leak(vec![MprqSlot::EMPTY; n]);
        let rq = StridingRq::new(parts.ring, parts.size, params, parts.dbrec, slots)
            .expect("StridingRq::new");
        assert!(
            buf.len() >= n * params.wqe_bytes() as usize,
            "striding buffer too small"
        );
        Self {
            rq,
            buf,
            wqe_cnt: n,
        }
    }

    /// The core's striding RQ.
    pub fn rq(&mut self) -> &mut StridingRq<'static> {
        &mut self.rq
    }

    /// Bytes of one WQE's buffer.
    pub fn wqe_bytes(&self) -> usize {
        self.rq.params().wqe_bytes() as usize
    }

    /// Bytes per stride.
    pub fn stride_bytes(&self) -> usize {
        self.rq.params().stride_bytes() as usize
    }

    /// WQEs posted and not done.
    pub fn outstanding(&self) -> u32 {
        self.rq.outstanding()
    }

    /// Posts one WQE on the next buffer region (published by
    /// [`Self::commit`]).
    pub fn post(&mut self, wr_id: u64) -> Result<(), RecvPostError> {
        let region = self.rq.head() as usize % self.wqe_cnt;
        let addr = self.buf.addr(region * self.wqe_bytes());
        self.rq.post(wr_id, addr, self.buf.key)?;
        Ok(())
    }

    /// Publishes: the 16-bit WQE counter in the doorbell record.
    pub fn commit(&mut self) {
        self.rq.commit();
    }

    /// Accounts for a stride completion; returns the WQE's wr_id and, when
    /// the WQE is now done, its wr_id again as retired.
    pub fn retire(
        &mut self,
        c: StrideCompletion,
        error: bool,
    ) -> Result<(u64, Option<u64>), LookupError> {
        let r = self.rq.retire_strides(c, error)?;
        Ok((r.wr_id, r.done))
    }

    /// The bytes of a packet: `len` bytes at stride `stride_index` of WQE
    /// `wqe_id`, found through the core's shadow of the buffer it posted.
    pub fn packet(&self, wqe_id: u16, stride_index: u16, len: usize) -> Vec<u8> {
        let addr = self
            .rq
            .stride_addr(wqe_id, stride_index)
            .expect("stride in range");
        self.buf.read((addr - self.buf.addr(0)) as usize, len)
    }
}
