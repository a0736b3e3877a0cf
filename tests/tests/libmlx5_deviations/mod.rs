//! Where libmlx5 v44 itself is wrong or inconsistent, recognised from a
//! send case's inputs (never from its name), for `golden_wqe` and
//! `encode_golden`.
//!
//! The random cases of `specs/golden/libmlx5-oracle/wqe-random.txt` (and any
//! other `send_gen` output) hit four behaviours of rdma-core v44.0
//! `providers/mlx5/qp.c` where libmlx5's bytes are not the ones a correct
//! provider writes. Each is detected here from the case's work requests and
//! from the WQE slots libmlx5 posted (`out.sq_slot*`), as a [`Deviation`]
//! naming the first work request libmlx5 got wrong. A test compares the case
//! in full first; only a case that differs *and* matches a condition is
//! compared again with [`Deviation::scope`] excused, and counted as a
//! deviation if that passes. See `tests/oracle/libmlx5/SEND.md` and its
//! `minimal-cases.txt` for one minimal case of each.
//!
//! - **A** `ibv_wr_atomic_*` + an SGE whose length is neither 0 nor 8:
//!   `_mlx5_send_wr_set_sge` writes the SGE's length as the data segment's
//!   `byte_count` (qp.c:1640) while `ibv_post_send` writes 8 for any atomic
//!   (`set_data_ptr_seg_atomic`, qp.c:283, used at qp.c:1103). An IB atomic
//!   operand is 8 bytes; mlx5dp writes 8 in both APIs. Only those
//!   `byte_count` fields are excused.
//! - **B** raw `ibv_wr_send` + `ibv_wr_set_sge` / `ibv_wr_set_inline_data` of
//!   exactly `eth_min_inline` (18) bytes: `copy_eth_inline_headers` consumes
//!   the whole buffer and records `index = 1, offset = 0` (qp.c:483-489), but
//!   these two setters only apply the offset (qp.c:1691-1692, 1916-1917), so
//!   the 18 header bytes go on the wire twice (a data segment or a second
//!   inline copy). The list setters (qp.c:1793, 2016) and `ibv_post_send`
//!   (qp.c:1093) honour the index; so does mlx5dp (header only).
//! - **C** `ibv_post_send` on a raw QP, a TSO work request after a SEND that
//!   left `sg_copy_ptr` non-zero: `sg_copy_ptr` is declared once per call
//!   (qp.c:811), set by the SEND's `copy_eth_inline_headers` (qp.c:488-489)
//!   and reset by neither the inline path nor the TSO branch (qp.c:1029-1046),
//!   so the TSO's data loop starts at the stale index/offset (qp.c:1093,
//!   1114): payload bytes are skipped (and escape the `max_tso` check).
//!   mlx5dp sends the TSO's own SGEs.
//! - **D** a TSO header that crosses the ring end, followed by another work
//!   request: `set_tso_eth_seg` advances past the wrapped header (qp.c:689)
//!   and the caller adds the eth segment size again (qp.c:1045; `ibv_wr_*`:
//!   qp.c:1449), so the data segment lands 32 bytes past the DS count, where
//!   the next WQE overwrites it; the posted WQE's DS-covered data segment is
//!   stale ring memory. mlx5dp writes it inside the DS count. (Without a
//!   following work request the misplaced bytes survive and each test's own
//!   TSO-wrap tolerance compares them 32 bytes on.)
//!
//! What [`scope`] leaves out: for A the atomic's `byte_count`s only. For B
//! and C everything from the affected work request on may differ (DS counts,
//! WQE sizes, hence later slots, the doorbell and the register write, and
//! for C even acceptance); what stays comparable is the WQEs before it, their
//! slots and wr_ids, that we accepted them (libmlx5 posted the affected one,
//! so it accepted them), where the affected WQE starts, and its head up to
//! the end of its inline header (but the DS count; nothing of it when we
//! refused the affected work request, C with its whole payload over
//! `max_tso`: [`Scope::refused_at_cut`]). For D the WQE sizes do
//! not change: only the TSO WQE after its inline header is left out (and the
//! 32 bytes after it where they hold what is left of the misplaced segment),
//! later WQEs, the producer index and the doorbell are compared.

use std::collections::BTreeMap;

/// `enum ibv_wr_opcode` values used by the conditions.
const IBV_WR_SEND: u64 = 2;
const IBV_WR_ATOMIC_CMP_AND_SWP: u64 = 5;
const IBV_WR_ATOMIC_FETCH_AND_ADD: u64 = 6;
const IBV_WR_TSO: u64 = 10;
/// `IBV_SEND_INLINE`.
const IBV_SEND_INLINE: u64 = 8;
/// `inline_hdr_start`: where a TSO/eth WQE's inline header starts in its
/// first WQEBB (ctrl 16 + eth segment fields 14).
const INLINE_HDR_START: u64 = 30;

/// One of the libmlx5 v44 behaviours of the module doc.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Class {
    A,
    B,
    C,
    D,
}

impl Class {
    /// One line: what libmlx5 does and why mlx5dp's bytes are right.
    pub fn reason(self) -> &'static str {
        match self {
            Class::A => {
                "libmlx5 ibv_wr_set_sge writes the SGE length as an atomic's byte_count \
                 (ibv_post_send writes 8); mlx5dp writes 8, the operand size"
            }
            Class::B => {
                "libmlx5 ibv_wr_set_sge/set_inline_data_eth ignore the index left by \
                 copy_eth_inline_headers and send an 18-byte frame's header twice; mlx5dp once"
            }
            Class::C => {
                "libmlx5 ibv_post_send reuses a SEND's sg_copy_ptr for a later TSO of the \
                 same call and skips payload; mlx5dp sends the TSO's own SGEs"
            }
            Class::D => {
                "libmlx5 puts the data segment after a wrapped TSO header 32 bytes past the DS \
                 count, where the next WQE overwrites it; mlx5dp writes it inside the DS count"
            }
        }
    }

    /// Where it is in rdma-core v44.0 `providers/mlx5/qp.c`.
    pub fn qp_c(self) -> &'static str {
        match self {
            Class::A => "qp.c:1640 (vs 283, 1103)",
            Class::B => "qp.c:483-489, 1691-1692, 1916-1917 (vs 1793, 2016, 1093)",
            Class::C => "qp.c:811, 488-489, 1029-1046, 1093, 1114",
            Class::D => "qp.c:689 + 1045 (wr_*: 1449)",
        }
    }
}

/// A libmlx5 deviation hit by one work request of a case.
#[derive(Clone, Copy, Debug)]
pub struct Deviation {
    pub class: Class,
    /// The work request libmlx5 got wrong.
    pub wr: usize,
}

/// What a test stops comparing for the deviations of a case, in ring byte
/// offsets (and offsets in the register write).
#[derive(Clone, Debug, Default)]
pub struct Scope {
    /// B, C: the WQEBBs from libmlx5's WQE of this work request on are not
    /// compared (its size, so every later slot, may differ)...
    from_wr: Option<usize>,
    /// ...except the first bytes of that WQE, up to the end of its inline
    /// header, and apart from the DS count (control byte 7).
    head: usize,
    /// A, D: (work request, byte range within libmlx5's WQE of it) not
    /// compared; A: the atomic's data segment byte counts; D: the TSO WQE
    /// after its inline header.
    excused: Vec<(usize, std::ops::Range<usize>)>,
    /// D: (work request, byte range within libmlx5's WQE of it) where
    /// libmlx5's byte may be ours 32 bytes earlier: the 32 bytes after the
    /// TSO WQE, where what is left of its misplaced data segment shows in
    /// fields the next WQE does not write (e.g. the control segment's `imm`).
    moved_32: Vec<(usize, std::ops::Range<usize>)>,
    /// D, when the TSO is the last WQE libmlx5 posted and the next work
    /// request was refused: libmlx5 rings the doorbell with the refused
    /// one's control segment, which it never wrote (the `ssssssss` face of a
    /// refusal), but where its misplaced data segment landed, so the bytes
    /// are marked written. Only "a register was written" is comparable.
    uar_stale: bool,
    /// The WQE slots libmlx5 posted, in order ([`lib_slots`]).
    lib_order: Vec<u32>,
    start: u32,
    mask: u32,
}

impl Scope {
    /// Nothing excused: the full comparison.
    pub fn none() -> Scope {
        Scope::default()
    }

    /// The first work request whose WQE is not compared (B, C), if any.
    pub fn cut_wr(&self) -> Option<usize> {
        self.from_wr
    }

    /// The same scope for a run that refused the affected work request
    /// itself (C: the TSO payload libmlx5 skipped is counted against
    /// `max_tso` by mlx5dp): nothing of its WQE is compared, not even the
    /// head, since no WQE of ours stands there.
    pub fn refused_at_cut(&self) -> Scope {
        Scope {
            head: 0,
            ..self.clone()
        }
    }

    /// Offset of ring byte `i` in libmlx5's WQE of work request `wr`.
    fn rel(&self, wr: usize, i: usize) -> usize {
        let ring_len = (self.mask as usize + 1) * 64;
        (i + ring_len - self.lib_order[wr] as usize * 64) % ring_len
    }

    /// Whether ring byte `i` is still compared.
    pub fn compared(&self, i: usize) -> bool {
        if self
            .excused
            .iter()
            .any(|(wr, r)| r.contains(&self.rel(*wr, i)))
        {
            return false;
        }
        let Some(k) = self.from_wr else {
            return true;
        };
        let dist = |slot: u32| slot.wrapping_sub(self.start) & self.mask;
        let rel = self.rel(k, i);
        dist((i / 64) as u32) < dist(self.lib_order[k]) || (rel < self.head && rel != 7)
    }

    /// Whether libmlx5's byte at ring offset `i` may be ours 32 bytes
    /// earlier (D).
    #[allow(
        dead_code,
        reason = "encode_golden only: golden_wqe's own TSO-wrap tolerance compares \
                  every relocated byte 32 bytes on"
    )]
    pub fn moved_32(&self, i: usize) -> bool {
        self.moved_32
            .iter()
            .any(|(wr, r)| r.contains(&self.rel(*wr, i)))
    }

    /// Whether libmlx5's register write names the refused work request
    /// with its misplaced data segment's bytes (D): compare only that a
    /// register was written.
    pub fn uar_stale(&self) -> bool {
        self.uar_stale
    }

    /// Whether byte `j` of the register write (a copy of libmlx5's last
    /// WQE for BlueFlame, its first 8 bytes for a doorbell) is still
    /// compared.
    pub fn uar_compared(&self, j: usize) -> bool {
        self.from_wr.is_none()
            && !self
                .excused
                .iter()
                .any(|(wr, r)| *wr + 1 == self.lib_order.len() && r.contains(&j))
    }
}

fn num(kv: &BTreeMap<String, String>, k: &str) -> u64 {
    kv.get(k).map_or(0, |s| {
        let s = s.trim();
        if let Some(h) = s.strip_prefix("0x") {
            u64::from_str_radix(h, 16).expect("hex number")
        } else if let Some(n) = s.strip_prefix('-') {
            n.parse::<u64>().expect("number").wrapping_neg()
        } else {
            s.parse().expect("number")
        }
    })
}

/// The WQE slots libmlx5 posted, in posting order (`out.sq_slot<slot>`
/// keys, ordered by their distance from `start_cur_post`).
pub fn lib_slots(kv: &BTreeMap<String, String>) -> Vec<u32> {
    let mask = (num(kv, "sq_wqe_cnt") as u32).wrapping_sub(1);
    let start = num(kv, "start_cur_post") as u32 & mask;
    let mut s: Vec<u32> = kv
        .keys()
        .filter_map(|k| k.strip_prefix("out.sq_slot"))
        .map(|n| n.parse().expect("slot"))
        .collect();
    s.sort_by_key(|&slot: &u32| slot.wrapping_sub(start) & mask);
    s
}

fn sge_lens(kv: &BTreeMap<String, String>, i: usize) -> Vec<u64> {
    (0..num(kv, &format!("wr{i}.num_sge")))
        .map(|j| num(kv, &format!("wr{i}.sge{j}.length")))
        .collect()
}

/// The deviations of a case, from its inputs and the slots libmlx5 posted.
pub fn find(kv: &BTreeMap<String, String>) -> Vec<Deviation> {
    let mut out = Vec::new();
    let get = |k: &str| kv.get(k).map_or("", String::as_str);
    let wr_api = get("api") == "wr_api";
    let raw = get("qp_type") == "RAW_PACKET";
    let nwr = num(kv, "nwr") as usize;
    let emi = num(kv, "eth_min_inline");
    let ring_len = num(kv, "sq_wqe_cnt") * 64;
    let slots = lib_slots(kv);
    // Only a work request libmlx5 posted can have been posted wrongly.
    let posted = |i: usize| i < slots.len();
    for i in (0..nwr).filter(|&i| posted(i)) {
        let op = num(kv, &format!("wr{i}.opcode_num"));
        let lens = sge_lens(kv, i);
        let setter = get(&format!("wr{i}.wr_api_setter"));
        if wr_api
            && matches!(op, IBV_WR_ATOMIC_CMP_AND_SWP | IBV_WR_ATOMIC_FETCH_AND_ADD)
            && lens.iter().any(|&l| l != 0 && l != 8)
        {
            out.push(Deviation {
                class: Class::A,
                wr: i,
            });
        }
        if wr_api
            && raw
            && op == IBV_WR_SEND
            && emi == 18
            && matches!(setter, "set_sge" | "set_inline_data")
            && lens.first() == Some(&18)
        {
            out.push(Deviation {
                class: Class::B,
                wr: i,
            });
        }
        if op == IBV_WR_TSO
            && i + 1 < nwr
            && u64::from(slots[i]) * 64 + INLINE_HDR_START + num(kv, &format!("wr{i}.tso.hdr_sz"))
                > ring_len
        {
            out.push(Deviation {
                class: Class::D,
                wr: i,
            });
        }
    }
    if !wr_api && raw {
        // `sg_copy_ptr` of one `_mlx5_post_send` call, as the SENDs leave it.
        let (mut index, mut offset) = (0usize, 0u64);
        for i in 0..nwr {
            let op = num(kv, &format!("wr{i}.opcode_num"));
            let lens = sge_lens(kv, i);
            if op == IBV_WR_TSO {
                if (index, offset) != (0, 0) && !lens.is_empty() && posted(i) {
                    out.push(Deviation {
                        class: Class::C,
                        wr: i,
                    });
                }
                // The data loop (qp.c:1114) clears the offset at the first
                // non-empty SGE from `index` on.
                if lens.iter().skip(index).any(|&l| l != 0) {
                    offset = 0;
                }
                continue;
            }
            if op != IBV_WR_SEND || lens.is_empty() {
                continue;
            }
            // copy_eth_inline_headers (qp.c:421-489).
            let (mut j, mut copy, mut length) = (0usize, 0u64, lens[0]);
            if lens[0] >= 18 {
                copy = emi;
            } else {
                let mut left = emi;
                while j < lens.len() && left > 0 {
                    copy = lens[j].min(left);
                    left -= copy;
                    length = lens[j];
                    j += 1;
                }
                if left > 0 {
                    break; // EINVAL: the rest of the list is not posted
                }
                j = j.saturating_sub(1);
            }
            if length == copy {
                j += 1;
                copy = 0;
            }
            (index, offset) = (j, copy);
            // Without IBV_SEND_INLINE the data loop runs and clears the offset.
            if num(kv, &format!("wr{i}.send_flags_num")) & IBV_SEND_INLINE == 0
                && lens.iter().skip(index).any(|&l| l != 0)
            {
                offset = 0;
            }
        }
    }
    out
}

/// What to excuse for `devs`: for A each data segment's `byte_count` of the
/// atomic's WQE; for D the TSO WQE from the end of its inline header on
/// (later WQEs stay where they are and are compared); for B and C every WQE
/// from the first affected one on, but the head of that one.
pub fn scope(kv: &BTreeMap<String, String>, devs: &[Deviation]) -> Scope {
    let lib_order = lib_slots(kv);
    let mask = (num(kv, "sq_wqe_cnt") as u32).wrapping_sub(1);
    let mut s = Scope {
        start: num(kv, "start_cur_post") as u32 & mask,
        mask,
        ..Scope::none()
    };
    let hdr_end = |hdr: u64| (INLINE_HDR_START + hdr).next_multiple_of(16) as usize;
    for d in devs {
        match d.class {
            Class::A => {
                // ctrl 16 + raddr 16 + atomic 16 (+ xrc 16): the data segments.
                let first = if kv.get("qp_type").is_some_and(|t| t.starts_with("XRC")) {
                    64
                } else {
                    48
                };
                for j in 0..sge_lens(kv, d.wr).len() {
                    let at = first + 16 * j;
                    s.excused.push((d.wr, at..at + 4));
                }
            }
            Class::D => {
                let next = lib_order
                    .get(d.wr + 1)
                    .copied()
                    .unwrap_or(num(kv, "out.sq_cur_post") as u32 & mask);
                let len = (next.wrapping_sub(lib_order[d.wr]) & mask) as usize * 64;
                let hdr = hdr_end(num(kv, &format!("wr{}.tso.hdr_sz", d.wr)));
                s.excused.push((d.wr, hdr..len));
                s.moved_32.push((d.wr, len..len + 32));
                s.uar_stale |= d.wr + 1 == lib_order.len() && num(kv, "out.ret") != 0;
            }
            Class::B | Class::C if s.from_wr.is_some_and(|k| k <= d.wr) => {}
            Class::B => {
                s.from_wr = Some(d.wr);
                s.head = hdr_end(num(kv, "eth_min_inline"));
            }
            Class::C => {
                s.from_wr = Some(d.wr);
                s.head = hdr_end(num(kv, &format!("wr{}.tso.hdr_sz", d.wr)));
            }
        }
    }
    s.lib_order = lib_order;
    s
}

/// One line per deviation, for the test log.
pub fn describe(devs: &[Deviation]) -> String {
    devs.iter()
        .map(|d| {
            format!(
                "class {:?} at wr{}: {} [{}]",
                d.class,
                d.wr,
                d.class.reason(),
                d.class.qp_c()
            )
        })
        .collect::<Vec<_>>()
        .join("; ")
}
