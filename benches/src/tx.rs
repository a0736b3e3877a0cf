//! Raw Ethernet burst scenarios (issue 7): bursts of 32 × 64-byte frames
//! through `TxQueue::tx_burst` on a raw Ethernet queue (eMPW inline, eMPW
//! pointer, one SEND WQE per packet); see [`measured_tx_burst32_empw`].

use mlx5dp::sq::mpw::{Empw, Packet, SingleWqe, TxConfig, TxFrame, TxMode, TxOffload, TxQueue};
use mlx5dp::sq::{DoorbellOnly, QpType, RawPacketQp, SqConfig};

use crate::sq::{leak_queue, FRAME64, LKEY, QPN};
use crate::Scenario;

/// Packets per `tx_burst` call in the `tx/*` scenarios.
pub const BURST: usize = 32;

#[cold]
#[inline(never)]
fn burst_short(n: usize) -> ! {
    panic!("tx_burst queued {n} of {BURST} packets")
}

/// Bursts of 32 × 64-byte frames through `TxQueue::tx_burst` on an eMPW
/// queue (inline or pointer descriptors, as the queue's `inline_max`
/// says); `n` is a multiple of 32.
///
/// Counted: `tx_burst` whole. Per packet: the counted loop (shape, kind
/// and length tests, the descriptor written straight into the ring, the id
/// into the id ring). Per session: opening it in the ring (a session that
/// would cross the ring end has its descriptors written into the ring's
/// two parts), how many packets fit, entering the counted loop, closing it
/// (control segment in place, no padding, its one shadow entry, the CQE decision;
/// the burst's last session too, for `Complete`, as `tx_burst` completes
/// the batch right after). Per burst: entering the burst path (the run's
/// first packet tested, its title built), `TxBatch::complete` (the
/// producer update, the doorbell record store, two `sfence` and the
/// 8-byte doorbell store to ordinary memory), this loop and the test of
/// its result. Not
/// counted: building the packets (once, by the scenario) and retiring (in
/// [`crate::Scenario::prepare`]). The queue has the AVX2 proof when the
/// CPU has AVX2 (`leak_queue`, after `is_x86_feature_detected!`): the
/// 64-byte frames are then copied with AVX2.
#[inline(never)]
pub fn measured_tx_burst32_empw(
    q: &mut TxQueue<'static, DoorbellOnly, RawPacketQp, Empw>,
    burst: &Burst,
    n: u64,
) {
    for _ in 0..n / BURST as u64 {
        let k = q.tx_burst(&burst.pkts);
        if k != BURST {
            burst_short(k);
        }
    }
}

/// The same 32 frames as [`TxFrame`]s through `TxQueue::tx_frames` (no
/// offload): the burst path with only the frame's length to test per
/// packet. Counted as in [`measured_tx_burst32_empw`].
#[inline(never)]
pub fn measured_tx_frames32_empw(
    q: &mut TxQueue<'static, DoorbellOnly, RawPacketQp, Empw>,
    burst: &Burst,
    n: u64,
) {
    for _ in 0..n / BURST as u64 {
        let k = q.tx_frames(&TxOffload::NONE, &burst.frames);
        if k != BURST {
            burst_short(k);
        }
    }
}

/// The same bursts on a [`SingleWqe`] queue: one SEND WQE per packet (18
/// bytes of L2 header inline in the Ethernet segment, the other 46 bytes by
/// pointer; 4 DS, one WQEBB, built as eight 8-byte words straight into
/// the ring with its shadow entry), one doorbell per burst.
/// Counted as in [`measured_tx_burst32_empw`].
#[inline(never)]
pub fn measured_tx_burst32_single(
    q: &mut TxQueue<'static, DoorbellOnly, RawPacketQp, SingleWqe>,
    burst: &Burst,
    n: u64,
) {
    for _ in 0..n / BURST as u64 {
        let k = q.tx_burst(&burst.pkts);
        if k != BURST {
            burst_short(k);
        }
    }
}

/// One burst of the `tx/*` scenarios, as packets and as frames.
pub struct Burst {
    /// The frames as `Packet::frame`s.
    pub pkts: [Packet<'static>; BURST],
    /// The frames as [`TxFrame`]s.
    pub frames: [TxFrame<'static>; BURST],
}

/// 32 distinct 64-byte frames (the [`FRAME64`] header, a per-frame byte
/// in the payload), at consecutive 64-byte slots of one leaked buffer, as
/// `Packet::frame`s and `TxFrame`s with ids 0..32. Built once; every
/// burst posts them.
fn tx_burst_of_frames() -> &'static Burst {
    let frames: &'static mut [[u8; 64]] = Box::leak(vec![FRAME64; BURST].into_boxed_slice());
    for (i, f) in (0u8..).zip(frames.iter_mut()) {
        f[20] = i;
    }
    let frames: &'static [[u8; 64]] = frames;
    let frames: Vec<TxFrame<'static>> = (0u64..)
        .zip(frames.iter())
        .map(|(i, f)| TxFrame::new(i, LKEY, f))
        .collect();
    let pkts: Vec<Packet<'static>> = frames.iter().map(|f| f.packet(&TxOffload::NONE)).collect();
    Box::leak(Box::new(Burst {
        pkts: pkts.try_into().expect("32 packets"),
        frames: frames.try_into().expect("32 frames"),
    }))
}

/// A `tx/*` scenario: one `TxQueue` of mode `M` and its burst.
struct TxScenario<M: TxMode> {
    name: &'static str,
    symbol: &'static str,
    q: TxQueue<'static, DoorbellOnly, RawPacketQp, M>,
    burst: &'static Burst,
    /// WQEBBs one burst takes (measured once by a warm-up burst).
    bbs_per_burst: u32,
    measured: fn(&mut TxQueue<'static, DoorbellOnly, RawPacketQp, M>, &Burst, u64),
}

/// Retires every WQE of `q` in flight (the device's side): finds the last
/// WQE's start by walking the shadow from the consumer, WQE by WQE (only
/// a WQE's first slot has its entry; the others may hold stale ones), and
/// retires up to it.
fn retire_tx<M: TxMode>(q: &mut TxQueue<'static, DoorbellOnly, RawPacketQp, M>) {
    let sq = q.send_queue();
    if sq.outstanding() == 0 {
        return;
    }
    let (pi, mask) = (sq.producer(), sq.wqe_cnt() - 1);
    let mut at = sq.consumer();
    let last = loop {
        let bbs = sq
            .shadow((at & mask) as usize)
            .map_or(0, |e| u32::from(e.wqebbs()));
        assert!(bbs != 0, "a WQE starts at {at}");
        if at.wrapping_add(bbs) == pi {
            break at as u16;
        }
        at = at.wrapping_add(bbs);
    };
    q.retire(last, |_| {}).expect("retire");
}

impl<M: TxMode> TxScenario<M> {
    fn new(
        name: &'static str,
        symbol: &'static str,
        cfg: TxConfig,
        measured: fn(&mut TxQueue<'static, DoorbellOnly, RawPacketQp, M>, &Burst, u64),
    ) -> Self {
        let mut config = SqConfig::new(QpType::RawPacket, QPN, 64, 4);
        config.eth_min_inline = 18;
        let sq = leak_queue::<DoorbellOnly, RawPacketQp>(config);
        let ids: &'static mut [u64] = Box::leak(vec![0u64; 1024].into_boxed_slice());
        let mut q = TxQueue::new(sq, ids, cfg).expect("tx queue");
        let burst = tx_burst_of_frames();
        // Warm-up burst (setup, not measured): how many WQEBBs a burst takes.
        let before = q.send_queue().producer();
        assert_eq!(q.tx_burst(&burst.pkts), BURST, "{name}: warm-up burst");
        let bbs_per_burst = q.send_queue().producer().wrapping_sub(before);
        retire_tx(&mut q);
        Self {
            name,
            symbol,
            q,
            burst,
            bbs_per_burst,
            measured,
        }
    }
}

impl<M: TxMode> Scenario for TxScenario<M> {
    fn name(&self) -> &'static str {
        self.name
    }
    fn symbol(&self) -> &'static str {
        self.symbol
    }
    fn unit(&self) -> &'static str {
        "packet"
    }
    fn granule(&self) -> u64 {
        BURST as u64
    }
    fn prepare(&mut self) -> u64 {
        retire_tx(&mut self.q);
        let bursts = self.q.send_queue().free_wqebbs() / self.bbs_per_burst;
        u64::from(bursts) * BURST as u64
    }
    fn measured(&mut self, n: u64) {
        (self.measured)(&mut self.q, self.burst, n);
    }
}

/// Every raw Ethernet burst scenario.
pub fn all() -> Vec<Box<dyn Scenario>> {
    vec![
        Box::new(TxScenario::<Empw>::new(
            "tx/empw_inline64_burst32",
            "*measured_tx_burst32_empw*",
            TxConfig::new(),
            measured_tx_burst32_empw,
        )),
        Box::new(TxScenario::<Empw>::new(
            "tx/empw_ptr64_burst32",
            "*measured_tx_burst32_empw*",
            TxConfig {
                inline_max: 0,
                ..TxConfig::new()
            },
            measured_tx_burst32_empw,
        )),
        Box::new(TxScenario::<Empw>::new(
            "tx/empw_inline64_frames32",
            "*measured_tx_frames32_empw*",
            TxConfig::new(),
            measured_tx_frames32_empw,
        )),
        Box::new(TxScenario::<Empw>::new(
            "tx/empw_ptr64_frames32",
            "*measured_tx_frames32_empw*",
            TxConfig {
                inline_max: 0,
                ..TxConfig::new()
            },
            measured_tx_frames32_empw,
        )),
        Box::new(TxScenario::<SingleWqe>::new(
            "tx/single_wqe64_burst32",
            "*measured_tx_burst32_single*",
            TxConfig::new(),
            measured_tx_burst32_single,
        )),
    ]
}
