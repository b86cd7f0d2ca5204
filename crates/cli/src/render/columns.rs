//! Column alignment for tables, trees and headers, measured on the visible text so that
//! colour codes and multi-byte icons do not shift the columns.

use super::style::{Color, Style};

/// Spaces between two columns.
const GAP: usize = 2;

/// One cell: its text and colour.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Cell {
    pub text: String,
    pub color: Color,
}

impl Cell {
    pub fn plain(text: impl Into<String>) -> Self {
        Self {
            text: text.into(),
            color: Color::Plain,
        }
    }

    pub fn colored(text: impl Into<String>, color: Color) -> Self {
        Self {
            text: text.into(),
            color,
        }
    }
}

/// Lines of left-aligned columns. Rows may have fewer cells than others; trailing empty cells
/// leave no trailing spaces.
pub fn align(rows: &[Vec<Cell>], style: &Style) -> String {
    let columns = rows.iter().map(Vec::len).max().unwrap_or(0);
    let mut widths = vec![0; columns];
    for row in rows {
        for (i, cell) in row.iter().enumerate() {
            widths[i] = widths[i].max(width(&cell.text));
        }
    }
    let mut out = String::new();
    for row in rows {
        let last = row.iter().rposition(|c| !c.text.is_empty());
        if let Some(last) = last {
            for (i, cell) in row.iter().enumerate().take(last + 1) {
                out.push_str(&style.paint(&cell.text, cell.color));
                if i < last {
                    let pad = widths[i] - width(&cell.text) + GAP;
                    out.extend(std::iter::repeat_n(' ', pad));
                }
            }
        }
        out.push('\n');
    }
    out
}

/// Visible width: one column per character (the icons used are all single-width).
fn width(text: &str) -> usize {
    text.chars().count()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn row(cells: &[&str]) -> Vec<Cell> {
        cells.iter().map(|c| Cell::plain(*c)).collect()
    }

    #[test]
    fn pads_to_the_widest_cell() {
        let out = align(
            &[
                row(&["NAME", "KIND", "INFO"]),
                row(&["└──□ pod-1", "Pod", ""]),
                row(&["# revision:2"]),
            ],
            &Style::PLAIN,
        );
        assert_eq!(
            out,
            "NAME          KIND  INFO\n\
             └──□ pod-1    Pod\n\
             # revision:2\n"
        );
    }

    #[test]
    fn colour_does_not_count_as_width() {
        let rows = [
            vec![Cell::colored("✔ ok", Color::Green), Cell::plain("a")],
            vec![Cell::plain("longer"), Cell::plain("b")],
        ];
        let out = align(&rows, &Style { color: true });
        assert_eq!(out, "\x1b[32m✔ ok\x1b[0m    a\nlonger  b\n");
    }

    #[test]
    fn empty_input_is_empty() {
        assert_eq!(align(&[], &Style::PLAIN), "");
    }
}
