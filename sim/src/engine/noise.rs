//! The engine's seeded noise (`[sim.noise]` of a bench profile): what a real machine adds to the
//! modelled step time, so repeated trials differ the way they do on a shared GPU node.
//!
//! ```text
//! step time = modelled step x run_factor x step_factor  (+ stall_ms, with stall_probability)
//! run_factor  ~ LogNormal(mean 1, CV run_cv)   drawn once, when the engine is built
//! step_factor ~ LogNormal(mean 1, CV step_cv)  drawn for every step
//! ```
//!
//! Every draw comes from one generator seeded with `seed`: the same seed and load give the
//! same run, bit for bit (the virtual-time driver stays deterministic).

use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use rand_distr::{Distribution, LogNormal};

use infergate_model::config::NoiseConfig;

/// The noise of one run (one engine's life).
#[derive(Clone, Debug)]
pub struct StepNoise {
    rng: StdRng,
    run_factor: f64,
    step: Option<LogNormal<f64>>,
    stall_probability: f64,
    stall_ns: f64,
}

/// A lognormal distribution of mean 1 and coefficient of variation `cv`; `None` for 0.
fn mean_one(cv: f64) -> Option<LogNormal<f64>> {
    // sigma^2 = ln(1 + cv^2), mu = -sigma^2 / 2: the mean is exactly 1.
    (cv > 0.0).then(|| LogNormal::from_mean_cv(1.0, cv).expect("a validated CV"))
}

impl StepNoise {
    /// The noise a (validated) config describes; `None` when it is off.
    pub fn new(cfg: &NoiseConfig) -> Option<StepNoise> {
        if !cfg.is_on() {
            return None;
        }
        let mut rng = StdRng::seed_from_u64(cfg.seed ^ 0x6e6f_6973_6500_0000);
        let run_factor = mean_one(cfg.run_cv).map_or(1.0, |d| d.sample(&mut rng));
        Some(StepNoise {
            rng,
            run_factor,
            step: mean_one(cfg.step_cv),
            stall_probability: cfg.stall_probability,
            stall_ns: cfg.stall_ms * 1e6,
        })
    }

    /// This run's factor.
    pub fn run_factor(&self) -> f64 {
        self.run_factor
    }

    /// The next step's factor and its stall in ns (0 without a stall).
    pub(crate) fn next_step(&mut self) -> (f64, f64) {
        let factor = self.run_factor * self.step.map_or(1.0, |d| d.sample(&mut self.rng));
        let stall =
            if self.stall_probability > 0.0 && self.rng.random::<f64>() < self.stall_probability {
                self.stall_ns
            } else {
                0.0
            };
        (factor, stall)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cfg(step_cv: f64, run_cv: f64, stall_probability: f64, seed: u64) -> NoiseConfig {
        NoiseConfig { step_cv, run_cv, stall_probability, stall_ms: 20.0, seed }
    }

    #[test]
    fn off_is_none_and_the_same_seed_draws_the_same_steps() {
        assert!(StepNoise::new(&NoiseConfig::default()).is_none());
        let mut a = StepNoise::new(&cfg(0.2, 0.1, 0.01, 5)).unwrap();
        let mut b = StepNoise::new(&cfg(0.2, 0.1, 0.01, 5)).unwrap();
        let mut c = StepNoise::new(&cfg(0.2, 0.1, 0.01, 6)).unwrap();
        let xs: Vec<_> = (0..50).map(|_| a.next_step()).collect();
        let ys: Vec<_> = (0..50).map(|_| b.next_step()).collect();
        let zs: Vec<_> = (0..50).map(|_| c.next_step()).collect();
        assert_eq!(xs, ys);
        assert_ne!(xs, zs);
    }

    #[test]
    fn factors_have_mean_one_and_the_configured_spread() {
        let n = 20_000;
        let mut s = StepNoise::new(&cfg(0.3, 0.0, 0.05, 1)).unwrap();
        let draws: Vec<(f64, f64)> = (0..n).map(|_| s.next_step()).collect();
        let mean = draws.iter().map(|d| d.0).sum::<f64>() / n as f64;
        let var = draws.iter().map(|d| (d.0 - mean).powi(2)).sum::<f64>() / n as f64;
        // Standard error of the mean 0.3 / sqrt(20000) = 0.002: 5 of them.
        assert!((mean - 1.0).abs() < 0.01, "{mean}");
        assert!((var.sqrt() - 0.3).abs() < 0.02, "{}", var.sqrt());
        let stalls = draws.iter().filter(|d| d.1 > 0.0).count() as f64 / n as f64;
        assert!((stalls - 0.05).abs() < 0.008, "{stalls}");
        assert!(draws.iter().all(|d| d.1 == 0.0 || d.1 == 20e6));
        // The run factor: one draw per seed, mean 1 and CV 0.2 over many seeds.
        let runs: Vec<f64> =
            (0..n).map(|i| StepNoise::new(&cfg(0.0, 0.2, 0.0, i)).unwrap().run_factor()).collect();
        let mean = runs.iter().sum::<f64>() / n as f64;
        let sd = (runs.iter().map(|r| (r - mean).powi(2)).sum::<f64>() / n as f64).sqrt();
        assert!((mean - 1.0).abs() < 0.01 && (sd - 0.2).abs() < 0.015, "{mean} {sd}");
        let mut fixed = StepNoise::new(&cfg(0.0, 0.2, 0.0, 9)).unwrap();
        let f = fixed.run_factor();
        assert!((0..10).all(|_| fixed.next_step() == (f, 0.0)));
    }
}
