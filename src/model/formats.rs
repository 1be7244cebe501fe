//! Which `response_format` form each OpenAI-compatible server takes, remembered per base URL
//! in one small JSON file the tool names (`$XDG_STATE_HOME/dreamkit/response-formats.json`), so
//! detection costs a request once per server, not once per call. Losing the file costs only
//! that detection again: reads and writes are best effort and never fail a call.

use std::collections::BTreeMap;
use std::path::Path;

use super::ResponseFormat;

/// The file name under dreamkit's state dir.
pub const FILE_NAME: &str = "response-formats.json";

/// At most this many servers are remembered (the newest write wins a place).
const MAX_SERVERS: usize = 64;

/// 64 servers' URLs and forms take a few KiB: a larger file is not ours and is ignored (it
/// costs a detection), never read whole.
const MAX_FILE_BYTES: u64 = 256 * 1024;

fn read(path: &Path) -> BTreeMap<String, ResponseFormat> {
    crate::files::read_regular_capped(path, MAX_FILE_BYTES)
        .ok()
        .and_then(|bytes| serde_json::from_slice(&bytes).ok())
        .unwrap_or_default()
}

/// The form known to work with `base_url`.
pub fn known(path: &Path, base_url: &str) -> Option<ResponseFormat> {
    read(path).get(base_url).copied()
}

/// Remembers that `base_url` takes `format` (0600, written atomically).
pub fn remember(path: &Path, base_url: &str, format: ResponseFormat) {
    let mut all = read(path);
    if all.len() >= MAX_SERVERS && !all.contains_key(base_url) {
        all.clear();
    }
    all.insert(base_url.to_string(), format);
    let Ok(bytes) = serde_json::to_vec_pretty(&all) else {
        return;
    };
    if let Some(dir) = path.parent() {
        if crate::files::create_private_dir(dir).is_err() {
            return;
        }
    }
    let _ = crate::files::write_atomic(path, &bytes, 0o600);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn remembers_per_base_url_and_survives_garbage() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("state/dreamkit").join(FILE_NAME);
        assert_eq!(known(&path, "http://a/v1"), None);
        remember(&path, "http://a/v1", ResponseFormat::JsonObjectSchema);
        remember(&path, "http://b/v1", ResponseFormat::JsonSchema);
        assert_eq!(
            known(&path, "http://a/v1"),
            Some(ResponseFormat::JsonObjectSchema)
        );
        assert_eq!(
            known(&path, "http://b/v1"),
            Some(ResponseFormat::JsonSchema)
        );
        use std::os::unix::fs::PermissionsExt;
        assert_eq!(
            std::fs::metadata(&path).unwrap().permissions().mode() & 0o777,
            0o600
        );
        std::fs::write(&path, "not json").unwrap();
        assert_eq!(known(&path, "http://a/v1"), None);
        remember(&path, "http://a/v1", ResponseFormat::Plain);
        assert_eq!(known(&path, "http://a/v1"), Some(ResponseFormat::Plain));
    }

    #[test]
    fn a_fifo_in_its_place_is_not_waited_on_and_is_replaced() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join(FILE_NAME);
        let made = std::process::Command::new("mkfifo").arg(&path).status();
        if !made.is_ok_and(|s| s.success()) {
            return;
        }
        assert_eq!(known(&path, "http://a/v1"), None);
        remember(&path, "http://a/v1", ResponseFormat::JsonSchema);
        assert!(std::fs::symlink_metadata(&path).unwrap().is_file());
        assert_eq!(
            known(&path, "http://a/v1"),
            Some(ResponseFormat::JsonSchema)
        );
    }
}
