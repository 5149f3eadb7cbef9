//! Which allocator serves what, and when memory goes back to the system.
//!
//! tree-sitter's allocations (syntax trees, parser stacks) go to mimalloc; Rust's and SQLite's
//! stay with glibc's malloc. An import builds and drops a syntax tree per file: with glibc, a
//! third of its reading thread was malloc and free (consolidating fastbins as each batch's
//! trees were dropped). Side by side at a million lines: 14.6–15.5 s wall and 22.1–23.2 s of
//! CPU with glibc for everything, 12.1–12.3 s and 16.5–17.0 s with mimalloc for everything; in
//! another run, 12.8 s and 18.2 s with mimalloc for tree-sitter alone against 13.0 s and
//! 17.9 s with it for everything. mimalloc for Rust's allocations too made a 5 MB save of real
//! code through the mount peak 17% lower but one of 50-byte forms 12% higher, and `formdb up`
//! warmed up to 1.31–1.38x its RSS after 100 edits (1.14x with glibc, 1.22x with tree-sitter
//! alone on mimalloc): the rows and caches stay with glibc.

/// `mi_option_purge_delay` in mimalloc.h's option enum (v2 and v3 alike): the crate names its
/// neighbours (`mi_option_eager_commit_delay` = 14, `mi_option_use_numa_nodes` = 16), not it.
const MI_OPTION_PURGE_DELAY: libmimalloc_sys::mi_option_t = 15;

/// mimalloc's own purge delay, in milliseconds.
const MI_DEFAULT_PURGE_DELAY: std::ffi::c_long = 10;

/// Set up before any other thread starts and before any tree-sitter object exists: memory
/// freed goes back to the system at once.
///
/// mimalloc has no thread of its own: with its delay, a purge waits for a later allocation, so
/// a thread gone idle keeps what it freed. glibc's malloc gives allocations of 128 KiB and more
/// pages of their own, returned when freed: its default raises that threshold to the largest
/// block freed so far (up to 32 MiB), after which big blocks come from its arenas, whose freed
/// middles stay resident (a 5 MB save through the mount peaked 3–11 MB higher).
pub(crate) fn give_memory_back() {
    // SAFETY: allocator tunables, set while the process has one thread. The functions handed
    // to tree-sitter are mimalloc's malloc family, with C's signatures and contract.
    unsafe {
        libmimalloc_sys::mi_option_set(MI_OPTION_PURGE_DELAY, 0);
        tree_sitter::set_allocator(
            Some(libmimalloc_sys::mi_malloc),
            Some(libmimalloc_sys::mi_calloc),
            Some(libmimalloc_sys::mi_realloc),
            Some(libmimalloc_sys::mi_free),
        );
        #[cfg(target_env = "gnu")]
        libc::mallopt(libc::M_MMAP_THRESHOLD, 128 << 10);
    }
}

/// For a command that exits when its work is done (`formdb import`): its memory goes back at
/// exit, and purging at every free cost a million-line import over a second of system time.
pub(crate) fn purge_lazily() {
    // SAFETY: an allocator tunable; mimalloc reads its options as it purges.
    unsafe { libmimalloc_sys::mi_option_set(MI_OPTION_PURGE_DELAY, MI_DEFAULT_PURGE_DELAY) }
}

/// How often a long-running process gives glibc's free pages back (see [`trim_while_running`]).
#[cfg(target_env = "gnu")]
const TRIM_EVERY: std::time::Duration = std::time::Duration::from_secs(2);

/// For the commands that stay up (`formdb up`, `mount`, a serving `mcp`): a thread gives the
/// free pages of glibc's arenas back to the system every `TRIM_EVERY` (2 s), and a big save
/// gives them back as soon as its rows are dropped (`change::on_big_change_dropped`).
///
/// glibc returns memory only from the top of an arena; what a request frees in the middle stays
/// resident. Under MCP edits `formdb up` grew from 141 MB after 100 edits to 180 MB after
/// 3,000, and `malloc_trim` then took it to 96 MB: most of what it held was memory the edits
/// (and the startup import) had freed, kept by glibc's arenas.
/// `malloc_trim` takes each arena's lock in turn while it walks its free chunks, so an edit
/// waits at most one arena's walk; pages it gives back are faulted in again when used.
pub(crate) fn trim_while_running() {
    #[cfg(target_env = "gnu")]
    {
        // Started before the commands block their stop signals for the thread that waits on
        // them: a SIGTERM delivered to this thread would kill the process without its unmount.
        // It starts with every signal blocked (a thread inherits its creator's mask), so none
        // reaches it even before it first runs: blocked by the thread itself, a SIGTERM sent
        // while a loaded machine had not run it yet killed a mount (`formdb mount` exited on
        // signal 15 in the suite).
        // SAFETY: plain libc signal-mask calls on local sets, for this thread only; the mask
        // is restored right after the spawn.
        let mut before: libc::sigset_t = unsafe { std::mem::zeroed() };
        unsafe {
            let mut all: libc::sigset_t = std::mem::zeroed();
            libc::sigfillset(&mut all);
            libc::pthread_sigmask(libc::SIG_BLOCK, &all, &mut before);
        }
        let spawned = std::thread::Builder::new().name("formdb-trim".into()).spawn(|| {
            loop {
                std::thread::sleep(TRIM_EVERY);
                // SAFETY: malloc_trim only releases free memory of glibc's arenas.
                unsafe {
                    libc::malloc_trim(0);
                }
            }
        });
        // SAFETY: restores this thread's mask as it was before the spawn.
        unsafe {
            libc::pthread_sigmask(libc::SIG_SETMASK, &before, std::ptr::null_mut());
        }
        // Without the thread the process keeps its free pages, as before: nothing to report.
        drop(spawned);
        // And at once when a big save has dropped its rows, before its write-back.
        formdb_engine::change::on_big_change_dropped(trim_now);
    }
}

/// Give glibc's free pages back now.
#[cfg(target_env = "gnu")]
fn trim_now() {
    // SAFETY: malloc_trim only releases free memory of glibc's arenas.
    unsafe {
        libc::malloc_trim(0);
    }
}
