//! Files the agent never reads, wherever they sit in a readable root: the project tree is
//! readable by default, and a project holds keys and tokens (`.env`, `id_rsa`, `.git/config`
//! with a token in a remote URL). Refused by name, as a path argument, a `read_file` path, or
//! in `grep`'s own recursion (see [`GREP_EXCLUDES`]).

use std::path::{Component, Path};

/// Folders whose whole content is refused.
const SECRET_DIRS: &[&str] = &[
    ".git", ".ssh", ".gnupg", ".aws", ".azure", ".kube", ".docker",
];

/// File names refused exactly.
const SECRET_NAMES: &[&str] = &[
    ".netrc",
    "_netrc",
    ".pgpass",
    ".npmrc",
    ".pypirc",
    ".git-credentials",
    ".htpasswd",
    "credentials",
    "credentials.json",
];

/// File name suffixes refused (key stores and private keys).
const SECRET_SUFFIXES: &[&str] = &[
    ".pem",
    ".key",
    ".p12",
    ".pfx",
    ".jks",
    ".keystore",
    ".kdbx",
    ".ppk",
];

/// SSH private key names (`id_rsa`, `id_ed25519_sk`, `id_rsa.old`...).
const KEY_PREFIXES: &[&str] = &["id_rsa", "id_dsa", "id_ecdsa", "id_ed25519", "id_xmss"];

/// What `grep` is given so that its recursion (`-r`) skips the same files: the rules above
/// as `--exclude`/`--exclude-dir` globs. Placed after the model's options (GNU grep lets the
/// last of contradicting `--include`/`--exclude` win).
pub(super) const GREP_EXCLUDES: &[&str] = &[
    "--exclude=.env*",
    "--exclude=.netrc",
    "--exclude=_netrc",
    "--exclude=.pgpass",
    "--exclude=.npmrc",
    "--exclude=.pypirc",
    "--exclude=.git-credentials",
    "--exclude=.htpasswd",
    "--exclude=credentials",
    "--exclude=credentials.json",
    "--exclude=*.pem",
    "--exclude=*.key",
    "--exclude=*.p12",
    "--exclude=*.pfx",
    "--exclude=*.jks",
    "--exclude=*.keystore",
    "--exclude=*.kdbx",
    "--exclude=*.ppk",
    "--exclude=id_rsa*",
    "--exclude=id_dsa*",
    "--exclude=id_ecdsa*",
    "--exclude=id_ed25519*",
    "--exclude=id_xmss*",
    "--exclude-dir=.git",
    "--exclude-dir=.ssh",
    "--exclude-dir=.gnupg",
    "--exclude-dir=.aws",
    "--exclude-dir=.azure",
    "--exclude-dir=.kube",
    "--exclude-dir=.docker",
];

/// Why `relative` (a path inside a readable root, relative to it) may not be read, or
/// `None`. A Markdown file is never a key file, so the name rules spare `.md` names (a memory
/// file called `.env-notes.md` stays readable); the folder rules do not.
pub(super) fn refusal(relative: &Path) -> Option<String> {
    let mut components = relative.components().peekable();
    while let Some(component) = components.next() {
        let Component::Normal(name) = component else {
            continue;
        };
        let name = name.to_string_lossy();
        let last = components.peek().is_none();
        if SECRET_DIRS.contains(&name.as_ref()) && !last {
            return Some(format!("it is inside {name}/"));
        }
        if SECRET_DIRS.contains(&name.as_ref()) {
            return Some(format!("{name}/ holds credentials or repository internals"));
        }
        if last && is_secret_name(&name) {
            return Some(format!("{name} is named like a file holding secrets"));
        }
    }
    None
}

fn is_secret_name(name: &str) -> bool {
    if name.ends_with(".md") {
        return false;
    }
    name.starts_with(".env")
        || SECRET_NAMES.contains(&name)
        || SECRET_SUFFIXES.iter().any(|suffix| name.ends_with(suffix))
        || KEY_PREFIXES.iter().any(|prefix| name.starts_with(prefix))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn secret_bearing_files_and_folders_are_refused() {
        for path in [
            ".env",
            ".env.local",
            ".envrc",
            "config/.env.production",
            "certs/server.pem",
            "tls/server.key",
            "id_rsa",
            "keys/id_ed25519",
            "id_rsa.pub",
            ".netrc",
            ".git",
            ".git/config",
            "sub/.git/HEAD",
            ".ssh/known_hosts",
            ".aws/credentials",
            "store.p12",
        ] {
            assert!(refusal(Path::new(path)).is_some(), "{path} was not refused");
        }
    }

    #[test]
    fn ordinary_files_and_markdown_are_readable() {
        for path in [
            "src/main.rs",
            "README.md",
            "docs/env.md",
            ".env-notes.md",
            "keys.md",
            "environment.txt",
            "src/key_value.rs",
            "identity.rs",
            ".github/workflows/ci.yml",
            ".gitignore",
            "CLAUDE.md",
            ".claude/CLAUDE.md",
        ] {
            assert_eq!(refusal(Path::new(path)), None, "{path} was refused");
        }
    }

    #[test]
    fn every_name_rule_has_a_grep_exclude() {
        for name in SECRET_NAMES {
            assert!(
                GREP_EXCLUDES.contains(&format!("--exclude={name}").as_str()),
                "{name}"
            );
        }
        for suffix in SECRET_SUFFIXES {
            assert!(
                GREP_EXCLUDES.contains(&format!("--exclude=*{suffix}").as_str()),
                "{suffix}"
            );
        }
        for prefix in KEY_PREFIXES {
            assert!(
                GREP_EXCLUDES.contains(&format!("--exclude={prefix}*").as_str()),
                "{prefix}"
            );
        }
        for dir in SECRET_DIRS {
            assert!(
                GREP_EXCLUDES.contains(&format!("--exclude-dir={dir}").as_str()),
                "{dir}"
            );
        }
    }
}
