//! The host's key-value store: state kept between calls, per granted namespace.

use std::fmt;

use crate::bindings::glovebox::tool::kv as host;
use crate::ToolError;

/// Why an operation did not happen.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum KvError {
    /// The namespace is not granted to this call (or only for reading).
    Denied(String),
    /// The write would take the namespace past its quota.
    QuotaExceeded(String),
    /// The key is empty or longer than 512 bytes.
    Invalid(String),
    /// The store failed.
    Storage(String),
}

impl fmt::Display for KvError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let (kind, reason) = match self {
            KvError::Denied(reason) => ("denied", reason),
            KvError::QuotaExceeded(reason) => ("quota-exceeded", reason),
            KvError::Invalid(reason) => ("invalid", reason),
            KvError::Storage(reason) => ("storage", reason),
        };
        write!(f, "kv {kind}: {reason}")
    }
}

impl std::error::Error for KvError {}

impl From<KvError> for ToolError {
    fn from(error: KvError) -> Self {
        ToolError(error.to_string())
    }
}

fn convert(error: host::KvError) -> KvError {
    match error {
        host::KvError::Denied(reason) => KvError::Denied(reason),
        host::KvError::QuotaExceeded(reason) => KvError::QuotaExceeded(reason),
        host::KvError::Invalid(reason) => KvError::Invalid(reason),
        host::KvError::Storage(reason) => KvError::Storage(reason),
    }
}

/// The value of `key` in `namespace`, or None.
pub fn get(namespace: &str, key: &str) -> Result<Option<String>, KvError> {
    host::get(namespace, key).map_err(convert)
}

/// Set `key` in `namespace` to `value`.
pub fn set(namespace: &str, key: &str, value: &str) -> Result<(), KvError> {
    host::set(namespace, key, value).map_err(convert)
}

/// Remove `key` from `namespace` (no error when it is absent).
pub fn delete(namespace: &str, key: &str) -> Result<(), KvError> {
    host::delete(namespace, key).map_err(convert)
}
