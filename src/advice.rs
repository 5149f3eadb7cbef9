//! What a shell user is told to run when an error needs input they must look up: the engine and
//! the edits word their errors for no transport, and the MCP server words its own for agents.

use formdb_edit::EditError;
use formdb_engine::store::StoreError;
use formdb_projector::views::ViewError;

const FIND_IDS: &str =
    "ids are 8 characters, as `formdb search TEXT` and `formdb ns NAMESPACE` print them";
const FIND_NSS: &str = "`formdb search TEXT` prints the namespace of each match";

/// The advice for the first error of `e`'s chain that needs any.
pub(crate) fn for_shell(e: &anyhow::Error) -> Option<&'static str> {
    e.chain().find_map(|c| {
        if let Some(e) = c.downcast_ref::<EditError>() {
            edit(e)
        } else if let Some(e) = c.downcast_ref::<ViewError>() {
            view(e)
        } else {
            c.downcast_ref::<StoreError>().and_then(store)
        }
    })
}

fn edit(e: &EditError) -> Option<&'static str> {
    match e.cause() {
        EditError::UnknownId { .. } => Some(FIND_IDS),
        EditError::NoNamespace { .. } => Some(FIND_NSS),
        EditError::NoVar { .. } => {
            Some("`formdb ns NAMESPACE` lists a namespace's vars; `formdb search TEXT` finds one")
        }
        EditError::NotAVar { .. } => {
            Some("send `my.ns/foo`, or a form id as `formdb search TEXT` prints it")
        }
        EditError::View(v) => view(v),
        EditError::Store(s) => store(s),
        _ => None,
    }
}

fn view(e: &ViewError) -> Option<&'static str> {
    match e {
        ViewError::NoNamespace(_) => Some(FIND_NSS),
        ViewError::Store(s) => store(s),
        _ => None,
    }
}

fn store(e: &StoreError) -> Option<&'static str> {
    match e {
        StoreError::NoForm { .. } => Some(FIND_IDS),
        _ => None,
    }
}
