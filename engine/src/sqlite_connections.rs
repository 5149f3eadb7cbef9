//! Settings every SQLite connection of this process gets when it opens, Cozo's included.
//!
//! Cozo opens its connections itself and runs no statement of ours on them, so the settings
//! go in through SQLite's own hook for that, an auto extension: a function SQLite calls on each
//! new connection.

use std::ffi::{c_char, c_int, c_void};
use std::sync::Once;

/// Pages a connection may keep, in KiB (SQLite's default is 2,000 KiB: 125 pages of 16 KiB).
/// Cozo keeps every relation in one table, and an edit reads the same pages of that B-tree
/// from several scripts (and a whole file's forms in one): with the default cache an edit on a
/// million-line store read 304 pages from the OS, with 16 MiB 152 (64 MiB: 141). The cache
/// fills with every page a write touches, too: a 5 MB save through the mount peaked 14–21 MB
/// higher with 16 MiB than with the default. `replace_form` on the million-line store, run
/// side by side (300 edits each): p50 9.2–9.6 ms with 4 MiB, 9.3 ms with 16 MiB, 9.5–9.6 ms
/// with the default; a 5 MB save peaked at +124–129 MB with 4 MiB, +136–141 MB with 16 MiB.
const CACHE_KIB: i64 = 4 * 1024;

/// Register the settings once per process, before the first connection opens.
pub(crate) fn configure() {
    static ONCE: Once = Once::new();
    ONCE.call_once(|| {
        // SAFETY: `on_open` has the signature SQLite calls auto extensions with; SQLite's
        // header declares the pointer as `void (*)(void)` and calls it with three arguments.
        unsafe {
            let entry: extern "C" fn() = std::mem::transmute(
                on_open
                    as extern "C" fn(
                        *mut sqlite3_sys::sqlite3,
                        *mut *mut c_char,
                        *const c_void,
                    ) -> c_int,
            );
            sqlite3_sys::sqlite3_auto_extension(Some(entry));
        }
    });
}

extern "C" fn on_open(
    db: *mut sqlite3_sys::sqlite3,
    _error: *mut *mut c_char,
    _api: *const c_void,
) -> c_int {
    let pragma = std::ffi::CString::new(format!("PRAGMA cache_size = -{CACHE_KIB};"))
        .expect("no NUL in a pragma");
    // SAFETY: `db` is the connection SQLite is opening; the statement holds no callback.
    // A failure leaves SQLite's defaults, which work; it is not the open's failure.
    unsafe {
        sqlite3_sys::sqlite3_exec(
            db,
            pragma.as_ptr(),
            None,
            std::ptr::null_mut(),
            std::ptr::null_mut(),
        );
    }
    0
}
