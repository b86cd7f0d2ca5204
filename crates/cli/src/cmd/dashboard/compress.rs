//! gzip for the API's answers: the infos of a namespace of many Rollouts are large and very
//! repetitive (about 18 times smaller gzipped). A stream is one gzip stream, flushed after each
//! batch of lines so that the browser gets every line at once.

use std::io::Write as _;

use axum::Json;
use axum::body::Bytes;
use axum::http::{HeaderMap, HeaderValue, header};
use axum::response::{IntoResponse, Response};
use flate2::Compression;
use flate2::write::GzEncoder;
use serde_json::Value;

/// Smaller answers are sent as they are: gzip would save nothing worth its header.
const MIN_SIZE: usize = 1024;

/// Whether the client takes gzip (`Accept-Encoding: gzip`, without `q=0`).
pub fn accepts_gzip(headers: &HeaderMap) -> bool {
    headers
        .get_all(header::ACCEPT_ENCODING)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(','))
        .any(|coding| {
            let mut parts = coding.split(';').map(str::trim);
            parts.next() == Some("gzip") && !parts.any(|p| p.replace(' ', "") == "q=0")
        })
}

/// A JSON answer, gzipped when the client takes it and it is large enough.
pub fn json(value: &Value, headers: &HeaderMap) -> Response {
    let body = value.to_string();
    if !accepts_gzip(headers) || body.len() < MIN_SIZE {
        return Json(value).into_response();
    }
    let mut encoder = GzEncoder::new(Vec::new(), Compression::default());
    let zipped = encoder
        .write_all(body.as_bytes())
        .and_then(|()| encoder.finish());
    match zipped {
        Ok(bytes) => {
            let mut response = (
                [(
                    header::CONTENT_TYPE,
                    HeaderValue::from_static("application/json"),
                )],
                bytes,
            )
                .into_response();
            mark_gzipped(response.headers_mut());
            response
        }
        // Writing to memory does not fail; were it to, the answer goes uncompressed.
        Err(_) => Json(value).into_response(),
    }
}

pub fn mark_gzipped(headers: &mut HeaderMap) {
    headers.insert(header::CONTENT_ENCODING, HeaderValue::from_static("gzip"));
    headers.insert(header::VARY, HeaderValue::from_static("accept-encoding"));
}

/// The chunks of a stream: as they are, or as one gzip stream flushed after each chunk.
pub struct Chunks {
    gzip: Option<GzEncoder<Vec<u8>>>,
}

impl Chunks {
    pub fn new(gzip: bool) -> Self {
        Self {
            gzip: gzip.then(|| GzEncoder::new(Vec::new(), Compression::default())),
        }
    }

    pub fn gzipped(&self) -> bool {
        self.gzip.is_some()
    }

    /// The bytes to send for `chunk`: all of it, readable by the client now.
    pub fn encode(&mut self, chunk: &[u8]) -> Bytes {
        let Some(encoder) = &mut self.gzip else {
            return Bytes::copy_from_slice(chunk);
        };
        // A sync flush ends the chunk on a byte boundary, so the client can decode it whole.
        if encoder
            .write_all(chunk)
            .and_then(|()| encoder.flush())
            .is_err()
        {
            return Bytes::new();
        }
        Bytes::from(std::mem::take(encoder.get_mut()))
    }
}

#[cfg(test)]
mod tests {
    use std::io::Read as _;

    use super::*;

    #[test]
    fn gzip_only_when_accepted() {
        let mut headers = HeaderMap::new();
        assert!(!accepts_gzip(&headers));
        headers.insert(
            header::ACCEPT_ENCODING,
            HeaderValue::from_static("gzip, deflate, br"),
        );
        assert!(accepts_gzip(&headers));
        headers.insert(
            header::ACCEPT_ENCODING,
            HeaderValue::from_static("br, gzip;q=0"),
        );
        assert!(!accepts_gzip(&headers));
        headers.insert(
            header::ACCEPT_ENCODING,
            HeaderValue::from_static("identity"),
        );
        assert!(!accepts_gzip(&headers));
    }

    /// Each chunk is complete on its own: what arrived so far decodes to every line sent.
    #[test]
    fn each_chunk_of_a_stream_decodes_at_once() {
        let mut chunks = Chunks::new(true);
        let mut sent = Vec::new();
        let mut received = String::new();
        for line in ["{\"result\":1}\n", "\n", "{\"result\":2}\n"] {
            sent.extend_from_slice(&chunks.encode(line.as_bytes()));
            received.push_str(line);
            let mut decoded = Vec::new();
            let mut decoder = flate2::read::GzDecoder::new(sent.as_slice());
            // The stream has no end yet: reading stops with an error after the data.
            let _ = decoder.read_to_end(&mut decoded);
            assert_eq!(String::from_utf8(decoded).unwrap(), received);
        }
        let mut plain = Chunks::new(false);
        assert_eq!(&plain.encode(b"x\n")[..], b"x\n");
    }
}
