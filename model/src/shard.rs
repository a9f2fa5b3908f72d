//! A run sharded over processes: shard `I` of `N` measures its share of a profile's load, and
//! `bench::merge` joins the N run directories into one run.
//!
//! The split (docs/sharding.md), applied to the run's input before the target is contacted
//! (`runner::RunInput::shard`, one transform of the load, the items, the prompts' salt and the
//! arrival stream):
//!
//! - **closed loop**: the concurrency is divided, the remainder going to the first shards
//!   (10 over 4 shards: 3, 3, 2, 2);
//! - **open loop**: each shard sends at `rate / N` from its own seeded arrival stream
//!   ([`Shard::arrival_seed`]), so the N streams together are a stream at `rate`;
//! - **trace**: shard `I` replays the records whose index is `I` modulo `N`, at their own
//!   times (a rate cap `max_rate` is divided by N);
//! - **workload items** (synthetic or dataset) are dealt the same way, by position modulo N, and
//!   the counts (`requests`, `warmup_requests`, `max_concurrency`) are divided with the remainder
//!   on the first shards: the N shards together send exactly what one process would.
//!
//! Indexes count from 0, as Kubernetes' `JOB_COMPLETION_INDEX` does.

use std::fmt;
use std::str::FromStr;

use serde::{Deserialize, Serialize};

use crate::config::{LoadConfig, LoadMode};

/// The most shards a run may have.
pub(crate) const MAX_SHARDS: u32 = 1024;

/// The key of a shard's section in `summary.extra`.
pub(crate) const SUMMARY_KEY: &str = "shard";

/// Shard `index` (from 0) of `count`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub struct Shard {
    pub index: u32,
    pub count: u32,
}

impl Shard {
    pub fn new(index: u32, count: u32) -> Result<Shard, ShardError> {
        if !(1..=MAX_SHARDS).contains(&count) {
            return Err(ShardError::Count { count });
        }
        if index >= count {
            return Err(ShardError::Index { index, count });
        }
        Ok(Shard { index, count })
    }

    /// This shard's part of `total` things dealt one by one: `total / N`, plus one for the
    /// first `total % N` shards.
    pub fn share(&self, total: u64) -> u64 {
        let (n, i) = (u64::from(self.count), u64::from(self.index));
        total / n + u64::from(i < total % n)
    }

    /// Whether the item at `position` belongs to this shard (position modulo N).
    pub fn owns(&self, position: usize) -> bool {
        position % self.count as usize == self.index as usize
    }

    /// The items at this shard's positions, in order.
    pub fn select<T>(&self, items: Vec<T>) -> Vec<T> {
        items.into_iter().enumerate().filter(|(p, _)| self.owns(*p)).map(|(_, t)| t).collect()
    }

    /// The position in the whole list of this shard's item `local`.
    pub(crate) fn global_position(&self, local: u64) -> u64 {
        local * u64::from(self.count) + u64::from(self.index)
    }

    /// The seed of this shard's arrival stream: the profile's seed itself for a single shard
    /// (so `--shard 0/1` is the unsharded run), else a seed of its own per shard.
    pub fn arrival_seed(&self, seed: u64) -> u64 {
        if self.count == 1 {
            return seed;
        }
        let salt = [u64::from(self.index).to_le_bytes(), u64::from(self.count).to_le_bytes()];
        seed ^ crate::hash::fnv1a(&salt.concat())
    }

    /// The salt of the words unique to each of this shard's requests (0 for a single shard):
    /// request ids repeat across shards, their prompts must not.
    pub fn prompt_salt(&self) -> u64 {
        if self.count == 1 {
            return 0;
        }
        crate::hash::fnv1a(format!("shard {}/{}", self.index, self.count).as_bytes())
    }

    /// This shard's load: the profile's `total` load split as the module documents. Refused
    /// when a shard would get nothing to do (fewer workers, items or requests than shards).
    pub fn split(&self, total: &LoadConfig) -> Result<LoadConfig, ShardError> {
        let mut load = total.clone();
        let too_few =
            |what: &'static str, n: u64| ShardError::TooFew { what, n, count: self.count };
        let part = |n: u32| self.share(u64::from(n)) as u32;
        match total.mode {
            LoadMode::Closed => {
                if u64::from(total.concurrency) < u64::from(self.count) {
                    return Err(too_few("load.concurrency", u64::from(total.concurrency)));
                }
                load.concurrency = part(total.concurrency);
            }
            LoadMode::Open => load.rate = total.rate.map(|r| r / f64::from(self.count)),
            LoadMode::Trace => load.max_rate = total.max_rate.map(|r| r / f64::from(self.count)),
        }
        if let Some(m) = total.max_concurrency {
            if u64::from(m) < u64::from(self.count) {
                return Err(too_few("load.max_concurrency", u64::from(m)));
            }
            load.max_concurrency = Some(part(m));
        }
        if let Some(n) = total.requests {
            if n < u64::from(self.count) {
                return Err(too_few("load.requests", n));
            }
            load.requests = Some(self.share(n));
        }
        load.warmup_requests = self.share(total.warmup_requests);
        Ok(load)
    }
}

impl fmt::Display for Shard {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}/{}", self.index, self.count)
    }
}

impl FromStr for Shard {
    type Err = String;

    /// `I/N`, e.g. `0/4` (the first of four shards).
    fn from_str(s: &str) -> Result<Shard, String> {
        let bad = || format!("expected I/N with 0 <= I < N (e.g. 0/4, indexes from 0), got `{s}`");
        let (i, n) = s.trim().split_once('/').ok_or_else(bad)?;
        let index: u32 = i.trim().parse().map_err(|_| bad())?;
        let count: u32 = n.trim().parse().map_err(|_| bad())?;
        Shard::new(index, count).map_err(|e| e.to_string())
    }
}

/// Why there is no such shard, or a profile cannot be split into shards.
#[derive(Debug, PartialEq, thiserror::Error)]
pub enum ShardError {
    #[error("the shard count must be within 1..={MAX_SHARDS}, got {count}")]
    Count { count: u32 },
    #[error(
        "shard index {index} is out of range: indexes count from 0, so {count} shards are 0..={}",
        count - 1
    )]
    Index { index: u32, count: u32 },
    #[error(
        "{what} = {n} cannot be split over {count} shards: each shard needs at least one; \
         use at most {n} shards or raise {what}"
    )]
    TooFew { what: &'static str, n: u64, count: u32 },
    #[error(
        "the workload has {items} items, fewer than the {count} shards it is dealt to; use at \
         most {items} shards or a larger workload"
    )]
    TooFewItems { items: usize, count: u32 },
}

/// The profile's whole load, before the split: what a merge of the shards is a run of.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ShardTotal {
    pub concurrency: u32,
    #[serde(default)]
    pub rate: Option<f64>,
    #[serde(default)]
    pub max_rate: Option<f64>,
    #[serde(default)]
    pub max_concurrency: Option<u32>,
    #[serde(default)]
    pub requests: Option<u64>,
    pub warmup_requests: u64,
}

impl ShardTotal {
    pub fn of(load: &LoadConfig) -> ShardTotal {
        ShardTotal {
            concurrency: load.concurrency,
            rate: load.rate,
            max_rate: load.max_rate,
            max_concurrency: load.max_concurrency,
            requests: load.requests,
            warmup_requests: load.warmup_requests,
        }
    }

    /// `load` with these totals in place of a shard's part.
    pub fn restore(&self, load: &mut LoadConfig) {
        load.concurrency = self.concurrency;
        load.rate = self.rate;
        load.max_rate = self.max_rate;
        load.max_concurrency = self.max_concurrency;
        load.requests = self.requests;
        load.warmup_requests = self.warmup_requests;
    }
}

/// What a sharded run is asked for besides its profile (which holds the whole load): which
/// shard, and when the load starts (shared by every shard). The runner makes the shard's part
/// of the run's input in one transform (`runner::RunInput::shard`).
#[derive(Clone, Debug, PartialEq)]
pub struct ShardRun {
    pub shard: Shard,
    /// Wall-clock time the load starts at (`--start-at`); `None`: at once.
    pub start_at: Option<chrono::DateTime<chrono::Utc>>,
}

/// A shard's section of its summary (`summary.extra.shard`): what the merge aligns and checks.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ShardRecord {
    pub index: u32,
    pub count: u32,
    pub total: ShardTotal,
    /// The requested start (`--start-at`), RFC 3339.
    #[serde(default)]
    pub start_at: Option<String>,
    /// Wall-clock time of the shard's load clock origin (ms 0 of its records), RFC 3339 with
    /// microseconds.
    pub load_started_at: String,
}

impl ShardRecord {
    pub fn shard(&self) -> Shard {
        Shard { index: self.index, count: self.count }
    }
}

/// A run id given on the command line (`--run-id`): 1 to 100 letters, digits, `.`, `_` or `-`,
/// not starting with `.` (it names directories and Kubernetes objects).
pub fn check_run_id(s: &str) -> Result<String, String> {
    let ok = |c: char| c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-');
    if (1..=100).contains(&s.len()) && s.chars().all(ok) && !s.starts_with('.') {
        Ok(s.to_string())
    } else {
        Err(format!(
            "`{s}` is not a run id: 1 to 100 letters, digits, `.`, `_` or `-`, not starting \
             with `.`"
        ))
    }
}

/// RFC 3339 with microseconds, UTC.
pub fn timestamp(t: chrono::DateTime<chrono::Utc>) -> String {
    t.to_rfc3339_opts(chrono::SecondsFormat::Micros, true)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn shards(n: u32) -> Vec<Shard> {
        (0..n).map(|i| Shard::new(i, n).unwrap()).collect()
    }

    #[test]
    fn shard_specs_parse_from_zero_and_refuse_what_is_out_of_range() {
        assert_eq!("2/4".parse::<Shard>(), Ok(Shard { index: 2, count: 4 }));
        assert_eq!(Shard { index: 2, count: 4 }.to_string(), "2/4");
        let e = "4/4".parse::<Shard>().unwrap_err();
        assert!(e.contains("indexes count from 0, so 4 shards are 0..=3"), "{e}");
        assert!("0/0".parse::<Shard>().unwrap_err().contains("1..=1024"));
        assert!("1".parse::<Shard>().unwrap_err().contains("expected I/N"));
        assert!("-1/4".parse::<Shard>().is_err());
    }

    #[test]
    fn run_ids_name_directories_safely() {
        assert_eq!(check_run_id("big-run_2.1"), Ok("big-run_2.1".into()));
        for bad in ["", "a/b", "..", ".hidden", "a b", &"x".repeat(101)] {
            assert!(check_run_id(bad).unwrap_err().contains("is not a run id"), "{bad}");
        }
    }

    #[test]
    fn concurrency_splits_with_the_remainder_on_the_first_shards() {
        let total = LoadConfig { concurrency: 10, requests: Some(7), ..LoadConfig::default() };
        let parts: Vec<(u32, Option<u64>)> = shards(4)
            .iter()
            .map(|s| s.split(&total).map(|l| (l.concurrency, l.requests)).unwrap())
            .collect();
        assert_eq!(parts, vec![(3, Some(2)), (3, Some(2)), (2, Some(2)), (2, Some(1))]);
        let e = Shard::new(0, 4).unwrap().split(&LoadConfig { concurrency: 3, ..total.clone() });
        let msg = e.unwrap_err().to_string();
        assert_eq!(
            msg,
            "load.concurrency = 3 cannot be split over 4 shards: each shard needs at least one; \
             use at most 3 shards or raise load.concurrency"
        );
    }

    #[test]
    fn an_open_loop_splits_its_rate_into_independent_streams() {
        let total = LoadConfig {
            mode: LoadMode::Open,
            rate: Some(10.0),
            max_concurrency: Some(5),
            warmup_requests: 3,
            ..LoadConfig::default()
        };
        let parts: Vec<LoadConfig> = shards(2).iter().map(|s| s.split(&total).unwrap()).collect();
        assert_eq!(parts[0].rate, Some(5.0));
        assert_eq!(parts[1].rate, Some(5.0));
        assert_eq!((parts[0].max_concurrency, parts[1].max_concurrency), (Some(3), Some(2)));
        assert_eq!((parts[0].warmup_requests, parts[1].warmup_requests), (2, 1));
        let seeds: Vec<u64> = shards(4).iter().map(|s| s.arrival_seed(42)).collect();
        let mut distinct = seeds.clone();
        distinct.dedup();
        assert_eq!(distinct.len(), 4, "{seeds:?}");
        assert_eq!(Shard::new(0, 1).unwrap().arrival_seed(42), 42, "one shard is the plain run");
    }

    #[test]
    fn items_are_dealt_by_position_modulo_the_count_and_cover_the_whole_once() {
        let items: Vec<u32> = (0..10).collect();
        let dealt: Vec<Vec<u32>> = shards(3).iter().map(|s| s.select(items.clone())).collect();
        assert_eq!(dealt, vec![vec![0, 3, 6, 9], vec![1, 4, 7], vec![2, 5, 8]]);
        for s in shards(3) {
            let local = s.select(items.clone());
            assert_eq!(local.len() as u64, s.share(10));
            for (j, v) in local.iter().enumerate() {
                assert_eq!(s.global_position(j as u64), u64::from(*v));
            }
        }
    }

    #[test]
    fn totals_restore_over_a_shards_load() {
        let total = LoadConfig { concurrency: 9, requests: Some(90), ..LoadConfig::default() };
        let part = Shard::new(1, 2).unwrap().split(&total).unwrap();
        let mut load = part.clone();
        assert_ne!(load, total);
        ShardTotal::of(&total).restore(&mut load);
        assert_eq!(load, total);
    }
}
