//! The open-file limit a run needs (`RLIMIT_NOFILE`): one descriptor per concurrent connection,
//! two when the simulator serves it in the same process, plus a margin for the run directory,
//! the listener, the scraper and the standard streams.
//!
//! [`ensure_open_files`] raises the soft limit to the hard limit when the soft one is short, and
//! refuses the run before anything is sent when even the hard limit is short, with the
//! arithmetic and the fix ([`FdLimitError`]). [`plan`] is the arithmetic, a pure function.

/// Descriptors a run needs besides its connections: the run directory's files, the simulator's
/// listener, the scraper, the standard streams, the async runtime and some room.
pub(crate) const OVERHEAD: u64 = 64;

/// The open files a run at `concurrency` needs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct FdNeed {
    pub concurrency: u64,
    /// Descriptors per connection: 1, or 2 when the server end is in this process too.
    pub per_connection: u64,
    pub overhead: u64,
}

impl FdNeed {
    /// The need of a run at `concurrency`; `in_process_server` when the embedded simulator
    /// serves it (both ends of every connection are this process's descriptors).
    pub fn new(concurrency: u32, in_process_server: bool) -> FdNeed {
        FdNeed {
            concurrency: concurrency.into(),
            per_connection: if in_process_server { 2 } else { 1 },
            overhead: OVERHEAD,
        }
    }

    pub fn total(&self) -> u64 {
        self.concurrency.saturating_mul(self.per_connection).saturating_add(self.overhead)
    }

    /// The highest concurrency that fits `limit` descriptors.
    pub fn max_concurrency(&self, limit: u64) -> u64 {
        limit.saturating_sub(self.overhead) / self.per_connection.max(1)
    }
}

/// The process's open-file limits; `None` is unlimited.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Limits {
    pub soft: Option<u64>,
    pub hard: Option<u64>,
}

/// What to do about the limits for a need.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Plan {
    /// The soft limit is enough.
    Enough,
    /// Raise the soft limit to this (the hard limit, or the need when the hard limit is
    /// unlimited); it is then enough.
    Raise(u64),
    /// Even the hard limit is short: raise the soft limit to it all the same (`raise`), but
    /// refuse the run.
    Short { raise: Option<u64>, error: FdLimitError },
}

/// The soft limit is short of what a run needs, and the hard limit does not allow enough.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error(
    "concurrency {concurrency} needs {needed} open files ({concurrency} connections x \
     {per_connection} + {overhead} for the run directory, the listener and the runtime), but this \
     process may open at most {limit}; raise the limit with `ulimit -n {needed}` (as root, or via \
     /etc/security/limits.conf, for a hard limit that low), or lower the concurrency to at most \
     {max_concurrency}"
)]
pub struct FdLimitError {
    pub concurrency: u64,
    pub per_connection: u64,
    pub overhead: u64,
    pub needed: u64,
    pub limit: u64,
    pub max_concurrency: u64,
}

/// The arithmetic: whether `limits` hold `need`, and what to raise.
pub fn plan(need: FdNeed, limits: Limits) -> Plan {
    let needed = need.total();
    if limits.soft.is_none_or(|s| s >= needed) {
        return Plan::Enough;
    }
    match limits.hard {
        None => Plan::Raise(needed),
        Some(hard) if hard >= needed => Plan::Raise(hard),
        Some(hard) => Plan::Short {
            raise: (limits.soft < Some(hard)).then_some(hard),
            error: FdLimitError {
                concurrency: need.concurrency,
                per_connection: need.per_connection,
                overhead: need.overhead,
                needed,
                limit: hard,
                max_concurrency: need.max_concurrency(hard),
            },
        },
    }
}

/// The open-file limits of this process (unlimited where the platform has none to read).
pub fn current() -> Limits {
    #[cfg(unix)]
    {
        let l = rustix::process::getrlimit(rustix::process::Resource::Nofile);
        Limits { soft: l.current, hard: l.maximum }
    }
    #[cfg(not(unix))]
    {
        Limits { soft: None, hard: None }
    }
}

/// Set the soft open-file limit of this process (the hard limit is left as it is).
pub(crate) fn set_soft(soft: u64) -> std::io::Result<()> {
    #[cfg(unix)]
    {
        use rustix::process::{Resource, Rlimit, getrlimit, setrlimit};
        let hard = getrlimit(Resource::Nofile).maximum;
        setrlimit(Resource::Nofile, Rlimit { current: Some(soft), maximum: hard })?;
    }
    #[cfg(not(unix))]
    let _ = soft;
    Ok(())
}

/// Make sure this process may open the files a run at `concurrency` needs: raise the soft
/// limit to the hard limit when it is short, and refuse with the arithmetic and the fix when
/// the hard limit is short too. Returns the limits in effect afterwards.
pub fn ensure_open_files(
    concurrency: u32,
    in_process_server: bool,
) -> Result<Limits, FdLimitError> {
    let limits = current();
    match plan(FdNeed::new(concurrency, in_process_server), limits) {
        Plan::Enough => Ok(limits),
        Plan::Raise(to) => {
            // A failed raise leaves the soft limit short: say so with the same arithmetic.
            if set_soft(to).is_err() {
                let soft = limits.soft.unwrap_or(0);
                let need = FdNeed::new(concurrency, in_process_server);
                return Err(FdLimitError {
                    concurrency: need.concurrency,
                    per_connection: need.per_connection,
                    overhead: need.overhead,
                    needed: need.total(),
                    limit: soft,
                    max_concurrency: need.max_concurrency(soft),
                });
            }
            Ok(current())
        }
        Plan::Short { raise, error } => {
            if let Some(to) = raise {
                let _ = set_soft(to);
            }
            Err(error)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_need_is_connections_times_ends_plus_overhead() {
        assert_eq!(FdNeed::new(300, false).total(), 300 + OVERHEAD);
        assert_eq!(FdNeed::new(300, true).total(), 600 + OVERHEAD);
        assert_eq!(FdNeed::new(u32::MAX, true).total(), 2 * u64::from(u32::MAX) + OVERHEAD);
        assert_eq!(FdNeed::new(10, true).max_concurrency(256), (256 - OVERHEAD) / 2);
        assert_eq!(FdNeed::new(10, false).max_concurrency(10), 0);
    }

    #[test]
    fn the_plan_raises_to_the_hard_limit_or_refuses_with_the_arithmetic() {
        let need = FdNeed::new(300, false);
        let lim = |soft, hard| Limits { soft, hard };
        assert_eq!(plan(need, lim(Some(1024), Some(4096))), Plan::Enough);
        assert_eq!(plan(need, lim(None, None)), Plan::Enough);
        assert_eq!(plan(need, lim(Some(256), Some(524288))), Plan::Raise(524288));
        assert_eq!(plan(need, lim(Some(256), None)), Plan::Raise(364));
        let Plan::Short { raise, error } = plan(need, lim(Some(256), Some(300))) else {
            panic!("short")
        };
        assert_eq!(raise, Some(300));
        assert_eq!((error.needed, error.limit, error.max_concurrency), (364, 300, 236));
        let msg = error.to_string();
        assert!(msg.starts_with("concurrency 300 needs 364 open files (300 connections x 1 + 64"));
        assert!(msg.contains("may open at most 300") && msg.contains("`ulimit -n 364`"), "{msg}");
        assert!(msg.contains("lower the concurrency to at most 236"), "{msg}");
        let Plan::Short { raise, .. } = plan(need, lim(Some(256), Some(256))) else {
            panic!("short")
        };
        assert_eq!(raise, None, "nothing to raise when soft = hard");
    }

    /// The real process limit: raised when short, refused when the hard limit is short; the
    /// limit is restored afterwards. Other tests of this binary open few files.
    #[cfg(unix)]
    #[test]
    fn the_process_limit_is_raised_to_the_hard_limit_and_restored() {
        let before = current();
        let (Some(soft), Some(hard)) = (before.soft, before.hard) else {
            return; // unlimited: nothing to raise or refuse
        };
        if hard < 2 * OVERHEAD {
            return;
        }
        // Lower the soft limit by one (other tests of this process keep their room), then ask
        // for a concurrency that needs exactly the hard limit.
        set_soft(hard - 1).unwrap();
        let Ok(fits) = u32::try_from(hard - OVERHEAD) else {
            set_soft(soft).unwrap();
            return;
        };
        let after = ensure_open_files(fits, false);
        let raised = current();
        // Too many for the hard limit: refused, naming it.
        let refused = (hard < u64::from(u32::MAX)).then(|| {
            ensure_open_files(u32::try_from(hard).unwrap_or(u32::MAX), false).unwrap_err()
        });
        set_soft(soft).unwrap();
        assert_eq!(current(), before, "restored");
        let after = after.unwrap();
        assert_eq!(after.soft, Some(hard), "raised to the hard limit");
        assert_eq!(raised.soft, Some(hard));
        if let Some(e) = refused {
            assert_eq!(e.limit, hard);
            assert!(e.to_string().contains(&format!("may open at most {hard}")), "{e}");
        }
    }
}
