//! The holders' folded stacks as an SVG flame graph, drawn by inferno
//! (the Rust port of Brendan Gregg's flamegraph.pl): each frame's width
//! is the time waiters spent behind it.

use std::io::Write;

use inferno::flamegraph::{Options, from_lines};

/// Writes the flame graph of `lines` (folded, weights in microseconds).
pub(crate) fn svg(lines: &[String], title: &str, out: impl Write) -> std::io::Result<()> {
    let mut options = Options::default();
    options.title = title.to_string();
    options.count_name = "us waited".to_string();
    options.subtitle = Some("what the task on the CPU ran while others waited for it".to_string());
    from_lines(&mut options, lines.iter().map(String::as_str), out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_graph_names_its_frames() {
        let lines = [
            "hog;main;spin_here 4500".to_string(),
            "cat;read_[k] 10".to_string(),
        ];
        let mut out = Vec::new();
        svg(&lines, "Holders", &mut out).unwrap();
        let svg = String::from_utf8(out).unwrap();
        assert!(svg.starts_with("<?xml"));
        assert!(svg.contains("spin_here"));
    }
}
