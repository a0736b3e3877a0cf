//! Tests of the verbs backend that need no device: the FFI layouts against
//! the installed mlx5dv.h, the no-device error, the checks on
//! `mlx5dv_init_obj` output, the transition masks, the clock conversion.
//! `hw_rc_loopback` needs a ConnectX and is ignored by default.

use super::device::ts_to_ns;
use super::ffi::*;
use super::parts::{check_cq, check_qp_rq, check_rwq, check_sq, check_srq, PartsError};
use super::resources::{dv_cq_attr, transition_mask, CqOptions, QpKind, Target};
use super::{list_devices, Context, VerbsError};
use core::mem::{offset_of, size_of};
use mlx5dp::prm::MiniCqeFormat;
use std::fmt::Write as _;
use std::process::Command;

const MLX5DV_H: &str = "/usr/include/infiniband/mlx5dv.h";

/// `(C struct, C member, Rust offset, Rust size)`; member "" = the struct.
fn layout() -> Vec<(&'static str, &'static str, usize, usize)> {
    macro_rules! m {
        ($v:ident, $t:ident, $c:literal, $($f:tt).+, $fty:ty) => {
            $v.push((stringify!($t), $c, offset_of!($t, $($f).+), size_of::<$fty>()))
        };
    }
    macro_rules! s {
        ($v:ident, $t:ident) => {
            $v.push((stringify!($t), "", 0, size_of::<$t>()))
        };
    }
    let mut v = Vec::new();
    s!(v, mlx5dv_cqe_comp_caps);
    m!(v, mlx5dv_cqe_comp_caps, "max_num", max_num, u32);
    m!(
        v,
        mlx5dv_cqe_comp_caps,
        "supported_format",
        supported_format,
        u32
    );
    s!(v, mlx5dv_sw_parsing_caps);
    m!(
        v,
        mlx5dv_sw_parsing_caps,
        "sw_parsing_offloads",
        sw_parsing_offloads,
        u32
    );
    m!(
        v,
        mlx5dv_sw_parsing_caps,
        "supported_qpts",
        supported_qpts,
        u32
    );
    s!(v, mlx5dv_striding_rq_caps);
    m!(
        v,
        mlx5dv_striding_rq_caps,
        "min_single_stride_log_num_of_bytes",
        min_single_stride_log_num_of_bytes,
        u32
    );
    m!(
        v,
        mlx5dv_striding_rq_caps,
        "max_single_stride_log_num_of_bytes",
        max_single_stride_log_num_of_bytes,
        u32
    );
    m!(
        v,
        mlx5dv_striding_rq_caps,
        "min_single_wqe_log_num_of_strides",
        min_single_wqe_log_num_of_strides,
        u32
    );
    m!(
        v,
        mlx5dv_striding_rq_caps,
        "max_single_wqe_log_num_of_strides",
        max_single_wqe_log_num_of_strides,
        u32
    );
    m!(
        v,
        mlx5dv_striding_rq_caps,
        "supported_qpts",
        supported_qpts,
        u32
    );
    s!(v, mlx5dv_sig_caps);
    m!(v, mlx5dv_sig_caps, "block_size", block_size, u64);
    m!(v, mlx5dv_sig_caps, "block_prot", block_prot, u32);
    m!(v, mlx5dv_sig_caps, "t10dif_bg", t10dif_bg, u16);
    m!(v, mlx5dv_sig_caps, "crc_type", crc_type, u16);
    s!(v, mlx5dv_dci_streams_caps);
    m!(
        v,
        mlx5dv_dci_streams_caps,
        "max_log_num_concurent",
        max_log_num_concurent,
        u8
    );
    m!(
        v,
        mlx5dv_dci_streams_caps,
        "max_log_num_errored",
        max_log_num_errored,
        u8
    );
    s!(v, mlx5dv_crypto_caps);
    m!(
        v,
        mlx5dv_crypto_caps,
        "failed_selftests",
        failed_selftests,
        u16
    );
    m!(v, mlx5dv_crypto_caps, "crypto_engines", crypto_engines, u8);
    m!(
        v,
        mlx5dv_crypto_caps,
        "wrapped_import_method",
        wrapped_import_method,
        u8
    );
    m!(
        v,
        mlx5dv_crypto_caps,
        "log_max_num_deks",
        log_max_num_deks,
        u8
    );
    m!(v, mlx5dv_crypto_caps, "flags", flags, u32);
    s!(v, mlx5dv_context);
    m!(v, mlx5dv_context, "version", version, u8);
    m!(v, mlx5dv_context, "flags", flags, u64);
    m!(v, mlx5dv_context, "comp_mask", comp_mask, u64);
    m!(
        v,
        mlx5dv_context,
        "cqe_comp_caps",
        cqe_comp_caps,
        mlx5dv_cqe_comp_caps
    );
    m!(
        v,
        mlx5dv_context,
        "sw_parsing_caps",
        sw_parsing_caps,
        mlx5dv_sw_parsing_caps
    );
    m!(
        v,
        mlx5dv_context,
        "striding_rq_caps",
        striding_rq_caps,
        mlx5dv_striding_rq_caps
    );
    m!(
        v,
        mlx5dv_context,
        "tunnel_offloads_caps",
        tunnel_offloads_caps,
        u32
    );
    m!(
        v,
        mlx5dv_context,
        "max_dynamic_bfregs",
        max_dynamic_bfregs,
        u32
    );
    m!(
        v,
        mlx5dv_context,
        "max_clock_info_update_nsec",
        max_clock_info_update_nsec,
        u64
    );
    m!(
        v,
        mlx5dv_context,
        "flow_action_flags",
        flow_action_flags,
        u32
    );
    m!(v, mlx5dv_context, "dc_odp_caps", dc_odp_caps, u32);
    m!(v, mlx5dv_context, "hca_core_clock", hca_core_clock, *mut u8);
    m!(v, mlx5dv_context, "num_lag_ports", num_lag_ports, u8);
    m!(v, mlx5dv_context, "sig_caps", sig_caps, mlx5dv_sig_caps);
    m!(
        v,
        mlx5dv_context,
        "dci_streams_caps",
        dci_streams_caps,
        mlx5dv_dci_streams_caps
    );
    m!(
        v,
        mlx5dv_context,
        "max_wr_memcpy_length",
        max_wr_memcpy_length,
        usize
    );
    m!(
        v,
        mlx5dv_context,
        "crypto_caps",
        crypto_caps,
        mlx5dv_crypto_caps
    );
    s!(v, mlx5dv_cq_init_attr);
    m!(v, mlx5dv_cq_init_attr, "comp_mask", comp_mask, u64);
    m!(
        v,
        mlx5dv_cq_init_attr,
        "cqe_comp_res_format",
        cqe_comp_res_format,
        u8
    );
    m!(v, mlx5dv_cq_init_attr, "flags", flags, u32);
    m!(v, mlx5dv_cq_init_attr, "cqe_size", cqe_size, u16);
    s!(v, mlx5dv_dci_streams);
    m!(
        v,
        mlx5dv_dci_streams,
        "log_num_concurent",
        log_num_concurent,
        u8
    );
    m!(
        v,
        mlx5dv_dci_streams,
        "log_num_errored",
        log_num_errored,
        u8
    );
    s!(v, mlx5dv_dc_init_attr);
    m!(v, mlx5dv_dc_init_attr, "dc_type", dc_type, i32);
    m!(v, mlx5dv_dc_init_attr, "dct_access_key", u, u64);
    m!(v, mlx5dv_dc_init_attr, "dci_streams", u, mlx5dv_dci_streams);
    s!(v, mlx5dv_qp_init_attr);
    m!(v, mlx5dv_qp_init_attr, "comp_mask", comp_mask, u64);
    m!(v, mlx5dv_qp_init_attr, "create_flags", create_flags, u32);
    m!(
        v,
        mlx5dv_qp_init_attr,
        "dc_init_attr",
        dc_init_attr,
        mlx5dv_dc_init_attr
    );
    m!(
        v,
        mlx5dv_qp_init_attr,
        "send_ops_flags",
        send_ops_flags,
        u64
    );
    s!(v, mlx5dv_striding_rq_init_attr);
    m!(
        v,
        mlx5dv_striding_rq_init_attr,
        "single_stride_log_num_of_bytes",
        single_stride_log_num_of_bytes,
        u32
    );
    m!(
        v,
        mlx5dv_striding_rq_init_attr,
        "single_wqe_log_num_of_strides",
        single_wqe_log_num_of_strides,
        u32
    );
    m!(
        v,
        mlx5dv_striding_rq_init_attr,
        "two_byte_shift_en",
        two_byte_shift_en,
        u8
    );
    s!(v, mlx5dv_wq_init_attr);
    m!(v, mlx5dv_wq_init_attr, "comp_mask", comp_mask, u64);
    m!(
        v,
        mlx5dv_wq_init_attr,
        "striding_rq_attrs",
        striding_rq_attrs,
        mlx5dv_striding_rq_init_attr
    );
    s!(v, mlx5dv_qp);
    m!(v, mlx5dv_qp, "dbrec", dbrec, *mut u32);
    m!(v, mlx5dv_qp, "sq", sq, mlx5dv_qp_wq);
    m!(v, mlx5dv_qp, "sq.buf", sq.buf, *mut u8);
    m!(v, mlx5dv_qp, "sq.wqe_cnt", sq.wqe_cnt, u32);
    m!(v, mlx5dv_qp, "sq.stride", sq.stride, u32);
    m!(v, mlx5dv_qp, "rq", rq, mlx5dv_qp_wq);
    m!(v, mlx5dv_qp, "rq.buf", rq.buf, *mut u8);
    m!(v, mlx5dv_qp, "rq.wqe_cnt", rq.wqe_cnt, u32);
    m!(v, mlx5dv_qp, "rq.stride", rq.stride, u32);
    m!(v, mlx5dv_qp, "bf", bf, mlx5dv_qp_bf);
    m!(v, mlx5dv_qp, "bf.reg", bf.reg, *mut u8);
    m!(v, mlx5dv_qp, "bf.size", bf.size, u32);
    m!(v, mlx5dv_qp, "comp_mask", comp_mask, u64);
    m!(
        v,
        mlx5dv_qp,
        "uar_mmap_offset",
        uar_mmap_offset,
        libc::off_t
    );
    m!(v, mlx5dv_qp, "tirn", tirn, u32);
    m!(v, mlx5dv_qp, "tisn", tisn, u32);
    m!(v, mlx5dv_qp, "rqn", rqn, u32);
    m!(v, mlx5dv_qp, "sqn", sqn, u32);
    m!(v, mlx5dv_qp, "tir_icm_addr", tir_icm_addr, u64);
    s!(v, mlx5dv_cq);
    m!(v, mlx5dv_cq, "buf", buf, *mut u8);
    m!(v, mlx5dv_cq, "dbrec", dbrec, *mut u32);
    m!(v, mlx5dv_cq, "cqe_cnt", cqe_cnt, u32);
    m!(v, mlx5dv_cq, "cqe_size", cqe_size, u32);
    m!(v, mlx5dv_cq, "cq_uar", cq_uar, *mut u8);
    m!(v, mlx5dv_cq, "cqn", cqn, u32);
    m!(v, mlx5dv_cq, "comp_mask", comp_mask, u64);
    s!(v, mlx5dv_srq);
    m!(v, mlx5dv_srq, "buf", buf, *mut u8);
    m!(v, mlx5dv_srq, "dbrec", dbrec, *mut u32);
    m!(v, mlx5dv_srq, "stride", stride, u32);
    m!(v, mlx5dv_srq, "head", head, u32);
    m!(v, mlx5dv_srq, "tail", tail, u32);
    m!(v, mlx5dv_srq, "comp_mask", comp_mask, u64);
    m!(v, mlx5dv_srq, "srqn", srqn, u32);
    s!(v, mlx5dv_rwq);
    m!(v, mlx5dv_rwq, "buf", buf, *mut u8);
    m!(v, mlx5dv_rwq, "dbrec", dbrec, *mut u32);
    m!(v, mlx5dv_rwq, "wqe_cnt", wqe_cnt, u32);
    m!(v, mlx5dv_rwq, "stride", stride, u32);
    m!(v, mlx5dv_rwq, "comp_mask", comp_mask, u64);
    s!(v, mlx5dv_obj);
    for (name, off) in [
        ("qp", offset_of!(mlx5dv_obj, qp)),
        ("cq", offset_of!(mlx5dv_obj, cq)),
        ("srq", offset_of!(mlx5dv_obj, srq)),
        ("rwq", offset_of!(mlx5dv_obj, rwq)),
        ("dm", offset_of!(mlx5dv_obj, dm)),
        ("ah", offset_of!(mlx5dv_obj, ah)),
        ("pd", offset_of!(mlx5dv_obj, pd)),
    ] {
        let pair = size_of::<mlx5dv_obj_pair<u8, u8>>();
        let (inn, out): (&'static str, &'static str) = match name {
            "qp" => ("qp.in", "qp.out"),
            "cq" => ("cq.in", "cq.out"),
            "srq" => ("srq.in", "srq.out"),
            "rwq" => ("rwq.in", "rwq.out"),
            "dm" => ("dm.in", "dm.out"),
            "ah" => ("ah.in", "ah.out"),
            _ => ("pd.in", "pd.out"),
        };
        v.push((
            "mlx5dv_obj",
            inn,
            off + offset_of!(mlx5dv_obj_pair<u8, u8>, in_),
            8,
        ));
        v.push((
            "mlx5dv_obj",
            out,
            off + offset_of!(mlx5dv_obj_pair<u8, u8>, out),
            8,
        ));
        assert_eq!(pair, 16);
    }
    s!(v, mlx5dv_ah);
    m!(v, mlx5dv_ah, "av", av, *mut u8);
    m!(v, mlx5dv_ah, "comp_mask", comp_mask, u64);
    // What `mlx5dv_ah.av` points at: the 48 bytes `Ah` copies.
    v.push(("mlx5_wqe_av", "", 0, size_of::<mlx5dp::prm::Av>()));
    s!(v, mlx5dv_clock_info);
    m!(v, mlx5dv_clock_info, "nsec", nsec, u64);
    m!(v, mlx5dv_clock_info, "last_cycles", last_cycles, u64);
    m!(v, mlx5dv_clock_info, "frac", frac, u64);
    m!(v, mlx5dv_clock_info, "mult", mult, u32);
    m!(v, mlx5dv_clock_info, "shift", shift, u32);
    m!(v, mlx5dv_clock_info, "mask", mask, u64);
    v
}

/// The constants declared by hand, as `(C name, Rust value)`.
fn constants() -> Vec<(&'static str, u64)> {
    vec![
        (
            "MLX5DV_CONTEXT_MASK_CQE_COMPRESION",
            context_mask::CQE_COMPRESION,
        ),
        ("MLX5DV_CONTEXT_MASK_SWP", context_mask::SWP),
        ("MLX5DV_CONTEXT_MASK_STRIDING_RQ", context_mask::STRIDING_RQ),
        (
            "MLX5DV_CONTEXT_MASK_TUNNEL_OFFLOADS",
            context_mask::TUNNEL_OFFLOADS,
        ),
        ("MLX5DV_CONTEXT_MASK_DYN_BFREGS", context_mask::DYN_BFREGS),
        (
            "MLX5DV_CONTEXT_MASK_CLOCK_INFO_UPDATE",
            context_mask::CLOCK_INFO_UPDATE,
        ),
        (
            "MLX5DV_CONTEXT_MASK_HCA_CORE_CLOCK",
            context_mask::HCA_CORE_CLOCK,
        ),
        (
            "MLX5DV_CONTEXT_MASK_NUM_LAG_PORTS",
            context_mask::NUM_LAG_PORTS,
        ),
        ("MLX5DV_CONTEXT_FLAGS_CQE_V1", context_flags::CQE_V1),
        (
            "MLX5DV_CONTEXT_FLAGS_MPW_ALLOWED",
            context_flags::MPW_ALLOWED,
        ),
        (
            "MLX5DV_CONTEXT_FLAGS_ENHANCED_MPW",
            context_flags::ENHANCED_MPW,
        ),
        (
            "MLX5DV_CONTEXT_FLAGS_CQE_128B_COMP",
            context_flags::CQE_128B_COMP,
        ),
        (
            "MLX5DV_CONTEXT_FLAGS_CQE_128B_PAD",
            context_flags::CQE_128B_PAD,
        ),
        (
            "MLX5DV_CONTEXT_FLAGS_PACKET_BASED_CREDIT_MODE",
            context_flags::PACKET_BASED_CREDIT_MODE,
        ),
        (
            "MLX5DV_CONTEXT_FLAGS_REAL_TIME_TS",
            context_flags::REAL_TIME_TS,
        ),
        (
            "MLX5DV_CQ_INIT_ATTR_MASK_COMPRESSED_CQE",
            cq_init_attr_mask::COMPRESSED_CQE,
        ),
        ("MLX5DV_CQ_INIT_ATTR_MASK_FLAGS", cq_init_attr_mask::FLAGS),
        (
            "MLX5DV_CQ_INIT_ATTR_MASK_CQE_SIZE",
            cq_init_attr_mask::CQE_SIZE,
        ),
        (
            "MLX5DV_CQ_INIT_ATTR_FLAGS_CQE_PAD",
            u64::from(MLX5DV_CQ_INIT_ATTR_FLAGS_CQE_PAD),
        ),
        (
            "MLX5DV_CQE_RES_FORMAT_HASH",
            u64::from(cqe_res_format::HASH),
        ),
        (
            "MLX5DV_CQE_RES_FORMAT_CSUM",
            u64::from(cqe_res_format::CSUM),
        ),
        (
            "MLX5DV_CQE_RES_FORMAT_CSUM_STRIDX",
            u64::from(cqe_res_format::CSUM_STRIDX),
        ),
        (
            "MLX5DV_QP_INIT_ATTR_MASK_QP_CREATE_FLAGS",
            MLX5DV_QP_INIT_ATTR_MASK_QP_CREATE_FLAGS,
        ),
        (
            "MLX5DV_QP_CREATE_TUNNEL_OFFLOADS",
            u64::from(MLX5DV_QP_CREATE_TUNNEL_OFFLOADS),
        ),
        (
            "MLX5DV_WQ_INIT_ATTR_MASK_STRIDING_RQ",
            MLX5DV_WQ_INIT_ATTR_MASK_STRIDING_RQ,
        ),
        ("MLX5DV_OBJ_QP", obj_type::QP),
        ("MLX5DV_OBJ_CQ", obj_type::CQ),
        ("MLX5DV_OBJ_SRQ", obj_type::SRQ),
        ("MLX5DV_OBJ_RWQ", obj_type::RWQ),
        ("MLX5DV_OBJ_AH", obj_type::AH),
        ("MLX5DV_SRQ_MASK_SRQN", MLX5DV_SRQ_MASK_SRQN),
    ]
}

/// Compiles a probe against mlx5dv.h that prints `sizeof`/`offsetof` of
/// every declared struct and member and every constant, and compares them
/// with this crate's declarations (the house way: tests/tests/c_header.rs).
#[test]
fn layout_matches_mlx5dv_h() {
    if !std::path::Path::new(MLX5DV_H).exists()
        || Command::new("gcc").arg("--version").output().is_err()
    {
        if std::env::var("MLX5DP_REQUIRE_C_HEADERS").as_deref() == Ok("1") {
            panic!("{MLX5DV_H} or gcc missing, and MLX5DP_REQUIRE_C_HEADERS=1");
        }
        eprintln!("SKIPPED: {MLX5DV_H} or gcc missing");
        return;
    }
    let lay = layout();
    let consts = constants();
    let mut c = String::from(
        "#include <stdio.h>\n#include <stddef.h>\n#include <infiniband/mlx5dv.h>\nint main(void) {\n",
    );
    for (s, m, _, _) in &lay {
        if m.is_empty() {
            writeln!(
                c,
                "  printf(\"{s} . %zu %zu\\n\", (size_t)0, sizeof(struct {s}));"
            )
            .ok();
        } else {
            writeln!(
                c,
                "  printf(\"{s} {m} %zu %zu\\n\", offsetof(struct {s}, {m}), sizeof(((struct {s} *)0)->{m}));"
            )
            .ok();
        }
    }
    for (name, _) in &consts {
        writeln!(
            c,
            "  printf(\"{name} %llu\\n\", (unsigned long long){name});"
        )
        .ok();
    }
    c.push_str("  return 0;\n}\n");
    let dir = std::env::temp_dir().join(format!("mlx5dp-verbs-probe-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("probe dir");
    let src = dir.join("probe.c");
    let exe = dir.join("probe");
    std::fs::write(&src, &c).expect("write probe");
    let out = Command::new("gcc")
        .args(["-std=gnu11", "-Wall", "-O0", "-o"])
        .arg(&exe)
        .arg(&src)
        .output()
        .expect("gcc");
    assert!(
        out.status.success(),
        "gcc failed:\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let run = Command::new(&exe).output().expect("run probe");
    assert!(run.status.success());
    let text = String::from_utf8_lossy(&run.stdout).into_owned();
    let mut lines = text.lines();
    let mut bad = Vec::new();
    for (s, m, off, size) in &lay {
        let line = lines.next().expect("probe line");
        let f: Vec<&str> = line.split_whitespace().collect();
        let (c_off, c_size): (usize, usize) =
            (f[2].parse().expect("offset"), f[3].parse().expect("size"));
        if (c_off, c_size) != (*off, *size) {
            bad.push(format!(
                "{s}.{m}: C offset {c_off} size {c_size}, Rust offset {off} size {size}"
            ));
        }
    }
    for (name, value) in &consts {
        let line = lines.next().expect("probe line");
        let c_value: u64 = line
            .split_whitespace()
            .nth(1)
            .expect("value")
            .parse()
            .expect("number");
        if c_value != *value {
            bad.push(format!("{name}: C {c_value}, Rust {value}"));
        }
    }
    let _ = std::fs::remove_dir_all(&dir);
    assert!(bad.is_empty(), "mlx5dv.h disagrees:\n{}", bad.join("\n"));
    // Every declared struct was measured.
    assert!(lay.len() > 100, "{} members measured", lay.len());
}

/// This machine has no RDMA device: listing and opening fail at once with
/// `NoDevice`, whose message names the emulated device.
#[test]
fn no_device_names_the_emulator() {
    if std::env::var("MLX5DP_DEVICE").is_ok() {
        eprintln!("SKIPPED: MLX5DP_DEVICE is set (a device is expected)");
        return;
    }
    match list_devices() {
        Err(e) => {
            assert_eq!(e, VerbsError::NoDevice);
            let msg = e.to_string();
            assert!(msg.contains("--device emu"), "{msg}");
            assert!(msg.contains("emulated"), "{msg}");
            let open = Context::open("mlx5_0").map(|c| c.name().to_owned());
            assert_eq!(open, Err(VerbsError::NoDevice));
            assert!(matches!(
                Context::open_from_env(),
                Err(VerbsError::NoDevice)
            ));
        }
        Ok(names) => eprintln!("SKIPPED: RDMA devices present: {names:?}"),
    }
}

/// A made-up `mlx5dv_qp` over real memory.
struct FakeQp {
    sq: Vec<u64>,
    rq: Vec<u64>,
    db: Vec<u32>,
    bf: Vec<u64>,
}

impl FakeQp {
    fn new() -> Self {
        Self {
            sq: vec![0; 64 * 64 / 8 + 8],
            rq: vec![0; 16 * 64 / 8 + 8],
            db: vec![0; 2],
            bf: vec![0; 512 / 8],
        }
    }
    fn dv(&mut self) -> mlx5dv_qp {
        let sq = self.sq.as_mut_ptr().cast::<u8>();
        let sq = sq.wrapping_add(sq.align_offset(64));
        mlx5dv_qp {
            dbrec: self.db.as_mut_ptr(),
            sq: mlx5dv_qp_wq {
                buf: sq.cast(),
                wqe_cnt: 64,
                stride: 64,
            },
            rq: mlx5dv_qp_wq {
                buf: self.rq.as_mut_ptr().cast(),
                wqe_cnt: 16,
                stride: 64,
            },
            bf: mlx5dv_qp_bf {
                reg: self.bf.as_mut_ptr().cast(),
                size: 256,
            },
            comp_mask: 0,
            uar_mmap_offset: 0,
            tirn: 0,
            tisn: 0,
            rqn: 0,
            sqn: 0,
            tir_icm_addr: 0,
        }
    }
}

#[test]
fn sq_checks() {
    let mut f = FakeQp::new();
    let good = f.dv();
    let c = check_sq(&good).expect("good SQ");
    assert_eq!(c.wqe_cnt, 64);
    assert_eq!(
        c.dbrec,
        good.dbrec.wrapping_add(1),
        "MLX5_SND_DBR is word 1"
    );
    assert_eq!(c.bf_size, 256);
    let mut d = good;
    d.bf.size = 0;
    assert_eq!(check_sq(&d).map(|c| c.bf_size), Ok(0), "0 = doorbell only");
    d.bf.size = 96;
    assert!(matches!(
        check_sq(&d),
        Err(PartsError::BadSize {
            field: "mlx5dv_qp.bf.size",
            ..
        })
    ));
    let mut d = good;
    d.sq.wqe_cnt = 48;
    assert!(matches!(
        check_sq(&d),
        Err(PartsError::NotPowerOfTwo { value: 48, .. })
    ));
    let mut d = good;
    d.sq.wqe_cnt = 0;
    assert_eq!(check_sq(&d), Err(PartsError::NoQueue("send queue")));
    let mut d = good;
    d.sq.buf = core::ptr::null_mut();
    assert_eq!(check_sq(&d), Err(PartsError::Null("mlx5dv_qp.sq.buf")));
    let mut d = good;
    d.bf.reg = core::ptr::null_mut();
    assert_eq!(check_sq(&d), Err(PartsError::Null("mlx5dv_qp.bf.reg")));
    let mut d = good;
    d.bf.reg = d.bf.reg.cast::<u8>().wrapping_add(4).cast();
    assert!(matches!(
        check_sq(&d),
        Err(PartsError::Misaligned { align: 8, .. })
    ));
    let mut d = good;
    d.sq.stride = 128;
    assert!(matches!(check_sq(&d), Err(PartsError::BadSize { .. })));
    let r = check_qp_rq(&good).expect("good RQ");
    assert_eq!((r.wqe_cnt, r.wqe_shift, r.dbrec), (16, 6, good.dbrec));
    let mut d = good;
    d.rq.stride = 8;
    assert!(matches!(check_qp_rq(&d), Err(PartsError::BadSize { .. })));
}

#[test]
fn cq_srq_rwq_checks() {
    let mut buf = vec![0u64; 64 * 64 / 8 + 8];
    let mut db = vec![0u32; 2];
    let mut uar = vec![0u64; 8];
    let b = buf.as_mut_ptr().cast::<u8>();
    let b = b.wrapping_add(b.align_offset(64));
    let good = mlx5dv_cq {
        buf: b.cast(),
        dbrec: db.as_mut_ptr(),
        cqe_cnt: 64,
        cqe_size: 64,
        cq_uar: uar.as_mut_ptr().cast(),
        cqn: 0x12,
        comp_mask: 0,
    };
    let c = check_cq(&good).expect("good CQ");
    assert_eq!((c.cqe_cnt, c.cqn), (64, 0x12));
    type Spoil = fn(&mut mlx5dv_cq);
    let cases: [(Spoil, &str); 4] = [
        (|d: &mut mlx5dv_cq| d.cqe_size = 32, "cqe_size"),
        (|d: &mut mlx5dv_cq| d.cqe_cnt = 100, "cqe_cnt"),
        (
            |d: &mut mlx5dv_cq| d.cq_uar = core::ptr::null_mut(),
            "cq_uar",
        ),
        (|d: &mut mlx5dv_cq| d.cqn = 1 << 24, "cqn"),
    ];
    for (f, e) in cases {
        let mut d = good;
        f(&mut d);
        assert!(check_cq(&d).is_err(), "{e} accepted");
    }
    let srq = mlx5dv_srq {
        buf: b.cast(),
        dbrec: db.as_mut_ptr(),
        stride: 64,
        head: 0,
        tail: 31,
        comp_mask: MLX5DV_SRQ_MASK_SRQN,
        srqn: 7,
    };
    let s = check_srq(&srq).expect("good SRQ");
    assert_eq!((s.wqe_cnt, s.wqe_shift, s.srqn), (32, 6, 7));
    let mut d = srq;
    d.comp_mask = 0;
    assert_eq!(check_srq(&d), Err(PartsError::NoSrqn));
    let mut d = srq;
    d.tail = 30;
    assert!(check_srq(&d).is_err());
    let rwq = mlx5dv_rwq {
        buf: b.cast(),
        dbrec: db.as_mut_ptr(),
        wqe_cnt: 8,
        stride: 32,
        comp_mask: 0,
    };
    assert_eq!(
        check_rwq(&rwq).map(|r| (r.wqe_cnt, r.wqe_shift)),
        Ok((8, 5))
    );
}

#[test]
fn transition_masks_follow_the_kernel_table() {
    use rdma_sys::ibv_qp_attr_mask as M;
    let has = |k, t, x: M| transition_mask(k, t) & x.0 != 0;
    assert_eq!(
        transition_mask(QpKind::RawPacket, Target::Init),
        M::IBV_QP_STATE.0 | M::IBV_QP_PORT.0
    );
    assert_eq!(
        transition_mask(QpKind::RawPacket, Target::Rts),
        M::IBV_QP_STATE.0
    );
    assert!(has(QpKind::Ud, Target::Init, M::IBV_QP_QKEY));
    assert!(!has(QpKind::Ud, Target::Init, M::IBV_QP_ACCESS_FLAGS));
    assert!(has(QpKind::Rc, Target::Rtr, M::IBV_QP_MAX_DEST_RD_ATOMIC));
    assert!(!has(QpKind::Uc, Target::Rtr, M::IBV_QP_MAX_DEST_RD_ATOMIC));
    assert!(!has(QpKind::XrcIni, Target::Rtr, M::IBV_QP_MIN_RNR_TIMER));
    assert!(has(QpKind::XrcTgt, Target::Rtr, M::IBV_QP_MIN_RNR_TIMER));
    assert!(has(QpKind::Rc, Target::Rts, M::IBV_QP_MAX_QP_RD_ATOMIC));
    assert!(!has(QpKind::Uc, Target::Rts, M::IBV_QP_RETRY_CNT));
    assert_eq!(
        transition_mask(QpKind::Rc, Target::Reset),
        M::IBV_QP_STATE.0
    );
}

#[test]
fn cq_attrs() {
    let mut o = CqOptions::new(64);
    let a = dv_cq_attr(&o).expect("plain");
    assert_eq!(
        (a.cqe_size, a.comp_mask & cq_init_attr_mask::COMPRESSED_CQE),
        (64, 0)
    );
    o.compression = Some(MiniCqeFormat::CsumStridx);
    o.cqe_128 = true;
    let a = dv_cq_attr(&o).expect("compressed");
    assert_eq!(a.cqe_comp_res_format, cqe_res_format::CSUM_STRIDX);
    assert_eq!(a.cqe_size, 128);
    o.compression = Some(MiniCqeFormat::L34hStridx);
    assert!(matches!(dv_cq_attr(&o), Err(VerbsError::Unsupported(_))));
    let mut o = CqOptions::new(64);
    o.cqe_pad = true;
    assert!(matches!(dv_cq_attr(&o), Err(VerbsError::Invalid(_))));
}

#[test]
fn ts_to_ns_matches_the_header() {
    // 1 tick = 1 ns: mult = 1 << shift.
    let ci = mlx5dv_clock_info {
        nsec: 1_000_000,
        last_cycles: 5_000,
        frac: 0,
        mult: 1 << 10,
        shift: 10,
        mask: (1 << 48) - 1,
    };
    assert_eq!(ts_to_ns(&ci, 5_000), 1_000_000);
    assert_eq!(ts_to_ns(&ci, 6_000), 1_001_000);
    assert_eq!(ts_to_ns(&ci, 4_000), 999_000, "older than the update");
}

/// RC loopback through the core on the device `MLX5DP_DEVICE` names.
#[test]
#[ignore = "needs a ConnectX: MLX5DP_DEVICE=mlx5_0 cargo test -p mlx5dp-setup --features verbs -- --ignored"]
fn hw_rc_loopback() {
    let r = super::smoke::rc_loopback().unwrap_or_else(|e| panic!("{e}"));
    assert!(r.data_ok, "{r:?}");
}

/// The address-handle attributes of the loopback destination: the
/// port's own LID on InfiniBand (a GRH only when asked), always global on
/// RoCE with the port's GID at the backend's GID index (what `Qp::modify`
/// gives RC/UC QPs at RTR).
#[test]
fn ah_route_to_the_own_port() {
    use super::ah::Route;
    use super::device::PortInfo;
    use crate::emu::AhAttr;
    let gid = [0xfe, 0x80, 0, 0, 0, 0, 0, 0, 1, 2, 3, 4, 5, 6, 7, 8];
    let ib = PortInfo {
        port: 1,
        lid: 0x17,
        gid,
        gid_index: 0,
        active_mtu: 5,
        ethernet: false,
    };
    let r = Route::new(&ib, &AhAttr::default());
    assert_eq!((r.port_num, r.dlid, r.is_global), (1, 0x17, false));
    let a = r.to_ibv();
    assert_eq!((a.port_num, a.dlid, a.is_global, a.sl), (1, 0x17, 0, 0));
    assert_eq!((a.src_path_bits, a.static_rate), (0, 0));
    assert_eq!(a.grh.hop_limit, 0, "no GRH fields without is_global");
    let attr = AhAttr {
        sl: 5,
        global: true,
        traffic_class: 0x20,
        hop_limit: 9,
        flow_label: 0x1_2345,
        ..AhAttr::default()
    };
    let a = Route::new(&ib, &attr).to_ibv();
    assert_eq!((a.is_global, a.sl), (1, 5));
    assert_eq!(
        (
            a.grh.sgid_index,
            a.grh.hop_limit,
            a.grh.traffic_class,
            a.grh.flow_label
        ),
        (0, 9, 0x20, 0x1_2345)
    );
    let roce = PortInfo {
        port: 2,
        lid: 0,
        gid: [0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff, 10, 1, 2, 3],
        gid_index: 3,
        active_mtu: 3,
        ethernet: true,
    };
    let r = Route::new(&roce, &AhAttr::default());
    assert!(r.is_global, "RoCE needs the GRH (mlx5_create_ah: EINVAL)");
    assert_eq!((r.dgid, r.sgid_index, r.hop_limit), (roce.gid, 3, 64));
    let a = r.to_ibv();
    assert_eq!((a.port_num, a.dlid, a.is_global), (2, 0, 1));
    assert_eq!((a.grh.sgid_index, a.grh.hop_limit), (3, 64));
}

/// The copied address vector starts with no Q_Key and no remote QPN, so
/// the send work request alone chooses them.
#[test]
fn ah_av_is_cleared_for_the_wqe() {
    use super::ah::wqe_av;
    use mlx5dp::prm::{Av, Be16, Be32, DqpDct};
    let mut av = Av {
        rlid: Be16::new(0x17),
        rmac: [1, 2, 3, 4, 5, 6],
        ..Av::default()
    };
    av.qkey = Be32::new(0x1111);
    av.key_reserved = Be32::new(0x2222);
    av.dqp_dct = DqpDct::new().with_dqp_dct(0x33).with_extended(true);
    let w = wqe_av(av);
    assert_eq!((w.qkey.get(), w.key_reserved.get()), (0, 0));
    assert_eq!(w.dqp_dct, DqpDct::new());
    assert_eq!((w.rlid.get(), w.rmac), (0x17, [1, 2, 3, 4, 5, 6]));
}

// ---------------------------------------------------------------------------
// Striding RQ behind an RSS QP: the pure attribute building.

mod rss {
    use super::super::device::StridingRqCaps;
    use super::super::resources::{
        rss_hash_fields, rx_hash_conf, StridingWqAttr, RSS_HASH_TYPE_IPV4_UDP, RSS_KEY,
    };
    use super::super::VerbsError;
    use super::*;
    use crate::emu::eth::{rx_info, TOEPLITZ_KEY};

    /// A ConnectX-5's `mlx5dv_striding_rq_caps` (the kernel's
    /// `MLX5_MIN_SINGLE_WQE_LOG_NUM_STRIDES` 9 without the extended
    /// range), RAW_PACKET only.
    fn cx5() -> StridingRqCaps {
        StridingRqCaps {
            min_log_stride_bytes: 6,
            max_log_stride_bytes: 13,
            min_log_num_strides: 9,
            max_log_num_strides: 16,
            supported_qpts: 1 << rdma_sys::ibv_qp_type::IBV_QPT_RAW_PACKET,
        }
    }

    fn unsupported(r: Result<StridingWqAttr, VerbsError>) -> bool {
        matches!(r, Err(VerbsError::Unsupported(_)))
    }

    fn invalid(r: Result<StridingWqAttr, VerbsError>) -> bool {
        matches!(r, Err(VerbsError::Invalid(_)))
    }

    /// `RqInit::Striding { wqe_cnt, log_num_strides, log_stride_bytes }`
    /// becomes `max_wr` and the two logs unchanged, and the mlx5dv
    /// attribute asks for a striding RQ with no two-byte shift.
    #[test]
    fn striding_rq_maps_to_the_wq_attributes() {
        let caps = cx5();
        let a = StridingWqAttr::new(64, 9, 6, Some(&caps), 32768).expect("in the caps");
        assert_eq!(
            a,
            StridingWqAttr {
                max_wr: 64,
                log_stride_bytes: 6,
                log_num_strides: 9,
            }
        );
        let dv = a.dv();
        assert_eq!(dv.comp_mask, MLX5DV_WQ_INIT_ATTR_MASK_STRIDING_RQ);
        assert_eq!(dv.striding_rq_attrs.single_stride_log_num_of_bytes, 6);
        assert_eq!(dv.striding_rq_attrs.single_wqe_log_num_of_strides, 9);
        assert_eq!(dv.striding_rq_attrs.two_byte_shift_en, 0);
        // The caps' edges are inside.
        assert!(StridingWqAttr::new(2, 16, 13, Some(&caps), 32768).is_ok());
        assert!(StridingWqAttr::new(1, 9, 6, Some(&caps), 32768).is_ok());
        assert!(StridingWqAttr::new(1 << 15, 9, 6, Some(&caps), 32768).is_ok());
    }

    /// What the device cannot do is `Unsupported` (the tools report it as
    /// unavailable); what makes no sense, or what the core cannot post,
    /// is `Invalid`.
    #[test]
    fn striding_rq_is_checked_against_the_caps() {
        let caps = cx5();
        assert!(unsupported(StridingWqAttr::new(8, 9, 6, None, 32768)));
        let no_raw = StridingRqCaps {
            supported_qpts: 1 << rdma_sys::ibv_qp_type::IBV_QPT_UD,
            ..caps
        };
        assert!(unsupported(StridingWqAttr::new(
            8,
            9,
            6,
            Some(&no_raw),
            32768
        )));
        // Stride size outside 6..=13, stride count outside 9..=16 (the
        // emulator's scenarios use 2^4 strides, which a ConnectX-5 refuses).
        assert!(unsupported(StridingWqAttr::new(
            8,
            9,
            5,
            Some(&caps),
            32768
        )));
        assert!(unsupported(StridingWqAttr::new(
            8,
            9,
            14,
            Some(&caps),
            32768
        )));
        assert!(unsupported(StridingWqAttr::new(
            8,
            4,
            6,
            Some(&caps),
            32768
        )));
        assert!(unsupported(StridingWqAttr::new(
            8,
            17,
            6,
            Some(&caps),
            32768
        )));
        // The core's limits, on a device that would take more.
        let wide = StridingRqCaps {
            max_log_stride_bytes: 20,
            max_log_num_strides: 20,
            ..caps
        };
        assert!(invalid(StridingWqAttr::new(8, 17, 6, Some(&wide), 32768)));
        assert!(invalid(StridingWqAttr::new(8, 16, 15, Some(&wide), 32768)));
        assert!(StridingWqAttr::new(8, 16, 14, Some(&wide), 32768).is_ok());
        // WQE counts: a power of two within max_qp_wr and 2^16.
        for bad in [0, 3, 100, 1 << 17] {
            assert!(invalid(StridingWqAttr::new(
                bad,
                9,
                6,
                Some(&caps),
                1 << 20
            )));
        }
        assert!(invalid(StridingWqAttr::new(1024, 9, 6, Some(&caps), 512)));
        assert!(StridingWqAttr::new(1 << 16, 9, 6, Some(&caps), 1 << 20).is_ok());
    }

    /// The RSS QP hashes with the emulator's Toeplitz key over IPv4
    /// addresses and UDP ports (`IBV_RX_HASH_*` 1 | 2 | 64 | 128).
    #[test]
    fn rx_hash_conf_uses_the_emulators_key() {
        assert_eq!(RSS_KEY, TOEPLITZ_KEY);
        let mut key = RSS_KEY;
        let c = rx_hash_conf(&mut key);
        assert_eq!(
            u32::from(c.rx_hash_function),
            rdma_sys::ibv_rx_hash_function_flags::IBV_RX_HASH_FUNC_TOEPLITZ.0
        );
        assert_eq!(c.rx_hash_key_len, 40);
        assert_eq!(c.rx_hash_key, key.as_mut_ptr());
        // SAFETY: `rx_hash_key` points to `key`, 40 bytes, alive here.
        let seen = unsafe { core::slice::from_raw_parts(c.rx_hash_key, 40) };
        assert_eq!(seen, &TOEPLITZ_KEY[..]);
        assert_eq!(c.rx_hash_fields_mask, 0xc3);
        assert_eq!(c.rx_hash_fields_mask, rss_hash_fields());
        // One L3 and one L4 protocol: what Linux create_rss_raw_qp_tir
        // accepts.
        let m = c.rx_hash_fields_mask;
        assert!(m & (4 | 8) == 0, "IPv6 fields beside IPv4");
        assert!(m & (16 | 32) == 0, "TCP ports beside UDP");
        // rss_hash_type bits 3:2 = IPv4, bits 7:6 = UDP.
        assert_eq!(RSS_HASH_TYPE_IPV4_UDP, 0x84);
    }

    /// The emulator's hash of an IPv4/UDP frame is the Toeplitz hash of
    /// source address, destination address, source port, destination port
    /// with the shared key (the order the hardware hashes the selected
    /// fields in: Microsoft's RSS verification suite, whose IPv4 vector
    /// with ports this is).
    #[test]
    fn emulator_hash_of_ipv4_udp_is_the_rss_vector() {
        let mut f = vec![0u8; 14 + 20 + 8 + 4];
        f[12..14].copy_from_slice(&0x0800u16.to_be_bytes());
        let ip = &mut f[14..34];
        ip[0] = 0x45;
        ip[2..4].copy_from_slice(&32u16.to_be_bytes());
        ip[8] = 64;
        ip[9] = 17;
        ip[12..16].copy_from_slice(&[66, 9, 149, 187]);
        ip[16..20].copy_from_slice(&[161, 142, 100, 80]);
        let udp = &mut f[34..42];
        udp[0..2].copy_from_slice(&2794u16.to_be_bytes());
        udp[2..4].copy_from_slice(&1766u16.to_be_bytes());
        udp[4..6].copy_from_slice(&12u16.to_be_bytes());
        let info = rx_info(&f);
        assert_eq!((info.l3_type, info.l4_type), (2, 2), "IPv4/UDP");
        assert_eq!(info.hash, 0x51cc_c178);
    }
}
