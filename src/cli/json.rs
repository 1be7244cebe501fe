//! Reading JSON from the world: JavaScript's `JSON.stringify` writes a lone UTF-16 surrogate
//! (an emoji cut in half) as a `\ud83d` escape, which is no Unicode text and which serde_json
//! refuses. Claude Code's hook payloads and transcript records can hold one; it is read as
//! U+FFFD instead of failing the whole document.

use std::borrow::Cow;

use serde::de::DeserializeOwned;
use serde_json::Value;

/// `serde_json::from_slice`, with lone surrogate escapes read as U+FFFD. Costs nothing on
/// input that parses as it is.
pub fn from_slice<T: DeserializeOwned>(bytes: &[u8]) -> serde_json::Result<T> {
    match serde_json::from_slice(bytes) {
        Ok(value) => Ok(value),
        Err(first) => match repair_surrogates(bytes) {
            Cow::Owned(repaired) => serde_json::from_slice(&repaired),
            Cow::Borrowed(_) => Err(first),
        },
    }
}

/// `bytes` with every `\uD800`-`\uDFFF` escape that is not part of a high+low pair replaced
/// by `\uFFFD`. Only escapes inside strings are looked at; `\\u` is an escaped backslash.
pub fn repair_surrogates(bytes: &[u8]) -> Cow<'_, [u8]> {
    let mut out: Option<Vec<u8>> = None;
    let mut in_string = false;
    let mut i = 0;
    while i < bytes.len() {
        let b = bytes[i];
        if !in_string {
            if b == b'"' {
                in_string = true;
            }
            if let Some(out) = out.as_mut() {
                out.push(b);
            }
            i += 1;
            continue;
        }
        match b {
            b'"' => {
                in_string = false;
                if let Some(out) = out.as_mut() {
                    out.push(b);
                }
                i += 1;
            }
            b'\\' if bytes.get(i + 1) == Some(&b'u') => {
                let unit = hex4(bytes, i + 2);
                let (take, lone) = match unit {
                    Some(u) if (0xD800..0xDC00).contains(&u) => {
                        // A high surrogate is whole only with a low one right after it.
                        let low = (bytes.get(i + 6) == Some(&b'\\')
                            && bytes.get(i + 7) == Some(&b'u'))
                        .then(|| hex4(bytes, i + 8))
                        .flatten()
                        .filter(|l| (0xDC00..0xE000).contains(l));
                        if low.is_some() {
                            (12, false)
                        } else {
                            (6, true)
                        }
                    }
                    Some(u) if (0xDC00..0xE000).contains(&u) => (6, true),
                    _ => (2, false),
                };
                let take = take.min(bytes.len() - i);
                if lone {
                    let out = out.get_or_insert_with(|| bytes[..i].to_vec());
                    out.extend_from_slice(b"\\uFFFD");
                } else if let Some(out) = out.as_mut() {
                    out.extend_from_slice(&bytes[i..i + take]);
                }
                i += take;
            }
            b'\\' => {
                let take = 2.min(bytes.len() - i);
                if let Some(out) = out.as_mut() {
                    out.extend_from_slice(&bytes[i..i + take]);
                }
                i += take;
            }
            _ => {
                if let Some(out) = out.as_mut() {
                    out.push(b);
                }
                i += 1;
            }
        }
    }
    match out {
        Some(out) => Cow::Owned(out),
        None => Cow::Borrowed(bytes),
    }
}

fn hex4(bytes: &[u8], at: usize) -> Option<u32> {
    let digits = bytes.get(at..at + 4)?;
    let text = std::str::from_utf8(digits).ok()?;
    u32::from_str_radix(text, 16).ok()
}

/// Compact JSON text; the buffer starts large enough for most documents in one allocation.
pub fn to_string(document: &impl serde::Serialize) -> Result<String, serde_json::Error> {
    let mut buffer = Vec::with_capacity(16 * 1024);
    serde_json::to_writer(&mut buffer, document)?;
    // serde_json writes UTF-8 only.
    Ok(String::from_utf8(buffer).unwrap_or_default())
}

/// A JSON value's type as a message names it ("a string", "null").
pub fn type_name(value: &Value) -> &'static str {
    match value {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "an array",
        Value::Object(_) => "an object",
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::Value;

    #[test]
    fn lone_surrogates_become_replacement_characters_and_pairs_stay() {
        let v: Value =
            from_slice(br#"{"a":"cut \ud83d","b":"\ude00 x","c":"\ud83d\ude00"}"#).unwrap();
        assert_eq!(v["a"], "cut \u{fffd}");
        assert_eq!(v["b"], "\u{fffd} x");
        assert_eq!(v["c"], "\u{1f600}");
        // An escaped backslash before `u` is no escape; keys count as strings too.
        let v: Value = from_slice(br#"{"p":"C:\\ud83d","\ud800k":1}"#).unwrap();
        assert_eq!(v["p"], "C:\\ud83d");
        assert_eq!(v["\u{fffd}k"], 1);
        assert!(matches!(
            repair_surrogates(br#"{"a":"fine"}"#),
            Cow::Borrowed(_)
        ));
        // Still refused: what is wrong for another reason.
        assert!(from_slice::<Value>(br#"{"a":"\ud83d"#).is_err());
        assert!(from_slice::<Value>(b"{oops}").is_err());
    }
}
