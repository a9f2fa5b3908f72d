//! Trial isolation: before a trial, reset what an engine carries over from the last one, where
//! the engine offers it, so a trial is not faster for the prompts an earlier one cached.
//!
//! | engine | reset |
//! |--------|-------|
//! | vLLM, the simulator (`cargo xtask sim`) | `POST /reset_prefix_cache` |
//! | SGLang | `POST /flush_cache` |
//! | llama.cpp | `GET /slots`, then `POST /slots/{id}?action=erase` for each slot |
//!
//! The endpoints are tried in that order on the server's root (the base URL without `/v1`);
//! the first that answers 2xx is the reset. When none does, the trial runs unreset and its
//! summary says so. The embedded simulator is built anew for every run: nothing carries over.

use std::time::Duration;

pub use infergate_model::summary::Isolation;

/// Isolate a run of `profile` from the runs before it: the embedded simulator is built anew
/// for every run (nothing to do); a target's caches are reset (the first run's too: the engine
/// may have served other runs), where the engine offers it. A key that cannot be read fails the
/// run itself, with its message; the reset is tried without it.
pub async fn isolate(profile: &infergate_model::config::ResolvedProfile) -> Isolation {
    let Some((name, target)) = &profile.target else {
        return Isolation::FreshEngine;
    };
    let key =
        target.api_key_env.as_deref().and_then(|var| crate::client::read_api_key(var, name).ok());
    reset_caches(&target.base_url, key.as_deref()).await
}

/// The server's root from its API base (`http://h:8000/v1` -> `http://h:8000`).
fn server_root(base_url: &str) -> String {
    let t = base_url.trim_end_matches('/');
    t.strip_suffix("/v1").unwrap_or(t).to_string()
}

/// Reset the caches of the server at `base_url` (an API key sent as a bearer token).
pub async fn reset_caches(base_url: &str, api_key: Option<&str>) -> Isolation {
    let Ok(client) = crate::client::http_builder().timeout(Duration::from_secs(30)).build() else {
        return Isolation::NotOffered("no HTTP client".into());
    };
    let root = server_root(base_url);
    let with_key = |r: reqwest::RequestBuilder| match api_key {
        Some(k) => r.bearer_auth(k),
        None => r,
    };
    for path in ["/reset_prefix_cache", "/flush_cache"] {
        let sent = with_key(client.post(format!("{root}{path}"))).send().await;
        if sent.is_ok_and(|r| r.status().is_success()) {
            return Isolation::Reset(format!("POST {path}"));
        }
    }
    if let Some(n) = erase_slots(&client, &root, &with_key).await {
        return Isolation::Reset(format!("POST /slots/{{id}}?action=erase for {n} slot(s)"));
    }
    Isolation::NotOffered("tried POST /reset_prefix_cache, POST /flush_cache, GET /slots".into())
}

/// llama.cpp: erase every slot `GET /slots` lists; the slots erased, `None` when the server
/// has no slots endpoint or an erase failed.
async fn erase_slots(
    client: &reqwest::Client,
    root: &str,
    with_key: &dyn Fn(reqwest::RequestBuilder) -> reqwest::RequestBuilder,
) -> Option<usize> {
    let r = with_key(client.get(format!("{root}/slots"))).send().await.ok()?;
    if !r.status().is_success() {
        return None;
    }
    // At most a few KB per slot: a server sending more is not llama.cpp's slots endpoint.
    let body = r.bytes().await.ok().filter(|b| b.len() < 4 << 20)?;
    let slots: Vec<serde_json::Value> = serde_json::from_slice(&body).ok()?;
    let ids: Vec<u64> = slots.iter().filter_map(|s| s.get("id").and_then(|i| i.as_u64())).collect();
    for id in &ids {
        let url = format!("{root}/slots/{id}?action=erase");
        let ok = with_key(client.post(url)).send().await.ok()?.status().is_success();
        if !ok {
            return None;
        }
    }
    Some(ids.len())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_root_drops_the_api_suffix() {
        assert_eq!(server_root("http://h:8000/v1"), "http://h:8000");
        assert_eq!(server_root("http://h:8000/v1/"), "http://h:8000");
        assert_eq!(server_root("http://h:8080"), "http://h:8080");
        assert!(Isolation::Reset("POST /flush_cache".into()).done());
        assert!(!Isolation::NotOffered("x".into()).done());
        assert!(Isolation::NotOffered("x".into()).text().contains("carried over"));
    }
}
