//! Tests of the filtering proxy.

use super::*;

fn ep(host: &str, port: u16) -> Endpoint {
    Endpoint {
        host: host.into(),
        port,
        why: "test".into(),
    }
}

#[test]
fn endpoints_come_from_urls() {
    let e = Endpoint::from_url("https://API.Anthropic.com./v1/messages", "m").unwrap();
    assert_eq!((e.host.as_str(), e.port), ("api.anthropic.com", 443));
    let e = Endpoint::from_url("http://127.0.0.1:8767/v1", "m").unwrap();
    assert_eq!((e.host.as_str(), e.port), ("127.0.0.1", 8767));
    let e = Endpoint::from_url("http://user:pw@[::1]:9/v1", "m").unwrap();
    assert_eq!(
        (e.host.as_str(), e.port, e.label()),
        ("::1", 9, "[::1]:9".into())
    );
    for bad in [
        "ftp://x/",
        "x.example",
        "http://",
        "http://a b/",
        "https://h:0/",
    ] {
        assert_eq!(Endpoint::from_url(bad, "m"), None, "{bad}");
    }
}

#[test]
fn wildcards_match_names_below_the_domain_only() {
    let e = ep("*.amazonaws.com", 443);
    assert!(e.matches("bedrock-runtime.us-east-1.amazonaws.com", 443));
    assert!(!e.matches("amazonaws.com", 443));
    assert!(!e.matches("evilamazonaws.com", 443));
    assert!(!e.matches("x.amazonaws.com", 80));
    assert!(ep("api.x.ai", 443).matches("api.x.ai", 443));
    assert!(!ep("api.x.ai", 443).matches("x.ai", 443));
}

#[test]
fn public_hosts_exclude_the_loopback_private_and_metadata_addresses() {
    for ip in [
        "127.0.0.1",
        "10.1.2.3",
        "172.16.0.1",
        "192.168.1.1",
        "169.254.169.254",
        "100.64.0.1",
        "0.0.0.0",
        "::1",
        "::",
        "fd00::1",
        "fe80::1",
        "::ffff:127.0.0.1",
        "::ffff:169.254.169.254",
    ] {
        assert!(!is_public(ip.parse().unwrap()), "{ip}");
    }
    for ip in ["1.1.1.1", "140.82.112.3", "2606:4700::1111"] {
        assert!(is_public(ip.parse().unwrap()), "{ip}");
    }
    let policy = Policy {
        network: NetworkSpec {
            endpoints: vec![ep("127.0.0.1", 8767)],
            public_hosts: Some("web tools granted".into()),
            transparent: false,
        },
        upstream: None,
    };
    assert!(matches!(
        policy.decide("127.0.0.1", 8767),
        Decision::Endpoint
    ));
    assert!(matches!(
        policy.decide("127.0.0.1", 22),
        Decision::Refused(_)
    ));
    assert!(matches!(
        policy.decide("localhost", 80),
        Decision::Refused(_)
    ));
    assert!(matches!(
        policy.decide("169.254.169.254", 80),
        Decision::Refused(_)
    ));
    assert!(matches!(
        policy.decide("example.com", 443),
        Decision::Public
    ));
    let closed = Policy {
        network: NetworkSpec {
            endpoints: vec![ep("127.0.0.1", 8767)],
            public_hosts: None,
            transparent: false,
        },
        upstream: None,
    };
    assert!(matches!(
        closed.decide("example.com", 443),
        Decision::Refused(_)
    ));
}

#[test]
fn an_absolute_request_is_sent_on_in_origin_form_without_proxy_headers() {
    let head = b"POST http://127.0.0.1:8767/v1/chat?x=1 HTTP/1.1\r\nHost: 127.0.0.1:8767\r\nProxy-Connection: Keep-Alive\r\nProxy-Authorization: Basic eA==\r\nConnection: keep-alive\r\nContent-Length: 2\r\n\r\n";
    let h = parse_head(head, b"{}".to_vec()).unwrap();
    assert!(!h.connect);
    assert_eq!((h.host.as_str(), h.port), ("127.0.0.1", 8767));
    assert_eq!(
        String::from_utf8(h.forward).unwrap(),
        "POST /v1/chat?x=1 HTTP/1.1\r\nHost: 127.0.0.1:8767\r\nContent-Length: 2\r\nConnection: close\r\n\r\n"
    );
    assert_eq!(h.rest, b"{}");
    let h = parse_head(
        b"CONNECT Api.X.ai:443 HTTP/1.1\r\nHost: api.x.ai:443\r\n\r\n",
        vec![],
    )
    .unwrap();
    assert!(h.connect);
    assert_eq!((h.host.as_str(), h.port), ("api.x.ai", 443));
    for bad in [
        &b"GET /local HTTP/1.1\r\n\r\n"[..],
        b"GET https://x/ HTTP/1.1\r\n\r\n",
        b"CONNECT x HTTP/1.1\r\n\r\n",
        b"GET http://u:p@x/ HTTP/1.1\r\n\r\n",
        b"GET http://x/ HTTP/2\r\n\r\n",
        b"GET  http://x/ HTTP/1.1\r\n\r\n",
    ] {
        assert!(
            parse_head(bad, vec![]).is_err(),
            "{}",
            String::from_utf8_lossy(bad)
        );
    }
}

#[test]
fn the_users_proxy_is_read_from_its_url() {
    let up = Upstream::from_url("http://u%40x:p@proxy.corp:8080/").unwrap();
    assert_eq!((up.host.as_str(), up.port), ("proxy.corp", 8080));
    assert_eq!(up.authorization.as_deref(), Some("Basic dUB4OnA="));
    assert_eq!(
        Upstream::from_url("proxy.corp:3128").map(|u| u.port),
        Some(3128)
    );
    assert_eq!(Upstream::from_url("https://proxy.corp"), None);
    assert_eq!(Upstream::from_url("socks5://proxy.corp"), None);
}

async fn http_server() -> (u16, tokio::task::JoinHandle<Vec<u8>>) {
    let l = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = l.local_addr().unwrap().port();
    let h = tokio::spawn(async move {
        let (mut s, _) = l.accept().await.unwrap();
        let mut buf = vec![0u8; 4096];
        let mut got = Vec::new();
        while !got.windows(4).any(|w| w == b"\r\n\r\n") {
            let n = s.read(&mut buf).await.unwrap();
            got.extend_from_slice(&buf[..n]);
        }
        s.write_all(b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok")
            .await
            .unwrap();
        got
    });
    (port, h)
}

/// A proxy on `socket` that lets through 127.0.0.1:`port` alone.
fn proxy_to(socket: &Utf8Path, port: u16) -> Proxy {
    Proxy::start(
        socket,
        Policy {
            network: NetworkSpec {
                endpoints: vec![ep("127.0.0.1", port)],
                public_hosts: None,
                transparent: false,
            },
            upstream: None,
        },
    )
    .unwrap()
}

async fn ask(socket: &Utf8Path, req: &str) -> String {
    let mut c = UnixStream::connect(socket.as_std_path()).await.unwrap();
    c.write_all(req.as_bytes()).await.unwrap();
    let mut out = Vec::new();
    let read = tokio::time::timeout(std::time::Duration::from_secs(10), c.read_to_end(&mut out));
    assert!(read.await.is_ok(), "no reply to {req:?}");
    String::from_utf8_lossy(&out).into_owned()
}

#[tokio::test]
async fn the_proxy_carries_allowed_requests_and_refuses_the_rest() {
    let tmp = tempfile::tempdir().unwrap();
    let socket = Utf8Path::from_path(tmp.path()).unwrap().join("proxy.sock");
    let (port, server) = http_server().await;
    let proxy = proxy_to(&socket, port);
    let reply = ask(
        &socket,
        &format!("GET http://127.0.0.1:{port}/v1/models HTTP/1.1\r\nHost: x\r\n\r\n"),
    )
    .await;
    assert!(reply.ends_with("\r\n\r\nok"), "{reply}");
    let seen = String::from_utf8(server.await.unwrap()).unwrap();
    assert!(seen.starts_with("GET /v1/models HTTP/1.1\r\n"), "{seen}");
    assert!(seen.contains("Connection: close"), "{seen}");

    let other = ask(&socket, "CONNECT 127.0.0.1:22 HTTP/1.1\r\n\r\n").await;
    assert!(other.starts_with("HTTP/1.1 403"), "{other}");
    let odd = ask(&socket, "GET /etc/passwd HTTP/1.1\r\n\r\n").await;
    assert!(odd.starts_with("HTTP/1.1 400"), "{odd}");
    let traffic = proxy.stop();
    assert_eq!(traffic.reached.get(&format!("127.0.0.1:{port}")), Some(&1));
    assert_eq!(traffic.refused.get("127.0.0.1:22"), Some(&1));
    assert_eq!(traffic.refused.get("(malformed request)"), Some(&1));
}

/// A connection still open when the proxy stops (the run ended while its agent talked to the
/// model) is counted: the receipt shows what was reached, not only what finished.
#[tokio::test]
async fn a_connection_still_open_when_the_proxy_stops_is_counted() {
    let tmp = tempfile::tempdir().unwrap();
    let socket = Utf8Path::from_path(tmp.path()).unwrap().join("proxy.sock");
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = listener.local_addr().unwrap().port();
    let proxy = proxy_to(&socket, port);
    let mut c = UnixStream::connect(socket.as_std_path()).await.unwrap();
    c.write_all(format!("CONNECT 127.0.0.1:{port} HTTP/1.1\r\n\r\n").as_bytes())
        .await
        .unwrap();
    let (_held, _) = listener.accept().await.unwrap();
    let mut reply = [0u8; 12];
    c.read_exact(&mut reply).await.unwrap();
    assert_eq!(&reply, b"HTTP/1.1 200");
    let traffic = proxy.stop();
    assert_eq!(
        traffic.reached.get(&format!("127.0.0.1:{port}")),
        Some(&1),
        "{traffic:?}"
    );
}

#[tokio::test]
async fn the_users_proxy_is_chained_with_its_credentials() {
    let tmp = tempfile::tempdir().unwrap();
    let socket = Utf8Path::from_path(tmp.path()).unwrap().join("proxy.sock");
    // The user's proxy: sees the request in absolute form, with its credentials.
    let (port, upstream) = http_server().await;
    let proxy = Proxy::start(
        &socket,
        Policy {
            network: NetworkSpec {
                endpoints: vec![ep("gateway.corp", 8080)],
                public_hosts: None,
                transparent: false,
            },
            upstream: Upstream::from_url(&format!("http://u:p@127.0.0.1:{port}")),
        },
    )
    .unwrap();
    let reply = ask(
        &socket,
        "POST http://gateway.corp:8080/v1 HTTP/1.1\r\nHost: gateway.corp:8080\r\nProxy-Authorization: Basic forged\r\n\r\n",
    )
    .await;
    assert!(reply.ends_with("ok"), "{reply}");
    let seen = String::from_utf8(upstream.await.unwrap()).unwrap();
    assert!(
        seen.starts_with("POST http://gateway.corp:8080/v1 HTTP/1.1\r\n"),
        "{seen}"
    );
    assert!(
        seen.contains("Proxy-Authorization: Basic dTpw\r\n"),
        "{seen}"
    );
    assert!(!seen.contains("forged"), "{seen}");
    // What is not an endpoint never reaches the user's proxy either.
    let refused = ask(&socket, "CONNECT elsewhere.corp:443 HTTP/1.1\r\n\r\n").await;
    assert!(refused.starts_with("HTTP/1.1 403"), "{refused}");
    drop(proxy);
}

#[tokio::test]
async fn a_public_host_that_resolves_to_the_loopback_is_refused() {
    let tmp = tempfile::tempdir().unwrap();
    let socket = Utf8Path::from_path(tmp.path()).unwrap().join("proxy.sock");
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = listener.local_addr().unwrap().port();
    let proxy = Proxy::start(
        &socket,
        Policy {
            network: NetworkSpec {
                endpoints: vec![],
                public_hosts: Some("web tools granted".into()),
                transparent: false,
            },
            upstream: None,
        },
    )
    .unwrap();
    // Spellings of 127.0.0.1 that are not an address literal to the policy but resolve
    // to the loopback; and the loopback's names.
    for host in ["127.1", "2130706433", "0x7f.1", "LOCALHOST.", "a.localhost"] {
        let reply = ask(
            &socket,
            &format!("GET http://{host}:{port}/ HTTP/1.1\r\nHost: {host}\r\n\r\n"),
        )
        .await;
        assert!(
            reply.starts_with("HTTP/1.1 403") || reply.starts_with("HTTP/1.1 502"),
            "{host}: {reply}"
        );
    }
    let accepted =
        tokio::time::timeout(std::time::Duration::from_millis(100), listener.accept()).await;
    assert!(accepted.is_err(), "the loopback service was reached");
    drop(proxy);
}

#[test]
fn base64_matches_the_standard_alphabet() {
    for (input, out) in [
        ("", ""),
        ("f", "Zg=="),
        ("fo", "Zm8="),
        ("foo", "Zm9v"),
        ("foob", "Zm9vYg=="),
        ("u:p", "dTpw"),
    ] {
        assert_eq!(base64(input.as_bytes()), out);
    }
}

proptest::proptest! {
    /// No request head, however malformed, panics the proxy; whatever it forwards names
    /// the host it checked, in origin form, and ends its head once.
    #[test]
    fn any_request_head_is_parsed_or_refused(
        method in "[A-Z]{1,7}",
        host in "[a-zA-Z0-9.:\\[\\]@-]{0,20}",
        path in "[ -~]{0,20}",
        extra in proptest::collection::vec("[ -~]{0,30}", 0..4),
    ) {
        let mut head = format!("{method} http://{host}{path} HTTP/1.1\r\n");
        for h in &extra {
            head.push_str(h);
            head.push_str("\r\n");
        }
        head.push_str("\r\n");
        if let Ok(h) = parse_head(head.as_bytes(), Vec::new()) {
            let fwd = String::from_utf8(h.forward).unwrap();
            let start = format!("{method} /");
            proptest::prop_assert!(fwd.starts_with(&start));
            proptest::prop_assert!(fwd.ends_with("Connection: close\r\n\r\n"));
            proptest::prop_assert_eq!(fwd.matches("\r\n\r\n").count(), 1);
            proptest::prop_assert!(!h.host.contains('@') && !h.host.is_empty());
        }
        let _ = parse_head(format!("CONNECT {host} HTTP/1.1\r\n\r\n").as_bytes(), Vec::new());
        let _ = Endpoint::from_url(&format!("https://{host}{path}"), "p");
        let _ = Upstream::from_url(&format!("http://{host}"));
    }
}
