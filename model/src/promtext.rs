//! A parser for the Prometheus text exposition format (version 0.0.4), sample by sample.
//!
//! Why not a crate: `prometheus-parse` 0.2 matches metric names with `\w+` and silently drops
//! every line whose name contains `:` — all of vLLM's (`vllm:*`) and llama.cpp's
//! (`llamacpp:*`) metrics; `openmetrics-parser` 0.5 refuses a plain vLLM exposition ("labels
//! in metrics have different label sets"); the remaining candidates are unmaintained single
//! releases. What the bench needs is small: every sample line as (name, labels, value) plus the
//! `# TYPE` of each family, so histogram and summary series (`_bucket`, `_sum`, `_count`) are
//! simply samples with their own names.
//!
//! Grammar handled: `name{label="value",...} value [timestamp]`, names and label names
//! `[a-zA-Z_:][a-zA-Z0-9_:]*`, label values with `\\`, `\"` and `\n` escapes, a trailing comma in
//! the label set, values `NaN`, `+Inf`, `-Inf` and any float, `# HELP` / `# TYPE` / other
//! comments, blank lines, CRLF line ends. A line that does not parse is reported with its line
//! number and skipped; the other samples are kept.

use std::collections::BTreeMap;

/// One sample line.
#[derive(Clone, Debug, PartialEq)]
pub struct Sample {
    pub name: String,
    /// Labels in the order written.
    pub labels: Vec<(String, String)>,
    pub value: f64,
}

impl Sample {
    pub fn label(&self, key: &str) -> Option<&str> {
        self.labels.iter().find(|(k, _)| k == key).map(|(_, v)| v.as_str())
    }
}

/// `# TYPE` of a family.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum MetricType {
    Counter,
    Gauge,
    Histogram,
    Summary,
    Untyped,
}

/// A parsed exposition.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Exposition {
    pub samples: Vec<Sample>,
    /// Family name -> declared type.
    pub types: BTreeMap<String, MetricType>,
    /// Lines that could not be parsed: (1-based line number, reason).
    pub errors: Vec<(usize, String)>,
}

impl Exposition {
    /// Sum of the samples named `name` (over all label sets); `None` when there is none.
    pub fn sum(&self, name: &str) -> Option<f64> {
        let mut found = false;
        let mut total = 0.0;
        for s in self.samples.iter().filter(|s| s.name == name) {
            found = true;
            total += s.value;
        }
        found.then_some(total)
    }

    /// Whether any sample has this name.
    pub fn has(&self, name: &str) -> bool {
        self.samples.iter().any(|s| s.name == name)
    }
}

/// Parse a whole exposition.
pub fn parse(text: &str) -> Exposition {
    let mut out = Exposition::default();
    for (i, raw) in text.lines().enumerate() {
        let line = raw.trim_end_matches('\r').trim();
        if line.is_empty() {
            continue;
        }
        if let Some(rest) = line.strip_prefix('#') {
            let mut parts = rest.split_whitespace();
            if parts.next() == Some("TYPE") {
                if let (Some(name), Some(kind)) = (parts.next(), parts.next()) {
                    let t = match kind {
                        "counter" => MetricType::Counter,
                        "gauge" => MetricType::Gauge,
                        "histogram" => MetricType::Histogram,
                        "summary" => MetricType::Summary,
                        _ => MetricType::Untyped,
                    };
                    out.types.insert(name.to_string(), t);
                }
            }
            continue;
        }
        match parse_sample(line) {
            Ok(s) => out.samples.push(s),
            Err(e) => out.errors.push((i + 1, e)),
        }
    }
    out
}

fn is_name_start(c: char) -> bool {
    c.is_ascii_alphabetic() || c == '_' || c == ':'
}

fn is_name_char(c: char) -> bool {
    c.is_ascii_alphanumeric() || c == '_' || c == ':'
}

/// Parse one sample line.
fn parse_sample(line: &str) -> Result<Sample, String> {
    let mut chars = line.char_indices().peekable();
    match chars.peek() {
        Some((_, c)) if is_name_start(*c) => {}
        _ => return Err("a sample must start with a metric name".into()),
    }
    let mut end = line.len();
    for (i, c) in line.char_indices() {
        if !is_name_char(c) {
            end = i;
            break;
        }
    }
    let name = line[..end].to_string();
    let mut rest = &line[end..];
    let mut labels = Vec::new();
    if let Some(r) = rest.strip_prefix('{') {
        let (parsed, after) = parse_labels(r)?;
        labels = parsed;
        rest = after;
    }
    let mut fields = rest.split_whitespace();
    let value = fields.next().ok_or_else(|| format!("`{name}` has no value"))?;
    let value = parse_value(value).ok_or_else(|| format!("`{name}`: `{value}` is not a number"))?;
    if let Some(ts) = fields.next() {
        if ts.parse::<i64>().is_err() {
            return Err(format!("`{name}`: `{ts}` is not a timestamp"));
        }
    }
    if fields.next().is_some() {
        return Err(format!("`{name}`: unexpected text after the value"));
    }
    Ok(Sample { name, labels, value })
}

fn parse_value(s: &str) -> Option<f64> {
    match s {
        "NaN" | "nan" => Some(f64::NAN),
        "+Inf" | "Inf" | "+inf" | "inf" => Some(f64::INFINITY),
        "-Inf" | "-inf" => Some(f64::NEG_INFINITY),
        _ => s.parse::<f64>().ok(),
    }
}

/// Labels after the opening `{`: the pairs and the text after the closing `}`.
type Labels = Vec<(String, String)>;

fn parse_labels(mut s: &str) -> Result<(Labels, &str), String> {
    let mut labels = Vec::new();
    loop {
        s = s.trim_start();
        if let Some(rest) = s.strip_prefix('}') {
            return Ok((labels, rest));
        }
        let key_end = s.find(|c: char| !is_name_char(c)).unwrap_or(s.len());
        if key_end == 0 {
            return Err("expected a label name or `}`".into());
        }
        let key = s[..key_end].to_string();
        s = s[key_end..].trim_start();
        s = s.strip_prefix('=').ok_or_else(|| format!("label `{key}`: expected `=`"))?;
        s = s.trim_start();
        s = s.strip_prefix('"').ok_or_else(|| format!("label `{key}`: expected a quoted value"))?;
        let mut value = String::new();
        let mut it = s.char_indices();
        let close = loop {
            match it.next() {
                None => return Err(format!("label `{key}`: unterminated value")),
                Some((i, '"')) => break i,
                Some((_, '\\')) => match it.next() {
                    Some((_, 'n')) => value.push('\n'),
                    Some((_, c)) => value.push(c),
                    None => return Err(format!("label `{key}`: unterminated value")),
                },
                Some((_, c)) => value.push(c),
            }
        };
        labels.push((key, value));
        s = s[close + 1..].trim_start();
        if let Some(rest) = s.strip_prefix(',') {
            s = rest;
        } else if !s.starts_with('}') {
            return Err("expected `,` or `}` after a label".into());
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_with_colons_labels_and_histograms() {
        let text = "# HELP vllm:num_requests_running Number of requests.\n\
            # TYPE vllm:num_requests_running gauge\n\
            vllm:num_requests_running{model_name=\"sim/x\"} 3\n\
            # TYPE vllm:ttft histogram\n\
            vllm:ttft_bucket{model_name=\"sim/x\",le=\"0.1\"} 1\n\
            vllm:ttft_bucket{model_name=\"sim/x\",le=\"+Inf\"} 2\n\
            vllm:ttft_sum{model_name=\"sim/x\"} 0.5\n\
            vllm:ttft_count{model_name=\"sim/x\"} 2\n\
            llamacpp:tokens_predicted_total 55\r\n\
            \n\
            plain_metric{a=\"x\",} 1.5e3 1700000000000\n";
        let e = parse(text);
        assert!(e.errors.is_empty(), "{:?}", e.errors);
        assert_eq!(e.samples.len(), 7);
        let s = &e.samples[0];
        assert_eq!(s.name, "vllm:num_requests_running");
        assert_eq!(s.label("model_name"), Some("sim/x"));
        assert_eq!(s.value, 3.0);
        assert_eq!(e.types["vllm:num_requests_running"], MetricType::Gauge);
        assert_eq!(e.types["vllm:ttft"], MetricType::Histogram);
        assert_eq!(e.samples[2].label("le"), Some("+Inf"));
        assert_eq!(e.sum("vllm:ttft_bucket"), Some(3.0));
        assert_eq!(e.sum("llamacpp:tokens_predicted_total"), Some(55.0));
        assert_eq!(e.sum("plain_metric"), Some(1500.0));
        assert_eq!(e.sum("absent"), None);
    }

    #[test]
    fn escapes_and_special_values() {
        let s = parse_sample(r#"m{path="a\"b\\c\nd", x = "y"} -Inf"#).unwrap();
        assert_eq!(s.label("path"), Some("a\"b\\c\nd"));
        assert_eq!(s.label("x"), Some("y"));
        assert_eq!(s.value, f64::NEG_INFINITY);
        assert!(parse_sample("m NaN").unwrap().value.is_nan());
        assert_eq!(parse_sample("m +Inf").unwrap().value, f64::INFINITY);
        // A `}` or `,` inside a quoted value is part of the value.
        let s = parse_sample(r#"m{a="x}y,z"} 2"#).unwrap();
        assert_eq!(s.label("a"), Some("x}y,z"));
    }

    #[test]
    fn bad_lines_are_reported_and_skipped() {
        let e = parse("ok 1\n9bad 1\nm{a=\"x\" 1\nm{a=x} 1\nm 1 2 3\nm abc\nok2 2\n");
        assert_eq!(e.samples.len(), 2);
        let lines: Vec<usize> = e.errors.iter().map(|(l, _)| *l).collect();
        assert_eq!(lines, vec![2, 3, 4, 5, 6]);
    }
}
