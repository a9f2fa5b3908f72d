//! The numeric layer: does the candidate compute the same distribution as the baseline?
//!
//! **Log-prob mode** (HTTP). Both targets answer the same prompts with greedy decoding and
//! `logprobs` / `top_logprobs = k`. At every output position the two top-k lists are turned into
//! two vectors over the *union* of their tokens (the chosen token included). A token that one
//! side did not list gets that side's smallest listed log-prob — the tightest value the
//! response allows (an unlisted token is at most that likely) — and the fill is counted
//! (`filled_entries`). Per position:
//!
//! - cosine similarity of the two vectors (1 for identical vectors);
//! - max relative error `max_i |c_i - b_i| / |b_i|` (the absolute error where `|b_i| < 1e-12`).
//!
//! A sequence is compared up to the first position where the greedy tokens differ: after it the
//! two sides continue different texts, so later positions are not comparable (they are counted
//! as `positions_after_divergence`, not compared). The first diverging position of the run is
//! the earliest (by item, then position) where the tokens differ or a threshold is broken.
//!
//! **Logits mode** (`.npy`). Two arrays of the same shape (`f16`, `f32` or `f64`, C order): the
//! last axis is the vocabulary, every leading index is one position. Each row is compared in
//! full with the same two measures; a row whose argmax differs is a token divergence.

use std::io::Read;
use std::path::Path;

use serde::{Deserialize, Serialize};

/// Thresholds of the numeric layer (reference defaults).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct NumericThresholds {
    /// Minimum cosine similarity at every position.
    pub cos_min: f64,
    /// Maximum relative error at every position.
    pub rtol_max: f64,
}

impl Default for NumericThresholds {
    fn default() -> Self {
        NumericThresholds { cos_min: 0.9995, rtol_max: 1e-3 }
    }
}

/// One output position: the chosen token and the listed alternatives with their log-probs.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Position {
    pub token: String,
    pub logprob: f64,
    pub top: Vec<(String, f64)>,
}

/// Why a response carries no log-probs this reads.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum LogprobsError {
    #[error("the response has no choices[0].logprobs (does the server support logprobs?)")]
    Missing,
    #[error("a log-prob is not a number")]
    NotANumber,
    #[error("logprobs has neither `content` nor `tokens`")]
    NoTokens,
    #[error("logprobs has no `token_logprobs`")]
    NoTokenLogprobs,
}

/// Log-probs of the first choice of a (non-streamed) response, chat or completions shape.
pub(crate) fn parse_logprobs(body: &serde_json::Value) -> Result<Vec<Position>, LogprobsError> {
    let lp = body
        .pointer("/choices/0/logprobs")
        .filter(|v| !v.is_null())
        .ok_or(LogprobsError::Missing)?;
    let num = |v: &serde_json::Value| v.as_f64().ok_or(LogprobsError::NotANumber);
    if let Some(content) = lp.get("content").and_then(|c| c.as_array()) {
        // Chat: content[i] = {token, logprob, top_logprobs: [{token, logprob}]}.
        return content
            .iter()
            .map(|e| {
                let token = e.get("token").and_then(|t| t.as_str()).unwrap_or_default().to_string();
                let logprob = num(e.get("logprob").unwrap_or(&serde_json::Value::Null))?;
                let mut top = Vec::new();
                for t in e.get("top_logprobs").and_then(|t| t.as_array()).into_iter().flatten() {
                    let tok = t.get("token").and_then(|x| x.as_str()).unwrap_or_default();
                    top.push((
                        tok.to_string(),
                        num(t.get("logprob").unwrap_or(&serde_json::Value::Null))?,
                    ));
                }
                Ok(Position { token, logprob, top })
            })
            .collect();
    }
    // Completions: {tokens, token_logprobs, top_logprobs: [{token: logprob}]}.
    let tokens = lp.get("tokens").and_then(|t| t.as_array()).ok_or(LogprobsError::NoTokens)?;
    let lps = lp
        .get("token_logprobs")
        .and_then(|t| t.as_array())
        .ok_or(LogprobsError::NoTokenLogprobs)?;
    let tops = lp.get("top_logprobs").and_then(|t| t.as_array());
    let mut out = Vec::with_capacity(tokens.len());
    for (i, (t, l)) in tokens.iter().zip(lps).enumerate() {
        let mut top = Vec::new();
        if let Some(map) = tops.and_then(|a| a.get(i)).and_then(|m| m.as_object()) {
            for (tok, v) in map {
                top.push((tok.clone(), num(v)?));
            }
        }
        out.push(Position {
            token: t.as_str().unwrap_or_default().to_string(),
            logprob: num(l)?,
            top,
        });
    }
    Ok(out)
}

/// Cosine similarity; exactly 1 for identical vectors, 0 when one is all zeros.
pub fn cosine(a: &[f64], b: &[f64]) -> f64 {
    if a == b {
        return 1.0;
    }
    let dot: f64 = a.iter().zip(b).map(|(x, y)| x * y).sum();
    let na: f64 = a.iter().map(|x| x * x).sum::<f64>().sqrt();
    let nb: f64 = b.iter().map(|x| x * x).sum::<f64>().sqrt();
    if na == 0.0 || nb == 0.0 {
        return 0.0;
    }
    (dot / (na * nb)).clamp(-1.0, 1.0)
}

/// Max relative error of the candidate against the baseline (absolute where `|b| < 1e-12`).
pub(crate) fn max_rel_err(baseline: &[f64], candidate: &[f64]) -> f64 {
    baseline
        .iter()
        .zip(candidate)
        .map(|(b, c)| {
            let d = (c - b).abs();
            if b.abs() < 1e-12 { d } else { d / b.abs() }
        })
        .fold(0.0, f64::max)
}

/// The two vectors of one position over the union of listed tokens, and how many entries were
/// filled with a side's smallest listed log-prob.
pub(crate) fn union_vectors(b: &Position, c: &Position) -> (Vec<f64>, Vec<f64>, u64) {
    let entries = |p: &Position| {
        let mut e = p.top.clone();
        if !e.iter().any(|(t, _)| *t == p.token) {
            e.push((p.token.clone(), p.logprob));
        }
        e
    };
    let (be, ce) = (entries(b), entries(c));
    let floor = |e: &[(String, f64)]| e.iter().map(|x| x.1).fold(f64::INFINITY, f64::min);
    let (bf, cf) = (floor(&be), floor(&ce));
    let mut tokens: Vec<&str> = be.iter().map(|(t, _)| t.as_str()).collect();
    for (t, _) in &ce {
        if !tokens.contains(&t.as_str()) {
            tokens.push(t);
        }
    }
    let (mut bv, mut cv, mut filled) = (Vec::new(), Vec::new(), 0);
    for t in tokens {
        let find = |e: &[(String, f64)]| e.iter().find(|(x, _)| x == t).map(|x| x.1);
        bv.push(find(&be).unwrap_or_else(|| {
            filled += 1;
            bf
        }));
        cv.push(find(&ce).unwrap_or_else(|| {
            filled += 1;
            cf
        }));
    }
    (bv, cv, filled)
}

/// The drift at one output position of one item, as `numeric.jsonl` lists it.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub(crate) struct PositionDrift {
    pub position: usize,
    /// The baseline's chosen token.
    pub token: Option<String>,
    /// The candidate's chosen token, where it differs.
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub candidate_token: Option<String>,
    /// Measures over the union of listed tokens (None at a token divergence: not compared).
    pub cos: Option<f64>,
    pub rtol: Option<f64>,
    /// The chosen token's log-prob on each side.
    pub baseline_logprob: Option<f64>,
    pub candidate_logprob: Option<f64>,
    /// `ok`, `cos` or `rtol` (a threshold broken), `token` (the chosen tokens differ; the last
    /// entry, as later positions continue different texts).
    pub status: String,
}

/// Position by position, the drift between two greedy sequences up to and including the first
/// position where the chosen tokens differ (or one side ends).
pub(crate) fn position_drift(
    b: &[Position],
    c: &[Position],
    th: &NumericThresholds,
) -> Vec<PositionDrift> {
    let mut out = Vec::with_capacity(b.len().min(c.len()));
    for i in 0..b.len().max(c.len()) {
        let (pb, pc) = (b.get(i), c.get(i));
        match (pb, pc) {
            (Some(pb), Some(pc)) if pb.token == pc.token => {
                let (bv, cv, _) = union_vectors(pb, pc);
                let (cos, rtol) = (cosine(&bv, &cv), max_rel_err(&bv, &cv));
                let status = if cos < th.cos_min {
                    "cos"
                } else if rtol > th.rtol_max {
                    "rtol"
                } else {
                    "ok"
                };
                out.push(PositionDrift {
                    position: i,
                    token: Some(pb.token.clone()),
                    candidate_token: None,
                    cos: Some(cos),
                    rtol: Some(rtol),
                    baseline_logprob: Some(pb.logprob),
                    candidate_logprob: Some(pc.logprob),
                    status: status.into(),
                });
            }
            _ => {
                out.push(PositionDrift {
                    position: i,
                    token: pb.map(|p| p.token.clone()),
                    candidate_token: pc.map(|p| p.token.clone()),
                    cos: None,
                    rtol: None,
                    baseline_logprob: pb.map(|p| p.logprob),
                    candidate_logprob: pc.map(|p| p.logprob),
                    status: "token".into(),
                });
                break;
            }
        }
    }
    out
}

pub use infergate_model::summary::Divergence;

/// Accumulates position comparisons into the layer's numbers.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct NumericStats {
    pub items: u64,
    pub positions: u64,
    /// Worst (lowest) cosine similarity of any compared position.
    pub cos_min: Option<f64>,
    pub cos_mean: Option<f64>,
    /// Worst (highest) relative error of any compared position.
    pub rtol_max: Option<f64>,
    /// Positions whose cosine or relative error broke a threshold.
    pub positions_failing: u64,
    /// Items whose greedy tokens differ somewhere.
    pub token_divergences: u64,
    /// Positions after a token divergence (not compared).
    pub positions_after_divergence: u64,
    /// Union entries filled with a side's smallest listed log-prob.
    pub filled_entries: u64,
    pub first_divergence: Option<Divergence>,
    #[serde(skip)]
    cos_sum: f64,
}

impl NumericStats {
    fn observe(&mut self, cos: f64, rtol: f64) {
        self.positions += 1;
        self.cos_sum += cos;
        self.cos_min = Some(self.cos_min.map_or(cos, |m| m.min(cos)));
        self.rtol_max = Some(self.rtol_max.map_or(rtol, |m| m.max(rtol)));
        self.cos_mean = Some(self.cos_sum / self.positions as f64);
    }

    fn diverge(&mut self, d: Divergence) {
        let earlier = self
            .first_divergence
            .as_ref()
            .is_none_or(|f| (d.item, d.position) < (f.item, f.position));
        if earlier {
            self.first_divergence = Some(d);
        }
    }

    /// Compare one item's positions (log-prob mode).
    pub(crate) fn add_sequence(
        &mut self,
        item: usize,
        b: &[Position],
        c: &[Position],
        th: &NumericThresholds,
    ) {
        self.items += 1;
        let n = b.len().min(c.len());
        let mut failed_here = false;
        for i in 0..n {
            if b[i].token != c[i].token {
                self.token_divergences += 1;
                self.positions_after_divergence += (b.len().max(c.len()) - i) as u64;
                self.diverge(Divergence {
                    item,
                    position: i,
                    reason: "token".into(),
                    baseline_token: Some(b[i].token.clone()),
                    candidate_token: Some(c[i].token.clone()),
                    cos: None,
                    rtol: None,
                });
                return;
            }
            let (bv, cv, filled) = union_vectors(&b[i], &c[i]);
            self.filled_entries += filled;
            let (cos, rtol) = (cosine(&bv, &cv), max_rel_err(&bv, &cv));
            self.check(item, i, cos, rtol, th, &mut failed_here, Some(&b[i].token));
        }
        if b.len() != c.len() {
            // One side stopped earlier: the texts differ from here on.
            self.token_divergences += 1;
            self.positions_after_divergence += (b.len().max(c.len()) - n) as u64;
            self.diverge(Divergence {
                item,
                position: n,
                reason: "token".into(),
                baseline_token: b.get(n).map(|p| p.token.clone()),
                candidate_token: c.get(n).map(|p| p.token.clone()),
                cos: None,
                rtol: None,
            });
        }
    }

    #[allow(clippy::too_many_arguments)]
    fn check(
        &mut self,
        item: usize,
        position: usize,
        cos: f64,
        rtol: f64,
        th: &NumericThresholds,
        failed_here: &mut bool,
        token: Option<&String>,
    ) {
        self.observe(cos, rtol);
        let reason = if cos < th.cos_min {
            Some("cos")
        } else if rtol > th.rtol_max {
            Some("rtol")
        } else {
            None
        };
        if let Some(reason) = reason {
            self.positions_failing += 1;
            if !*failed_here {
                *failed_here = true;
                self.diverge(Divergence {
                    item,
                    position,
                    reason: reason.into(),
                    baseline_token: token.cloned(),
                    candidate_token: token.cloned(),
                    cos: Some(cos),
                    rtol: Some(rtol),
                });
            }
        }
    }

    /// Compare two logits arrays row by row (logits mode).
    pub(crate) fn add_logits(
        &mut self,
        b: &Logits,
        c: &Logits,
        th: &NumericThresholds,
    ) -> Result<(), NumericError> {
        if b.shape != c.shape {
            return Err(NumericError::ShapesDiffer {
                baseline: b.shape.clone(),
                candidate: c.shape.clone(),
            });
        }
        let vocab = b.vocab();
        if vocab == 0 {
            return Err(NumericError::Empty);
        }
        self.items += 1;
        let mut failed_here = false;
        let argmax = |r: &[f64]| {
            r.iter()
                .enumerate()
                .fold((0, f64::NEG_INFINITY), |m, (i, &v)| if v > m.1 { (i, v) } else { m })
                .0
        };
        for (row, (br, cr)) in b.data.chunks(vocab).zip(c.data.chunks(vocab)).enumerate() {
            let (ab, ac) = (argmax(br), argmax(cr));
            if ab != ac {
                self.token_divergences += 1;
                self.diverge(Divergence {
                    item: 0,
                    position: row,
                    reason: "token".into(),
                    baseline_token: Some(ab.to_string()),
                    candidate_token: Some(ac.to_string()),
                    cos: None,
                    rtol: None,
                });
            }
            self.check(0, row, cosine(br, cr), max_rel_err(br, cr), th, &mut failed_here, None);
        }
        Ok(())
    }

    pub fn cos_ok(&self, th: &NumericThresholds) -> Option<bool> {
        self.cos_min.map(|c| c >= th.cos_min)
    }

    pub fn rtol_ok(&self, th: &NumericThresholds) -> Option<bool> {
        self.rtol_max.map(|r| r <= th.rtol_max)
    }
}

/// A logits array read from `.npy`: its shape and its values as f64, row-major.
#[derive(Clone, Debug, PartialEq)]
pub struct Logits {
    pub shape: Vec<u64>,
    pub data: Vec<f64>,
}

impl Logits {
    /// Length of the last axis (the vocabulary); a 0-d array is one value.
    pub fn vocab(&self) -> usize {
        self.shape.last().map_or(1, |&v| v as usize)
    }

    /// Rows (positions): the product of the leading axes.
    pub fn rows(&self) -> usize {
        self.data.len().checked_div(self.vocab()).unwrap_or(0)
    }
}

/// Why two logits files cannot be compared.
#[derive(Debug, thiserror::Error)]
pub enum NumericError {
    #[error("cannot read {}", path.display())]
    Read {
        path: std::path::PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("{}", path.display())]
    Npy {
        path: std::path::PathBuf,
        #[source]
        source: NpyError,
    },
    #[error("the logits shapes differ: baseline {baseline:?}, candidate {candidate:?}")]
    ShapesDiffer { baseline: Vec<u64>, candidate: Vec<u64> },
    #[error("the logits arrays are empty")]
    Empty,
}

/// Why bytes are not a logits array this reads.
#[derive(Debug, thiserror::Error)]
pub enum NpyError {
    #[error("not a .npy file")]
    NotNpy(#[source] std::io::Error),
    #[error("Fortran-ordered arrays are not supported: save with C order (numpy's default)")]
    Fortran,
    #[error("unsupported dtype {0}: expected f16, f32 or f64")]
    Dtype(String),
    #[error("cannot read the values")]
    Values(#[source] std::io::Error),
}

/// Read a `.npy` file of `f16`, `f32` or `f64` values in C order.
pub(crate) fn read_npy(path: &Path) -> Result<Logits, NumericError> {
    let mut bytes = Vec::new();
    std::fs::File::open(path)
        .and_then(|mut f| f.read_to_end(&mut bytes))
        .map_err(|source| NumericError::Read { path: path.to_path_buf(), source })?;
    parse_npy(&bytes).map_err(|source| NumericError::Npy { path: path.to_path_buf(), source })
}

/// Without the `acceptance` feature there is no `.npy` reader: every file is refused as such.
#[cfg(not(feature = "acceptance"))]
pub(crate) fn parse_npy(_bytes: &[u8]) -> Result<Logits, NpyError> {
    Err(NpyError::NotNpy(std::io::Error::other(
        "built without the `acceptance` feature: no .npy reader",
    )))
}

/// Parse `.npy` bytes (see [`read_npy`]).
#[cfg(feature = "acceptance")]
pub(crate) fn parse_npy(bytes: &[u8]) -> Result<Logits, NpyError> {
    use npyz::{DType, NpyFile, Order, TypeChar};
    let npy = NpyFile::new(bytes).map_err(NpyError::NotNpy)?;
    let shape = npy.shape().to_vec();
    if npy.order() == Order::Fortran && shape.len() > 1 {
        return Err(NpyError::Fortran);
    }
    let ts = match npy.dtype() {
        DType::Plain(ts) => ts,
        other => return Err(NpyError::Dtype(other.descr())),
    };
    let bad = || NpyError::Dtype(ts.to_string());
    if ts.type_char() != TypeChar::Float {
        return Err(bad());
    }
    let data: Vec<f64> = match ts.num_bytes() {
        Some(2) => npy
            .into_vec::<npyz::half::f16>()
            .map_err(NpyError::Values)?
            .into_iter()
            .map(f64::from)
            .collect(),
        Some(4) => {
            npy.into_vec::<f32>().map_err(NpyError::Values)?.into_iter().map(f64::from).collect()
        }
        Some(8) => npy.into_vec::<f64>().map_err(NpyError::Values)?,
        _ => return Err(bad()),
    };
    Ok(Logits { shape, data })
}

#[cfg(test)]
mod tests {
    use super::*;
    #[cfg(feature = "acceptance")]
    use npyz::WriterBuilder;

    fn pos(token: &str, top: &[(&str, f64)]) -> Position {
        let logprob = top.iter().find(|(t, _)| *t == token).map_or(-1.0, |x| x.1);
        Position {
            token: token.into(),
            logprob,
            top: top.iter().map(|(t, v)| (t.to_string(), *v)).collect(),
        }
    }

    #[test]
    fn identical_vectors_give_cos_one_and_rtol_zero() {
        let p = pos("a", &[("a", -0.1), ("b", -2.0), ("c", -3.5)]);
        let mut s = NumericStats::default();
        let th = NumericThresholds::default();
        s.add_sequence(0, &[p.clone(), p.clone()], &[p.clone(), p], &th);
        assert_eq!((s.cos_min, s.rtol_max), (Some(1.0), Some(0.0)));
        assert_eq!((s.positions, s.positions_failing, s.first_divergence.clone()), (2, 0, None));
        assert_eq!((s.cos_ok(&th), s.rtol_ok(&th)), (Some(true), Some(true)));
    }

    #[test]
    fn a_known_perturbation_gives_the_expected_values() {
        // Every candidate log-prob 0.2% larger in magnitude: rtol = 2e-3 exactly, and the
        // cosine of two parallel vectors stays 1.
        let b = pos("a", &[("a", -0.5), ("b", -1.0), ("c", -2.0)]);
        let c = pos("a", &[("a", -0.501), ("b", -1.002), ("c", -2.004)]);
        let (bv, cv, filled) = union_vectors(&b, &c);
        assert_eq!(filled, 0);
        assert!((max_rel_err(&bv, &cv) - 2e-3).abs() < 1e-12);
        assert!((cosine(&bv, &cv) - 1.0).abs() < 1e-12);
        // A perturbation of one entry: b = (-0.5, -1, -2), c = (-0.5, -1, -2.2).
        let c = pos("a", &[("a", -0.5), ("b", -1.0), ("c", -2.2)]);
        let (bv, cv, _) = union_vectors(&b, &c);
        let expected_cos =
            (0.25 + 1.0 + 4.4) / ((0.25f64 + 1.0 + 4.0).sqrt() * (0.25f64 + 1.0 + 4.84).sqrt());
        assert!((cosine(&bv, &cv) - expected_cos).abs() < 1e-12);
        assert!((max_rel_err(&bv, &cv) - 0.1).abs() < 1e-12);
        let mut s = NumericStats::default();
        s.add_sequence(3, &[b.clone(), b.clone()], &[b.clone(), c], &NumericThresholds::default());
        let d = s.first_divergence.unwrap();
        assert_eq!((d.item, d.position, d.reason.as_str()), (3, 1, "cos"));
        assert_eq!(s.positions_failing, 1);
    }

    #[test]
    fn missing_entries_take_the_sides_smallest_listed_logprob() {
        let b = pos("a", &[("a", -0.1), ("b", -2.0)]);
        let c = pos("a", &[("a", -0.1), ("x", -2.5)]);
        let (bv, cv, filled) = union_vectors(&b, &c);
        // Union a, b, x: b lacks x (-> -2.0), c lacks b (-> -2.5).
        assert_eq!(bv, vec![-0.1, -2.0, -2.0]);
        assert_eq!(cv, vec![-0.1, -2.5, -2.5]);
        assert_eq!(filled, 2);
    }

    #[test]
    fn token_divergence_stops_the_comparison_of_the_item() {
        let a = pos("a", &[("a", -0.1), ("b", -2.0)]);
        let b = pos("b", &[("b", -0.1), ("a", -2.0)]);
        let mut s = NumericStats::default();
        s.add_sequence(
            1,
            &[a.clone(), a.clone(), a.clone()],
            &[a.clone(), b, a],
            &NumericThresholds::default(),
        );
        assert_eq!(s.positions, 1);
        assert_eq!(s.positions_after_divergence, 2);
        let d = s.first_divergence.unwrap();
        assert_eq!(
            (d.position, d.reason.as_str(), d.candidate_token.as_deref()),
            (1, "token", Some("b"))
        );
    }

    #[test]
    fn per_position_drift_lists_every_compared_position_and_stops_at_the_divergence() {
        let th = NumericThresholds::default();
        let a = pos("a", &[("a", -0.5), ("b", -1.0), ("c", -2.0)]);
        let a_drift = pos("a", &[("a", -0.501), ("b", -1.002), ("c", -2.004)]);
        let x = pos("x", &[("x", -0.1), ("a", -3.0)]);
        let d = position_drift(
            &[a.clone(), a.clone(), a.clone(), a.clone()],
            &[a.clone(), a_drift, x, a.clone()],
            &th,
        );
        assert_eq!(d.len(), 3, "positions after the divergence are not listed: {d:?}");
        assert_eq!((d[0].status.as_str(), d[0].cos, d[0].rtol), ("ok", Some(1.0), Some(0.0)));
        assert_eq!(d[1].status, "rtol");
        assert!((d[1].rtol.unwrap() - 2e-3).abs() < 1e-12);
        assert_eq!((d[1].baseline_logprob, d[1].candidate_logprob), (Some(-0.5), Some(-0.501)));
        assert_eq!(
            (d[2].position, d[2].status.as_str(), d[2].candidate_token.as_deref(), d[2].cos),
            (2, "token", Some("x"), None)
        );
        // One side ending early is a divergence at the position where it ended.
        let d = position_drift(&[a.clone(), a.clone()], std::slice::from_ref(&a), &th);
        assert_eq!(d.len(), 2);
        assert_eq!(
            (d[1].status.as_str(), d[1].token.as_deref(), d[1].candidate_token.as_deref()),
            ("token", Some("a"), None)
        );
    }

    #[test]
    fn chat_and_completions_logprobs_parse() {
        let chat = serde_json::json!({"choices": [{"logprobs": {"content": [
            {"token": " a", "logprob": -0.1, "top_logprobs": [{"token": " a", "logprob": -0.1}, {"token": " b", "logprob": -2.0}]}
        ]}}]});
        let p = parse_logprobs(&chat).unwrap();
        assert_eq!(p[0].token, " a");
        assert_eq!(p[0].top.len(), 2);
        let cmpl = serde_json::json!({"choices": [{"logprobs": {"tokens": [" a"], "token_logprobs": [-0.1], "top_logprobs": [{" a": -0.1, " c": -3.0}]}}]});
        let p = parse_logprobs(&cmpl).unwrap();
        assert_eq!((p[0].logprob, p[0].top.len()), (-0.1, 2));
        assert_eq!(
            parse_logprobs(&serde_json::json!({"choices": [{"logprobs": null}]}))
                .unwrap_err()
                .to_string(),
            "the response has no choices[0].logprobs (does the server support logprobs?)"
        );
        let no_lps = serde_json::json!({"choices": [{"logprobs": {"tokens": [" a"]}}]});
        assert_eq!(parse_logprobs(&no_lps), Err(LogprobsError::NoTokenLogprobs));
    }

    #[cfg(feature = "acceptance")]
    fn npy_bytes<T: npyz::Serialize + npyz::AutoSerialize + Copy>(
        shape: &[u64],
        data: &[T],
    ) -> Vec<u8> {
        let mut buf = Vec::new();
        {
            let mut w = npyz::WriteOptions::new()
                .default_dtype()
                .shape(shape)
                .writer(&mut buf)
                .begin_nd()
                .unwrap();
            w.extend(data.iter().copied()).unwrap();
            w.finish().unwrap();
        }
        buf
    }

    #[test]
    #[cfg(feature = "acceptance")]
    fn npy_f32_f16_and_shapes() {
        let dir = tempfile::tempdir().unwrap();
        let vals: Vec<f32> = vec![1.0, 2.0, 3.0, 4.0, 5.0, 6.0];
        let p32 = dir.path().join("b.npy");
        std::fs::write(&p32, npy_bytes(&[2, 3], &vals)).unwrap();
        let b = read_npy(&p32).unwrap();
        assert_eq!((b.shape.clone(), b.rows(), b.vocab()), (vec![2, 3], 2, 3));
        assert_eq!(b.data, vec![1.0, 2.0, 3.0, 4.0, 5.0, 6.0]);
        let halfs: Vec<npyz::half::f16> =
            vals.iter().map(|v| npyz::half::f16::from_f32(*v)).collect();
        let p16 = dir.path().join("c.npy");
        std::fs::write(&p16, npy_bytes(&[1, 2, 3], &halfs)).unwrap();
        let c = read_npy(&p16).unwrap();
        assert_eq!((c.shape.clone(), c.rows()), (vec![1, 2, 3], 2));
        assert_eq!(c.data, b.data, "these values are exact in f16");
        // Same values, different shapes: refused.
        let mut s = NumericStats::default();
        let e = s.add_logits(&b, &c, &NumericThresholds::default()).unwrap_err();
        assert!(matches!(e, NumericError::ShapesDiffer { .. }), "{e}");
        assert!(e.to_string().contains("shapes differ"));
        // Same shape: identical -> cos 1, rtol 0.
        let mut s = NumericStats::default();
        s.add_logits(&b, &b.clone(), &NumericThresholds::default()).unwrap();
        assert_eq!((s.cos_min, s.rtol_max, s.positions), (Some(1.0), Some(0.0), 2));
        // A perturbed row that changes the argmax of row 1.
        let mut d = b.clone();
        d.data[3] = 7.0;
        let mut s = NumericStats::default();
        s.add_logits(&b, &d, &NumericThresholds::default()).unwrap();
        assert_eq!(s.token_divergences, 1);
        let first = s.first_divergence.unwrap();
        assert_eq!((first.position, first.reason.as_str()), (1, "token"));
        assert!((s.rtol_max.unwrap() - 0.75).abs() < 1e-12);
        // Not floats, not npy.
        std::fs::write(dir.path().join("i.npy"), npy_bytes(&[2], &[1i32, 2])).unwrap();
        let e = read_npy(&dir.path().join("i.npy")).unwrap_err();
        assert!(matches!(e, NumericError::Npy { source: NpyError::Dtype(_), .. }), "{e}");
        std::fs::write(dir.path().join("x.npy"), b"hello").unwrap();
        let e = read_npy(&dir.path().join("x.npy")).unwrap_err();
        assert!(matches!(e, NumericError::Npy { source: NpyError::NotNpy(_), .. }), "{e}");
    }
}
