//! A small SVG writer: just the elements the timeline needs, written straight into a string.
//!
//! Shapes take a CSS class rather than inline colours, and coordinates are printed with at
//! most one decimal, so a timeline of thousands of rectangles stays small. Text is escaped
//! for XML.

use std::fmt::Write as _;

/// An SVG document being written.
#[derive(Debug)]
pub(crate) struct Svg {
    buf: String,
}

/// A coordinate with at most one decimal and no trailing `.0`.
#[derive(Debug, Clone, Copy)]
struct Num(f64);

impl std::fmt::Display for Num {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let tenths = (self.0 * 10.0).round() as i64;
        if tenths % 10 == 0 {
            write!(f, "{}", tenths / 10)
        } else {
            let sign = if tenths < 0 { "-" } else { "" };
            let t = tenths.abs();
            write!(f, "{sign}{}.{}", t / 10, t % 10)
        }
    }
}

impl Svg {
    /// Opens a document of `width` × `height` pixels with a stylesheet (CSS rules).
    pub(crate) fn new(width: f64, height: f64, style: &str) -> Svg {
        let mut buf = String::with_capacity(64 * 1024);
        let _ = write!(
            buf,
            "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"{w}\" height=\"{h}\" \
             viewBox=\"0 0 {w} {h}\" font-family=\"sans-serif\" font-size=\"12\">\n\
             <style>{style}</style>\n",
            w = Num(width),
            h = Num(height),
        );
        Svg { buf }
    }

    /// Raw markup, for `<defs>` and the like; the caller makes it well-formed.
    pub(crate) fn raw(&mut self, markup: &str) {
        self.buf.push_str(markup);
        self.buf.push('\n');
    }

    pub(crate) fn rect(&mut self, class: &str, x: f64, y: f64, width: f64, height: f64) {
        let _ = writeln!(
            self.buf,
            "<rect class=\"{class}\" x=\"{}\" y=\"{}\" width=\"{}\" height=\"{}\"/>",
            Num(x),
            Num(y),
            Num(width),
            Num(height)
        );
    }

    pub(crate) fn line(&mut self, class: &str, x1: f64, y1: f64, x2: f64, y2: f64) {
        let _ = writeln!(
            self.buf,
            "<line class=\"{class}\" x1=\"{}\" y1=\"{}\" x2=\"{}\" y2=\"{}\"/>",
            Num(x1),
            Num(y1),
            Num(x2),
            Num(y2)
        );
    }

    /// Text at (`x`, `y`), anchored `start`, `middle` or `end`.
    pub(crate) fn text(&mut self, class: &str, x: f64, y: f64, anchor: &str, content: &str) {
        let _ = writeln!(
            self.buf,
            "<text class=\"{class}\" x=\"{}\" y=\"{}\" text-anchor=\"{anchor}\">{}</text>",
            Num(x),
            Num(y),
            escape(content)
        );
    }

    /// Opens a `<g>` with a tooltip title (shown on hover by browsers).
    pub(crate) fn group_titled(&mut self, title: &str) {
        let _ = writeln!(self.buf, "<g><title>{}</title>", escape(title));
    }

    pub(crate) fn end_group(&mut self) {
        self.buf.push_str("</g>\n");
    }

    /// Closes the document and returns its text.
    pub(crate) fn finish(mut self) -> String {
        self.buf.push_str("</svg>\n");
        self.buf
    }
}

/// Escapes the five XML special characters.
pub(crate) fn escape(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&apos;"),
            c => out.push(c),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn numbers_are_short() {
        assert_eq!(Num(3.0).to_string(), "3");
        assert_eq!(Num(3.04).to_string(), "3");
        assert_eq!(Num(3.06).to_string(), "3.1");
        assert_eq!(Num(-0.25).to_string(), "-0.3");
        assert_eq!(Num(-12.5).to_string(), "-12.5");
    }

    #[test]
    fn a_document_is_well_formed() {
        let mut svg = Svg::new(100.0, 50.0, ".a{fill:red}");
        svg.rect("a", 1.0, 2.0, 3.5, 4.0);
        svg.text("t", 5.0, 6.0, "start", "a < b & c");
        let text = svg.finish();
        assert!(text.starts_with("<svg "));
        assert!(text.contains("<rect class=\"a\" x=\"1\" y=\"2\" width=\"3.5\" height=\"4\"/>"));
        assert!(text.contains("a &lt; b &amp; c"));
        assert!(text.ends_with("</svg>\n"));
    }
}
