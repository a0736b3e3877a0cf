//! `mlx5dp info`: the devices found (the emulated ConnectX always; real
//! ones with the `verbs` feature) and, for the chosen one, its
//! capabilities as a table or JSON.
#![forbid(unsafe_code)]

use crate::emu::{Caps, LinkLayer, PortConfig};
use crate::perf::PerfError;
use clap::Args;
use serde_json::{json, Map, Value};
use std::fmt::Write as _;

/// Arguments of `mlx5dp info`.
#[derive(Debug, Args)]
pub struct InfoArgs {
    /// The device to describe: `emu` (default) or an RDMA device name.
    #[arg(long, short = 'd', default_value = "emu")]
    pub device: String,
    /// Print JSON.
    #[arg(long)]
    pub json: bool,
}

/// The devices found: name and kind.
pub fn devices() -> Vec<(String, &'static str)> {
    #[allow(unused_mut, reason = "extended with the verbs feature")]
    let mut v = vec![(
        "emu".to_string(),
        "emulated ConnectX (software, this process)",
    )];
    #[cfg(feature = "verbs")]
    if let Ok(names) = crate::verbs::list_devices() {
        v.extend(names.into_iter().map(|n| (n, "RDMA device (verbs)")));
    }
    v
}

/// The emulated device's capabilities, in order.
pub fn emu_caps(c: &Caps, port: &PortConfig) -> Vec<(&'static str, Value)> {
    let f = &c.flags;
    let formats: Vec<&str> = c.cqe_comp.formats.iter().map(|m| m.name()).collect();
    let s = &c.striding_rq;
    vec![
        ("max_inline", json!(c.max_inline)),
        ("max_sge", json!(c.max_sge)),
        ("max_qp_wr", json!(c.max_qp_wr)),
        ("max_cqe", json!(c.max_cqe)),
        ("max_send_wqe_bytes", json!(c.max_send_wqe_bytes)),
        ("mlx5dv_flags", json!(format!("{:#x}", f.mlx5dv_flags()))),
        ("cqe_v1", json!(f.cqe_v1)),
        ("mpw_allowed", json!(f.mpw_allowed)),
        ("enhanced_mpw", json!(f.enhanced_mpw)),
        ("cqe_128b_comp", json!(f.cqe_128b_comp)),
        ("cqe_128b_pad", json!(f.cqe_128b_pad)),
        ("real_time_ts", json!(f.real_time_ts)),
        ("blueflame", json!(f.blueflame)),
        ("cqe_compression_max_num", json!(c.cqe_comp.max_num)),
        ("cqe_compression_formats", json!(formats)),
        ("cqe_compression_basic", json!(c.cqe_comp.basic_layout)),
        (
            "cqe_compression_enhanced",
            json!(c.cqe_comp.enhanced_layout),
        ),
        (
            "striding_rq_log_stride_bytes",
            json!(format!(
                "{}..={}",
                s.min_log_stride_bytes, s.max_log_stride_bytes
            )),
        ),
        (
            "striding_rq_log_num_strides",
            json!(format!(
                "{}..={}",
                s.min_log_num_strides, s.max_log_num_strides
            )),
        ),
        ("hca_core_clock_khz", json!(c.hca_core_clock_khz)),
        ("eth_min_inline", json!(c.eth_min_inline)),
        ("max_tso_header", json!(c.max_tso_header)),
        ("bf_reg_size", json!(c.bf_reg_size)),
        ("port", json!(port_line(port))),
    ]
}

/// The emulated port in one line: number, link layer, the address a UD
/// address vector must carry to reach it (LID or MAC), GID index and GID.
pub fn port_line(p: &PortConfig) -> String {
    let gid = std::net::Ipv6Addr::from(p.gid);
    match p.link_layer {
        LinkLayer::InfiniBand => format!(
            "{} (InfiniBand, lid {:#x}, gid index {}, gid {gid})",
            p.port_num, p.lid, p.gid_index
        ),
        LinkLayer::Ethernet { roce_v2 } => {
            let m = p.mac;
            format!(
                "{} ({}, mac {:02x}:{:02x}:{:02x}:{:02x}:{:02x}:{:02x}, gid index {}, gid {gid})",
                p.port_num,
                if roce_v2 { "RoCE v2" } else { "RoCE v1" },
                m[0],
                m[1],
                m[2],
                m[3],
                m[4],
                m[5],
                p.gid_index
            )
        }
    }
}

#[cfg(feature = "verbs")]
fn verbs_caps(name: &str) -> Result<Vec<(&'static str, Value)>, PerfError> {
    let ctx = crate::verbs::Context::open(name).map_err(|e| PerfError::usage(e.to_string()))?;
    let c = ctx
        .query_caps()
        .map_err(|e| PerfError::usage(e.to_string()))?;
    let mut v = vec![
        ("fw_ver", json!(c.fw_ver)),
        ("vendor_part_id", json!(format!("{:#x}", c.vendor_part_id))),
        ("max_qp_wr", json!(c.max_qp_wr)),
        ("max_sge", json!(c.max_sge)),
        ("max_cqe", json!(c.max_cqe)),
        ("max_srq_wr", json!(c.max_srq_wr)),
        ("phys_port_cnt", json!(c.phys_port_cnt)),
        (
            "raw_packet_caps",
            json!(format!("{:#x}", c.raw_packet_caps)),
        ),
        ("max_tso", json!(c.max_tso)),
        ("cqe_version", json!(c.cqe_version)),
        ("mpw_allowed", json!(c.mpw_allowed)),
        ("enhanced_mpw", json!(c.enhanced_mpw)),
        ("cqe_128b_pad", json!(c.cqe_128b_pad)),
        ("real_time_ts", json!(c.real_time_ts)),
        ("hca_core_clock_khz", json!(c.hca_core_clock_khz)),
    ];
    match &c.cqe_compression {
        Some(z) => {
            let formats: Vec<&str> = z.formats.iter().map(|m| m.name()).collect();
            v.push(("cqe_compression_max_num", json!(z.max_num)));
            v.push(("cqe_compression_formats", json!(formats)));
        }
        None => v.push(("cqe_compression", json!(false))),
    }
    match &c.striding_rq {
        Some(s) => {
            v.push((
                "striding_rq_log_stride_bytes",
                json!(format!(
                    "{}..={}",
                    s.min_log_stride_bytes, s.max_log_stride_bytes
                )),
            ));
            v.push((
                "striding_rq_log_num_strides",
                json!(format!(
                    "{}..={}",
                    s.min_log_num_strides, s.max_log_num_strides
                )),
            ));
        }
        None => v.push(("striding_rq", json!(false))),
    }
    Ok(v)
}

/// Runs `mlx5dp info` and returns what to print.
pub fn run(a: &InfoArgs) -> Result<String, PerfError> {
    let caps = if a.device == "emu" {
        emu_caps(&Caps::default(), &PortConfig::default())
    } else {
        #[cfg(feature = "verbs")]
        {
            verbs_caps(&a.device)?
        }
        #[cfg(not(feature = "verbs"))]
        {
            return Err(crate::perf::device_error(&a.device));
        }
    };
    let unzip = crate::cpu::best_unzip().name();
    let devs = devices();
    if a.json {
        let list: Vec<Value> = devs
            .iter()
            .map(|(n, k)| json!({"name": n, "kind": k}))
            .collect();
        let caps: Map<String, Value> = caps.into_iter().map(|(k, v)| (k.to_string(), v)).collect();
        let j = json!({
            "devices": list,
            "device": a.device,
            "caps": caps,
            "cqe_unzip_path": unzip,
        });
        return Ok(format!("{j}\n"));
    }
    let mut o = String::new();
    let _ = writeln!(o, "devices:");
    for (n, k) in &devs {
        let mark = if *n == a.device { '*' } else { ' ' };
        let _ = writeln!(o, " {mark} {n:<12} {k}");
    }
    if !cfg!(feature = "verbs") {
        let _ = writeln!(
            o,
            "   (RDMA devices are listed with the `verbs` feature: cargo build --features verbs)"
        );
    }
    let _ = writeln!(o, "\ncapabilities of {}:", a.device);
    for (k, v) in &caps {
        let text = match v {
            Value::String(s) => s.clone(),
            Value::Array(xs) => xs
                .iter()
                .map(|x| x.as_str().map_or_else(|| x.to_string(), str::to_string))
                .collect::<Vec<_>>()
                .join(", "),
            other => other.to_string(),
        };
        let _ = writeln!(o, "   {k:<30} {text}");
    }
    let _ = writeln!(o, "   {:<30} {unzip} (this CPU)", "cqe_unzip_path");
    Ok(o)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn port_line_names_what_an_address_vector_must_carry() {
        assert_eq!(
            port_line(&PortConfig::INFINIBAND),
            "1 (InfiniBand, lid 0x1, gid index 0, gid fe80::200:5eff:fe00:1)"
        );
        assert_eq!(
            port_line(&PortConfig::ROCE_V2),
            "1 (RoCE v2, mac 02:00:5e:00:00:01, gid index 3, gid ::ffff:10.0.0.1)"
        );
        let v1 = PortConfig {
            link_layer: LinkLayer::Ethernet { roce_v2: false },
            ..PortConfig::ROCE_V2
        };
        assert!(port_line(&v1).starts_with("1 (RoCE v1, mac 02:00:5e:00:00:01,"));
    }
}
