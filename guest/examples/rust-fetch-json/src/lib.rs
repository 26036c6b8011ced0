//! rust-fetch-json: fetch a URL and return the JSON it answers, with the status.
use glovebox_guest::{http, log, Level, ToolError};
use serde::{Deserialize, Serialize};

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Input {
    url: String,
}

#[derive(Serialize)]
struct Output {
    status: u16,
    json: serde_json::Value,
}

fn fetch_json(input: Input) -> Result<Output, ToolError> {
    let response = http::get(&input.url)?;
    log(Level::Info, &format!("{} answered {}", input.url, response.status));
    Ok(Output { status: response.status, json: response.json()? })
}

glovebox_guest::export_tool!(fetch_json);
