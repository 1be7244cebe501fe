//! Man pages and shell completions, generated from the clap definitions. `make man
//! completions` writes them; a test fails when the committed copies are out of date.

use std::path::PathBuf;

use clap::{Arg, ArgAction, Command, ValueHint};
use clap_complete::Shell;

use super::exit::EXIT_CODE_TABLE;

/// One binary's documentation: its clap command plus the prose sections clap cannot hold.
pub struct Page {
    pub command: clap::Command,
    /// `(SECTION TITLE, text)`; paragraphs are separated by blank lines, and a paragraph whose
    /// lines start with two spaces is kept verbatim (examples, which the examples test runs).
    /// A title `SUB/TITLE` goes to the page of subcommand SUB instead, `*/TITLE` to every
    /// page (unless SUB has its own). An `EXIT STATUS`
    /// section replaces the common table; each of its paragraphs is `CODE meaning`.
    pub sections: &'static [(&'static str, &'static str)],
}

/// Every generated file, as `(path relative to the repository, contents)`.
pub fn render_all(pages: Vec<Page>) -> Vec<(PathBuf, Vec<u8>)> {
    let tools: Vec<String> = pages
        .iter()
        .map(|p| p.command.get_name().to_string())
        .collect();
    let mut files = Vec::new();
    for page in pages {
        let command = with_value_hints(page.command);
        // `help SUBCOMMAND` is for the terminal; it gets no man page.
        let mut man = command.clone().disable_help_subcommand(true);
        man.build();
        let name = man.get_name().to_string();
        // A hidden subcommand (`dream-run tool-relay`, which only a program runs) gets no page.
        let subs: Vec<String> = man
            .get_subcommands()
            .filter(|s| !s.is_hide_set())
            .map(|s| format!("{name}-{}", s.get_name()))
            .collect();
        let others = tools.iter().filter(|t| **t != name).cloned();
        let see_also: Vec<String> = subs.iter().cloned().chain(others.clone()).collect();
        files.push((
            PathBuf::from(format!("man/{name}.1")),
            man_page(&man, &sections_for(page.sections, None), &see_also),
        ));
        // One page per subcommand, named as the parent's SUBCOMMANDS section refers to it.
        for sub in man.get_subcommands().filter(|s| !s.is_hide_set()) {
            let page_name = format!("{name}-{}", sub.get_name());
            let mut sub_command = sub.clone().name(page_name.clone());
            if let Some(version) = man.get_version() {
                sub_command = sub_command.version(version.to_string());
            }
            let see_also: Vec<String> = std::iter::once(name.clone())
                .chain(subs.iter().filter(|s| **s != page_name).cloned())
                .chain(others.clone())
                .collect();
            files.push((
                PathBuf::from(format!("man/{page_name}.1")),
                man_page(
                    &sub_command,
                    &sections_for(page.sections, Some(sub.get_name())),
                    &see_also,
                ),
            ));
        }
        for (shell, file) in [
            (Shell::Bash, format!("completions/{name}.bash")),
            (Shell::Zsh, format!("completions/_{name}")),
            (Shell::Fish, format!("completions/{name}.fish")),
        ] {
            let mut out = Vec::new();
            clap_complete::generate(shell, &mut command.clone(), &name, &mut out);
            if shell == Shell::Bash {
                out = fix_bash_hyphenated_name(&name, out);
            }
            files.push((PathBuf::from(file), out));
        }
    }
    files
}

/// The sections of the tool's page (`sub` None) or of one subcommand's page.
fn sections_for(
    sections: &'static [(&'static str, &'static str)],
    sub: Option<&str>,
) -> Vec<(&'static str, &'static str)> {
    // `*/TITLE` goes on every page, unless the subcommand has its own `SUB/TITLE`.
    let own = |title: &str| {
        sub.is_some_and(|sub| {
            sections
                .iter()
                .any(|(t, _)| t.split_once('/') == Some((sub, title)))
        })
    };
    sections
        .iter()
        .filter_map(|(title, text)| match (title.split_once('/'), sub) {
            (None, None) => Some((*title, *text)),
            (Some(("*", title)), _) if !own(title) => Some((title, *text)),
            (Some((owner, title)), Some(sub)) if owner == sub => Some((title, *text)),
            _ => None,
        })
        .collect()
}

/// Directory flags complete directories and path flags files, in every shell, by the value
/// name the flags share (`DIR`, `PATH`, `FILE`), so a flag added later gets it too.
fn with_value_hints(command: Command) -> Command {
    let hinted: Vec<(String, ValueHint)> = command
        .get_arguments()
        // A PathBuf flag reports AnyPath (files and directories alike) unless told otherwise.
        .filter(|a| matches!(a.get_value_hint(), ValueHint::Unknown | ValueHint::AnyPath))
        .filter_map(|a| {
            let hint = match a.get_value_names()?.first()?.as_str() {
                "DIR" => ValueHint::DirPath,
                "PATH" | "FILE" => ValueHint::FilePath,
                _ => return None,
            };
            Some((a.get_id().to_string(), hint))
        })
        .collect();
    let subs: Vec<String> = command
        .get_subcommands()
        .map(|s| s.get_name().to_string())
        .collect();
    let mut command = command;
    for (id, hint) in hinted {
        command = command.mut_arg(id, |a| a.value_hint(hint));
    }
    for sub in subs {
        command = command.mut_subcommand(sub, with_value_hints);
    }
    command
}

/// clap_complete's bash script spells the state of a hyphenated binary's subcommands two ways
/// (`dream__lock__subcmd__acquire` where it is set, `dream__subcmd__lock__subcmd__acquire` in
/// the arm that should match it), so nothing after a subcommand completes
/// (clap-rs/clap#6421, #6529). The arms are respelled the way the state is set.
fn fix_bash_hyphenated_name(name: &str, script: Vec<u8>) -> Vec<u8> {
    const SEP: &str = "__subcmd__";
    let wrong = format!("{}{SEP}", name.replace('-', SEP));
    let right = format!("{}{SEP}", name.replace('-', "__"));
    match String::from_utf8(script) {
        Ok(text) if name.contains('-') => text.replace(&wrong, &right).into_bytes(),
        Ok(text) => text.into_bytes(),
        Err(e) => e.into_bytes(),
    }
}

fn man_page(command: &Command, sections: &[(&str, &str)], see_also: &[String]) -> Vec<u8> {
    let man = clap_mangen::Man::new(command.clone()).manual("dreamkit");
    let mut out = Vec::new();
    // Writing into a Vec cannot fail.
    let _ = man.render_title(&mut out);
    let _ = man.render_name_section(&mut out);
    out.extend(synopsis_section(command).into_bytes());
    let _ = man.render_description_section(&mut out);
    let _ = man.render_options_section(&mut out);
    if command.has_subcommands() {
        let _ = man.render_subcommands_section(&mut out);
    }
    let mut exit_status = None;
    let mut previous = None;
    for (title, text) in sections {
        if *title == "EXIT STATUS" {
            exit_status = Some(*text);
        } else {
            let section = roff_section(title, text);
            // Two parts with one title (a tool's own environment, then the model's) make
            // one section.
            let body = match section.split_once('\n') {
                Some((_, body)) if previous == Some(*title) => body.to_string(),
                _ => section,
            };
            out.extend(body.into_bytes());
            previous = Some(*title);
        }
    }
    out.extend(exit_status_section(exit_status).into_bytes());
    out.extend(see_also_section(see_also).into_bytes());
    // clap_mangen needs a version for this section.
    if command.get_version().is_some() {
        let _ = man.render_version_section(&mut out);
    }
    out
}

/// clap_mangen's synopsis shows `[--cwd]` without the value it takes; this one shows
/// `[--cwd DIR]`, the positionals and the subcommand.
fn synopsis_section(command: &Command) -> String {
    let name = command.get_bin_name().unwrap_or_else(|| command.get_name());
    let mut words = vec![format!("\\fB{}\\fR", roff_escape(name))];
    let mut options: Vec<&Arg> = command
        .get_arguments()
        .filter(|a| !a.is_hide_set() && !a.is_positional())
        .collect();
    options.sort_by_key(|a| (a.get_display_order(), option_key(a)));
    for arg in options {
        let flag = match (arg.get_short(), arg.get_long()) {
            (Some(short), Some(long)) => format!(
                "\\fB\\-{}\\fR|\\fB\\-\\-{}\\fR",
                roff_escape(&short.to_string()),
                roff_escape(long)
            ),
            (Some(short), None) => format!("\\fB\\-{}\\fR", roff_escape(&short.to_string())),
            (None, Some(long)) => format!("\\fB\\-\\-{}\\fR", roff_escape(long)),
            (None, None) => continue,
        };
        let value = value_placeholder(arg)
            .map(|v| format!(" {v}"))
            .unwrap_or_default();
        let (open, close) = if arg.is_required_set() {
            ("", "")
        } else {
            ("[", "]")
        };
        words.push(format!("{open}{flag}{value}{close}"));
    }
    for arg in command.get_positionals().filter(|a| !a.is_hide_set()) {
        let value = value_placeholder(arg).unwrap_or_default();
        let dashes = if arg.is_trailing_var_arg_set() {
            "[\\fB\\-\\-\\fR] "
        } else {
            ""
        };
        if arg.is_required_set() {
            words.push(format!("{dashes}{value}"));
        } else {
            words.push(format!("{dashes}[{value}]"));
        }
    }
    if command.has_subcommands() {
        words.push("\\fISUBCOMMAND\\fR".to_string());
    }
    format!(".SH SYNOPSIS\n{}\n", words.join(" "))
}

/// `\fIDIR\fR`, or `\fICMD\fR...` for an argument that takes many values.
fn value_placeholder(arg: &Arg) -> Option<String> {
    if !arg.get_num_args().is_some_and(|n| n.takes_values())
        || matches!(
            arg.get_action(),
            ArgAction::SetTrue | ArgAction::SetFalse | ArgAction::Count
        )
    {
        return None;
    }
    let names = arg
        .get_value_names()
        .map(|names| {
            names
                .iter()
                .map(std::string::ToString::to_string)
                .collect::<Vec<_>>()
        })
        .unwrap_or_else(|| vec![arg.get_id().to_string().to_uppercase()]);
    let many = arg.get_num_args().is_some_and(|n| n.max_values() > 1);
    let text = names
        .iter()
        .map(|n| format!("\\fI{}\\fR", roff_escape(n)))
        .collect::<Vec<_>>()
        .join(" ");
    Some(if many { format!("{text}...") } else { text })
}

/// clap_mangen's order: short flags first by letter, then long-only ones by name.
fn option_key(arg: &Arg) -> String {
    match (arg.get_short(), arg.get_long()) {
        (Some(short), _) => {
            let case = if short.is_ascii_lowercase() { '0' } else { '1' };
            format!("{}{case}", short.to_ascii_lowercase())
        }
        (None, Some(long)) => long.to_string(),
        (None, None) => format!("{{{}", arg.get_id()),
    }
}

fn see_also_section(pages: &[String]) -> String {
    if pages.is_empty() {
        return String::new();
    }
    let refs: Vec<String> = pages
        .iter()
        .map(|p| format!("\\fB{}\\fR(1)", roff_escape(p)))
        .collect();
    format!(".SH \"SEE ALSO\"\n{}\n", refs.join(", "))
}

/// The page's own table (paragraphs of `CODE meaning`), else the one every tool shares.
fn exit_status_section(own: Option<&str>) -> String {
    let mut s = String::from(".SH \"EXIT STATUS\"\n");
    let mut entry = |code: &str, meaning: &str| {
        let meaning = meaning.split_whitespace().collect::<Vec<_>>().join(" ");
        s.push_str(&format!(
            ".TP\n\\fB{}\\fR\n{}",
            roff_escape(code),
            roff_line(&meaning)
        ));
    };
    match own {
        Some(text) => {
            for paragraph in text.trim().split("\n\n") {
                let (code, meaning) = paragraph.trim().split_once(' ').unwrap_or((paragraph, ""));
                entry(code, meaning);
            }
        }
        None => {
            for (code, meaning) in EXIT_CODE_TABLE {
                entry(&code.to_string(), meaning);
            }
        }
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

    #[test]
    fn synopsis_shows_values_and_subcommand_pages_get_their_own_sections() {
        let command = clap::Command::new("tool")
            .version("1.0")
            .arg(clap::Arg::new("dir").long("dir").value_name("DIR"))
            .subcommand(
                clap::Command::new("run").arg(
                    clap::Arg::new("cmd")
                        .value_name("CMD")
                        .required(true)
                        .num_args(1..)
                        .trailing_var_arg(true),
                ),
            );
        let files = render_all(vec![Page {
            command,
            sections: &[
                ("NOTES", "for the tool"),
                ("run/EXIT STATUS", "0 done\n\n127 CMD\nnot found"),
            ],
        }]);
        let page = |name: &str| {
            let file = files.iter().find(|f| f.0.to_str() == Some(name)).unwrap();
            String::from_utf8(file.1.clone()).unwrap()
        };
        let tool = page("man/tool.1");
        assert!(tool.contains("[\\fB\\-\\-dir\\fR \\fIDIR\\fR]"), "{tool}");
        assert!(tool.contains(".SH \"NOTES\""), "{tool}");
        assert_eq!(tool.matches(".SH SUBCOMMANDS").count(), 1, "{tool}");
        assert!(tool.contains("\\fB143\\fR"), "the common table: {tool}");
        assert!(
            tool.contains(".SH \"SEE ALSO\"\n\\fBtool\\-run\\fR(1)\n"),
            "{tool}"
        );
        let run = page("man/tool-run.1");
        assert!(run.contains("[\\fB\\-\\-\\fR] \\fICMD\\fR..."), "{run}");
        assert!(!run.contains("NOTES"), "{run}");
        assert!(run.contains(".TP\n\\fB127\\fR\nCMD not found\n"), "{run}");
        assert!(
            !run.contains("\\fB143\\fR"),
            "its own table replaces the common one: {run}"
        );
        assert!(run.contains("\\fBtool\\fR(1)"), "{run}");
    }

    #[test]
    fn bash_states_of_a_hyphenated_binary_are_spelled_one_way() {
        let mut command = clap::Command::new("my-tool")
            .subcommand(clap::Command::new("go").arg(clap::Arg::new("x").long("x")));
        let mut out = Vec::new();
        clap_complete::generate(Shell::Bash, &mut command, "my-tool", &mut out);
        let fixed = String::from_utf8(fix_bash_hyphenated_name("my-tool", out)).unwrap();
        assert!(fixed.contains("cmd=\"my__tool__subcmd__go\""), "{fixed}");
        assert!(fixed.contains("        my__tool__subcmd__go)\n"), "{fixed}");
        assert!(!fixed.contains("my__subcmd__tool"), "{fixed}");
    }

    #[test]
    fn directory_flags_complete_directories() {
        let command = with_value_hints(
            clap::Command::new("t")
                .arg(clap::Arg::new("cwd").long("cwd").value_name("DIR"))
                .subcommand(
                    clap::Command::new("s").arg(clap::Arg::new("p").long("p").value_name("PATH")),
                ),
        );
        let hint = |c: &clap::Command, id: &str| {
            c.get_arguments()
                .find(|a| a.get_id() == id)
                .map(clap::Arg::get_value_hint)
        };
        assert_eq!(hint(&command, "cwd"), Some(ValueHint::DirPath));
        let sub = command.find_subcommand("s").unwrap();
        assert_eq!(hint(sub, "p"), Some(ValueHint::FilePath));
    }
}
