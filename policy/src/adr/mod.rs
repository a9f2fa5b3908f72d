//! Architecture decision records that govern inference parameters, as pure functions: text in,
//! typed values out.
//!
//! The format, the comparators, units, metric names and exit codes are documented in
//! `docs/adr/README.md`. The pieces (the command that puts them together is `xtask::adr`):
//!
//! - [`parse`]: markdown -> [`Adr`] (never fails; problems are in `Adr::problems`);
//! - [`model`]: the typed record;
//! - [`records`]: the records directory, reading and writing records, a record's decision lines;
//! - [`lint`]: the lint rules; [`edit`]: status, date and link edits; [`new`]: a record from
//!   runs, drafted into [`draft`]'s view; [`budgets`]: the regression budgets it proposes;
//!   [`capacity`]: what a record says of configurations measured by capacity searches;
//! - [`live`]: the live records' thresholds (gate.toml, whose format is [`crate::thresholds`]'s);
//! - [`alerts`]: the live records' rollback conditions as Prometheus alerting rules;
//! - [`list`]: the records as a table or JSON, and governed values no live record names;
//! - [`check`]: the pure parts of `adr check` (the rule, the semantic diff).
//!
//! Arrows run one way: submodules import each other and lower modules (`crate::thresholds`,
//! `crate::text`, `crate::exit`, `crate::settings`), never this module.

pub mod alerts;
pub mod budgets;
pub mod capacity;
pub mod check;
pub mod draft;
pub mod edit;
pub mod lint;
pub mod list;
pub mod live;
pub mod model;
pub mod new;
pub mod parse;
pub mod records;

pub use model::{
    Adr, AdrStatus, Decided, DecisionLine, Link, LinkKind, Located, Problem, Section, SectionKind,
    ThresholdRow,
};
pub use parse::parse_adr;
pub use records::{
    ADR_DIR, DecisionSet, decision_lines, is_record_file, load_records, next_number, read_records,
};
