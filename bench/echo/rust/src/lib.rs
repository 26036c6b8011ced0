//! echo: answers {"text": ...} with the text it was given.
use glovebox_guest::ToolError;
use serde::{Deserialize, Serialize};

#[derive(Deserialize, Serialize)]
struct Echo {
    text: String,
}

fn echo(input: Echo) -> Result<Echo, ToolError> {
    Ok(input)
}

glovebox_guest::export_tool!(echo);
