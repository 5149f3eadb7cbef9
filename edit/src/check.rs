//! Checks on source an agent sends before it may become a form: it must parse as exactly one
//! form. Unbalanced brackets are never stored as a guess: Parinfer's indent mode derives a
//! repair from the indentation, which is offered (with its diff) or, when the caller asked for
//! it explicitly, applied and reported.

use formdb_engine::syntax;
use formdb_parinfer as parinfer;

/// Why source was refused, with what the agent needs to fix it.
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize)]
pub struct SourceProblem {
    pub message: String,
    pub line: u32,
    pub col: u32,
    /// The source numbered, 10 lines either side of the problem, an arrow on its line.
    pub window: String,
    /// Indent mode's repair, when one makes the source parse: resend it, or send `repair: true`.
    pub suggestion: Option<Suggestion>,
}

#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize)]
pub struct Suggestion {
    pub source: String,
    pub diff: String,
}

/// Source that passed, and the repair applied to it if any.
#[derive(Clone, Debug)]
pub struct Checked {
    pub source: String,
    /// The diff of the bracket repair applied (only with `repair: true`).
    pub repaired: Option<String>,
}

/// Check that `source` is exactly one form (`allow_many`: one or more), repairing brackets
/// from indentation only when `repair` is set.
pub fn source(source: &str, repair: bool, allow_many: bool) -> Result<Checked, SourceProblem> {
    let text = source.trim_matches(|c: char| c == '\n' || c == '\r');
    let text = text.trim_end();
    if text.trim().is_empty() {
        return Err(problem(text, 1, 1, "the source is empty: send the whole form".into(), None));
    }
    // Checked before it is parsed: its syntax tree alone would be about 70 bytes a byte.
    if text.len() > syntax::MAX_FORM_BYTES {
        let message = if allow_many {
            format!("the source is {} bytes: longer than the {} bytes one edit may send; send its forms in several edits; nothing was stored", text.len(), syntax::MAX_FORM_BYTES)
        } else {
            syntax::too_long_message(text.len()) + "; nothing was stored"
        };
        // The window shows its start, not megabytes of it.
        let start = (0..=4096).rev().find(|&i| text.is_char_boundary(i)).unwrap_or(0);
        return Err(problem(&text[..start], 1, 1, message, None));
    }
    let tree = syntax::parse(text);
    let error = syntax::first_error(&tree, text);
    if let Some(deep) = error.is_none().then(|| syntax::too_deep_error(&tree, text)).flatten() {
        return Err(problem(
            text,
            deep.pos.line,
            deep.pos.col,
            format!("{}: forms may not nest that deep; nothing was stored", deep.message),
            None,
        ));
    }
    match error {
        None => {
            let n = syntax::top_level_forms(&tree).len();
            if n == 0 {
                return Err(problem(
                    text,
                    1,
                    1,
                    "the source holds only comments: send a form".into(),
                    None,
                ));
            }
            if n > 1 && !allow_many {
                let second = syntax::top_level_forms(&tree)[1];
                let p = second.start_position();
                return Err(problem(
                    text,
                    p.row as u32 + 1,
                    p.column as u32 + 1,
                    format!("the source holds {n} forms, this edit takes one: send one form per edit (or use `batch`)"),
                    None,
                ));
            }
            Ok(Checked { source: text.to_string(), repaired: None })
        }
        Some(e) => {
            let repaired = indent_mode_repair(text)
                .filter(|(r, _)| r != text && syntax::first_error(&syntax::parse(r), r).is_none());
            match repaired {
                Some((r, diff)) => {
                    if repair {
                        let again = self::source(&r, false, allow_many)?;
                        return Ok(Checked { source: again.source, repaired: Some(diff) });
                    }
                    Err(problem(
                        text,
                        e.pos.line,
                        e.pos.col,
                        format!(
                            "unbalanced brackets ({}); nothing was stored. Parinfer's indent mode derives the repair below from your indentation: check it, then resend the repaired source or send the same call with `repair: true`",
                            e.message
                        ),
                        Some(Suggestion { source: r.clone(), diff }),
                    ))
                }
                None => Err(problem(
                    text,
                    e.pos.line,
                    e.pos.col,
                    format!("the source does not parse: {}; nothing was stored", e.message),
                    None,
                )),
            }
        }
    }
}

/// Indent mode's repaired text and its diff. Unmatched close-brackets inside a line are an
/// error in plain indent mode (the reference highlights them); only then is the variant that
/// removes them asked, so the suggestion still comes from the indentation.
fn indent_mode_repair(text: &str) -> Option<(String, String)> {
    let repair = parinfer::indent_mode(text)
        .or_else(|_| parinfer::indent_mode_with(text, parinfer::Options { force_balance: true }));
    let r = repair.ok().filter(|r| r.changed())?;
    let diff = r.diff(text);
    Some((r.text, diff))
}

fn problem(
    text: &str,
    line: u32,
    col: u32,
    message: String,
    suggestion: Option<Suggestion>,
) -> SourceProblem {
    SourceProblem {
        message: format!("line {line}, column {col}: {message}"),
        line,
        col,
        window: window(text, line as usize, 10),
        suggestion,
    }
}

/// `radius` lines either side of `line` (1-based), numbered, with an arrow on `line`.
pub fn window(text: &str, line: usize, radius: usize) -> String {
    let lines: Vec<&str> = text.lines().collect();
    let first = line.saturating_sub(radius).max(1);
    let last = (line + radius).min(lines.len().max(1));
    let width = last.to_string().len();
    let mut out = String::new();
    for n in first..=last {
        let arrow = if n == line { "->" } else { "  " };
        let body = lines.get(n - 1).copied().unwrap_or("");
        out.push_str(&format!("{arrow} {n:>width$} | {body}\n"));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_form_longer_than_a_form_may_be_is_refused_before_it_is_parsed() {
        let long = format!("(def table [{}])", ":entry ".repeat(syntax::MAX_FORM_BYTES / 7));
        let refused = source(&long, true, false).unwrap_err();
        assert!(
            refused.message.contains(&syntax::too_long_message(long.len())),
            "{}",
            refused.message
        );
        assert!(
            refused.window.len() < 5000,
            "the window shows its start: {} bytes",
            refused.window.len()
        );
        let many = format!("{long}\n{long}");
        assert!(source(&many, false, true).unwrap_err().message.contains("several edits"));
        // Just under it, one form passes.
        let under = format!("(def table [{}])", ":entry ".repeat(syntax::MAX_FORM_BYTES / 8));
        assert_eq!(source(&under, false, false).unwrap().source, under);
    }

    #[test]
    fn one_form_passes_unchanged() {
        let c = source("(defn f [x]\n  (inc x))\n", false, false).unwrap();
        assert_eq!(c.source, "(defn f [x]\n  (inc x))");
        assert!(c.repaired.is_none());
    }

    #[test]
    fn two_forms_are_refused_for_a_single_edit() {
        let e = source("(def a 1)\n(def b 2)", false, false).unwrap_err();
        assert!(e.message.contains("2 forms"), "{}", e.message);
        assert_eq!(e.line, 2);
        assert!(source("(def a 1)\n(def b 2)", false, true).is_ok());
    }

    #[test]
    fn missing_bracket_is_refused_with_the_indent_mode_repair() {
        let src = "(defn f [x]\n  (let [y (inc x)]\n    (* y 2))";
        let e = source(src, false, false).unwrap_err();
        let s = e.suggestion.expect("a repair");
        assert_eq!(s.source, "(defn f [x]\n  (let [y (inc x)]\n    (* y 2)))");
        assert!(s.diff.contains("(* y 2)))"), "{}", s.diff);
        assert!(e.window.contains("->"), "{}", e.window);
        let c = source(src, true, false).unwrap();
        assert_eq!(c.source, s.source);
        assert!(c.repaired.is_some());
    }

    #[test]
    fn unrepairable_source_gets_a_numbered_window_with_an_arrow() {
        let mut src = String::new();
        for i in 0..30 {
            src.push_str(&format!("(def v{i} {i})\n"));
        }
        src.push_str("(def s \"unclosed)\n");
        let e = source(&src, false, true).unwrap_err();
        assert!(e.suggestion.is_none());
        let lines: Vec<&str> = e.window.lines().collect();
        assert!(lines.len() <= 21 && lines.len() >= 11, "{}", e.window);
        assert!(e.window.lines().any(|l| l.starts_with("->")), "{}", e.window);
    }

    #[test]
    fn window_is_21_lines_around_the_middle() {
        let text: String = (1..=50).map(|i| format!("line{i}\n")).collect();
        let w = window(&text, 25, 10);
        assert_eq!(w.lines().count(), 21);
        assert!(w.lines().next().unwrap().contains("15 | line15"));
        assert!(w.lines().nth(10).unwrap().starts_with("-> 25 | line25"));
    }
}
