//! Schemas for types discovered at run time: definitions from `ros.msg_paths`
//! directories first, then the embedded set.
//!
//! rosbag2 reads a type's definition from the ament index,
//! `<prefix>/share/<pkg>/msg/<Type>.msg`; a `msg_paths` entry is such a
//! `share` directory (`<dir>/<pkg>/msg/<Type>.msg`). Every type, the top
//! one and each dependency, is looked for in the directories in order and
//! then among the embedded definitions, so a workspace package may use
//! `geometry_msgs/Pose` from the embedded set and an installed
//! `std_msgs/Header` overrides the embedded one inside embedded types too.
//! When the `.msg` tree is incomplete, the whole tree is tried again from
//! `.idl` files (encoding `ros2idl`), as rosbag2 does. File contents never
//! panic: every failure is a [`DefinitionError`].

use std::borrow::Cow;
use std::collections::HashMap;
use std::fmt;
use std::io;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, PoisonError};

use super::concat::{concatenate, split_type_name, Format, WalkError, MAX_DEPTH};
use super::lookup;

/// A channel's schema as rosbag2 writes it into the MCAP Schema record.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Schema {
    /// `pkg/msg/Type`.
    pub name: String,
    /// `ros2msg`, `ros2idl`, or `""` for a type without a definition.
    pub encoding: &'static str,
    /// The concatenated definition text; shared, since every channel of the
    /// type and every later `resolve` hands out the same text.
    pub data: Arc<str>,
}

impl Schema {
    /// rosbag2's schema for a type whose definition it cannot find: empty
    /// encoding and data. Readers then cannot decode the messages, but the
    /// bytes are recorded.
    pub fn empty(name: impl Into<String>) -> Self {
        Self {
            name: name.into(),
            encoding: "",
            data: Arc::from(""),
        }
    }

    /// Whether this is [`Schema::empty`]'s schema.
    pub fn is_empty(&self) -> bool {
        self.encoding.is_empty() && self.data.is_empty()
    }
}

/// Where a definition file was found.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum DefinitionOrigin {
    /// A file under one of the `msg_paths` directories.
    File(PathBuf),
    /// The definitions embedded in this crate.
    Embedded,
}

impl fmt::Display for DefinitionOrigin {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            DefinitionOrigin::File(path) => write!(f, "{}", path.display()),
            DefinitionOrigin::Embedded => f.write_str("the embedded definitions"),
        }
    }
}

/// Why a type's schema could not be built.
#[derive(Debug, thiserror::Error)]
pub enum DefinitionError {
    /// The name is not `pkg/msg/Type` or `pkg/Type` made of ROS names (a
    /// service or action type, a bare name, a path).
    #[error("{type_name:?} is not a message type name (pkg/msg/Type)")]
    InvalidTypeName {
        /// The name as given.
        type_name: String,
    },
    /// No `.msg` or `.idl` file in any directory and no embedded definition.
    #[error(
        "no definition of {type_name}: not embedded, and none of {} exists",
        paths(searched)
    )]
    NotFound {
        /// `pkg/msg/Type`.
        type_name: String,
        /// Every file looked for, in order.
        searched: Vec<PathBuf>,
    },
    /// A type the definition uses has no definition anywhere.
    #[error("{type_name}: {used_by} uses {dependency}, which has no definition")]
    MissingDependency {
        /// The type whose schema was being built, `pkg/msg/Type`.
        type_name: String,
        /// The missing type as the using file names it.
        dependency: String,
        /// The file that uses it.
        used_by: DefinitionOrigin,
    },
    /// A definition file exists but cannot be read.
    #[error("cannot read {}: {source}", path.display())]
    Unreadable {
        /// The file.
        path: PathBuf,
        /// The error reading it.
        source: io::Error,
    },
    /// A definition file is not UTF-8 (schema text must be).
    #[error("{} is not UTF-8 (first bad byte at offset {valid_up_to})", path.display())]
    NotUtf8 {
        /// The file.
        path: PathBuf,
        /// Length of the valid prefix.
        valid_up_to: usize,
    },
    /// The definitions use each other in a circle; no message can hold that.
    #[error("{type_name}: the definitions form a cycle: {}", chain.join(" -> "))]
    Cycle {
        /// The type whose schema was being built, `pkg/msg/Type`.
        type_name: String,
        /// The types from the top one to the first repeated one.
        chain: Vec<String>,
    },
    /// The definitions nest deeper than rosbag2 follows.
    #[error("{type_name}: definitions nest more than {limit} levels deep: {}", path.join(" -> "))]
    TooDeep {
        /// The type whose schema was being built, `pkg/msg/Type`.
        type_name: String,
        /// The most levels followed.
        limit: usize,
        /// The types from the top one down to where the walk stopped.
        path: Vec<String>,
    },
}

fn paths(searched: &[PathBuf]) -> String {
    if searched.is_empty() {
        return "(no msg_paths directories)".to_owned();
    }
    let list: Vec<String> = searched.iter().map(|p| p.display().to_string()).collect();
    list.join(", ")
}

/// Builds and caches rosbag2 schemas, looking in `msg_paths` first and
/// then in the embedded set. Shared by reference between threads (DDS
/// discovery calls it from its own).
#[derive(Debug)]
pub struct DefinitionResolver {
    msg_paths: Vec<PathBuf>,
    /// Built schemas by `pkg/msg/Type`. Failures are not kept: a later call
    /// (the next discovery of the topic) sees a file the user fixed or
    /// installed meanwhile, and failing costs only a few `open`s.
    cache: Mutex<HashMap<String, Schema>>,
}

impl DefinitionResolver {
    /// A resolver over `msg_paths`, each a directory laid out as
    /// `<dir>/<pkg>/msg/<Type>.msg` (an ament `share` directory), searched in
    /// order. The directories are read when a type is resolved, not here, so
    /// one that appears later (a workspace built meanwhile) is used.
    pub fn new(msg_paths: Vec<PathBuf>) -> Self {
        Self {
            msg_paths,
            cache: Mutex::new(HashMap::new()),
        }
    }

    /// The directories searched, in order.
    pub fn msg_paths(&self) -> &[PathBuf] {
        &self.msg_paths
    }

    /// The schema of `type_name` (`pkg/msg/Type` or `pkg/Type`), built on
    /// the first call and then shared.
    pub fn resolve(&self, type_name: &str) -> Result<Schema, DefinitionError> {
        let Some((pkg, ty)) = split_type_name(type_name) else {
            return Err(DefinitionError::InvalidTypeName {
                type_name: type_name.to_owned(),
            });
        };
        let key = format!("{pkg}/msg/{ty}");
        if let Some(schema) = self.cache().get(&key) {
            return Ok(schema.clone());
        }
        let schema = self.build(pkg, ty)?;
        // Another thread may have built it meanwhile; keep the first so that
        // every caller shares one text.
        Ok(self.cache().entry(key).or_insert(schema).clone())
    }

    /// [`resolve`](Self::resolve), or, when that fails, rosbag2's empty
    /// schema (see [`Schema::empty`]) and the warning to log: the topic is
    /// still recorded, as rosbag2 records it, whatever is wrong with the
    /// definition files.
    pub fn resolve_or_empty(&self, type_name: &str) -> (Schema, Option<String>) {
        match self.resolve(type_name) {
            Ok(schema) => (schema, None),
            Err(err) => {
                let name = split_type_name(type_name)
                    .map(|(pkg, ty)| format!("{pkg}/msg/{ty}"))
                    .unwrap_or_else(|| type_name.to_owned());
                let warning =
                    format!("{err}; {name} is recorded with an empty schema (as rosbag2 does)");
                (Schema::empty(name), Some(warning))
            }
        }
    }

    fn cache(&self) -> std::sync::MutexGuard<'_, HashMap<String, Schema>> {
        // A panic elsewhere while holding the lock leaves the map whole (an
        // insert either happened or not), so poisoning is no reason to stop.
        self.cache.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// The `.msg` tree, or, like rosbag2, the `.idl` tree when a `.msg` file
    /// of it is missing.
    fn build(&self, pkg: &str, ty: &str) -> Result<Schema, DefinitionError> {
        match self.build_from(Format::Msg, pkg, ty) {
            Err(DefinitionError::NotFound {
                type_name,
                searched: mut searched_msg,
            }) => match self.build_from(Format::Idl, pkg, ty) {
                Err(DefinitionError::NotFound { searched, .. }) => {
                    searched_msg.extend(searched);
                    Err(DefinitionError::NotFound {
                        type_name,
                        searched: searched_msg,
                    })
                }
                idl => idl,
            },
            // The .msg error says more than the IDL one (which, without
            // .idl files, is only "not found").
            Err(msg_err @ DefinitionError::MissingDependency { .. }) => {
                self.build_from(Format::Idl, pkg, ty).map_err(|_| msg_err)
            }
            msg => msg,
        }
    }

    fn build_from(&self, format: Format, pkg: &str, ty: &str) -> Result<Schema, DefinitionError> {
        let type_name = format!("{pkg}/msg/{ty}");
        let mut searched = Vec::new();
        let Some((top, origin)) = self.find(format, pkg, ty, &mut searched)? else {
            return Err(DefinitionError::NotFound {
                type_name,
                searched,
            });
        };
        let top_name = format.section_name(pkg, ty);
        let mut origins = HashMap::from([(top_name.clone(), origin)]);
        let fetch = |dep: &str, used_by: &str| -> Result<Cow<'static, str>, DefinitionError> {
            let found = match split_type_name(dep) {
                Some((dep_pkg, dep_ty)) => self.find(format, dep_pkg, dep_ty, &mut Vec::new())?,
                // No file can have this name; nothing to look for.
                None => None,
            };
            match found {
                Some((text, origin)) => {
                    origins.insert(dep.to_owned(), origin);
                    Ok(text)
                }
                None => Err(DefinitionError::MissingDependency {
                    type_name: type_name.clone(),
                    dependency: dep.to_owned(),
                    used_by: origins
                        .get(used_by)
                        .cloned()
                        .unwrap_or(DefinitionOrigin::Embedded),
                }),
            }
        };
        let text = concatenate(format, &top_name, pkg, &top, fetch).map_err(|e| match e {
            WalkError::Source(e) => e,
            WalkError::Cycle(chain) => DefinitionError::Cycle {
                type_name: type_name.clone(),
                chain,
            },
            WalkError::TooDeep(path) => DefinitionError::TooDeep {
                type_name: type_name.clone(),
                limit: MAX_DEPTH,
                path,
            },
        })?;
        Ok(Schema {
            name: type_name,
            encoding: format.encoding(),
            data: Arc::from(text),
        })
    }

    /// One type's own file: the first of the directories that has it, else
    /// the embedded `.msg`. Files looked for and absent go to `searched`.
    fn find(
        &self,
        format: Format,
        pkg: &str,
        ty: &str,
        searched: &mut Vec<PathBuf>,
    ) -> Result<Option<(Cow<'static, str>, DefinitionOrigin)>, DefinitionError> {
        for dir in &self.msg_paths {
            let path = definition_path(dir, format, pkg, ty);
            match std::fs::read(&path) {
                Ok(bytes) => {
                    return match String::from_utf8(bytes) {
                        Ok(text) => Ok(Some((Cow::Owned(text), DefinitionOrigin::File(path)))),
                        Err(e) => Err(DefinitionError::NotUtf8 {
                            valid_up_to: e.utf8_error().valid_up_to(),
                            path,
                        }),
                    };
                }
                // An entry that is missing, or a file where a directory of
                // the layout should be: this directory does not have the type.
                Err(e)
                    if matches!(
                        e.kind(),
                        io::ErrorKind::NotFound | io::ErrorKind::NotADirectory
                    ) =>
                {
                    searched.push(path);
                }
                Err(source) => return Err(DefinitionError::Unreadable { path, source }),
            }
        }
        if format == Format::Msg {
            if let Some(def) = lookup(&format!("{pkg}/{ty}")) {
                return Ok(Some((Cow::Borrowed(def.msg()), DefinitionOrigin::Embedded)));
            }
        }
        Ok(None)
    }
}

/// `<dir>/<pkg>/msg/<Type>.<ext>`; `pkg` and `ty` are ROS names (checked by
/// `split_type_name`), so the path stays inside `dir`.
fn definition_path(dir: &Path, format: Format, pkg: &str, ty: &str) -> PathBuf {
    dir.join(pkg)
        .join("msg")
        .join(format!("{ty}.{}", format.extension()))
}
