//! The report as a document: [`build`] turns a [`crate::RunReport`] into
//! sections of headings, paragraphs, lists, tables (grids of cells with
//! their classes) and charts, in which every label, mark and verdict
//! class is already final. The terminal, Markdown, CSV and HTML writers
//! only lay it out (hyperfine's exporters share one table writer and
//! supply only row syntax; criterion.rs fixes each title before any
//! reporter runs): a new mark is one edit in [`marks`], not one per
//! renderer.

pub mod build;
pub mod marks;
pub mod stacks;

pub use build::build;

/// A whole report, in reading order.
#[derive(Debug, Clone, PartialEq)]
pub struct Document {
    /// The study's name (the page title).
    pub title: String,
    /// The sections, in reading order.
    pub sections: Vec<Section>,
}

/// Who reads a section: the terminal's summary shows [`Part::Summary`]
/// only, `--verbose` adds [`Part::Detail`]; the files (Markdown, HTML)
/// show everything.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Part {
    /// What a person reads first: the run, the result tables, the verdict
    /// counts, the headline findings, the legend.
    Summary,
    /// Monitors, time series, per-point statistics, pairs, notes.
    Detail,
    /// The appendices: system configuration, servers, methodology.
    Appendix,
}

/// A section: an optional heading and its blocks.
#[derive(Debug, Clone, PartialEq)]
pub struct Section {
    /// Its heading, if it has one (the run's header has none).
    pub heading: Option<Heading>,
    /// Who reads it.
    pub part: Part,
    /// What it holds.
    pub blocks: Vec<Block>,
    /// Which writers show it.
    pub media: Media,
}

/// Which writers show a section.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Media {
    /// Every writer.
    All,
    /// Only a writer that draws charts (the latency charts; every point's
    /// statistics, folded in HTML, are the JSON's and the CSV's
    /// elsewhere).
    Drawn,
    /// Only the terminal: its short stand-in for what the files hold in
    /// full (the hosts in one line each, for Appendix A).
    Terminal,
}

/// A heading: level 1 is the study, 2 a part of the report ("Results"),
/// 3 a workload, 4 a table or a view, 5 a table under a view.
#[derive(Debug, Clone, PartialEq)]
pub struct Heading {
    /// 1 to 5.
    pub level: u8,
    /// Its text, marks applied.
    pub text: String,
    /// A small note after it (a workload's kind).
    pub aside: String,
    /// Its classes (`emulated`, `monitors`, `pairs`).
    pub class: Vec<Class>,
}

/// A piece of a section.
#[derive(Debug, Clone, PartialEq)]
pub enum Block {
    /// A paragraph.
    Paragraph(Text),
    /// A bulleted list.
    List {
        /// The items.
        items: Vec<Text>,
        /// Its classes (`findings`).
        class: Vec<Class>,
    },
    /// A table.
    Table(Grid),
    /// A chart (drawn by the HTML writer from the model; the other
    /// writers leave it out: its figures are in the table beside it).
    Chart(Chart),
    /// Preformatted text (a study file, a server's configuration).
    Code {
        /// What it is.
        caption: String,
        /// Its language, for Markdown's fence (`toml`), or empty.
        lang: &'static str,
        /// The text.
        text: String,
    },
}

/// A run of text with its classes.
#[derive(Debug, Clone, PartialEq)]
pub struct Text {
    /// The text, marks applied. `label` (bold in the files) comes first.
    pub text: String,
    /// A leading label, shown in bold by the files (`fake`: in a note).
    pub label: String,
    /// Its classes (`legend`, `small`, `emulated`).
    pub class: Vec<Class>,
}

impl Text {
    /// Plain text.
    pub fn plain(text: impl Into<String>) -> Text {
        Text {
            text: text.into(),
            label: String::new(),
            class: Vec::new(),
        }
    }

    /// Text with classes.
    pub fn with(text: impl Into<String>, class: &[Class]) -> Text {
        Text {
            text: text.into(),
            label: String::new(),
            class: class.to_vec(),
        }
    }

    /// The label and the text as one line: `label: text`.
    pub fn line(&self) -> String {
        if self.label.is_empty() {
            self.text.clone()
        } else {
            format!("{}: {}", self.label, self.text)
        }
    }
}

/// A table: a heading row and rows of cells. A cell's `detail` is a
/// column of its own in HTML (n, an interval), its `inline` a suffix in
/// Markdown; the terminal shows neither.
#[derive(Debug, Clone, PartialEq)]
pub struct Grid {
    /// Its heading row.
    pub head: Vec<Cell>,
    /// The heading of each cell's detail column (HTML), by column; `None`
    /// where the column has none.
    pub detail_head: Vec<Option<String>>,
    /// The rows.
    pub rows: Vec<GridRow>,
    /// Lines under the table.
    pub notes: Vec<Text>,
    /// Whether the terminal draws a rule under the heading row.
    pub rule: bool,
    /// Its classes (`pairs`, `monitors`).
    pub class: Vec<Class>,
    /// The first column's alignment: left for names, right for numbers
    /// (the terminal's own tables align every column right).
    pub label_left: bool,
}

/// A row of a grid.
#[derive(Debug, Clone, PartialEq)]
pub struct GridRow {
    /// Its cells, one per column.
    pub cells: Vec<Cell>,
    /// Its classes (`diff`: the hosts differ; `heading`: a sub-heading
    /// spanning the row).
    pub class: Vec<Class>,
}

/// A cell.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Cell {
    /// The text, marks applied.
    pub text: String,
    /// Its detail column's text (HTML), when its column has one.
    pub detail: Option<String>,
    /// A suffix Markdown writes after the text (` n=3`, ` [+1.00, +2.00]`).
    pub inline: String,
    /// Its classes (`emulated`, a verdict).
    pub class: Vec<Class>,
}

impl Cell {
    /// A cell of plain text.
    pub fn text(s: impl Into<String>) -> Cell {
        Cell {
            text: s.into(),
            ..Cell::default()
        }
    }

    /// A cell with classes.
    pub fn with(s: impl Into<String>, class: Vec<Class>) -> Cell {
        Cell {
            text: s.into(),
            class,
            ..Cell::default()
        }
    }
}

/// The classes of the document: each writer maps them its own way (HTML
/// as CSS classes, the terminal ignores most).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Class {
    /// Left-aligned text.
    Left,
    /// A configuration that ran on emulated guests (or text naming one).
    Emulated,
    /// A verdict's class ([`marks::verdict`]).
    Verdict(marks::VerdictClass),
    /// The legend under the tables.
    Legend,
    /// Small print.
    Small,
    /// The headline findings.
    Findings,
    /// A row where the hosts differ.
    Differs,
    /// A row that is a sub-heading across the table.
    SubHeading,
    /// The monitors' headings.
    Monitors,
    /// The pairs of a curve.
    Pairs,
    /// A row of the table whose cells are collapsed in HTML (all figures).
    Collapsed,
    /// A matrix's heat maps side by side.
    Heat,
    /// A warning every format prints (an A/A control called better or
    /// worse).
    Warning,
}

impl Class {
    /// The CSS class name.
    pub fn css(self) -> &'static str {
        match self {
            Class::Left => "l",
            Class::Emulated => "emulated",
            Class::Verdict(v) => v.css(),
            Class::Legend => "legend",
            Class::Small => "small",
            Class::Findings => "findings",
            Class::Differs => "diff",
            Class::SubHeading => "sub",
            Class::Monitors => "monitors",
            Class::Pairs => "pairs",
            Class::Collapsed => "collapsed",
            Class::Heat => "heat",
            Class::Warning => "warning",
        }
    }
}

/// A chart, by what it draws; its labels are final (marks applied).
#[derive(Debug, Clone, PartialEq)]
pub enum Chart {
    /// The bars or lines of `report.tables[index]`.
    Table {
        /// The table.
        index: usize,
        /// Its columns' labels.
        labels: Vec<String>,
    },
    /// A curve view, `report.views[index]`.
    Curve {
        /// The view.
        index: usize,
        /// The lines' labels.
        labels: Vec<String>,
        /// The chart's title.
        title: String,
    },
    /// One matrix of a matrix view as a heat map.
    Heat {
        /// The view.
        index: usize,
        /// The matrix.
        matrix: usize,
        /// Its caption.
        caption: String,
    },
    /// A time-series view, `report.series[index]`.
    Series {
        /// The view.
        index: usize,
        /// The chart's title.
        title: String,
        /// Each line's label, in the view's order.
        labels: Vec<String>,
    },
    /// A per-second CPU chart of the monitors, `report.monitors.charts[index]`.
    Monitor {
        /// The chart.
        index: usize,
        /// Its title.
        title: String,
        /// Each line's label, in the chart's order.
        labels: Vec<String>,
    },
    /// The latency distribution and time series of group `group`:
    /// `report.latency[i]` for each `i` of `views`.
    Latency {
        /// The group's number (chart ids).
        group: usize,
        /// The latency views drawn.
        views: Vec<usize>,
        /// Each view's line label.
        labels: Vec<String>,
        /// Each view's label in the distribution chart (with the
        /// repetition drawn).
        dist_labels: Vec<String>,
        /// The title.
        title: String,
    },
    /// A side's flame graph, `report.stacks.profiles[index]`.
    Flame {
        /// The profile.
        index: usize,
        /// Its title.
        title: String,
    },
    /// A differential flame graph, `report.stacks.comparisons[index]`.
    FlameDiff {
        /// The comparison.
        index: usize,
        /// Its title.
        title: String,
    },
}

impl Document {
    /// The sections a reader of `part` sees: up to and including it.
    pub fn upto(&self, part: Part) -> impl Iterator<Item = &Section> {
        self.sections.iter().filter(move |s| s.part <= part)
    }
}
