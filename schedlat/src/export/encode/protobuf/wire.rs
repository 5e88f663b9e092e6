//! The protobuf wire format, as much of it as the exposition needs:
//! varints, 64-bit doubles, length-delimited strings and messages.
//!
//! A nested message is written in place: its length is not known until
//! its body is, so the body is written after room for the longest length
//! it can have, then moved back over what the length did not use. Every
//! byte is moved once per level it is nested in (six at most), where
//! building the messages first (prost's structs) allocated two Strings a
//! label and walked each message again for its length at every level.

/// Length-delimited (strings, bytes, messages).
const LEN: u32 = 2;
const VARINT: u32 = 0;
const FIXED64: u32 = 1;

/// Bytes a message's length may take: a body under 32 GiB.
const LENGTH_ROOM: usize = 5;

/// A body being written.
#[derive(Default)]
pub(super) struct Wire {
    pub buf: Vec<u8>,
}

impl Wire {
    pub(super) fn with_capacity(n: usize) -> Wire {
        Wire {
            buf: Vec::with_capacity(n),
        }
    }

    fn varint(&mut self, v: u64) {
        let (bytes, n) = varint(v);
        self.buf.extend_from_slice(&bytes[..n]);
    }

    fn key(&mut self, tag: u32, wire_type: u32) {
        self.varint(u64::from(tag << 3 | wire_type));
    }

    /// An `int32`, `int64` or `uint64` field (negative numbers as ten
    /// bytes, sign-extended, as protobuf writes them).
    pub(super) fn int(&mut self, tag: u32, v: i64) {
        self.key(tag, VARINT);
        self.varint(v as u64);
    }

    pub(super) fn uint(&mut self, tag: u32, v: u64) {
        self.key(tag, VARINT);
        self.varint(v);
    }

    /// A `sint32` or `sint64` field (zigzag).
    pub(super) fn sint(&mut self, tag: u32, v: i64) {
        self.key(tag, VARINT);
        self.varint(((v << 1) ^ (v >> 63)) as u64);
    }

    pub(super) fn double(&mut self, tag: u32, v: f64) {
        self.key(tag, FIXED64);
        self.buf.extend_from_slice(&v.to_le_bytes());
    }

    pub(super) fn string(&mut self, tag: u32, s: &str) {
        self.key(tag, LEN);
        self.varint(s.len() as u64);
        self.buf.extend_from_slice(s.as_bytes());
    }

    /// A message field whose body `body` writes.
    pub(super) fn message(&mut self, tag: u32, body: impl FnOnce(&mut Wire)) {
        self.key(tag, LEN);
        self.delimited(body);
    }

    /// A body preceded by its length as a varint (a message field's, or a
    /// message of a delimited stream).
    pub(super) fn delimited(&mut self, body: impl FnOnce(&mut Wire)) {
        let at = self.buf.len();
        self.buf.extend_from_slice(&[0; LENGTH_ROOM]);
        body(self);
        let len = self.buf.len() - at - LENGTH_ROOM;
        let (length, used) = varint(len as u64);
        assert!(used <= LENGTH_ROOM, "a message body of 32 GiB or more");
        self.buf.copy_within(at + LENGTH_ROOM.., at + used);
        self.buf[at..at + used].copy_from_slice(&length[..used]);
        self.buf.truncate(at + used + len);
    }
}

/// `v` as a varint: seven bits a byte, low first, the high bit set on
/// every byte but the last; the bytes and how many.
fn varint(mut v: u64) -> ([u8; 10], usize) {
    let mut out = [0; 10];
    let mut n = 0;
    while v >= 0x80 {
        out[n] = (v as u8) | 0x80;
        v >>= 7;
        n += 1;
    }
    out[n] = v as u8;
    (out, n + 1)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lengths_of_every_size_and_numbers_of_every_kind_are_encoded_as_prost_does() {
        use prost::encoding;
        for len in [0, 1, 127, 128, 16_383, 16_384, 70_000] {
            let body = "x".repeat(len);
            let mut ours = Wire::default();
            ours.message(4, |w| w.string(1, &body));
            let mut theirs = Vec::new();
            encoding::message::encode(4, &body_message(&body), &mut theirs);
            assert_eq!(ours.buf, theirs, "length {len}");
        }
        for v in [0, 1, -1, i64::MIN, i64::MAX, 300, -300] {
            let mut ours = Wire::default();
            ours.int(3, v);
            ours.sint(5, v);
            ours.uint(7, v as u64);
            ours.double(2, v as f64);
            let mut theirs = Vec::new();
            encoding::int64::encode(3, &v, &mut theirs);
            encoding::sint64::encode(5, &v, &mut theirs);
            encoding::uint64::encode(7, &(v as u64), &mut theirs);
            encoding::double::encode(2, &(v as f64), &mut theirs);
            assert_eq!(ours.buf, theirs, "{v}");
        }
    }

    #[derive(Clone, PartialEq, prost::Message)]
    struct Body {
        #[prost(string, optional, tag = "1")]
        s: Option<String>,
    }

    fn body_message(s: &str) -> Body {
        Body {
            s: Some(s.to_string()),
        }
    }
}
