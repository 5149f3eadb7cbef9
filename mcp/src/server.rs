//! The rmcp glue: tool registration with input and output schemas, results as structured
//! content plus text, resources and their subscriptions. Every tool body is a call into
//! `tools`, run on the blocking pool (the store is synchronous).

use std::collections::{BTreeMap, HashSet};
use std::sync::{Arc, Mutex};

use rmcp::handler::server::common::{schema_for_output, FromContextPart};
use rmcp::handler::server::router::tool::ToolRouter;
use rmcp::handler::server::tool::ToolCallContext;
use rmcp::model::{
    CallToolResult, ContentBlock, Implementation, JsonObject, ListResourcesResult,
    PaginatedRequestParams, ReadResourceRequestParams, ReadResourceResponse, ReadResourceResult,
    Resource, ResourceContents, ResourceUpdatedNotificationParam, ServerCapabilities, ServerConfig,
    SubscribeRequestParams, ToolAnnotations, UnsubscribeRequestParams,
};
use rmcp::service::RequestContext;
use rmcp::{
    tool, tool_handler, tool_router, ErrorData as McpError, Peer, RoleServer, ServerHandler,
};
use schemars::JsonSchema;
use serde::de::DeserializeOwned;
use serde::Serialize;

use crate::tools::{self, *};

const INSTRUCTIONS: &str = "formdb holds this Clojure code base as forms in a database; files are views. Work by id: find forms with `search`, `list_namespaces` and `explore_namespace`; read them with `get_form` (not whole files); check `find_usages` before changing what a function takes or returns; prefer structured edits (`replace_form` with the `expected_hash` you read, `insert_form`, `rename_symbol`, `move_form`, `batch`) over rewriting text. Source is read and written in your aliases; unbalanced brackets are refused with a suggested repair. Each edit answers first with the diagnostics it `introduced` and those it `fixed` (`full_diagnostics: true` adds the whole lists before and after). The resource `formdb://guide` explains more.";

/// The media types of the resources: the guide, and a namespace's source.
const GUIDE_MIME: &str = "text/markdown";
const CLOJURE_MIME: &str = "text/x-clojure";

/// A tool's arguments, or what is wrong with them. rmcp's own wrapper answers a wrong type or
/// a missing argument with a protocol error, which agent hosts show as a failed call; an error
/// result says what to send instead, and the agent can correct the call. Named `Parameters` so
/// that `#[tool]` takes the input schema from `T`, as it does for rmcp's.
pub struct Parameters<T>(ToolResult<T>);

impl<T: JsonSchema> JsonSchema for Parameters<T> {
    fn schema_name() -> std::borrow::Cow<'static, str> {
        T::schema_name()
    }

    fn json_schema(generator: &mut schemars::SchemaGenerator) -> schemars::Schema {
        T::json_schema(generator)
    }
}

impl<S, T: DeserializeOwned> FromContextPart<ToolCallContext<'_, S>> for Parameters<T> {
    fn from_context_part(context: &mut ToolCallContext<S>) -> Result<Self, McpError> {
        let args = context.arguments.take().unwrap_or_default();
        Ok(Parameters(serde_json::from_value(serde_json::Value::Object(args)).map_err(|e| {
            ToolError::new(format!(
                "bad arguments for `{}`: {e}; the tool's input schema lists its arguments and their types",
                context.name
            ))
        })))
    }
}

/// The MCP server for one client session.
#[derive(Clone)]
pub struct FormdbServer {
    session: Arc<Session>,
    tool_router: ToolRouter<FormdbServer>,
    subscribed: Arc<Mutex<HashSet<String>>>,
    peer: Arc<Mutex<Option<Peer<RoleServer>>>>,
}

/// A tool's answer: the value as structured content and as text, or an error result an agent
/// can act on (never a protocol error).
///
/// The text is the value serialized in field order (the structured content is a map, whose
/// keys come sorted), so an answer reads in the order its type declares: an edit's leads with
/// what it introduced and fixed. An error carries no structured content: clients check that
/// against the tool's output schema, which describes the answer. Its text is the message with
/// the details an agent reads first, then, if it has more, all of it as JSON.
fn respond<T: Serialize>(r: ToolResult<T>) -> CallToolResult {
    let encoded = r.and_then(|v| {
        let encode_error = |e: serde_json::Error| {
            ToolError::new(format!("internal error: the answer could not be encoded: {e}"))
        };
        let value = serde_json::to_value(&v).map_err(encode_error)?;
        Ok((serde_json::to_string(&v).map_err(encode_error)?, value))
    });
    match encoded {
        Ok((text, value)) => {
            let mut r = CallToolResult::structured(value);
            r.content = vec![ContentBlock::text(text)];
            r
        }
        Err(e) => {
            let mut content = vec![ContentBlock::text(e.text())];
            if !e.details.is_empty() {
                content.push(ContentBlock::text(serde_json::to_string(&e).unwrap_or_default()));
            }
            CallToolResult::error(content)
        }
    }
}

/// The standard JSON Schema `format` values (draft 2020-12). schemars adds its own for
/// numbers (`uint`, `int64`, `double`, …), which strict validators (Ajv) warn about on every
/// call.
const STANDARD_FORMATS: [&str; 19] = [
    "date-time",
    "date",
    "time",
    "duration",
    "email",
    "idn-email",
    "hostname",
    "idn-hostname",
    "ipv4",
    "ipv6",
    "uri",
    "uri-reference",
    "iri",
    "iri-reference",
    "uuid",
    "uri-template",
    "json-pointer",
    "relative-json-pointer",
    "regex",
];

/// A schema with only standard `format` values: others are dropped, and an unsigned one
/// (`uint…`) becomes `minimum: 0` where the schema has no minimum.
pub fn standard_schema(schema: &mut serde_json::Value) {
    match schema {
        serde_json::Value::Object(map) => {
            let format = map.get("format").and_then(|f| f.as_str()).map(str::to_string);
            if let Some(format) = format.filter(|f| !STANDARD_FORMATS.contains(&f.as_str())) {
                map.remove("format");
                if format.starts_with("uint") && !map.contains_key("minimum") {
                    map.insert("minimum".into(), 0.into());
                }
            }
            map.values_mut().for_each(standard_schema);
        }
        serde_json::Value::Array(items) => items.iter_mut().for_each(standard_schema),
        _ => {}
    }
}

fn standard_schema_object(schema: &Arc<JsonObject>) -> Arc<JsonObject> {
    let mut value = serde_json::Value::Object(schema.as_ref().clone());
    standard_schema(&mut value);
    match value {
        serde_json::Value::Object(map) => Arc::new(map),
        _ => schema.clone(),
    }
}

/// What a tool does to the store, as MCP hints: reads change nothing; edits that overwrite or
/// remove forms are destructive; one that, sent again, changes nothing more is idempotent (a
/// second insert adds a second form). Only the REPL tools reach outside the store.
fn annotations(tool: &str) -> ToolAnnotations {
    let (read_only, destructive, idempotent) = match tool {
        "insert_form" | "insert_comment" | "batch" => (false, tool == "batch", false),
        "create_namespace" => (false, false, true),
        // They run code in the REPL: not read-only, and what the code does is open.
        "eval" | "load" | "run_tests" => (false, true, false),
        "replace_form"
        | "delete_form"
        | "rename_symbol"
        | "move_form"
        | "replace_top_level_form" => (false, true, true),
        _ => (true, false, true),
    };
    ToolAnnotations::new()
        .read_only(read_only)
        .destructive(destructive)
        .idempotent(idempotent)
        .open_world(matches!(tool, "eval" | "load" | "run_tests"))
}

/// The tools as clients get them: standard schemas and every hint.
fn described_tools() -> ToolRouter<FormdbServer> {
    let mut router = FormdbServer::tool_router();
    for route in router.map.values_mut() {
        let tool = &mut route.attr;
        tool.input_schema = standard_schema_object(&tool.input_schema);
        tool.output_schema = tool.output_schema.as_ref().map(standard_schema_object);
        tool.annotations = Some(annotations(&tool.name));
    }
    router
}

impl FormdbServer {
    pub fn new(session: Session) -> FormdbServer {
        FormdbServer {
            session: Arc::new(session),
            tool_router: described_tools(),
            subscribed: Default::default(),
            peer: Default::default(),
        }
    }

    async fn run<T, F>(&self, f: F) -> Result<CallToolResult, McpError>
    where
        T: Serialize + Send + 'static,
        F: FnOnce(&Session) -> ToolResult<T> + Send + 'static,
    {
        let session = self.session.clone();
        // A tool runs many store queries: on a rayon worker Cozo evaluates them in place.
        let r = tokio::task::spawn_blocking(move || {
            formdb_engine::store::on_worker(move || f(&session))
        })
        .await
        .unwrap_or_else(|e| Err(ToolError::new(format!("internal error: {e}"))));
        Ok(respond(r))
    }

    /// Watch the store for changes to subscribed namespaces (from any writer, this process or
    /// another) and notify the client.
    fn start_watcher(&self) {
        let session = self.session.clone();
        let subscribed = self.subscribed.clone();
        let peer = self.peer.clone();
        tokio::spawn(async move {
            let mut last_gen = u64::MAX;
            let mut last: BTreeMap<String, String> = BTreeMap::new();
            loop {
                tokio::time::sleep(std::time::Duration::from_millis(200)).await;
                let Some(p) = peer.lock().ok().and_then(|p| p.clone()) else { continue };
                let s = session.clone();
                let now = tokio::task::spawn_blocking(move || {
                    let g = formdb_engine::query::generation(&s.store).ok()?;
                    Some((g, tools::ns_hashes(&s.store).ok()?))
                })
                .await
                .ok()
                .flatten();
                let Some((g, hashes)) = now else { continue };
                if g == last_gen {
                    continue;
                }
                let first = last_gen == u64::MAX;
                last_gen = g;
                let subs: Vec<String> =
                    subscribed.lock().map(|s| s.iter().cloned().collect()).unwrap_or_default();
                for ns in subs {
                    if !first && last.get(&ns) != hashes.get(&ns) {
                        let uri = format!("formdb://ns/{ns}");
                        let _ = p
                            .notify_resource_updated(ResourceUpdatedNotificationParam::new(uri))
                            .await;
                    }
                }
                last = hashes;
            }
        });
    }
}

#[tool_router(router = tool_router)]
impl FormdbServer {
    #[tool(
        description = "Every namespace with its file, docstring and number of forms, in pages (`offset`, `limit`).",
        output_schema = schema_for_output::<Namespaces>()
    )]
    async fn list_namespaces(
        &self,
        Parameters(a): Parameters<PageArgs>,
    ) -> Result<CallToolResult, McpError> {
        self.run(move |s| tools::list_namespaces(s, a?)).await
    }

    #[tool(
        description = "A namespace's docstring and its public vars in file order, each with kind, doc, arglists and id, in pages (`offset`, `limit`).",
        output_schema = schema_for_output::<NamespaceOverview>()
    )]
    async fn explore_namespace(
        &self,
        Parameters(a): Parameters<NsArgs>,
    ) -> Result<CallToolResult, McpError> {
        self.run(move |s| tools::explore_namespace(s, a?)).await
    }

    #[tool(
        description = "One form by `id` or by `symbol` (fully-qualified var name): source in your aliases, doc, file, line, kind, arglists, purity, the vars it calls, id and hash. A source longer than one answer comes in pieces: send `text_offset` as `source_next_offset` says.",
        output_schema = schema_for_output::<FormOut>()
    )]
    async fn get_form(
        &self,
        Parameters(a): Parameters<FormArgs>,
    ) -> Result<CallToolResult, McpError> {
        self.run(move |s| tools::get_form(s, a?)).await
    }

    #[tool(
        description = "Forms that use a var, directly or (with depth) transitively. Check this before changing a function.",
        output_schema = schema_for_output::<Graph>()
    )]
    async fn find_usages(
        &self,
        Parameters(a): Parameters<GraphArgs>,
    ) -> Result<CallToolResult, McpError> {
        self.run(move |s| tools::find_usages(s, a?)).await
    }

    #[tool(
        description = "Vars a form uses, directly or (with depth) transitively.",
        output_schema = schema_for_output::<Graph>()
    )]
    async fn find_callees(
        &self,
        Parameters(a): Parameters<GraphArgs>,
    ) -> Result<CallToolResult, McpError> {
        self.run(move |s| tools::find_callees(s, a?)).await
    }

    #[tool(
        description = "Full-text search over names, docstrings and source, best first, in pages (`offset`, `limit`).",
        output_schema = schema_for_output::<Hits>()
    )]
    async fn search(
        &self,
        Parameters(a): Parameters<SearchArgs>,
    ) -> Result<CallToolResult, McpError> {
        self.run(move |s| tools::search(s, a?)).await
    }

    #[tool(
        description = "Run a read-only CozoScript (Datalog) query over the store (see formdb://guide for the relations). Mutations are refused; rows come in pages (`offset`). One query per call (no `{…}` chains, `%` scripts or `:sleep`), stopped after 10 s whatever its own `:timeout`.",
        output_schema = schema_for_output::<QueryOut>()
    )]
    async fn query(
        &self,
        Parameters(a): Parameters<QueryArgs>,
    ) -> Result<CallToolResult, McpError> {
        self.run(move |s| tools::query(s, a?)).await
    }

    #[tool(
        description = "A form's versions, oldest first: time, author, operation and a diff from the previous version, in pages (`offset`, `limit`; `text_offset` reads on in a long diff).",
        output_schema = schema_for_output::<History>()
    )]
    async fn form_history(
        &self,
        Parameters(a): Parameters<HistoryArgs>,
    ) -> Result<CallToolResult, McpError> {
        self.run(move |s| tools::form_history(s, a?)).await
    }

    #[tool(
        description = "Problems in the store, a namespace (`ns`) or a form (`id`): drafts and save errors, unresolved symbols, calls with an argument count no arglist accepts, top-level side effects, namespace cycles.",
        output_schema = schema_for_output::<Diagnostics>()
    )]
    async fn diagnostics(
        &self,
        Parameters(a): Parameters<DiagnosticsArgs>,
    ) -> Result<CallToolResult, McpError> {
        self.run(move |s| tools::diagnostics(s, a?)).await
    }

    #[tool(
        description = "Replace a form by id with new source (one form, in your aliases). Send the `expected_hash` from get_form to refuse the edit if the form changed meanwhile. Unbalanced brackets are refused with a suggested repair; send `repair: true` to accept it. Answers with the diagnostics the edit `introduced` and `fixed`.",
        output_schema = schema_for_output::<EditOut>()
    )]
    async fn replace_form(
        &self,
        Parameters(a): Parameters<ReplaceArgs>,
    ) -> Result<CallToolResult, McpError> {
        self.run(move |s| tools::replace_form(s, a?)).await
    }

    #[tool(
        description = "Insert a new form into a namespace. Without `before`/`after` (form ids) it goes after the forms it uses and before the forms that use it; a `declare` is added for a cycle. Answers with the diagnostics the edit `introduced` and `fixed`.",
        output_schema = schema_for_output::<EditOut>()
    )]
    async fn insert_form(
        &self,
        Parameters(a): Parameters<InsertArgs>,
    ) -> Result<CallToolResult, McpError> {
        self.run(move |s| tools::insert_form(s, a?)).await
    }

    #[tool(description = "Delete a form by id (its history is kept). Answers with the diagnostics the edit `introduced` and `fixed`.", output_schema = schema_for_output::<EditOut>())]
    async fn delete_form(
        &self,
        Parameters(a): Parameters<DeleteArgs>,
    ) -> Result<CallToolResult, McpError> {
        self.run(move |s| tools::delete_form(s, a?)).await
    }

    #[tool(
        description = "Rename a var: its definition and every use across the store, qualified, aliased or referred. Refused if the new name exists. Answers with the diagnostics the edit `introduced` and `fixed`.",
        output_schema = schema_for_output::<EditOut>()
    )]
    async fn rename_symbol(
        &self,
        Parameters(a): Parameters<RenameArgs>,
    ) -> Result<CallToolResult, McpError> {
        self.run(move |s| tools::rename_symbol(s, a?)).await
    }

    #[tool(
        description = "Move a definition to another namespace, rewriting its users and their requires. Answers with the diagnostics the edit `introduced` and `fixed`.",
        output_schema = schema_for_output::<EditOut>()
    )]
    async fn move_form(
        &self,
        Parameters(a): Parameters<MoveArgs>,
    ) -> Result<CallToolResult, McpError> {
        self.run(move |s| tools::move_form(s, a?)).await
    }

    #[tool(description = "Create a namespace (a new file with its ns form). Answers with the diagnostics the edit `introduced` and `fixed`.", output_schema = schema_for_output::<EditOut>())]
    async fn create_namespace(
        &self,
        Parameters(a): Parameters<CreateNsArgs>,
    ) -> Result<CallToolResult, McpError> {
        self.run(move |s| tools::create_namespace(s, a?)).await
    }

    #[tool(
        description = "Add a top-level `;; ` comment before or after a form (anchor_id) or at a file line. Answers with the diagnostics the edit `introduced` and `fixed`.",
        output_schema = schema_for_output::<EditOut>()
    )]
    async fn insert_comment(
        &self,
        Parameters(a): Parameters<CommentArgs>,
    ) -> Result<CallToolResult, McpError> {
        self.run(move |s| tools::insert_comment(s, a?)).await
    }

    #[tool(
        description = "Replace the top-level form starting at `line` of `file`. With `target_line` (the form's first line as you saw it), the form is searched two lines around `line` and the edit is refused, showing the nearby lines, if it is not there. Answers with the diagnostics the edit `introduced` and `fixed`.",
        output_schema = schema_for_output::<EditOut>()
    )]
    async fn replace_top_level_form(
        &self,
        Parameters(a): Parameters<TopLevelArgs>,
    ) -> Result<CallToolResult, McpError> {
        self.run(move |s| tools::replace_top_level_form(s, a?)).await
    }

    #[tool(
        description = "Several edits applied all-or-nothing in one transaction. Each op is an object with `op` (replace, insert, delete, insert_comment, replace_top_level, create_namespace) and that op's arguments. Answers with the diagnostics the edit `introduced` and `fixed`.",
        output_schema = schema_for_output::<EditOut>()
    )]
    async fn batch(
        &self,
        Parameters(a): Parameters<BatchArgs>,
    ) -> Result<CallToolResult, McpError> {
        self.run(move |s| tools::batch(s, a?)).await
    }

    #[tool(
        description = "Evaluate Clojure code (in your aliases) in the project's REPL, in namespace `ns`: the printed value, out, err, the exception with its cause chain, and elapsed time. Interrupted after `timeout_ms` (default 30 s). Texts over a page are cut; `repl_log` with the answer's `log_seq` reads on.",
        output_schema = schema_for_output::<formdb_repl::session::Ran>()
    )]
    async fn eval(
        &self,
        Parameters(a): Parameters<crate::repl::EvalArgs>,
    ) -> Result<CallToolResult, McpError> {
        self.run(move |s| crate::repl::eval(s, a?)).await
    }

    #[tool(
        description = "Evaluate stored forms into the REPL by `ids`, or a whole namespace (`ns`) in file order: the text comes from the store, not from files, so afterwards the REPL runs what the store holds.",
        output_schema = schema_for_output::<formdb_repl::session::Ran>()
    )]
    async fn load(
        &self,
        Parameters(a): Parameters<crate::repl::LoadArgs>,
    ) -> Result<CallToolResult, McpError> {
        self.run(move |s| crate::repl::load(s, a?)).await
    }

    #[tool(
        description = "Run clojure.test tests in the REPL: by namespace (`ns`), by deftest id (`ids`), or `affected_by` (form ids or vars): every test that reaches one of them through calls, transitively, across namespaces. Answers with counts and, per failure, the test's id, expected, actual, message, and the failing line with its form id.",
        output_schema = schema_for_output::<formdb_repl::session::TestReport>()
    )]
    async fn run_tests(
        &self,
        Parameters(a): Parameters<crate::repl::RunTestsArgs>,
    ) -> Result<CallToolResult, McpError> {
        self.run(move |s| crate::repl::run_tests(s, a?)).await
    }

    #[tool(
        description = "The evaluation log (every evaluation formdb sent to the REPL: time, user, form ids, code, value or exception, output), newest first in pages (`offset`, `limit`); or one entry by `seq` (an answer's `log_seq`), its texts read on from `text_offset`.",
        output_schema = schema_for_output::<crate::repl::ReplLog>()
    )]
    async fn repl_log(
        &self,
        Parameters(a): Parameters<crate::repl::ReplLogArgs>,
    ) -> Result<CallToolResult, McpError> {
        self.run(move |s| crate::repl::repl_log(s, a?)).await
    }
}

#[tool_handler(router = self.tool_router)]
impl ServerHandler for FormdbServer {
    fn get_info(&self) -> ServerConfig {
        ServerConfig::new(
            ServerCapabilities::builder()
                .enable_tools()
                .enable_resources()
                .enable_resources_subscribe()
                .build(),
        )
        .with_server_info(Implementation::new("formdb", env!("CARGO_PKG_VERSION")))
        .with_instructions(INSTRUCTIONS)
    }

    async fn list_resources(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListResourcesResult, McpError> {
        let s = self.session.clone();
        let nss = tokio::task::spawn_blocking(move || tools::namespace_entries(&s))
            .await
            .map_err(|e| McpError::internal_error(e.to_string(), None))?
            .map_err(|e| McpError::internal_error(e.error, None))?;
        let mut items = vec![Resource::new("formdb://guide", "guide")
            .with_description("How to work with formdb's tools")
            .with_mime_type(GUIDE_MIME)];
        for n in nss {
            items.push(
                Resource::new(format!("formdb://ns/{}", n.ns), n.ns.clone())
                    .with_description(format!("{} in your view ({})", n.ns, n.file))
                    .with_mime_type(CLOJURE_MIME),
            );
        }
        Ok(ListResourcesResult::with_all_items(items))
    }

    async fn read_resource(
        &self,
        request: ReadResourceRequestParams,
        _context: RequestContext<RoleServer>,
    ) -> Result<ReadResourceResponse, McpError> {
        let uri = request.uri.clone();
        if uri == "formdb://guide" {
            let guide = ResourceContents::text(tools::GUIDE, uri).with_mime_type(GUIDE_MIME);
            return Ok(ReadResourceResult::new(vec![guide]).into());
        }
        let Some(ns) = uri.strip_prefix("formdb://ns/").map(str::to_string) else {
            return Err(McpError::resource_not_found(
                format!(
                    "no resource `{uri}`: resources are formdb://guide and formdb://ns/<namespace>"
                ),
                None,
            ));
        };
        let s = self.session.clone();
        let text = tokio::task::spawn_blocking(move || tools::ns_text(&s, &ns))
            .await
            .map_err(|e| McpError::internal_error(e.to_string(), None))?
            .map_err(|e| McpError::resource_not_found(e.error, None))?;
        let text = ResourceContents::text(text, uri).with_mime_type(CLOJURE_MIME);
        Ok(ReadResourceResult::new(vec![text]).into())
    }

    #[allow(deprecated)]
    async fn subscribe(
        &self,
        request: SubscribeRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<(), McpError> {
        let Some(ns) = request.uri.strip_prefix("formdb://ns/") else {
            return Err(McpError::invalid_params(
                format!(
                    "`{}`: only formdb://ns/<namespace> resources can be subscribed",
                    request.uri
                ),
                None,
            ));
        };
        let first = {
            let mut p = self.peer.lock().map_err(|_| McpError::internal_error("lock", None))?;
            let first = p.is_none();
            *p = Some(context.peer.clone());
            first
        };
        if let Ok(mut s) = self.subscribed.lock() {
            s.insert(ns.to_string());
        }
        if first {
            self.start_watcher();
        }
        Ok(())
    }

    #[allow(deprecated)]
    async fn unsubscribe(
        &self,
        request: UnsubscribeRequestParams,
        _context: RequestContext<RoleServer>,
    ) -> Result<(), McpError> {
        if let Some(ns) = request.uri.strip_prefix("formdb://ns/") {
            if let Ok(mut s) = self.subscribed.lock() {
                s.remove(ns);
            }
        }
        Ok(())
    }
}
