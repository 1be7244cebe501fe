//! Secrets never printed: every line on stderr and every document on stdout passes through
//! [`redact`], which removes the values of known credentials (wherever they appear, even
//! echoed back inside a server's error message) and the userinfo and query values of URLs.

use std::borrow::Cow;
use std::sync::Mutex;

/// The environment variables whose values are credentials.
pub const SECRET_VARIABLES: &[&str] = &[
    "ANTHROPIC_API_KEY",
    "ANTHROPIC_AUTH_TOKEN",
    "OPENAI_API_KEY",
    "GITHUB_TOKEN",
];
/// Variables holding URLs whose userinfo or query may carry a credential.
const URL_VARIABLES: &[&str] = &["ANTHROPIC_BASE_URL", "OPENAI_BASE_URL"];
/// What a secret is replaced with.
pub const REDACTED: &str = "[redacted]";
/// Shorter values are not treated as secrets: replacing every "a" would garble messages,
/// and a credential that short protects nothing anyway.
const MIN_SECRET_LEN: usize = 4;

static SECRETS: Mutex<Vec<String>> = Mutex::new(Vec::new());

/// Remembers a secret value, so that it is removed from everything printed from now on.
pub fn register(secret: &str) {
    let secret = secret.trim();
    if secret.len() < MIN_SECRET_LEN {
        return;
    }
    let mut secrets = SECRETS
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner);
    if !secrets.iter().any(|s| s == secret) {
        secrets.push(secret.to_string());
        // Longest first, so a secret that contains another is replaced whole.
        secrets.sort_by_key(|s| std::cmp::Reverse(s.len()));
    }
}

/// Registers the process's credentials and the secret parts of its URL variables (the
/// shared `main` does this first).
pub fn register_environment() {
    for name in SECRET_VARIABLES {
        if let Some(value) = std::env::var_os(name) {
            register(&value.to_string_lossy());
        }
    }
    for name in URL_VARIABLES {
        if let Some(value) = std::env::var_os(name) {
            register_url(&value.to_string_lossy());
        }
    }
}

/// Registers the password and the query values of a URL (`--endpoint`, a base URL).
pub fn register_url(url: &str) {
    let Ok(parsed) = reqwest::Url::parse(url.trim()) else {
        return;
    };
    // The user name is not registered (it may be a common word); inside a URL it goes with
    // the rest of the userinfo.
    if let Some(password) = parsed.password() {
        register(password);
    }
    for (_, value) in parsed.query_pairs() {
        register(&value);
    }
}

/// `text` with every known secret and every URL's userinfo and query values replaced.
pub fn redact(text: &str) -> Cow<'_, str> {
    let mut out = Cow::Borrowed(text);
    {
        let secrets = SECRETS
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        for secret in secrets.iter() {
            if out.contains(secret.as_str()) {
                out = Cow::Owned(out.replace(secret.as_str(), REDACTED));
            }
        }
    }
    if out.contains("://") {
        out = Cow::Owned(redact_urls(&out));
    }
    out
}

/// Replaces the userinfo (`user:pass@`) and query values (`?key=...`) of every URL in
/// `text`. A URL runs from its scheme to the first space, quote or angle bracket.
fn redact_urls(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(at) = rest.find("://") {
        let (before, after) = rest.split_at(at + 3);
        out.push_str(before);
        let end = after
            .find(|c: char| c.is_whitespace() || matches!(c, '"' | '\'' | '<' | '>' | '\\'))
            .unwrap_or(after.len());
        let (url, tail) = after.split_at(end);
        out.push_str(&redact_one_url(url));
        rest = tail;
    }
    out.push_str(rest);
    out
}

/// One URL after its `://`: `user:pass@host/path?k=v#f` -> `[redacted]@host/path?k=[redacted]#f`.
fn redact_one_url(url: &str) -> String {
    let authority_end = url.find(['/', '?', '#']).unwrap_or(url.len());
    let (authority, path) = url.split_at(authority_end);
    let mut out = match authority.rfind('@') {
        Some(at) => format!("{REDACTED}@{}", &authority[at + 1..]),
        None => authority.to_string(),
    };
    match path.find('?') {
        None => out.push_str(path),
        Some(q) => {
            out.push_str(&path[..=q]);
            let query = &path[q + 1..];
            let (query, fragment) = match query.find('#') {
                Some(h) => query.split_at(h),
                None => (query, ""),
            };
            let pairs: Vec<String> = query
                .split('&')
                .map(|pair| match pair.split_once('=') {
                    Some((key, value)) if !value.is_empty() => format!("{key}={REDACTED}"),
                    _ => pair.to_string(),
                })
                .collect();
            out.push_str(&pairs.join("&"));
            out.push_str(fragment);
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn urls_lose_userinfo_and_query_values() {
        assert_eq!(
            redact_urls("POST http://user:hunter2@api.example:8080/v1/messages?key=abc&x=1#f failed"),
            "POST http://[redacted]@api.example:8080/v1/messages?key=[redacted]&x=[redacted]#f failed"
        );
        assert_eq!(
            redact_urls("see \"https://h/p?k=v\" and https://h2"),
            "see \"https://h/p?k=[redacted]\" and https://h2"
        );
        assert_eq!(redact_urls("no url here"), "no url here");
    }

    #[test]
    fn registered_secrets_are_replaced_anywhere() {
        register("sk-ant-unit-test-secret-1234");
        register("ab");
        let text = "invalid x-api-key: sk-ant-unit-test-secret-1234 (ab)";
        assert_eq!(redact(text), "invalid x-api-key: [redacted] (ab)");
        assert!(matches!(redact("nothing secret"), Cow::Borrowed(_)));
    }

    #[test]
    fn url_parts_are_registered() {
        register_url("http://someone:pw-unit-9876@h/x?token=tok-unit-5555");
        let out = redact("pw-unit-9876 and tok-unit-5555 and someone");
        assert_eq!(out, "[redacted] and [redacted] and someone");
    }
}
