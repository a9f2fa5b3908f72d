//! Exit statuses and error printing.

use std::process::ExitCode;

/// How a command that ran to completion ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Status {
    /// Exit 0.
    Success,
    /// Exit 1: a gate failed, a lint or check found violations, a run had no successful request.
    PolicyViolated,
    /// Exit 130: stopped by Ctrl-C after writing what was measured.
    Interrupted,
}

impl Status {
    pub fn code(self) -> u8 {
        match self {
            Status::Success => 0,
            Status::PolicyViolated => 1,
            Status::Interrupted => 130,
        }
    }

    pub fn exit_code(self) -> ExitCode {
        ExitCode::from(self.code())
    }

    pub fn from_ok(ok: bool) -> Status {
        if ok { Status::Success } else { Status::PolicyViolated }
    }
}

/// Print an error and its causes: `error: ...` then one `  caused by: ...` line per source.
pub fn print_error(e: &anyhow::Error) {
    eprintln!("{}", render_error(e));
}

pub fn render_error(e: &anyhow::Error) -> String {
    let mut out = format!("error: {e}");
    for cause in e.chain().skip(1) {
        out.push_str(&format!("\n  caused by: {cause}"));
    }
    out
}
