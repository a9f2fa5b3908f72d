//! The configurations a tune measures: `--grid KEY=V,V,...` axes or a `[tune]` table
//! (`configs/tune.toml`: `[tune.grid]` keys with value lists, `[tune.variants.NAME]` explicit
//! named variants), expanded into [`Variant`]s, each named by the keys that differ between them,
//! and written out as a variant of the governed engine config ([`variant_text`]).
//!
//! Pure: text in, values out; the command writes the files.

use std::collections::BTreeMap;

use infergate_model::config::{ConfigError, ConfigKey, EngineConfig, Source};
use serde::Deserialize;

/// One axis of the grid: a dotted engine-config key and the values to try, in order.
#[derive(Clone, Debug, PartialEq)]
pub struct Axis {
    pub key: ConfigKey,
    pub values: Vec<toml::Value>,
}

/// One configuration: its name and the keys it sets, in axis order.
#[derive(Clone, Debug, PartialEq)]
pub struct Variant {
    pub name: String,
    pub settings: Vec<(ConfigKey, toml::Value)>,
}

/// What to search: grid axes, explicit variants, or both (the variants after the grid).
#[derive(Clone, Debug, Default, PartialEq)]
pub struct TuneSpec {
    pub axes: Vec<Axis>,
    pub variants: Vec<Variant>,
}

/// A value as written on the command line: a TOML value (`64`, `true`, `0.9`, `"fp8"`), else
/// the text as a string (`fp8`).
pub fn parse_value(s: &str) -> toml::Value {
    let s = s.trim();
    match toml::from_str::<toml::Table>(&format!("v = {s}")) {
        Ok(mut t) => t.remove("v").unwrap_or_else(|| toml::Value::String(s.to_string())),
        Err(_) => toml::Value::String(s.to_string()),
    }
}

/// `--grid scheduler.max_num_seqs=64,128,256`: one axis. Refused: no `=`, a key that is not
/// `section.key`, no value, a value listed twice.
pub fn parse_axis(spec: &str) -> Result<Axis, String> {
    let Some((key, values)) = spec.split_once('=') else {
        return Err(format!(
            "`{spec}` is not KEY=V,V,... (e.g. scheduler.max_num_seqs=64,128,256)"
        ));
    };
    let key = check_key(ConfigKey::parse(key.trim()).map_err(|e| e.key))?;
    let values: Vec<toml::Value> =
        values.split(',').map(str::trim).filter(|v| !v.is_empty()).map(parse_value).collect();
    axis(key, values)
}

/// A key of two segments or more (the text as given when it is no key at all).
fn check_key(key: Result<ConfigKey, String>) -> Result<ConfigKey, String> {
    match key {
        Ok(k) if k.segments().len() >= 2 => Ok(k),
        Ok(k) => Err(not_a_key(k.as_str())),
        Err(text) => Err(not_a_key(&text)),
    }
}

fn not_a_key(key: &str) -> String {
    format!("`{key}` is not a dotted engine-config key such as scheduler.max_num_seqs")
}

fn axis(key: ConfigKey, values: Vec<toml::Value>) -> Result<Axis, String> {
    if values.is_empty() {
        return Err(format!("`{key}` has no value to try"));
    }
    for (i, v) in values.iter().enumerate() {
        if values[..i].contains(v) {
            return Err(format!("`{key}` lists {v} twice"));
        }
    }
    Ok(Axis { key, values })
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct TuneFileToml {
    tune: TuneTable,
}

#[derive(Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct TuneTable {
    #[serde(default)]
    grid: toml::Table,
    #[serde(default)]
    variants: BTreeMap<String, toml::Table>,
}

/// Leaves of a nested table as their segments, in the table's order.
fn leaves(prefix: &[String], table: &toml::Table, out: &mut Vec<(Vec<String>, toml::Value)>) {
    for (k, v) in table {
        let mut key = prefix.to_vec();
        key.push(k.clone());
        match v {
            toml::Value::Table(t) => leaves(&key, t, out),
            v => out.push((key, v.clone())),
        }
    }
}

/// A leaf's key, written as its segments are: the text of an invalid one for messages.
fn leaf_key(segments: &[String]) -> Result<ConfigKey, String> {
    ConfigKey::from_segments(segments).map_err(|e| e.key)
}

/// A `[tune]` table: `[tune.grid]` (each key a list of values) and `[tune.variants.NAME]` (each
/// a set of `section.key = value`). Errors name the file, the line and what is valid.
pub fn read_tune_table(source: &Source) -> Result<TuneSpec, ConfigError> {
    let parsed: TuneFileToml = source.parse()?;
    let mut spec = TuneSpec::default();
    let mut grid = Vec::new();
    leaves(&[], &parsed.tune.grid, &mut grid);
    for (segments, v) in grid {
        let path: Vec<&str> =
            ["tune", "grid"].into_iter().chain(segments.iter().map(String::as_str)).collect();
        let key = leaf_key(&segments);
        let key_text = key.as_ref().map_or_else(|t| t.clone(), |k| k.to_string());
        let toml::Value::Array(values) = v else {
            let key = key_text;
            return Err(source.error_at(
                &path,
                format!("`{key}` must be a list of values to try, e.g. {key} = [64, 128]"),
            ));
        };
        let a =
            check_key(key).and_then(|k| axis(k, values)).map_err(|m| source.error_at(&path, m))?;
        spec.axes.push(a);
    }
    for (name, table) in &parsed.tune.variants {
        let mut leaves_of = Vec::new();
        leaves(&[], table, &mut leaves_of);
        if leaves_of.is_empty() {
            return Err(source.error_at(
                &["tune", "variants", name],
                format!("variant `{name}` sets no key; give it `section.key = value` lines"),
            ));
        }
        let mut settings = Vec::new();
        for (segments, v) in leaves_of {
            let key = check_key(leaf_key(&segments))
                .map_err(|m| source.error_at(&["tune", "variants", name], m))?;
            settings.push((key, v));
        }
        spec.variants.push(Variant { name: name.clone(), settings });
    }
    if spec.axes.is_empty() && spec.variants.is_empty() {
        return Err(source.error_at(
            &["tune"],
            "[tune] names nothing to try: add [tune.grid] lists or [tune.variants.NAME] tables",
        ));
    }
    Ok(spec)
}

/// A value as it is written in names and tables: strings without quotes.
pub fn value_text(v: &toml::Value) -> String {
    match v {
        toml::Value::String(s) => s.clone(),
        v => v.to_string(),
    }
}

/// The short name of a key among `keys`: its last part when no other key ends the same.
fn short_key<'a>(key: &'a ConfigKey, keys: &[&ConfigKey]) -> &'a str {
    let leaf = key.leaf();
    let same = keys.iter().filter(|k| k.leaf() == leaf).count();
    if same > 1 { key.as_str() } else { leaf }
}

/// Most configurations a grid may describe (the product of its axes' value counts): 10^12.
/// Configurations are built one at a time from their index, never all at once, so a large grid
/// with `--max-configs` costs only what is measured; a product beyond this is refused.
pub const MAX_GRID_PRODUCT: u64 = 1_000_000_000_000;
/// Configurations beyond `--max-configs` are rows of `tune.json` (`skipped: beyond
/// --max-configs`) up to this many; more are only counted.
pub const LISTED_SKIPS: u64 = 1000;
/// Most configurations one tune measures (after `--max-configs`): 10000.
pub const MAX_TUNE_CONFIGS: u64 = 10_000;

/// A grid whose product of axis sizes is beyond [`MAX_GRID_PRODUCT`]: each axis's value count.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error(
    "the grid has {} configurations, more than a tune can describe ({MAX_GRID_PRODUCT}); narrow \
     the axes",
    .sizes.iter().map(usize::to_string).collect::<Vec<_>>().join(" x ")
)]
pub struct GridTooLarge {
    pub sizes: Vec<usize>,
}

impl TuneSpec {
    /// How many configurations the spec describes: the grid's product and the explicit
    /// variants; refused above [`MAX_GRID_PRODUCT`].
    pub fn count(&self) -> Result<u64, GridTooLarge> {
        let mut product: u64 = if self.axes.is_empty() { 0 } else { 1 };
        for a in &self.axes {
            product = product
                .checked_mul(a.values.len() as u64)
                .filter(|p| *p <= MAX_GRID_PRODUCT)
                .ok_or_else(|| GridTooLarge {
                    sizes: self.axes.iter().map(|a| a.values.len()).collect(),
                })?;
        }
        Ok(product + self.variants.len() as u64)
    }

    /// Configuration `i` of [`expand`]'s order, built alone (`i < count()`).
    pub fn variant(&self, i: u64) -> Variant {
        let product: u64 = if self.axes.is_empty() {
            0
        } else {
            self.axes.iter().map(|a| a.values.len() as u64).product()
        };
        if i >= product {
            return self.variants[(i - product) as usize].clone();
        }
        let keys: Vec<&ConfigKey> = self.axes.iter().map(|a| &a.key).collect();
        // Mixed radix, the first axis the most significant digit.
        let mut rest = i;
        let mut combo = vec![toml::Value::Boolean(false); self.axes.len()];
        for (k, a) in self.axes.iter().enumerate().rev() {
            let n = a.values.len() as u64;
            combo[k] = a.values[(rest % n) as usize].clone();
            rest /= n;
        }
        let named: Vec<String> = self
            .axes
            .iter()
            .zip(&combo)
            .filter(|(a, _)| a.values.len() > 1)
            .map(|(a, v)| format!("{}={}", short_key(&a.key, &keys), value_text(v)))
            .collect();
        let name = if named.is_empty() { "grid".to_string() } else { named.join(" ") };
        let settings = self.axes.iter().map(|a| a.key.clone()).zip(combo).collect();
        Variant { name, settings }
    }
}

/// Every configuration of `spec`: the grid's product (the first axis varies slowest), then the
/// explicit variants (for small specs; a tune builds them one at a time, [`TuneSpec::variant`]). A grid configuration is named by the keys that differ between
/// configurations (`max_num_seqs=128 enable_chunked_prefill=false`); an axis with one value is
/// set but not named; a grid of single values is named `grid`.
pub fn expand(spec: &TuneSpec) -> Vec<Variant> {
    let n = spec.count().unwrap_or(0);
    (0..n).map(|i| spec.variant(i)).collect()
}

/// A directory name for a configuration: its name with every character outside
/// `[A-Za-z0-9._-]` replaced (`max_num_seqs-128_enable_chunked_prefill-false`).
pub fn dir_name(name: &str) -> String {
    let s: String = name
        .chars()
        .map(|c| match c {
            '=' => '-',
            c if c.is_ascii_alphanumeric() || c == '.' || c == '-' || c == '_' => c,
            _ => '_',
        })
        .collect();
    if s.is_empty() { "config".into() } else { s }
}

/// The governed engine config `base` with each of `settings` set (sections created when
/// absent), as the text of a new file headed by a comment naming the base file and the
/// configuration. The variant is validated as an engine config: a bad combination is the error
/// of that validation, naming the key.
pub fn variant_text(base: &Source, variant: &Variant) -> Result<String, ConfigError> {
    let mut table: toml::Table = toml::from_str(&base.text).map_err(|e| base.toml_error(&e))?;
    for (key, value) in &variant.settings {
        key.set_in(&mut table, value.clone()).map_err(|e| {
            let s = &e.segment;
            base.error_at(
                &[key.section()],
                format!("`{s}` is not a table, so `{key}` cannot be set"),
            )
        })?;
    }
    let body = toml::to_string(&table).expect("TOML tables serialize");
    let text = format!(
        "# {} with {}, written by `cargo xtask tune`.\n\n{body}",
        base.path.display(),
        variant.name
    );
    // An invalid variant is named by the configuration, not by a line of a file nobody wrote.
    let named = format!("{} with {}", base.path.display(), variant.name);
    EngineConfig::from_source(&Source::new(base.path.clone(), text.clone())).map_err(|e| {
        ConfigError { path: named.into(), line: None, col: None, message: e.message }
    })?;
    Ok(text)
}

#[cfg(test)]
mod tests {
    use super::*;

    const BASE: &str = "[engine]\nmodel = \"m\"\nmax_model_len = 4096\n[scheduler]\n\
        max_num_seqs = 64\nmax_num_batched_tokens = 4096\n";

    #[test]
    fn axes_parse_typed_values_and_refuse_malformed_specs() {
        let a = parse_axis("scheduler.max_num_seqs=64, 128,256").unwrap();
        assert_eq!(a.key, "scheduler.max_num_seqs");
        assert_eq!(a.values, vec![64.into(), 128.into(), 256.into()]);
        let b = parse_axis("scheduler.enable_chunked_prefill=true,false").unwrap();
        assert_eq!(b.values, vec![true.into(), false.into()]);
        let q = parse_axis("engine.quantization=fp8,\"awq\"").unwrap();
        assert_eq!(q.values, vec!["fp8".into(), "awq".into()]);
        assert!(parse_axis("max_num_seqs=1").unwrap_err().contains("dotted"));
        assert!(parse_axis("scheduler.max_num_seqs").unwrap_err().contains("KEY=V"));
        assert!(parse_axis("scheduler.max_num_seqs=").unwrap_err().contains("no value"));
        assert!(parse_axis("scheduler.max_num_seqs=4,4").unwrap_err().contains("twice"));
    }

    #[test]
    fn the_grid_expands_in_order_and_names_rows_by_their_differing_keys() {
        let spec = TuneSpec {
            axes: vec![
                parse_axis("scheduler.max_num_seqs=64,128,256").unwrap(),
                parse_axis("scheduler.enable_chunked_prefill=true,false").unwrap(),
                parse_axis("engine.max_model_len=4096").unwrap(),
            ],
            variants: vec![Variant {
                name: "small".into(),
                settings: vec![(ConfigKey::literal("scheduler.max_num_seqs"), 8.into())],
            }],
        };
        let names: Vec<String> = expand(&spec).into_iter().map(|v| v.name).collect();
        assert_eq!(
            names,
            [
                "max_num_seqs=64 enable_chunked_prefill=true",
                "max_num_seqs=64 enable_chunked_prefill=false",
                "max_num_seqs=128 enable_chunked_prefill=true",
                "max_num_seqs=128 enable_chunked_prefill=false",
                "max_num_seqs=256 enable_chunked_prefill=true",
                "max_num_seqs=256 enable_chunked_prefill=false",
                "small",
            ]
        );
        let first = &expand(&spec)[0];
        assert_eq!(first.settings.len(), 3, "single-valued axes are set, not named");
        assert_eq!(dir_name(&first.name), "max_num_seqs-64_enable_chunked_prefill-true");
        // Two keys with the same last part keep their sections.
        let spec = TuneSpec {
            axes: vec![parse_axis("a.n=1,2").unwrap(), parse_axis("b.n=3,4").unwrap()],
            variants: vec![],
        };
        assert_eq!(expand(&spec)[0].name, "a.n=1 b.n=3");
    }

    #[test]
    fn a_huge_grid_is_counted_and_built_by_index_and_refused_past_the_bound() {
        let axis = |k: &str, n: usize| Axis {
            key: ConfigKey::parse(k).unwrap(),
            values: (0..n as i64).map(toml::Value::from).collect(),
        };
        let spec = TuneSpec {
            axes: vec![axis("a.w", 100), axis("a.x", 100), axis("a.y", 100), axis("a.z", 100)],
            variants: vec![],
        };
        assert_eq!(spec.count(), Ok(100_000_000));
        let last = spec.variant(99_999_999);
        assert_eq!(last.name, "w=99 x=99 y=99 z=99");
        assert_eq!(spec.variant(123).name, "w=0 x=0 y=1 z=23");
        let big = TuneSpec {
            axes: (0..7).map(|k| axis(&format!("s.k{k}"), 100)).collect(),
            variants: vec![],
        };
        let e = big.count().unwrap_err().to_string();
        assert!(e.contains("100 x 100 x 100 x 100 x 100 x 100 x 100 configurations"), "{e}");
    }

    #[test]
    fn tune_tables_give_axes_and_variants_or_errors_at_their_line() {
        let text = "[tune.grid]\nscheduler.max_num_seqs = [1, 2, 4]\n\
            [tune.variants.big]\nscheduler.max_num_seqs = 16\nengine.max_model_len = 1024\n";
        let spec = read_tune_table(&Source::new("configs/tune.toml", text)).unwrap();
        assert_eq!(spec.axes, vec![parse_axis("scheduler.max_num_seqs=1,2,4").unwrap()]);
        assert_eq!(spec.variants[0].name, "big");
        assert_eq!(spec.variants[0].settings.len(), 2);
        let err =
            read_tune_table(&Source::new("t.toml", "[tune.grid]\nscheduler.max_num_seqs = 4\n"))
                .unwrap_err();
        assert_eq!((err.line, err.message.contains("list of values")), (Some(2), true), "{err}");
        let err = read_tune_table(&Source::new("t.toml", "[tune]\nsearch = 1\n")).unwrap_err();
        assert!(err.message.contains("unknown field") && err.message.contains("grid"), "{err}");
        let err = read_tune_table(&Source::new("t.toml", "[tune]\n")).unwrap_err();
        assert!(err.message.contains("nothing to try"), "{err}");
    }

    #[test]
    fn variants_set_keys_and_are_validated_as_engine_configs() {
        let base = Source::new("configs/engine.toml", BASE);
        let v = Variant {
            name: "max_num_seqs=8".into(),
            settings: vec![
                (ConfigKey::literal("scheduler.max_num_seqs"), 8.into()),
                (ConfigKey::literal("scheduler.enable_chunked_prefill"), true.into()),
            ],
        };
        let text = variant_text(&base, &v).unwrap();
        assert!(text.starts_with("# configs/engine.toml with max_num_seqs=8"), "{text}");
        let cfg = EngineConfig::from_source(&Source::new("v", text)).unwrap();
        assert_eq!(cfg.scheduler.max_num_seqs, 8);
        assert!(cfg.scheduler.enable_chunked_prefill);
        assert_eq!(cfg.engine.max_model_len, Some(4096));
        let bad = Variant {
            name: "bad".into(),
            settings: vec![(ConfigKey::literal("scheduler.max_num_seqs"), 0.into())],
        };
        let err = variant_text(&base, &bad).unwrap_err();
        assert!(err.message.contains("max_num_seqs"), "{err}");
        // Named by the configuration, never by a line of the generated text.
        assert!(err.to_string().starts_with("configs/engine.toml with bad: "), "{err}");
        let unknown = Variant {
            name: "typo".into(),
            settings: vec![(ConfigKey::literal("scheduler.max_nm_seqs"), 1.into())],
        };
        assert!(variant_text(&base, &unknown).is_err());
    }
}
