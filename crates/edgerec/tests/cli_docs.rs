//! What the CLI says about itself stays true: the completions and man pages
//! the image ships are what the binary generates, bash sources the
//! completion script and completes with it, man renders the page, and every
//! `edgerec` command shown in README.md and docs/usage.md names
//! subcommands and flags the binary has.

use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};

use edgerec_testkit::skip::skip;

const BIN: &str = env!("CARGO_BIN_EXE_edgerec");

fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

fn share() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("share")
}

fn edgerec(args: &[&str]) -> Output {
    Command::new(BIN)
        .args(args)
        .env("EDGEREC_LOG", "warn")
        .output()
        .expect("run edgerec")
}

fn stdout(o: &Output) -> String {
    assert!(
        o.status.success(),
        "status {:?}\nstderr:\n{}",
        o.status,
        String::from_utf8_lossy(&o.stderr)
    );
    String::from_utf8(o.stdout.clone()).expect("UTF-8 output")
}

/// The files under share/ and the command that makes each.
const COMPLETIONS: [(&str, &str); 3] = [
    ("bash", "completions/edgerec.bash"),
    ("zsh", "completions/_edgerec"),
    ("fish", "completions/edgerec.fish"),
];

const UPDATE: &str = "EDGEREC_UPDATE_SHARE";

/// With EDGEREC_UPDATE_SHARE=1 the test rewrites share/ instead of
/// comparing: `EDGEREC_UPDATE_SHARE=1 cargo test -p edgerec --test
/// cli_docs`.
#[test]
fn the_shipped_completions_and_man_pages_are_what_the_binary_generates() {
    let update = std::env::var_os(UPDATE).is_some_and(|v| v == "1");
    let fix = format!(
        "regenerate them: {UPDATE}=1 cargo test -p edgerec --test cli_docs, and commit crates/edgerec/share"
    );
    for (shell, file) in COMPLETIONS {
        let want = stdout(&edgerec(&["completions", shell]));
        let path = share().join(file);
        if update {
            std::fs::create_dir_all(path.parent().unwrap()).unwrap();
            std::fs::write(&path, &want).unwrap();
            continue;
        }
        let have = std::fs::read_to_string(&path)
            .unwrap_or_else(|e| panic!("{}: {e}; {fix}", path.display()));
        assert!(
            have == want,
            "{} differs from `edgerec completions {shell}`: {fix}",
            path.display()
        );
    }

    let fresh = tempfile::tempdir().unwrap();
    let out = stdout(&edgerec(&["man", "--dir", fresh.path().to_str().unwrap()]));
    assert!(out.starts_with("wrote "), "{out}");
    let man = share().join("man");
    if update {
        let _ = std::fs::remove_dir_all(&man);
        std::fs::create_dir_all(&man).unwrap();
    }
    let names = |d: &Path| -> Vec<String> {
        let mut v: Vec<String> = std::fs::read_dir(d)
            .map(|r| {
                r.map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
                    .collect()
            })
            .unwrap_or_default();
        v.sort();
        v
    };
    let generated = names(fresh.path());
    for must in [
        "edgerec.1",
        "edgerec-run.1",
        "edgerec-export-video.1",
        "edgerec-man.1",
    ] {
        assert!(
            generated.iter().any(|n| n == must),
            "{must} in {generated:?}"
        );
    }
    for n in &generated {
        let want = std::fs::read(fresh.path().join(n)).unwrap();
        if update {
            std::fs::write(man.join(n), &want).unwrap();
            continue;
        }
        let have = std::fs::read(man.join(n)).unwrap_or_default();
        assert!(
            have == want,
            "share/man/{n} differs from `edgerec man --dir`: {fix}"
        );
    }
    assert_eq!(
        names(&man),
        generated,
        "share/man holds other pages than `edgerec man --dir` writes: {fix}"
    );
    // `edgerec man` prints the top-level page, the one written as edgerec.1.
    let top = edgerec(&["man"]);
    assert_eq!(
        top.stdout,
        std::fs::read(fresh.path().join("edgerec.1")).unwrap()
    );
}

#[test]
fn bash_sources_the_completion_script_and_completes_subcommands_and_flags() {
    let generated = stdout(&edgerec(&["completions", "bash"]));
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("edgerec.bash");
    std::fs::write(&file, generated).unwrap();
    // What bash's programmable completion does for `edgerec ex<TAB>` and
    // `edgerec export video --t<TAB>`: set COMP_WORDS/COMP_CWORD, call the
    // function `complete -p` names, read COMPREPLY.
    let program = r#"
set -e
source "$1"
spec=$(complete -p edgerec)
fn=${spec#*-F }; fn=${fn%% *}
complete_words() {
    COMP_WORDS=("$@"); COMP_CWORD=$(($# - 1)); COMP_LINE="$*"; COMP_POINT=${#COMP_LINE}
    COMPREPLY=()
    "$fn" edgerec "${COMP_WORDS[COMP_CWORD]}" "${COMP_WORDS[COMP_CWORD-1]}"
    echo "${COMPREPLY[*]}"
}
echo "sub: $(complete_words edgerec ex)"
echo "flag: $(complete_words edgerec export video --t)"
echo "shell: $(complete_words edgerec completions f)"
"#;
    let o = Command::new("bash")
        .args(["--norc", "--noprofile", "-c", program, "bash"])
        .arg(&file)
        .stdin(Stdio::null())
        .output()
        .expect("run bash");
    let out = String::from_utf8_lossy(&o.stdout);
    assert!(
        o.status.success() && o.stderr.is_empty(),
        "bash: {:?}\n{out}\nstderr:\n{}",
        o.status,
        String::from_utf8_lossy(&o.stderr)
    );
    assert!(out.contains("sub: export"), "{out}");
    assert!(out.contains("flag: --topic"), "{out}");
    assert!(out.contains("shell: fish"), "{out}");
}

#[test]
fn man_renders_the_page() {
    if Command::new("man").arg("--version").output().is_err() {
        skip("man (man-db) is not installed: scripts/test's setup installs it");
        return;
    }
    let page = edgerec(&["man"]);
    let mut child = Command::new("man")
        .args(["-l", "-"])
        .env("MANPAGER", "cat")
        .env("PAGER", "cat")
        .env("MANWIDTH", "100")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("run man");
    {
        use std::io::Write;
        let mut stdin = child.stdin.take().unwrap();
        stdin.write_all(&stdout(&page).into_bytes()).unwrap();
    }
    let o = child.wait_with_output().unwrap();
    let text = String::from_utf8_lossy(&o.stdout);
    assert!(
        o.status.success(),
        "man -l -: {:?}\n{}",
        o.status,
        String::from_utf8_lossy(&o.stderr)
    );
    for want in [
        "NAME",
        "SYNOPSIS",
        "SUBCOMMANDS",
        "edgerec-run(1)",
        "completions",
    ] {
        assert!(
            text.contains(want),
            "{want} missing from the rendered page:\n{text}"
        );
    }
}

/// The `$ edgerec ...` lines of the fenced blocks of a Markdown file, with
/// their line numbers.
fn shown_commands(path: &Path) -> Vec<(usize, String)> {
    let text = std::fs::read_to_string(path).unwrap();
    let mut fenced = false;
    let mut out = Vec::new();
    for (i, line) in text.lines().enumerate() {
        if line.trim_start().starts_with("```") {
            fenced = !fenced;
            continue;
        }
        if !fenced {
            continue;
        }
        let l = line.trim_start();
        let l = l.strip_prefix("$ ").unwrap_or(l);
        let l = l.strip_prefix("sudo ").unwrap_or(l);
        if l.starts_with("edgerec ") {
            out.push((i + 1, l.to_string()));
        }
    }
    out
}

/// Shell words of the command's first pipeline stage, without a trailing
/// `&` or a `# comment`; quotes removed.
fn words(line: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut cur = String::new();
    let mut quote: Option<char> = None;
    let mut any = false;
    for c in line.chars() {
        match quote {
            Some(q) if c == q => quote = None,
            Some(_) => cur.push(c),
            None => match c {
                '\'' | '"' => {
                    quote = Some(c);
                    any = true;
                }
                '#' if cur.is_empty() && !any => break,
                '|' | ';' | '>' | '<' | '&' => break,
                c if c.is_whitespace() => {
                    if any || !cur.is_empty() {
                        out.push(std::mem::take(&mut cur));
                        any = false;
                    }
                }
                c => {
                    cur.push(c);
                    any = true;
                }
            },
        }
    }
    if any || !cur.is_empty() {
        out.push(cur);
    }
    out
}

/// The subcommand names of a `--help` text's `Commands:` section.
fn subcommands(help: &str) -> Vec<String> {
    help.lines()
        .skip_while(|l| !l.starts_with("Commands:"))
        .skip(1)
        .take_while(|l| l.starts_with("  "))
        .filter_map(|l| l.split_whitespace().next().map(str::to_string))
        .collect()
}

/// Whether `flag` (`--topic`, `-o`) is one of the options a `--help` text
/// lists.
fn lists_flag(help: &str, flag: &str) -> bool {
    help.lines().any(|l| {
        let l = l.trim_start();
        l.starts_with('-')
            && l.split(|c: char| c.is_whitespace() || c == ',' || c == '=' || c == '<')
                .take_while(|w| w.is_empty() || w.starts_with('-'))
                .any(|w| w == flag)
    })
}

#[test]
fn every_edgerec_command_the_docs_show_names_subcommands_and_flags_edgerec_has() {
    let mut checked = 0;
    let mut problems = Vec::new();
    for doc in ["README.md", "docs/usage.md"] {
        let path = repo().join(doc);
        let shown = shown_commands(&path);
        assert!(!shown.is_empty(), "no `edgerec` commands found in {doc}");
        for (line, cmd) in shown {
            let w = words(&cmd);
            // The subcommand path: `edgerec export video`.
            let mut path_words: Vec<String> = Vec::new();
            let mut help = stdout(&edgerec(&["--help"]));
            let mut rest = w[1..].iter().peekable();
            while let Some(next) = rest.peek() {
                if next.starts_with('-') || !subcommands(&help).contains(next) {
                    break;
                }
                path_words.push((*next).clone());
                rest.next();
                let mut args: Vec<&str> = path_words.iter().map(String::as_str).collect();
                args.push("--help");
                help = stdout(&edgerec(&args));
            }
            if path_words.is_empty() {
                problems.push(format!(
                    "{doc}:{line}: `{cmd}`: no such subcommand (edgerec --help lists them)"
                ));
                continue;
            }
            if !subcommands(&help).is_empty() {
                problems.push(format!(
                    "{doc}:{line}: `{cmd}`: `edgerec {}` needs one of its subcommands",
                    path_words.join(" ")
                ));
                continue;
            }
            for a in rest {
                if a.len() > 1 && a.starts_with('-') && a != "--" {
                    let flag = a.split('=').next().unwrap_or(a);
                    if !lists_flag(&help, flag) {
                        problems.push(format!(
                            "{doc}:{line}: `{cmd}`: `edgerec {} --help` has no {flag}",
                            path_words.join(" ")
                        ));
                    }
                }
            }
            checked += 1;
        }
    }
    assert!(problems.is_empty(), "{}", problems.join("\n"));
    assert!(checked >= 10, "only {checked} commands checked");
}

#[test]
fn the_word_splitter_reads_shell_lines_as_the_shell_does() {
    assert_eq!(
        words(r#"edgerec ctl trigger --reason "hard brake" &"#),
        ["edgerec", "ctl", "trigger", "--reason", "hard brake"]
    );
    assert_eq!(
        words("edgerec record -a -o rec        # Ctrl-C to stop"),
        ["edgerec", "record", "-a", "-o", "rec"]
    );
    assert_eq!(words("edgerec man | man -l -"), ["edgerec", "man"]);
    assert_eq!(
        words("edgerec cat b --topic '' x"),
        ["edgerec", "cat", "b", "--topic", "", "x"]
    );
    assert!(lists_flag("  -o, --output <OUTPUT>  The file", "-o"));
    assert!(lists_flag("  -o, --output <OUTPUT>  The file", "--output"));
    assert!(!lists_flag(
        "  -o, --output <OUTPUT>  The --topic file",
        "--topic"
    ));
}
