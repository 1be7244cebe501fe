//! Man pages and shell completions, generated from the clap definitions. `make man
//! completions` writes them; a test fails when the committed copies are out of date.

use std::path::PathBuf;

use clap_complete::Shell;

use super::exit::EXIT_CODE_TABLE;

/// One binary's documentation: its clap command plus the prose sections clap cannot hold.
pub struct Page {
    pub command: clap::Command,
    /// `(SECTION TITLE, text)`; paragraphs are separated by blank lines, and a paragraph whose
    /// lines start with two spaces is kept verbatim (examples).
    pub sections: &'static [(&'static str, &'static str)],
}

/// Every generated file, as `(path relative to the repository, contents)`.
pub fn render_all(pages: Vec<Page>) -> Vec<(PathBuf, Vec<u8>)> {
    let mut files = Vec::new();
    for page in pages {
        let mut command = page.command;
        command.build();
        let name = command.get_name().to_string();
        files.push((
            PathBuf::from(format!("man/{name}.1")),
            man_page(&command, page.sections),
        ));
        // One page per subcommand, named as the parent's SUBCOMMANDS section refers to it.
        for sub in command.get_subcommands() {
            let page_name = format!("{name}-{}", sub.get_name());
            let mut sub = sub.clone().name(page_name.clone());
            if let Some(version) = command.get_version() {
                sub = sub.version(version.to_string());
            }
            files.push((
                PathBuf::from(format!("man/{page_name}.1")),
                man_page(&sub, &[]),
            ));
        }
        for (shell, file) in [
            (Shell::Bash, format!("completions/{name}.bash")),
            (Shell::Zsh, format!("completions/_{name}")),
            (Shell::Fish, format!("completions/{name}.fish")),
        ] {
            let mut out = Vec::new();
            clap_complete::generate(shell, &mut command.clone(), &name, &mut out);
            files.push((PathBuf::from(file), out));
        }
    }
    files
}

fn man_page(command: &clap::Command, sections: &[(&str, &str)]) -> Vec<u8> {
    let man = clap_mangen::Man::new(command.clone()).manual("dreamkit");
    let mut out = Vec::new();
    // Writing into a Vec cannot fail.
    let _ = man.render_title(&mut out);
    let _ = man.render_name_section(&mut out);
    let _ = man.render_synopsis_section(&mut out);
    let _ = man.render_description_section(&mut out);
    let _ = man.render_options_section(&mut out);
    if command.has_subcommands() {
        let _ = man.render_subcommands_section(&mut out);
    }
    for (title, text) in sections {
        out.extend(roff_section(title, text).into_bytes());
    }
    out.extend(exit_status_section().into_bytes());
    // clap_mangen needs a version for this section.
    if command.get_version().is_some() {
        let _ = man.render_version_section(&mut out);
    }
    out
}

fn exit_status_section() -> String {
    let mut s = String::from(".SH \"EXIT STATUS\"\n");
    for (code, meaning) in EXIT_CODE_TABLE {
        s.push_str(&format!(".TP\n\\fB{code}\\fR\n{}\n", roff_escape(meaning)));
    }
    s
}

fn roff_section(title: &str, text: &str) -> String {
    let mut s = format!(".SH \"{}\"\n", roff_escape(title));
    for paragraph in text.trim().split("\n\n") {
        if paragraph.lines().all(|l| l.starts_with("  ")) {
            s.push_str(".PP\n.nf\n.RS 4\n");
            for line in paragraph.lines() {
                s.push_str(&roff_line(&line[2..]));
            }
            s.push_str(".RE\n.fi\n");
        } else {
            s.push_str(".PP\n");
            s.push_str(&roff_line(
                &paragraph.split_whitespace().collect::<Vec<_>>().join(" "),
            ));
        }
    }
    s
}

fn roff_line(line: &str) -> String {
    let escaped = roff_escape(line);
    // A line starting with `.` or `'` would be read as a roff request.
    if escaped.starts_with('.') || escaped.starts_with('\'') {
        format!("\\&{escaped}\n")
    } else {
        format!("{escaped}\n")
    }
}

fn roff_escape(text: &str) -> String {
    text.replace('\\', "\\e").replace('-', "\\-")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sections_escape_roff_syntax() {
        let s = roff_section("EXAMPLES", "Run it:\n\n  .hidden \\ x --flag\n  second");
        assert!(s.contains(".SH \"EXAMPLES\"\n.PP\nRun it:\n"), "{s}");
        assert!(s.contains("\\&.hidden \\e x \\-\\-flag\n"), "{s}");
        assert!(s.contains(".nf\n"), "{s}");
    }

    #[test]
    fn every_page_has_the_exit_status_table() {
        let page = Page {
            command: clap::Command::new("demo").version("1.0").about("demo tool"),
            sections: &[],
        };
        let files = render_all(vec![page]);
        let man = String::from_utf8(files[0].1.clone()).unwrap();
        assert!(man.contains(".SH \"EXIT STATUS\""));
        assert!(man.contains("\\fB143\\fR"));
        assert_eq!(files.len(), 4);
    }

    #[test]
    fn subcommands_get_their_own_pages() {
        let command = clap::Command::new("tool")
            .version("1.0")
            .disable_help_subcommand(true)
            .subcommand(clap::Command::new("go").arg(clap::Arg::new("fast").long("fast")));
        let files = render_all(vec![Page {
            command,
            sections: &[],
        }]);
        let names: Vec<String> = files.iter().map(|f| f.0.display().to_string()).collect();
        assert!(names.contains(&"man/tool-go.1".to_string()), "{names:?}");
        let page = String::from_utf8(files[1].1.clone()).unwrap();
        assert!(
            page.contains("tool\\-go") && page.contains("\\-\\-fast"),
            "{page}"
        );
    }
}
