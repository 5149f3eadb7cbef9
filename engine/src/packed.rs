//! Texts the store keeps whole, packed: a zstd frame behind a tag no text starts with.
//!
//! Whole-file texts (a file's agreed text in `sync_base`, a file's as-stored text in
//! `file_text`) are the store's largest values and the least often read: Clojure source packs
//! about four to one at zstd's level 3, which reads back at about a gigabyte a second. A value
//! without the tag is a text stored before packing and reads as it is.

/// What a packed value starts with: 0xFE is never UTF-8, and no text formdb stores whole was
/// written with it before packing (0xFF starts a parted base's head, `sync_state::PARTED`).
const TAG: &[u8] = b"\xFEzst";

/// zstd's level: 3 is its default, four times as fast to pack as 9 for a few percent less.
const LEVEL: i32 = 3;

/// `text` packed, with the tag.
pub fn pack(text: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(TAG.len() + text.len() / 3 + 64);
    out.extend_from_slice(TAG);
    // Writing into a `Vec` cannot fail, and neither can packing bytes at a valid level.
    let mut encoder = zstd::stream::Encoder::new(out, LEVEL).expect("a valid zstd level");
    std::io::Write::write_all(&mut encoder, text).expect("writing into memory");
    encoder.finish().expect("writing into memory")
}

/// The text a stored value holds: unpacked if it carries the tag, else as it is (a value stored
/// before packing). A tagged value that does not unpack is returned as it is, so that no reader
/// ever fails on it; its hash will not match what it stands for.
pub fn unpack(value: Vec<u8>) -> Vec<u8> {
    let Some(frame) = value.strip_prefix(TAG) else { return value };
    match zstd::stream::decode_all(frame) {
        Ok(text) => text,
        Err(_) => value,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_packed_text_unpacks_to_itself_and_an_unpacked_one_reads_as_it_is() {
        let text = "(ns a.b)\n\n(defn f [x]\n  (+ x 1))\n".repeat(200);
        let packed = pack(text.as_bytes());
        assert!(packed.len() * 4 < text.len(), "{} bytes packed from {}", packed.len(), text.len());
        assert_eq!(unpack(packed), text.as_bytes());
        assert_eq!(unpack(pack(b"")), b"");
        // A value stored before packing, and bytes that only look packed.
        assert_eq!(unpack(text.clone().into_bytes()), text.as_bytes());
        let mut fake = TAG.to_vec();
        fake.extend_from_slice(b"not zstd");
        assert_eq!(unpack(fake.clone()), fake);
    }
}
