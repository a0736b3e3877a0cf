//! Ethernet frames as the device sees them: header parsing, checksum
//! offload computed for real, VLAN insertion and stripping, TCP
//! segmentation, the receive-side checks that fill a CQE, and the Toeplitz
//! hash.
//!
//! Frames are plain byte slices; nothing here panics on a short or
//! malformed frame (offsets are checked, a frame that does not parse is
//! "no L3"/"no L4").
#![forbid(unsafe_code)]

/// EtherType of IPv4.
pub const ETH_P_IPV4: u16 = 0x0800;
/// EtherType of IPv6.
pub const ETH_P_IPV6: u16 = 0x86dd;
/// TPID of an 802.1Q C-VLAN tag.
pub const ETH_P_8021Q: u16 = 0x8100;
/// TPID of an 802.1ad S-VLAN tag.
pub const ETH_P_8021AD: u16 = 0x88a8;
/// IP protocol number of TCP.
pub const IPPROTO_TCP: u8 = 6;
/// IP protocol number of UDP.
pub const IPPROTO_UDP: u8 = 17;

/// The network layer of a frame.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum L3 {
    /// Not IP (or too short).
    None,
    /// IPv4 at `off` with header length `ihl` bytes and total length `total`.
    V4 {
        /// Offset of the IP header.
        off: usize,
        /// Header length in bytes.
        ihl: usize,
        /// Total length field.
        total: usize,
        /// A fragment (MF set or offset non-zero).
        frag: bool,
    },
    /// IPv6 at `off` (no extension headers are followed).
    V6 {
        /// Offset of the IP header.
        off: usize,
        /// Payload length field.
        payload: usize,
    },
}

/// The transport layer of a frame.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum L4 {
    /// Neither TCP nor UDP.
    None,
    /// TCP at `off`, header `len` bytes.
    Tcp {
        /// Offset of the TCP header.
        off: usize,
        /// Header length.
        len: usize,
    },
    /// UDP at `off`.
    Udp {
        /// Offset of the UDP header.
        off: usize,
    },
}

/// Where a frame's headers are.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Headers {
    /// Length of the L2 header (14, or 18 with one VLAN tag).
    pub l2_len: usize,
    /// The VLAN TCI of a C-VLAN tag.
    pub cvlan: Option<u16>,
    /// Network layer.
    pub l3: L3,
    /// Transport layer.
    pub l4: L4,
}

fn be16(b: &[u8], off: usize) -> Option<u16> {
    Some(u16::from_be_bytes([*b.get(off)?, *b.get(off + 1)?]))
}

fn put16(b: &mut [u8], off: usize, v: u16) {
    if let Some(s) = b.get_mut(off..off + 2) {
        s.copy_from_slice(&v.to_be_bytes());
    }
}

/// Parses the L2/L3/L4 headers of `frame`.
pub fn parse(frame: &[u8]) -> Headers {
    let mut h = Headers {
        l2_len: 14,
        cvlan: None,
        l3: L3::None,
        l4: L4::None,
    };
    let Some(mut ethertype) = be16(frame, 12) else {
        h.l2_len = frame.len();
        return h;
    };
    if ethertype == ETH_P_8021Q || ethertype == ETH_P_8021AD {
        h.cvlan = if ethertype == ETH_P_8021Q {
            be16(frame, 14)
        } else {
            None
        };
        h.l2_len = 18;
        match be16(frame, 16) {
            Some(t) => ethertype = t,
            None => return h,
        }
    }
    let off = h.l2_len;
    let proto = match ethertype {
        ETH_P_IPV4 => {
            let Some(&vihl) = frame.get(off) else {
                return h;
            };
            let ihl = usize::from(vihl & 0x0f) * 4;
            if vihl >> 4 != 4 || ihl < 20 || frame.len() < off + ihl {
                return h;
            }
            let total = usize::from(be16(frame, off + 2).unwrap_or(0));
            let fragw = be16(frame, off + 6).unwrap_or(0);
            let frag = fragw & 0x3fff != 0;
            h.l3 = L3::V4 {
                off,
                ihl,
                total,
                frag,
            };
            if frag {
                return h;
            }
            (frame[off + 9], off + ihl)
        }
        ETH_P_IPV6 => {
            if frame.len() < off + 40 || frame[off] >> 4 != 6 {
                return h;
            }
            let payload = usize::from(be16(frame, off + 4).unwrap_or(0));
            h.l3 = L3::V6 { off, payload };
            (frame[off + 6], off + 40)
        }
        _ => return h,
    };
    let (p, l4off) = proto;
    h.l4 = match p {
        IPPROTO_TCP => match frame.get(l4off + 12) {
            Some(&d) if usize::from(d >> 4) * 4 >= 20 => L4::Tcp {
                off: l4off,
                len: usize::from(d >> 4) * 4,
            },
            _ => L4::None,
        },
        IPPROTO_UDP if frame.len() >= l4off + 8 => L4::Udp { off: l4off },
        _ => L4::None,
    };
    h
}

/// Adds `bytes` as big-endian 16-bit words to a one's-complement sum.
pub fn csum_add(mut sum: u32, bytes: &[u8]) -> u32 {
    let mut chunks = bytes.chunks_exact(2);
    for c in &mut chunks {
        sum = sum.wrapping_add(u32::from(u16::from_be_bytes([c[0], c[1]])));
    }
    if let [last] = chunks.remainder() {
        sum = sum.wrapping_add(u32::from(*last) << 8);
    }
    sum
}

/// Folds a one's-complement sum to 16 bits (not complemented).
pub fn csum_fold(mut sum: u32) -> u16 {
    while sum > 0xffff {
        sum = (sum & 0xffff) + (sum >> 16);
    }
    sum as u16
}

/// The end of the IP datagram inside the frame (excludes Ethernet padding).
fn l3_end(frame: &[u8], l3: L3) -> usize {
    let end = match l3 {
        L3::V4 { off, total, .. } => off + total,
        L3::V6 { off, payload } => off + 40 + payload,
        L3::None => frame.len(),
    };
    end.min(frame.len())
}

/// The pseudo-header sum of the transport checksum.
fn pseudo_sum(frame: &[u8], l3: L3, proto: u8, l4_len: usize) -> u32 {
    let mut s = match l3 {
        L3::V4 { off, .. } => csum_add(0, frame.get(off + 12..off + 20).unwrap_or(&[])),
        L3::V6 { off, .. } => csum_add(0, frame.get(off + 8..off + 40).unwrap_or(&[])),
        L3::None => 0,
    };
    s = s.wrapping_add(u32::from(proto));
    s.wrapping_add(l4_len as u32)
}

/// Computes the checksums the Ethernet segment's `cs_flags` ask for, in
/// place: the IPv4 header checksum (`l3`) and the TCP/UDP checksum with its
/// pseudo-header (`l4`).
pub fn offload_checksums(frame: &mut [u8], l3: bool, l4: bool) {
    let h = parse(frame);
    if l3 {
        if let L3::V4 { off, ihl, .. } = h.l3 {
            put16(frame, off + 10, 0);
            let c = !csum_fold(csum_add(0, &frame[off..off + ihl]));
            put16(frame, off + 10, c);
        }
    }
    if l4 {
        let end = l3_end(frame, h.l3);
        let (off, proto, field) = match h.l4 {
            L4::Tcp { off, .. } => (off, IPPROTO_TCP, off + 16),
            L4::Udp { off } => (off, IPPROTO_UDP, off + 6),
            L4::None => return,
        };
        if end < off + 8 {
            return;
        }
        put16(frame, field, 0);
        let sum = csum_add(pseudo_sum(frame, h.l3, proto, end - off), &frame[off..end]);
        let mut c = !csum_fold(sum);
        if proto == IPPROTO_UDP && c == 0 {
            c = 0xffff;
        }
        put16(frame, field, c);
    }
}

/// Inserts a VLAN tag after the MAC addresses (C-VLAN TPID 0x8100, or
/// S-VLAN 0x88a8 when `svlan`).
pub fn insert_vlan(frame: &[u8], tci: u16, svlan: bool) -> Vec<u8> {
    let mut out = Vec::with_capacity(frame.len() + 4);
    let split = frame.len().min(12);
    out.extend_from_slice(&frame[..split]);
    let tpid = if svlan { ETH_P_8021AD } else { ETH_P_8021Q };
    out.extend_from_slice(&tpid.to_be_bytes());
    out.extend_from_slice(&tci.to_be_bytes());
    out.extend_from_slice(&frame[split..]);
    out
}

/// Removes a C-VLAN tag; returns the frame without it and the TCI.
pub fn strip_cvlan(frame: &[u8]) -> (Vec<u8>, Option<u16>) {
    match (be16(frame, 12), be16(frame, 14)) {
        (Some(ETH_P_8021Q), Some(tci)) if frame.len() >= 18 => {
            let mut out = Vec::with_capacity(frame.len() - 4);
            out.extend_from_slice(&frame[..12]);
            out.extend_from_slice(&frame[16..]);
            (out, Some(tci))
        }
        _ => (frame.to_vec(), None),
    }
}

/// Splits a TCP frame whose first `hdr_len` bytes are the L2–L4 headers
/// into segments of at most `mss` payload bytes: IP length and (IPv4)
/// identification adjusted, TCP sequence advanced, FIN/PSH kept for the
/// last segment only and CWR for the first, checksums computed.
/// `None` if the frame is not TCP over IP or the header length is wrong.
pub fn tso(frame: &[u8], hdr_len: usize, mss: u16) -> Option<Vec<Vec<u8>>> {
    let h = parse(frame);
    let L4::Tcp { off: tcp, len } = h.l4 else {
        return None;
    };
    if tcp + len != hdr_len || mss == 0 || frame.len() < hdr_len {
        return None;
    }
    let payload = &frame[hdr_len..];
    let chunks: Vec<&[u8]> = if payload.is_empty() {
        vec![&[][..]]
    } else {
        payload.chunks(usize::from(mss)).collect()
    };
    let seq0 = u32::from_be_bytes(frame.get(tcp + 4..tcp + 8)?.try_into().ok()?);
    let flags0 = frame[tcp + 13];
    let n = chunks.len();
    let mut out = Vec::with_capacity(n);
    let mut seq = seq0;
    for (i, chunk) in chunks.into_iter().enumerate() {
        let mut seg = Vec::with_capacity(hdr_len + chunk.len());
        seg.extend_from_slice(&frame[..hdr_len]);
        seg.extend_from_slice(chunk);
        match h.l3 {
            L3::V4 { off, .. } => {
                put16(&mut seg, off + 2, (hdr_len - off + chunk.len()) as u16);
                let id = be16(frame, off + 4).unwrap_or(0).wrapping_add(i as u16);
                put16(&mut seg, off + 4, id);
            }
            L3::V6 { off, .. } => {
                put16(&mut seg, off + 4, (hdr_len - off - 40 + chunk.len()) as u16)
            }
            L3::None => return None,
        }
        seg[tcp + 4..tcp + 8].copy_from_slice(&seq.to_be_bytes());
        let mut flags = flags0;
        if i + 1 < n {
            flags &= !0x09; // FIN, PSH only on the last segment
        }
        if i > 0 {
            flags &= !0x80; // CWR only on the first
        }
        seg[tcp + 13] = flags;
        offload_checksums(&mut seg, true, true);
        seq = seq.wrapping_add(chunk.len() as u32);
        out.push(seg);
    }
    Some(out)
}

/// What the receive side learns about a frame for its CQE.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RxInfo {
    /// L2 header fine (always, for a frame that reached an RQ).
    pub l2_ok: bool,
    /// IPv4 header checksum correct (IPv6: header present).
    pub l3_ok: bool,
    /// TCP/UDP checksum correct.
    pub l4_ok: bool,
    /// CQE L3 type: 0 none, 1 IPv6, 2 IPv4.
    pub l3_type: u8,
    /// CQE L4 type: 0 none, 1 TCP no ACK, 2 UDP, 3 TCP ACK no data, 4 TCP ACK + data.
    pub l4_type: u8,
    /// IP fragment.
    pub ip_frag: bool,
    /// One's-complement sum of the IP datagram (from the L3 header to the
    /// IP length, padding excluded), folded, not complemented: what the
    /// kernel turns into `CHECKSUM_COMPLETE` (en_rx.c).
    pub check_sum: u16,
    /// Toeplitz hash of the addresses (and ports for TCP/UDP), default key.
    pub hash: u32,
}

/// Computes the receive-side facts of a frame.
pub fn rx_info(frame: &[u8]) -> RxInfo {
    let h = parse(frame);
    let mut r = RxInfo {
        l2_ok: true,
        l3_ok: false,
        l4_ok: false,
        l3_type: 0,
        l4_type: 0,
        ip_frag: false,
        check_sum: 0,
        hash: 0,
    };
    let end = l3_end(frame, h.l3);
    let mut hash_in = Vec::with_capacity(36);
    match h.l3 {
        L3::V4 { off, ihl, frag, .. } => {
            r.l3_type = 2;
            r.ip_frag = frag;
            r.l3_ok = csum_fold(csum_add(0, &frame[off..off + ihl])) == 0xffff;
            r.check_sum = csum_fold(csum_add(0, &frame[off..end.max(off)]));
            hash_in.extend_from_slice(&frame[off + 12..off + 20]);
        }
        L3::V6 { off, .. } => {
            r.l3_type = 1;
            r.l3_ok = true;
            r.check_sum = csum_fold(csum_add(0, &frame[off..end.max(off)]));
            hash_in.extend_from_slice(&frame[off + 8..off + 40]);
        }
        L3::None => return r,
    }
    let (off, proto) = match h.l4 {
        L4::Tcp { off, len } => {
            let flags = frame[off + 13];
            let ack = flags & 0x10 != 0;
            let data = end > off + len;
            r.l4_type = match (ack, data) {
                (false, _) => 1,
                (true, false) => 3,
                (true, true) => 4,
            };
            (off, IPPROTO_TCP)
        }
        L4::Udp { off } => {
            r.l4_type = 2;
            (off, IPPROTO_UDP)
        }
        L4::None => {
            r.hash = toeplitz(&hash_in);
            return r;
        }
    };
    if end >= off + 8 {
        hash_in.extend_from_slice(&frame[off..off + 4]);
        let udp_zero = proto == IPPROTO_UDP
            && matches!(h.l3, L3::V4 { .. })
            && be16(frame, off + 6) == Some(0);
        let sum = csum_add(pseudo_sum(frame, h.l3, proto, end - off), &frame[off..end]);
        r.l4_ok = udp_zero || csum_fold(sum) == 0xffff;
    }
    r.hash = toeplitz(&hash_in);
    r
}

/// The default 40-byte RSS key (Microsoft's RSS specification, also
/// DPDK's `rss_hash_default_key`).
pub const TOEPLITZ_KEY: [u8; 40] = [
    0x6d, 0x5a, 0x56, 0xda, 0x25, 0x5b, 0x0e, 0xc2, 0x41, 0x67, 0x25, 0x3d, 0x43, 0xa3, 0x8f, 0xb0,
    0xd0, 0xca, 0x2b, 0xcb, 0xae, 0x7b, 0x30, 0xb4, 0x77, 0xcb, 0x2d, 0xa3, 0x80, 0x30, 0xf2, 0x0c,
    0x6a, 0x42, 0xb7, 0x3b, 0xbe, 0xac, 0x01, 0xfa,
];

/// The Toeplitz hash of `input` with [`TOEPLITZ_KEY`].
pub fn toeplitz(input: &[u8]) -> u32 {
    let key = &TOEPLITZ_KEY;
    let mut window = u32::from_be_bytes([key[0], key[1], key[2], key[3]]);
    let mut result = 0u32;
    for (i, byte) in input.iter().enumerate() {
        let next = key.get(i + 4).copied().unwrap_or(0);
        for bit in 0..8 {
            if byte & (0x80 >> bit) != 0 {
                result ^= window;
            }
            window = (window << 1) | u32::from((next >> (7 - bit)) & 1);
        }
    }
    result
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Builds an Ethernet/IPv4/UDP frame with zeroed checksums.
    pub(crate) fn udp4(payload: &[u8]) -> Vec<u8> {
        let mut f = vec![0u8; 14 + 20 + 8];
        f[..6].copy_from_slice(&[0x02, 0, 0, 0, 0, 2]);
        f[6..12].copy_from_slice(&[0x02, 0, 0, 0, 0, 1]);
        f[12..14].copy_from_slice(&ETH_P_IPV4.to_be_bytes());
        f[14] = 0x45;
        f[16..18].copy_from_slice(&((20 + 8 + payload.len()) as u16).to_be_bytes());
        f[22] = 64;
        f[23] = IPPROTO_UDP;
        f[26..30].copy_from_slice(&[66, 9, 149, 187]);
        f[30..34].copy_from_slice(&[161, 142, 100, 80]);
        f[34..36].copy_from_slice(&2794u16.to_be_bytes());
        f[36..38].copy_from_slice(&1766u16.to_be_bytes());
        f[38..40].copy_from_slice(&((8 + payload.len()) as u16).to_be_bytes());
        f.extend_from_slice(payload);
        f
    }

    #[test]
    fn toeplitz_matches_the_rss_spec_vector() {
        // Microsoft RSS verification suite: 66.9.149.187:2794 -> 161.142.100.80:1766.
        let ip = [66, 9, 149, 187, 161, 142, 100, 80];
        assert_eq!(toeplitz(&ip), 0x323e_8fc2);
        let mut l4 = ip.to_vec();
        l4.extend_from_slice(&2794u16.to_be_bytes());
        l4.extend_from_slice(&1766u16.to_be_bytes());
        assert_eq!(toeplitz(&l4), 0x51cc_c178);
    }

    #[test]
    fn checksums_round_trip() {
        let mut f = udp4(b"hello, checksum");
        let before = rx_info(&f);
        assert!(!before.l3_ok);
        offload_checksums(&mut f, true, true);
        let after = rx_info(&f);
        assert!(after.l3_ok && after.l4_ok);
        assert_eq!((after.l3_type, after.l4_type), (2, 2));
    }

    #[test]
    fn vlan_insert_and_strip() {
        let f = udp4(b"x");
        let t = insert_vlan(&f, 0x0123, false);
        assert_eq!(t.len(), f.len() + 4);
        assert_eq!(parse(&t).cvlan, Some(0x0123));
        let (s, tci) = strip_cvlan(&t);
        assert_eq!((s, tci), (f, Some(0x0123)));
    }
}
