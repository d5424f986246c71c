//! Writes the table of embedded message definitions from `msg/`.
//!
//! Every `msg/<pkg>/msg/<Type>.msg` becomes one `include_str!` entry of
//! `$OUT_DIR/msgdefs_table.rs`, sorted by `(pkg, Type)` so that
//! `msgdefs::lookup` can binary-search it. Adding a type is adding its file
//! (and its provenance row in `msg/README.md`); nothing else is listed by
//! hand. Names must be ROS names (`[A-Za-z][A-Za-z0-9_]*`) and a package's
//! `msg/` folder may hold only `.msg` files, so a stray `.idl` or a typo is
//! a build error rather than a type that silently is not embedded.

use std::error::Error;
use std::fmt::Write as _;
use std::fs;
use std::path::{Path, PathBuf};

fn main() -> Result<(), Box<dyn Error>> {
    let manifest = PathBuf::from(std::env::var("CARGO_MANIFEST_DIR")?);
    let root = manifest.join("msg");
    // A directory here makes Cargo rerun the script when anything below it
    // changes (a file added, removed or edited).
    println!("cargo:rerun-if-changed=msg");
    println!("cargo:rerun-if-changed=build.rs");

    let mut entries: Vec<(String, String, PathBuf)> = Vec::new();
    for pkg_dir in sorted_entries(&root)? {
        if !pkg_dir.is_dir() {
            continue; // README.md
        }
        let pkg = file_name(&pkg_dir)?;
        check_ros_name(&pkg, &pkg_dir)?;
        let msg_dir = pkg_dir.join("msg");
        for file in sorted_entries(&msg_dir)? {
            let name = file_name(&file)?;
            let Some(ty) = name.strip_suffix(".msg") else {
                return Err(format!("{}: only .msg files belong here", file.display()).into());
            };
            check_ros_name(ty, &file)?;
            entries.push((pkg.clone(), ty.to_owned(), file));
        }
    }
    entries.sort_by(|a, b| (&a.0, &a.1).cmp(&(&b.0, &b.1)));

    let mut out = String::new();
    writeln!(out, "// Written by build.rs from msg/; do not edit.")?;
    writeln!(
        out,
        "static DEFINITIONS: [MessageDefinition; {}] = [",
        entries.len()
    )?;
    for (pkg, ty, file) in &entries {
        let path = file
            .to_str()
            .ok_or_else(|| format!("{}: path is not UTF-8", file.display()))?;
        writeln!(
            out,
            "    MessageDefinition::embedded({:?}, include_str!({path:?})),",
            format!("{pkg}/msg/{ty}")
        )?;
    }
    writeln!(out, "];")?;

    let dest = PathBuf::from(std::env::var("OUT_DIR")?).join("msgdefs_table.rs");
    fs::write(&dest, out).map_err(|e| format!("{}: {e}", dest.display()))?;
    Ok(())
}

fn sorted_entries(dir: &Path) -> Result<Vec<PathBuf>, Box<dyn Error>> {
    let mut paths = Vec::new();
    for entry in fs::read_dir(dir).map_err(|e| format!("{}: {e}", dir.display()))? {
        paths.push(entry.map_err(|e| format!("{}: {e}", dir.display()))?.path());
    }
    paths.sort();
    Ok(paths)
}

fn file_name(path: &Path) -> Result<String, Box<dyn Error>> {
    path.file_name()
        .and_then(|n| n.to_str())
        .map(str::to_owned)
        .ok_or_else(|| format!("{}: name is not UTF-8", path.display()).into())
}

fn check_ros_name(name: &str, path: &Path) -> Result<(), Box<dyn Error>> {
    let mut chars = name.chars();
    let ok = chars.next().is_some_and(|c| c.is_ascii_alphabetic())
        && chars.all(|c| c.is_ascii_alphanumeric() || c == '_');
    if ok {
        Ok(())
    } else {
        Err(format!(
            "{}: {name:?} is not a ROS package or type name",
            path.display()
        )
        .into())
    }
}
