//! Texts the store keeps whole, packed: a zstd frame behind a tag no text starts with.
//!
//! Whole-file texts (a file's agreed text in `sync_base`, a file's as-stored text in
//! `file_text`) are the store's largest values and the least often read: Clojure source packs
//! about four to one at zstd's level 3, which reads back at about a gigabyte a second. A value
//! without the tag is a text stored before packing and reads as it is.
//!
//! A packed value is the tag, the text's length (8 bytes, little-endian) and one zstd frame.
//! Each thread keeps one zstd context to pack and one to unpack: a context made for every text
//! (as zstd's streaming encoder makes one, sized for texts of any length) cost an import of the
//! corpus a sixth of its time.

use std::cell::RefCell;

/// What a packed value starts with: 0xFE is never UTF-8, and no text formdb stores whole was
/// written with it before packing (0xFF starts a parted base's head, `sync_state::PARTED`).
const TAG: &[u8] = b"\xFEzst";

/// What a text kept as it is starts with, where zstd could not pack it (out of memory): no
/// zstd frame or text starts so.
const RAW_TAG: &[u8] = b"\xFEraw";

/// zstd's level: 3 is its default, four times as fast to pack as 9 for a few percent less.
const LEVEL: i32 = 3;

thread_local! {
    static PACKER: RefCell<Option<zstd::bulk::Compressor<'static>>> = const { RefCell::new(None) };
    static UNPACKER: RefCell<Option<zstd::bulk::Decompressor<'static>>> =
        const { RefCell::new(None) };
}

/// `text` packed, with the tag and its length.
pub fn pack(text: &[u8]) -> Vec<u8> {
    let frame = PACKER.with(|cell| {
        let mut packer = cell.borrow_mut();
        let packer = match &mut *packer {
            Some(p) => p,
            None => packer.insert(zstd::bulk::Compressor::new(LEVEL).ok()?),
        };
        packer.compress(text).ok()
    });
    let mut out = Vec::with_capacity(TAG.len() + 8 + frame.as_ref().map_or(0, Vec::len));
    out.extend_from_slice(TAG);
    out.extend_from_slice(&(text.len() as u64).to_le_bytes());
    match frame {
        Some(frame) => out.extend_from_slice(&frame),
        // zstd failed to make a context or a frame: the text is kept as it is instead.
        None => return [RAW_TAG, text].concat(),
    }
    out
}

/// The text a stored value holds: unpacked if it carries the tag, else as it is (a value stored
/// before packing). A tagged value that does not unpack is returned as it is, so that no reader
/// ever fails on it; its hash will not match what it stands for.
pub fn unpack(value: Vec<u8>) -> Vec<u8> {
    if let Some(text) = value.strip_prefix(RAW_TAG) {
        return text.to_vec();
    }
    let Some(rest) = value.strip_prefix(TAG) else { return value };
    let Some((len, frame)) = rest.split_first_chunk::<8>() else { return value };
    let len = u64::from_le_bytes(*len);
    // A length no frame of this size can hold is not ours: zstd packs at most about 1:32,000.
    let Some(len) = usize::try_from(len).ok().filter(|l| *l / 32_768 <= frame.len()) else {
        return value;
    };
    let text = UNPACKER.with(|cell| {
        let mut unpacker = cell.borrow_mut();
        let unpacker = match &mut *unpacker {
            Some(u) => u,
            None => unpacker.insert(zstd::bulk::Decompressor::new().ok()?),
        };
        unpacker.decompress(frame, len).ok().filter(|t| t.len() == len)
    });
    text.unwrap_or(value)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_packed_text_unpacks_to_itself_and_an_unpacked_one_reads_as_it_is() {
        let text = "(ns a.b)\n\n(defn f [x]\n  (+ x 1))\n".repeat(200);
        let packed = pack(text.as_bytes());
        assert!(packed.len() * 4 < text.len(), "{} bytes packed from {}", packed.len(), text.len());
        assert_eq!(unpack(packed.clone()), text.as_bytes());
        assert_eq!(unpack(pack(b"")), b"");
        // A value stored before packing, and bytes that only look packed: not a frame, a
        // length the frame cannot hold, a length other than the frame's.
        assert_eq!(unpack(text.clone().into_bytes()), text.as_bytes());
        let mut fake = TAG.to_vec();
        fake.extend_from_slice(b"not zstd at all");
        assert_eq!(unpack(fake.clone()), fake);
        let mut huge = packed.clone();
        huge[TAG.len()..TAG.len() + 8].copy_from_slice(&u64::MAX.to_le_bytes());
        assert_eq!(unpack(huge.clone()), huge);
        let mut short = packed.clone();
        short[TAG.len()..TAG.len() + 8].copy_from_slice(&10u64.to_le_bytes());
        assert_eq!(unpack(short.clone()), short);
    }
}
