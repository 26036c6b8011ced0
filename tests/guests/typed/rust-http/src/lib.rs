wit_bindgen::generate!({ world: "fetcher", path: "wit" });

use wasi::http::outgoing_handler;
use wasi::http::types::{Fields, Method, OutgoingBody, OutgoingRequest, Scheme};
use wasi::io::streams::StreamError;

struct Fetcher;

fn split(url: &str) -> Result<(Scheme, String, String), String> {
    let (scheme, rest) = url.split_once("://").ok_or("no scheme")?;
    let scheme = match scheme {
        "http" => Scheme::Http,
        "https" => Scheme::Https,
        other => Scheme::Other(other.to_string()),
    };
    let (authority, path) = match rest.find('/') {
        Some(at) => (&rest[..at], &rest[at..]),
        None => (rest, "/"),
    };
    Ok((scheme, authority.to_string(), path.to_string()))
}

impl Guest for Fetcher {
    fn connect(address: String) -> Result<(), String> {
        std::net::TcpStream::connect(address.as_str())
            .map(|_| ())
            .map_err(|e| e.to_string())
    }

    fn shout(text: String) -> u32 {
        println!("{text}");
        eprintln!("err: {text}");
        (std::env::vars().count() + std::env::args().count()) as u32
    }

    fn nap(ms: u32) -> u64 {
        let started = std::time::Instant::now();
        std::thread::sleep(std::time::Duration::from_millis(ms as u64));
        started.elapsed().as_millis() as u64
    }

    fn read_file(path: String) -> Result<String, String> {
        std::fs::read_to_string(&path).map_err(|e| e.to_string())
    }

    fn fetch(method: String, url: String, body: Option<String>) -> Result<String, String> {
        let (scheme, authority, path) = split(&url)?;
        let headers = Fields::new();
        headers
            .append("x-guest", b"rust")
            .map_err(|e| format!("header: {e:?}"))?;
        let request = OutgoingRequest::new(headers);
        let method = match method.as_str() {
            "GET" => Method::Get,
            "POST" => Method::Post,
            other => Method::Other(other.to_string()),
        };
        request.set_method(&method).map_err(|_| "method")?;
        request.set_scheme(Some(&scheme)).map_err(|_| "scheme")?;
        request.set_authority(Some(&authority)).map_err(|_| "authority")?;
        request.set_path_with_query(Some(&path)).map_err(|_| "path")?;
        let outgoing = request.body().map_err(|_| "body")?;
        if let Some(text) = body {
            let stream = outgoing.write().map_err(|_| "body stream")?;
            for chunk in text.as_bytes().chunks(4096) {
                stream
                    .blocking_write_and_flush(chunk)
                    .map_err(|e| format!("write: {e:?}"))?;
            }
            drop(stream);
        }
        let future = outgoing_handler::handle(request, None).map_err(|e| format!("{e:?}"))?;
        OutgoingBody::finish(outgoing, None).map_err(|e| format!("finish: {e:?}"))?;
        future.subscribe().block();
        let response = future
            .get()
            .ok_or("no response")?
            .map_err(|_| "taken twice")?
            .map_err(|e| format!("{e:?}"))?;
        let status = response.status();
        let mut seen = Vec::new();
        for (name, value) in response.headers().entries() {
            seen.push(format!("{name}: {}", String::from_utf8_lossy(&value)));
        }
        let incoming = response.consume().map_err(|_| "consume")?;
        let stream = incoming.stream().map_err(|_| "stream")?;
        let mut data = Vec::new();
        loop {
            match stream.blocking_read(65536) {
                Ok(chunk) => data.extend_from_slice(&chunk),
                Err(StreamError::Closed) => break,
                Err(e) => return Err(format!("read: {e:?}")),
            }
        }
        drop(stream);
        Ok(format!(
            "{status}\n{}\n\n{}",
            seen.join("\n"),
            String::from_utf8_lossy(&data)
        ))
    }
}

export!(Fetcher);
