//! How busy the client host was during a run's load (`summary.environment.noise`): the load
//! average, the share of CPU time stolen by the hypervisor, and the share used by processes
//! other than the bench, from `/proc/loadavg`, `/proc/stat` and `/proc/self/stat` read when the
//! load starts and when it ends.
//!
//! The parsers and the arithmetic are pure functions of the files' text ([`parse_loadavg`],
//! [`parse_cpu_times`], [`parse_self_ticks`], [`HostNoise::between`]); [`ProcSample::read`] and
//! [`TargetWatch`] are the only parts that touch `/proc`, and it gives `None` where there is no `/proc` (not
//! Linux): the fields are then blank and the host is never called busy.
//!
//! A local target's own CPU is not noise: when the target is on this host
//! ([`loopback_port`]: `localhost`, `127.x`, `[::1]`) and the process listening on its port can
//! be found (`/proc/net/tcp` and `tcp6` give the listening socket's inode
//! ([`parse_listen_inodes`]), a `/proc/PID/fd` link `socket:[INODE]` its process), that
//! process's CPU time and its descendants' ([`parse_stat`], [`descendants`]) are taken out of
//! "other processes" and recorded ([`TargetCpu`]). The embedded simulator runs in the bench's
//! own process: its CPU is already the bench's own, and the record says so.
//!
//! The host is **busy** ([`HostNoise::busy`]) when any of [`BUSY_OTHER_SHARE`],
//! [`BUSY_STEAL_SHARE`] or [`BUSY_LOAD_PER_CPU`] is exceeded; `docs/run-directory.md` states
//! them.

use serde::{Deserialize, Serialize};

/// Busy when other processes used more than this share of the host's CPU time.
pub(crate) const BUSY_OTHER_SHARE: f64 = 0.25;
/// Busy when the hypervisor stole more than this share of the host's CPU time.
pub(crate) const BUSY_STEAL_SHARE: f64 = 0.05;
/// Busy when the 1-minute load average, less the CPUs the bench itself kept busy, exceeds
/// this many runnable tasks per CPU.
pub(crate) const BUSY_LOAD_PER_CPU: f64 = 1.0;

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
pub(crate) fn parse_cpu_times(text: &str) -> Result<CpuTimes, ProcParseError> {
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
pub(crate) fn parse_self_ticks(text: &str) -> Result<u64, ProcParseError> {
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

/// A process's parent and its CPU ticks with its waited-for children (utime + stime + cutime
/// + cstime), from `/proc/PID/stat`.
pub(crate) fn parse_stat(text: &str) -> Result<(u32, u64), ProcParseError> {
    const FILE: &str = "/proc/PID/stat";
    let ticks = parse_self_ticks(text).map_err(|e| bad(FILE, e.message))?;
    let (_, rest) = text.rsplit_once(')').ok_or_else(|| bad(FILE, "no `(comm)` field"))?;
    let ppid = rest.split_whitespace().nth(1).ok_or_else(|| bad(FILE, "field 4 is missing"))?;
    let ppid = ppid.parse().map_err(|_| bad(FILE, format!("field 4 `{ppid}` is not a pid")))?;
    Ok((ppid, ticks))
}

/// `root` and every process below it, from `(pid, parent)` pairs.
pub(crate) fn descendants(parents: &[(u32, u32)], root: u32) -> Vec<u32> {
    let mut out = vec![root];
    let mut i = 0;
    while i < out.len() {
        let p = out[i];
        out.extend(parents.iter().filter(|(pid, pp)| *pp == p && *pid != p).map(|(pid, _)| *pid));
        i += 1;
    }
    out
}

/// The port of a target on this host: `http(s)://HOST[:PORT]/...` where HOST is `localhost`,
/// `127.x.y.z` or `[::1]` (the port defaults to 80 and 443). `None` for any other host.
pub(crate) fn loopback_port(api_base: &str) -> Option<u16> {
    let (scheme, rest) = api_base.split_once("://")?;
    let default = match scheme.to_ascii_lowercase().as_str() {
        "http" => 80,
        "https" => 443,
        _ => return None,
    };
    let authority = rest.split(['/', '?', '#']).next()?;
    let hostport = authority.rsplit_once('@').map_or(authority, |(_, h)| h);
    let (host, port) = if let Some(v6) = hostport.strip_prefix('[') {
        let (host, after) = v6.split_once(']')?;
        (host, after.strip_prefix(':'))
    } else {
        match hostport.split_once(':') {
            Some((h, p)) => (h, Some(p)),
            None => (hostport, None),
        }
    };
    let host = host.to_ascii_lowercase();
    let local = host == "localhost"
        || host == "::1"
        || host.parse::<std::net::Ipv4Addr>().is_ok_and(|a| a.is_loopback());
    if !local {
        return None;
    }
    match port {
        None | Some("") => Some(default),
        Some(p) => p.parse().ok(),
    }
}

/// The inodes of the sockets listening on `port` in `/proc/net/tcp` or `tcp6` text (state
/// `0A`, any local address).
pub(crate) fn parse_listen_inodes(text: &str, port: u16) -> Vec<u64> {
    text.lines()
        .skip(1)
        .filter_map(|line| {
            let f: Vec<&str> = line.split_whitespace().collect();
            let local_port = f.get(1)?.rsplit_once(':')?.1;
            let listening = *f.get(3)? == "0A";
            (listening && u16::from_str_radix(local_port, 16).ok()? == port)
                .then(|| f.get(9)?.parse().ok())
                .flatten()
        })
        .collect()
}

/// The inode of a `/proc/PID/fd` link's target `socket:[INODE]`.
pub(crate) fn socket_inode(link: &str) -> Option<u64> {
    link.strip_prefix("socket:[")?.strip_suffix(']')?.parse().ok()
}

/// Where the target's CPU time comes from, found once before the load.
#[derive(Clone, Debug, PartialEq)]
pub enum TargetWatch {
    /// Not on this host (or not known to be): nothing to take out.
    Remote,
    /// The embedded simulator, in the bench's own process.
    Embedded,
    /// On this host, port `port`; `pid` the process listening on it when it could be found.
    Local { port: u16, pid: Option<u32> },
}

impl TargetWatch {
    /// The target at `api_base` (`embedded`: the bench's own simulator). Looks in `/proc` for
    /// the process listening on a local target's port.
    pub fn find(api_base: &str, embedded: bool) -> TargetWatch {
        if embedded {
            return TargetWatch::Embedded;
        }
        match loopback_port(api_base) {
            None => TargetWatch::Remote,
            Some(port) => TargetWatch::Local { port, pid: listener_pid(port) },
        }
    }

    /// The target's CPU ticks now, with its descendants' (`None`: not a process of its own,
    /// or gone).
    pub fn ticks(&self) -> Option<u64> {
        let TargetWatch::Local { pid: Some(pid), .. } = self else { return None };
        let mut parents = Vec::new();
        let mut ticks = std::collections::HashMap::new();
        for entry in std::fs::read_dir("/proc").ok()?.flatten() {
            let Some(p) = entry.file_name().to_str().and_then(|n| n.parse::<u32>().ok()) else {
                continue;
            };
            let Some(Ok((ppid, t))) =
                std::fs::read_to_string(entry.path().join("stat")).ok().map(|s| parse_stat(&s))
            else {
                continue;
            };
            parents.push((p, ppid));
            ticks.insert(p, t);
        }
        ticks
            .contains_key(pid)
            .then(|| descendants(&parents, *pid).iter().filter_map(|p| ticks.get(p)).sum::<u64>())
    }
}

/// The process (not this one) with a socket listening on `port`: `None` where `/proc` cannot
/// tell (another user's process, not Linux).
fn listener_pid(port: u16) -> Option<u32> {
    let mut inodes = Vec::new();
    for file in ["/proc/net/tcp", "/proc/net/tcp6"] {
        if let Ok(text) = std::fs::read_to_string(file) {
            inodes.extend(parse_listen_inodes(&text, port));
        }
    }
    if inodes.is_empty() {
        return None;
    }
    let me = std::process::id();
    for entry in std::fs::read_dir("/proc").ok()?.flatten() {
        let Some(pid) = entry.file_name().to_str().and_then(|n| n.parse::<u32>().ok()) else {
            continue;
        };
        if pid == me {
            continue;
        }
        let Ok(fds) = std::fs::read_dir(entry.path().join("fd")) else { continue };
        for fd in fds.flatten() {
            let link = std::fs::read_link(fd.path()).ok();
            let inode = link.as_ref().and_then(|l| l.to_str()).and_then(socket_inode);
            if inode.is_some_and(|i| inodes.contains(&i)) {
                return Some(pid);
            }
        }
    }
    None
}

/// One reading of the three files (and the target's ticks, where it is a local process).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct ProcSample {
    pub load_1m: f64,
    pub cpu: CpuTimes,
    pub own_ticks: u64,
    /// The local target's CPU ticks with its descendants' ([`TargetWatch::ticks`]).
    pub target_ticks: Option<u64>,
}

impl ProcSample {
    /// Parse the three files' text.
    pub fn parse(loadavg: &str, stat: &str, self_stat: &str) -> Result<ProcSample, ProcParseError> {
        Ok(ProcSample {
            load_1m: parse_loadavg(loadavg)?,
            cpu: parse_cpu_times(stat)?,
            own_ticks: parse_self_ticks(self_stat)?,
            target_ticks: None,
        })
    }

    /// Read `/proc` now; `None` where it cannot be read or parsed (not Linux).
    pub fn read() -> Option<ProcSample> {
        let read = |p: &str| std::fs::read_to_string(p).ok();
        ProcSample::parse(&read("/proc/loadavg")?, &read("/proc/stat")?, &read("/proc/self/stat")?)
            .ok()
    }

    /// [`ProcSample::read`] with the target's ticks.
    pub fn read_with(target: &TargetWatch) -> Option<ProcSample> {
        let mut s = ProcSample::read()?;
        s.target_ticks = target.ticks();
        Some(s)
    }
}

/// `environment.noise.target`: the target's own CPU, left out of "other processes".
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct TargetCpu {
    /// The process listening on the target's port (blank: the embedded simulator, or not
    /// found).
    #[serde(default)]
    pub pid: Option<u32>,
    /// Share of the host's CPU time it (and its descendants) used, 0..1; blank when not
    /// excluded separately.
    #[serde(default)]
    pub share: Option<f64>,
    /// What was done, in words.
    pub excluded: String,
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
    /// A target on this host: its own CPU time, not counted in `other_share`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub target: Option<TargetCpu>,
}

impl HostNoise {
    /// From readings at the start and end of the load; blank when either is missing or no
    /// tick passed. `cpus` is the host's CPU count where `/proc/stat` does not list them. The
    /// CPU time of a local `target` (read into the samples) is not "other processes".
    pub fn between(
        start: Option<ProcSample>,
        end: Option<ProcSample>,
        cpus: usize,
        target: &TargetWatch,
    ) -> HostNoise {
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
        let target_ticks = match (target, a.target_ticks, b.target_ticks) {
            (TargetWatch::Local { pid: Some(_), .. }, Some(x), Some(y)) => {
                Some(y.saturating_sub(x))
            }
            _ => None,
        };
        let other = used
            .saturating_sub(steal)
            .saturating_sub(own)
            .saturating_sub(target_ticks.unwrap_or(0));
        let mut n = HostNoise {
            load_avg_1m: Some(load),
            cpus,
            steal_share: Some(share(steal)),
            other_share: Some(share(other)),
            own_share: Some(share(own)),
            busy: false,
            reasons: Vec::new(),
            target: target_cpu(target, target_ticks.map(share)),
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
            let target = self.target.as_ref().and_then(|t| t.share).unwrap_or(0.0);
            let own_cpus = (self.own_share.unwrap_or(0.0) + target) * cpus as f64;
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

/// What the record says of the target's CPU (`None` for a remote target).
fn target_cpu(target: &TargetWatch, share: Option<f64>) -> Option<TargetCpu> {
    let pct = |s: f64| format!("{:.1}%", s * 100.0);
    Some(match (target, share) {
        (TargetWatch::Remote, _) => return None,
        (TargetWatch::Embedded, _) => TargetCpu {
            pid: None,
            share: None,
            excluded: "the embedded simulator runs in the bench's process: its CPU time is the \
                       bench's own (own_share), not other processes"
                .into(),
        },
        (TargetWatch::Local { port, pid: Some(pid) }, Some(s)) => TargetCpu {
            pid: Some(*pid),
            share: Some(s),
            excluded: format!(
                "the target's process (pid {pid}, listening on port {port}) and its children \
                 used {} of the CPU time, not counted in other processes",
                pct(s)
            ),
        },
        (TargetWatch::Local { port, pid }, _) => TargetCpu {
            pid: *pid,
            share: None,
            excluded: format!(
                "the target is on this host (port {port}) but its process's CPU time could not \
                 be read (another user's process?): it counts in other processes"
            ),
        },
    })
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
        let n = HostNoise::between(a, b, 64, &TargetWatch::Remote);
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
        let n = HostNoise::between(a, b, 64, &TargetWatch::Remote);
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
        let n = HostNoise::between(
            None,
            sample("1 1 1 1/1 1", STAT_A, SELF_A),
            4,
            &TargetWatch::Remote,
        );
        assert_eq!(n, HostNoise { cpus: 4, ..HostNoise::default() });
        assert!(!n.busy);
        let json = serde_json::to_value(&n).unwrap();
        assert_eq!(json["load_avg_1m"], serde_json::Value::Null);
        assert_eq!(json["other_share"], serde_json::Value::Null);
    }

    /// `/proc/net/tcp6` with a llama-server listening on port 8080 (0x1F90) on every address,
    /// a connection to it, and sshd on 22.
    const TCP6: &str = "  sl  local_address                         remote_address                        st tx_queue rx_queue tr tm->when retrnsmt   uid  timeout inode\n\
   0: 00000000000000000000000000000000:1F90 00000000000000000000000000000000:0000 0A 00000000:00000000 00:00000000 00000000  1000        0 48213 1 0000000000000000 100 0 0 10 0\n\
   1: 0000000000000000FFFF00000100007F:1F90 0000000000000000FFFF00000100007F:B7C2 01 00000000:00000000 00:00000000 00000000  1000        0 48999 1 0000000000000000 20 4 30 10 -1\n\
   2: 00000000000000000000000000000000:0016 00000000000000000000000000000000:0000 0A 00000000:00000000 00:00000000 00000000     0        0 1234 1 0000000000000000 100 0 0 10 0\n";

    #[test]
    fn the_target_s_listening_socket_and_processes_parse_from_proc_text() {
        assert_eq!(
            parse_listen_inodes(TCP6, 8080),
            vec![48213],
            "the listener, not the connection"
        );
        assert_eq!(parse_listen_inodes(TCP6, 22), vec![1234]);
        assert_eq!(parse_listen_inodes(TCP6, 9000), Vec::<u64>::new());
        let tcp = "  sl  local_address rem_address   st tx_queue rx_queue tr tm->when retrnsmt   uid  timeout inode\n\
            0: 0100007F:1F90 00000000:0000 0A 00000000:00000000 00:00000000 00000000  1000        0 777 1 0 100 0 0 10 0\n";
        assert_eq!(parse_listen_inodes(tcp, 8080), vec![777]);
        assert_eq!(socket_inode("socket:[48213]"), Some(48213));
        assert_eq!(socket_inode("pipe:[48213]"), None);
        assert_eq!(socket_inode("/dev/null"), None);
        // pid 4242, parent 1, 60 + 40 ticks (its children's cutime and cstime 0).
        assert_eq!(parse_stat(SELF_A), Ok((1, 100)));
        let e = parse_stat("12 (x) S").unwrap_err();
        assert_eq!(e.to_string(), "/proc/PID/stat: field 14 is missing");
        // vLLM's API server 10 with its engine core 11 (and 12 below it); 20 is unrelated.
        let parents = [(1, 0), (10, 1), (11, 10), (12, 11), (20, 1)];
        assert_eq!(descendants(&parents, 10), vec![10, 11, 12]);
        assert_eq!(descendants(&parents, 20), vec![20]);
    }

    #[test]
    fn a_target_is_local_by_its_host_and_has_a_port() {
        assert_eq!(loopback_port("http://127.0.0.1:8080/v1"), Some(8080));
        assert_eq!(loopback_port("http://localhost/v1"), Some(80));
        assert_eq!(loopback_port("HTTPS://LocalHost:8443"), Some(8443));
        assert_eq!(loopback_port("https://127.0.0.2/v1"), Some(443));
        assert_eq!(loopback_port("http://[::1]:9000/v1"), Some(9000));
        assert_eq!(loopback_port("http://user:pw@localhost:7000/v1"), Some(7000));
        assert_eq!(loopback_port("http://10.0.0.5:8000/v1"), None);
        assert_eq!(loopback_port("http://gpu-box:8000/v1"), None);
        assert_eq!(loopback_port("http://localhost:notaport/v1"), None);
        assert_eq!(TargetWatch::find("http://10.0.0.5:8000/v1", false), TargetWatch::Remote);
        assert_eq!(TargetWatch::find("http://127.0.0.1:1/v1", true), TargetWatch::Embedded);
    }

    #[test]
    fn a_local_target_s_cpu_is_not_other_processes() {
        // 1000 ticks on 2 CPUs: 600 used besides the bench's 100, 550 of them by the target.
        let stat_b = "cpu  1600 0 600 8300 100 0 0 0 0 0\ncpu0 1 0 0 0\ncpu1 1 0 0 0\n";
        let mut a = sample("0.10 0 0 1/1 1", STAT_A, &self_stat(60, 40)).unwrap();
        let mut b = sample("1.40 0 0 1/1 1", stat_b, &self_stat(160, 40)).unwrap();
        let remote = HostNoise::between(Some(a), Some(b), 64, &TargetWatch::Remote);
        assert_eq!(remote.other_share, Some(0.6));
        assert!(remote.busy && remote.target.is_none(), "{remote:?}");
        a.target_ticks = Some(5000);
        b.target_ticks = Some(5550);
        let llama = TargetWatch::Local { port: 8080, pid: Some(4242) };
        let n = HostNoise::between(Some(a), Some(b), 64, &llama);
        assert_eq!((n.other_share, n.own_share), (Some(0.05), Some(0.1)));
        let t = n.target.clone().unwrap();
        assert_eq!((t.pid, t.share), (Some(4242), Some(0.55)));
        assert_eq!(
            t.excluded,
            "the target's process (pid 4242, listening on port 8080) and its children used 55.0% \
             of the CPU time, not counted in other processes"
        );
        // Load 1.4 less the 1.3 CPUs of bench and target: not busy.
        assert!(!n.busy, "{n:?}");
        let json = serde_json::to_value(&n).unwrap();
        assert_eq!(json["target"]["pid"], 4242);
        // Not found: counted as before, and said.
        let unknown = TargetWatch::Local { port: 8080, pid: None };
        let n = HostNoise::between(Some(a), Some(b), 64, &unknown);
        assert_eq!(n.other_share, Some(0.6));
        assert!(n.target.unwrap().excluded.contains("could not be read"));
        // The embedded simulator: already the bench's own.
        let n = HostNoise::between(Some(a), Some(b), 64, &TargetWatch::Embedded);
        assert_eq!(n.other_share, Some(0.6));
        assert!(
            n.target.unwrap().excluded.starts_with("the embedded simulator runs in the bench's")
        );
    }

    /// The lookup at the edge, on this machine: a listener this test opens on 127.0.0.1 is in
    /// this process, which the lookup never names (the bench is not its own target).
    #[test]
    fn the_lookup_skips_the_bench_s_own_process() {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let port = listener.local_addr().unwrap().port();
        let url = format!("http://127.0.0.1:{port}/v1");
        assert_eq!(TargetWatch::find(&url, false), TargetWatch::Local { port, pid: None });
    }
}
