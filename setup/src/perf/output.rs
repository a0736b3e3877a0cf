//! A run's report: a perftest-like table for people, JSON for machines.
#![forbid(unsafe_code)]

use super::stats::{Latency, Throughput};
use serde_json::{json, Map, Value};
use std::fmt::Write as _;
use std::time::Duration;

/// What a test measured.
#[derive(Clone, Debug)]
pub struct Report {
    /// Test name (`send-lat`, ...).
    pub test: &'static str,
    /// A one-line title (`RDMA Write BW Test`).
    pub title: &'static str,
    /// Device the test ran on (`emu-thread`, ...).
    pub device: String,
    /// Parameters as run (transport, batch, inline, ...), in order.
    pub params: Vec<(&'static str, Value)>,
    /// Bytes per message (frame length for raw tests).
    pub bytes: u64,
    /// Iterations completed (round trips, messages, packets).
    pub iterations: u64,
    /// Wall time of the measured part.
    pub elapsed: Duration,
    /// Latency figures (latency tests).
    pub latency: Option<Latency>,
    /// Rate figures (bandwidth and raw tests).
    pub throughput: Option<Throughput>,
    /// Further figures (decompression share, device counters), in order.
    pub extra: Vec<(&'static str, Value)>,
}

fn us(ns: u64) -> f64 {
    ns as f64 / 1000.0
}

fn rule(out: &mut String) {
    out.push_str(&"-".repeat(92));
    out.push('\n');
}

fn value_text(v: &Value) -> String {
    match v {
        Value::String(s) => s.clone(),
        Value::Number(n) => match n.as_f64() {
            Some(f) if n.is_f64() => format!("{f:.3}"),
            _ => n.to_string(),
        },
        other => other.to_string(),
    }
}

impl Report {
    /// The table perftest users expect.
    pub fn table(&self) -> String {
        let mut o = String::new();
        rule(&mut o);
        let _ = writeln!(o, "{:^92}", self.title);
        let _ = writeln!(o, " {:<24}: {}", "Device", self.device);
        for (k, v) in &self.params {
            let _ = writeln!(o, " {:<24}: {}", k, value_text(v));
        }
        rule(&mut o);
        if let Some(l) = &self.latency {
            let _ = writeln!(
                o,
                " {:>8} {:>11} {:>11} {:>11} {:>11} {:>11} {:>11} {:>11} {:>11}",
                "#bytes",
                "#iterations",
                "t_min[us]",
                "t_max[us]",
                "t_median",
                "t_avg[us]",
                "t_stdev",
                "99%[us]",
                "99.9%[us]"
            );
            let _ = writeln!(
                o,
                " {:>8} {:>11} {:>11.3} {:>11.3} {:>11.3} {:>11.3} {:>11.3} {:>11.3} {:>11.3}",
                self.bytes,
                self.iterations,
                us(l.min),
                us(l.max),
                us(l.median),
                l.avg / 1000.0,
                l.stdev / 1000.0,
                us(l.p99),
                us(l.p999)
            );
            rule(&mut o);
            let _ = writeln!(o, " latency histogram (one-way, us):");
            let most = l.histogram.iter().map(|b| b.count).max().unwrap_or(1);
            for b in &l.histogram {
                let bar = ((b.count * 40).div_ceil(most)) as usize;
                let _ = writeln!(
                    o,
                    " {:>10.3} .. {:<10.3} {:>9} {}",
                    us(b.lo),
                    us(b.hi),
                    b.count,
                    "#".repeat(bar)
                );
            }
        }
        if let Some(t) = &self.throughput {
            let _ = writeln!(
                o,
                " {:>8} {:>12} {:>16} {:>18} {:>14}",
                "#bytes", "#iterations", "BW peak[MB/sec]", "BW average[MB/sec]", "MsgRate[Mpps]"
            );
            let _ = writeln!(
                o,
                " {:>8} {:>12} {:>16.2} {:>18.2} {:>14.6}",
                self.bytes,
                self.iterations,
                t.peak_mb_s(),
                t.avg_mb_s(),
                t.rate() / 1e6
            );
        }
        if !self.extra.is_empty() {
            rule(&mut o);
            for (k, v) in &self.extra {
                let _ = writeln!(o, " {:<24}: {}", k, value_text(v));
            }
        }
        rule(&mut o);
        let _ = writeln!(o, " run time {:.3} s", self.elapsed.as_secs_f64());
        o
    }

    /// The report as one JSON object.
    pub fn json(&self) -> Value {
        let mut m = Map::new();
        m.insert("test".into(), json!(self.test));
        m.insert("device".into(), json!(self.device));
        let params: Map<String, Value> = self
            .params
            .iter()
            .map(|(k, v)| ((*k).to_string(), v.clone()))
            .collect();
        m.insert("params".into(), Value::Object(params));
        m.insert("bytes".into(), json!(self.bytes));
        m.insert("iterations".into(), json!(self.iterations));
        m.insert("duration_s".into(), json!(self.elapsed.as_secs_f64()));
        if let Some(l) = &self.latency {
            let hist: Vec<Value> = l
                .histogram
                .iter()
                .map(|b| json!({"lo_us": us(b.lo), "hi_us": us(b.hi), "count": b.count}))
                .collect();
            m.insert(
                "latency_us".into(),
                json!({
                    "samples": l.samples,
                    "min": us(l.min),
                    "median": us(l.median),
                    "avg": l.avg / 1000.0,
                    "stdev": l.stdev / 1000.0,
                    "p99": us(l.p99),
                    "p99_9": us(l.p999),
                    "max": us(l.max),
                    "histogram": hist,
                }),
            );
        }
        if let Some(t) = &self.throughput {
            m.insert("bw_peak_mb_s".into(), json!(t.peak_mb_s()));
            m.insert("bw_avg_mb_s".into(), json!(t.avg_mb_s()));
            m.insert("msg_rate_mpps".into(), json!(t.rate() / 1e6));
        }
        for (k, v) in &self.extra {
            m.insert((*k).to_string(), v.clone());
        }
        Value::Object(m)
    }
}
