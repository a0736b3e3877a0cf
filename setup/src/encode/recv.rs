//! `mlx5dp encode recv`: the receive WQEs and RQ doorbell-record values the
//! core's cyclic receive queue ([`mlx5dp::rq::Rq`]) writes for a list of
//! receive work requests, read back from ordinary memory, as libmlx5's
//! `ibv_post_recv` (`mlx5_post_recv`) writes them for a QP's RQ.
//!
//! Input: one work request per line, `wr_id=` and `sge=ADDR:LEN:LKEY`
//! (repeatable), `#` comments; an empty line ends a batch (one
//! `ibv_post_recv` call: one doorbell-record update). libmlx5's rules,
//! which the core follows (`specs/golden/libmlx5/rq-cases.txt`):
//! zero-length SGEs are skipped; a WQE with fewer data segments than its
//! stride holds ends with a terminator (byte count 0, the invalid lkey);
//! the record takes `head & 0xffff` after the batch, except on a raw
//! Ethernet QP before RTR. A work request is refused with ENOMEM when
//! `--max-post` (or more) work requests are outstanding, else with EINVAL
//! when it has more SGEs than the stride holds or the QP is in RESET
//! (libmlx5's `rq.qp_state_max_gs` is -1 there); the ones before it in its
//! batch are posted.
#![forbid(unsafe_code)]

use super::input::{parse_sge, parse_u64, LineError, SgeSpec};
use super::memory::RecvMemory;
use mlx5dp::rq::{RqError, Sge};
use std::fmt;
use std::fmt::Write as _;

/// The options of `mlx5dp encode recv`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RecvConfig {
    /// RQ WQEs (a power of two).
    pub rq_wqes: u32,
    /// log2 of the WQE stride in bytes (4: 16 bytes, one data segment).
    pub wqe_shift: u8,
    /// The RQ head counter before the first work request (`rq.head`).
    pub head: u32,
    /// Work requests outstanding before it (`rq.head - rq.tail`).
    pub outstanding: u32,
    /// libmlx5's `rq.max_post` (the ring size unless the QP asked fewer).
    pub max_post: u32,
    /// Whether `ibv_post_recv` updates the doorbell record: not on a raw
    /// Ethernet QP before RTR.
    pub doorbell: bool,
    /// The QP is in RESET: libmlx5 (`set_qp_operational_state`, on
    /// creation and on every move to RESET) sets `rq.qp_state_max_gs` to
    /// -1, so `mlx5_post_recv`'s SGE test refuses every work request with
    /// EINVAL (after its ENOMEM test).
    pub reset: bool,
}

impl RecvConfig {
    /// Checks the options against each other.
    pub fn check(&self) -> Result<(), String> {
        if !self.rq_wqes.is_power_of_two() || self.rq_wqes > 1 << 16 {
            return Err(format!(
                "--rq-wqes must be a power of two up to 65536, got {}",
                self.rq_wqes
            ));
        }
        if !(4..=11).contains(&self.wqe_shift) {
            return Err(format!(
                "--wqe-shift must be 4 to 11 (16 to 2048-byte WQEs), got {}",
                self.wqe_shift
            ));
        }
        // `--max-post 0` and `--outstanding` beyond it are libmlx5 states
        // too: `mlx5_wq_overflow` (`head - tail + nreq >= max_post`)
        // refuses every work request with ENOMEM.
        if self.max_post > self.rq_wqes {
            return Err(format!(
                "--max-post must be 0 to --rq-wqes ({}), got {}",
                self.rq_wqes, self.max_post
            ));
        }
        Ok(())
    }

    /// Data segments one WQE holds (`rq.max_gs`, no signature).
    pub fn max_sge(&self) -> usize {
        1 << (self.wqe_shift - 4)
    }
}

/// One receive work request as read.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RecvWr {
    /// 1-based input line.
    pub line: usize,
    /// `wr_id=`.
    pub wr_id: u64,
    /// `sge=`, in order.
    pub sges: Vec<SgeSpec>,
}

/// Reads the input: batches of work requests.
pub fn parse(text: &str) -> Result<Vec<Vec<RecvWr>>, LineError> {
    let mut batches = vec![Vec::new()];
    for (i, raw) in text.lines().enumerate() {
        let line = i + 1;
        let body = raw.split('#').next().unwrap_or("").trim();
        if body.is_empty() {
            if raw.trim().is_empty() && batches.last().is_some_and(|b| !b.is_empty()) {
                batches.push(Vec::new());
            }
            continue;
        }
        let mut wr = RecvWr {
            line,
            wr_id: 0,
            sges: Vec::new(),
        };
        for field in body.split_whitespace() {
            let Some((key, value)) = field.split_once('=') else {
                return Err(LineError::new(line, format!("`{field}` is not key=value")));
            };
            match key {
                "wr_id" => {
                    wr.wr_id = parse_u64(value)
                        .ok_or_else(|| LineError::new(line, "wr_id= is not a 64-bit integer"))?;
                }
                "sge" => wr.sges.push(
                    parse_sge(value).map_err(|m| LineError::new(line, format!("sge=: {m}")))?,
                ),
                other => {
                    return Err(LineError::new(
                        line,
                        format!("unknown key `{other}` (a receive takes wr_id= and sge=)"),
                    ))
                }
            }
        }
        if let Some(b) = batches.last_mut() {
            b.push(wr);
        }
    }
    batches.retain(|b| !b.is_empty());
    Ok(batches)
}

/// One receive WQE as written.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RecvWqe {
    /// The RQ head counter it was posted at.
    pub index: u32,
    /// Its ring slot.
    pub slot: u32,
    /// Its bytes (the whole stride).
    pub bytes: Vec<u8>,
}

/// What one batch left.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RecvBatch {
    /// The WQEs posted, in order.
    pub wqes: Vec<RecvWqe>,
    /// The doorbell-record value after the batch, if it was written.
    pub dbrec: Option<u32>,
}

/// A work request the queue refused.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RecvRefusal {
    /// 1-based input line.
    pub line: usize,
    /// The errno libmlx5 returns for it.
    pub errno: &'static str,
    /// Why, one line.
    pub why: String,
}

impl fmt::Display for RecvRefusal {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "line {}: work request refused ({}): {}",
            self.line, self.errno, self.why
        )
    }
}

/// The result of `encode recv`: the batches up to a refused work request
/// (its batch's work requests before it included), and the refusal.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RecvEncoded {
    /// Every batch posted.
    pub batches: Vec<RecvBatch>,
    /// The refused work request, if any.
    pub refusal: Option<RecvRefusal>,
}

/// The doorbell record's fill before each batch: a value the core never
/// writes (it writes `head & 0xffff`), so that a batch that leaves the
/// record alone is seen.
const DBREC_FILL: u32 = 0xa5a5_a5a5;

/// Posts the batches through the core's receive queue.
pub fn encode(cfg: &RecvConfig, batches: &[Vec<RecvWr>]) -> Result<RecvEncoded, String> {
    let mem = RecvMemory::new(cfg.rq_wqes, cfg.wqe_shift).map_err(|e| format!("{e:?}"))?;
    let mut wrid = vec![0u64; cfg.rq_wqes as usize];
    // The core's queue starts empty at `head - outstanding`; the
    // outstanding work requests are posted first, so that its own full
    // test sees them. Their WQEs are not printed, and the ones printed
    // never share their slots (at most `max_post - outstanding` follow).
    // Beyond `max_post` (libmlx5 refuses every work request then) only
    // `max_post` are posted: the queue's count reaches `max_post` all the
    // same, and the ring (at least `max_post` WQEs) holds them.
    let prefill = cfg.outstanding.min(cfg.max_post);
    let start = cfg.head.wrapping_sub(prefill);
    let mut rq = mem.rq(&mut wrid, start).map_err(|e| format!("{e:?}"))?;
    rq.set_doorbell_enabled(cfg.doorbell);
    for _ in 0..prefill {
        rq.post(0, &[]).map_err(|e| format!("{e:?}"))?;
    }
    let mut out = RecvEncoded {
        batches: Vec::new(),
        refusal: None,
    };
    let stride = 1u32 << cfg.wqe_shift;
    for batch in batches {
        mem.set_dbrec(DBREC_FILL).map_err(|e| format!("{e:?}"))?;
        let mut posted = Vec::new();
        for wr in batch {
            let refused = if rq.outstanding() >= cfg.max_post {
                Some((
                    "ENOMEM",
                    "the receive queue is full (--max-post)".to_string(),
                ))
            } else if cfg.reset {
                Some((
                    "EINVAL",
                    "the QP is in RESET (libmlx5's rq.qp_state_max_gs is -1 there)".to_string(),
                ))
            } else {
                let sges: Vec<Sge> = wr
                    .sges
                    .iter()
                    .map(|g| Sge {
                        addr: g.addr,
                        length: g.length,
                        lkey: g.lkey,
                    })
                    .collect();
                let index = rq.head();
                match rq.post(wr.wr_id, &sges) {
                    Ok(()) => {
                        posted.push(index);
                        None
                    }
                    Err(RqError::QueueFull) => Some((
                        "ENOMEM",
                        "the receive queue is full (--rq-wqes)".to_string(),
                    )),
                    Err(RqError::TooManySges { given, max }) => Some((
                        "EINVAL",
                        format!(
                            "{given} SGEs; a WQE of --wqe-shift {} holds {max}",
                            cfg.wqe_shift
                        ),
                    )),
                    Err(e) => Some(("EINVAL", format!("{e:?}"))),
                }
            };
            if let Some((errno, why)) = refused {
                out.refusal = Some(RecvRefusal {
                    line: wr.line,
                    errno,
                    why,
                });
                break;
            }
        }
        rq.commit();
        let mut wqes = Vec::new();
        for index in posted {
            let slot = index & (cfg.rq_wqes - 1);
            wqes.push(RecvWqe {
                index,
                slot,
                bytes: mem.wqe(slot, stride).map_err(|e| format!("{e:?}"))?,
            });
        }
        let word = mem.dbrec().map_err(|e| format!("{e:?}"))?;
        let dbrec = (word != DBREC_FILL).then_some(word);
        if !wqes.is_empty() || out.refusal.is_none() {
            out.batches.push(RecvBatch { wqes, dbrec });
        }
        if out.refusal.is_some() {
            break;
        }
    }
    Ok(out)
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().fold(String::new(), |mut s, b| {
        let _ = write!(s, "{b:02x}");
        s
    })
}

impl RecvEncoded {
    /// One JSON object per WQE (`{"rq_index":N,"slot":N,"hex":"..."}`), then
    /// per batch `{"dbrec":N}` (`null`: not written).
    pub fn to_json_lines(&self) -> String {
        let mut s = String::new();
        for b in &self.batches {
            for w in &b.wqes {
                let v = serde_json::json!({
                    "rq_index": w.index,
                    "slot": w.slot,
                    "hex": hex(&w.bytes),
                });
                let _ = writeln!(s, "{v}");
            }
            let _ = writeln!(s, "{}", serde_json::json!({ "dbrec": b.dbrec }));
        }
        s
    }

    /// Readable lines: each WQE's index, slot and bytes by data segment,
    /// then the doorbell record.
    pub fn to_human(&self) -> String {
        let mut s = String::new();
        for b in &self.batches {
            for w in &b.wqes {
                let _ = writeln!(s, "rq wqe {} (slot {}):", w.index, w.slot);
                for seg in w.bytes.chunks(16) {
                    let _ = writeln!(s, "  {}", hex(seg));
                }
            }
            match b.dbrec {
                Some(v) => {
                    let _ = writeln!(s, "dbrec {v:#06x}");
                }
                None => {
                    let _ = writeln!(s, "dbrec not written");
                }
            }
        }
        s
    }
}
