//! Arrival schedules for open-loop load: when each request is meant to be sent.

use rand::SeedableRng;
use rand::rngs::StdRng;
use rand_distr::{Distribution, Exp, Gamma};

use crate::config::Arrival;

/// Intended send offsets in milliseconds from the start of the load, starting at 0.
pub struct ArrivalSchedule {
    rng: StdRng,
    kind: Kind,
    next_ms: f64,
}

enum Kind {
    Exp(Exp<f64>),
    Gamma(Gamma<f64>),
    Constant(f64),
}

impl ArrivalSchedule {
    /// `rate` in requests per second (> 0); `burstiness` is the gamma shape (1 = Poisson).
    pub fn new(arrival: Arrival, rate: f64, burstiness: f64, seed: u64) -> ArrivalSchedule {
        let mean_ms = 1000.0 / rate;
        let kind = match arrival {
            Arrival::Poisson => Kind::Exp(Exp::new(1.0 / mean_ms).expect("rate validated > 0")),
            Arrival::Gamma => Kind::Gamma(
                Gamma::new(burstiness, mean_ms / burstiness).expect("burstiness validated > 0"),
            ),
            Arrival::Constant => Kind::Constant(mean_ms),
        };
        ArrivalSchedule { rng: StdRng::seed_from_u64(seed ^ 0x05ee_da11), kind, next_ms: 0.0 }
    }
}

impl Iterator for ArrivalSchedule {
    type Item = f64;
    fn next(&mut self) -> Option<f64> {
        let at = self.next_ms;
        let gap = match &self.kind {
            Kind::Exp(d) => d.sample(&mut self.rng),
            Kind::Gamma(d) => d.sample(&mut self.rng),
            Kind::Constant(g) => *g,
        };
        self.next_ms += gap;
        Some(at)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn gaps(a: Arrival, rate: f64, b: f64, n: usize) -> Vec<f64> {
        let t: Vec<f64> = ArrivalSchedule::new(a, rate, b, 1).take(n + 1).collect();
        t.windows(2).map(|w| w[1] - w[0]).collect()
    }

    fn mean_cv(g: &[f64]) -> (f64, f64) {
        let m = g.iter().sum::<f64>() / g.len() as f64;
        let var = g.iter().map(|x| (x - m).powi(2)).sum::<f64>() / g.len() as f64;
        (m, var.sqrt() / m)
    }

    #[test]
    fn constant_is_exact() {
        let t: Vec<f64> = ArrivalSchedule::new(Arrival::Constant, 4.0, 1.0, 0).take(4).collect();
        assert_eq!(t, vec![0.0, 250.0, 500.0, 750.0]);
    }

    #[test]
    fn poisson_and_gamma_have_the_requested_mean_and_burstiness() {
        let (m, cv) = mean_cv(&gaps(Arrival::Poisson, 20.0, 1.0, 20_000));
        assert!((m - 50.0).abs() < 1.5, "mean {m}");
        assert!((cv - 1.0).abs() < 0.05, "cv {cv}");
        // Gamma with shape k has coefficient of variation 1/sqrt(k).
        let (m, cv) = mean_cv(&gaps(Arrival::Gamma, 20.0, 0.25, 20_000));
        assert!((m - 50.0).abs() < 3.0, "mean {m}");
        assert!((cv - 2.0).abs() < 0.15, "cv {cv}");
        let (_, cv) = mean_cv(&gaps(Arrival::Gamma, 20.0, 4.0, 20_000));
        assert!((cv - 0.5).abs() < 0.03, "cv {cv}");
    }

    #[test]
    fn seeded() {
        let a: Vec<f64> = ArrivalSchedule::new(Arrival::Poisson, 3.0, 1.0, 9).take(10).collect();
        let b: Vec<f64> = ArrivalSchedule::new(Arrival::Poisson, 3.0, 1.0, 9).take(10).collect();
        assert_eq!(a, b);
    }
}
