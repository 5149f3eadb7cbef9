//! Placeholder; being written.
#[cfg(test)]
mod tests {
    fn dump(n: tree_sitter::Node, src: &str, depth: usize) {
        let field = "";
        println!("{:indent$}{}{} {:?} [{}-{}]", "", field, n.kind(), if n.child_count()==0 {&src[n.byte_range()]} else {""}, n.start_byte(), n.end_byte(), indent = depth * 2);
        let mut c = n.walk();
        for (i, ch) in n.children(&mut c).enumerate() {
            let f = n.field_name_for_child(i as u32).unwrap_or("");
            print!("{f}:");
            dump(ch, src, depth + 1);
        }
    }
    #[test]
    fn explore() {
        for src in ["^:a \"x\"", "^:a ^:b foo", "(a, b ,c)", "#?(:clj a)", "#:foo{:a 1}", "#::{:a 1}", "#inst \"x\"", "' #_x foo", "##Inf", "#_ #_ a b c", "^:a :b", "#\"re\"", "(a ; c\n b)", "#foo/bar [1]", "#=(+ 1 2)", "\\a \\newline", "#^String x", "#{1}", "#(+ % 1)", "@x", "^{:a 1} (f)"] {
            println!("=== {src:?}");
            let t = formdb_engine::syntax::parse(src);
            dump(t.root_node(), src, 0);
        }
    }
}
