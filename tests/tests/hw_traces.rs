//! Replays every captured hardware trace in `hw-traces/captured/`: each
//! record is decoded with `mlx5dp_setup::decode` (as `mlx5dp decode` does)
//! and every value its source printed (`# expect:`) is checked against the
//! decoded fields. The bytes are also re-read through all three input
//! styles (plain hex, kernel `print_hex_dump` lines, rdma-core word dumps),
//! which must give the same bytes and the same decoded JSON.
//!
//! The check is the library's, the one `mlx5dp trace replay` makes
//! (`mlx5dp_setup::decode::published`): expect keys are mapped explicitly;
//! keys that describe the queue rather than the entry cannot be checked
//! from the bytes and are listed there as context only, with the reason. A
//! key that is neither mapped, nor context-only, nor the name of a decoded
//! field FAILS the test: a new key must be given a meaning, never skipped
//! silently.

#![expect(
    clippy::unwrap_used,
    reason = "test helpers: a failed read or spawn is a test failure"
)]

use mlx5dp_setup::decode::published::check_record;
use mlx5dp_setup::decode::trace::{parse_records, TraceRecord};
use mlx5dp_setup::hexdump;
use std::path::{Path, PathBuf};

/// The records every checkout must hold (from the project's collection of public dumps).
const KNOWN: &[&str] = &[
    "k-umr-odp-iova",
    "k-nvmeof-mt28908",
    "k-dustli-remote-access",
    "k-kumlien-roce55",
    "k-nfsordma-1",
    "e-cx4lx-nolinear-cqe",
    "e-cx4lx-nolinear-wqe",
    "e-shampo-64k-rq",
    "dpdk-warp17-1",
    "u-libfabric-4283",
    "u-ucx-1569",
    "u-spdk-264",
    "u-spdk-500",
    "u-ali-send-wqe",
    "u-ali-send-cqe",
    // Collected for this project from public issue threads (not in the shared collection).
    "dpdk-warp17-2",
    "u-ucx-857",
    "u-ucx-1770",
    "u-charm-2532-gatech",
    "u-charm-2532-frontera",
    "u-spdk-264-waikiki",
    "u-spdk-507",
    "u-spdk-961",
    "u-spdk-1387",
    "k-spdk-964",
    "k-nvmeof-ruijter-cx6",
    "k-odp-mr-race",
    "e-shampo-resv-rq",
    "u-rdma-cn-rnr",
    "u-fluent-dapl",
    "k-nfsordma-2",
    "k-nfsordma-3",
    "u-caffe2-616-node006",
    "u-caffe2-616-node016",
    "u-caffe2-2365",
    "u-ucxpy-421",
    "u-ucx-6414",
    "u-ucx-935",
    "e-umr-mtt-align-cqe",
    "e-umr-mtt-align-wqe",
    "e-xsk-icosq-race-1",
    "e-xsk-icosq-race-2",
    "u-perlmutter-diffbragg",
    "u-perlmutter-diffbragg-nid001656",
    "u-perlmutter-diffbragg-nid002616",
];

fn captured_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../hw-traces/captured")
}

/// Every record of every `*.txt` file in `hw-traces/captured/`, with its file.
fn records() -> Vec<(PathBuf, TraceRecord)> {
    let dir = captured_dir();
    let mut files: Vec<PathBuf> = std::fs::read_dir(&dir)
        .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|x| x == "txt"))
        .collect();
    files.sort();
    let mut out = Vec::new();
    for file in files {
        let text = std::fs::read_to_string(&file).unwrap();
        let recs = parse_records(&text).unwrap_or_else(|e| panic!("{}: {e}", file.display()));
        out.extend(recs.into_iter().map(|r| (file.clone(), r)));
    }
    out
}

#[test]
fn every_captured_record_decodes_and_matches_its_source() {
    let recs = records();
    for id in KNOWN {
        assert!(
            recs.iter().any(|(_, r)| r.id == *id),
            "record [{id}] is missing from {}",
            captured_dir().display()
        );
    }
    let mut failures = Vec::new();
    let mut checked = 0;
    for (file, rec) in &recs {
        assert_eq!(
            rec.origin,
            "captured",
            "{}: captured/ holds real-hardware dumps only",
            file.display()
        );
        match check_record(rec) {
            Ok((n, context)) => {
                checked += n;
                for c in context {
                    println!("[{}] context only: {c}", rec.id);
                }
            }
            Err(e) => failures.push(format!("[{}] {}: {e}", rec.id, file.display())),
        }
    }
    println!(
        "{} records, {checked} expect values checked against the bytes",
        recs.len()
    );
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

#[test]
fn the_three_input_styles_agree() {
    for (_, rec) in records() {
        let reference = rec.decode().unwrap().to_json();
        let styles = [
            ("plain hex", hexdump::to_plain_hex(&rec.bytes)),
            (
                "one plain hex string",
                mlx5dp_setup::decode::hex_string(&rec.bytes),
            ),
            (
                "print_hex_dump",
                hexdump::to_print_hex_dump(&rec.bytes, "", false),
            ),
            (
                "print_hex_dump with dmesg prefix and ASCII",
                hexdump::to_print_hex_dump(
                    &rec.bytes,
                    "[  123.456789] mlx5_core 0000:3b:00.1 eth1: ",
                    true,
                ),
            ),
            ("rdma-core words", hexdump::to_word_dump(&rec.bytes)),
            (
                "rdma-core words as libmlx5 logs them",
                format!(
                    "mlx5: node-01: got completion with error:\n{}app: CQ error (4): local protection error\n",
                    hexdump::to_word_dump(&rec.bytes)
                ),
            ),
        ];
        for (style, text) in styles {
            let bytes = hexdump::parse(&text)
                .unwrap_or_else(|e| panic!("[{}] {style}: {e}\n{text}", rec.id));
            assert_eq!(bytes, rec.bytes, "[{}] {style}", rec.id);
            let mut again = rec.clone();
            again.bytes = bytes;
            assert_eq!(
                again.decode().unwrap().to_json(),
                reference,
                "[{}] {style}",
                rec.id
            );
        }
    }
}

/// A synthetic record: [k-umr-odp-iova]'s bytes with the given expect line.
fn synthetic(expect: &str) -> TraceRecord {
    let text = format!(
        "# source: [synthetic] a test\n# kind: error_cqe64\n# expect: {expect}\n\
         00000000: {zeros}\n00000010: {zeros}\n00000020: {zeros}\n\
         00000030: 00 00 00 00 0f 00 78 06 25 00 00 58 00 da ac d2\n",
        zeros = ["00"; 16].join(" ")
    );
    parse_records(&text).unwrap().remove(0)
}

#[test]
fn expect_keys_map_or_fail() {
    let rec = synthetic(
        "wc_status=6 wc_status_msg=memory_bind_operation_error qpn=0x58 opcode=0xd \
         err_sq=0x58 syndrome=0x6 vendor_err=0x78 hw_err_synd=0xf wqe_counter=218 cqn=0x1 ci=0x2",
    );
    let (checked, context) = check_record(&rec).unwrap();
    assert_eq!((checked, context.len()), (9, 2));
    // `ibv_wc` member names as applications print them.
    let rec =
        synthetic("status=6 status=memory_bind_operation_error qp_num=0x58 vendor_error=0x78");
    assert_eq!(check_record(&rec).unwrap(), (4, vec![]));
    for bad in [
        "frobnication=3",
        "wc_status=5",
        "err_rq=0x58",
        "qn=0x59",
        "wc_status_msg=remote_access_error",
        "status=5",
        "status=remote_access_error",
        "qp_num=0x59",
    ] {
        let err = check_record(&synthetic(bad)).unwrap_err();
        assert!(err.starts_with(bad), "{bad}: {err}");
    }
    let err = check_record(&synthetic("frobnication=3")).unwrap_err();
    assert!(err.contains("unknown expect key"), "{err}");
}

#[test]
fn specific_decodings_of_the_captured_records() {
    let recs = records();
    let json = |id: &str| {
        let (_, rec) = recs.iter().find(|(_, r)| r.id == id).unwrap();
        rec.decode().unwrap().to_json()
    };
    // UMR requester error: syndrome MW_BIND (0x06) → IBV_WC_MW_BIND_ERR.
    let j = json("k-umr-odp-iova");
    assert_eq!(j["s_wqe_opcode_name"], "umr");
    assert_eq!(j["syndrome_name"], "mw_bind_err");
    // Kernel Ethernet SQ: LOCAL_LENGTH on SEND, SQN in the CQE.
    let j = json("e-cx4lx-nolinear-cqe");
    assert_eq!(j["opcode"], "req_err");
    assert_eq!(j["s_wqe_opcode_name"], "send");
    assert_eq!(j["wc_status_name"], "local length error");
    // The raw-packet WQE: cs_flags 0xc0 in the Ethernet segment.
    let j = json("u-ali-send-wqe");
    assert_eq!(j["qp_type"], "raw");
    assert_eq!(j["segments"][0]["type"], "eth");
    assert_eq!(j["segments"][0]["cs_flags"], 0xc0);
    assert_eq!(j["segments"][0]["l3_csum"], true);
    assert_eq!(j["segments"][0]["l4_csum"], true);
    assert_eq!(j["segments"][1]["byte_count"], 554);
    // Its completion: a requester CQE for the same QP, SEND.
    let j = json("u-ali-send-cqe");
    assert_eq!(j["opcode"], "req");
    assert_eq!(j["send_opcode"], "send");
    assert_eq!(j["qpn"], 0x1150);
    assert_eq!(j["wc_status"], 0);
    // The SHAMPO responder error: LOCAL_PROT on an Ethernet RQ.
    let j = json("e-shampo-64k-rq");
    assert_eq!(j["opcode"], "resp_err");
    assert_eq!(j["wc_status"], 4);
    // DPDK wrote "seen" into bytes 1-5; the hardware fields still decode.
    let j = json("dpdk-warp17-1");
    assert_eq!(j["syndrome_name"], "local_prot_err");
    assert_eq!(j["qpn"], 0x1542);
    // The older kernel dump_cqe of an nvmet RDMA READ: the CQE names the read.
    let j = json("k-spdk-964");
    assert_eq!(j["s_wqe_opcode_name"], "rdma_read");
    assert_eq!(j["qpn"], 0x1af37);
    // A DCI's RDMA READ refused by the DCT: remote invalid request, vendor 0x8a.
    let j = json("u-ucx-1770");
    assert_eq!(j["syndrome_name"], "remote_inval_req_err");
    assert_eq!(j["s_wqe_opcode_name"], "rdma_read");
    // Local QP operation error on an RDMA WRITE, hw_error_syndrome 0x01.
    let j = json("u-ucx-857");
    assert_eq!(j["wc_status"], 2);
    assert_eq!(j["s_wqe_opcode_name"], "rdma_write");
    assert_eq!(j["hw_syndrome"], 1);
    // A 6.12 kernel printed "Message: memory bind operation error" for this
    // UMR error CQE: the kernel spelling since Linux 5.13.
    let j = json("k-odp-mr-race");
    assert_eq!(j["s_wqe_opcode_name"], "umr");
    assert_eq!(j["wc_status_kernel_name"], "memory bind operation error");
    // RNR retry exceeded (syndrome 0x16) on a SEND: libmlx5 dumps it.
    let j = json("u-rdma-cn-rnr");
    assert_eq!(j["syndrome_name"], "rnr_retry_exc_err");
    // SHAMPO: the same NIC failure as e-shampo-64k-rq, another CQ.
    let j = json("e-shampo-resv-rq");
    assert_eq!(j["opcode"], "resp_err");
    assert_eq!(j["wc_status"], 4);
    // A SEND refused for local protection; UCX printed vendor_err 0x52 and
    // the hardware syndrome byte is 0x92.
    let j = json("u-ucx-6414");
    assert_eq!(j["s_wqe_opcode_name"], "send");
    assert_eq!(j["hw_syndrome"], 0x92);
    // mlx5e's UMR on its Ethernet ICOSQ: laid out on the raw QP, its four
    // 8-byte MTT entries (page address | MLX5_EN_WR) in two octowords.
    let j = json("e-umr-mtt-align-wqe");
    assert_eq!(j["qp_type"], "raw");
    assert_eq!(j["warnings"], serde_json::json!([]));
    assert_eq!(j["segments"][0]["type"], "umr_ctrl");
    assert_eq!(j["segments"][0]["klm_octowords"], 2);
    assert_eq!(j["segments"][2]["mtt0"], 0x0800_0000_486a_0002_u64);
    assert_eq!(j["segments"][3]["mtt1"], 0x0800_0000_0e82_0002_u64);
    // An RDMA READ answered with a remote access error (syndrome 0x13).
    let j = json("u-ucx-935");
    assert_eq!(j["syndrome_name"], "remote_access_err");
    assert_eq!(j["s_wqe_opcode_name"], "rdma_read");
    assert_eq!(j["qpn"], 0x864);
}
