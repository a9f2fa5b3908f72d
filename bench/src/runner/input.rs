//! What a run sends, settled before the target is contacted: the profile's load and the
//! workload read from its files, then what a shard ([`RunInput::shard`]) or a slice of an A/B
//! gate ([`RunInput::slice`]) makes of them, each in one transform. The steps after it see only
//! the result: the load to drive, the items, the prompts' salt and the arrival stream's
//! seed.

use std::path::Path;

use infergate_model::config::Profile;
use infergate_model::shard::{ShardError, ShardRun, ShardTotal};
use infergate_model::workload::WorkloadSlice;

use super::RunError;
use super::prepare::{self, Loaded};

/// A run's input, transformed by its shard or slice.
pub struct RunInput {
    /// The profile this run measures: a shard's holds the shard's part of the load.
    pub profile: Profile,
    /// The items (and a trace's records) this run sends.
    pub loaded: Loaded,
    /// The salt of the words unique to each request (0: none): a shard's (no two shards send
    /// the same text) or a slice's (an engine that lives through several trials never serves
    /// one from its prefix cache).
    pub prompt_salt: u64,
    /// The seed of an open loop's arrival stream.
    pub arrival_seed: u64,
    /// A shard's whole load, before the split (what a merge of the shards is a run of).
    pub shard_total: Option<ShardTotal>,
}

impl RunInput {
    /// The input `spec` describes: its profile's workload, then its shard's or slice's part.
    pub fn settle(spec: &super::RunSpec) -> Result<RunInput, RunError> {
        let mut input = RunInput::load(&spec.profile.profile, &spec.root)?;
        if let Some(s) = &spec.shard {
            input = input.shard(s)?;
        }
        if let Some(slice) = &spec.slice {
            input = input.slice(slice);
        }
        Ok(input)
    }

    /// The profile's workload, read and checked from its files under `root`, unchanged.
    pub fn load(profile: &Profile, root: &Path) -> Result<RunInput, RunError> {
        let loaded = prepare::load_workload(&profile.workload, &profile.load, root)?;
        Ok(RunInput {
            profile: profile.clone(),
            loaded,
            prompt_salt: 0,
            arrival_seed: profile.workload.seed,
            shard_total: None,
        })
    }

    /// Shard `I` of `N` (infergate_model::shard): its part of the load, the items (and a trace's records)
    /// at its positions modulo N, its own prompt salt and arrival stream.
    pub fn shard(mut self, run: &ShardRun) -> Result<RunInput, ShardError> {
        let shard = run.shard;
        let total = ShardTotal::of(&self.profile.load);
        self.profile.load = shard.split(&self.profile.load)?;
        let items = self.loaded.workload.items.len();
        if items < shard.count as usize {
            return Err(ShardError::TooFewItems { items, count: shard.count });
        }
        let loaded = &mut self.loaded;
        loaded.workload.items = shard.select(std::mem::take(&mut loaded.workload.items));
        if let Some((prompts, replay)) = &mut loaded.trace {
            *prompts = prompts.select(|i| shard.owns(i));
            replay.offsets = shard.select(std::mem::take(&mut replay.offsets));
            replay.info.records = replay.offsets.len() as u64;
        }
        self.prompt_salt = shard.prompt_salt();
        self.arrival_seed = shard.arrival_seed(self.arrival_seed);
        self.shard_total = Some(total);
        Ok(self)
    }

    /// A trial's slice of the workload: its items from the slice's first on, its prompts salted.
    pub fn slice(mut self, slice: &WorkloadSlice) -> RunInput {
        slice.apply(&mut self.loaded.workload);
        if slice.salt != 0 {
            self.prompt_salt = slice.salt;
        }
        self
    }
}
