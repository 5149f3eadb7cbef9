//! The texts files held lately: those the sync's writes replaced in `DIR`, and those it merged
//! into the store, each kept for [`REPLACED_WINDOW`] so that a writer that read the old text
//! just before our write is merged against it (see `Worker::classify`).

use std::collections::HashMap;
use std::time::{Duration, SystemTime};

/// How long after the sync wrote the store's text over a file a change of that file is merged
/// against the text it replaced (see `classify`).
const REPLACED_WINDOW: Duration = Duration::from_secs(2);

/// How many of the texts our writes replaced are kept per path (within [`REPLACED_WINDOW`]).
const KEPT_REPLACED: usize = 16;

/// Texts by path, oldest first, each with when it was kept and whether one of our writes
/// replaced it. Nothing outlives the window: a text is dropped once it is older than that,
/// whichever path is touched next. Kept until its own path changed again, as before, `formdb
/// up` held up to 16 old texts of every file it had ever written back (24 MB after 3,000 MCP
/// edits of 200 forms).
#[derive(Default)]
pub(crate) struct Lately {
    by_path: HashMap<String, Vec<(SystemTime, Vec<u8>, bool)>>,
}

impl Lately {
    /// The texts `path` held within the window before `now`, newest first, each with whether
    /// one of our writes replaced it. A git operation at `git_moved()` (a checkout, reset or
    /// stash moves git's index; asked only of a path with texts) drops the ones before it:
    /// what changed the file then is git, whose text wins its forms, not a writer that read
    /// one of them before our write.
    pub(crate) fn recent(
        &mut self,
        path: &str,
        git_moved: impl FnOnce() -> Option<SystemTime>,
        now: SystemTime,
    ) -> Vec<(Vec<u8>, bool)> {
        self.forget_expired(now);
        let Some(lately) = self.by_path.get_mut(path) else { return Vec::new() };
        let git_moved = git_moved();
        lately.retain(|(at, _, _)| git_moved.is_none_or(|g| g < *at));
        let recent = lately.iter().rev().map(|(_, old, ours)| (old.clone(), *ours)).collect();
        if lately.is_empty() {
            self.by_path.remove(path);
        }
        recent
    }

    /// Keep `text` as one `path` held at `now` (`ours`: one of our writes replaced it).
    pub(crate) fn remember(&mut self, path: &str, text: Vec<u8>, ours: bool, now: SystemTime) {
        self.forget_expired(now);
        let lately = self.by_path.entry(path.to_string()).or_default();
        lately.push((now, text, ours));
        if lately.len() > KEPT_REPLACED {
            lately.remove(0);
        }
    }

    /// Keep `text`, a text the disk holds that the store merged, as one `path` held at `now`;
    /// the disk's own texts kept before it go. The disk moved past them itself, so a later
    /// change of it was edited from this text, not from them: merged against one of them (a
    /// text before a form the disk then added), the disk's deletion of that form was taken
    /// for a store's addition and undone. The texts our writes replaced stay: a writer may
    /// have read one of them before our write.
    pub(crate) fn remember_disk_text(&mut self, path: &str, text: Vec<u8>, now: SystemTime) {
        if let Some(lately) = self.by_path.get_mut(path) {
            lately.retain(|(_, _, ours)| *ours);
        }
        self.remember(path, text, false, now);
    }

    /// Drop the texts `path` held: the disk has moved past them all (its writer read what came
    /// after each), so a later change of it was not edited from one of them either.
    pub(crate) fn forget(&mut self, path: &str) {
        self.by_path.remove(path);
    }

    /// Drop every text older than the window, of every path.
    fn forget_expired(&mut self, now: SystemTime) {
        let fresh = |at: &SystemTime| now.duration_since(*at).is_ok_and(|e| e < REPLACED_WINDOW);
        self.by_path.retain(|_, lately| {
            lately.retain(|(at, _, _)| fresh(at));
            !lately.is_empty()
        });
    }

    /// The bytes of text kept, of every path.
    #[cfg(test)]
    fn bytes(&self) -> usize {
        self.by_path.values().flatten().map(|(_, t, _)| t.len()).sum()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn texts_past_the_window_are_dropped_whichever_path_is_touched() {
        let t0 = SystemTime::UNIX_EPOCH + Duration::from_secs(1_000);
        let mut lately = Lately::default();
        // A long session writes back a thousand files once each, 10 KB each.
        for i in 0..1000 {
            let at = t0 + Duration::from_millis(10 * i);
            lately.remember(&format!("src/f{i}.clj"), vec![b' '; 10_000], true, at);
        }
        // Within the window of the last write: only the last 2 s of writes are held.
        let end = t0 + Duration::from_millis(10 * 999);
        assert_eq!(lately.bytes(), 200 * 10_000);
        assert!(lately.recent("src/f0.clj", || None, end).is_empty(), "f0's text is long past");
        assert_eq!(lately.recent("src/f999.clj", || None, end).len(), 1);
        // Once the window has passed, nothing is held.
        lately.remember("src/g.clj", b"(ns g)".to_vec(), false, end + REPLACED_WINDOW * 2);
        assert_eq!(lately.bytes(), 6);
    }

    #[test]
    fn a_text_merged_from_the_disk_replaces_the_disks_texts_before_it_not_ours() {
        let t0 = SystemTime::UNIX_EPOCH + Duration::from_secs(1_000);
        let at = |ms: u64| t0 + Duration::from_millis(ms);
        let mut lately = Lately::default();
        lately.remember("a.clj", b"replaced by our write".to_vec(), true, at(0));
        lately.remember("a.clj", b"merged from the disk".to_vec(), false, at(1));
        lately.remember_disk_text("a.clj", b"merged from it later".to_vec(), at(2));
        let recent = lately.recent("a.clj", || None, at(3));
        assert_eq!(
            recent,
            vec![
                (b"merged from it later".to_vec(), false),
                (b"replaced by our write".to_vec(), true)
            ]
        );
    }

    #[test]
    fn a_path_keeps_its_newest_texts_first_and_at_most_its_share() {
        let t0 = SystemTime::UNIX_EPOCH + Duration::from_secs(1_000);
        let mut lately = Lately::default();
        for i in 0..20u8 {
            lately.remember("a.clj", vec![i], i % 2 == 0, t0 + Duration::from_millis(i.into()));
        }
        let now = t0 + Duration::from_millis(30);
        let recent = lately.recent("a.clj", || None, now);
        assert_eq!(recent.len(), KEPT_REPLACED);
        assert_eq!(recent[0], (vec![19], false));
        assert_eq!(recent[KEPT_REPLACED - 1], (vec![4], true));
        // A git operation after the fifth-newest drops it and those before.
        let git = t0 + Duration::from_millis(15) + Duration::from_micros(500);
        let after_git = lately.recent("a.clj", || Some(git), now);
        assert_eq!(after_git.iter().map(|(t, _)| t[0]).collect::<Vec<_>>(), [19, 18, 17, 16]);
    }
}
