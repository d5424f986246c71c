//! `edgerec completions SHELL` and `edgerec man`: shell completions and man
//! pages generated from the clap definition the binary parses its command
//! line with, so they cannot drift from it. The image installs the same
//! files from `crates/edgerec/share/` (the Yocto recipe), which a test
//! (`tests/cli_docs.rs`) keeps equal to what the binary prints.

use std::io::{self, Write};
use std::path::{Path, PathBuf};

use clap::Command;
use clap_complete::Shell;

/// Writes the completion script for `shell` to `out`.
pub fn completions(mut cmd: Command, shell: Shell, out: &mut dyn Write) {
    let name = cmd.get_name().to_string();
    clap_complete::generate(shell, &mut cmd, name, out);
}

/// Writes the top-level man page (section 1) to `out`.
pub fn man_page(cmd: Command, out: &mut dyn Write) -> io::Result<()> {
    clap_mangen::Man::new(cmd.disable_help_subcommand(true)).render(out)
}

/// Writes `NAME.1` and one `NAME-SUB[-SUB].1` per subcommand, nested ones
/// included, into `dir` (created if missing); returns the files written.
pub fn man_pages(cmd: Command, dir: &Path) -> io::Result<Vec<PathBuf>> {
    std::fs::create_dir_all(dir)?;
    // build() names each subcommand for its page: `edgerec-export-video`.
    let mut cmd = cmd.disable_help_subcommand(true);
    cmd.build();
    let mut written = Vec::new();
    write_pages(&cmd, dir, &mut written)?;
    Ok(written)
}

fn write_pages(cmd: &Command, dir: &Path, written: &mut Vec<PathBuf>) -> io::Result<()> {
    written.push(clap_mangen::Man::new(cmd.clone()).generate_to(dir)?);
    for sub in cmd.get_subcommands().filter(|s| !s.is_hide_set()) {
        write_pages(sub, dir, written)?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cli() -> Command {
        Command::new("demo")
            .version("1.0")
            .about("A demo")
            .subcommand(
                Command::new("export")
                    .about("Export")
                    .subcommand(Command::new("video").about("A video")),
            )
            .subcommand(Command::new("run").about("Run"))
    }

    #[test]
    fn man_pages_has_one_page_per_subcommand_nested_ones_included() {
        let d = tempfile::tempdir().unwrap();
        let files = man_pages(cli(), d.path()).unwrap();
        let names: Vec<String> = files
            .iter()
            .map(|p| p.file_name().unwrap().to_string_lossy().into_owned())
            .collect();
        assert_eq!(
            names,
            [
                "demo.1",
                "demo-export.1",
                "demo-export-video.1",
                "demo-run.1"
            ]
        );
        let video = std::fs::read_to_string(d.path().join("demo-export-video.1")).unwrap();
        assert!(video.contains("demo\\-export\\-video"), "{video}");
        assert!(video.contains("A video"), "{video}");
    }

    #[test]
    fn completions_name_every_subcommand() {
        let mut out = Vec::new();
        completions(cli(), Shell::Bash, &mut out);
        let s = String::from_utf8(out).unwrap();
        assert!(s.contains("complete -F _demo"), "{s}");
        for sub in ["export", "video", "run"] {
            assert!(s.contains(sub), "{sub} missing from\n{s}");
        }
    }
}
