//! A small SVG writer: just the elements the timeline needs, written straight into a string.
//!
//! Shapes take a CSS class rather than inline colours, and coordinates are printed with at
//! most one decimal, so a timeline of thousands of rectangles stays small. Every piece of
//! text written (content, titles, the stylesheet, class names and other attribute values)
//! goes through [`escape`], so the document is well-formed XML whatever the text holds: a
//! thread name read from a trace may hold anything (issue 18 item 9).

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
        // `as` saturates (and takes NaN to 0): no coordinate can overflow what follows.
        let tenths = (self.0 * 10.0).round() as i64;
        if tenths % 10 == 0 {
            write!(f, "{}", tenths / 10)
        } else {
            let sign = if tenths < 0 { "-" } else { "" };
            // Unsigned: `i64::MIN.abs()` overflows.
            let t = tenths.unsigned_abs();
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
            style = escape(style),
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
            "<rect class=\"{}\" x=\"{}\" y=\"{}\" width=\"{}\" height=\"{}\"/>",
            escape(class),
            Num(x),
            Num(y),
            Num(width),
            Num(height)
        );
    }

    pub(crate) fn line(&mut self, class: &str, x1: f64, y1: f64, x2: f64, y2: f64) {
        let _ = writeln!(
            self.buf,
            "<line class=\"{}\" x1=\"{}\" y1=\"{}\" x2=\"{}\" y2=\"{}\"/>",
            escape(class),
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
            "<text class=\"{}\" x=\"{}\" y=\"{}\" text-anchor=\"{}\">{}</text>",
            escape(class),
            Num(x),
            Num(y),
            escape(anchor),
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

/// `text` as XML 1.0 character data or attribute value, which read back gives `text` again
/// but for the characters XML cannot hold:
///
/// - the five special characters become `&amp;`, `&lt;`, `&gt;`, `&quot;` and `&apos;`;
/// - tab, newline and carriage return become character references (`&#x9;`, …): written as
///   they are, a parser reads them as spaces in an attribute, and a CR as a newline anywhere;
/// - the characters XML 1.0 does not allow at all, not even as a reference (the other C0
///   controls U+0000 to U+001F, and U+FFFE and U+FFFF; surrogates cannot be in a `str`),
///   become U+FFFD, the replacement character, so that the reader sees where they were.
///
/// Written straight into the document through `Display`, without a copy.
fn escape(text: &str) -> Escaped<'_> {
    Escaped(text)
}

/// Text that displays as XML: see [`escape`].
#[derive(Debug, Clone, Copy)]
struct Escaped<'a>(&'a str);

impl std::fmt::Display for Escaped<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // Runs of ordinary characters are written whole; each other character is replaced.
        let text = self.0;
        let mut written = 0;
        for (at, c) in text.char_indices() {
            if let Some(replaced) = replacement(c) {
                f.write_str(&text[written..at])?;
                f.write_str(replaced)?;
                written = at + c.len_utf8();
            }
        }
        f.write_str(&text[written..])
    }
}

/// What [`escape`] writes for `c`, if not `c` itself.
fn replacement(c: char) -> Option<&'static str> {
    Some(match c {
        '&' => "&amp;",
        '<' => "&lt;",
        '>' => "&gt;",
        '"' => "&quot;",
        '\'' => "&apos;",
        '\t' => "&#x9;",
        '\n' => "&#xA;",
        '\r' => "&#xD;",
        '\u{0}'..='\u{1f}' | '\u{fffe}' | '\u{ffff}' => "\u{fffd}",
        _ => return None,
    })
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
    fn numbers_out_of_range_saturate() {
        // -inf became i64::MIN tenths, whose `abs` overflowed.
        assert_eq!(Num(f64::NEG_INFINITY).to_string(), "-922337203685477580.8");
        assert_eq!(Num(f64::MIN).to_string(), "-922337203685477580.8");
        assert_eq!(Num(f64::INFINITY).to_string(), "922337203685477580.7");
        assert_eq!(Num(f64::NAN).to_string(), "0");
    }

    /// Every character XML 1.0 forbids, and its neighbours.
    const HOSTILE: &str = "a\u{0}b\u{1}\u{8}\t\n\u{b}\u{c}\r\u{e}\u{1f} \u{7f}\u{85}\
                           <>&\"'\u{d7ff}\u{e000}\u{fffd}\u{fffe}\u{ffff}\u{10000}\u{10ffff}";
    /// What an XML parser reads back: `HOSTILE` with each forbidden character replaced.
    const READ_BACK: &str = "a\u{fffd}b\u{fffd}\u{fffd}\t\n\u{fffd}\u{fffd}\r\u{fffd}\u{fffd} \u{7f}\
                             \u{85}<>&\"'\u{d7ff}\u{e000}\u{fffd}\u{fffd}\u{fffd}\u{10000}\u{10ffff}";

    #[test]
    fn text_that_xml_forbids_is_replaced_everywhere() {
        // Issue 18 item 9: a thread name with U+0001 went into the SVG as is, and XML
        // parsers rejected the file.
        let mut svg = Svg::new(100.0, 50.0, HOSTILE);
        svg.group_titled(HOSTILE);
        svg.text(HOSTILE, 5.0, 6.0, HOSTILE, HOSTILE);
        svg.end_group();
        svg.rect(HOSTILE, 1.0, 2.0, 3.0, 4.0);
        svg.line(HOSTILE, 1.0, 2.0, 3.0, 4.0);
        let text = svg.finish();
        let doc = roxmltree::Document::parse(&text).unwrap_or_else(|e| panic!("{e}: {text}"));
        let mut attributes = 0;
        for node in doc.descendants().filter(|n| n.is_element()) {
            for a in node
                .attributes()
                .filter(|a| a.name() == "class" || a.name() == "text-anchor")
            {
                assert_eq!(a.value(), READ_BACK, "{}", a.name());
                attributes += 1;
            }
            if matches!(node.tag_name().name(), "style" | "title" | "text") {
                assert_eq!(node.text(), Some(READ_BACK), "{}", node.tag_name().name());
            }
        }
        assert_eq!(attributes, 4);
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
