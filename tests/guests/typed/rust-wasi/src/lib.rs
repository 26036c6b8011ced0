wit_bindgen::generate!({ world: "wasi-probe", path: "wit" });

use std::io::Write;

struct Probe;

impl Guest for Probe {
    fn read_file(path: String) -> Result<String, String> {
        std::fs::read_to_string(&path).map_err(|e| e.to_string())
    }

    fn write_file(path: String, data: String) -> Result<u64, String> {
        let mut file = std::fs::File::create(&path).map_err(|e| e.to_string())?;
        file.write_all(data.as_bytes()).map_err(|e| e.to_string())?;
        Ok(data.len() as u64)
    }

    fn hard_link(target: String, name: String) -> Result<(), String> {
        std::fs::hard_link(&target, &name).map_err(|e| e.to_string())
    }

    fn connect(address: String) -> Result<(), String> {
        std::net::TcpStream::connect(address.as_str()).map(|_| ()).map_err(|e| e.to_string())
    }

    fn shout(text: String, times: u32) -> String {
        for _ in 0..times {
            println!("{text}");
            eprintln!("err: {text}");
        }
        text
    }

    fn now() -> u64 {
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_secs())
            .unwrap_or(0)
    }

    fn fill(path: String, chunk: u32, times: u32) -> Result<u64, String> {
        let mut file = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(&path)
            .map_err(|e| e.to_string())?;
        let data = vec![b'z'; chunk as usize];
        let mut written = 0u64;
        for _ in 0..times {
            file.write_all(&data).map_err(|e| format!("after {written} bytes: {e}"))?;
            written += chunk as u64;
        }
        Ok(written)
    }

    fn list_dir(path: String) -> Result<Vec<String>, String> {
        let entries = std::fs::read_dir(&path).map_err(|e| e.to_string())?;
        let mut names: Vec<String> = entries
            .filter_map(|e| e.ok())
            .map(|e| e.file_name().to_string_lossy().into_owned())
            .collect();
        names.sort();
        Ok(names)
    }
}

export!(Probe);
