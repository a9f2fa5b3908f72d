//! Engine parameters as a run records them (a JSON tree), flattened to dotted keys: what the
//! summary's parameter diff, the served values' check (`crate::served`), the merge and the
//! trial sets compare key by key.

use std::collections::BTreeMap;

/// Parameters flattened to dotted keys (`scheduler.max_num_seqs`), in key order.
pub fn flatten_params(params: &serde_json::Value) -> BTreeMap<String, serde_json::Value> {
    fn walk(prefix: &str, v: &serde_json::Value, out: &mut BTreeMap<String, serde_json::Value>) {
        match v {
            serde_json::Value::Object(map) => {
                for (k, v) in map {
                    let key = if prefix.is_empty() { k.clone() } else { format!("{prefix}.{k}") };
                    walk(&key, v, out);
                }
            }
            other => {
                out.insert(prefix.to_string(), other.clone());
            }
        }
    }
    let mut out = BTreeMap::new();
    walk("", params, &mut out);
    out
}
