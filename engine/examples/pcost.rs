use formdb_engine::{forms, syntax};
use std::time::Instant;
fn main() {
    let path = std::env::args().nth(1).unwrap();
    let text = std::fs::read_to_string(&path).unwrap();
    for _ in 0..3 {
        let t = Instant::now();
        let tree = syntax::parse(&text);
        let a = t.elapsed().as_secs_f64() * 1000.0;
        let t = Instant::now();
        let f = forms::parse_file("x.clj", syntax::Lang::Clj, text.clone());
        let b = t.elapsed().as_secs_f64() * 1000.0;
        let _ = (f.forms().len(), tree.root_node().child_count());
        println!("tree-sitter {a:.2} ms, parse_file {b:.2} ms, lines {}", text.lines().count());
    }
}
