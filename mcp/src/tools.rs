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
use formdb_engine::store::{params, str_at, Params, Store, StoreError};
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
        ToolError::new(e.to_string())
    }
}

impl From<ViewError> for ToolError {
    fn from(e: ViewError) -> Self {
        ToolError::new(e.to_string())
    }
}

impl From<EditError> for ToolError {
    fn from(e: EditError) -> Self {
        ToolError::new(e.to_string())
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

#[derive(Debug, Serialize, JsonSchema)]
pub struct NamespaceEntry {
    pub ns: String,
    pub file: String,
    pub doc: String,
    pub forms: i64,
}

#[derive(Debug, Serialize, JsonSchema)]
pub struct Namespaces {
    pub namespaces: Vec<NamespaceEntry>,
}

pub fn list_namespaces(s: &Session) -> ToolResult<Namespaces> {
    let rows = s.store.query(
        "n[ns, count(id)] := *form{id, ns, parent}, parent == '', ns != ''
         ?[ns, file, doc, n] := *ns_decl{ns, file, doc}, n[ns, n]
         ?[ns, file, doc, n] := *ns_decl{ns, file, doc}, not n[ns, _], n = 0
         :order ns",
        Params::new(),
    )?;
    Ok(Namespaces {
        namespaces: rows
            .rows
            .iter()
            .map(|r| NamespaceEntry {
                ns: str_at(r, 0),
                file: str_at(r, 1),
                doc: str_at(r, 2),
                forms: r[3].get_int().unwrap_or(0),
            })
            .collect(),
    })
}

#[derive(Debug, Deserialize, JsonSchema)]
pub struct NsArgs {
    /// The namespace, e.g. `my.app.core`.
    pub ns: String,
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
}

pub fn explore_namespace(s: &Session, a: NsArgs) -> ToolResult<NamespaceOverview> {
    let Some((doc, file)) = query::ns_info(&s.store, &a.ns)? else {
        return Err(ToolError::new(format!(
            "no namespace `{}`: `list_namespaces` lists them",
            a.ns
        )));
    };
    let rows = query::ns_overview(&s.store, &a.ns)?;
    let vars = rows
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
    Ok(NamespaceOverview { ns: a.ns, file, doc, vars })
}

#[derive(Debug, Deserialize, JsonSchema)]
pub struct FormArgs {
    /// The form's id (8 characters, from any other tool).
    #[serde(default)]
    pub id: Option<String>,
    /// Or the var's fully-qualified name, e.g. `my.app.core/run`.
    #[serde(default)]
    pub symbol: Option<String>,
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
    /// The source in your view (your aliases).
    pub source: String,
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
    let source = match ops::form_text(&s.store, &s.writer, &id) {
        Ok(t) => t.trim_end_matches('\n').to_string(),
        Err(_) => self::s(&f, "source"),
    };
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
        source: truncate(source),
        id,
    })
}

fn truncate(mut s: String) -> String {
    if s.len() > MAX_TEXT {
        let mut cut = MAX_TEXT;
        while !s.is_char_boundary(cut) {
            cut -= 1;
        }
        s.truncate(cut);
        s.push_str("\n;; [cut: the source is longer than this answer may be]");
    }
    s
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
    let rows = s.store.query("?[fqn] := *form{id: $id, fqn}", params([("id", symbol.into())]))?;
    match rows.rows.first().map(|r| str_at(r, 0)) {
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
    let known = s.store.query(
        "?[id] := *defines{var: $v, id} ?[id] := *calls{to: $v, from: id}",
        params([("v", fqn.as_str().into())]),
    )?;
    if known.rows.is_empty() {
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
}

#[derive(Debug, Serialize, JsonSchema)]
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
}

pub fn search(s: &Session, a: SearchArgs) -> ToolResult<Hits> {
    let limit = a.limit.unwrap_or(20).clamp(1, MAX_ROWS);
    let rows = query::search(&s.store, &a.query, limit as i64)?;
    Ok(Hits {
        hits: rows
            .rows
            .iter()
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
            .collect(),
    })
}

#[derive(Debug, Deserialize, JsonSchema)]
pub struct QueryArgs {
    /// A read-only CozoScript (Datalog) query, e.g.
    /// `?[fqn, line] := *form{fqn, line, ns: $ns}`. Relations: form, calls, defines, ns_decl,
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
const QUERY_TIMEOUT_S: u32 = 10;

pub fn query(s: &Session, a: QueryArgs) -> ToolResult<QueryOut> {
    let mut p = Params::new();
    for (k, v) in a.params.unwrap_or_default() {
        p.insert(k, cozo::DataValue::from(v));
    }
    // Time-limit the query the way Cozo does it, when the script is one plain query.
    let limited = if a.script.contains(":timeout") || a.script.trim_start().starts_with("::") {
        None
    } else {
        Some(format!("{}\n:timeout {QUERY_TIMEOUT_S}", a.script))
    };
    let named = match limited.map(|sc| s.store.query_user(&sc, p.clone())) {
        Some(Ok(rows)) => rows,
        Some(Err(StoreError::Refused(m))) => return Err(ToolError::new(m)),
        _ => s.store.query_user(&a.script, p).map_err(|e| match e {
            StoreError::Refused(m) => ToolError::new(m),
            e => {
                ToolError::new(format!("{e}; the script must be CozoScript, see `formdb://guide`"))
            }
        })?,
    };
    let rows = Rows::from_named(named);
    let all = rows_json(&rows);
    let (rows_page, page) = page(&all, a.offset.unwrap_or(0), MAX_ROWS);
    Ok(QueryOut { headers: rows.headers, rows: rows_page, page })
}

#[derive(Debug, Deserialize, JsonSchema)]
pub struct IdArgs {
    /// A form id.
    pub id: String,
}

#[derive(Debug, Serialize, JsonSchema)]
pub struct VersionOut {
    pub v: i64,
    /// Seconds since the Unix epoch.
    pub at: f64,
    pub author: String,
    pub op: String,
    pub hash: String,
    /// A unified diff from the previous version.
    pub diff: String,
}

#[derive(Debug, Serialize, JsonSchema)]
pub struct History {
    pub id: String,
    pub versions: Vec<VersionOut>,
}

pub fn form_history(s: &Session, a: IdArgs) -> ToolResult<History> {
    let rows = query::history(&s.store, &a.id)?;
    if rows.rows.is_empty() {
        return Err(ToolError::new(format!("no history for `{}`: is it a form id?", a.id)));
    }
    let mut prev = String::new();
    let mut versions = Vec::new();
    for r in &rows.rows {
        let source = self::s(r, "source");
        let diff = similar::TextDiff::from_lines(&prev, &source)
            .unified_diff()
            .context_radius(2)
            .header("before", "after")
            .to_string();
        versions.push(VersionOut {
            v: i(r, "v"),
            at: r.get("at").and_then(Value::as_f64).unwrap_or(0.0),
            author: self::s(r, "author"),
            op: self::s(r, "op"),
            hash: self::s(r, "hash"),
            diff: truncate(diff),
        });
        prev = source;
    }
    Ok(History { id: a.id, versions })
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
}

#[derive(Debug, Deserialize, JsonSchema)]
pub struct RenameArgs {
    /// The var to rename: `my.ns/old-name` or its form id.
    pub symbol: String,
    /// The new name, without namespace.
    pub new_name: String,
}

#[derive(Debug, Deserialize, JsonSchema)]
pub struct MoveArgs {
    pub id: String,
    /// The namespace to move the definition to (it must exist).
    pub to_ns: String,
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
}

#[derive(Debug, Deserialize, JsonSchema)]
pub struct BatchArgs {
    /// Edits applied all-or-nothing in one transaction. Each is an object with `op`
    /// (`replace`, `insert`, `delete`, `insert_comment`, `replace_top_level`,
    /// `create_namespace`) and that op's arguments.
    pub ops: Vec<Value>,
    #[serde(default)]
    pub repair: bool,
}

#[derive(Debug, Serialize, JsonSchema)]
pub struct EditOut {
    /// Per op: the id and hash of the form written, with its file and line.
    pub results: Vec<Value>,
    pub files: Vec<String>,
    /// Things done that you did not ask for (a `declare` added, a require added).
    pub notes: Vec<String>,
    /// Diagnostics of the touched namespaces before the edit.
    pub diagnostics_before: Vec<Value>,
    /// And after it.
    pub diagnostics_after: Vec<Value>,
}

fn writable(s: &Session) -> ToolResult<()> {
    if s.read_only {
        return Err(ToolError::new(
            "this server is read-only (started with --read-only): edits are refused",
        ));
    }
    Ok(())
}

fn ns_diagnostics(s: &Session, nss: &[String]) -> Vec<Value> {
    let mut out = Vec::new();
    for ns in nss {
        if let Ok(ds) = diagnostics::diagnostics(&s.store, &Scope::Ns(ns.clone())) {
            out.extend(ds.into_iter().map(|d| serde_json::to_value(d).unwrap_or_default()));
        }
    }
    out
}

/// Namespaces an edit will touch, known before it runs.
fn ns_of_id(s: &Session, id: &str) -> Option<String> {
    query::form(&s.store, id).ok().flatten().map(|f| self::s(&f, "ns"))
}

/// Run an edit, with diagnostics of the namespaces it touches before and after.
fn edit(
    s: &Session,
    before_ns: Vec<String>,
    run: impl FnOnce() -> Result<Edited, OpError>,
) -> ToolResult<EditOut> {
    writable(s)?;
    let before_ns: Vec<String> = before_ns.into_iter().filter(|n| !n.is_empty()).collect();
    let diagnostics_before = ns_diagnostics(s, &before_ns);
    let edited = run()?;
    let mut nss = edited.namespaces.clone();
    nss.extend(before_ns);
    nss.sort();
    nss.dedup();
    Ok(EditOut {
        results: edited
            .results
            .iter()
            .map(|r| serde_json::to_value(r).unwrap_or_default())
            .collect(),
        files: edited.files,
        notes: edited.notes,
        diagnostics_before,
        diagnostics_after: ns_diagnostics(s, &nss),
    })
}

fn opts(repair: bool) -> Options {
    Options { repair, keep_layout: false }
}

pub fn replace_form(s: &Session, a: ReplaceArgs) -> ToolResult<EditOut> {
    let ns = ns_of_id(s, &a.id).into_iter().collect();
    edit(s, ns, || {
        ops::apply(
            &s.store,
            &s.writer,
            &[Op::Replace { id: a.id, source: a.source, expected_hash: a.expected_hash }],
            opts(a.repair),
        )
    })
}

pub fn insert_form(s: &Session, a: InsertArgs) -> ToolResult<EditOut> {
    edit(s, vec![a.ns.clone()], || {
        ops::apply(
            &s.store,
            &s.writer,
            &[Op::Insert { ns: a.ns, source: a.source, before: a.before, after: a.after }],
            opts(a.repair),
        )
    })
}

pub fn delete_form(s: &Session, a: IdArgs) -> ToolResult<EditOut> {
    let ns = ns_of_id(s, &a.id).into_iter().collect();
    edit(s, ns, || ops::apply(&s.store, &s.writer, &[Op::Delete { id: a.id }], opts(false)))
}

pub fn rename_symbol(s: &Session, a: RenameArgs) -> ToolResult<EditOut> {
    let ns = a.symbol.split_once('/').map(|(n, _)| n.to_string()).into_iter().collect();
    edit(s, ns, || refactor::rename_symbol(&s.store, &s.writer, &a.symbol, &a.new_name))
}

pub fn move_form(s: &Session, a: MoveArgs) -> ToolResult<EditOut> {
    let mut ns: Vec<String> = ns_of_id(s, &a.id).into_iter().collect();
    ns.push(a.to_ns.clone());
    edit(s, ns, || refactor::move_form(&s.store, &s.writer, &a.id, &a.to_ns))
}

pub fn create_namespace(s: &Session, a: CreateNsArgs) -> ToolResult<EditOut> {
    edit(s, vec![], || {
        ops::apply(
            &s.store,
            &s.writer,
            &[Op::CreateNamespace { ns: a.ns, path: a.path, doc: a.doc, requires: a.requires }],
            opts(false),
        )
    })
}

pub fn insert_comment(s: &Session, a: CommentArgs) -> ToolResult<EditOut> {
    let ns = a.anchor_id.as_deref().and_then(|id| ns_of_id(s, id)).into_iter().collect();
    edit(s, ns, || {
        ops::apply(
            &s.store,
            &s.writer,
            &[Op::InsertComment {
                anchor_id: a.anchor_id,
                file: a.file,
                line: a.line,
                text: a.text,
                position: a.position.unwrap_or_else(|| "after".into()),
            }],
            opts(false),
        )
    })
}

pub fn replace_top_level_form(s: &Session, a: TopLevelArgs) -> ToolResult<EditOut> {
    let ns = s
        .store
        .query("?[ns] := *file{path: $p, ns}", params([("p", a.file.as_str().into())]))
        .ok()
        .and_then(|r| r.rows.first().map(|r| str_at(r, 0)))
        .into_iter()
        .collect();
    edit(s, ns, || {
        ops::apply(
            &s.store,
            &s.writer,
            &[Op::ReplaceTopLevel {
                file: a.file,
                line: a.line,
                target_line: a.target_line,
                new_form: a.new_form,
            }],
            opts(a.repair),
        )
    })
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
    let nss: Vec<String> = parsed
        .iter()
        .filter_map(|op| match op {
            Op::Replace { id, .. } | Op::Delete { id } => ns_of_id(s, id),
            Op::Insert { ns, .. } => Some(ns.clone()),
            _ => None,
        })
        .collect();
    edit(s, nss, || ops::apply(&s.store, &s.writer, &parsed, opts(a.repair)))
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
    let rows = store.query(
        "d[path, h] := *draft{path, at}, h = to_string(at)
         ?[ns, h] := *ns_decl{ns, file}, *file{path: file, hash}, d[file, dh], h = concat(hash, dh)
         ?[ns, h] := *ns_decl{ns, file}, *file{path: file, hash}, not d[file, _], h = hash",
        Params::new(),
    )?;
    Ok(rows.rows.iter().map(|r| (str_at(r, 0), str_at(r, 1))).collect())
}

pub const GUIDE: &str = include_str!("guide.md");
