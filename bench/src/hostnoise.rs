//! How busy the client host was during a run's load (`summary.environment.noise`): the load
//! average, the share of CPU time stolen by the hypervisor, and the share used by processes
//! other than the bench, from `/proc/loadavg`, `/proc/stat` and `/proc/self/stat` read when the
//! load starts and when it ends.
//!
//! The parsers and the arithmetic are pure functions of the files' text ([`parse_loadavg`],
//! [`parse_cpu_times`], [`parse_self_ticks`], [`HostNoise::between`]); [`ProcSample::read`] is
//! the only part that touches `/proc`, and it gives `None` where there is no `/proc` (not
//! Linux): the fields are then blank and the host is never called busy.
//!
//! The host is **busy** ([`HostNoise::busy`]) when any of [`BUSY_OTHER_SHARE`],
//! [`BUSY_STEAL_SHARE`] or [`BUSY_LOAD_PER_CPU`] is exceeded; `docs/run-directory.md` states
//! them.

use serde::{Deserialize, Serialize};

/// Busy when other processes used more than this share of the host's CPU time.
pub const BUSY_OTHER_SHARE: f64 = 0.25;
/// Busy when the hypervisor stole more than this share of the host's CPU time.
pub const BUSY_STEAL_SHARE: f64 = 0.05;
/// Busy when the 1-minute load average, less the CPUs the bench itself kept busy, exceeds
/// this many runnable tasks per CPU.
pub const BUSY_LOAD_PER_CPU: f64 = 1.0;

/// Cumulative CPU time of the whole host, in clock ticks (the `cpu` line of `/proc/stat`).
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct CpuTimes {
    /// Every state, guest time excluded (the kernel counts it in `user` and `nice` already).
    pub total: u64,
    /// Idle and waiting for I/O.
    pub idle: u64,
    /// Stolen by the hypervisor.
    pub steal: u64,
    /// The `cpuN` lines: the host's CPUs (all of them, whatever this process may use).
    pub cpus: usize,
}

/// Why a `/proc` file's text cannot be read as expected.
#[derive(Debug, PartialEq, thiserror::Error)]
#[error("{file}: {message}")]
pub struct ProcParseError {
    pub file: &'static str,
    pub message: String,
}

fn bad(file: &'static str, message: impl Into<String>) -> ProcParseError {
    ProcParseError { file, message: message.into() }
}

/// The 1-minute load average: the first field of `/proc/loadavg` (`0.52 0.58 0.59 1/467 12`).
pub fn parse_loadavg(text: &str) -> Result<f64, ProcParseError> {
    let first = text.split_whitespace().next().ok_or_else(|| bad("/proc/loadavg", "empty"))?;
    first
        .parse::<f64>()
        .ok()
        .filter(|v| v.is_finite() && *v >= 0.0)
        .ok_or_else(|| bad("/proc/loadavg", format!("`{first}` is not a load average")))
}

/// The host's CPU times: the aggregate `cpu ` line of `/proc/stat` (user nice system idle
/// iowait irq softirq steal guest guest_nice; kernels before 2.6.11 stop after softirq).
pub fn parse_cpu_times(text: &str) -> Result<CpuTimes, ProcParseError> {
    const FILE: &str = "/proc/stat";
    let line = text
        .lines()
        .find(|l| l.split_whitespace().next() == Some("cpu"))
        .ok_or_else(|| bad(FILE, "no aggregate `cpu` line"))?;
    let fields: Vec<u64> = line
        .split_whitespace()
        .skip(1)
        .map(|f| f.parse::<u64>().map_err(|_| bad(FILE, format!("`{f}` is not a tick count"))))
        .collect::<Result<_, _>>()?;
    if fields.len() < 4 {
        return Err(bad(
            FILE,
            format!("the cpu line has {} fields, at least 4 expected", fields.len()),
        ));
    }
    let at = |i: usize| fields.get(i).copied().unwrap_or(0);
    // user nice system idle iowait irq softirq steal: guest and guest_nice (8, 9) are part of
    // user and nice already.
    let total = (0..8).map(at).sum();
    let cpus = text
        .lines()
        .filter(|l| {
            l.strip_prefix("cpu").is_some_and(|r| r.starts_with(|c: char| c.is_ascii_digit()))
        })
        .count();
    Ok(CpuTimes { total, idle: at(3) + at(4), steal: at(7), cpus })
}

/// CPU ticks this process and its waited-for children used: utime + stime + cutime + cstime,
/// fields 14-17 of `/proc/self/stat`. The command name (field 2) may hold spaces and
/// parentheses, so the fields are counted after its last `)`.
pub fn parse_self_ticks(text: &str) -> Result<u64, ProcParseError> {
    const FILE: &str = "/proc/self/stat";
    let (_, rest) = text.rsplit_once(')').ok_or_else(|| bad(FILE, "no `(comm)` field"))?;
    // `rest` starts at field 3 (the state).
    let fields: Vec<&str> = rest.split_whitespace().collect();
    let mut ticks = 0u64;
    for field in 14..=17 {
        let f =
            fields.get(field - 3).ok_or_else(|| bad(FILE, format!("field {field} is missing")))?;
        let v: i64 =
            f.parse().map_err(|_| bad(FILE, format!("field {field} `{f}` is not a tick count")))?;
        ticks += v.max(0) as u64;
    }
    Ok(ticks)
}

/// One reading of the three files.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct ProcSample {
    pub load_1m: f64,
    pub cpu: CpuTimes,
    pub own_ticks: u64,
}

impl ProcSample {
    /// Parse the three files' text.
    pub fn parse(loadavg: &str, stat: &str, self_stat: &str) -> Result<ProcSample, ProcParseError> {
        Ok(ProcSample {
            load_1m: parse_loadavg(loadavg)?,
            cpu: parse_cpu_times(stat)?,
            own_ticks: parse_self_ticks(self_stat)?,
        })
    }

    /// Read `/proc` now; `None` where it cannot be read or parsed (not Linux).
    pub fn read() -> Option<ProcSample> {
        let read = |p: &str| std::fs::read_to_string(p).ok();
        ProcSample::parse(&read("/proc/loadavg")?, &read("/proc/stat")?, &read("/proc/self/stat")?)
            .ok()
    }
}

/// `summary.environment.noise`: how busy the client host was while the load ran. Blank
/// fields where `/proc` could not be read.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct HostNoise {
    /// The 1-minute load average at the end of the load (the larger of start and end).
    #[serde(default)]
    pub load_avg_1m: Option<f64>,
    /// The host's CPUs (`/proc/stat` counts all of them).
    #[serde(default)]
    pub cpus: usize,
    /// Share of the host's CPU time stolen by the hypervisor, 0..1.
    #[serde(default)]
    pub steal_share: Option<f64>,
    /// Share of the host's CPU time used by other processes than the bench, 0..1.
    #[serde(default)]
    pub other_share: Option<f64>,
    /// Share used by the bench itself (with its embedded simulator), 0..1.
    #[serde(default)]
    pub own_share: Option<f64>,
    /// Any of the documented thresholds was exceeded.
    #[serde(default)]
    pub busy: bool,
    /// Which thresholds were exceeded, in words.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub reasons: Vec<String>,
}

impl HostNoise {
    /// From readings at the start and end of the load; blank when either is missing or no
    /// tick passed. `cpus` is the host's CPU count where `/proc/stat` does not list them.
    pub fn between(start: Option<ProcSample>, end: Option<ProcSample>, cpus: usize) -> HostNoise {
        let (Some(a), Some(b)) = (start, end) else {
            return HostNoise { cpus, ..HostNoise::default() };
        };
        let cpus = if b.cpu.cpus > 0 { b.cpu.cpus } else { cpus };
        let total = b.cpu.total.saturating_sub(a.cpu.total);
        let load = a.load_1m.max(b.load_1m);
        if total == 0 {
            return HostNoise { load_avg_1m: Some(load), cpus, ..HostNoise::default() };
        }
        let share = |ticks: u64| (ticks as f64 / total as f64).clamp(0.0, 1.0);
        let used = total.saturating_sub(b.cpu.idle.saturating_sub(a.cpu.idle));
        let steal = b.cpu.steal.saturating_sub(a.cpu.steal);
        let own = b.own_ticks.saturating_sub(a.own_ticks);
        let other = used.saturating_sub(steal).saturating_sub(own);
        let mut n = HostNoise {
            load_avg_1m: Some(load),
            cpus,
            steal_share: Some(share(steal)),
            other_share: Some(share(other)),
            own_share: Some(share(own)),
            busy: false,
            reasons: Vec::new(),
        };
        n.judge();
        n
    }

    /// Set `busy` and `reasons` from the documented thresholds.
    fn judge(&mut self) {
        let mut reasons = Vec::new();
        if let Some(o) = self.other_share.filter(|o| *o > BUSY_OTHER_SHARE) {
            reasons.push(format!(
                "other processes used {:.0}% of the CPU time (busy above {:.0}%)",
                o * 100.0,
                BUSY_OTHER_SHARE * 100.0
            ));
        }
        if let Some(s) = self.steal_share.filter(|s| *s > BUSY_STEAL_SHARE) {
            reasons.push(format!(
                "the hypervisor stole {:.0}% of the CPU time (busy above {:.0}%)",
                s * 100.0,
                BUSY_STEAL_SHARE * 100.0
            ));
        }
        if let (Some(load), cpus) = (self.load_avg_1m, self.cpus.max(1)) {
            let own_cpus = self.own_share.unwrap_or(0.0) * cpus as f64;
            let per_cpu = (load - own_cpus).max(0.0) / cpus as f64;
            if per_cpu > BUSY_LOAD_PER_CPU {
                reasons.push(format!(
                    "load average {load:.2} on {cpus} CPUs, {per_cpu:.2} per CPU besides the \
                     bench (busy above {BUSY_LOAD_PER_CPU})"
                ));
            }
        }
        self.busy = !reasons.is_empty();
        self.reasons = reasons;
    }

    /// The summary's note when the host was busy.
    pub fn note(&self) -> Option<String> {
        self.busy.then(|| {
            format!(
                "the client host was busy during the load: {}; latencies may include its noise",
                self.reasons.join("; ")
            )
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const STAT_A: &str = "cpu  1000 0 500 8000 100 0 0 0 0 0\n\
        cpu0 500 0 250 4000 50 0 0 0 0 0\nintr 1 2 3\nctxt 99\n";
    const SELF_A: &str = "4242 (infer gate) (x) S 1 4242 4242 0 -1 4194304 100 0 0 0 \
        60 40 0 0 20 0 9 0 100 1000 200 18446744073709551615";

    fn self_stat(utime: u64, stime: u64) -> String {
        format!(
            "4242 (infer gate) (x) S 1 4242 4242 0 -1 4194304 100 0 0 0 {utime} {stime} 0 0 20 0 \
             9 0 100 1000 200 18446744073709551615"
        )
    }

    #[test]
    fn the_proc_files_parse_and_their_errors_name_the_file() {
        assert_eq!(parse_loadavg("0.52 0.58 0.59 1/467 12\n"), Ok(0.52));
        assert_eq!(
            parse_cpu_times(STAT_A),
            Ok(CpuTimes { total: 9600, idle: 8100, steal: 0, cpus: 1 })
        );
        // A command name with spaces and parentheses is skipped whole.
        assert_eq!(parse_self_ticks(SELF_A), Ok(100));
        // Guest time is in user already; steal is field 8.
        let guest = "cpu 100 0 0 100 0 0 0 50 70 0\n";
        assert_eq!(
            parse_cpu_times(guest).unwrap(),
            CpuTimes { total: 250, idle: 100, steal: 50, cpus: 0 }
        );
        let e = parse_loadavg("busy").unwrap_err();
        assert_eq!(e.to_string(), "/proc/loadavg: `busy` is not a load average");
        assert!(
            parse_cpu_times("cpu0 1 2 3 4\n").unwrap_err().to_string().contains("no aggregate")
        );
        assert!(parse_cpu_times("cpu 1 2\n").unwrap_err().to_string().contains("2 fields"));
        let e = parse_self_ticks("12 (x) S 1 2").unwrap_err();
        assert_eq!(e.to_string(), "/proc/self/stat: field 14 is missing");
    }

    fn sample(load: &str, stat: &str, own: &str) -> Option<ProcSample> {
        Some(ProcSample::parse(load, stat, own).unwrap())
    }

    #[test]
    fn a_quiet_host_is_not_busy_and_the_bench_s_own_time_is_not_other() {
        let a = sample("0.10 0 0 1/1 1", STAT_A, &self_stat(60, 40));
        // 1000 ticks pass on 2 CPUs: 300 used, all of them by the bench.
        let b = sample(
            "1.20 0 0 1/1 1",
            "cpu  1250 0 550 8700 100 0 0 0 0 0\ncpu0 1 0 0 0\ncpu1 1 0 0 0\n",
            &self_stat(310, 90),
        );
        let n = HostNoise::between(a, b, 64);
        assert_eq!((n.own_share, n.other_share, n.steal_share), (Some(0.3), Some(0.0), Some(0.0)));
        // Load 1.2 less the 0.6 CPUs the bench used: 0.3 per CPU.
        assert!(!n.busy && n.note().is_none(), "{n:?}");
    }

    #[test]
    fn other_processes_steal_and_load_each_make_the_host_busy() {
        let a = sample("0.10 0 0 1/1 1", STAT_A, &self_stat(60, 40));
        // 1000 ticks: 600 used by others, 100 by the bench, 100 stolen, 200 idle.
        let b = sample(
            "5.00 0 0 1/1 1",
            "cpu  1600 0 600 8200 100 0 0 100 0 0\ncpu0 1 0 0 0\ncpu1 1 0 0 0\n",
            &self_stat(160, 40),
        );
        let n = HostNoise::between(a, b, 64);
        assert_eq!(n.other_share, Some(0.6));
        assert_eq!(n.steal_share, Some(0.1));
        assert!(n.busy);
        assert_eq!(n.reasons.len(), 3, "{:?}", n.reasons);
        let note = n.note().unwrap();
        assert!(note.contains("other processes used 60%"), "{note}");
        assert!(
            note.contains("stole 10%") && note.contains("load average 5.00 on 2 CPUs"),
            "{note}"
        );
    }

    #[test]
    fn without_proc_the_fields_are_blank_and_the_host_is_not_busy() {
        let n = HostNoise::between(None, sample("1 1 1 1/1 1", STAT_A, SELF_A), 4);
        assert_eq!(n, HostNoise { cpus: 4, ..HostNoise::default() });
        assert!(!n.busy);
        let json = serde_json::to_value(&n).unwrap();
        assert_eq!(json["load_avg_1m"], serde_json::Value::Null);
        assert_eq!(json["other_share"], serde_json::Value::Null);
    }
}
