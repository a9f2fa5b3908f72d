//! Length distributions of synthetic prompts and outputs: fixed, uniform, normal, lognormal
//! (clipped to `[min, max]`) and empirical (values listed in a file), sampled from a seed
//! (`LengthDist`, `LengthSampler`), and the requested-against-realised report of the summary
//! (`LengthReport`).

use std::path::{Path, PathBuf};

use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use rand_distr::{Distribution, LogNormal, Normal};
use serde::{Deserialize, Serialize};

pub use crate::config::LengthDist;
use crate::config::limits::MAX_REQUEST_TOKENS;
use crate::metrics::{LatencyHist, Stats};

impl LengthDist {
    /// A sampler seeded with `seed`; an empirical distribution reads its file under `root`.
    pub fn sampler(&self, root: &Path, seed: u64) -> Result<LengthSampler, LengthFileError> {
        let kind = match self {
            LengthDist::Fixed { value } => Kind::Fixed(*value),
            LengthDist::Uniform { min, max } => Kind::Uniform(*min, *max),
            LengthDist::Normal { mean, stddev, min, max } => {
                let d = Normal::new(*mean, *stddev).expect("validated: finite, stddev >= 0");
                Kind::Normal(d, *min, *max)
            }
            LengthDist::Lognormal { mean, stddev, min, max } => {
                // The underlying normal's parameters for lengths of this mean and stddev.
                let s2 = (1.0 + (stddev / mean).powi(2)).ln();
                let mu = mean.ln() - s2 / 2.0;
                let d = LogNormal::new(mu, s2.sqrt()).expect("validated: mean >= 1, stddev >= 0");
                Kind::Lognormal(d, *min, *max)
            }
            LengthDist::Empirical { file } => {
                let path = if Path::new(file).is_absolute() {
                    PathBuf::from(file)
                } else {
                    root.join(file)
                };
                let text = std::fs::read_to_string(&path)
                    .map_err(|e| LengthFileError::at(&path, 0, format!("cannot read: {e}")))?;
                Kind::Empirical(parse_lengths(&path, &text)?)
            }
        };
        Ok(LengthSampler { rng: StdRng::seed_from_u64(seed ^ 0x6c65_6e67_7468), kind })
    }
}

/// The lengths of an empirical distribution's file: one positive integer a line, blank lines and
/// `#` comments skipped.
pub fn parse_lengths(path: &Path, text: &str) -> Result<Vec<u32>, LengthFileError> {
    let mut out = Vec::new();
    for (i, line) in text.lines().enumerate() {
        let line = line.trim();
        if line.is_empty() || line.starts_with('#') {
            continue;
        }
        let n: u32 = line.parse().ok().filter(|n| (1..=MAX_REQUEST_TOKENS).contains(n)).ok_or_else(
            || {
                LengthFileError::at(
                    path,
                    i + 1,
                    format!(
                        "`{}` is not a length: expected one integer within 1..={MAX_REQUEST_TOKENS} a line",
                        line.escape_debug()
                    ),
                )
            },
        )?;
        out.push(n);
    }
    if out.is_empty() {
        return Err(LengthFileError::at(path, 0, "the file lists no lengths".into()));
    }
    Ok(out)
}

/// An empirical length file that cannot be used: its path, the line (0: the whole file) and why.
#[derive(Debug, thiserror::Error)]
#[error("{}:{line}: {message}", path.display())]
pub struct LengthFileError {
    pub path: PathBuf,
    pub line: usize,
    pub message: String,
}

impl LengthFileError {
    fn at(path: &Path, line: usize, message: String) -> LengthFileError {
        LengthFileError { path: path.to_path_buf(), line, message }
    }
}

/// Draws lengths from a [`LengthDist`], the same sequence for the same seed.
#[derive(Clone, Debug)]
pub struct LengthSampler {
    rng: StdRng,
    kind: Kind,
}

#[derive(Clone, Debug)]
enum Kind {
    Fixed(u32),
    Uniform(u32, u32),
    Normal(Normal<f64>, u32, u32),
    Lognormal(LogNormal<f64>, u32, u32),
    Empirical(Vec<u32>),
}

fn clip(x: f64, min: u32, max: u32) -> u32 {
    if x.is_nan() { min } else { x.round().clamp(min as f64, max as f64) as u32 }
}

impl LengthSampler {
    pub fn sample(&mut self) -> u32 {
        match &self.kind {
            Kind::Fixed(v) => *v,
            Kind::Uniform(a, b) => self.rng.random_range(*a..=*b),
            Kind::Normal(d, a, b) => clip(d.sample(&mut self.rng), *a, *b),
            Kind::Lognormal(d, a, b) => clip(d.sample(&mut self.rng), *a, *b),
            Kind::Empirical(v) => v[self.rng.random_range(0..v.len())],
        }
    }
}

/// One length (input or output) in the summary: how it was asked for, the lengths the workload
/// requested, and the lengths the server reported for the ok requests.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct LengthReport {
    /// The configured distribution (null: a fixed list, a dataset or a trace).
    #[serde(default)]
    pub distribution: Option<LengthDist>,
    /// The lengths the workload's items request (null when unknown, such as a dataset's prompts).
    #[serde(default)]
    pub requested: Option<Stats>,
    /// The lengths the server reported for the measured ok requests (null when none reported).
    #[serde(default)]
    pub realised: Option<Stats>,
}

/// Statistics of a list of lengths (None when empty).
pub fn length_stats(lengths: impl IntoIterator<Item = u32>) -> Option<Stats> {
    let mut h = LatencyHist::new();
    for n in lengths {
        h.record(n as f64);
    }
    h.stats()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn draw(d: &LengthDist, n: usize) -> Vec<u32> {
        let mut s = d.sampler(Path::new("."), 7).unwrap();
        (0..n).map(|_| s.sample()).collect()
    }

    fn mean_sd(v: &[u32]) -> (f64, f64) {
        let m = v.iter().map(|&x| x as f64).sum::<f64>() / v.len() as f64;
        let var = v.iter().map(|&x| (x as f64 - m).powi(2)).sum::<f64>() / v.len() as f64;
        (m, var.sqrt())
    }

    #[test]
    fn each_distribution_has_its_shape_and_stays_in_bounds() {
        assert!(draw(&LengthDist::Fixed { value: 33 }, 100).iter().all(|&n| n == 33));
        let u = draw(&LengthDist::Uniform { min: 10, max: 20 }, 5000);
        assert!(u.iter().all(|n| (10..=20).contains(n)));
        assert!(u.contains(&10) && u.contains(&20));
        let normal = LengthDist::Normal { mean: 500.0, stddev: 50.0, min: 1, max: 100_000 };
        let (m, sd) = mean_sd(&draw(&normal, 20_000));
        assert!((m - 500.0).abs() < 2.0 && (sd - 50.0).abs() < 2.0, "{m} {sd}");
        let logn = LengthDist::Lognormal { mean: 800.0, stddev: 400.0, min: 1, max: 1_000_000 };
        let v = draw(&logn, 40_000);
        let (m, sd) = mean_sd(&v);
        assert!((m - 800.0).abs() < 12.0 && (sd - 400.0).abs() < 20.0, "{m} {sd}");
        // Right-skewed: the median is below the mean.
        let mut sorted = v.clone();
        sorted.sort();
        assert!((sorted[sorted.len() / 2] as f64) < m - 50.0);
        // Clipping.
        let clipped = LengthDist::Lognormal { mean: 800.0, stddev: 400.0, min: 600, max: 900 };
        let v = draw(&clipped, 5000);
        assert!(v.iter().all(|n| (600..=900).contains(n)));
        assert!(v.contains(&600) && v.contains(&900));
    }

    #[test]
    fn sampling_is_seeded() {
        let d = LengthDist::Normal { mean: 100.0, stddev: 30.0, min: 1, max: 1000 };
        assert_eq!(draw(&d, 50), draw(&d, 50));
        let mut other = d.sampler(Path::new("."), 8).unwrap();
        assert_ne!(draw(&d, 50), (0..50).map(|_| other.sample()).collect::<Vec<_>>());
    }

    #[test]
    fn empirical_lengths_come_from_the_file_and_bad_lines_are_named() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("l.txt"), "# lengths\n5\n\n7\n").unwrap();
        let d = LengthDist::Empirical { file: "l.txt".into() };
        let mut s = d.sampler(dir.path(), 1).unwrap();
        let v: Vec<u32> = (0..200).map(|_| s.sample()).collect();
        assert!(v.iter().all(|n| *n == 5 || *n == 7) && v.contains(&5) && v.contains(&7));
        std::fs::write(dir.path().join("l.txt"), "5\n0\n").unwrap();
        let e = d.sampler(dir.path(), 1).unwrap_err();
        assert_eq!(e.line, 2);
        assert!(e.to_string().contains("l.txt:2: `0` is not a length"), "{e}");
        std::fs::write(dir.path().join("l.txt"), "# nothing\n").unwrap();
        assert!(d.sampler(dir.path(), 1).unwrap_err().message.contains("no lengths"));
        let e = LengthDist::Empirical { file: "missing.txt".into() }.sampler(dir.path(), 1);
        assert!(e.unwrap_err().message.contains("cannot read"));
    }

    #[test]
    fn parameters_are_checked() {
        let bad = [
            (LengthDist::Fixed { value: 0 }, "value"),
            (LengthDist::Uniform { min: 9, max: 3 }, "min"),
            (LengthDist::Normal { mean: f64::NAN, stddev: 1.0, min: 1, max: 9 }, "mean"),
            (LengthDist::Lognormal { mean: 10.0, stddev: -1.0, min: 1, max: 9 }, "stddev"),
            (LengthDist::Lognormal { mean: 10.0, stddev: 1.0, min: 1, max: 4_000_000 }, "max"),
            (LengthDist::Empirical { file: " ".into() }, "file"),
        ];
        for (d, field) in bad {
            assert_eq!(d.validate().unwrap_err().0, field, "{d:?}");
        }
        assert!(LengthDist::Uniform { min: 3, max: 3 }.validate().is_ok());
    }

    #[test]
    fn config_spelling() {
        let d: LengthDist =
            toml::from_str("kind = \"lognormal\"\nmean = 512.0\nstddev = 128.0\nmax = 2048")
                .unwrap();
        assert_eq!(d, LengthDist::Lognormal { mean: 512.0, stddev: 128.0, min: 1, max: 2048 });
        let e = toml::from_str::<LengthDist>("kind = \"fixed\"\nvalue = 3\nmean = 2.0");
        assert!(e.is_err());
        let e = toml::from_str::<LengthDist>("kind = \"zipf\"").unwrap_err();
        assert!(e.to_string().contains("lognormal"), "{e}");
    }
}
