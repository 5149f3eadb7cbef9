//! A file's text as the parser keeps it: owned, or shared with the writer that handed it over.

use std::ops::Deref;
use std::sync::Arc;

/// A file's text (UTF-8): owned, or shared with the writer that handed it over (a mount's
/// buffer of a save), so that a big save does not hold a copy of its text beside the writer's
/// while its forms are resolved (50 MB of real code: 52 MB of its peak).
#[derive(Clone, Debug, Default)]
pub struct FileText(Repr);

#[derive(Clone, Debug)]
enum Repr {
    Owned(String),
    /// Checked to be UTF-8 when made ([`FileText::shared`]); an `Arc` lends no mutable access
    /// while shared, so it stays so.
    Shared(Arc<Vec<u8>>),
}

impl Default for Repr {
    fn default() -> Repr {
        Repr::Owned(String::new())
    }
}

impl FileText {
    /// `bytes` shared, if they are UTF-8.
    pub fn shared(bytes: Arc<Vec<u8>>) -> Result<FileText, std::str::Utf8Error> {
        std::str::from_utf8(&bytes)?;
        Ok(FileText(Repr::Shared(bytes)))
    }

    /// The text as an owned `String`: moved out when owned, copied when shared.
    pub fn into_string(self) -> String {
        match self.0 {
            Repr::Owned(s) => s,
            Repr::Shared(_) => self.to_string(),
        }
    }
}

impl Deref for FileText {
    type Target = str;

    fn deref(&self) -> &str {
        match &self.0 {
            Repr::Owned(s) => s,
            // SAFETY: checked to be UTF-8 in `FileText::shared`, and immutable since.
            Repr::Shared(bytes) => unsafe { std::str::from_utf8_unchecked(bytes) },
        }
    }
}

impl From<String> for FileText {
    fn from(text: String) -> FileText {
        FileText(Repr::Owned(text))
    }
}

impl PartialEq for FileText {
    fn eq(&self, other: &FileText) -> bool {
        **self == **other
    }
}

impl Eq for FileText {}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_shared_text_reads_as_its_bytes_and_refuses_what_is_not_utf8() {
        let bytes = Arc::new(b"(ns a)\n(def x 1)\n".to_vec());
        let text = FileText::shared(bytes.clone()).unwrap();
        assert_eq!(&*text, "(ns a)\n(def x 1)\n");
        assert_eq!(Arc::strong_count(&bytes), 2, "shared, not copied");
        assert_eq!(text, FileText::from("(ns a)\n(def x 1)\n".to_string()));
        assert!(FileText::shared(Arc::new(vec![b'(', 0xff, b')'])).is_err());
    }
}
