//! Checks `specs/prm.tsv` and `specs/constants.tsv` against `mlx5dp::prm`,
//! both ways.
//!
//! Every table row is matched to a registry entry that names the Rust code
//! (a declarative macro below) and checked: struct sizes, field offsets
//! (`offset_of!`) and widths, and for every integer field and every sub-field
//! a set/get round trip whose serialised bytes must hold the value exactly at
//! the bits the row names (big-endian) with every other bit zero. A row
//! without an entry, or an entry without a row, fails the test, and so does
//! a struct, field, bit range, enumeration or constant that
//! `core/src/prm/*.rs` declares but the tables do not list.

use std::collections::{BTreeMap, BTreeSet};
use std::panic::{catch_unwind, AssertUnwindSafe};

use mlx5dp::prm::*;
use mlx5dp_tests::prm_source::{self, PrmSource};
use mlx5dp_tests::tsv::{self, Row};
use zerocopy::{FromZeros, Immutable, IntoBytes};

// ---------------------------------------------------------------------------
// Value conversions used by the registry.

/// A sub-field getter's return value, widened.
trait ToU64 {
    fn to_u64(self) -> u64;
}

impl ToU64 for bool {
    fn to_u64(self) -> u64 {
        u64::from(self)
    }
}

macro_rules! to_u64_from {
    ($($t:ty),*) => {$(
        impl ToU64 for $t {
            fn to_u64(self) -> u64 {
                u64::from(self)
            }
        }
    )*};
}
to_u64_from!(u8, u16, u32, u64);

impl ToU64 for usize {
    fn to_u64(self) -> u64 {
        u64::try_from(self).expect("usize fits in u64")
    }
}

/// A sub-field setter's argument, narrowed (test values always fit).
trait FromU64 {
    fn from_u64(v: u64) -> Self;
}

impl FromU64 for bool {
    fn from_u64(v: u64) -> Self {
        v != 0
    }
}

macro_rules! from_u64_for {
    ($($t:ty),*) => {$(
        impl FromU64 for $t {
            fn from_u64(v: u64) -> Self {
                <$t>::try_from(v).expect("test value fits the setter type")
            }
        }
    )*};
}
from_u64_for!(u8, u16, u32, u64);

/// A whole field read and written as one integer: `Some` for `u8` and the
/// big-endian types (and the bitfield words built on them), `None` for byte
/// arrays and nested structs.
trait Word {
    fn word(&self) -> Option<u64>;
    fn set_word(&mut self, v: u64) -> bool;
}

impl Word for u8 {
    fn word(&self) -> Option<u64> {
        Some(u64::from(*self))
    }
    fn set_word(&mut self, v: u64) -> bool {
        u8::try_from(v).map(|x| *self = x).is_ok()
    }
}

impl Word for u64 {
    fn word(&self) -> Option<u64> {
        Some(*self)
    }
    fn set_word(&mut self, v: u64) -> bool {
        *self = v;
        true
    }
}

macro_rules! word_be {
    ($($t:ty => $n:ty),*) => {$(
        impl Word for $t {
            fn word(&self) -> Option<u64> {
                Some(u64::from(self.get()))
            }
            fn set_word(&mut self, v: u64) -> bool {
                <$n>::try_from(v).map(|x| self.set(x)).is_ok()
            }
        }
    )*};
}
word_be!(Be16 => u16, Be32 => u32, Be64 => u64);

/// Bitfield words stored as `Be32`.
macro_rules! word_bitfield_be32 {
    ($($t:ty),*) => {$(
        impl Word for $t {
            fn word(&self) -> Option<u64> {
                Some(u64::from(self.into_bits().get()))
            }
            fn set_word(&mut self, v: u64) -> bool {
                u32::try_from(v).map(|x| *self = <$t>::from_bits(Be32::new(x))).is_ok()
            }
        }
    )*};
}
word_bitfield_be32!(
    OpmodIdxOpcode,
    QpnDs,
    InlineByteCount,
    DqpDct,
    GrhGidFl,
    VlanInsert,
    CqArmWord,
    FlagsRqpn,
    SrqnUidx,
    SopDropQpn,
    SWqeOpcodeQpn,
    FtagByteCnt
);

/// Bitfield words of one byte, and the native-`u32` striding-RQ count.
macro_rules! word_bitfield_native {
    ($($t:ty => $n:ty),*) => {$(
        impl Word for $t {
            fn word(&self) -> Option<u64> {
                Some(u64::from(self.into_bits()))
            }
            fn set_word(&mut self, v: u64) -> bool {
                <$n>::try_from(v).map(|x| *self = <$t>::from_bits(x)).is_ok()
            }
        }
    )*};
}
word_bitfield_native!(
    FmCeSe => u8,
    StatRateSl => u8,
    FlMlid => u8,
    EthCsFlags => u8,
    SwpFlags => u8,
    OpOwn => u8,
    HdsIpExt => u8,
    L4L3HdrType => u8,
    MprqByteCnt => u32
);

/// Byte arrays and nested formats: no integer view.
macro_rules! word_none {
    ($($t:ty),*) => {$(
        impl Word for $t {
            fn word(&self) -> Option<u64> {
                None
            }
            fn set_word(&mut self, _: u64) -> bool {
                false
            }
        }
    )*};
}
word_none!(SrqNextSeg, DataSeg, Cqe64);

impl<T, const N: usize> Word for [T; N] {
    fn word(&self) -> Option<u64> {
        None
    }
    fn set_word(&mut self, _: u64) -> bool {
        false
    }
}

// ---------------------------------------------------------------------------
// Spec rows.

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Endian {
    Be,
    U8,
    Bytes,
}

#[derive(Clone, Debug)]
struct SpecRow {
    line: usize,
    st: String,
    field: String,
    byte_offset: usize,
    byte_width: usize,
    bit_lo: u32,
    bit_hi: u32,
    endian: Endian,
}

impl SpecRow {
    fn parse(row: &Row) -> Result<Self, String> {
        let endian = match row.get("endianness")? {
            "be" => Endian::Be,
            "u8" => Endian::U8,
            "bytes" => Endian::Bytes,
            other => return Err(format!("line {}: endianness {other:?}", row.line)),
        };
        let bit = |col: &str| -> Result<u32, String> {
            let v = row.int(col)?;
            u32::try_from(v).map_err(|_| format!("line {}: {col} too large", row.line))
        };
        let spec = SpecRow {
            line: row.line,
            st: row.get("struct")?.to_owned(),
            field: row.get("field")?.to_owned(),
            byte_offset: row.usize("byte_offset")?,
            byte_width: row.usize("byte_width")?,
            bit_lo: bit("bit_lo")?,
            bit_hi: bit("bit_hi")?,
            endian,
        };
        spec.validate()?;
        Ok(spec)
    }

    /// Internal consistency of one row.
    fn validate(&self) -> Result<(), String> {
        let bits = self.byte_width * 8;
        let e = |m: &str| {
            Err(format!(
                "line {} ({}.{}): {m}",
                self.line, self.st, self.field
            ))
        };
        if self.byte_width == 0 {
            return e("zero width");
        }
        if self.bit_lo > self.bit_hi || self.bit_hi as usize >= bits {
            return e("bit range outside the containing field");
        }
        let whole = self.bit_lo == 0 && self.bit_hi as usize == bits - 1;
        if !self.is_sub() && !whole {
            return e("a whole field must span bits 0..width*8-1");
        }
        match self.endian {
            Endian::U8 if self.byte_width != 1 => e("u8 must be one byte wide"),
            Endian::Be if !matches!(self.byte_width, 2 | 4 | 8) => {
                e("be must be 2, 4 or 8 bytes wide")
            }
            Endian::Bytes if self.is_sub() => e("a sub-field cannot be raw bytes"),
            _ => Ok(()),
        }
    }

    fn is_sub(&self) -> bool {
        self.field.contains('.')
    }

    fn key(&self) -> (String, String) {
        (self.st.clone(), self.field.clone())
    }

    fn bits(&self) -> u32 {
        self.bit_hi - self.bit_lo + 1
    }

    /// The serialised struct expected when the row's bits hold `v` and
    /// everything else is zero.
    fn expected(&self, size: usize, v: u64) -> Result<Vec<u8>, String> {
        let mut out = vec![0u8; size];
        if self.byte_offset + self.byte_width > size {
            return Err(format!(
                "line {}: field ends past the struct ({size} bytes)",
                self.line
            ));
        }
        let word = u128::from(v) << self.bit_lo;
        for i in 0..self.byte_width {
            let shift = 8 * (self.byte_width - 1 - i);
            out[self.byte_offset + i] = u8::try_from((word >> shift) & 0xff).expect("one byte");
        }
        Ok(out)
    }
}

/// The values written into an `n`-bit field: all ones, both alternating
/// patterns, distinct bytes (catches byte swaps, which the symmetric
/// patterns do not), the lowest and the highest bit.
fn test_values(n: u32) -> Vec<u64> {
    let mask = if n >= 64 { u64::MAX } else { (1u64 << n) - 1 };
    let mut v = vec![
        mask,
        0xaaaa_aaaa_aaaa_aaaa & mask,
        0x5555_5555_5555_5555 & mask,
        0x0123_4567_89ab_cdef & mask,
        1,
        1u64 << (n - 1),
    ];
    v.dedup();
    v
}

fn hex(bytes: &[u8]) -> String {
    bytes
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect::<Vec<_>>()
        .join(" ")
}

// ---------------------------------------------------------------------------
// Generic checks, one per kind of registry entry.

type Check = Box<dyn Fn(&SpecRow) -> Result<(), String>>;

#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Debug)]
enum Kind {
    Size,
    Field,
    View,
    Sub,
}

struct Entry {
    kind: Kind,
    check: Check,
}

fn size_entry<T: FromZeros + IntoBytes + Immutable + 'static>(declared: usize) -> Entry {
    Entry {
        kind: Kind::Size,
        check: Box::new(move |row| {
            let actual = core::mem::size_of::<T>();
            let zero = T::new_zeroed();
            if actual != row.byte_width
                || declared != row.byte_width
                || zero.as_bytes().len() != actual
            {
                return Err(format!(
                    "size: spec {}, size_of {actual}, SIZE {declared}",
                    row.byte_width
                ));
            }
            if row.byte_offset != 0 || row.endian != Endian::Bytes {
                return Err("a _size row has offset 0 and endianness bytes".to_owned());
            }
            Ok(())
        }),
    }
}

/// Checks a typed word access (`word`/`set_word`) against the row's bytes.
fn word_round_trip<T: FromZeros + IntoBytes + Immutable + 'static>(
    row: &SpecRow,
    word: fn(&T) -> Option<u64>,
    set_word: fn(&mut T, u64) -> bool,
) -> Result<(), String> {
    if word(&T::new_zeroed()).is_none() {
        return Err("spec says be/u8 but the Rust type is not an integer word".to_owned());
    }
    for v in test_values(row.bits()) {
        let mut s = T::new_zeroed();
        if !set_word(&mut s, v) {
            return Err(format!("value {v:#x} does not fit the Rust type"));
        }
        let want = row.expected(core::mem::size_of::<T>(), v)?;
        let got = s.as_bytes();
        if got != want.as_slice() {
            return Err(format!(
                "write {v:#x}: bytes\n   got  {}\n   want {}",
                hex(got),
                hex(&want)
            ));
        }
        let back = word(&s);
        if back != Some(v) {
            return Err(format!("write {v:#x}: read back {back:x?}"));
        }
    }
    Ok(())
}

fn field_entry<T: FromZeros + IntoBytes + Immutable + 'static>(
    offset: usize,
    bytes_mut: fn(&mut T) -> &mut [u8],
    word: fn(&T) -> Option<u64>,
    set_word: fn(&mut T, u64) -> bool,
) -> Entry {
    Entry {
        kind: Kind::Field,
        check: Box::new(move |row| {
            if offset != row.byte_offset {
                return Err(format!("offset_of = {offset}, spec {}", row.byte_offset));
            }
            let mut s = T::new_zeroed();
            let width = bytes_mut(&mut s).len();
            if width != row.byte_width {
                return Err(format!("width = {width}, spec {}", row.byte_width));
            }
            // The field's own bytes land at the spec offset in the serialised struct.
            for (i, b) in bytes_mut(&mut s).iter_mut().enumerate() {
                *b = u8::try_from(i % 255 + 1).expect("one byte");
            }
            let mut want = vec![0u8; core::mem::size_of::<T>()];
            for i in 0..width {
                want[offset + i] = u8::try_from(i % 255 + 1).expect("one byte");
            }
            if s.as_bytes() != want.as_slice() {
                return Err(format!(
                    "field bytes do not land at the spec offset:\n   got  {}\n   want {}",
                    hex(s.as_bytes()),
                    hex(&want)
                ));
            }
            match row.endian {
                Endian::Bytes => match word(&T::new_zeroed()) {
                    None => Ok(()),
                    Some(_) => {
                        Err("spec says bytes but the Rust type is an integer word".to_owned())
                    }
                },
                Endian::Be | Endian::U8 => word_round_trip(row, word, set_word),
            }
        }),
    }
}

fn view_entry<T: FromZeros + IntoBytes + Immutable + 'static>(
    word: fn(&T) -> Option<u64>,
    set_word: fn(&mut T, u64) -> bool,
) -> Entry {
    Entry {
        kind: Kind::View,
        check: Box::new(move |row| match row.endian {
            Endian::Bytes => Err("a view must be an integer word".to_owned()),
            Endian::Be | Endian::U8 => word_round_trip(row, word, set_word),
        }),
    }
}

fn sub_entry<T: FromZeros + IntoBytes + Immutable + 'static>(
    get: fn(&T) -> u64,
    set: fn(&mut T, u64),
) -> Entry {
    Entry {
        kind: Kind::Sub,
        check: Box::new(move |row| {
            for v in test_values(row.bits()) {
                let mut s = T::new_zeroed();
                set(&mut s, v);
                let want = row.expected(core::mem::size_of::<T>(), v)?;
                let got = s.as_bytes();
                if got != want.as_slice() {
                    return Err(format!(
                        "set {v:#x}: bytes\n   got  {}\n   want {}",
                        hex(got),
                        hex(&want)
                    ));
                }
                let back = get(&s);
                if back != v {
                    return Err(format!("set {v:#x}: get returned {back:#x}"));
                }
            }
            Ok(())
        }),
    }
}

#[derive(Default)]
struct Registry {
    entries: BTreeMap<(String, String), Entry>,
}

impl Registry {
    fn insert(&mut self, st: &str, field: &str, entry: Entry) {
        let old = self
            .entries
            .insert((st.to_owned(), field.to_owned()), entry);
        assert!(old.is_none(), "duplicate registry entry {st}.{field}");
    }
}

// ---------------------------------------------------------------------------
// The registry: struct name, field name -> code. Sub-fields name their getter
// and setter; views name the accessor pair of a struct method.

macro_rules! layout {
    ($reg:ident; $(
        $ty:ident { $( $field:ident $( : [ $( $sub:ident $set:ident ),* $(,)? ] )? ),* $(,)? }
    )*) => {$(
        $reg.insert(stringify!($ty), "_size", size_entry::<$ty>(<$ty>::SIZE));
        $(
            $reg.insert(
                stringify!($ty),
                stringify!($field),
                field_entry::<$ty>(
                    core::mem::offset_of!($ty, $field),
                    |s| s.$field.as_mut_bytes(),
                    |s| Word::word(&s.$field),
                    |s, v| Word::set_word(&mut s.$field, v),
                ),
            );
            $($(
                $reg.insert(
                    stringify!($ty),
                    concat!(stringify!($field), ".", stringify!($sub)),
                    sub_entry::<$ty>(
                        |s| ToU64::to_u64(s.$field.$sub()),
                        |s, v| s.$field.$set(FromU64::from_u64(v)),
                    ),
                );
            )*)?
        )*
    )*};
}

macro_rules! views {
    ($reg:ident; $(
        $ty:ident . $view:ident / $set_view:ident : [ $( $sub:ident $set:ident ),* $(,)? ]
    ),* $(,)?) => {$(
        $reg.insert(
            stringify!($ty),
            stringify!($view),
            view_entry::<$ty>(
                |s| Word::word(&s.$view()),
                |s, v| {
                    let mut w = s.$view();
                    let ok = Word::set_word(&mut w, v);
                    s.$set_view(w);
                    ok
                },
            ),
        );
        $(
            $reg.insert(
                stringify!($ty),
                concat!(stringify!($view), ".", stringify!($sub)),
                sub_entry::<$ty>(
                    |s| ToU64::to_u64(s.$view().$sub()),
                    |s, v| {
                        let mut w = s.$view();
                        w.$set(FromU64::from_u64(v));
                        s.$set_view(w);
                    },
                ),
            );
        )*
    )*};
}

/// Views: accessor-method fields that overlay other fields (C unions). For
/// the source cross-check: (struct, view, bitfield type or `-`).
const VIEWS: &[(&str, &str, &str)] = &[
    ("Av", "dc_key", "-"),
    ("EthSeg", "vlan_insert", "VlanInsert"),
    ("Cqe64", "mprq_byte_cnt", "MprqByteCnt"),
];

fn registry() -> Registry {
    let mut reg = Registry::default();
    layout! { reg;
        CtrlSeg {
            opmod_idx_opcode: [opcode set_opcode, wqe_index set_wqe_index, opmod set_opmod],
            qpn_ds: [ds set_ds, qpn set_qpn],
            signature,
            dci_stream_channel_id,
            fm_ce_se: [se set_se, ce set_ce, fm set_fm],
            imm,
        }
        DataSeg { byte_count, lkey, addr }
        InlineSeg { byte_count: [byte_count set_byte_count, inline set_inline] }
        RaddrSeg { raddr, rkey, reserved }
        AtomicSeg { swap_add, compare }
        MaskedAtomicSeg64 { swap_add, compare, swap_add_mask, compare_mask }
        MaskedCs32Seg { swap, compare, swap_mask, compare_mask }
        MaskedFa32Seg { add, field_boundary, reserved }
        MaskedFa64Seg { add, field_boundary }
        XrcSeg { xrc_srqn, reserved }
        UmrCtrlSeg { flags, rsvd0, klm_octowords, translation_offset, mkey_mask, rsvd1 }
        MkeyContextSeg {
            free,
            reserved1,
            access_flags,
            sf,
            qpn_mkey,
            reserved2,
            flags_pd,
            start_addr,
            len,
            bsf_octword_size,
            reserved3,
            translations_octword_size,
            reserved4,
            log_page_size,
            reserved,
        }
        UmrKlmSeg { byte_count, mkey, address }
        Av {
            qkey,
            key_reserved,
            dqp_dct: [dqp_dct set_dqp_dct, extended set_extended],
            stat_rate_sl: [sl set_sl, stat_rate set_stat_rate],
            fl_mlid: [mlid set_mlid, fl set_fl],
            rlid,
            reserved0,
            rmac,
            tclass,
            hop_limit,
            grh_gid_fl: [flow_label set_flow_label, sgid_index set_sgid_index, grh set_grh],
            rgid,
        }
        AvBase {
            qkey,
            key_reserved,
            dqp_dct: [dqp_dct set_dqp_dct, extended set_extended],
            stat_rate_sl: [sl set_sl, stat_rate set_stat_rate],
            fl_mlid: [mlid set_mlid, fl set_fl],
            rlid,
        }
        EthSeg {
            swp_outer_l4_offset,
            swp_outer_l3_offset,
            swp_inner_l4_offset,
            swp_inner_l3_offset,
            cs_flags: [
                l3_inner_csum set_l3_inner_csum,
                l4_inner_csum set_l4_inner_csum,
                l3_csum set_l3_csum,
                l4_csum set_l4_csum,
            ],
            swp_flags: [
                inner_l3_ipv6 set_inner_l3_ipv6,
                inner_l4_udp set_inner_l4_udp,
                outer_l3_ipv6 set_outer_l3_ipv6,
                outer_l4_udp set_outer_l4_udp,
            ],
            mss,
            flow_table_metadata,
            inline_hdr_sz,
            inline_hdr_start,
        }
        SrqNextSeg { rsvd0, next_wqe_index, signature, rsvd1 }
        MprqWqe { nseg, dseg }
        QpDbrec { rcv, snd }
        CqDbrec { set_ci, arm: [ci set_ci, cmd set_cmd, arm_sn set_arm_sn] }
        Cqe64 {
            pkt_info,
            rsvd1,
            wqe_id,
            lro_tcppsh_abort_dupack,
            lro_min_ttl,
            lro_tcp_win,
            lro_ack_seq_num,
            rss_hash_result,
            rss_hash_type,
            ml_path,
            rsvd18,
            check_sum,
            slid,
            flags_rqpn: [rqpn set_rqpn, sl set_sl, grh set_grh],
            hds_ip_ext: [l2_ok set_l2_ok, l3_ok set_l3_ok, l4_ok set_l4_ok],
            l4_l3_hdr_type: [
                cvlan_stripped set_cvlan_stripped,
                l3_hdr_type set_l3_hdr_type,
                l4_hdr_type set_l4_hdr_type,
                ip_frag set_ip_frag,
            ],
            vlan_info,
            srqn_uidx: [srqn_uidx set_srqn_uidx, lro_num_seg set_lro_num_seg],
            imm_inval_pkey,
            app,
            app_op,
            app_info,
            byte_cnt,
            timestamp,
            sop_drop_qpn: [qpn set_qpn, sop set_sop],
            wqe_counter,
            signature,
            op_own: [owner set_owner, se set_se, format set_format, opcode set_opcode],
        }
        ErrCqe {
            rsvd0,
            eth_wqe_id,
            rsvd4,
            ib_stride_index,
            rsvd22,
            srqn,
            rsvd36,
            byte_cnt,
            rsvd48,
            hw_err_synd,
            hw_synd_type,
            vendor_err_synd,
            syndrome,
            s_wqe_opcode_qpn: [qpn set_qpn, s_wqe_opcode set_s_wqe_opcode],
            wqe_counter,
            signature,
            op_own: [owner set_owner, se set_se, format set_format, opcode set_opcode],
        }
        Cqe128 { inline_data, cqe }
        MiniCqe { bytes }
        MiniCqeHash { rx_hash_result, byte_cnt }
        MiniCqeCsum { checksum, rsvd, byte_cnt }
        MiniCqeFtagStridx {
            flow_tag_low,
            stride_idx,
            ftag_byte_cnt: [byte_cnt set_byte_cnt, flow_tag_high set_flow_tag_high],
        }
        MiniCqeCsumStridx { checksum, stride_idx, byte_cnt }
        MiniCqeL34hStridx {
            rsvd,
            hdr_type: [
                cvlan_stripped set_cvlan_stripped,
                l3_hdr_type set_l3_hdr_type,
                l4_hdr_type set_l4_hdr_type,
                ip_frag set_ip_frag,
            ],
            stride_idx,
            byte_cnt,
        }
        MiniCqeReq { wqe_counter, s_wqe_opcode, rsvd, byte_cnt }
        MiniCqeArray { minis }
        EnhancedCompressedCqe {
            minis,
            rsvd,
            validity_iteration_count,
            op_own: [owner set_owner, se set_se, format set_format, opcode set_opcode],
        }
    }
    views! { reg;
        Av.dc_key / set_dc_key: [],
        EthSeg.vlan_insert / set_vlan_insert: [
            vlan_tci set_vlan_tci,
            svlan set_svlan,
            insert set_insert,
        ],
        Cqe64.mprq_byte_cnt / set_mprq_byte_cnt: [
            byte_cnt set_byte_cnt,
            strides set_strides,
            filler set_filler,
        ],
    }
    reg
}

// ---------------------------------------------------------------------------
// prm.tsv

fn load_prm() -> Vec<SpecRow> {
    let table = tsv::read("prm.tsv", tsv::PRM_COLUMNS).expect("specs/prm.tsv");
    table
        .rows
        .iter()
        .map(|r| SpecRow::parse(r).expect("well-formed prm.tsv row"))
        .collect()
}

fn report(errors: &[String]) {
    assert!(
        errors.is_empty(),
        "{} problem(s):\n{}",
        errors.len(),
        errors.join("\n")
    );
}

/// Every row has a registry entry that passes; every entry has a row.
#[test]
fn prm_table_matches_code_both_ways() {
    let rows = load_prm();
    let reg = registry();
    let mut errors = Vec::new();
    let mut seen = BTreeSet::new();
    let mut checked = BTreeMap::<Kind, usize>::new();
    for row in &rows {
        let key = row.key();
        if !seen.insert(key.clone()) {
            errors.push(format!(
                "line {}: duplicate row {}.{}",
                row.line, key.0, key.1
            ));
            continue;
        }
        let Some(entry) = reg.entries.get(&key) else {
            errors.push(format!(
                "line {}: {}.{} has no registry entry in tests/tests/spec_table.rs",
                row.line, key.0, key.1
            ));
            continue;
        };
        let outcome = catch_unwind(AssertUnwindSafe(|| (entry.check)(row)));
        match outcome {
            Ok(Ok(())) => *checked.entry(entry.kind).or_default() += 1,
            Ok(Err(e)) => errors.push(format!("line {} {}.{}: {e}", row.line, key.0, key.1)),
            Err(_) => errors.push(format!(
                "line {} {}.{}: check panicked",
                row.line, key.0, key.1
            )),
        }
    }
    for key in reg.entries.keys() {
        if !seen.contains(key) {
            errors.push(format!(
                "registry entry {}.{} has no row in specs/prm.tsv",
                key.0, key.1
            ));
        }
    }
    report(&errors);
    // Every kind of check really ran.
    for kind in [Kind::Size, Kind::Field, Kind::View, Kind::Sub] {
        assert!(
            checked.get(&kind).copied().unwrap_or(0) > 0,
            "no {kind:?} row was checked"
        );
    }
    assert_eq!(checked.values().sum::<usize>(), rows.len());
}

/// The table is self-consistent: every struct has a size row, whole fields
/// tile it exactly, sub-fields sit inside their parent row and do not overlap.
#[test]
fn prm_table_is_consistent() {
    let rows = load_prm();
    let reg = registry();
    let mut errors = Vec::new();
    let mut structs: BTreeMap<&str, Vec<&SpecRow>> = BTreeMap::new();
    for row in &rows {
        structs.entry(row.st.as_str()).or_default().push(row);
    }
    for (st, rows) in &structs {
        let Some(size) = rows
            .iter()
            .find(|r| r.field == "_size")
            .map(|r| r.byte_width)
        else {
            errors.push(format!("{st}: no _size row"));
            continue;
        };
        let is_view = |r: &SpecRow| {
            reg.entries
                .get(&r.key())
                .is_some_and(|e| e.kind == Kind::View)
        };
        // Whole (non-view) fields tile [0, size).
        let mut whole: Vec<&&SpecRow> = rows
            .iter()
            .filter(|r| r.field != "_size" && !r.is_sub() && !is_view(r))
            .collect();
        whole.sort_by_key(|r| r.byte_offset);
        let mut next = 0;
        for r in &whole {
            if r.byte_offset != next {
                errors.push(format!(
                    "{st}.{}: starts at {}, previous field ends at {next}",
                    r.field, r.byte_offset
                ));
            }
            next = r.byte_offset + r.byte_width;
        }
        if next != size {
            errors.push(format!("{st}: fields end at {next}, size is {size}"));
        }
        // Sub-fields: inside a parent row of the same placement, no overlap.
        let mut used: BTreeMap<&str, u128> = BTreeMap::new();
        for r in rows.iter().filter(|r| r.is_sub()) {
            let (parent, _) = r.field.rsplit_once('.').expect("sub-field has a dot");
            match rows.iter().find(|p| p.field == parent) {
                None => errors.push(format!("{st}.{}: no row for parent {parent}", r.field)),
                Some(p) => {
                    if (p.byte_offset, p.byte_width, p.endian)
                        != (r.byte_offset, r.byte_width, r.endian)
                    {
                        errors.push(format!(
                            "{st}.{}: offset/width/endianness differ from parent {parent}",
                            r.field
                        ));
                    }
                }
            }
            let mask = ((1u128 << r.bits()) - 1) << r.bit_lo;
            let bits = used.entry(parent).or_default();
            if *bits & mask != 0 {
                errors.push(format!(
                    "{st}.{}: overlaps another sub-field of {parent}",
                    r.field
                ));
            }
            *bits |= mask;
        }
    }
    report(&errors);
    assert!(
        structs.len() >= 20,
        "suspiciously few structs: {}",
        structs.len()
    );
}

/// What `core/src/prm` declares is in the table: every wire struct with its
/// size and fields, and every member of every bitfield word with the bit
/// range the `#[bits]` attributes give it.
#[test]
fn prm_table_covers_source() {
    let rows = load_prm();
    let src: PrmSource = prm_source::scan().expect("scan core/src/prm");
    let by_key: BTreeMap<(String, String), &SpecRow> = rows.iter().map(|r| (r.key(), r)).collect();
    let mut errors = Vec::new();
    let mut used_bitfields = BTreeSet::new();
    let mut expect_members = |st: &str, field: &str, ty: &str, errors: &mut Vec<String>| {
        let Some(bf) = src.bitfield(ty) else { return };
        used_bitfields.insert(ty.to_owned());
        let parent = by_key.get(&(st.to_owned(), field.to_owned()));
        if let Some(p) = parent {
            if bf.bits as usize != p.byte_width * 8 {
                errors.push(format!(
                    "{st}.{field}: {ty} declares {} bits, row is {} bytes",
                    bf.bits, p.byte_width
                ));
            }
        }
        for m in &bf.members {
            let sub = format!("{field}.{}", m.name);
            match by_key.get(&(st.to_owned(), sub.clone())) {
                None => errors.push(format!(
                    "{st}.{sub} ({ty}) is declared in core/src/prm but has no row"
                )),
                Some(r) if (r.bit_lo, r.bit_hi) != (m.lo, m.hi) => errors.push(format!(
                    "{st}.{sub}: #[bits] say {}..={}, table says {}..={}",
                    m.lo, m.hi, r.bit_lo, r.bit_hi
                )),
                Some(_) => {}
            }
        }
    };
    for ws in &src.wire_structs {
        match by_key.get(&(ws.name.clone(), "_size".to_owned())) {
            None => errors.push(format!(
                "{} is declared in core/src/prm but has no _size row",
                ws.name
            )),
            Some(r) if r.byte_width != ws.size => {
                errors.push(format!(
                    "{}: declared size {}, table {}",
                    ws.name, ws.size, r.byte_width
                ));
            }
            Some(_) => {}
        }
        for (field, ty) in &ws.fields {
            if !by_key.contains_key(&(ws.name.clone(), field.clone())) {
                errors.push(format!(
                    "{}.{field} is declared in core/src/prm but has no row",
                    ws.name
                ));
            }
            expect_members(&ws.name, field, ty, &mut errors);
        }
    }
    for (st, view, ty) in VIEWS {
        if !by_key.contains_key(&((*st).to_owned(), (*view).to_owned())) {
            errors.push(format!("view {st}.{view} has no row"));
        }
        expect_members(st, view, ty, &mut errors);
    }
    for bf in &src.bitfields {
        if !used_bitfields.contains(&bf.name) {
            errors.push(format!(
                "bitfield {} is neither a field type of a wire struct nor a listed view",
                bf.name
            ));
        }
    }
    let declared: BTreeSet<&str> = src.wire_structs.iter().map(|w| w.name.as_str()).collect();
    for row in &rows {
        if !declared.contains(row.st.as_str()) {
            errors.push(format!(
                "line {}: struct {} is not a wire_struct! in core/src/prm",
                row.line, row.st
            ));
        }
    }
    report(&errors);
    assert!(
        src.wire_structs.len() >= 20 && src.bitfields.len() >= 15,
        "scanner found too little"
    );
}

// ---------------------------------------------------------------------------
// constants.tsv

#[derive(Debug, Clone, PartialEq, Eq)]
struct ConstValue {
    value: u64,
    /// The enum variant's `name()`, `-` for a plain constant.
    text: String,
}

/// Enumerations: every named value of each, plus a check that decoding is
/// exactly as wide as the table (named iff listed, raw() round-trips).
struct EnumInfo {
    name: &'static str,
    /// raw value -> (variant name, text)
    named: Vec<(u64, String, String)>,
    /// raw values 0..=255 that decode to a named variant.
    decodes_named: Vec<u64>,
    /// raw values 0..=255 for which from_raw(v).raw() != v.
    round_trip_failures: Vec<u64>,
}

macro_rules! enum_infos {
    ($($e:ident),* $(,)?) => {
        vec![$(
            {
                let named = $e::ALL
                    .iter()
                    .map(|v| (ToU64::to_u64(v.raw()), format!("{v:?}"), v.name().to_owned()))
                    .collect::<Vec<_>>();
                let mut decodes_named = Vec::new();
                let mut round_trip_failures = Vec::new();
                for r in 0u8..=255 {
                    let d = $e::from_raw(r.into());
                    if !matches!(d, $e::Unknown(_)) {
                        decodes_named.push(u64::from(r));
                    }
                    if ToU64::to_u64(d.raw()) != u64::from(r) {
                        round_trip_failures.push(u64::from(r));
                    }
                }
                EnumInfo { name: stringify!($e), named, decodes_named, round_trip_failures }
            },
        )*]
    };
}

fn enum_infos() -> Vec<EnumInfo> {
    enum_infos!(
        SendOpcode,
        FenceMode,
        CompletionMode,
        CqeOpcode,
        CqeFormat,
        Syndrome,
        WcStatus,
        L3HdrType,
        L4HdrType,
        MiniCqeFormat,
    )
}

macro_rules! consts {
    ($map:ident; $($path:path),* $(,)?) => {$(
        let name: String = stringify!($path).chars().filter(|c| !c.is_whitespace()).collect();
        let old = $map.insert(name, ConstValue { value: ToU64::to_u64($path), text: "-".to_owned() });
        assert!(old.is_none(), "duplicate constant {}", stringify!($path));
    )*};
}

/// Everything the constants table must list, computed from the code.
fn constant_registry() -> BTreeMap<String, ConstValue> {
    let mut map = BTreeMap::new();
    consts!(map;
        SEND_WQE_BB, SEND_WQE_SHIFT, SEND_WQE_DS, MAX_DS, SEND_WQE_MAX_WQEBBS,
        CQ_DB_REQ_NOT, CQ_DB_REQ_NOT_SOL, CQ_CI_MASK, WQ_PI_MASK,
        UAR_PAGE_SIZE, UAR_CQ_DOORBELL_OFFSET, UAR_BF_OFFSET, DB_BLUEFLAME_BUFFER_SIZE,
        INLINE_SEG, EXTENDED_UD_AV, EthSeg::INLINE_HDR_OFFSET,
        ETH_L2_INLINE_HEADER_SIZE, ETH_L2_MIN_HEADER_SIZE, MAX_TSO_HEADER,
        mpw::TITLE_DS, mpw::WQE_SIZE_MAX, mpw::MPW_MAX_PACKETS, mpw::EMPW_MAX_PACKETS,
        mpw::EMPW_MAX_INLINE_LEN, mpw::EMPW_DEF_INLINE_LEN,
        INVALID_LKEY, striding::WQ_TYPE_CYCLIC_STRIDING_RQ, striding::LOG_NUM_STRIDES_BASE,
        striding::LOG_STRIDE_BYTES_BASE,
        FLOW_TAG_MASK, rss_hash::IP_MASK, rss_hash::IPV4, rss_hash::IPV6, rss_hash::L4_MASK,
        rss_hash::TCP, rss_hash::UDP, rss_hash::IPSEC_SPI, MINI_CQE_ARRAY_SIZE, ENHANCED_MAX_MINIS, CQE_VIC_INIT, CQE_OP_OWN_INIT,
        CQE_INVALIDATE, CQE_APP_TAG_MATCHING, CQE_APP_OP_TM_CONSUMED, CQE_APP_OP_TM_EXPECTED,
        CQE_APP_OP_TM_CONSUMED_SW_RDNV, CQE_APP_OP_TM_CONSUMED_MSG,
        CQE_APP_OP_TM_CONSUMED_MSG_SW_RDNV, CQE_APP_OP_TM_MSG_COMPLETION_CANCELED,
        OPC_MOD_MPW, OPC_MOD_EXT_ATOMIC_8B, OPC_MOD_EXT_ATOMIC_4B, VENDOR_SYNDROME_ODP_PFAULT,
        ETH_WQE_L3_CSUM, ETH_WQE_L4_CSUM, ETH_WQE_L3_INNER_CSUM, ETH_WQE_L4_INNER_CSUM,
        WQE_CTRL_CQ_UPDATE, WQE_CTRL_SOLICITED, WQE_CTRL_FENCE, WQE_CTRL_INITIATOR_SMALL_FENCE,
        umr::CTRL_FLAG_INLINE, umr::CTRL_FLAG_CHECK_FREE, umr::CTRL_FLAG_TRANSLATION_OFFSET,
        umr::CTRL_FLAG_CHECK_QPN, umr::MKEY_MASK_LEN, umr::MKEY_MASK_START_ADDR,
        umr::MKEY_MASK_SIG_ERR, umr::MKEY_MASK_BSF_ENABLE, umr::MKEY_MASK_MKEY, umr::MKEY_MASK_QPN,
        umr::MKEY_MASK_ACCESS_LOCAL_WRITE, umr::MKEY_MASK_ACCESS_REMOTE_READ,
        umr::MKEY_MASK_ACCESS_REMOTE_WRITE, umr::MKEY_MASK_ACCESS_ATOMIC, umr::MKEY_MASK_FREE,
        umr::MKEY_CONTEXT_FREE, umr::MKEY_QPN_NONE, umr::ACCESS_ATOMIC, umr::ACCESS_REMOTE_WRITE,
        umr::ACCESS_REMOTE_READ, umr::ACCESS_LOCAL_WRITE, umr::ACCESS_LOCAL_READ,
    );
    for info in enum_infos() {
        for (raw, variant, text) in &info.named {
            let old = map.insert(
                format!("{}::{variant}", info.name),
                ConstValue {
                    value: *raw,
                    text: text.clone(),
                },
            );
            assert!(old.is_none(), "duplicate {}::{variant}", info.name);
        }
    }
    // rdma-core's mini-CQE format bitmask, every bit that translates.
    for bit in 0u8..=255 {
        if let Some(format) = MiniCqeFormat::from_mlx5dv_mask(bit) {
            map.insert(
                format!("MiniCqeFormat::from_mlx5dv_mask(0x{bit:02x})"),
                ConstValue {
                    value: u64::from(format.raw()),
                    text: format.name().to_owned(),
                },
            );
        }
    }
    map
}

fn load_constants() -> Vec<Row> {
    tsv::read("constants.tsv", tsv::CONSTANT_COLUMNS)
        .expect("specs/constants.tsv")
        .rows
}

/// Every constant row matches the code (value and text), and every constant
/// and enum value of the code has a row.
#[test]
fn constants_table_matches_code_both_ways() {
    let rows = load_constants();
    let reg = constant_registry();
    let mut errors = Vec::new();
    let mut seen = BTreeSet::new();
    for row in &rows {
        let name = row.get("name").expect("name").to_owned();
        if !seen.insert(name.clone()) {
            errors.push(format!("line {}: duplicate row {name}", row.line));
            continue;
        }
        let Some(code) = reg.get(&name) else {
            errors.push(format!(
                "line {}: {name} is not a constant or enum value of mlx5dp::prm",
                row.line
            ));
            continue;
        };
        let value = row.int("value").expect("value");
        let text = row.get("text").expect("text");
        if value != code.value {
            errors.push(format!(
                "line {}: {name} = {value:#x} in the table, {:#x} in the code",
                row.line, code.value
            ));
        }
        if text != code.text {
            errors.push(format!(
                "line {}: {name} text {text:?} in the table, {:?} in the code",
                row.line, code.text
            ));
        }
        for col in ["c_name", "c_value", "source"] {
            if row.get(col).is_err() {
                errors.push(format!("line {}: missing {col}", row.line));
            }
        }
        if row.get("c_name").expect("c_name") != "-"
            && row.get("c_value").map(tsv::parse_int).is_err()
        {
            errors.push(format!(
                "line {}: {name} names a C symbol without a value",
                row.line
            ));
        }
    }
    for name in reg.keys() {
        if !seen.contains(name) {
            errors.push(format!("{name} has no row in specs/constants.tsv"));
        }
    }
    report(&errors);
    assert!(
        rows.len() >= 100,
        "suspiciously few constant rows: {}",
        rows.len()
    );
}

/// Decoding is exactly as wide as the table: a raw value decodes to a named
/// variant iff the table lists it, and `from_raw(v).raw() == v` for all v.
#[test]
fn enums_decode_exactly_the_listed_values() {
    let rows = load_constants();
    let infos = enum_infos();
    let enum_names: BTreeSet<&str> = infos.iter().map(|i| i.name).collect();
    let mut listed: BTreeMap<&str, BTreeSet<u64>> = BTreeMap::new();
    for row in &rows {
        let name = row.get("name").expect("name");
        if let Some((e, variant)) = name.split_once("::") {
            // `Enum::Variant` rows; not `MiniCqeFormat::from_mlx5dv_mask(..)`.
            if enum_names.contains(e) && !variant.contains('(') {
                listed
                    .entry(e)
                    .or_default()
                    .insert(row.int("value").expect("value"));
            }
        }
    }
    let mut errors = Vec::new();
    for info in &infos {
        let want = listed.get(info.name).cloned().unwrap_or_default();
        let have: BTreeSet<u64> = info.decodes_named.iter().copied().collect();
        if want != have {
            errors.push(format!(
                "{}: table lists {want:x?}, code decodes {have:x?}",
                info.name
            ));
        }
        let names: BTreeSet<&String> = info.named.iter().map(|(_, _, t)| t).collect();
        if names.len() != info.named.len() {
            errors.push(format!("{}: duplicate name() texts", info.name));
        }
        if !info.round_trip_failures.is_empty() {
            errors.push(format!(
                "{}: from_raw(v).raw() != v for {:x?}",
                info.name, info.round_trip_failures
            ));
        }
    }
    report(&errors);
}

/// Every `pub const` and `prm_enum!` of `core/src/prm` is covered by the
/// registries above (and therefore by the table).
#[test]
fn constants_table_covers_source() {
    let src = prm_source::scan().expect("scan core/src/prm");
    let reg = constant_registry();
    let mut errors = Vec::new();
    for name in &src.consts {
        if !reg.contains_key(name) {
            errors.push(format!(
                "pub const {name} in core/src/prm is not in constants.tsv / the registry"
            ));
        }
    }
    let enums: BTreeSet<&str> = enum_infos().iter().map(|i| i.name).collect();
    for e in &src.enums {
        if !enums.contains(e.as_str()) {
            errors.push(format!(
                "prm_enum {e} in core/src/prm is not in the enum registry"
            ));
        }
    }
    for e in &enums {
        if !src.enums.iter().any(|s| s == e) {
            errors.push(format!(
                "enum registry lists {e}, which core/src/prm does not declare with prm_enum!"
            ));
        }
    }
    report(&errors);
    assert!(
        src.consts.len() >= 40,
        "scanner found too few constants: {}",
        src.consts.len()
    );
}
