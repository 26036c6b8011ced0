//! Outgoing HTTP through the host's `http-fetch`: the policy's allowlist, deadline and secrets apply.
//!
//! ```ignore
//! let page = glovebox_guest::http::get("https://api.example.com/items")?;
//! let items: Vec<Item> = page.json()?;
//! ```

use std::fmt;

use crate::bindings::glovebox::tool::host;
use crate::ToolError;

/// A response: the status, the headers as (name, value) pairs, the body's bytes.
#[derive(Debug, Clone)]
pub struct Response {
    pub status: u16,
    pub headers: Vec<(String, String)>,
    pub body: Vec<u8>,
}

impl Response {
    /// The body as text (invalid UTF-8 replaced).
    pub fn text(&self) -> String {
        String::from_utf8_lossy(&self.body).into_owned()
    }

    /// The body decoded as JSON into `T`.
    pub fn json<T: serde::de::DeserializeOwned>(&self) -> Result<T, ToolError> {
        serde_json::from_slice(&self.body).map_err(|error| ToolError(format!("response is not the JSON expected: {error}")))
    }

    /// The first header named `name` (case-insensitive).
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers.iter().find(|(key, _)| key.eq_ignore_ascii_case(name)).map(|(_, value)| value.as_str())
    }
}

/// Why a request produced no response.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum HttpError {
    /// The call's grant does not allow the request.
    Denied(String),
    /// The request ran out of the call's time.
    Timeout(String),
    /// The response was larger than the grant allows.
    TooLarge(String),
    /// The connection failed.
    Network(String),
}

impl fmt::Display for HttpError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let (kind, reason) = match self {
            HttpError::Denied(reason) => ("denied", reason),
            HttpError::Timeout(reason) => ("timeout", reason),
            HttpError::TooLarge(reason) => ("too-large", reason),
            HttpError::Network(reason) => ("network", reason),
        };
        write!(f, "http {kind}: {reason}")
    }
}

impl std::error::Error for HttpError {}

impl From<HttpError> for ToolError {
    fn from(error: HttpError) -> Self {
        ToolError(error.to_string())
    }
}

/// Send `method url` with `headers` and an optional `body`.
pub fn fetch(method: &str, url: &str, headers: &[(&str, &str)], body: Option<&[u8]>) -> Result<Response, HttpError> {
    let request = host::HttpRequest {
        method: method.to_owned(),
        url: url.to_owned(),
        headers: headers.iter().map(|(k, v)| ((*k).to_owned(), (*v).to_owned())).collect(),
        body: body.map(<[u8]>::to_vec),
    };
    match host::http_fetch(&request) {
        Ok(response) => Ok(Response { status: response.status, headers: response.headers, body: response.body }),
        Err(host::HttpError::Denied(reason)) => Err(HttpError::Denied(reason)),
        Err(host::HttpError::Timeout(reason)) => Err(HttpError::Timeout(reason)),
        Err(host::HttpError::TooLarge(reason)) => Err(HttpError::TooLarge(reason)),
        Err(host::HttpError::Network(reason)) => Err(HttpError::Network(reason)),
    }
}

/// `GET url`.
pub fn get(url: &str) -> Result<Response, HttpError> {
    fetch("GET", url, &[], None)
}

/// `POST url` with `value` as a JSON body.
pub fn post_json<T: serde::Serialize>(url: &str, value: &T) -> Result<Response, ToolError> {
    let body = serde_json::to_vec(value)?;
    Ok(fetch("POST", url, &[("content-type", "application/json")], Some(&body))?)
}
