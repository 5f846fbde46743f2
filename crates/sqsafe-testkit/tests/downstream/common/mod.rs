//! What the fake API's tests share (downstream.rs, downstream_honoured.rs): one HTTP/1.1 exchange over a plain socket.

use sqsafe_testkit::FakeDownstream;
use tokio::io::{AsyncReadExt, AsyncWriteExt};

/// One HTTP/1.1 exchange over a fresh connection: (status, head, body).
pub(crate) async fn send(
    api: &FakeDownstream,
    method: &str,
    path: &str,
    headers: &[(&str, &str)],
    body: &str,
) -> (u16, String, String) {
    let addr = api.url().trim_start_matches("http://").to_owned();
    let mut socket = tokio::net::TcpStream::connect(&addr)
        .await
        .expect("connect");
    let mut request = format!(
        "{method} {path} HTTP/1.1\r\nhost: {addr}\r\nconnection: close\r\ncontent-length: {}\r\n",
        body.len()
    );
    for (name, value) in headers {
        request.push_str(&format!("{name}: {value}\r\n"));
    }
    request.push_str("\r\n");
    request.push_str(body);
    socket.write_all(request.as_bytes()).await.expect("write");
    let mut answer = Vec::new();
    socket.read_to_end(&mut answer).await.expect("read");
    let answer = String::from_utf8(answer).expect("utf-8");
    let (head, body) = answer.split_once("\r\n\r\n").expect("head and body");
    let status = head[9..12].parse().expect("status");
    (status, head.to_ascii_lowercase(), body.to_owned())
}
