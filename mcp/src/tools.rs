//! The tools, as plain functions over a [`Session`]: what each reads or edits, and the shape of
//! its answer. The rmcp server (`server`) only wraps these; the benchmark calls them directly
//! to measure what the protocol adds.

use std::sync::Arc;

use formdb_edit::check::SourceProblem;
use formdb_edit::ops::{self, Edited, Op, OpError, Options};
use formdb_edit::save::{self, Writer};
use formdb_edit::EditError;

use formdb_edit::diagnostics::{self, Diagnostic, Scope};
use formdb_edit::refactor;
use formdb_engine::query::{self, Rows};
use formdb_engine::read;
use formdb_engine::store::{Store, StoreError};
use formdb_engine::trace::Timings;
use formdb_projector::views::{self, ViewError};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::{json, Map, Value};

/// Rows any list answer carries at most; the rest is reached with `offset`.
pub const MAX_ROWS: usize = 200;
/// Characters of source a single answer carries at most.
pub const MAX_TEXT: usize = 200_000;

/// One client's view of the store: who they are (history author, alias map) and whether they
/// may write.
pub struct Session {
    pub store: Arc<Store>,
    pub writer: Writer,
    pub read_only: bool,
    /// The project's REPL, when one is connected (`eval`, `load`, `run_tests`, edits with
    /// `eval`/`test`).
    pub repl: Option<Arc<formdb_repl::Repl>>,
}

/// A refused call: what was wrong, what to send instead, and the state that helps redo it.
#[derive(Debug, Serialize)]
pub struct ToolError {
    pub error: String,
    #[serde(flatten)]
    pub details: Map<String, Value>,
}

impl ToolError {
    pub fn new(msg: impl Into<String>) -> ToolError {
        ToolError { error: msg.into(), details: Map::new() }
    }

    fn with(mut self, key: &str, v: Value) -> ToolError {
        self.details.insert(key.into(), v);
        self
    }

    /// The message with the details an agent reads first (a repair, a window, a current source).
    pub fn text(&self) -> String {
        let mut out = self.error.clone();
        for key in ["window", "suggestion_diff", "current_source"] {
            if let Some(Value::String(s)) = self.details.get(key) {
                out.push_str(&format!("\n\n{key}:\n{s}"));
            }
        }
        out
    }
}

impl From<StoreError> for ToolError {
    fn from(e: StoreError) -> Self {
        ToolError::new(worded(&e, store_advice(&e)))
    }
}

impl From<ViewError> for ToolError {
    fn from(e: ViewError) -> Self {
        ToolError::new(worded(&e, view_advice(&e)))
    }
}

impl From<EditError> for ToolError {
    fn from(e: EditError) -> Self {
        let advice = match e.cause() {
            EditError::UnknownId { .. } => Some(FIND_IDS),
            EditError::NoNamespace { .. } => Some(FIND_NSS),
            EditError::NoVar { .. } => Some(
                "send the name of a var defined here (`explore_namespace` lists a namespace's vars, `search` finds them), or the id of its defining form",
            ),
            EditError::NotAVar { .. } => {
                Some("send a var name such as `my.ns/foo`, or a form id as `get_form` returns it")
            }
            EditError::View(v) => view_advice(v),
            EditError::Store(s) => store_advice(s),
            _ => None,
        };
        ToolError::new(worded(&e, advice))
    }
}

// The engine and the edits word their errors for no transport; an agent is told which tool
// finds the input to send instead.
const FIND_IDS: &str =
    "ids are 8 characters, as `get_form`, `explore_namespace` and `search` return them";
const FIND_NSS: &str = "`list_namespaces` shows them; `create_namespace` makes one";

fn store_advice(e: &StoreError) -> Option<&'static str> {
    match e {
        StoreError::NoForm { .. } => Some(FIND_IDS),
        _ => None,
    }
}

fn view_advice(e: &ViewError) -> Option<&'static str> {
    match e {
        ViewError::NoNamespace(_) => Some(FIND_NSS),
        ViewError::Store(s) => store_advice(s),
        _ => None,
    }
}

fn worded(e: &dyn std::fmt::Display, advice: Option<&str>) -> String {
    match advice {
        Some(advice) => format!("{e}: {advice}"),
        None => e.to_string(),
    }
}

impl From<OpError> for ToolError {
    fn from(e: OpError) -> Self {
        match e {
            OpError::Edit(e) => e.into(),
            OpError::Source(p) => source_problem(*p),
            OpError::Stale { message, id, current_hash, current_source } => ToolError::new(message)
                .with("id", json!(id))
                .with("current_hash", json!(current_hash))
                .with("current_source", json!(current_source)),
        }
    }
}

fn source_problem(p: SourceProblem) -> ToolError {
    let mut e = ToolError::new(p.message)
        .with("line", json!(p.line))
        .with("col", json!(p.col))
        .with("window", json!(p.window));
    if let Some(s) = p.suggestion {
        e = e.with("suggestion", json!(s.source)).with("suggestion_diff", json!(s.diff));
    }
    e
}

pub type ToolResult<T> = Result<T, ToolError>;

fn rows_json(rows: &Rows) -> Vec<Value> {
    rows.rows.iter().cloned().map(Value::Object).collect()
}

fn s(m: &Map<String, Value>, k: &str) -> String {
    match m.get(k) {
        Some(Value::String(s)) => s.clone(),
        Some(Value::Null) | None => String::new(),
        Some(v) => v.to_string(),
    }
}

fn i(m: &Map<String, Value>, k: &str) -> i64 {
    m.get(k).and_then(Value::as_i64).unwrap_or(0)
}

fn strings(m: &Map<String, Value>, k: &str) -> Vec<String> {
    m.get(k)
        .and_then(Value::as_array)
        .map(|a| a.iter().filter_map(Value::as_str).map(str::to_string).collect())
        .unwrap_or_default()
}

/// A page of a longer list.
#[derive(Debug, Serialize, JsonSchema)]
pub struct Page {
    /// Rows in total.
    pub total: usize,
    /// The `offset` to send for the next page; absent on the last page.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub next_offset: Option<usize>,
}

fn page<T: Clone>(all: &[T], offset: usize, limit: usize) -> (Vec<T>, Page) {
    let limit = limit.clamp(1, MAX_ROWS);
    let end = (offset + limit).min(all.len());
    let rows = all.get(offset.min(all.len())..end).unwrap_or(&[]).to_vec();
    let next = (end < all.len()).then_some(end);
    (rows, Page { total: all.len(), next_offset: next })
}

// ---------------------------------------------------------------------------------------------
// Read tools

#[derive(Debug, Serialize, JsonSchema, Clone)]
pub struct NamespaceEntry {
    pub ns: String,
    pub file: String,
    pub doc: String,
    pub forms: i64,
}

/// Which page of a list to answer with.
#[derive(Debug, Default, Deserialize, JsonSchema)]
pub struct PageArgs {
    /// Skip this many rows: the `next_offset` of the previous page.
    #[serde(default)]
    pub offset: Option<usize>,
    /// At most this many rows (default and most 200).
    #[serde(default)]
    pub limit: Option<usize>,
}

#[derive(Debug, Serialize, JsonSchema)]
pub struct Namespaces {
    pub namespaces: Vec<NamespaceEntry>,
    pub page: Page,
}

pub fn list_namespaces(s: &Session, a: PageArgs) -> ToolResult<Namespaces> {
    let all = namespace_entries(s)?;
    let (namespaces, page) = page(&all, a.offset.unwrap_or(0), a.limit.unwrap_or(MAX_ROWS));
    Ok(Namespaces { namespaces, page })
}

/// Every namespace, in name order.
pub fn namespace_entries(s: &Session) -> ToolResult<Vec<NamespaceEntry>> {
    Ok(read::namespaces::summaries(&s.store)?
        .into_iter()
        .map(|n| NamespaceEntry { ns: n.ns, file: n.file, doc: n.doc, forms: n.forms })
        .collect())
}

#[derive(Debug, Deserialize, JsonSchema)]
pub struct NsArgs {
    /// The namespace, e.g. `my.app.core`.
    pub ns: String,
    #[serde(default)]
    pub offset: Option<usize>,
    #[serde(default)]
    pub limit: Option<usize>,
}

#[derive(Debug, Clone, Serialize, JsonSchema)]
pub struct VarEntry {
    pub id: String,
    pub name: String,
    pub kind: String,
    pub doc: String,
    pub arglists: Vec<String>,
    pub line: i64,
    pub purity: String,
}

#[derive(Debug, Serialize, JsonSchema)]
pub struct NamespaceOverview {
    pub ns: String,
    pub file: String,
    pub doc: String,
    /// Public vars in file order.
    pub vars: Vec<VarEntry>,
    pub page: Page,
}

pub fn explore_namespace(s: &Session, a: NsArgs) -> ToolResult<NamespaceOverview> {
    let Some((doc, file)) = query::ns_info(&s.store, &a.ns)? else {
        return Err(ToolError::new(format!(
            "no namespace `{}`: `list_namespaces` lists them",
            a.ns
        )));
    };
    let rows = query::ns_overview(&s.store, &a.ns)?;
    let all: Vec<VarEntry> = rows
        .rows
        .iter()
        .map(|r| VarEntry {
            id: self::s(r, "id"),
            name: self::s(r, "name"),
            kind: self::s(r, "kind"),
            doc: self::s(r, "doc"),
            arglists: strings(r, "arglists"),
            line: i(r, "line"),
            purity: self::s(r, "purity"),
        })
        .collect();
    let (vars, page) = page(&all, a.offset.unwrap_or(0), a.limit.unwrap_or(MAX_ROWS));
    Ok(NamespaceOverview { ns: a.ns, file, doc, vars, page })
}

#[derive(Debug, Deserialize, JsonSchema)]
pub struct FormArgs {
    /// The form's id (8 characters, from any other tool).
    #[serde(default)]
    pub id: Option<String>,
    /// Or the var's fully-qualified name, e.g. `my.app.core/run`.
    #[serde(default)]
    pub symbol: Option<String>,
    /// Read on in a long source: the `source_next_offset` of the previous answer.
    #[serde(default)]
    pub text_offset: Option<usize>,
}

#[derive(Debug, Serialize, JsonSchema)]
pub struct FormOut {
    pub id: String,
    /// Send this as `expected_hash` to `replace_form` to refuse the edit if someone changed the
    /// form meanwhile.
    pub hash: String,
    pub ns: String,
    pub name: String,
    pub fqn: String,
    pub kind: String,
    pub file: String,
    pub line: i64,
    pub end_line: i64,
    pub doc: String,
    pub arglists: Vec<String>,
    pub purity: String,
    /// Vars this form uses, fully qualified.
    pub calls: Vec<String>,
    /// The source in your view (your aliases); a long one is cut into pieces.
    pub source: String,
    /// The source goes on: send this as `text_offset` for the next piece.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub source_next_offset: Option<usize>,
}

fn key_of(id: &Option<String>, symbol: &Option<String>) -> ToolResult<String> {
    match (id, symbol) {
        (Some(id), _) if !id.is_empty() => Ok(id.clone()),
        (_, Some(sym)) if !sym.is_empty() => Ok(sym.clone()),
        _ => Err(ToolError::new("send `id` (a form id) or `symbol` (a fully-qualified var name)")),
    }
}

pub fn get_form(s: &Session, a: FormArgs) -> ToolResult<FormOut> {
    let key = key_of(&a.id, &a.symbol)?;
    let Some(f) = query::form(&s.store, &key)? else {
        return Err(ToolError::new(format!(
            "no form with id or var name `{key}`: ids come from `explore_namespace`, `search` or `find_usages`; var names look like `my.ns/my-fn`"
        )));
    };
    let id = self::s(&f, "id");
    // Without an alias map a user's view of a form is its stored source: its file need not be
    // rendered and split (about 7 ms for a median file).
    let whole = if s.writer.aliases.is_empty() {
        self::s(&f, "source")
    } else {
        match ops::form_text(&s.store, &s.writer, &id) {
            Ok(t) => t.trim_end_matches('\n').to_string(),
            Err(_) => self::s(&f, "source"),
        }
    };
    let (source, source_next_offset) = text_piece(&whole, a.text_offset.unwrap_or(0));
    Ok(FormOut {
        hash: self::s(&f, "hash"),
        ns: self::s(&f, "ns"),
        name: self::s(&f, "name"),
        fqn: self::s(&f, "fqn"),
        kind: self::s(&f, "kind"),
        file: self::s(&f, "file"),
        line: i(&f, "line"),
        end_line: i(&f, "end_line"),
        doc: self::s(&f, "doc"),
        arglists: strings(&f, "arglists"),
        purity: self::s(&f, "purity"),
        calls: strings(&f, "calls"),
        source,
        source_next_offset,
        id,
    })
}

/// The piece of a long text from byte `from` (moved back to a character boundary), at most
/// `MAX_TEXT` bytes, and where the next piece starts: pieces put together give the text.
fn text_piece(text: &str, from: usize) -> (String, Option<usize>) {
    let mut start = from.min(text.len());
    while !text.is_char_boundary(start) {
        start -= 1;
    }
    let mut end = (start + MAX_TEXT).min(text.len());
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    (text[start..end].to_string(), (end < text.len()).then_some(end))
}

#[derive(Debug, Deserialize, JsonSchema)]
pub struct GraphArgs {
    /// A fully-qualified var name (`my.ns/f`) or the id of its defining form.
    pub symbol: String,
    /// How many steps to follow (1 = direct). At most 10.
    #[serde(default)]
    pub depth: Option<i64>,
    #[serde(default)]
    pub offset: Option<usize>,
    #[serde(default)]
    pub limit: Option<usize>,
}

#[derive(Debug, Clone, Serialize, JsonSchema)]
pub struct GraphEntry {
    pub depth: i64,
    /// The form's id ('' for vars the store does not define, such as clojure.core).
    pub id: String,
    pub fqn: String,
    pub file: String,
    pub line: i64,
}

#[derive(Debug, Serialize, JsonSchema)]
pub struct Graph {
    pub symbol: String,
    pub entries: Vec<GraphEntry>,
    pub page: Page,
}

/// An FQN for a symbol argument that may be an id.
fn var_of(s: &Session, symbol: &str) -> ToolResult<String> {
    if symbol.contains('/') {
        return Ok(symbol.to_string());
    }
    match read::forms::fqn(&s.store, symbol)? {
        Some(f) if !f.is_empty() => Ok(f),
        Some(_) => Err(ToolError::new(format!("form {symbol} defines no var"))),
        None => Err(ToolError::new(format!(
            "`{symbol}` is neither a fully-qualified var name (`my.ns/f`) nor a form id"
        ))),
    }
}

fn depth(d: Option<i64>) -> ToolResult<i64> {
    match d.unwrap_or(1) {
        d @ 1..=10 => Ok(d),
        d => Err(ToolError::new(format!("depth {d}: send a depth from 1 to 10"))),
    }
}

pub fn find_usages(s: &Session, a: GraphArgs) -> ToolResult<Graph> {
    let fqn = var_of(s, &a.symbol)?;
    let d = depth(a.depth)?;
    if !read::usages::is_known(&s.store, &fqn)? {
        return Err(ToolError::new(format!(
            "no var `{fqn}` is defined or used in the store: check the spelling with `search`"
        )));
    }
    let rows = query::callers(&s.store, &fqn, d)?;
    let all: Vec<GraphEntry> = rows
        .rows
        .iter()
        .map(|r| GraphEntry {
            depth: i(r, "depth"),
            id: self::s(r, "id"),
            fqn: self::s(r, "fqn"),
            file: self::s(r, "file"),
            line: i(r, "line"),
        })
        .collect();
    let (entries, page) = page(&all, a.offset.unwrap_or(0), a.limit.unwrap_or(MAX_ROWS));
    Ok(Graph { symbol: fqn, entries, page })
}

pub fn find_callees(s: &Session, a: GraphArgs) -> ToolResult<Graph> {
    let d = depth(a.depth)?;
    if query::form(&s.store, &a.symbol)?.is_none() {
        return Err(ToolError::new(format!(
            "no form with id or var name `{}`: check it with `search`",
            a.symbol
        )));
    }
    let rows = query::callees(&s.store, &a.symbol, d)?;
    let all: Vec<GraphEntry> = rows
        .rows
        .iter()
        .map(|r| GraphEntry {
            depth: i(r, "depth"),
            id: self::s(r, "id"),
            fqn: self::s(r, "fqn"),
            file: self::s(r, "file"),
            line: i(r, "line"),
        })
        .collect();
    let (entries, page) = page(&all, a.offset.unwrap_or(0), a.limit.unwrap_or(MAX_ROWS));
    Ok(Graph { symbol: a.symbol, entries, page })
}

#[derive(Debug, Deserialize, JsonSchema)]
pub struct SearchArgs {
    /// Words to look for in names, docstrings and source.
    pub query: String,
    /// At most this many hits (default 20, at most 200).
    #[serde(default)]
    pub limit: Option<usize>,
    /// Skip this many hits: the `next_offset` of the previous page.
    #[serde(default)]
    pub offset: Option<usize>,
}

#[derive(Debug, Clone, Serialize, JsonSchema)]
pub struct Hit {
    pub score: f64,
    pub id: String,
    pub fqn: String,
    pub ns: String,
    pub kind: String,
    pub file: String,
    pub line: i64,
    pub doc: String,
}

#[derive(Debug, Serialize, JsonSchema)]
pub struct Hits {
    pub hits: Vec<Hit>,
    pub page: Page,
    /// Set when more forms match than are ranked (`SEARCH_DEPTH`): the pages stop there.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub note: Option<String>,
}

/// Hits ranked at most. The index scores every match, but each ranked hit is then read from
/// the store, and every page reads the hits before it too: 500 cost ~30 ms on the corpus.
pub const SEARCH_DEPTH: usize = 500;

pub fn search(s: &Session, a: SearchArgs) -> ToolResult<Hits> {
    // One more than the depth tells whether the ranking stops short of all matches.
    let rows = query::search(&s.store, &a.query, SEARCH_DEPTH as i64 + 1)?;
    let deeper = rows.rows.len() > SEARCH_DEPTH;
    let all: Vec<Hit> = rows
        .rows
        .iter()
        .take(SEARCH_DEPTH)
        .map(|r| Hit {
            score: r.get("score").and_then(Value::as_f64).unwrap_or(0.0),
            id: self::s(r, "id"),
            fqn: self::s(r, "fqn"),
            ns: self::s(r, "ns"),
            kind: self::s(r, "kind"),
            file: self::s(r, "file"),
            line: i(r, "line"),
            doc: self::s(r, "doc"),
        })
        .collect();
    let (hits, page) = page(&all, a.offset.unwrap_or(0), a.limit.unwrap_or(20));
    let note = deeper.then(|| {
        format!("more than {SEARCH_DEPTH} forms match: only the best {SEARCH_DEPTH} are paged; search for rarer words, or use `query`")
    });
    Ok(Hits { hits, page, note })
}

#[derive(Debug, Deserialize, JsonSchema)]
pub struct QueryArgs {
    /// A read-only CozoScript (Datalog) query, e.g.
    /// `?[fqn, line] := *form {fqn, line, ns: $ns}`. Relations: form, calls, defines, ns_decl,
    /// file, version, unresolved (see the `formdb://guide` resource).
    pub script: String,
    /// Parameters the script reads as `$name`.
    #[serde(default)]
    pub params: Option<Map<String, Value>>,
    #[serde(default)]
    pub offset: Option<usize>,
}

#[derive(Debug, Serialize, JsonSchema)]
pub struct QueryOut {
    pub headers: Vec<String>,
    pub rows: Vec<Value>,
    pub page: Page,
}

/// Seconds a user query may run.
pub const QUERY_TIMEOUT_S: u64 = query::sandbox::TIME_LIMIT_S;

pub fn query(s: &Session, a: QueryArgs) -> ToolResult<QueryOut> {
    let p = query::json_params(a.params.unwrap_or_default());
    // The sandbox every user script runs in (the CLI's `query` too).
    let rows = query::sandbox::run_user(&s.store, &a.script, p).map_err(|e| match e {
        StoreError::Refused(m) => ToolError::new(m),
        e => ToolError::new(format!("{e}; the script must be CozoScript, see `formdb://guide`")),
    })?;
    let all = rows_json(&rows);
    let (rows_page, page) = page(&all, a.offset.unwrap_or(0), MAX_ROWS);
    Ok(QueryOut { headers: rows.headers, rows: rows_page, page })
}

#[derive(Debug, Deserialize, JsonSchema)]
pub struct HistoryArgs {
    /// A form id.
    pub id: String,
    /// Skip this many versions (oldest first): the `next_offset` of the previous page.
    #[serde(default)]
    pub offset: Option<usize>,
    /// At most this many versions (default and most 200; fewer when the diffs are long).
    #[serde(default)]
    pub limit: Option<usize>,
    /// Read on in long diffs: the `diff_next_offset` a version had.
    #[serde(default)]
    pub text_offset: Option<usize>,
}

#[derive(Debug, Serialize, JsonSchema)]
pub struct VersionOut {
    pub v: i64,
    /// Seconds since the Unix epoch.
    pub at: f64,
    pub author: String,
    pub op: String,
    pub hash: String,
    /// The git commit this version was imported from (`import --history`), else empty.
    #[serde(skip_serializing_if = "String::is_empty")]
    pub commit: String,
    /// That commit's summary line.
    #[serde(skip_serializing_if = "String::is_empty")]
    pub summary: String,
    /// A unified diff from the previous version; a long one is cut into pieces.
    pub diff: String,
    /// The diff goes on: ask for this version alone (`offset`, `limit: 1`) with this as
    /// `text_offset` for the next piece.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub diff_next_offset: Option<usize>,
}

#[derive(Debug, Serialize, JsonSchema)]
pub struct History {
    pub id: String,
    pub versions: Vec<VersionOut>,
    pub page: Page,
}

pub fn form_history(s: &Session, a: HistoryArgs) -> ToolResult<History> {
    let rows = query::history(&s.store, &a.id)?.rows;
    if rows.is_empty() {
        return Err(ToolError::new(format!(
            "no history for `{}`: send a form id (8 characters) as `get_form`, `search` or `explore_namespace` return them",
            a.id
        )));
    }
    let all: Vec<usize> = (0..rows.len()).collect();
    let (on_page, mut page) = page(&all, a.offset.unwrap_or(0), a.limit.unwrap_or(MAX_ROWS));
    let mut versions = Vec::new();
    // The page also ends where its diffs would outgrow one answer (but holds one version).
    let mut text = 0;
    for ix in on_page {
        let r = &rows[ix];
        let prev = if ix == 0 { String::new() } else { self::s(&rows[ix - 1], "source") };
        let diff = similar::TextDiff::from_lines(&prev, &self::s(r, "source"))
            .unified_diff()
            .context_radius(2)
            .header("before", "after")
            .to_string();
        let (diff, diff_next_offset) = text_piece(&diff, a.text_offset.unwrap_or(0));
        text += diff.len();
        if text > MAX_TEXT && !versions.is_empty() {
            page.next_offset = Some(ix);
            break;
        }
        versions.push(VersionOut {
            v: i(r, "v"),
            at: r.get("at").and_then(Value::as_f64).unwrap_or(0.0),
            author: self::s(r, "author"),
            op: self::s(r, "op"),
            hash: self::s(r, "hash"),
            commit: self::s(r, "commit"),
            summary: self::s(r, "summary"),
            diff,
            diff_next_offset,
        });
    }
    Ok(History { id: a.id, versions, page })
}

#[derive(Debug, Deserialize, JsonSchema)]
pub struct DiagnosticsArgs {
    /// Only this namespace.
    #[serde(default)]
    pub ns: Option<String>,
    /// Only this form.
    #[serde(default)]
    pub id: Option<String>,
    #[serde(default)]
    pub offset: Option<usize>,
}

#[derive(Debug, Serialize, JsonSchema)]
pub struct Diagnostics {
    pub diagnostics: Vec<Value>,
    pub page: Page,
}

pub fn diagnostics(s: &Session, a: DiagnosticsArgs) -> ToolResult<Diagnostics> {
    let scope = match (a.id, a.ns) {
        (Some(id), _) => Scope::Id(id),
        (None, Some(ns)) => Scope::Ns(ns),
        (None, None) => Scope::All,
    };
    let all: Vec<Value> = diagnostics::diagnostics(&s.store, &scope)?
        .into_iter()
        .map(|d: Diagnostic| serde_json::to_value(d).unwrap_or_default())
        .collect();
    let (rows, page) = page(&all, a.offset.unwrap_or(0), MAX_ROWS);
    Ok(Diagnostics { diagnostics: rows, page })
}

// ---------------------------------------------------------------------------------------------
// Write tools

#[derive(Debug, Deserialize, JsonSchema)]
pub struct ReplaceArgs {
    pub id: String,
    /// The whole new form, in your aliases.
    pub source: String,
    /// The `hash` you read with `get_form`: the edit is refused if the form changed since.
    #[serde(default)]
    pub expected_hash: Option<String>,
    /// Accept Parinfer's bracket repair derived from your indentation.
    #[serde(default)]
    pub repair: bool,
    /// Also answer with the full diagnostics lists before and after the edit.
    #[serde(default)]
    pub full_diagnostics: bool,
    /// After the commit, evaluate the changed forms into the REPL (hot reload).
    #[serde(default)]
    pub eval: bool,
    /// After the commit, evaluate the changed forms and run the tests that reach them.
    #[serde(default)]
    pub test: bool,
}

#[derive(Debug, Deserialize, JsonSchema)]
pub struct InsertArgs {
    pub ns: String,
    /// The new form, in your aliases.
    pub source: String,
    /// Put it before this form id.
    #[serde(default)]
    pub before: Option<String>,
    /// Or after this form id. Without either, it goes after what it uses and before its users.
    #[serde(default)]
    pub after: Option<String>,
    #[serde(default)]
    pub repair: bool,
    /// Also answer with the full diagnostics lists before and after the edit.
    #[serde(default)]
    pub full_diagnostics: bool,
    /// After the commit, evaluate the changed forms into the REPL (hot reload).
    #[serde(default)]
    pub eval: bool,
    /// After the commit, evaluate the changed forms and run the tests that reach them.
    #[serde(default)]
    pub test: bool,
}

#[derive(Debug, Deserialize, JsonSchema)]
pub struct DeleteArgs {
    /// A form id.
    pub id: String,
    /// Also answer with the full diagnostics lists before and after the edit.
    #[serde(default)]
    pub full_diagnostics: bool,
}

#[derive(Debug, Deserialize, JsonSchema)]
pub struct RenameArgs {
    /// The var to rename: `my.ns/old-name` or its form id.
    pub symbol: String,
    /// The new name, without namespace.
    pub new_name: String,
    /// Also answer with the full diagnostics lists before and after the edit.
    #[serde(default)]
    pub full_diagnostics: bool,
    /// After the commit, evaluate the changed forms into the REPL (hot reload).
    #[serde(default)]
    pub eval: bool,
    /// After the commit, evaluate the changed forms and run the tests that reach them.
    #[serde(default)]
    pub test: bool,
}

#[derive(Debug, Deserialize, JsonSchema)]
pub struct MoveArgs {
    pub id: String,
    /// The namespace to move the definition to (it must exist).
    pub to_ns: String,
    /// Also answer with the full diagnostics lists before and after the edit.
    #[serde(default)]
    pub full_diagnostics: bool,
    /// After the commit, evaluate the changed forms into the REPL (hot reload).
    #[serde(default)]
    pub eval: bool,
    /// After the commit, evaluate the changed forms and run the tests that reach them.
    #[serde(default)]
    pub test: bool,
}

#[derive(Debug, Deserialize, JsonSchema)]
pub struct CreateNsArgs {
    pub ns: String,
    /// The file path (default: beside the namespaces sharing its prefix).
    #[serde(default)]
    pub path: Option<String>,
    #[serde(default)]
    pub doc: Option<String>,
    /// Require specs such as `clojure.string :as str`.
    #[serde(default)]
    pub requires: Vec<String>,
    /// Also answer with the full diagnostics lists before and after the edit.
    #[serde(default)]
    pub full_diagnostics: bool,
}

#[derive(Debug, Deserialize, JsonSchema)]
pub struct CommentArgs {
    /// The form the comment goes next to.
    #[serde(default)]
    pub anchor_id: Option<String>,
    /// Or a file and line.
    #[serde(default)]
    pub file: Option<String>,
    #[serde(default)]
    pub line: Option<u32>,
    /// The comment text; several lines become several `;; ` lines.
    pub text: String,
    /// `before` or `after` (default `after`).
    #[serde(default)]
    pub position: Option<String>,
    /// Also answer with the full diagnostics lists before and after the edit.
    #[serde(default)]
    pub full_diagnostics: bool,
}

#[derive(Debug, Deserialize, JsonSchema)]
pub struct TopLevelArgs {
    pub file: String,
    /// The line the form starts on.
    pub line: u32,
    /// The text of the form's first line, searched two lines above and below `line`.
    #[serde(default)]
    pub target_line: Option<String>,
    pub new_form: String,
    #[serde(default)]
    pub repair: bool,
    /// Also answer with the full diagnostics lists before and after the edit.
    #[serde(default)]
    pub full_diagnostics: bool,
}

#[derive(Debug, Deserialize, JsonSchema)]
pub struct BatchArgs {
    /// Edits applied all-or-nothing in one transaction. Each is an object with `op`
    /// (`replace`, `insert`, `delete`, `insert_comment`, `replace_top_level`,
    /// `create_namespace`) and that op's arguments.
    pub ops: Vec<Value>,
    #[serde(default)]
    pub repair: bool,
    /// Also answer with the full diagnostics lists before and after the edit.
    #[serde(default)]
    pub full_diagnostics: bool,
    /// After the commit, evaluate the changed forms into the REPL (hot reload).
    #[serde(default)]
    pub eval: bool,
    /// After the commit, evaluate the changed forms and run the tests that reach them.
    #[serde(default)]
    pub test: bool,
}

/// An edit's answer: first what it changed in the diagnostics, then what it wrote.
#[derive(Debug, Serialize, JsonSchema)]
pub struct EditOut {
    /// Diagnostics the edit brought: found after it and not before. Findings are the same
    /// when their form id, kind and message (its place left out) are: a line that moved
    /// is not a new problem.
    pub introduced: Vec<Value>,
    /// Diagnostics the edit removed: found before it and not after.
    pub fixed: Vec<Value>,
    /// Per op: the id and hash of the form written, with its file and line.
    pub results: Vec<Value>,
    pub files: Vec<String>,
    /// Things done that you did not ask for (a `declare` added, a require added).
    pub notes: Vec<String>,
    /// The namespaces whose diagnostics were compared: those the edit touches, and those that
    /// define, use or refer the vars of the forms it changes.
    pub diagnostics_namespaces: Vec<String>,
    /// With `full_diagnostics`: all their diagnostics before the edit.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub diagnostics_before: Option<Vec<Value>>,
    /// With `full_diagnostics`: and after it.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub diagnostics_after: Option<Vec<Value>>,
    /// With `eval` or `test`: the changed forms evaluated and the tests they reach, run.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub repl: Option<crate::repl::AfterEdit>,
}

fn writable(s: &Session) -> ToolResult<()> {
    if s.read_only {
        return Err(ToolError::new(
            "this server is read-only (started with --read-only): edits are refused",
        ));
    }
    Ok(())
}

fn ns_diagnostics(s: &Session, nss: &[String], cycles: bool) -> Vec<Diagnostic> {
    if nss.is_empty() {
        return Vec::new();
    }
    // One pass over all of them (a namespace that does not exist yet has none).
    let scope = Scope::Nss(nss.to_vec());
    let found = if cycles {
        diagnostics::diagnostics(&s.store, &scope)
    } else {
        diagnostics::diagnostics_but_cycles(&s.store, &scope)
    };
    found.unwrap_or_default()
}

/// What makes two findings the same problem wherever the edit moved it: the form, the kind
/// and the message with its `file:line:col` (or `file:line`) left out.
fn finding_identity(d: &Diagnostic) -> (String, String, String) {
    let file = &d.file;
    let message = d
        .message
        .replace(&format!("{file}:{}:{}", d.line, d.col), file)
        .replace(&format!("{file}:{}", d.line), file);
    (d.id.clone(), d.kind.clone(), message)
}

/// The findings of `of` that `minus` does not have, counted as multisets: a second copy of a
/// problem is new even when one copy was there.
fn findings_not_in(of: &[Diagnostic], minus: &[Diagnostic]) -> Vec<Value> {
    let mut left: std::collections::HashMap<(String, String, String), usize> =
        std::collections::HashMap::new();
    for d in minus {
        *left.entry(finding_identity(d)).or_default() += 1;
    }
    of.iter()
        .filter(|d| match left.get_mut(&finding_identity(d)) {
            Some(n) if *n > 0 => {
                *n -= 1;
                false
            }
            _ => true,
        })
        .map(to_json)
        .collect()
}

fn to_json(d: &Diagnostic) -> Value {
    serde_json::to_value(d).unwrap_or_default()
}

/// What an edit names, known before it runs.
#[derive(Default)]
struct Reach {
    /// Forms it changes.
    ids: Vec<String>,
    /// Vars it changes (renames, moves).
    vars: Vec<String>,
    /// Namespaces it writes to.
    nss: Vec<String>,
    /// Files it writes to.
    files: Vec<String>,
    /// Top-level forms it replaces by file and line (found two lines around it).
    lines: Vec<(String, u32)>,
    /// No namespace's requires can change: every op replaces a definition by a definition
    /// (`replaces_definition`).
    keeps_requires: bool,
}

impl Reach {
    /// What `ops` name, and whether they leave every namespace's requires as they are.
    fn of_ops(s: &Session, ops: &[Op]) -> Reach {
        let keeps_requires = !ops.is_empty() && ops.iter().all(|op| replaces_definition(s, op));
        let mut r = Reach { keeps_requires, ..Reach::default() };
        for op in ops {
            match op {
                Op::Replace { id, .. } | Op::Delete { id } => r.ids.push(id.clone()),
                Op::Insert { ns, .. } | Op::CreateNamespace { ns, .. } => r.nss.push(ns.clone()),
                Op::InsertComment { anchor_id: Some(id), .. } => r.ids.push(id.clone()),
                Op::InsertComment { file, .. } => r.files.extend(file.clone()),
                Op::ReplaceTopLevel { file, line, .. } => {
                    r.files.push(file.clone());
                    r.lines.push((file.clone(), *line));
                }
            }
        }
        r
    }

    /// The namespaces whose diagnostics the edit can change: those of its forms, files and
    /// namespaces, and those that define, use or refer the vars its forms define (a changed
    /// arglist breaks callers elsewhere; a rename or a move rewrites them).
    fn namespaces(&self, s: &Session) -> ToolResult<Vec<String>> {
        let mut trace = Timings::traced("reach");
        let touched = read::usages::Touched {
            ids: self.ids.clone(),
            vars: self.vars.clone(),
            nss: self.nss.clone(),
            files: self.files.clone(),
            lines: self.lines.clone(),
        };
        let nss = read::usages::reached_namespaces(&s.store, &touched)?;
        trace.lap("forms, vars, callers and referrers");
        Ok(nss)
    }
}

/// Run an edit, with the diagnostics it introduced and fixed in the namespaces it can change
/// (and, if `full`, all of theirs before and after).
fn edit(
    s: &Session,
    reach: Reach,
    full: bool,
    run: impl FnOnce() -> Result<Edited, OpError> + Send,
) -> ToolResult<EditOut> {
    // Reach, diagnostics and the edit: one worker for all their queries (see `on_worker`).
    formdb_engine::store::on_worker(|| edit_here(s, reach, full, run))
}

fn edit_here(
    s: &Session,
    reach: Reach,
    full: bool,
    run: impl FnOnce() -> Result<Edited, OpError>,
) -> ToolResult<EditOut> {
    writable(s)?;
    let mut trace = Timings::traced("mcp edit");
    let mut nss = reach.namespaces(s)?;
    trace.lap("reach");
    // Cycles come from the require graph alone. An edit that cannot change it finds the same
    // cycles before and after, which cancel out of `introduced` and `fixed`: walking the graph
    // twice for them was the costliest read of a `replace_form`'s diagnostics. The whole lists
    // (`full`) still show them.
    let skip_cycles = reach.keeps_requires && !full;
    let diagnostics_before = ns_diagnostics(s, &nss, !skip_cycles);
    trace.lap("diagnostics before");
    let edited = run()?;
    trace.lap("edit");
    // `nss` holds every namespace the edit writes to, but one it brings into being under a
    // name no argument gave (a replaced `ns` form) is known only now: it had none before.
    let before = nss.clone();
    nss.extend(edited.namespaces.iter().cloned());
    nss.sort();
    nss.dedup();
    // The require graph changes only with an `ns` declaration: an edit that wrote none, of
    // namespaces in no cycle before, leaves them in none.
    let no_cycles_before = !diagnostics_before.iter().any(|d| d.kind == "cycle");
    let none_to_find = edited.applied.decls == 0 && no_cycles_before && nss == before;
    let cycles = !(skip_cycles || none_to_find);
    let diagnostics_after = ns_diagnostics(s, &nss, cycles);
    trace.lap("diagnostics after");
    let listed = |ds: &[Diagnostic]| full.then(|| ds.iter().map(to_json).collect());
    Ok(EditOut {
        introduced: findings_not_in(&diagnostics_after, &diagnostics_before),
        fixed: findings_not_in(&diagnostics_before, &diagnostics_after),
        results: edited
            .results
            .iter()
            .map(|r| serde_json::to_value(r).unwrap_or_default())
            .collect(),
        files: edited.files,
        notes: edited.notes,
        diagnostics_namespaces: nss,
        diagnostics_before: listed(&diagnostics_before),
        diagnostics_after: listed(&diagnostics_after),
        repl: None,
    })
}

/// With `eval`/`test`, the REPL part of an edit's answer, for the forms it wrote.
fn with_repl(s: &Session, out: ToolResult<EditOut>, eval: bool, test: bool) -> ToolResult<EditOut> {
    let mut out = out?;
    let ids: Vec<String> = out
        .results
        .iter()
        .filter_map(|r| r.get("id").and_then(Value::as_str))
        .filter(|id| !id.is_empty())
        .map(str::to_string)
        .collect();
    out.repl = crate::repl::after_edit(s, &ids, eval, test);
    Ok(out)
}

fn opts(repair: bool) -> Options {
    Options { repair, keep_layout: false }
}

/// One op through `formdb-edit`, in its own transaction.
fn edit_op(s: &Session, op: Op, repair: bool, full: bool) -> ToolResult<EditOut> {
    let ops = [op];
    edit(s, Reach::of_ops(s, &ops), full, || ops::apply(&s.store, &s.writer, &ops, opts(repair)))
}

/// Whether `op` replaces a stored definition by another: a form whose head starts with `def`
/// (`defn`, `def`, `defmethod`, `deftest`, …) for a stored form of such a kind. Only an `ns`
/// form, `in-ns` and top-level `require`, `use`, `import` and `refer-clojure` calls declare
/// requires, so such a replace changes none, and a replace holds one form
/// (`check::source`). Anything else (a reader conditional or metadata before the head, a
/// qualified head) is taken as able to change them.
fn replaces_definition(s: &Session, op: &Op) -> bool {
    let Op::Replace { id, source, .. } = op else { return false };
    let head = source
        .trim_start()
        .strip_prefix('(')
        .and_then(|rest| {
            rest.trim_start().split(|c: char| c.is_whitespace() || "()[]{}\"".contains(c)).next()
        })
        .unwrap_or_default();
    if !head.starts_with("def") {
        return false;
    }
    use formdb_engine::analyze::Kind;
    matches!(read::forms::naming(&s.store, id), Ok(Some(n))
        if !matches!(Kind::parse(&n.kind), Kind::Ns | Kind::Comment | Kind::Other))
}

pub fn replace_form(s: &Session, a: ReplaceArgs) -> ToolResult<EditOut> {
    let op = Op::Replace { id: a.id, source: a.source, expected_hash: a.expected_hash };
    with_repl(s, edit_op(s, op, a.repair, a.full_diagnostics), a.eval, a.test)
}

pub fn insert_form(s: &Session, a: InsertArgs) -> ToolResult<EditOut> {
    let op = Op::Insert { ns: a.ns, source: a.source, before: a.before, after: a.after };
    with_repl(s, edit_op(s, op, a.repair, a.full_diagnostics), a.eval, a.test)
}

pub fn delete_form(s: &Session, a: DeleteArgs) -> ToolResult<EditOut> {
    edit_op(s, Op::Delete { id: a.id }, false, a.full_diagnostics)
}

pub fn rename_symbol(s: &Session, a: RenameArgs) -> ToolResult<EditOut> {
    let mut reach = Reach::default();
    if a.symbol.contains('/') {
        reach.vars.push(a.symbol.clone());
    } else {
        reach.ids.push(a.symbol.clone());
    }
    let out = edit(s, reach, a.full_diagnostics, || {
        refactor::rename_symbol(&s.store, &s.writer, &a.symbol, &a.new_name)
    });
    with_repl(s, out, a.eval, a.test)
}

pub fn move_form(s: &Session, a: MoveArgs) -> ToolResult<EditOut> {
    let reach = Reach { ids: vec![a.id.clone()], nss: vec![a.to_ns.clone()], ..Reach::default() };
    let out = edit(s, reach, a.full_diagnostics, || {
        refactor::move_form(&s.store, &s.writer, &a.id, &a.to_ns)
    });
    with_repl(s, out, a.eval, a.test)
}

pub fn create_namespace(s: &Session, a: CreateNsArgs) -> ToolResult<EditOut> {
    let op = Op::CreateNamespace { ns: a.ns, path: a.path, doc: a.doc, requires: a.requires };
    edit_op(s, op, false, a.full_diagnostics)
}

pub fn insert_comment(s: &Session, a: CommentArgs) -> ToolResult<EditOut> {
    let op = Op::InsertComment {
        anchor_id: a.anchor_id,
        file: a.file,
        line: a.line,
        text: a.text,
        position: a.position.unwrap_or_else(|| "after".into()),
    };
    edit_op(s, op, false, a.full_diagnostics)
}

pub fn replace_top_level_form(s: &Session, a: TopLevelArgs) -> ToolResult<EditOut> {
    let op = Op::ReplaceTopLevel {
        file: a.file,
        line: a.line,
        target_line: a.target_line,
        new_form: a.new_form,
    };
    edit_op(s, op, a.repair, a.full_diagnostics)
}

pub fn batch(s: &Session, a: BatchArgs) -> ToolResult<EditOut> {
    let mut parsed = Vec::new();
    for (n, v) in a.ops.into_iter().enumerate() {
        let op: Op = serde_json::from_value(v).map_err(|e| {
            ToolError::new(format!(
                "op {}: {e}; each op is an object like {{\"op\": \"replace\", \"id\": \"…\", \"source\": \"…\"}}",
                n + 1
            ))
        })?;
        parsed.push(op);
    }
    let run = || ops::apply(&s.store, &s.writer, &parsed, opts(a.repair));
    with_repl(s, edit(s, Reach::of_ops(s, &parsed), a.full_diagnostics, run), a.eval, a.test)
}

// ---------------------------------------------------------------------------------------------
// Resources

/// A namespace's text in this session's view.
pub fn ns_text(s: &Session, ns: &str) -> ToolResult<String> {
    let path = views::ns_path(&s.store, ns)?;
    let bytes = save::read(&s.store, &path, &s.writer.render())?
        .ok_or_else(|| ToolError::new(format!("no file for namespace `{ns}`")))?;
    Ok(String::from_utf8_lossy(&bytes).into_owned())
}

/// Namespace -> hash of its file (and draft), to tell subscribers what changed.
pub fn ns_hashes(store: &Store) -> ToolResult<std::collections::BTreeMap<String, String>> {
    Ok(read::namespaces::content_keys(store)?)
}

pub const GUIDE: &str = include_str!("guide.md");
