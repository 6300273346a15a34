//! A tiny SVG writer.
