//! Diagnostics of a namespace (being written).
