//! Ethernet/IPv4 frames for the offload scenarios, and an RFC 1071
//! checksum written here, independently of the emulator's (`emu::eth`),
//! so a test can verify what the device computed.

/// MAC of the sending side in the scenarios.
pub const SMAC: [u8; 6] = [2, 0, 0, 0, 0, 1];
/// MAC of the receiving side in the scenarios.
pub const DMAC: [u8; 6] = [2, 0, 0, 0, 0, 2];
/// Ethernet + IPv4 + TCP header bytes (no options).
pub const TCP_HDR_LEN: usize = 14 + 20 + 20;
/// Ethernet + IPv4 + UDP header bytes.
pub const UDP_HDR_LEN: usize = 14 + 20 + 8;

/// The RFC 1071 one's-complement sum of `data` (16-bit big-endian words,
/// an odd last byte padded with zero), folded to 16 bits, not complemented.
pub fn ones_sum(mut acc: u64, data: &[u8]) -> u64 {
    let mut i = 0;
    while i + 1 < data.len() {
        acc += u64::from(data[i]) << 8 | u64::from(data[i + 1]);
        i += 2;
    }
    if i < data.len() {
        acc += u64::from(data[i]) << 8;
    }
    acc
}

/// Folds a running sum to 16 bits (end-around carry).
pub fn fold(mut acc: u64) -> u16 {
    while acc >> 16 != 0 {
        acc = (acc & 0xffff) + (acc >> 16);
    }
    acc as u16
}

/// The Internet checksum of `data` (RFC 1071): the complement of the
/// folded one's-complement sum. Over a block that includes a correct
/// checksum field it is 0.
pub fn rfc1071(data: &[u8]) -> u16 {
    !fold(ones_sum(0, data))
}

fn ip_total(frame: &[u8]) -> usize {
    usize::from(u16::from_be_bytes([frame[16], frame[17]]))
}

/// Whether the IPv4 header checksum of `frame` (Ethernet + IPv4) is right.
pub fn ipv4_header_ok(frame: &[u8]) -> bool {
    let ihl = usize::from(frame[14] & 0x0f) * 4;
    rfc1071(&frame[14..14 + ihl]) == 0
}

/// The transport checksum over the IPv4 pseudo-header and the segment:
/// 0 (or, for UDP, a zero field meaning "none") when the field is right.
pub fn l4_check(frame: &[u8]) -> u16 {
    let ihl = usize::from(frame[14] & 0x0f) * 4;
    let proto = frame[23];
    let l4 = 14 + ihl;
    let end = 14 + ip_total(frame);
    let seg = &frame[l4..end];
    let mut acc = ones_sum(0, &frame[26..34]); // source and destination address
    acc += u64::from(proto);
    acc += seg.len() as u64;
    acc = ones_sum(acc, seg);
    !fold(acc)
}

/// The L4 checksum field of an IPv4 TCP or UDP frame.
pub fn l4_field(frame: &[u8]) -> u16 {
    let ihl = usize::from(frame[14] & 0x0f) * 4;
    let at = 14 + ihl + if frame[23] == 6 { 16 } else { 6 };
    u16::from_be_bytes([frame[at], frame[at + 1]])
}

/// An Ethernet + IPv4 + TCP frame with `payload`, both checksums zero
/// (left to the offload), sequence number `seq`, flags PSH|ACK.
pub fn ipv4_tcp(payload: &[u8], seq: u32, ip_id: u16) -> Vec<u8> {
    let mut f = Vec::with_capacity(TCP_HDR_LEN + payload.len());
    f.extend_from_slice(&DMAC);
    f.extend_from_slice(&SMAC);
    f.extend_from_slice(&0x0800u16.to_be_bytes());
    let total = (20 + 20 + payload.len()) as u16;
    f.extend_from_slice(&[0x45, 0]);
    f.extend_from_slice(&total.to_be_bytes());
    f.extend_from_slice(&ip_id.to_be_bytes());
    f.extend_from_slice(&[0x40, 0, 64, 6, 0, 0]); // DF, TTL 64, TCP, csum 0
    f.extend_from_slice(&[10, 0, 0, 1, 10, 0, 0, 2]);
    f.extend_from_slice(&4321u16.to_be_bytes());
    f.extend_from_slice(&80u16.to_be_bytes());
    f.extend_from_slice(&seq.to_be_bytes());
    f.extend_from_slice(&0x1000u32.to_be_bytes()); // ack
    f.extend_from_slice(&[0x50, 0x18]); // data offset 5, PSH|ACK
    f.extend_from_slice(&0xffffu16.to_be_bytes()); // window
    f.extend_from_slice(&[0, 0, 0, 0]); // checksum, urgent
    f.extend_from_slice(payload);
    f
}

/// An Ethernet + IPv4 + UDP frame with `payload`, checksums zero.
pub fn ipv4_udp(payload: &[u8], ip_id: u16) -> Vec<u8> {
    let mut f = Vec::with_capacity(UDP_HDR_LEN + payload.len());
    f.extend_from_slice(&DMAC);
    f.extend_from_slice(&SMAC);
    f.extend_from_slice(&0x0800u16.to_be_bytes());
    let total = (20 + 8 + payload.len()) as u16;
    f.extend_from_slice(&[0x45, 0]);
    f.extend_from_slice(&total.to_be_bytes());
    f.extend_from_slice(&ip_id.to_be_bytes());
    f.extend_from_slice(&[0, 0, 64, 17, 0, 0]);
    f.extend_from_slice(&[10, 0, 0, 1, 10, 0, 0, 2]);
    f.extend_from_slice(&5000u16.to_be_bytes());
    f.extend_from_slice(&6000u16.to_be_bytes());
    f.extend_from_slice(&((8 + payload.len()) as u16).to_be_bytes());
    f.extend_from_slice(&[0, 0]);
    f.extend_from_slice(payload);
    f
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rfc1071_example() {
        // RFC 1071 §3: the sum of 0001 f203 f4f5 f6f7 is 0x220d (folded 0xddf2).
        let d = [0x00, 0x01, 0xf2, 0x03, 0xf4, 0xf5, 0xf6, 0xf7];
        assert_eq!(fold(ones_sum(0, &d)), 0xddf2);
        assert_eq!(rfc1071(&d), !0xddf2);
    }

    #[test]
    fn a_zero_checksum_frame_fails_the_checks() {
        let f = ipv4_tcp(b"hello", 1, 7);
        assert!(!ipv4_header_ok(&f));
        assert_ne!(l4_check(&f), 0);
    }
}
