//! Send-queue scenarios: one batch per WQE (start, one work request,
//! complete with its 8-byte doorbell), or one batch of 32 RDMA WRITEs.
//!
//! Measured per WQE: `SendQueue::start`, the builder and data setter
//! (validation, formatting, shadow entry), `Batch::complete` (copy into the
//! ring, to-device barrier, doorbell record, `sfence`, the doorbell store
//! to ordinary memory, `sfence`). Not measured: retiring the WQEs, done by
//! [`crate::Scenario::prepare`] once per ring's worth with one
//! `SendQueue::retire`.
//!
//! The `tx/*` scenarios (issue 7) live in [`crate::tx`].

use core::ptr::NonNull;

use mlx5dp::mmio::DeviceWord;
use mlx5dp::prm::{Av, Be16, Be32, DqpDct};
use mlx5dp::sq::{
    BlueFlamePreferred, DoorbellOnly, DoorbellPolicy, PostError, QpKind, QpType, RawPacketQp, RcQp,
    RdmaWr, SendFlags, SendQueue, Sge, SqConfig, SqRawParts, SqShadowEntry, UdQp, Wqebb,
};

use crate::{leak_raw, Scenario};

/// WQEBBs in every benchmark SQ (16 KiB, L1-resident like the staging area).
pub const WQE_CNT: u32 = 256;
/// QPN of the benchmark QPs.
pub(crate) const QPN: u32 = 0x00_0123;
pub(crate) const LKEY: u32 = 0x0000_4321;
const RKEY: u32 = 0x00ab_cd01;
const LADDR: u64 = 0x0002_0000_1000;
const RADDR: u64 = 0x7f12_3456_0000;
/// The 32 bytes of the inline send.
static PAYLOAD32: [u8; 32] = [0x5a; 32];
/// A 64-byte Ethernet frame (dst, src, ethertype 0x0800, payload).
pub(crate) static FRAME64: [u8; 64] = {
    let mut f = [0u8; 64];
    let mut i = 0;
    while i < 64 {
        f[i] = i as u8;
        i += 1;
    }
    f[12] = 0x08;
    f[13] = 0x00;
    f
};

/// Builds a send queue over leaked heap memory: ring, doorbell record,
/// 4 KiB UAR page (BlueFlame register at 0x800, two 256-byte halves),
/// shadow, and a staging area as large as the ring; its list posts use
/// AVX2 when this CPU has it.
pub(crate) fn leak_queue<P: DoorbellPolicy, Q: QpKind>(
    config: SqConfig,
) -> SendQueue<'static, P, Q> {
    let n = WQE_CNT as usize;
    let ring = leak_raw(vec![Wqebb::ZERO; n]);
    let dbrec = leak_raw(vec![0u32; 2]);
    let uar = leak_raw(vec![0u64; 4096 / 8]);
    let shadow: &'static mut [SqShadowEntry] =
        Box::leak(vec![SqShadowEntry::EMPTY; n].into_boxed_slice());
    let staging: &'static mut [Wqebb] = Box::leak(vec![Wqebb::ZERO; n].into_boxed_slice());
    // SAFETY: `dbrec` is a leaked, aligned `[u32; 2]`; its second word is
    // the SQ doorbell record, written only by this queue from now on.
    let dbrec = unsafe { DeviceWord::from_ptr(dbrec.add(1)) };
    // SAFETY: 0x800 + 2 * 256 <= 4096: the BlueFlame halves lie inside the
    // leaked page.
    let bf_reg = unsafe { uar.cast::<u8>().add(0x800) };
    let raw = SqRawParts {
        buf: NonNull::new(ring.cast::<u8>()).expect("ring"),
        wqe_cnt: WQE_CNT,
        dbrec,
        bf_reg: NonNull::new(bf_reg).expect("uar"),
        bf_buf_size: 256,
    };
    // SAFETY: the ring (`WQE_CNT` WQEBBs), the register (2 × 256 bytes at
    // 0x800 of a 4 KiB page, 8-byte aligned) and the doorbell record are
    // leaked, so they live for `'static`, and nothing else touches them.
    let sq = unsafe { SendQueue::new_typed(raw, config, shadow, staging) }.expect("send queue");
    #[cfg(target_arch = "x86_64")]
    let sq = {
        let mut sq = sq;
        sq.set_avx2(avx2());
        sq
    };
    sq
}

/// The AVX2 proof, when this CPU has AVX2 (the list posts use it).
#[cfg(target_arch = "x86_64")]
pub(crate) fn avx2() -> Option<mlx5dp::cpu::Avx2> {
    if std::is_x86_feature_detected!("avx2") {
        // SAFETY: the CPU running this process has AVX2 (just detected).
        Some(unsafe { mlx5dp::cpu::Avx2::new_unchecked() })
    } else {
        None
    }
}

#[cold]
#[inline(never)]
fn post_failed(e: PostError) -> ! {
    panic!("post failed: {e:?}")
}

/// The post result, or a panic (cold, out of line).
#[inline(always)]
fn ok<T>(r: Result<T, PostError>) -> T {
    match r {
        Ok(v) => v,
        Err(e) => post_failed(e),
    }
}

/// RC SEND of 32 bytes inline, one WQE per batch (4 DS, one WQEBB).
#[inline(never)]
pub fn measured_rc_send_inline32(
    sq: &mut SendQueue<'static, DoorbellOnly, RcQp>,
    first: u64,
    n: u64,
) {
    for i in first..first + n {
        let mut b = sq.start();
        ok(b.send(i).and_then(|w| w.inline_data(&PAYLOAD32)));
        b.complete();
    }
}

/// The same inline SEND posted in one call
/// (`SendQueue::post_send_inline`: checked, built in registers, written
/// straight into the ring, then the doorbell).
#[inline(never)]
pub fn measured_rc_send_inline32_post(
    sq: &mut SendQueue<'static, DoorbellOnly, RcQp>,
    first: u64,
    n: u64,
) {
    for i in first..first + n {
        ok(sq.post_send_inline(i, &PAYLOAD32, SendFlags::NONE));
    }
}

/// RC RDMA WRITE with one SGE, one WQE per batch (3 DS, one WQEBB).
#[inline(never)]
pub fn measured_rc_write_sge(sq: &mut SendQueue<'static, DoorbellOnly, RcQp>, first: u64, n: u64) {
    for i in first..first + n {
        let off = (i & 0xff) * 64;
        let mut b = sq.start();
        ok(b.rdma_write(i, RKEY, RADDR + off)
            .and_then(|w| w.sge(LKEY, LADDR + off, 64)));
        b.complete();
    }
}

/// The same RDMA WRITE posted in one call (`SendQueue::post_rdma_write`:
/// validated, then written straight into the ring, then the doorbell).
///
/// A lean harness, so that the count is the post's: the loop is the wr_id
/// counter, two running addresses (`+= 64`: every WQE still writes a
/// different local and remote address) and the loop test; the post's
/// result is tested (one branch). The addresses advance without the
/// `& 0xff` wrap of the builder scenarios (nothing dereferences them).
#[inline(never)]
pub fn measured_rc_write_sge_post(
    sq: &mut SendQueue<'static, DoorbellOnly, RcQp>,
    first: u64,
    n: u64,
) {
    let mut laddr = LADDR.wrapping_add(first.wrapping_mul(64));
    let mut raddr = RADDR.wrapping_add(first.wrapping_mul(64));
    for i in first..first + n {
        ok(sq.post_rdma_write(i, RKEY, raddr, Sge::new(LKEY, laddr, 64), SendFlags::NONE));
        laddr = laddr.wrapping_add(64);
        raddr = raddr.wrapping_add(64);
    }
}

/// The one-call RDMA WRITE with BlueFlame (rdma-core's default policy).
#[inline(never)]
pub fn measured_bf_rc_write_sge_post(
    sq: &mut SendQueue<'static, BlueFlamePreferred, RcQp>,
    first: u64,
    n: u64,
) {
    for i in first..first + n {
        let off = (i & 0xff) * 64;
        let sge = Sge::new(LKEY, LADDR + off, 64);
        ok(sq.post_rdma_write(i, RKEY, RADDR + off, sge, SendFlags::NONE));
    }
}

/// Batches of 32 RDMA WRITEs posted with the one-call
/// `Batch::rdma_write_sge`, one doorbell per batch; `n` is a multiple of 32.
#[inline(never)]
pub fn measured_rc_write_batch32_sge(
    sq: &mut SendQueue<'static, DoorbellOnly, RcQp>,
    first: u64,
    n: u64,
) {
    let mut i = first;
    while i < first + n {
        let mut b = sq.start();
        for _ in 0..32 {
            let off = (i & 0xff) * 64;
            let sge = Sge::new(LKEY, LADDR + off, 64);
            ok(b.rdma_write_sge(i, RKEY, RADDR + off, sge, SendFlags::NONE));
            i += 1;
        }
        b.complete();
    }
}

/// Lists of 32 RDMA WRITEs posted with `SendQueue::post_rdma_write_list`,
/// one doorbell per list; `n` is a multiple of 32. The queue uses AVX2
/// when the CPU has it (`leak_queue`; [`measured_rc_write_list32_scalar`]
/// is the same without).
///
/// Counted: the list posts and this loop (one call per 32 WQEs). Not
/// counted: building the list. It is built once, by the scenario (32
/// work requests with distinct wr_ids, addresses and lengths, as an
/// application's chain of `ibv_send_wr` would be built before
/// `ibv_post_send`), and posted again and again: the queue reads every
/// field of every element each time, and the compiler cannot see them.
#[inline(never)]
pub fn measured_rc_write_list32(
    sq: &mut SendQueue<'static, DoorbellOnly, RcQp>,
    list: &[RdmaWr; 32],
    n: u64,
) {
    for _ in 0..n / 32 {
        ok(sq.post_rdma_write_list(list));
    }
}

/// [`measured_rc_write_list32`] on a queue told not to use AVX2
/// (`SendQueue::set_avx2(None)`, once per call: one store): the figure of
/// a CPU without it.
#[inline(never)]
pub fn measured_rc_write_list32_scalar(
    sq: &mut SendQueue<'static, DoorbellOnly, RcQp>,
    list: &[RdmaWr; 32],
    n: u64,
) {
    #[cfg(target_arch = "x86_64")]
    sq.set_avx2(None);
    for _ in 0..n / 32 {
        ok(sq.post_rdma_write_list(list));
    }
}

/// The 32 work requests of [`measured_rc_write_list32`].
fn write_list32() -> &'static [RdmaWr; 32] {
    let mut l = [RdmaWr::default(); 32];
    for (i, w) in (0u64..).zip(l.iter_mut()) {
        let off = i * 64;
        *w = RdmaWr::new(
            i,
            RKEY,
            RADDR + off,
            Sge::new(LKEY, LADDR + off, 64 + i as u32),
            SendFlags::NONE,
        );
    }
    Box::leak(Box::new(l))
}

/// The same RDMA WRITE on a queue whose policy is BlueFlame for every
/// single-WQE batch (rdma-core's default): the doorbell is a 64-byte
/// BlueFlame copy (eight 8-byte stores) instead of one 8-byte store.
#[inline(never)]
pub fn measured_bf_rc_write_sge(
    sq: &mut SendQueue<'static, BlueFlamePreferred, RcQp>,
    first: u64,
    n: u64,
) {
    for i in first..first + n {
        let off = (i & 0xff) * 64;
        let mut b = sq.start();
        ok(b.rdma_write(i, RKEY, RADDR + off)
            .and_then(|w| w.sge(LKEY, LADDR + off, 64)));
        b.complete();
    }
}

/// UD SEND with an address vector and one SGE (5 DS, two WQEBBs).
#[inline(never)]
pub fn measured_ud_send_av(
    sq: &mut SendQueue<'static, DoorbellOnly, UdQp>,
    av: &Av,
    first: u64,
    n: u64,
) {
    for i in first..first + n {
        let off = (i & 0xff) * 64;
        let mut b = sq.start();
        ok(b.send(i)
            .and_then(|w| w.ud_addr(av, 0x00_0456, 0x1111_2222))
            .and_then(|w| w.sge(LKEY, LADDR + off, 64)));
        b.complete();
    }
}

/// The same UD SEND posted in one call (`SendQueue::post_ud_send`).
#[inline(never)]
pub fn measured_ud_send_av_post(
    sq: &mut SendQueue<'static, DoorbellOnly, UdQp>,
    av: &Av,
    first: u64,
    n: u64,
) {
    for i in first..first + n {
        let off = (i & 0xff) * 64;
        let sge = Sge::new(LKEY, LADDR + off, 64);
        ok(sq.post_ud_send(i, av, 0x00_0456, 0x1111_2222, sge, SendFlags::NONE));
    }
}

/// Raw Ethernet send of a 64-byte frame: its first 18 bytes inlined in the
/// Ethernet segment, the other 46 in one pointer segment (4 DS, one WQEBB).
#[inline(never)]
pub fn measured_raw_eth64(
    sq: &mut SendQueue<'static, DoorbellOnly, RawPacketQp>,
    first: u64,
    n: u64,
) {
    let addr = FRAME64.as_ptr() as u64;
    for i in first..first + n {
        let mut b = sq.start();
        ok(b.send(i).and_then(|w| w.frame(LKEY, addr, &FRAME64)));
        b.complete();
    }
}

/// The same raw Ethernet send posted in one call
/// (`SendQueue::post_raw_frame`).
#[inline(never)]
pub fn measured_raw_eth64_post(
    sq: &mut SendQueue<'static, DoorbellOnly, RawPacketQp>,
    first: u64,
    n: u64,
) {
    let addr = FRAME64.as_ptr() as u64;
    for i in first..first + n {
        ok(sq.post_raw_frame(i, LKEY, addr, &FRAME64, SendFlags::NONE));
    }
}

/// Batches of 32 RC RDMA WRITEs with one SGE each, one doorbell per batch;
/// `n` is a multiple of 32.
#[inline(never)]
pub fn measured_rc_write_batch32(
    sq: &mut SendQueue<'static, DoorbellOnly, RcQp>,
    first: u64,
    n: u64,
) {
    let mut i = first;
    while i < first + n {
        let mut b = sq.start();
        for _ in 0..32 {
            let off = (i & 0xff) * 64;
            ok(b.rdma_write(i, RKEY, RADDR + off)
                .and_then(|w| w.sge(LKEY, LADDR + off, 64)));
            i += 1;
        }
        b.complete();
    }
}

/// Which work request a scenario posts.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Kind {
    SendInline32,
    SendInline32Post,
    WriteSge,
    UdSendAv,
    UdSendAvPost,
    RawEth64,
    RawEth64Post,
    WriteBatch32,
    WriteSgePost,
    WriteBatch32Sge,
    WriteList32,
    WriteList32Scalar,
}

/// A send-queue scenario over a [`DoorbellOnly`] queue.
struct SqScenario {
    name: &'static str,
    symbol: &'static str,
    kind: Kind,
    rc: Option<SendQueue<'static, DoorbellOnly, RcQp>>,
    ud: Option<SendQueue<'static, DoorbellOnly, UdQp>>,
    raw: Option<SendQueue<'static, DoorbellOnly, RawPacketQp>>,
    av: &'static Av,
    /// The list of [`measured_rc_write_list32`].
    list: &'static [RdmaWr; 32],
    /// WQEBBs per WQE (to find the last WQE's counter when retiring).
    wqebbs: u32,
    /// Free-running work request counter (wr_id, addresses).
    next: u64,
}

fn ud_av() -> &'static Av {
    Box::leak(Box::new(Av {
        dqp_dct: DqpDct::from_bits(Be32::new(0x8000_0456)),
        rlid: Be16::new(0x0017),
        rmac: [0x02, 0, 0, 0, 0, 1],
        hop_limit: 64,
        ..Av::default()
    }))
}

/// Retires every WQE in flight (the device's side); returns the WQEs of
/// `wqebbs` WQEBBs each that fit the queue now.
fn retire_all<P: DoorbellPolicy, Q: QpKind>(sq: &mut SendQueue<'static, P, Q>, wqebbs: u32) -> u64 {
    if sq.outstanding() > 0 {
        let last = sq.producer().wrapping_sub(wqebbs) as u16;
        sq.retire(last).expect("retire");
    }
    u64::from(sq.free_wqebbs() / wqebbs)
}

impl SqScenario {
    fn new(name: &'static str, symbol: &'static str, kind: Kind) -> Self {
        let (qp_type, wqebbs) = match kind {
            Kind::UdSendAv | Kind::UdSendAvPost => (QpType::Ud, 2),
            Kind::RawEth64 | Kind::RawEth64Post => (QpType::RawPacket, 1),
            _ => (QpType::Rc, 1),
        };
        let mut config = SqConfig::new(qp_type, QPN, 64, 4);
        if matches!(kind, Kind::RawEth64 | Kind::RawEth64Post) {
            config.eth_min_inline = 18;
        }
        Self {
            name,
            symbol,
            kind,
            rc: (qp_type == QpType::Rc).then(|| leak_queue(config)),
            ud: (qp_type == QpType::Ud).then(|| leak_queue(config)),
            raw: (qp_type == QpType::RawPacket).then(|| leak_queue(config)),
            av: ud_av(),
            list: write_list32(),
            wqebbs,
            next: 0,
        }
    }
}

impl Scenario for SqScenario {
    fn name(&self) -> &'static str {
        self.name
    }
    fn symbol(&self) -> &'static str {
        self.symbol
    }
    fn unit(&self) -> &'static str {
        "WQE"
    }
    fn granule(&self) -> u64 {
        if matches!(
            self.kind,
            Kind::WriteBatch32
                | Kind::WriteBatch32Sge
                | Kind::WriteList32
                | Kind::WriteList32Scalar
        ) {
            32
        } else {
            1
        }
    }
    fn prepare(&mut self) -> u64 {
        let w = self.wqebbs;
        let room = match (&mut self.rc, &mut self.ud, &mut self.raw) {
            (Some(sq), _, _) => retire_all(sq, w),
            (_, Some(sq), _) => retire_all(sq, w),
            (_, _, Some(sq)) => retire_all(sq, w),
            _ => 0,
        };
        room / self.granule() * self.granule()
    }
    fn measured(&mut self, n: u64) {
        let first = self.next;
        match (self.kind, &mut self.rc, &mut self.ud, &mut self.raw) {
            (Kind::SendInline32, Some(sq), _, _) => measured_rc_send_inline32(sq, first, n),
            (Kind::SendInline32Post, Some(sq), _, _) => {
                measured_rc_send_inline32_post(sq, first, n)
            }
            (Kind::WriteSge, Some(sq), _, _) => measured_rc_write_sge(sq, first, n),
            (Kind::WriteBatch32, Some(sq), _, _) => measured_rc_write_batch32(sq, first, n),
            (Kind::WriteSgePost, Some(sq), _, _) => measured_rc_write_sge_post(sq, first, n),
            (Kind::WriteBatch32Sge, Some(sq), _, _) => measured_rc_write_batch32_sge(sq, first, n),
            (Kind::WriteList32, Some(sq), _, _) => measured_rc_write_list32(sq, self.list, n),
            (Kind::WriteList32Scalar, Some(sq), _, _) => {
                measured_rc_write_list32_scalar(sq, self.list, n)
            }
            (Kind::UdSendAv, _, Some(sq), _) => measured_ud_send_av(sq, self.av, first, n),
            (Kind::UdSendAvPost, _, Some(sq), _) => measured_ud_send_av_post(sq, self.av, first, n),
            (Kind::RawEth64, _, _, Some(sq)) => measured_raw_eth64(sq, first, n),
            (Kind::RawEth64Post, _, _, Some(sq)) => measured_raw_eth64_post(sq, first, n),
            _ => unreachable!("{}: no queue of its type", self.name),
        }
        self.next += n;
    }
}

/// The RDMA WRITE scenario with BlueFlame (see [`measured_bf_rc_write_sge`]
/// and [`measured_bf_rc_write_sge_post`]).
struct BfScenario {
    sq: SendQueue<'static, BlueFlamePreferred, RcQp>,
    next: u64,
    /// One-call post instead of the builder.
    post: bool,
}

impl Scenario for BfScenario {
    fn name(&self) -> &'static str {
        if self.post {
            "sq/rc_write_sge_blueflame_post"
        } else {
            "sq/rc_write_sge_blueflame"
        }
    }
    fn symbol(&self) -> &'static str {
        if self.post {
            "*measured_bf_rc_write_sge_post*"
        } else {
            "*measured_bf_rc_write_sge*"
        }
    }
    fn unit(&self) -> &'static str {
        "WQE"
    }
    fn prepare(&mut self) -> u64 {
        retire_all(&mut self.sq, 1)
    }
    fn measured(&mut self, n: u64) {
        if self.post {
            measured_bf_rc_write_sge_post(&mut self.sq, self.next, n);
        } else {
            measured_bf_rc_write_sge(&mut self.sq, self.next, n);
        }
        self.next += n;
    }
}

/// Every send-queue scenario.
pub fn all() -> Vec<Box<dyn Scenario>> {
    vec![
        Box::new(SqScenario::new(
            "sq/rc_send_inline32",
            "*measured_rc_send_inline32*",
            Kind::SendInline32,
        )),
        Box::new(SqScenario::new(
            "sq/rc_send_inline32_post",
            "*measured_rc_send_inline32_post*",
            Kind::SendInline32Post,
        )),
        Box::new(SqScenario::new(
            "sq/rc_write_sge",
            "*measured_rc_write_sge*",
            Kind::WriteSge,
        )),
        Box::new(SqScenario::new(
            "sq/ud_send_av",
            "*measured_ud_send_av*",
            Kind::UdSendAv,
        )),
        Box::new(SqScenario::new(
            "sq/ud_send_av_post",
            "*measured_ud_send_av_post*",
            Kind::UdSendAvPost,
        )),
        Box::new(SqScenario::new(
            "sq/raw_eth64",
            "*measured_raw_eth64*",
            Kind::RawEth64,
        )),
        Box::new(SqScenario::new(
            "sq/raw_eth64_post",
            "*measured_raw_eth64_post*",
            Kind::RawEth64Post,
        )),
        Box::new(SqScenario::new(
            "sq/rc_write_batch32",
            "*measured_rc_write_batch32*",
            Kind::WriteBatch32,
        )),
        Box::new(SqScenario::new(
            "sq/rc_write_sge_post",
            "*measured_rc_write_sge_post*",
            Kind::WriteSgePost,
        )),
        Box::new(SqScenario::new(
            "sq/rc_write_batch32_sge",
            "*measured_rc_write_batch32_sge*",
            Kind::WriteBatch32Sge,
        )),
        Box::new(SqScenario::new(
            "sq/rc_write_list32",
            "*measured_rc_write_list32*",
            Kind::WriteList32,
        )),
        Box::new(SqScenario::new(
            "sq/rc_write_list32_scalar",
            "*measured_rc_write_list32_scalar*",
            Kind::WriteList32Scalar,
        )),
        Box::new(BfScenario {
            sq: leak_queue(SqConfig::new(QpType::Rc, QPN, 64, 4)),
            next: 0,
            post: false,
        }),
        Box::new(BfScenario {
            sq: leak_queue(SqConfig::new(QpType::Rc, QPN, 64, 4)),
            next: 0,
            post: true,
        }),
    ]
}
