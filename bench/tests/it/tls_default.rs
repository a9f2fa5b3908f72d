//! The default build speaks TLS: an `https://` URL is dialled with a TLS handshake, never
//! refused with "invalid URL, scheme is not http" (what a build without TLS answers).

use std::time::Duration;

#[tokio::test]
async fn an_https_url_gets_a_tls_handshake_in_the_default_build() {
    // A server that accepts and closes at once: the handshake fails, after it was attempted.
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let server = tokio::spawn(async move {
        for _ in 0..4 {
            if let Ok((s, _)) = listener.accept().await {
                drop(s);
            }
        }
    });
    let client = bench::client::http_builder().no_proxy().build().unwrap();
    let req = client.get(format!("https://{addr}/v1/models")).timeout(Duration::from_secs(10));
    let err = req.send().await.unwrap_err();
    let chain = format!("{err:?}");
    assert!(!chain.contains("scheme is not http"), "{chain}");
    assert!(err.is_connect() || err.is_request(), "a failed handshake, not a refusal: {chain}");
    server.abort();
}
