//! Golden vectors of libmlx5 (rdma-core 44.0-2) send-side behaviour, replayed
//! through `mlx5dp::sq` over ordinary memory.
//!
//! Source: `specs/golden/libmlx5/wqe-cases.txt` (a sample of vectors produced
//! by running libmlx5's own `post_send` / `ibv_wr_*` code on queues in
//! ordinary memory; see that file's header for the format).
//!
//! Each case runs twice from identical fresh state, like the harness that
//! produced the vectors, with different fills (SQ a5/5a, UAR 3c/c3, doorbell
//! record a5/5a), so that we get *our* per-byte written mask too. Then:
//!
//! - bytes both libmlx5 and we wrote must be equal (SQ, doorbell record, UAR);
//! - a byte libmlx5 wrote and we did not is a failure, except the documented
//!   deviations: (a) a failing work request: libmlx5 leaves a partial WQE past
//!   the producer index, we write nothing; (b) bytes libmlx5 writes outside
//!   the WQE's DS count (v44 `set_tso_eth_seg` puts the data segment after a
//!   wrapped TSO header 32 bytes too far);
//! - a byte we wrote and libmlx5 did not is allowed only inside the WQEBBs of
//!   a WQE we posted and only as zero (we zero inline padding, the `imm` of
//!   ops without one, unused fields, and the rest of the last WQEBB); in the
//!   UAR only where libmlx5's BlueFlame copy wrote stale ring bytes (`s`);
//! - the doorbell record, the UAR write kind and offset, the BlueFlame offset
//!   after, `sq_cur_post`, the per-slot wr_ids and `fm_cache` must match.
//!
//! Two more faces of (a): libmlx5 spends the inherited fence (`fm_cache`) on
//! the refused work request's partial WQE (we keep it: the queue stays as it
//! was), and after a refused work request that got as far as its control
//! segment, its doorbell carries that partial WQE's unwritten first 8 bytes
//! (UAR mask `ssssssss`; we ring for the last WQE posted): only "a register
//! was written" is compared then. (b) is recognised by name or by its
//! condition (one of our TSO WQEs has its header cross the ring end), also
//! where libmlx5's data segments land in the WQE's own last WQEBB and in its
//! BlueFlame copy (bytes equal to ours 32 bytes earlier).
//!
//! Cases whose API we have not built (or that our types cannot express) are
//! printed and counted as known gaps, never skipped silently: a refusal by
//! libmlx5's work-request limit (`head - tail + nreq >= max_post`), which
//! `SqConfig` does not have.
//! A case whose `out.bad_wr` is -1 (`ibv_wr_complete` names no work request)
//! only needs to fail.
//!
//! Besides the sample, the default run replays
//! `specs/golden/libmlx5-oracle/wqe-random.txt` (random cases written by
//! the real `libmlx5.a` through `tests/oracle/libmlx5/send_gen.c`; see
//! `tests/oracle/libmlx5/SEND.md`), in a second test. Random cases also hit
//! four places where libmlx5 v44 itself is wrong or inconsistent. A case
//! that differs is checked against them: when its inputs (never its name)
//! match one, it is compared again with only what that behaviour changes
//! left out, and if the rest matches it is printed and counted as a
//! `DEVIATION` with a one-line reason and the `qp.c` lines; anything else
//! that differs is a `FAIL`. Conditions and scopes are in
//! `libmlx5_deviations/mod.rs` (rdma-core v44.0 `providers/mlx5/qp.c`):
//!
//! - **A** `ibv_wr_atomic_*` with an SGE of length neither 0 nor 8: libmlx5
//!   writes the length as the data segment's `byte_count`
//!   (`_mlx5_send_wr_set_sge`, qp.c:1640), its own `ibv_post_send` writes 8
//!   (`set_data_ptr_seg_atomic`, qp.c:283, 1103). We write 8, the size of an
//!   IB atomic operand, in both APIs. Left out: those `byte_count`s (ring,
//!   and the BlueFlame copy of that WQE).
//! - **B** raw `ibv_wr_send` + `ibv_wr_set_sge` / `ibv_wr_set_inline_data` of
//!   exactly `eth_min_inline` = 18 bytes: `copy_eth_inline_headers` consumes
//!   the buffer and sets `index = 1` (qp.c:483-489), these two setters apply
//!   only the offset (qp.c:1691-1692, 1916-1917), so the header is sent
//!   twice; the list setters (qp.c:1793, 2016) and `ibv_post_send`
//!   (qp.c:1093) send it once, as we do. Left out: that WQE after its inline
//!   header and its DS count, every later WQE, the doorbell record and the
//!   register write (sizes, hence slots, differ); still compared: the WQEs
//!   before it, their slots and wr_ids, where it starts, its head.
//! - **C** `ibv_post_send` on a raw QP, a TSO after a SEND that left
//!   `sg_copy_ptr` non-zero: it is declared once per call (qp.c:811), set by
//!   the SEND (qp.c:488-489), never reset for the TSO (qp.c:1029-1046), whose
//!   data loop then starts at the stale index/offset (qp.c:1093, 1114) and
//!   drops payload (which also escapes the `max_tso` check). We send the
//!   TSO's own SGEs. Left out and compared: as for B (acceptance from the
//!   TSO on may differ too).
//! - **D** a TSO header that crosses the ring end followed by another work
//!   request: deviation (b) (qp.c:689 + 1045; `ibv_wr_*`: qp.c:1449), but
//!   the next WQE overwrites the misplaced data segment, so (b)'s check
//!   (libmlx5's bytes 32 bytes past ours) cannot see it and libmlx5's posted
//!   WQE has stale bytes where its DS count says the data segment is. We
//!   write it there. Left out: that WQE after its inline header (later WQEs, the
//!   doorbell and the register write are compared; if the next work request
//!   was refused, libmlx5's doorbell names it through the misplaced bytes:
//!   only "a register was written" is compared then).
//!
//! `MLX5DP_WQE_CASES=/path` replays that file (same format) instead of the
//! sample, e.g. the random cases of `tests/refcheck/send_ref.py gen` or of
//! `send_gen wqe N SEED`.

use std::collections::BTreeMap;

use mlx5dp::mmio::DeviceWord;
use mlx5dp::prm::{Av, WQE_CTRL_INITIATOR_SMALL_FENCE};
use mlx5dp::sq::{
    BlueFlameInline, BlueFlamePreferred, DoorbellOnly, DoorbellPolicy, FrameSge, MwBind, MwType,
    PostError, QpType, SendQueue, Sge, SqConfig, SqRawParts, SqShadowEntry, Wqebb,
};
use zerocopy::FromBytes;

mod libmlx5_deviations;
use libmlx5_deviations::Scope;

const UAR_SIZE: usize = 4096;

/// Cases that hit libmlx5 v44's TSO-header-wrap bug: `set_tso_eth_seg`
/// advances the segment pointer past a wrapped header by `align(left, 16)`
/// and the caller then adds `sizeof(struct mlx5_wqe_eth_seg)` (32) again, so
/// the data segment lands 32 bytes after the place its DS count describes
/// (the device would read stale bytes there). We write it where the DS
/// count says; the test checks that our bytes equal libmlx5's, 32 bytes on.
/// Besides these names, any case where one of our TSO WQEs has its header
/// cross the ring end is treated the same way ([`Run::tso_wrap`]).
const TSO_WRAP_BUG: &[&str] = &["raw_tso_hdr54_wraps_sq_end"];

/// `errno` of libmlx5's `mlx5_wq_overflow` refusal (`ENOMEM`).
const ENOMEM: u64 = 12;

/// Whether libmlx5's refusal is its work-request count limit
/// (`mlx5_wq_overflow`: `sq.head - sq.tail + nreq >= sq.max_post`), which
/// `SqConfig` does not model (the core counts free WQEBBs, not work requests).
fn max_post_refusal(c: &Case) -> bool {
    if c.num("out.ret") != ENOMEM {
        return false;
    }
    let in_flight = (c.num("start_head") as u32).wrapping_sub(c.num("start_tail") as u32);
    let bad = c.num("out.bad_wr");
    // ibv_wr_complete names no work request: any of the batch may be it.
    let nreq = if bad == u64::MAX {
        c.num("nwr").saturating_sub(1)
    } else {
        bad
    };
    u64::from(in_flight) + nreq >= c.num("sq_max_post")
}

#[derive(Debug, Default)]
struct Case {
    name: String,
    kv: BTreeMap<String, String>,
    /// WQEBB index → (bytes, mask).
    wqebbs: BTreeMap<u32, (Vec<u8>, Vec<u8>)>,
}

impl Case {
    fn get(&self, k: &str) -> Option<&str> {
        self.kv.get(k).map(String::as_str)
    }
    fn num(&self, k: &str) -> u64 {
        self.get(k).map(parse_num).unwrap_or(0)
    }
    fn hex(&self, k: &str) -> Option<Vec<u8>> {
        self.get(k).map(parse_hex)
    }
}

fn parse_num(s: &str) -> u64 {
    let s = s.trim();
    if let Some(h) = s.strip_prefix("0x") {
        u64::from_str_radix(h, 16).expect("hex number")
    } else if let Some(n) = s.strip_prefix('-') {
        (n.parse::<u64>().expect("number")).wrapping_neg()
    } else {
        s.parse().expect("number")
    }
}

fn parse_hex(s: &str) -> Vec<u8> {
    let s = s.trim();
    (0..s.len() / 2)
        .map(|i| u8::from_str_radix(&s[2 * i..2 * i + 2], 16).expect("hex byte"))
        .collect()
}

fn parse(text: &str) -> Vec<Case> {
    let mut cases = Vec::new();
    let mut cur: Option<Case> = None;
    for line in text.lines() {
        let line = line.trim_end();
        if line.starts_with('#') || line.is_empty() {
            continue;
        }
        if let Some(name) = line.strip_prefix("case ") {
            cur = Some(Case {
                name: name.to_string(),
                ..Case::default()
            });
        } else if line == "end" {
            cases.push(cur.take().expect("end without case"));
        } else if let Some(rest) = line.strip_prefix("wqebb ") {
            let (idx, hex) = rest.split_once(' ').expect("wqebb line");
            let c = cur.as_mut().expect("wqebb outside case");
            c.wqebbs.entry(idx.parse().expect("index")).or_default().0 = parse_hex(hex);
        } else if let Some(rest) = line.strip_prefix("mask ") {
            let (idx, m) = rest.split_once(' ').expect("mask line");
            let c = cur.as_mut().expect("mask outside case");
            c.wqebbs.entry(idx.parse().expect("index")).or_default().1 = m.bytes().collect();
        } else if let Some((k, v)) = line.split_once('=') {
            cur.as_mut()
                .expect("key outside case")
                .kv
                .insert(k.to_string(), v.to_string());
        } else {
            panic!("unparsed line: {line}");
        }
    }
    cases
}

/// Ordinary memory standing in for the SQ buffer, doorbell record and UAR page.
struct Mem {
    ring: *mut [Wqebb],
    dbrec: *mut [u32; 2],
    uar: *mut [u64; UAR_SIZE / 8],
    ring_len: usize,
}

impl Mem {
    fn new(wqe_cnt: usize, sq_fill: u8, db_fill: u8, uar_fill: u8) -> Self {
        let ring = Box::into_raw(vec![Wqebb([sq_fill; 64]); wqe_cnt].into_boxed_slice());
        let dbrec = Box::into_raw(Box::new([u32::from_ne_bytes([db_fill; 4]); 2]));
        let uar = Box::into_raw(Box::new([u64::from_ne_bytes([uar_fill; 8]); UAR_SIZE / 8]));
        Mem {
            ring,
            dbrec,
            uar,
            ring_len: wqe_cnt * 64,
        }
    }
    fn ring_bytes(&self) -> Vec<u8> {
        let mut v = vec![0u8; self.ring_len];
        // SAFETY: `ring` is a live allocation of `ring_len` bytes; the queue
        // that writes it is not running (single-threaded test).
        unsafe {
            std::ptr::copy_nonoverlapping(self.ring.cast::<u8>(), v.as_mut_ptr(), self.ring_len)
        };
        v
    }
    fn dbrec_bytes(&self) -> Vec<u8> {
        let mut v = vec![0u8; 8];
        // SAFETY: as above, 8 bytes.
        unsafe { std::ptr::copy_nonoverlapping(self.dbrec.cast::<u8>(), v.as_mut_ptr(), 8) };
        v
    }
    fn uar_bytes(&self) -> Vec<u8> {
        let mut v = vec![0u8; UAR_SIZE];
        // SAFETY: as above, 4096 bytes.
        unsafe { std::ptr::copy_nonoverlapping(self.uar.cast::<u8>(), v.as_mut_ptr(), UAR_SIZE) };
        v
    }
}

impl Drop for Mem {
    fn drop(&mut self) {
        // SAFETY: the three pointers came from `Box::into_raw` in `new` and
        // no queue using them outlives this call (queues are dropped first).
        unsafe {
            drop(Box::from_raw(self.ring));
            drop(Box::from_raw(self.dbrec));
            drop(Box::from_raw(self.uar));
        }
    }
}

/// What one run produced.
struct Run {
    ring: Vec<u8>,
    dbrec: Vec<u8>,
    uar: Vec<u8>,
    cur_post: u32,
    bf_offset: usize,
    fm_cache: u8,
    /// (slot, wr_id) of every WQE posted.
    slots: Vec<(u32, u64)>,
    /// Ring byte ranges (start offset, WQEBB length, DS bytes) of WQEs posted.
    spans: Vec<(usize, usize, usize)>,
    /// Index of the failing work request and its error.
    error: Option<(usize, PostError)>,
    /// One of our TSO WQEs has its inline header cross the ring end (the
    /// libmlx5 v44 wrap bug, see [`TSO_WRAP_BUG`]).
    tso_wrap: bool,
}

enum Outcome {
    Ran(Run),
    Gap(String),
}

#[derive(Clone)]
struct WrSge {
    addr: u64,
    length: u32,
    lkey: u32,
    data: Option<Vec<u8>>,
}

fn sges_of(c: &Case, i: usize) -> Vec<WrSge> {
    (0..c.num(&format!("wr{i}.num_sge")) as usize)
        .map(|j| WrSge {
            addr: c.num(&format!("wr{i}.sge{j}.addr")),
            length: c.num(&format!("wr{i}.sge{j}.length")) as u32,
            lkey: c.num(&format!("wr{i}.sge{j}.lkey")) as u32,
            data: c.hex(&format!("wr{i}.sge{j}.data")),
        })
        .collect()
}

fn full_data(s: &[WrSge]) -> Option<Vec<&[u8]>> {
    s.iter()
        .map(|g| g.data.as_deref().filter(|d| d.len() == g.length as usize))
        .collect()
}

fn config_of(c: &Case) -> Result<SqConfig, String> {
    let qp_type = match c.get("qp_type").unwrap_or("") {
        "RC" => QpType::Rc,
        "UC" => QpType::Uc,
        "UD" => QpType::Ud,
        "XRC_SEND" | "XRC" => QpType::Xrc,
        "RAW_PACKET" => QpType::RawPacket,
        other => return Err(format!("QP type {other} not built")),
    };
    let mut cfg = SqConfig::new(
        qp_type,
        c.num("qpn") as u32,
        c.num("max_inline_data") as u32,
        c.num("sq_max_gs") as u32,
    );
    cfg.sig_all = c.num("sq_sig_all") != 0;
    cfg.atomics = c.num("atomics_enabled") != 0;
    cfg.raw_csum = c.num("qp_cap_cache") & 1 != 0; // MLX5_CSUM_SUPPORT_RAW_OVER_ETH
    cfg.eth_min_inline = c.num("eth_min_inline") as u8;
    cfg.max_tso_header = c.num("max_tso_header") as u16;
    cfg.max_tso = c.num("max_tso") as u32;
    cfg.signal_every = 0; // libmlx5 never forces a CQE
    cfg.start_pi = c.num("start_cur_post") as u32;
    cfg.start_bf_second_half = c.num("bf_offset_before") != 0;
    cfg.start_fm_cache = u8::try_from(c.num("start_fm_cache")).map_err(|_| {
        format!(
            "start_fm_cache {:#x} is not a byte",
            c.num("start_fm_cache")
        )
    })?;
    Ok(cfg)
}

fn run_case<P: DoorbellPolicy>(c: &Case, fills: (u8, u8, u8)) -> Outcome {
    let cfg = match config_of(c) {
        Ok(cfg) => cfg,
        Err(e) => return Outcome::Gap(e),
    };
    let wqe_cnt = c.num("sq_wqe_cnt") as usize;
    let bf_reg_offset = c.num("bf_reg_offset") as usize;
    let bf_buf_size = c.num("bf_buf_size") as u32;
    let api_wr = c.get("api") == Some("wr_api");
    let nwr = c.num("nwr") as usize;
    let mem = Mem::new(wqe_cnt, fills.0, fills.1, fills.2);
    let mut shadow = vec![SqShadowEntry::EMPTY; wqe_cnt];
    // At least one largest WQE (16 WQEBBs), as the constructor requires.
    let mut staging = vec![Wqebb::ZERO; wqe_cnt.max(16)];

    // Everything the work requests borrow lives out here.
    let mut avs: Vec<Option<Av>> = Vec::new();
    let mut hdrs: Vec<Vec<u8>> = Vec::new();
    for i in 0..nwr {
        avs.push(
            c.hex(&format!("wr{i}.ud.ah_av"))
                .map(|b| Av::read_from_bytes(&b).expect("48-byte AV")),
        );
        hdrs.push(c.hex(&format!("wr{i}.tso.hdr")).unwrap_or_default());
    }
    let sgess: Vec<Vec<WrSge>> = (0..nwr).map(|i| sges_of(c, i)).collect();

    let (slots, spans, error, cur_post, bf_offset, fm_cache);
    {
        // SAFETY: `mem` outlives the queue; the dbrec word is 4-byte aligned
        // and only written through this reference while the queue lives.
        let dbrec = unsafe { DeviceWord::from_ptr(mem.dbrec.cast::<u32>().add(1)) };
        let raw = SqRawParts {
            buf: std::ptr::NonNull::new(mem.ring.cast::<u8>()).expect("ring"),
            wqe_cnt: wqe_cnt as u32,
            dbrec,
            // SAFETY: `bf_reg_offset + 2 * bf_buf_size <= 4096` in every case.
            bf_reg: std::ptr::NonNull::new(unsafe { mem.uar.cast::<u8>().add(bf_reg_offset) })
                .expect("uar"),
            bf_buf_size,
        };
        // SAFETY: the ring, UAR and dbrec memory are live for the queue's
        // lifetime and touched by nothing else while it runs.
        let mut sq = match unsafe { SendQueue::<P>::new(raw, cfg, &mut shadow, &mut staging) } {
            Ok(sq) => sq,
            Err(e) => return Outcome::Gap(format!("constructor refused: {e:?}")),
        };
        let start = sq.producer();
        let mut batch = sq.start();
        let mut err = None;
        for i in 0..nwr {
            let k = |s: &str| format!("wr{i}.{s}");
            let opcode = c.get(&k("opcode")).unwrap_or("");
            let flags: Vec<&str> = c.get(&k("send_flags")).unwrap_or("").split('|').collect();
            let has = |f: &str| flags.contains(&f);
            let wr_id = c.num(&k("wr_id"));
            let raddr = c.num(&k("remote_addr"));
            let rkey = c.num(&k("rkey")) as u32;
            let imm = c.num(&k("imm_data_host")) as u32;
            let sges = &sgess[i];
            // `_mlx5_post_send` tests `num_sge` against `max_gs` before the
            // operation's own checks, inline or not (`ibv_wr_*` setters have
            // no such test for inline data lists, nor has the core's
            // `inline_data_list`, which mirrors `ibv_wr_set_inline_data_list`).
            if !api_wr && opcode != "INVALID" && sges.len() > cfg.max_sge as usize {
                err = Some((i, PostError::TooManySges));
                break;
            }
            let wr = match opcode {
                "SEND" => batch.send(wr_id),
                "SEND_WITH_IMM" => batch.send_imm(wr_id, imm),
                "SEND_WITH_INV" => batch.send_inv(wr_id, c.num(&k("invalidate_rkey")) as u32),
                "RDMA_WRITE" => batch.rdma_write(wr_id, rkey, raddr),
                "RDMA_WRITE_WITH_IMM" => batch.rdma_write_imm(wr_id, rkey, raddr, imm),
                "RDMA_READ" => batch.rdma_read(wr_id, rkey, raddr),
                "ATOMIC_CMP_AND_SWP" => batch.atomic_cmp_swp(
                    wr_id,
                    rkey,
                    raddr,
                    c.num(&k("compare_add")),
                    c.num(&k("swap")),
                ),
                "ATOMIC_FETCH_AND_ADD" => {
                    batch.atomic_fetch_add(wr_id, rkey, raddr, c.num(&k("compare_add")))
                }
                "LOCAL_INV" => batch.local_inv(wr_id, c.num(&k("invalidate_rkey")) as u32),
                // send_gen's extension keys; its windows are of type 2.
                "BIND_MW" => batch.bind_mw(
                    wr_id,
                    &MwBind {
                        mw_type: MwType::Type2,
                        mw_rkey: c.num(&k("bind_mw.mw_rkey")) as u32,
                        new_rkey: c.num(&k("bind_mw.rkey")) as u32,
                        mr_lkey: c.num(&k("bind_mw.mr_lkey")) as u32,
                        addr: c.num(&k("bind_mw.addr")),
                        length: c.num(&k("bind_mw.length")),
                        access: c.num(&k("bind_mw.access")) as u32,
                    },
                ),
                "TSO" => batch.tso(wr_id, &hdrs[i], c.num(&k("tso.mss")) as u16),
                "DRIVER1" => batch.driver1(wr_id),
                "INVALID" => {
                    // Not expressible: the builder calls are the only opcodes.
                    let ret = c.num("out.ret");
                    if ret == 0 {
                        return Outcome::Gap(
                            "libmlx5 accepted an opcode our API cannot express".into(),
                        );
                    }
                    err = Some((i, PostError::UnsupportedOp));
                    break;
                }
                other => return Outcome::Gap(format!("opcode {other} not built")),
            };
            let result = wr.and_then(|mut wr| {
                if has("SIGNALED") {
                    wr = wr.signaled();
                }
                if has("SOLICITED") {
                    wr = wr.solicited();
                }
                if has("FENCE") {
                    wr = wr.fence();
                }
                if has("IP_CSUM") && cfg.qp_type == QpType::RawPacket {
                    wr = wr.ip_csum()?; // libmlx5 ignores IP_CSUM on other QP types
                }
                if let Some(av) = avs[i].as_ref() {
                    wr = wr.ud_addr(
                        av,
                        c.num(&k("ud.remote_qpn")) as u32,
                        c.num(&k("ud.remote_qkey")) as u32,
                    )?;
                }
                let setter = c.get(&k("wr_api_setter"));
                let inline = if api_wr {
                    setter.is_some_and(|s| s.starts_with("set_inline"))
                } else {
                    has("INLINE")
                };
                let raw_send =
                    cfg.qp_type == QpType::RawPacket && opcode == "SEND" && cfg.eth_min_inline > 0;
                if sges.is_empty() {
                    return wr.post();
                }
                if inline || raw_send {
                    let Some(bytes) = full_data(sges) else {
                        return Err(PostError::WqeTooLarge); // reported as a gap below
                    };
                    if inline {
                        return wr.inline_data_list(&bytes);
                    }
                    let frames: Vec<FrameSge<'_>> = sges
                        .iter()
                        .zip(&bytes)
                        .map(|(g, b)| FrameSge::with_addr(g.lkey, g.addr, b))
                        .collect();
                    return wr.frame_list(&frames);
                }
                if setter == Some("set_sge") {
                    let g = &sges[0];
                    return wr.sge(g.lkey, g.addr, g.length);
                }
                let list: Vec<Sge> = sges
                    .iter()
                    .map(|g| Sge::new(g.lkey, g.addr, g.length))
                    .collect();
                wr.sge_list(&list)
            });
            if let Err(e) = result {
                if e == PostError::WqeTooLarge && full_data(sges).is_none() {
                    return Outcome::Gap(format!(
                        "wr{i}: the vector lacks the bytes of an inline/frame SGE"
                    ));
                }
                err = Some((i, e));
                break;
            }
        }
        // ibv_post_send rings the doorbell for the work requests before the
        // bad one; ibv_wr_complete after an error rolls everything back.
        if err.is_some() && api_wr {
            batch.abort();
        } else {
            batch.complete();
        }
        error = err;
        cur_post = sq.producer();
        bf_offset = sq.bf_offset();
        fm_cache = sq.fm_cache();
        let mut s = Vec::new();
        let mut sp = Vec::new();
        let mut at = start;
        while at != cur_post {
            let slot = at & (wqe_cnt as u32 - 1);
            let e = *sq.shadow(slot as usize).expect("slot");
            assert!(
                e.wqebbs() > 0,
                "{}: shadow has no WQE start at slot {slot}",
                c.name
            );
            s.push((slot, e.wr_id()));
            sp.push((slot as usize * 64, e.wqebbs() as usize * 64, 0));
            at = at.wrapping_add(u32::from(e.wqebbs()));
        }
        slots = s;
        spans = sp;
    }
    // DS of each WQE, from its control segment in the ring.
    let ring = mem.ring_bytes();
    let ring_len = ring.len();
    // A TSO WQE (opcode 0x0e) whose header, from byte 30 of its first WQEBB
    // (`inline_hdr_start`), runs past the ring end.
    let tso_wrap = spans.iter().any(|&(s, _, _)| {
        ring[s + 3] == 0x0e
            && s + 30 + usize::from(u16::from_be_bytes([ring[s + 28], ring[s + 29]])) > ring_len
    });
    let spans = spans
        .into_iter()
        .map(|(start, len, _)| (start, len, (ring[start + 7] & 0x3f) as usize * 16))
        .collect();
    Outcome::Ran(Run {
        ring,
        dbrec: mem.dbrec_bytes(),
        uar: mem.uar_bytes(),
        cur_post,
        bf_offset,
        fm_cache,
        slots,
        spans,
        error,
        tso_wrap,
    })
}

fn run_with_policy(c: &Case, fills: (u8, u8, u8)) -> Outcome {
    if max_post_refusal(c) {
        return Outcome::Gap(
            "libmlx5 refused on its work-request limit (head - tail + nreq >= max_post); \
             SqConfig has no such limit (the core counts free WQEBBs)"
                .into(),
        );
    }
    let bf = c.num("bf_uuarn") != 0 && c.num("shut_up_bf") == 0 && c.num("bf_buf_size") != 0;
    if !bf {
        run_case::<DoorbellOnly>(c, fills)
    } else if c.num("prefer_bf") != 0 {
        run_case::<BlueFlamePreferred>(c, fills)
    } else {
        run_case::<BlueFlameInline>(c, fills)
    }
}

/// The outcome (errors, producer index, BlueFlame offset, fence, slots) of
/// a case compared in full.
fn check_outcome(c: &Case, a: &Run, notes: &mut Vec<String>, fail: &mut Vec<String>) {
    let ret = c.num("out.ret");
    // Outcome of the work requests.
    match (ret, a.error) {
        (0, None) => {}
        (0, Some((i, e))) => fail.push(format!("wr{i} failed with {e:?}, libmlx5 posted it")),
        (r, None) => fail.push(format!("libmlx5 failed (errno {r}), we posted everything")),
        (r, Some((i, e))) if c.num("out.bad_wr") == u64::MAX => {
            // ibv_wr_complete names no work request (`out.bad_wr=-1`).
            notes.push(format!(
                "expected error (ibv_wr_complete: errno {r}), ours at wr{i}: {e:?}"
            ));
        }
        (r, Some((i, e))) => {
            let bad = c.num("out.bad_wr") as usize;
            if bad != i {
                fail.push(format!(
                    "libmlx5 failed at wr{bad} (errno {r}), we at wr{i} ({e:?})"
                ));
            } else {
                notes.push(format!("expected error at wr{i}: errno {r} / {e:?}"));
            }
        }
    }
    if a.cur_post != c.num("out.sq_cur_post") as u32 {
        fail.push(format!(
            "sq_cur_post {} != {}",
            a.cur_post,
            c.num("out.sq_cur_post")
        ));
    }
    if a.bf_offset as u64 != c.num("out.bf_offset_after") {
        fail.push(format!(
            "bf_offset {} != {}",
            a.bf_offset,
            c.num("out.bf_offset_after")
        ));
    }
    if ret != 0 && a.error.is_some() && a.fm_cache != 0 && c.num("out.fm_cache") == 0 {
        // (a) libmlx5 takes the inherited fence into the refused work
        // request's partial WQE; we leave the queue (its fence) as it was.
        notes.push(format!(
            "fm_cache {:#x} kept (libmlx5 spent it on the refused work request)",
            a.fm_cache
        ));
    } else if refused_bind_fences(c, a) {
        // (b) libmlx5's `ibv_post_send` sets `next_fence` for a BIND_MW
        // before `set_bind_wr` refuses a window over 2 GiB (qp.c:919, 625),
        // and `out:` stores it (qp.c:1143): its next post is fenced after a
        // work request it refused. We leave the queue as it was.
        notes.push(format!(
            "fm_cache {:#x} kept (libmlx5 keeps the refused BIND_MW's fence)",
            a.fm_cache
        ));
    } else if u64::from(a.fm_cache) != c.num("out.fm_cache") {
        fail.push(format!(
            "fm_cache {:#x} != {:#x}",
            a.fm_cache,
            c.num("out.fm_cache")
        ));
    }
    for (slot, wr_id) in &a.slots {
        match c.get(&format!("out.sq_slot{slot}")) {
            Some(v) => {
                let want = parse_num(
                    v.split(',')
                        .next()
                        .unwrap_or("")
                        .trim_start_matches("wrid:"),
                );
                if want != *wr_id {
                    fail.push(format!("slot {slot}: wr_id {wr_id:#x} != {want:#x}"));
                }
            }
            None => fail.push(format!("slot {slot}: we posted a WQE libmlx5 did not")),
        }
    }
    let lib_slots = c.kv.keys().filter(|k| k.starts_with("out.sq_slot")).count();
    if lib_slots != a.slots.len() {
        fail.push(format!(
            "{} WQEs posted, libmlx5 {}",
            a.slots.len(),
            lib_slots
        ));
    }
}

/// Whether libmlx5's `ibv_post_send` refused a BIND_MW for its length
/// (over 2 GiB, `EOPNOTSUPP`), we refused the same work request, and
/// libmlx5's `fm_cache` is the small-initiator fence it set for the bind
/// (recognised from the case's inputs, not its name).
fn refused_bind_fences(c: &Case, a: &Run) -> bool {
    const EOPNOTSUPP: u64 = 95;
    let bad = c.num("out.bad_wr");
    let k = |s: &str| format!("wr{bad}.{s}");
    c.get("api") == Some("ibv_post_send")
        && c.num("out.ret") == EOPNOTSUPP
        && c.get(&k("opcode")) == Some("BIND_MW")
        && c.num(&k("bind_mw.length")) > 1 << 31
        && a.error == Some((bad as usize, PostError::BindTooLong))
        && c.num("out.fm_cache") == u64::from(WQE_CTRL_INITIATOR_SMALL_FENCE)
}

/// The outcome of a case with a B/C/D deviation at work request `k`: we
/// accepted the work requests before it (libmlx5 posted `k`, so it accepted
/// them; after `k` acceptance may differ, e.g. C escapes libmlx5's `max_tso`
/// check, but an `ibv_wr_*` batch is all or nothing), posted them in
/// libmlx5's slots with its wr_ids, and started `k` where libmlx5 did.
fn check_before(c: &Case, a: &Run, k: usize, fail: &mut Vec<String>) {
    let lib_order = libmlx5_deviations::lib_slots(&c.kv);
    if let Some((i, e)) = a.error {
        if i < k || c.get("api") == Some("wr_api") {
            fail.push(format!("wr{i} failed with {e:?}, libmlx5 posted it"));
        }
    }
    let mask = c.num("sq_wqe_cnt") as u32 - 1;
    for (j, &want) in lib_order.iter().enumerate().take(k + 1) {
        let got = a.slots.get(j).map_or(a.cur_post & mask, |s| s.0);
        if got != want {
            fail.push(format!("wr{j}: WQE at slot {got}, libmlx5 {want}"));
        } else if let Some(&(slot, wr_id)) = a.slots.get(j).filter(|_| j < k) {
            let v = c.get(&format!("out.sq_slot{slot}")).unwrap_or("");
            let want = parse_num(
                v.split(',')
                    .next()
                    .unwrap_or("")
                    .trim_start_matches("wrid:"),
            );
            if want != wr_id {
                fail.push(format!("slot {slot}: wr_id {wr_id:#x} != {want:#x}"));
            }
        }
    }
}

/// Compares one case; returns the list of failures and prints notes.
/// `scope` excuses what a recognised libmlx5 deviation changes (nothing
/// for the first, full comparison).
fn check(c: &Case, a: &Run, b: &Run, scope: &Scope, notes: &mut Vec<String>) -> Vec<String> {
    let mut fail = Vec::new();
    let wqe_cnt = c.num("sq_wqe_cnt") as usize;
    let ring_len = wqe_cnt * 64;
    let ret = c.num("out.ret");
    let tso_wrap = a.tso_wrap || TSO_WRAP_BUG.contains(&c.name.as_str());
    let refused_scope;
    let scope = match (scope.cut_wr(), a.error) {
        (Some(k), Some((i, _))) if i == k => {
            refused_scope = scope.refused_at_cut();
            &refused_scope
        }
        _ => scope,
    };
    if let Some(k) = scope.cut_wr() {
        check_before(c, a, k, &mut fail);
    } else {
        check_outcome(c, a, notes, &mut fail);
    }

    // Ring bytes.
    let ours = |i: usize| a.ring[i] != 0xa5 || b.ring[i] != 0x5a;
    let in_span = |i: usize| {
        a.spans
            .iter()
            .find(|(s, l, _)| (i + ring_len - s) % ring_len < *l)
            .copied()
    };
    let mut lib_written = vec![false; ring_len];
    let (mut zero_filled, mut lib_outside, mut excused) = (0, 0, 0);
    for (idx, (bytes, mask)) in &c.wqebbs {
        for j in 0..64 {
            let i = *idx as usize * 64 + j;
            if mask[j] != b'x' {
                continue;
            }
            lib_written[i] = true;
            if !scope.compared(i) {
                excused += 1; // a libmlx5 deviation's bytes
                continue;
            }
            let within_ds = in_span(i).is_some_and(|(s, _, ds)| (i + ring_len - s) % ring_len < ds);
            if ours(i) && a.ring[i] == bytes[j] && within_ds {
                continue;
            }
            let before = (i + ring_len - 32) % ring_len;
            if tso_wrap && ours(before) && a.ring[before] == bytes[j] {
                // (b) the data segments after a wrapped TSO header: libmlx5's
                // are 32 bytes past ours (here where ours end or past them).
                lib_outside += 1;
                continue;
            }
            if ours(i) && a.ring[i] != bytes[j] {
                fail.push(format!(
                    "ring byte {i} (WQEBB {idx}+{j}): {:#04x} != libmlx5 {:#04x}",
                    a.ring[i], bytes[j]
                ));
            } else if ret != 0 && !ours(i) {
                lib_outside += 1; // (a) partial WQE of a failing work request
            } else if !within_ds && in_span(i).is_none() && tso_wrap {
                lib_outside += 1; // (b) libmlx5 v44 TSO-wrap data segment outside the WQE
            } else if !ours(i) {
                fail.push(format!(
                    "ring byte {i} (WQEBB {idx}+{j}): libmlx5 wrote {:#04x}, we did not",
                    bytes[j]
                ));
            } else {
                fail.push(format!("ring byte {i}: written outside the DS count"));
            }
        }
    }
    // Where libmlx5 wrote each ring byte (for the relocated TSO data segment).
    let mut lib_val = vec![None; ring_len];
    for (idx, (bytes, mask)) in &c.wqebbs {
        for j in 0..64 {
            if mask[j] == b'x' {
                lib_val[*idx as usize * 64 + j] = Some(bytes[j]);
            }
        }
    }
    let mut relocated = 0;
    for i in 0..ring_len {
        if ours(i) && !lib_written[i] && scope.compared(i) {
            if in_span(i).is_some() && a.ring[i] == 0 {
                zero_filled += 1;
            } else if tso_wrap
                && in_span(i).is_some_and(|(s, _, ds)| (i + ring_len - s) % ring_len < ds)
                && lib_val[(i + 32) % ring_len] == Some(a.ring[i])
            {
                // (b) our data segment where the DS count says it is; libmlx5
                // wrote the same bytes 32 bytes further on.
                relocated += 1;
            } else {
                fail.push(format!(
                    "ring byte {i}: we wrote {:#04x} where libmlx5 wrote nothing",
                    a.ring[i]
                ));
            }
        }
    }
    if zero_filled > 0 {
        notes.push(format!(
            "{zero_filled} ring bytes zeroed where libmlx5 leaves stale bytes (inside our WQEBBs)"
        ));
    }
    if relocated > 0 {
        notes.push(format!("{relocated} ring bytes of the data segment after a wrapped TSO header written inside the DS count (libmlx5 v44: 32 bytes further, outside it)"));
    }
    if lib_outside > 0 {
        notes.push(format!("{lib_outside} ring bytes libmlx5 wrote outside any WQE's DS count (documented deviation)"));
    }

    if excused > 0 {
        notes.push(format!(
            "{excused} ring bytes libmlx5 wrote not compared (libmlx5 deviation)"
        ));
    }
    if scope.cut_wr().is_some() {
        // B, C, D: the doorbell record and the register write are those of
        // the last WQE, at or after the affected one.
        return fail;
    }

    // Doorbell record.
    let want_db = c.hex("out.dbrec_bytes").unwrap_or_default();
    let db_mask: Vec<u8> = c
        .get("out.dbrec_mask")
        .unwrap_or("........")
        .bytes()
        .collect();
    for i in 0..8 {
        let ours = a.dbrec[i] != 0xa5 || b.dbrec[i] != 0x5a;
        let lib = db_mask[i] == b'x';
        if ours != lib || (ours && a.dbrec[i] != want_db[i]) {
            fail.push(format!(
                "dbrec byte {i}: ours {:#04x} (written {ours}), libmlx5 {:#04x} (written {lib})",
                a.dbrec[i], want_db[i]
            ));
        }
    }

    // UAR.
    let kind = c.get("out.uar_write").unwrap_or("none");
    if ret != 0
        && (scope.uar_stale()
            || c.get("out.uar_mask")
                .is_some_and(|m| m.starts_with("ssssssss")))
    {
        // (a) after a refused work request libmlx5 rings the doorbell with
        // the control segment of the refused one (`ctrl` points at its
        // partial WQE, whose first 8 bytes it never wrote): stale ring bytes.
        // We ring for the last WQE posted; only "a register was written" is
        // comparable.
        let ours = (0..UAR_SIZE).any(|i| a.uar[i] != 0x3c || b.uar[i] != 0xc3);
        if !ours {
            fail.push("libmlx5 rang the doorbell, we wrote no register".into());
        }
        notes.push(
            "libmlx5's doorbell names the refused work request (stale bytes): not compared".into(),
        );
        return fail;
    }
    let mut lib_uar = vec![0u8; UAR_SIZE]; // 0 untouched, b'x', b's'
    let mut lib_val = vec![0u8; UAR_SIZE];
    if kind != "none" {
        let off = c.num("out.uar_offset") as usize;
        let bytes = c.hex("out.uar_bytes").unwrap_or_default();
        let mask: Vec<u8> = c.get("out.uar_mask").unwrap_or("").bytes().collect();
        for (j, m) in mask.iter().enumerate() {
            lib_uar[off + j] = *m;
            lib_val[off + j] = bytes[j];
        }
    }
    let mut our_kind = "none";
    let mut stale = 0;
    for i in 0..UAR_SIZE {
        let ours = a.uar[i] != 0x3c || b.uar[i] != 0xc3;
        if ours {
            our_kind = "written";
        }
        match (ours, lib_uar[i]) {
            (false, 0) => {}
            (true, b'x') if a.uar[i] == lib_val[i] => {}
            // A, D: a deviation's bytes in the BlueFlame copy.
            (true, b'x') if !scope.uar_compared(i - c.num("out.uar_offset") as usize) => {}
            // (b) BlueFlame copy of a WQE whose TSO header wraps: libmlx5's
            // data segments are 32 bytes past ours in the copy too.
            (true, b'x') if tso_wrap && i >= 32 && a.uar[i - 32] == lib_val[i] => {}
            (true, b's') => stale += 1,
            (o, m) => fail.push(format!(
                "uar byte {i:#x}: ours {:#04x} (written {o}), libmlx5 {:#04x} ({})",
                a.uar[i],
                lib_val[i],
                if m == 0 { '.' } else { m as char }
            )),
        }
    }
    if (our_kind == "none") != (kind == "none") {
        fail.push(format!("uar write: libmlx5 {kind}, ours {our_kind}"));
    }
    if stale > 0 {
        notes.push(format!("{stale} BlueFlame bytes past the DS count: libmlx5 copies stale ring bytes, we copy zeros"));
    }
    fail
}

/// Replays one file of cases; prints one line per case and the counts,
/// and returns the names of the failing cases.
fn replay(path: &str) -> Vec<String> {
    let text = std::fs::read_to_string(path).expect("golden file");
    let cases = parse(&text);
    assert!(!cases.is_empty(), "{path}: no cases");
    let (mut pass, mut deviations, mut gaps, mut failed) = (0, 0, Vec::new(), Vec::new());
    for c in &cases {
        let ra = run_with_policy(c, (0xa5, 0xa5, 0x3c));
        let rb = run_with_policy(c, (0x5a, 0x5a, 0xc3));
        let (a, b) = match (ra, rb) {
            (Outcome::Ran(a), Outcome::Ran(b)) => (a, b),
            (Outcome::Gap(why), _) | (_, Outcome::Gap(why)) => {
                println!("GAP  {}: {why}", c.name);
                gaps.push(c.name.clone());
                continue;
            }
        };
        let mut notes = Vec::new();
        let f = check(c, &a, &b, &Scope::none(), &mut notes);
        if f.is_empty() {
            pass += 1;
            println!(
                "PASS {}{}",
                c.name,
                if notes.is_empty() {
                    String::new()
                } else {
                    format!(" ({})", notes.join("; "))
                }
            );
            continue;
        }
        // Differences: a documented libmlx5 deviation, recognised from the
        // case's inputs, excuses what it changes and nothing else.
        let devs = libmlx5_deviations::find(&c.kv);
        if devs.is_empty() {
            println!("FAIL {}:\n  {}", c.name, f.join("\n  "));
            failed.push(c.name.clone());
            continue;
        }
        let scope = libmlx5_deviations::scope(&c.kv, &devs);
        let mut notes = Vec::new();
        let rest = check(c, &a, &b, &scope, &mut notes);
        if rest.is_empty() {
            deviations += 1;
            println!(
                "DEVIATION {} (libmlx5 v44, {} differences; the rest matches): {}",
                c.name,
                f.len(),
                libmlx5_deviations::describe(&devs)
            );
        } else {
            println!(
                "FAIL {} (beyond the libmlx5 deviation {}):\n  {}",
                c.name,
                libmlx5_deviations::describe(&devs),
                rest.join("\n  ")
            );
            failed.push(c.name.clone());
        }
    }
    println!(
        "golden wqe cases ({path}): {} total, {pass} pass, {deviations} libmlx5 deviations, {} known gaps, {} fail",
        cases.len(),
        gaps.len(),
        failed.len()
    );
    failed
}

/// The sample (or the file of `MLX5DP_WQE_CASES`).
#[test]
fn golden_libmlx5_wqe_cases() {
    let path = std::env::var("MLX5DP_WQE_CASES").unwrap_or_else(|_| {
        concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/../specs/golden/libmlx5/wqe-cases.txt"
        )
        .to_string()
    });
    let failed = replay(&path);
    assert!(failed.is_empty(), "mismatching cases: {failed:?}");
}

/// The random cases `send_gen` produced with libmlx5.a.
#[test]
fn golden_libmlx5_oracle_random_cases() {
    let failed = replay(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../specs/golden/libmlx5-oracle/wqe-random.txt"
    ));
    assert!(failed.is_empty(), "mismatching cases: {failed:?}");
}
