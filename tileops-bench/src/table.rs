//! The one table renderer behind every tabular output: the markdown and CSV tables of the
//! roofline report and the comparison, the HTML page's tables, and the console table `bench`
//! prints.
//!
//! A [`Table`] is columns (a header and an alignment each) and rows of text cells; the outputs
//! differ only in how they write it. A cell may carry what a single output uses and the others
//! ignore: the number an HTML table sorts it by, an HTML class, a console colour. Building a
//! table once and writing it in several formats keeps the formats from drifting apart.
//!
//! Cells may come from a file (an op, a device, a reason): each output makes every header and cell
//! safe for where it goes ([`crate::text`]), so no caller has to.

use std::borrow::Cow;
use std::fmt::Write as _;

use comfy_table::{CellAlignment, Color};

use super::svg::escape_xml;
use crate::text;

/// How a column's cells are aligned: on the console, in a markdown separator (`---` or `---:`),
/// and in HTML, where a right-aligned column is a numeric one (class `num`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Align {
    /// Text.
    Left,
    /// Numbers.
    Right,
}

/// A column: its header and alignment, and for an HTML table whose headers sort it, the key the
/// sorting script names it by.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Column {
    /// The header text.
    pub header: String,
    /// How the column is aligned.
    pub align: Align,
    /// The `data-key` of the HTML header (which then also carries `data-type`); `None` writes a
    /// plain header.
    pub sort_key: Option<&'static str>,
}

impl Column {
    /// A left-aligned column.
    pub fn left(header: impl Into<String>) -> Column {
        Column {
            header: header.into(),
            align: Align::Left,
            sort_key: None,
        }
    }

    /// A right-aligned (numeric) column.
    pub fn right(header: impl Into<String>) -> Column {
        Column {
            align: Align::Right,
            ..Column::left(header)
        }
    }

    /// The column with the HTML sort key `key`.
    pub fn sorted_by(self, key: &'static str) -> Column {
        Column {
            sort_key: Some(key),
            ..self
        }
    }
}

/// A cell: its text, and what single outputs add to it.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Cell {
    /// The text, as every output shows it.
    pub text: String,
    /// The number an HTML table sorts the cell by (`data-value`).
    pub sort_value: Option<f64>,
    /// The HTML class, instead of the column's (`num` for a right-aligned one).
    pub class: Option<String>,
    /// The console colour.
    pub color: Option<Color>,
    /// Whether the text is a number (CSV writes it as it is; a text cell that a spreadsheet
    /// could take for a formula, such as `-cmd`, gets a `'` in front, a number such as `-0.5`
    /// must not).
    pub numeric: bool,
}

impl Cell {
    /// A cell of plain text.
    pub fn new(text: impl Into<String>) -> Cell {
        Cell {
            text: text.into(),
            sort_value: None,
            class: None,
            color: None,
            numeric: false,
        }
    }

    /// A number already written as text (`-0.5`, `123`): a number in every output, never taken
    /// for a formula in CSV.
    pub fn numeral(text: impl Into<String>) -> Cell {
        Cell {
            numeric: true,
            ..Cell::new(text)
        }
    }

    /// A numeric cell: `value` shown by `shown`, and sorted by; empty without a value.
    pub fn number(value: Option<f64>, shown: impl FnOnce(f64) -> String) -> Cell {
        Cell {
            sort_value: value,
            ..Cell::numeral(value.map(shown).unwrap_or_default())
        }
    }

    /// The cell with the HTML class `class`.
    pub fn with_class(self, class: impl Into<String>) -> Cell {
        Cell {
            class: Some(class.into()),
            ..self
        }
    }

    /// The cell with the console colour `color`.
    pub fn with_color(self, color: Color) -> Cell {
        Cell {
            color: Some(color),
            ..self
        }
    }
}

impl From<String> for Cell {
    fn from(text: String) -> Cell {
        Cell::new(text)
    }
}

impl From<&str> for Cell {
    fn from(text: &str) -> Cell {
        Cell::new(text)
    }
}

/// A row: its cells, one per column, and the HTML class of the whole row.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Row {
    /// The cells, in column order.
    pub cells: Vec<Cell>,
    /// The class of the HTML `<tr>`.
    pub class: Option<String>,
}

/// Columns and rows, written as markdown, CSV, HTML or a console table.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Table {
    /// The columns.
    pub columns: Vec<Column>,
    /// The rows, in order.
    pub rows: Vec<Row>,
}

/// The console table's look: a line of dashes under the header, no borders. The 19 characters
/// are comfy-table's components in order (borders, header line and intersections, ...); a space
/// draws nothing.
const CONSOLE_STYLE: &str = "     -             ";

impl Table {
    /// A table of `columns` without rows.
    pub fn new(columns: Vec<Column>) -> Table {
        Table {
            columns,
            rows: Vec::new(),
        }
    }

    /// Adds a row of `cells`.
    pub fn push<C: Into<Cell>>(&mut self, cells: impl IntoIterator<Item = C>) {
        self.push_row(Row {
            cells: cells.into_iter().map(Into::into).collect(),
            class: None,
        });
    }

    /// Adds a row.
    pub fn push_row(&mut self, row: Row) {
        self.rows.push(row);
    }

    /// The table as markdown: the header, the separator (`---`, or `---:` for a right-aligned
    /// column), a line per row. Every header and cell goes through [`text::for_markdown_cell`]:
    /// no markup or hidden character gets through, a `|` is escaped and a line break becomes a
    /// space, so every row stays one line.
    pub fn to_markdown(&self) -> String {
        let mut out = String::new();
        markdown_line(&mut out, self.columns.iter().map(|c| c.header.as_str()));
        markdown_line(
            &mut out,
            self.columns.iter().map(|c| match c.align {
                Align::Left => "---",
                Align::Right => "---:",
            }),
        );
        for row in &self.rows {
            markdown_line(&mut out, row.cells.iter().map(|c| c.text.as_str()));
        }
        out
    }

    /// The table as CSV (the header line first), quoted by the csv crate (RFC 4180: a cell with
    /// a comma, a quote or a line break is quoted, its quotes doubled), one `\n`-terminated line
    /// per row. Headers and text cells go through [`text::for_csv_cell`] first (hidden characters
    /// escaped, a formula's first character neutralised); numeric cells ([`Cell::numeral`]) are
    /// written as they are.
    pub fn to_csv(&self) -> String {
        // A writer into memory: its only failure would be the buffer's I/O, which cannot fail.
        let mut writer = csv::WriterBuilder::new()
            .terminator(csv::Terminator::Any(b'\n'))
            .flexible(true)
            .from_writer(Vec::new());
        writer
            .write_record(
                self.columns
                    .iter()
                    .map(|c| text::for_csv_cell(&c.header).into_owned()),
            )
            .expect("writing CSV into memory cannot fail");
        for row in &self.rows {
            let cells: Vec<Cow<'_, str>> = row
                .cells
                .iter()
                .map(|c| {
                    if c.numeric {
                        Cow::Borrowed(c.text.as_str())
                    } else {
                        text::for_csv_cell(&c.text)
                    }
                })
                .collect();
            writer
                .write_record(cells.iter().map(|c| c.as_bytes()))
                .expect("writing CSV into memory cannot fail");
        }
        let bytes = writer
            .into_inner()
            .expect("flushing CSV into memory cannot fail");
        // Every cell was a `String`, so the bytes are UTF-8.
        String::from_utf8(bytes)
            .unwrap_or_else(|e| String::from_utf8_lossy(e.as_bytes()).into_owned())
    }

    /// The table for a terminal: the header, a line of dashes, a row per line, right-aligned
    /// columns padded on the left; trailing spaces trimmed. Cells with a colour are coloured
    /// (ANSI escapes) only when `color` is set; those escapes are the table's own: the headers and
    /// cells go through [`text::for_terminal`], so none of theirs reaches the terminal.
    pub fn to_console(&self, color: bool) -> String {
        let mut table = comfy_table::Table::new();
        table.load_preset(CONSOLE_STYLE);
        // Styling only when asked: comfy-table would otherwise decide from its own tty check.
        if color {
            table.enforce_styling();
        } else {
            table.force_no_tty();
        }
        table.set_header(self.columns.iter().map(|c| text::for_terminal(&c.header)));
        for row in &self.rows {
            table.add_row(row.cells.iter().map(|cell| {
                let console = comfy_table::Cell::new(text::for_terminal(&cell.text));
                match cell.color {
                    Some(c) => console.fg(c),
                    None => console,
                }
            }));
        }
        for (index, column) in self.columns.iter().enumerate() {
            if column.align == Align::Right
                && let Some(console) = table.column_mut(index)
            {
                console.set_cell_alignment(CellAlignment::Right);
            }
        }
        let mut out = String::new();
        for line in table.lines() {
            out.push_str(line.trim_end());
            out.push('\n');
        }
        out
    }

    /// The table as an HTML `<table>` with `id` (and `class`, when given), every text escaped.
    /// A header with a sort key carries `data-key` and `data-type` (`num` or `text`) for the
    /// page's sorting script; a cell carries its own class or else its column's (`num` for a
    /// right-aligned one), and its sort value as `data-value`.
    pub fn to_html(&self, id: &str, class: Option<&str>) -> String {
        let mut out = String::from("<table");
        if let Some(class) = class {
            let _ = write!(out, " class=\"{}\"", escape_xml(class));
        }
        let _ = write!(out, " id=\"{}\">\n<thead><tr>", escape_xml(id));
        for c in &self.columns {
            match c.sort_key {
                Some(key) => {
                    let kind = match c.align {
                        Align::Left => "text",
                        Align::Right => "num",
                    };
                    let _ = write!(
                        out,
                        "<th data-key=\"{key}\" data-type=\"{kind}\">{}</th>",
                        escape_xml(&c.header)
                    );
                }
                None => {
                    let _ = write!(out, "<th>{}</th>", escape_xml(&c.header));
                }
            }
        }
        out.push_str("</tr></thead>\n<tbody>\n");
        for row in &self.rows {
            match &row.class {
                Some(class) => {
                    let _ = write!(out, "<tr class=\"{}\">", escape_xml(class));
                }
                None => out.push_str("<tr>"),
            }
            for (cell, column) in row.cells.iter().zip(&self.columns) {
                let class = cell.class.as_deref().or(match column.align {
                    Align::Left => None,
                    Align::Right => Some("num"),
                });
                out.push_str("<td");
                if let Some(class) = class {
                    let _ = write!(out, " class=\"{}\"", escape_xml(class));
                }
                if let Some(value) = cell.sort_value {
                    let _ = write!(out, " data-value=\"{value:e}\"");
                }
                let _ = write!(out, ">{}</td>", escape_xml(&cell.text));
            }
            out.push_str("</tr>\n");
        }
        out.push_str("</tbody>\n</table>\n");
        out
    }
}

/// One markdown table line: `| a | b |`, each cell through [`text::for_markdown_cell`].
fn markdown_line<'a>(out: &mut String, cells: impl Iterator<Item = &'a str>) {
    out.push('|');
    for cell in cells {
        let _ = write!(out, " {} |", text::for_markdown_cell(cell));
    }
    out.push('\n');
}

#[cfg(test)]
mod tests {
    use super::*;

    fn summary() -> Table {
        let mut table = Table::new(vec![Column::left("verdict"), Column::right("rows")]);
        table.push(["a|b", "1"]);
        table.push_row(Row {
            cells: vec![Cell::new("fail").with_class("v-fail"), Cell::new("0")],
            class: None,
        });
        table
    }

    #[test]
    fn markdown_escapes_bars_and_marks_right_aligned_columns() {
        assert_eq!(
            summary().to_markdown(),
            "| verdict | rows |\n| --- | ---: |\n| a\\|b | 1 |\n| fail | 0 |\n"
        );
    }

    #[test]
    fn csv_quotes_cells() {
        let mut table = Table::new(vec![
            Column::left("a,b"),
            Column::left("say \"hi\""),
            Column::left("plain"),
        ]);
        table.push(["two\nlines", "", "x"]);
        assert_eq!(
            table.to_csv(),
            "\"a,b\",\"say \"\"hi\"\"\",plain\n\"two\nlines\",,x\n"
        );
    }

    /// A row of text from a hostile file, and a negative number.
    fn hostile() -> Table {
        let mut table = Table::new(vec![
            Column::left("op"),
            Column::left("reason"),
            Column::right("ratio"),
        ]);
        table.push([
            Cell::new("=HYPERLINK(\"http://x\",\"y\")"),
            Cell::new("<img src=x onerror=alert(1)>\rsecond `row`"),
            Cell::numeral("-0.5"),
        ]);
        table.push([
            Cell::new("\u{1b}[2J\u{1b}]8;;http://x\u{7}a\u{9b}b\u{202e}"),
            Cell::new("@SUM(A1)"),
            Cell::number(Some(-2.0), |v| format!("{v}")),
        ]);
        table.push([Cell::new("+1"), Cell::new("-cmd"), Cell::new("-1")]);
        table
    }

    #[test]
    fn csv_neutralises_formulas_in_text_cells_but_not_numbers() {
        let csv = hostile().to_csv();
        let mut reader = csv::ReaderBuilder::new().from_reader(csv.as_bytes());
        let rows: Vec<Vec<String>> = reader
            .records()
            .map(|r| r.unwrap().iter().map(str::to_owned).collect())
            .collect();
        assert_eq!(rows[0][0], "'=HYPERLINK(\"http://x\",\"y\")");
        assert_eq!(rows[0][2], "-0.5", "a number stays a number");
        assert_eq!(
            rows[1][0],
            "\\u{1b}[2J\\u{1b}]8;;http://x\\u{7}a\\u{9b}b\\u{202e}"
        );
        assert_eq!(rows[1][1], "'@SUM(A1)");
        assert_eq!(rows[1][2], "-2");
        // A text cell that merely looks like a number is text: neutralised like any other.
        assert_eq!(rows[2], ["'+1", "'-cmd", "'-1"]);
        assert!(!csv.contains(['\u{1b}', '\u{7}', '\u{9b}', '\u{202e}']));
        // The quote goes inside the CSV quoting: the field starts with the quote character.
        assert!(csv.contains("\n\"'=HYPERLINK(\"\"http://x\"\""), "{csv}");
    }

    #[test]
    fn markdown_cells_carry_no_html_no_hidden_character_and_no_row_break() {
        let md = hostile().to_markdown();
        assert_eq!(md.lines().count(), 5, "{md}");
        assert!(!md.contains("<img") && !md.contains('`') && !md.contains('\r'));
        assert!(md.contains("| &lt;img src=x onerror=alert(1)&gt; second &#96;row&#96; |"));
        assert!(
            !md.contains(['\u{1b}', '\u{7}', '\u{9b}', '\u{202e}']),
            "{md:?}"
        );
        assert!(md.contains("\\u{1b}\\[2J\\u{1b}\\]8;;http://x\\u{7}a\\u{9b}b\\u{202e}"));
    }

    #[test]
    fn console_cells_cannot_drive_the_terminal() {
        let console = hostile().to_console(true);
        // The table's own colours are the only escapes: none here has a colour.
        assert!(
            !console.contains(['\u{1b}', '\u{7}', '\u{9b}', '\u{202e}', '\r']),
            "{console:?}"
        );
        assert!(console.contains("\\u{1b}[2J"), "{console}");
    }

    #[test]
    fn html_cells_take_their_own_class_or_their_columns() {
        let mut table = Table::new(vec![
            Column::left("op").sorted_by("op"),
            Column::right("ms").sorted_by("ms"),
        ]);
        table.push_row(Row {
            cells: vec![
                Cell::new("<x>"),
                Cell::number(Some(0.5), |v| format!("{v}")),
            ],
            class: Some("v-below".into()),
        });
        table.push([Cell::new("y"), Cell::number(None, |v| format!("{v}"))]);
        assert_eq!(
            table.to_html("rows", None),
            "<table id=\"rows\">\n<thead><tr><th data-key=\"op\" data-type=\"text\">op</th>\
             <th data-key=\"ms\" data-type=\"num\">ms</th></tr></thead>\n<tbody>\n\
             <tr class=\"v-below\"><td>&lt;x&gt;</td><td class=\"num\" data-value=\"5e-1\">0.5</td></tr>\n\
             <tr><td>y</td><td class=\"num\"></td></tr>\n</tbody>\n</table>\n"
        );
        assert!(
            summary().to_html("verdicts", Some("summary")).starts_with(
                "<table class=\"summary\" id=\"verdicts\">\n<thead><tr><th>verdict</th>"
            )
        );
    }

    #[test]
    fn console_right_aligns_numbers_and_colours_only_when_asked() {
        let mut table = Table::new(vec![Column::left("name"), Column::right("median")]);
        table.push([Cell::new("a"), Cell::new("1.0 ms").with_color(Color::Red)]);
        let plain = table.to_console(false);
        assert_eq!(plain.lines().count(), 3, "{plain}");
        assert!(plain.lines().nth(1).unwrap().trim().starts_with('-'));
        assert!(plain.lines().nth(2).unwrap().ends_with("1.0 ms"), "{plain}");
        assert!(!plain.contains('\u{1b}'));
        assert!(table.to_console(true).contains('\u{1b}'));
    }
}
