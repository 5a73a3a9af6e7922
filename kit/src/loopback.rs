//! Pieces of the loopback HTTP servers the workspace's tests run (model mirrors, download
//! servers).

use std::io::{BufRead, BufReader};
use std::net::TcpStream;

/// Reads an HTTP request's head from `stream`, as a test server does before it answers: its
/// lines (the request line first, then the headers) without their line endings, up to the empty
/// line that ends it or the end of the stream. A read error ends it too.
pub fn read_request_head(stream: &TcpStream) -> Vec<String> {
    let mut reader = BufReader::new(stream.try_clone().expect("the stream can be cloned"));
    let mut lines = Vec::new();
    loop {
        let mut line = String::new();
        if reader.read_line(&mut line).unwrap_or(0) == 0 || line == "\r\n" {
            break;
        }
        lines.push(line.trim_end_matches(['\r', '\n']).to_owned());
    }
    lines
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;
    use std::net::TcpListener;

    #[test]
    fn the_head_ends_at_its_empty_line() {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let mut client = TcpStream::connect(listener.local_addr().unwrap()).unwrap();
        client
            .write_all(b"GET /m HTTP/1.1\r\nRange: bytes=5-\r\n\r\n")
            .unwrap();
        let (server, _) = listener.accept().unwrap();
        assert_eq!(
            read_request_head(&server),
            ["GET /m HTTP/1.1", "Range: bytes=5-"]
        );
        drop(client);
        assert!(read_request_head(&server).is_empty());
    }
}
