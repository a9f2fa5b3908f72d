//! The connection-reuse check of the preflight: whether the target keeps its connections
//! alive, probed by hand on one connection, and the note on a server that closes them in the
//! words its answers used.

use super::*;

/// What a server's answer said about keeping its connection open.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum KeepAliveWords {
    /// HTTP/1.0 without `Connection: keep-alive`: that protocol closes after each response.
    Http10,
    /// `Connection: close`.
    Close,
    /// Keep-alive: HTTP/1.1 without `Connection: close`, or HTTP/1.0 with `Connection: keep-alive`.
    KeepAlive,
}

pub(super) fn keep_alive_words(version: reqwest::Version, headers: &HeaderMap) -> KeepAliveWords {
    let says = |token: &str| {
        headers.get_all(reqwest::header::CONNECTION).iter().any(|v| {
            v.to_str().is_ok_and(|v| v.split(',').any(|t| t.trim().eq_ignore_ascii_case(token)))
        })
    };
    if says("close") {
        KeepAliveWords::Close
    } else if version <= reqwest::Version::HTTP_10 && !says("keep-alive") {
        KeepAliveWords::Http10
    } else {
        KeepAliveWords::KeepAlive
    }
}

/// The summary's note on a server that closes its connections, in the words its answers used.
pub(super) fn closes_connections_note(words: Option<KeepAliveWords>) -> String {
    let why = match words {
        Some(KeepAliveWords::Http10) => {
            "the server speaks HTTP/1.0, which closes the connection after each response"
        }
        Some(KeepAliveWords::Close) => {
            "the server closes connections after each response (it answers `Connection: close`)"
        }
        Some(KeepAliveWords::KeepAlive) => {
            "the server closes connections after each response although it announces keep-alive"
        }
        None => "the server closes connections after each response",
    };
    format!("{why}: every request opens a new connection (its setup is inside TTFT)")
}

impl Client {
    /// Whether the server keeps a connection usable after a response of this kind. Some
    /// servers (llama.cpp's, after a streamed response) close the connection although they
    /// announce keep-alive; a request sent on it before the close is noticed fails without the
    /// server reading it. On a plain-HTTP target without a proxy this is observed on one
    /// connection driven by hand; otherwise two requests in a row through the pool tell.
    /// `words`: what the server's first answer said about keeping the connection.
    pub(super) async fn keeps_connections_alive(
        &self,
        url: &str,
        body: &Value,
        words: &mut Option<KeepAliveWords>,
    ) -> bool {
        match self.connection_survives(url, body, words).await {
            Some(kept) => kept,
            None => self.pooled_requests_succeed(url, body, words).await,
        }
    }

    /// Two one-token requests on one TCP connection: `Some(false)` when the server closes it
    /// after the first response (within a grace period for its close to arrive) or the second
    /// request fails on it, `Some(true)` when both are answered on it, `None` when this cannot
    /// be observed directly (https, a proxy, the server unreachable or too slow).
    pub(super) async fn connection_survives(
        &self,
        url: &str,
        body: &Value,
        words: &mut Option<KeepAliveWords>,
    ) -> Option<bool> {
        use http_body_util::{BodyExt, Full};
        use hyper_util::rt::TokioIo;

        /// How long a closing server gets for its FIN to arrive after the last body byte.
        const CLOSE_GRACE: Duration = Duration::from_millis(300);
        // A one-token answer: the client's timeouts bound it like any preflight request.
        let answer_timeout = self.opts.request_timeout.min(self.opts.stall_timeout);

        if self.proxied {
            return None;
        }
        let uri: hyper::Uri = url.parse().ok()?;
        if uri.scheme_str() != Some("http") {
            return None;
        }
        let host = uri.host()?.trim_start_matches('[').trim_end_matches(']').to_string();
        let port = uri.port_u16().unwrap_or(80);
        let authority = uri.authority()?.to_string();
        // Origin form on the request line, as a client talking to the server directly sends it.
        let path = uri.path_and_query().map_or("/", |p| p.as_str()).to_string();
        let tcp = tokio::time::timeout(
            answer_timeout.min(Duration::from_secs(10)),
            tokio::net::TcpStream::connect((host.as_str(), port)),
        )
        .await
        .ok()?
        .ok()?;
        let _ = tcp.set_nodelay(true);
        let (mut sender, conn) =
            hyper::client::conn::http1::handshake::<_, Full<bytes::Bytes>>(TokioIo::new(tcp))
                .await
                .ok()?;
        let conn = tokio::spawn(conn);
        let verdict = async {
            for attempt in 0..2 {
                if attempt > 0 {
                    tokio::time::sleep(CLOSE_GRACE).await;
                    if conn.is_finished() || sender.is_closed() {
                        return Some(false);
                    }
                }
                if sender.ready().await.is_err() {
                    return Some(false);
                }
                let mut req = hyper::Request::post(path.clone())
                    .header(reqwest::header::HOST, authority.as_str())
                    .body(Full::new(bytes::Bytes::from(body.to_string())))
                    .ok()?;
                req.headers_mut().extend(self.headers.clone());
                type BoxError = Box<dyn std::error::Error + Send + Sync>;
                let answered = match tokio::time::timeout(answer_timeout, async {
                    let resp = sender.send_request(req).await.map_err(BoxError::from)?;
                    words.get_or_insert(keep_alive_words(resp.version(), resp.headers()));
                    let ok = resp.status().is_success();
                    let body = http_body_util::Limited::new(resp.into_body(), PREFLIGHT_BODY_BYTES);
                    match body.collect().await {
                        Ok(_) => Ok(ok),
                        // A body past what is kept says nothing about connections.
                        Err(e) if e.is::<http_body_util::LengthLimitError>() => Ok(false),
                        Err(e) => Err(e),
                    }
                })
                .await
                {
                    Err(_) => return None, // slow, not closed: no evidence either way
                    Ok(r) => r,
                };
                match answered {
                    Ok(true) => {}
                    // An error answer says nothing about connections.
                    Ok(false) => return None,
                    // The first request failing says nothing about reuse; the second failing
                    // on a connection the first left open is what this looks for.
                    Err(_) => return if attempt == 0 { None } else { Some(false) },
                }
            }
            Some(true)
        }
        .await;
        conn.abort();
        verdict
    }

    /// Two one-token requests in a row through the connection pool (each read to its end, up
    /// to what is kept, so the connection is reusable).
    pub(super) async fn pooled_requests_succeed(
        &self,
        url: &str,
        body: &Value,
        words: &mut Option<KeepAliveWords>,
    ) -> bool {
        for _ in 0..2 {
            match self.call_json(CHECK_REUSE, url, Some(body)).await {
                Ok(reply) => {
                    words.get_or_insert(reply.keep_alive);
                }
                Err(e) if !e.timed_out => return false,
                Err(_) => return true, // slow, not closed: no evidence either way
            }
        }
        true
    }
}
