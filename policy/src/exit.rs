//! Exit codes and error printing.
//!
//! [`EXIT_CODES`] is the one list of the codes `cargo xtask` exits with; `docs/exit-codes.md`
//! shows the same rows, and a test compares the two both ways. A new code is one more [`Exit`]
//! constant, its row in [`EXIT_CODES`] and in the docs table, and (when a command can end with
//! it) a [`Status`] variant mapped to it.

use std::process::ExitCode;

/// One exit code: the number, a stable name, and what it means.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Exit {
    pub code: u8,
    pub name: &'static str,
    pub meaning: &'static str,
}

impl Exit {
    pub fn exit_code(self) -> ExitCode {
        ExitCode::from(self.code)
    }
}

pub const SUCCESS: Exit =
    Exit { code: 0, name: "success", meaning: "the command did what it was asked" };

pub const POLICY_VIOLATED: Exit = Exit {
    code: 1,
    name: "policy-violated",
    meaning: "a policy was violated: a gate failed, a lint or check found violations, an \
              acceptance layer failed, a test failed, a self-test found the bench's own timing \
              error over its bounds, a run had no successful request, or a capacity search \
              found no load holding the SLO",
};

pub const USAGE_ERROR: Exit = Exit {
    code: 2,
    name: "usage-error",
    meaning: "usage or tool error: bad arguments, unreadable or invalid files, unreachable target",
};

pub const INCONCLUSIVE: Exit = Exit {
    code: 3,
    name: "inconclusive",
    meaning: "a gate could not decide: a blocking threshold is inconclusive (its confidence \
              interval straddles the limit, it has no interval, or the host was busy) and none \
              failed; never a pass; or a self-test whose every attempt the machine disturbed; or \
              a capacity search that could decide no load",
};

pub const NO_DATA: Exit = Exit {
    code: 4,
    name: "no-data",
    meaning: "a watch could not evaluate a rollback condition for its window (the metrics page \
              failed or no request finished) and none held, or a history check found nothing to \
              check (no history, or no measured commit among the last it was asked to check); \
              never an all-clear",
};

pub const NO_RECORD: Exit = Exit {
    code: 5,
    name: "no-record",
    meaning: "a gate found no live record for the run's environment: the thresholds of its \
              profile are keyed to other GPUs, engines, models or dtypes and none to the one it \
              measured; not decided, never a pass (write its record with `adr new`)",
};

pub const OVERSATURATED: Exit = Exit {
    code: 6,
    name: "oversaturated",
    meaning: "a bench run was stopped early: the server fell behind its open-loop schedule by a \
              growing margin (over-saturation); what was measured until then is written",
};

pub const SERVED_MISMATCH: Exit = Exit {
    code: 7,
    name: "served-mismatch",
    meaning: "a gate found a run whose server answered another configuration than the engine \
              config file it names (summary `engine.mismatches`): the run measured something \
              else than the file says; never a pass (start the server as the file says, or \
              change the file, and measure again)",
};

pub const INTERRUPTED: Exit = Exit {
    code: 130,
    name: "interrupted",
    meaning: "stopped by Ctrl-C or SIGTERM; what was measured is written",
};

/// Every exit code, in increasing order.
pub const EXIT_CODES: &[Exit] = &[
    SUCCESS,
    POLICY_VIOLATED,
    USAGE_ERROR,
    INCONCLUSIVE,
    NO_DATA,
    NO_RECORD,
    OVERSATURATED,
    SERVED_MISMATCH,
    INTERRUPTED,
];

/// How a command that ran to completion ended. A command that could not run returns an error
/// instead, which exits with [`USAGE_ERROR`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Status {
    /// [`SUCCESS`].
    Success,
    /// [`POLICY_VIOLATED`].
    PolicyViolated,
    /// [`INCONCLUSIVE`].
    Inconclusive,
    /// [`NO_DATA`].
    NoData,
    /// [`NO_RECORD`].
    NoRecord,
    /// [`OVERSATURATED`].
    Oversaturated,
    /// [`SERVED_MISMATCH`].
    ServedMismatch,
    /// [`INTERRUPTED`].
    Interrupted,
}

impl Status {
    /// Every status (the exit-code tests walk it).
    pub const ALL: &[Status] = &[
        Status::Success,
        Status::PolicyViolated,
        Status::Inconclusive,
        Status::NoData,
        Status::NoRecord,
        Status::Oversaturated,
        Status::ServedMismatch,
        Status::Interrupted,
    ];

    pub fn exit(self) -> Exit {
        match self {
            Status::Success => SUCCESS,
            Status::PolicyViolated => POLICY_VIOLATED,
            Status::Inconclusive => INCONCLUSIVE,
            Status::NoData => NO_DATA,
            Status::NoRecord => NO_RECORD,
            Status::Oversaturated => OVERSATURATED,
            Status::ServedMismatch => SERVED_MISMATCH,
            Status::Interrupted => INTERRUPTED,
        }
    }

    pub fn code(self) -> u8 {
        self.exit().code
    }

    pub fn exit_code(self) -> ExitCode {
        self.exit().exit_code()
    }

    pub fn from_ok(ok: bool) -> Status {
        if ok { Status::Success } else { Status::PolicyViolated }
    }

    /// The status of several outcomes together: an interruption outranks an over-saturated
    /// run, which outranks a run that measured another configuration than its file, which
    /// outranks a violation, which outranks a run no record covers, which outranks an
    /// undecided gate, which outranks success.
    pub fn worst(self, other: Status) -> Status {
        let rank = |s: Status| match s {
            Status::Success => 0,
            Status::Inconclusive | Status::NoData => 1,
            Status::NoRecord => 2,
            Status::PolicyViolated => 3,
            Status::ServedMismatch => 4,
            Status::Oversaturated => 5,
            Status::Interrupted => 6,
        };
        if rank(other) > rank(self) { other } else { self }
    }
}

/// Print an error and its causes: `error: ...` then one `  caused by: ...` line per source.
pub fn print_error(e: &anyhow::Error) {
    eprintln!("{}", crate::text::as_invoked(&render_error(e)));
}

pub fn render_error(e: &anyhow::Error) -> String {
    let mut out = format!("error: {e}");
    for cause in e.chain().skip(1) {
        out.push_str(&format!("\n  caused by: {cause}"));
    }
    out
}

/// A reader that closed standard output early (`cargo xtask trend list | head -1`) ends the
/// process as SIGPIPE ends any Unix tool (the shell sees 141), instead of the panic with which
/// `println!` meets a closed pipe. Every other panic keeps the default report. Called first
/// thing by the binary; what a command wrote to files before is already written.
pub fn quiet_broken_pipe() {
    let default = std::panic::take_hook();
    std::panic::set_hook(Box::new(move |info| {
        let message = info
            .payload()
            .downcast_ref::<String>()
            .map(String::as_str)
            .or_else(|| info.payload().downcast_ref::<&str>().copied())
            .unwrap_or("");
        if message.starts_with("failed printing to stdout") && message.contains("Broken pipe") {
            #[cfg(unix)]
            // SAFETY: resetting a signal's disposition and raising it on this process has no
            // memory effects; the default action of SIGPIPE ends the process.
            unsafe {
                libc::signal(libc::SIGPIPE, libc::SIG_DFL);
                libc::raise(libc::SIGPIPE);
            }
        }
        default(info)
    }));
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn codes_and_names_are_unique_and_ordered() {
        for pair in EXIT_CODES.windows(2) {
            assert!(pair[0].code < pair[1].code, "EXIT_CODES out of order at {}", pair[1].code);
        }
        for (i, a) in EXIT_CODES.iter().enumerate() {
            assert!(
                EXIT_CODES[i + 1..].iter().all(|b| b.name != a.name),
                "name {} used twice",
                a.name
            );
        }
    }

    #[test]
    fn every_status_and_the_usage_error_have_a_row() {
        for s in Status::ALL {
            assert!(EXIT_CODES.contains(&s.exit()), "{s:?} exits with a code not in EXIT_CODES");
        }
        assert!(EXIT_CODES.contains(&USAGE_ERROR));
        assert_eq!(Status::from_ok(true).code(), 0);
        assert_eq!(Status::from_ok(false).code(), 1);
    }
}
