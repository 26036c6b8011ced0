//! SQL on a database the call was granted, named by its alias; the host checks every statement.
//!
//! ```ignore
//! use glovebox_guest::sql::{query, Value};
//! let answer = query("shop", "SELECT name FROM items WHERE price < ?", &[Value::Float(10.0)])?;
//! let rows = &answer["rows"];
//! ```

use std::fmt;

use crate::bindings::glovebox::tool::sql as host;
use crate::ToolError;

/// A statement parameter (statements take `?` placeholders, never spliced values).
#[derive(Debug, Clone, PartialEq)]
pub enum Value {
    Null,
    Integer(i64),
    Float(f64),
    Text(String),
    Blob(Vec<u8>),
}

/// Why a statement did not run.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SqlError {
    /// The grant does not allow it, or it does not parse.
    Denied(String),
    /// The statement's kind needs approval.
    ApprovalRequired(String),
    /// The statement ran out of the call's time.
    Timeout(String),
    /// The database refused or failed it.
    Database(String),
}

impl fmt::Display for SqlError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let (kind, reason) = match self {
            SqlError::Denied(reason) => ("denied", reason),
            SqlError::ApprovalRequired(reason) => ("approval-required", reason),
            SqlError::Timeout(reason) => ("timeout", reason),
            SqlError::Database(reason) => ("database", reason),
        };
        write!(f, "sql {kind}: {reason}")
    }
}

impl std::error::Error for SqlError {}

impl From<SqlError> for ToolError {
    fn from(error: SqlError) -> Self {
        ToolError(error.to_string())
    }
}

/// Run one statement on `database`; the answer is
/// `{"columns": [...], "rows": [[...]], "row_count": N, "truncated": bool, "rows_changed": N}`.
pub fn query(database: &str, statement: &str, params: &[Value]) -> Result<serde_json::Value, SqlError> {
    let params: Vec<host::SqlValue> = params
        .iter()
        .map(|value| match value {
            Value::Null => host::SqlValue::Null,
            Value::Integer(n) => host::SqlValue::Integer(*n),
            Value::Float(x) => host::SqlValue::Float(*x),
            Value::Text(s) => host::SqlValue::Text(s.clone()),
            Value::Blob(b) => host::SqlValue::Blob(b.clone()),
        })
        .collect();
    match host::query(database, statement, &params) {
        Ok(text) => serde_json::from_str(&text).map_err(|error| SqlError::Database(format!("answer is not JSON: {error}"))),
        Err(host::SqlError::Denied(reason)) => Err(SqlError::Denied(reason)),
        Err(host::SqlError::ApprovalRequired(reason)) => Err(SqlError::ApprovalRequired(reason)),
        Err(host::SqlError::Timeout(reason)) => Err(SqlError::Timeout(reason)),
        Err(host::SqlError::Database(reason)) => Err(SqlError::Database(reason)),
    }
}
