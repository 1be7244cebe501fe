//! The URLs requests go to, checked before any request: an endpoint (used as given) or a base
//! URL (an API path is appended to it). A bad one is a usage error (exit 2) naming the
//! variable or flag it came from; its password and query values are registered as secrets.

use crate::cli::redact::{redact, register_url};
use crate::cli::Failure;

/// An endpoint (`--endpoint`): an absolute http(s) URL with a host, used as given (a query is
/// kept and sent).
pub fn checked_url(url: &str, what: &str) -> Result<reqwest::Url, Failure> {
    register_url(url);
    let refused = |problem: String| {
        Failure::Usage(format!(
            "{what} is not an absolute http(s) URL: {:?} {problem}",
            redact(url.trim())
        ))
    };
    let parsed = reqwest::Url::parse(url.trim()).map_err(|e| refused(format!("({e})")))?;
    if !matches!(parsed.scheme(), "http" | "https") {
        return Err(refused(format!(
            "has the scheme {:?} (http or https)",
            parsed.scheme()
        )));
    }
    if parsed.host_str().is_none_or(str::is_empty) {
        return Err(refused("has no host".into()));
    }
    Ok(parsed)
}

/// A base URL from `variable` (`ANTHROPIC_BASE_URL`, `OPENAI_BASE_URL`, `GITHUB_API_URL`), or
/// `default` when it is unset or empty: an absolute http(s) URL without a query or fragment
/// (the API path is appended to it, and would land inside them), returned without its
/// trailing slashes.
pub fn base_url(variable: &str, value: Option<&str>, default: &str) -> Result<String, Failure> {
    let url = value
        .map(str::trim)
        .filter(|v| !v.is_empty())
        .unwrap_or(default);
    let parsed = checked_url(url, variable)?;
    let part = match (parsed.query(), parsed.fragment()) {
        (Some(_), _) => Some("a query"),
        (None, Some(_)) => Some("a fragment"),
        _ => None,
    };
    // `?` or `#` alone parse as an empty query or fragment; they would still break the path.
    let part = part.or_else(|| {
        if url.contains('?') {
            Some("a query")
        } else if url.contains('#') {
            Some("a fragment")
        } else {
            None
        }
    });
    if let Some(part) = part {
        return Err(Failure::Usage(format!(
            "{variable} is not an absolute http(s) URL: {:?} has {part}, and the API path is \
appended to it (put credentials in their own variable)",
            redact(url)
        )));
    }
    Ok(url.trim_end_matches('/').to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn base_urls_name_their_variable_and_refuse_queries_and_fragments() {
        assert_eq!(
            base_url(
                "ANTHROPIC_BASE_URL",
                Some("http://127.0.0.1:9/"),
                "https://d"
            )
            .unwrap(),
            "http://127.0.0.1:9"
        );
        assert_eq!(
            base_url("OPENAI_BASE_URL", Some(" "), "https://api.openai.com/v1").unwrap(),
            "https://api.openai.com/v1"
        );
        assert_eq!(base_url("X_URL", None, "https://d/").unwrap(), "https://d");
        for bad in [
            "not a url",
            "ftp://h/",
            "http://",
            "http://[::1",
            "http://h/v1?key=k-unit-query-1",
            "http://h/v1?",
            "http://h/v1#frag",
            "http://h/#",
            "file:///etc/passwd",
        ] {
            let err = base_url("ANTHROPIC_BASE_URL", Some(bad), "https://d").unwrap_err();
            assert_eq!((err.kind(), err.exit().code()), ("usage", 2), "{bad}");
            let text = err.to_string();
            assert!(
                text.starts_with("ANTHROPIC_BASE_URL is not an absolute http(s) URL"),
                "{text}"
            );
            assert!(!text.contains("k-unit-query-1"), "{text}");
        }
    }

    #[test]
    fn endpoints_keep_their_query() {
        let url = checked_url("http://h/f?token=t", "--endpoint").unwrap();
        assert_eq!(url.query(), Some("token=t"));
        let err = checked_url("nope", "--endpoint").unwrap_err();
        assert!(err
            .to_string()
            .starts_with("--endpoint is not an absolute http(s) URL"));
    }
}
