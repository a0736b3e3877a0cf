//! The invariants every scenario checks at the end:
//! - every posted wr_id completes exactly once (retired by a completion,
//!   signalled or not), and nothing unposted completes;
//! - on each queue, once a completion is an error, every later one is a
//!   flush (nothing is delivered after an error except flushes).

use super::Retired;
use mlx5dp::prm::WcStatus;
use std::collections::{BTreeMap, BTreeSet};

/// What was posted, per queue.
#[derive(Debug, Default)]
pub struct Ledger {
    /// (send side?, queue key) → wr_ids in posting order.
    posted: BTreeMap<(bool, u32), Vec<u64>>,
}

impl Ledger {
    /// Records a send work request on QP `qpn`.
    pub fn send(&mut self, qpn: u32, wr_id: u64) {
        self.posted.entry((true, qpn)).or_default().push(wr_id);
    }

    /// Records a receive work request on the queue filed under `key`.
    pub fn recv(&mut self, key: u32, wr_id: u64) {
        self.posted.entry((false, key)).or_default().push(wr_id);
    }

    /// Forgets receive work requests that are still posted and will not
    /// complete in this scenario (an SRQ outlives its QPs).
    pub fn withdraw_recv(&mut self, key: u32, wr_ids: &[u64]) {
        if let Some(v) = self.posted.get_mut(&(false, key)) {
            v.retain(|w| !wr_ids.contains(w));
        }
    }

    /// Work requests posted so far.
    pub fn len(&self) -> usize {
        self.posted.values().map(Vec::len).sum()
    }

    /// Whether nothing was posted.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Posted work requests not yet retired: (send side?, queue, wr_id).
    pub fn missing(&self, retired: &[Retired]) -> Vec<(bool, u32, u64)> {
        let done: BTreeSet<(bool, u32, u64)> = retired
            .iter()
            .map(|r| (r.requester, r.qpn, r.wr_id))
            .collect();
        self.posted
            .iter()
            .flat_map(|(&(s, q), ids)| ids.iter().map(move |&w| (s, q, w)))
            .filter(|k| !done.contains(k))
            .collect()
    }

    /// Posted work requests not yet retired.
    pub fn outstanding(&self, retired: &[Retired]) -> usize {
        let done: BTreeSet<(bool, u32, u64)> = retired
            .iter()
            .map(|r| (r.requester, r.qpn, r.wr_id))
            .collect();
        self.posted
            .iter()
            .flat_map(|(&(s, q), ids)| ids.iter().map(move |&w| (s, q, w)))
            .filter(|k| !done.contains(k))
            .count()
    }

    /// Every posted wr_id retired exactly once, in posting order per
    /// queue, and nothing else retired.
    pub fn check_exactly_once(&self, retired: &[Retired]) -> Result<(), String> {
        let mut got: BTreeMap<(bool, u32), Vec<u64>> = BTreeMap::new();
        for r in retired {
            got.entry((r.requester, r.qpn)).or_default().push(r.wr_id);
        }
        for (key, ids) in &got {
            let posted = self.posted.get(key).map(Vec::as_slice).unwrap_or(&[]);
            let seen: BTreeSet<u64> = ids.iter().copied().collect();
            if seen.len() != ids.len() {
                return Err(format!("{key:?}: a wr_id completed twice: {ids:?}"));
            }
            if let Some(w) = ids.iter().find(|w| !posted.contains(w)) {
                return Err(format!(
                    "{key:?}: wr_id {w:#x} completed but was never posted"
                ));
            }
        }
        for (key, ids) in &self.posted {
            let done = got.get(key).map(Vec::as_slice).unwrap_or(&[]);
            if let Some(w) = ids.iter().find(|w| !done.contains(w)) {
                return Err(format!(
                    "{key:?}: wr_id {w:#x} never completed ({} of {} did)",
                    done.len(),
                    ids.len()
                ));
            }
        }
        Ok(())
    }
}

/// Per queue, in retirement order: after the first error, only flushes.
pub fn check_flush_after_error(retired: &[Retired]) -> Result<(), String> {
    let mut failed: BTreeMap<(bool, u32), u64> = BTreeMap::new();
    for r in retired {
        let key = (r.requester, r.qpn);
        if let Some(first) = failed.get(&key) {
            if r.status != WcStatus::WrFlushErr {
                return Err(format!(
                    "{key:?}: wr_id {:#x} completed {:?} after the error of {first:#x}",
                    r.wr_id, r.status
                ));
            }
        } else if r.status != WcStatus::Success {
            failed.insert(key, r.wr_id);
        }
    }
    Ok(())
}

/// Both invariants.
pub fn check_all(ledger: &Ledger, retired: &[Retired]) {
    if let Err(e) = ledger.check_exactly_once(retired) {
        panic!("exactly-once violated: {e}");
    }
    if let Err(e) = check_flush_after_error(retired) {
        panic!("flush-after-error violated: {e}");
    }
}
