//! History from git: the first-parent commits of a tree's repository, oldest first, become
//! versions of the forms they changed, each stamped with its commit (id, author, author time,
//! summary line); then the working tree is imported as a plain import would.
//!
//! Reads git through its CLI rather than a library: one `git log --raw -z` stream lists every
//! commit with the paths it changed (git's own rename detection, `-M`), and one long-lived
//! `git cat-file --batch` hands over the blobs. No heavy dependency to build, and exactly the
//! renames `git log` shows a user.
//!
//! Each commit's changed Clojure files go through the same path as a save
//! ([`import::file_changes_with_removals`]), so forms keep their ids by the live-edit rules: same
//! kind and name in a file, a renamed file's forms, a definition moved to another file in the
//! same commit when its kind and name are unambiguous. The change set is applied with the
//! commit's stamp ([`change::apply_at`]). Commits that touch no Clojure file cost a line of the
//! log and nothing else.

use std::collections::HashSet;
use std::io::{BufRead, BufReader, Read, Write};
use std::path::Path;
use std::process::{Child, ChildStdin, ChildStdout, Command, Stdio};

use crate::change::{self, Applied, Change, ChangeSet, Stamp};
use crate::import::{self, FileError, ImportSummary, Incoming, Progress, Removals};
use crate::paths;
use crate::store::{int_at, str_at, Result, Store, StoreError};
use crate::syntax::Lang;

/// git's mode for a submodule (a commit inside a tree).
const SUBMODULE_MODE: &str = "160000";

/// What to walk.
#[derive(Clone, Debug, Default)]
pub struct HistoryOptions {
    /// Start after this revision (its descendants on the first-parent line, up to HEAD).
    pub since: Option<String>,
    /// At most this many commits, the newest ones.
    pub max_commits: Option<usize>,
    /// Who the final import of the working tree names as author.
    pub author: String,
}

/// A file that did not parse at some commit: its text of that commit is kept raw.
#[derive(Clone, Debug, serde::Serialize)]
pub struct CommitFileError {
    pub commit: String,
    #[serde(flatten)]
    pub error: FileError,
}

/// What a history import did.
#[derive(Clone, Debug, Default, serde::Serialize)]
pub struct HistorySummary {
    /// The first-parent commits walked this time (not those of an earlier run).
    pub commits: usize,
    /// Of those, the ones that changed a Clojure file (the others are skipped).
    pub commits_applied: usize,
    /// Merge commits among them, followed through their first parent.
    pub merges: usize,
    /// Form versions recorded from commits.
    pub versions: usize,
    /// What the commits did to forms, summed.
    pub forms: Applied,
    /// Files that did not parse at a commit (kept as raw text for that commit).
    pub errors: Vec<CommitFileError>,
    /// Submodule entries skipped (path, commit).
    pub submodules: Vec<(String, String)>,
    /// Binary files with a Clojure name skipped (path, commit).
    pub binaries: Vec<(String, String)>,
    /// The commit the walk reached (HEAD), recorded for the next run.
    pub head: String,
    /// The final import of the working tree.
    pub import: ImportSummary,
    /// Seconds spent walking the commits.
    pub walk_secs: f64,
}

/// One commit of the log, with the entries of its diff against its first parent.
#[derive(Debug)]
struct Commit {
    sha: String,
    parents: usize,
    author: String,
    email: String,
    at: f64,
    summary: String,
    entries: Vec<Entry>,
}

/// One path of a commit's raw diff.
#[derive(Debug)]
struct Entry {
    old_mode: String,
    new_mode: String,
    new_blob: String,
    /// `A`, `M`, `D`, `T`, `R`, `C` (the score is dropped).
    status: char,
    path: String,
    /// The source path of a rename or copy.
    from: Option<String>,
}

/// Walk the first-parent history of the git repository holding `root` into the store, then
/// import the working tree. A re-run walks only the commits after the last one recorded.
pub fn import_history(
    store: &Store,
    root: &Path,
    opts: &HistoryOptions,
    progress: &dyn Progress,
) -> Result<HistorySummary> {
    let repo = Repo::at(root)?;
    let head = repo.rev_parse("HEAD")?;
    let last = last_commit(store)?;
    let range = match (&last, &opts.since) {
        (Some(last), _) => {
            if !repo.is_ancestor(last, &head)? {
                return Err(StoreError::Refused(format!(
                    "the store's history ends at commit {last}, which is not an ancestor of HEAD ({head}) in {}: \
                     the history was rewritten; import into a new store",
                    root.display()
                )));
            }
            format!("{last}..{head}")
        }
        (None, Some(since)) => format!("{}..{head}", repo.rev_parse(since)?),
        (None, None) => head.clone(),
    };
    let started = std::time::Instant::now();
    let commits = repo.log(&range, opts.max_commits)?;
    let mut summary = HistorySummary { head: head.clone(), ..Default::default() };
    let mut blobs = repo.cat_file()?;
    let mut stored = stored_files(store)?;
    let mut seq = next_seq(store)?;
    progress.start("commits", commits.len() as u64);
    for (i, commit) in commits.iter().enumerate() {
        summary.commits += 1;
        if commit.parents > 1 {
            summary.merges += 1;
        }
        // The first commit walked into a store without history starts from its whole tree
        // (the walk may begin mid-history, or the store may hold a plain import).
        let whole_tree = i == 0 && last.is_none();
        let entries = if whole_tree { repo.tree(&commit.sha)? } else { Vec::new() };
        let entries = if whole_tree { &entries } else { &commit.entries };
        let changes = commit_changes(
            store,
            &repo,
            &mut blobs,
            commit,
            entries,
            whole_tree,
            &mut stored,
            &mut summary,
        )?;
        if let Some((changes, errors)) = changes {
            summary.errors.extend(
                errors
                    .into_iter()
                    .map(|error| CommitFileError { commit: commit.sha.clone(), error }),
            );
            let set = ChangeSet {
                author: commit.author.clone(),
                op: "commit".into(),
                changes: changes.into_iter().chain(bookkeeping(commit, seq)).collect(),
            };
            let stamp = Stamp { at: Some(commit.at), commit: Some(commit.sha.clone()) };
            let applied = change::apply_at(store, &set, &stamp)?;
            seq += 1;
            summary.commits_applied += 1;
            summary.versions += applied.versions;
            summary.forms.add(&applied);
        }
        progress.inc(1);
    }
    progress.finish();
    summary.walk_secs = started.elapsed().as_secs_f64();
    drop(blobs);
    if summary.commits_applied > 0 {
        resolve_again(store, root, &opts.author, progress)?;
    }
    summary.import = import::import_dir(store, root, &opts.author, progress)?;
    // What the walk reached, also when its last commits changed no Clojure file.
    let mark = ChangeSet {
        author: opts.author.clone(),
        op: "import".into(),
        changes: vec![mark_last(&head)],
    };
    change::apply(store, &mark)?;
    Ok(summary)
}

/// Every Clojure file of the working tree resolved again, as one change: the walk left the
/// files depending on each commit's changes as they were, so their calls, findings and purity
/// may be stale. Files gone from the tree are removed; texts changed since HEAD get versions.
fn resolve_again(store: &Store, root: &Path, author: &str, progress: &dyn Progress) -> Result<()> {
    let mut incoming = Vec::new();
    let mut present = HashSet::new();
    for (rel, abs) in import::walk(root)? {
        if Lang::from_path(&rel).is_none() {
            continue;
        }
        let bytes = std::fs::read(&abs)
            .map_err(|e| StoreError::Refused(format!("{}: cannot read: {e}", abs.display())))?;
        present.insert(rel.clone());
        incoming.push(Incoming { path: rel, bytes });
    }
    let mut removals = Removals::default();
    let mut changes = Vec::new();
    for path in stored_files(store)? {
        if !present.contains(&path) {
            removals.removed.push(path.clone());
            changes.push(Change::DeleteFile { path });
        }
    }
    let (more, _) = import::file_changes_with_removals(store, incoming, &removals, progress)?;
    changes.extend(more);
    change::apply(store, &ChangeSet { author: author.into(), op: "import".into(), changes })?;
    Ok(())
}

/// Whether `root` is in a git repository with a commit: the error says why not.
pub fn check_repo(root: &Path) -> Result<()> {
    Repo::at(root)?.rev_parse("HEAD").map(|_| ())
}

/// The change set of one commit, or `None` when it touches no Clojure file.
#[allow(clippy::too_many_arguments)]
fn commit_changes(
    store: &Store,
    repo: &Repo,
    blobs: &mut CatFile,
    commit: &Commit,
    entries: &[Entry],
    whole_tree: bool,
    stored: &mut HashSet<String>,
    summary: &mut HistorySummary,
) -> Result<Option<(Vec<Change>, Vec<FileError>)>> {
    let mut incoming = Vec::new();
    let mut removals = Removals::default();
    let mut deletes = Vec::new();
    let mut present = HashSet::new();
    let mut remove = |path: &str, removals: &mut Removals, stored: &mut HashSet<String>| {
        if stored.remove(path) {
            removals.removed.push(path.to_string());
            deletes.push(Change::DeleteFile { path: path.to_string() });
        }
    };
    for e in entries {
        let path = repo.local(&e.path);
        let from = e.from.as_deref().and_then(|f| repo.local(f));
        if e.status == 'R' {
            if let Some(from) = &from {
                remove(from, &mut removals, stored);
            }
        }
        let Some(path) = path else { continue };
        if !is_clojure(&path) {
            continue;
        }
        if e.status == 'D' {
            remove(&path, &mut removals, stored);
            continue;
        }
        if e.new_mode == SUBMODULE_MODE || e.old_mode == SUBMODULE_MODE {
            summary.submodules.push((path, commit.sha.clone()));
            continue;
        }
        if !e.new_mode.starts_with("100") {
            // A symlink: its target is another path, imported in its own right.
            continue;
        }
        let bytes = blobs.read(&e.new_blob)?;
        if is_binary(&bytes) {
            summary.binaries.push((path.clone(), commit.sha.clone()));
            remove(&path, &mut removals, stored);
            continue;
        }
        if e.status == 'R' {
            if let Some(from) = from.filter(|f| is_clojure(f) && removals.removed.contains(f)) {
                removals.moved_from.insert(path.clone(), from);
            }
        }
        stored.insert(path.clone());
        present.insert(path.clone());
        incoming.push(Incoming { path, bytes });
    }
    if whole_tree {
        let gone: Vec<String> = stored.iter().filter(|p| !present.contains(*p)).cloned().collect();
        for p in gone {
            remove(&p, &mut removals, stored);
        }
    }
    if incoming.is_empty() && deletes.is_empty() {
        return Ok(None);
    }
    let (mut changes, errors) =
        import::file_changes_leaving_dependents(store, incoming, &removals)?;
    changes.extend(deletes);
    Ok(Some((changes, errors)))
}

/// The commit's own row and the walk's mark, written with its forms.
fn bookkeeping(c: &Commit, seq: i64) -> [Change; 2] {
    [
        Change::Bookkeeping {
            relation: "commit".into(),
            rows: vec![vec![
                c.sha.as_str().into(),
                seq.into(),
                c.author.as_str().into(),
                c.email.as_str().into(),
                c.at.into(),
                c.summary.as_str().into(),
            ]],
            delete: Vec::new(),
        },
        mark_last(&c.sha),
    ]
}

fn mark_last(sha: &str) -> Change {
    Change::Bookkeeping {
        relation: "git_import".into(),
        rows: vec![vec!["last_commit".into(), sha.into()]],
        delete: Vec::new(),
    }
}

/// The last commit a history import reached, if any.
pub fn last_commit(store: &Store) -> Result<Option<String>> {
    let rows =
        store.query("?[v] := *git_import{key: 'last_commit', value: v}", Default::default())?;
    Ok(rows.rows.first().map(|r| str_at(r, 0)))
}

fn next_seq(store: &Store) -> Result<i64> {
    let rows = store.query("?[max(s)] := *commit{seq: s}", Default::default())?;
    Ok(rows
        .rows
        .first()
        .filter(|r| r[0].get_int().is_some())
        .map(|r| int_at(r, 0) + 1)
        .unwrap_or(1))
}

fn stored_files(store: &Store) -> Result<HashSet<String>> {
    let rows = store.query("?[path] := *file{path}", Default::default())?;
    Ok(rows.rows.iter().map(|r| str_at(r, 0)).collect())
}

fn is_clojure(path: &str) -> bool {
    Lang::from_path(path).is_some() && !paths::in_skipped_dir(path)
}

/// git's own test: a NUL byte in the first 8,000 bytes.
fn is_binary(bytes: &[u8]) -> bool {
    bytes[..bytes.len().min(8000)].contains(&0)
}

/// The git repository holding an imported tree.
struct Repo<'a> {
    /// The imported tree.
    root: &'a Path,
    /// The tree's path inside the repository (`sub/dir/`, or empty at the top).
    prefix: String,
}

impl<'a> Repo<'a> {
    fn at(root: &'a Path) -> Result<Repo<'a>> {
        let mut repo = Repo { root, prefix: String::new() };
        repo.prefix = repo.git_line(&["rev-parse", "--show-prefix"]).map_err(|e| {
            StoreError::Refused(format!(
                "{}: not in a git repository, so there is no history to import ({e})",
                root.display()
            ))
        })?;
        Ok(repo)
    }

    fn git(&self) -> Command {
        let mut cmd = Command::new("git");
        cmd.arg("-C").arg(self.root).env("GIT_TERMINAL_PROMPT", "0");
        cmd
    }

    /// Run git and return its output, or its error message.
    fn git_out(&self, args: &[&str]) -> Result<Vec<u8>> {
        let out =
            self.git().args(args).output().map_err(|e| {
                StoreError::Refused(format!("cannot run git (is it installed?): {e}"))
            })?;
        if !out.status.success() {
            return Err(StoreError::Refused(format!(
                "git {}: {}",
                args.join(" "),
                String::from_utf8_lossy(&out.stderr).trim()
            )));
        }
        Ok(out.stdout)
    }

    fn git_line(&self, args: &[&str]) -> Result<String> {
        Ok(String::from_utf8_lossy(&self.git_out(args)?).trim().to_string())
    }

    fn rev_parse(&self, rev: &str) -> Result<String> {
        self.git_line(&["rev-parse", "--verify", "--end-of-options", &format!("{rev}^{{commit}}")])
            .map_err(|e| {
                StoreError::Refused(format!("no commit `{rev}` in {}: {e}", self.root.display()))
            })
    }

    fn is_ancestor(&self, a: &str, b: &str) -> Result<bool> {
        let status = self
            .git()
            .args(["merge-base", "--is-ancestor", a, b])
            .stderr(Stdio::null())
            .status()
            .map_err(|e| StoreError::Refused(format!("cannot run git: {e}")))?;
        Ok(status.success())
    }

    /// The repository path as a store path (relative to the imported tree), or `None` outside it.
    fn local(&self, path: &str) -> Option<String> {
        path.strip_prefix(self.prefix.as_str()).map(str::to_string)
    }

    /// The first-parent commits of `range`, oldest first, each with its diff against its first
    /// parent (a root commit's against the empty tree).
    fn log(&self, range: &str, max: Option<usize>) -> Result<Vec<Commit>> {
        let max = max.map(|n| format!("--max-count={n}"));
        let mut args = vec![
            "log",
            "--first-parent",
            "--diff-merges=first-parent",
            "--reverse",
            "-z",
            "--raw",
            "-M",
            "--no-abbrev",
            "--format=%x01%H%x00%P%x00%an%x00%ae%x00%at%x00%s",
        ];
        if let Some(m) = &max {
            args.push(m);
        }
        args.push(range);
        args.push("--");
        let out = self.git_out(&args)?;
        let mut commits = Vec::new();
        for record in out.split(|b| *b == 1).filter(|r| !r.is_empty()) {
            commits.push(parse_commit(record)?);
        }
        Ok(commits)
    }

    /// Every file of a commit's tree, as additions.
    fn tree(&self, sha: &str) -> Result<Vec<Entry>> {
        let out = self.git_out(&["ls-tree", "-r", "-z", "--full-tree", sha])?;
        let mut entries = Vec::new();
        for item in out.split(|b| *b == 0).filter(|i| !i.is_empty()) {
            let item = String::from_utf8_lossy(item);
            let Some((meta, path)) = item.split_once('\t') else { continue };
            let mut m = meta.split(' ');
            let (Some(mode), Some(_kind), Some(blob)) = (m.next(), m.next(), m.next()) else {
                continue;
            };
            entries.push(Entry {
                old_mode: "000000".into(),
                new_mode: mode.into(),
                new_blob: blob.into(),
                status: 'A',
                path: path.into(),
                from: None,
            });
        }
        Ok(entries)
    }

    fn cat_file(&self) -> Result<CatFile> {
        let mut child = self
            .git()
            .args(["cat-file", "--batch"])
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .map_err(|e| StoreError::Refused(format!("cannot run git cat-file: {e}")))?;
        let stdin = child.stdin.take();
        let stdout = child.stdout.take().map(BufReader::new);
        match (stdin, stdout) {
            (Some(stdin), Some(stdout)) => Ok(CatFile { child, stdin, stdout }),
            _ => Err(StoreError::Refused("git cat-file: no pipes".into())),
        }
    }
}

/// One record of the log: the format's fields, then the raw diff entries.
fn parse_commit(record: &[u8]) -> Result<Commit> {
    let bad = || {
        StoreError::Refused(format!(
            "unexpected `git log` output: {}",
            String::from_utf8_lossy(&record[..record.len().min(200)])
        ))
    };
    let mut fields = record.split(|b| *b == 0).map(|f| String::from_utf8_lossy(f).into_owned());
    let mut next = || fields.next().ok_or_else(bad);
    let sha = next()?;
    let parents = next()?.split_whitespace().count();
    let author = next()?;
    let email = next()?;
    let at = next()?.trim().parse::<f64>().map_err(|_| bad())?;
    let summary = next()?;
    let mut entries = Vec::new();
    let rest: Vec<String> = fields.collect();
    let mut i = 0;
    while i < rest.len() {
        let head = rest[i].trim_start_matches('\n');
        i += 1;
        let Some(head) = head.strip_prefix(':') else { continue };
        let parts: Vec<&str> = head.split(' ').collect();
        let [old_mode, new_mode, _old_blob, new_blob, status] = parts[..] else {
            return Err(bad());
        };
        let status = status.chars().next().ok_or_else(bad)?;
        let (from, path) = if matches!(status, 'R' | 'C') {
            let from = rest.get(i).cloned().ok_or_else(bad)?;
            let to = rest.get(i + 1).cloned().ok_or_else(bad)?;
            i += 2;
            (Some(from), to)
        } else {
            let p = rest.get(i).cloned().ok_or_else(bad)?;
            i += 1;
            (None, p)
        };
        entries.push(Entry {
            old_mode: old_mode.into(),
            new_mode: new_mode.into(),
            new_blob: new_blob.into(),
            status,
            path,
            from,
        });
    }
    Ok(Commit { sha, parents, author, email, at, summary, entries })
}

/// A long-lived `git cat-file --batch`: one process for every blob of the walk.
struct CatFile {
    child: Child,
    stdin: ChildStdin,
    stdout: BufReader<ChildStdout>,
}

impl CatFile {
    fn read(&mut self, blob: &str) -> Result<Vec<u8>> {
        let failed = |e: std::io::Error| StoreError::Refused(format!("git cat-file {blob}: {e}"));
        writeln!(self.stdin, "{blob}").map_err(failed)?;
        self.stdin.flush().map_err(failed)?;
        let mut header = String::new();
        self.stdout.read_line(&mut header).map_err(failed)?;
        let size =
            header.split_whitespace().nth(2).and_then(|s| s.parse::<usize>().ok()).ok_or_else(
                || StoreError::Refused(format!("git cat-file {blob}: {}", header.trim())),
            )?;
        let mut bytes = vec![0; size + 1];
        self.stdout.read_exact(&mut bytes).map_err(failed)?;
        bytes.pop();
        Ok(bytes)
    }
}

impl Drop for CatFile {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// How many commits' changes the store holds.
pub fn commit_count(store: &Store) -> Result<i64> {
    let rows = store.query("?[count(s)] := *commit{sha: s}", Default::default())?;
    Ok(rows.rows.first().map(|r| int_at(r, 0)).unwrap_or(0))
}
