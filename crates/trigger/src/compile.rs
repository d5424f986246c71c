//! Checks a [`Condition`] against a message type and turns it into a
//! [`Compiled`] tree of resolved field paths and literal operands.
//!
//! Every field must exist and end on a primitive or string; each
//! comparison must put numbers with numbers (signed, unsigned and
//! floating point mix freely), strings with strings and booleans with
//! booleans; strings and booleans take only `==` and `!=`; a bare operand
//! must be a boolean field or `true`/`false`. A literal on the left is
//! moved to the right (`12 > voltage` is `voltage < 12`).
//!
//! Times: a path to a `builtin_interfaces/Time` or `Duration` (a header's
//! `stamp`), or to ROS 1's built-in `time` or `duration`, is a time in
//! nanoseconds, compared with a number that has a
//! unit (`header.stamp > 1700000000.5s`); `.to_sec()` makes it seconds
//! (floating point, as rospy's `to_sec()`), `.to_nsec()` nanoseconds (an
//! integer), both compared with plain numbers. An [`Env`] adds what
//! `edgerec filter` knows besides the message: `topic` (a constant per
//! channel, so a comparison with it is settled at compile time), `t` (the
//! log time, a time as above) and the `m.` prefix of `rosbag filter`'s
//! expressions. `and`/`or` settled by their left side do not compile
//! their right side (as Python does not evaluate it): `topic == "/imu"
//! and m.angular_velocity.x > 1` compiles for a topic of any type.

use std::sync::Arc;

use edgerec_format::cdr_read::{FieldPath, PathErrorKind, ValueKind};
use edgerec_format::msgtype::TypeTable;

use crate::lexer::CmpOp;
use crate::parse::{Condition, Expr, Operand, Spanned, TimeUnit};
use crate::{ExprError, ExprErrorKind};

/// What an expression can name besides the message's fields.
#[derive(Debug, Clone, Default)]
pub struct Env {
    /// `topic`: the channel's topic.
    pub topic: Option<String>,
    /// `t`: the message's log time (given to [`Compiled::holds_at`]).
    pub log_time: bool,
    /// `m.`, `rosbag filter`'s name for the message: `m.header.stamp` is
    /// `header.stamp`.
    pub message_prefix: bool,
}

impl Env {
    /// What `edgerec filter` gives a message of `topic`: `topic`, `t` and
    /// the `m.` prefix.
    pub fn filter(topic: &str) -> Env {
        Env {
            topic: Some(topic.to_owned()),
            log_time: true,
            message_prefix: true,
        }
    }
}

/// Where a time comes from.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) enum Clock {
    /// A `Time`/`Duration` field: its `sec` and `nanosec` fields, by index
    /// in [`Compiled::fields`].
    Stamp { sec: usize, nanosec: usize },
    /// The log time (`t`).
    LogTime,
}

/// The left side of a compiled comparison.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Lhs {
    /// A field, by index in [`Compiled::fields`].
    Field(usize),
    /// A time: nanoseconds (`None`) or converted.
    Clock(Clock, Option<TimeUnit>),
}

/// A number operand: integers stay exact, the rest is `f64`.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) enum Num {
    Int(i128),
    Float(f64),
}

/// The right side of a compiled comparison.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Rhs {
    Num(Num),
    Str(String),
    Bool(bool),
    /// Another field, by index in [`Compiled::fields`].
    Field(usize),
}

/// A node of a compiled condition.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Node {
    Or(Box<Node>, Box<Node>),
    And(Box<Node>, Box<Node>),
    Not(Box<Node>),
    Const(bool),
    /// A boolean field on its own, by index in [`Compiled::fields`].
    Truth(usize),
    /// `lhs op rhs`.
    Compare {
        lhs: Lhs,
        op: CmpOp,
        rhs: Rhs,
    },
}

/// The text of an operand, for errors.
fn operand_text(s: &Spanned) -> String {
    match &s.operand {
        Operand::Field(p) => p.clone(),
        Operand::Time(p, u) => format!("{p}.{}()", u.method()),
        other => format!("{other:?}"),
    }
}

/// A condition checked against a message type, ready to evaluate payloads
/// of that type (see the `eval` methods).
#[derive(Debug, Clone)]
pub struct Compiled {
    pub(crate) text: String,
    /// Each field the condition reads, once, in order of first use.
    pub(crate) fields: Vec<FieldPath>,
    pub(crate) root: Node,
}

impl Compiled {
    /// The condition's text.
    pub fn text(&self) -> &str {
        &self.text
    }

    /// The fields the condition reads, each once, in order of first use.
    pub fn fields(&self) -> &[FieldPath] {
        &self.fields
    }
}

impl Condition {
    /// Checks the condition against `types` (the schema of the topic it
    /// watches) and resolves its fields.
    pub fn compile(&self, types: &TypeTable) -> Result<Compiled, ExprError> {
        self.compile_in(types, &Env::default())
    }

    /// [`Condition::compile`] with the names `env` adds.
    pub fn compile_in(&self, types: &TypeTable, env: &Env) -> Result<Compiled, ExprError> {
        let mut c = Compiler {
            types: Arc::new(types.clone()),
            fields: Vec::new(),
            env: env.clone(),
        };
        let root = c.node(self.expr())?;
        Ok(Compiled {
            text: self.text().to_owned(),
            fields: c.fields,
            root,
        })
    }
}

impl Compiled {
    /// True when the condition holds for every message (`Some(true)`) or
    /// for none (`Some(false)`) whatever its content: `edgerec filter`
    /// keeps or drops such a channel whole.
    pub fn constant(&self) -> Option<bool> {
        match self.root {
            Node::Const(b) => Some(b),
            _ => None,
        }
    }
}

struct Compiler {
    types: Arc<TypeTable>,
    fields: Vec<FieldPath>,
    env: Env,
}

/// One side of a comparison, classified.
enum Side {
    Field {
        index: usize,
        kind: ValueKind,
    },
    Num(Num),
    Str(String),
    Bool(bool),
    /// `topic`: a string known when compiling.
    Topic(String),
    /// A time in nanoseconds, or converted to a number.
    Clock(Clock, Option<TimeUnit>),
    /// A number with a time unit, in nanoseconds.
    Duration(i128),
}

impl Side {
    fn kind(&self) -> ValueKind {
        match self {
            Side::Field { kind, .. } => *kind,
            Side::Num(Num::Int(_)) | Side::Duration(_) => ValueKind::Int,
            Side::Clock(_, Some(TimeUnit::Nsec) | None) => ValueKind::Int,
            Side::Num(Num::Float(_)) | Side::Clock(_, Some(TimeUnit::Sec)) => ValueKind::Float,
            Side::Str(_) | Side::Topic(_) => ValueKind::Str,
            Side::Bool(_) => ValueKind::Bool,
        }
    }

    /// A time in nanoseconds (a raw clock or a time literal): compared
    /// only with another such.
    fn is_time(&self) -> bool {
        matches!(self, Side::Clock(_, None) | Side::Duration(_))
    }

    /// A value known when compiling.
    fn is_literal(&self) -> bool {
        matches!(
            self,
            Side::Num(_) | Side::Str(_) | Side::Bool(_) | Side::Duration(_)
        )
    }
}

/// How a time mismatch is explained.
fn time_mismatch(column: usize, time_side: &str) -> ExprError {
    ExprError {
        column,
        kind: ExprErrorKind::TimeMismatch(format!(
            "{time_side} is a time in nanoseconds: compare it with a time (`100s`, `1700000000.5s`, `250ms`), or convert it first (`.to_sec()`, `.to_nsec()`)"
        )),
    }
}

/// How an error message names a kind of value: "a string field", "a number".
fn describe(kind: ValueKind, field: bool) -> &'static str {
    match (kind, field) {
        (ValueKind::Bool, true) => "a boolean field",
        (ValueKind::Str, true) => "a string field",
        (_, true) => "a numeric field",
        (ValueKind::Bool, false) => "`true`/`false`",
        (ValueKind::Str, false) => "a string",
        (_, false) => "a number",
    }
}

/// Whether values of these kinds can be compared.
fn compatible(a: ValueKind, b: ValueKind) -> bool {
    a == b || (a.is_number() && b.is_number())
}

impl Compiler {
    fn node(&mut self, expr: &Expr) -> Result<Node, ExprError> {
        Ok(match expr {
            Expr::Or(a, b) => match self.node(a)? {
                Node::Const(true) => Node::Const(true),
                Node::Const(false) => self.node(b)?,
                left => match self.node(b)? {
                    Node::Const(true) => Node::Const(true),
                    Node::Const(false) => left,
                    right => Node::Or(Box::new(left), Box::new(right)),
                },
            },
            Expr::And(a, b) => match self.node(a)? {
                Node::Const(false) => Node::Const(false),
                Node::Const(true) => self.node(b)?,
                left => match self.node(b)? {
                    Node::Const(false) => Node::Const(false),
                    Node::Const(true) => left,
                    right => Node::And(Box::new(left), Box::new(right)),
                },
            },
            Expr::Not(a) => match self.node(a)? {
                Node::Const(b) => Node::Const(!b),
                inner => Node::Not(Box::new(inner)),
            },
            Expr::Bare(s) => match self.side(s)? {
                Side::Bool(b) => Node::Const(b),
                Side::Field {
                    index,
                    kind: ValueKind::Bool,
                } => Node::Truth(index),
                Side::Field { index, .. } => {
                    let path = &self.fields[index];
                    return Err(ExprError {
                        column: s.column,
                        kind: ExprErrorKind::NotACondition {
                            what: format!("`{path}` is a {} field", path.leaf()),
                            example: match path.kind() {
                                ValueKind::Str => format!("{path} == \"...\""),
                                _ => format!("{path} > 0"),
                            },
                        },
                    });
                }
                other => {
                    return Err(ExprError {
                        column: s.column,
                        kind: ExprErrorKind::NotACondition {
                            what: format!("{} on its own", describe(other.kind(), false)),
                            example: "voltage < 12.1".into(),
                        },
                    })
                }
            },
            Expr::Compare { left, op, right } => {
                let column = left.column;
                let (l, r) = (self.side(left)?, self.side(right)?);
                // `topic` is known: the comparison is settled here.
                if let Side::Topic(topic) = &l {
                    return self.topic_compare(topic, *op, &r, right.column);
                }
                if let Side::Topic(topic) = &r {
                    return self.topic_compare(topic, op.flipped(), &l, column);
                }
                if l.is_time() != r.is_time() {
                    let (time, spanned, other) = if l.is_time() {
                        (&l, left, right)
                    } else {
                        (&r, right, left)
                    };
                    return Err(match time {
                        Side::Duration(_) => ExprError {
                            column: spanned.column,
                            kind: ExprErrorKind::TimeMismatch(format!(
                                "a number with a time unit compares with a time (a header's `stamp`, `t`), and `{}` is not one: drop the unit or convert",
                                operand_text(other)
                            )),
                        },
                        _ => time_mismatch(spanned.column, &format!("`{}`", operand_text(spanned))),
                    });
                }
                let swapped = l.is_literal() && !r.is_literal();
                let (lhs_side, op, rhs) = match (l, r) {
                    (l, r) if !l.is_literal() => (l, *op, r),
                    (l, r) if !r.is_literal() => (r, op.flipped(), l),
                    _ => {
                        return Err(ExprError {
                            column,
                            kind: ExprErrorKind::ConstantComparison,
                        })
                    }
                };
                let field_kind = lhs_side.kind();
                let rhs_is_field = matches!(rhs, Side::Field { .. } | Side::Clock(..));
                if !compatible(field_kind, rhs.kind()) {
                    // Name the sides in the order they were written.
                    let (a, b) = (
                        describe(field_kind, true),
                        describe(rhs.kind(), rhs_is_field),
                    );
                    let (left, right) = if swapped { (b, a) } else { (a, b) };
                    return Err(ExprError {
                        column,
                        kind: ExprErrorKind::Mismatch { left, right },
                    });
                }
                if op.is_ordering() && !field_kind.is_number() {
                    return Err(ExprError {
                        column,
                        kind: ExprErrorKind::Ordering {
                            op: op.symbol(),
                            what: if field_kind == ValueKind::Str {
                                "strings"
                            } else {
                                "booleans"
                            },
                        },
                    });
                }
                let lhs = match lhs_side {
                    Side::Field { index, .. } => Lhs::Field(index),
                    Side::Clock(c, unit) => Lhs::Clock(c, unit),
                    // Literals were moved to the right above.
                    _ => {
                        return Err(ExprError {
                            column,
                            kind: ExprErrorKind::ConstantComparison,
                        })
                    }
                };
                let rhs = match rhs {
                    Side::Field { index, .. } => Rhs::Field(index),
                    Side::Num(n) => Rhs::Num(n),
                    Side::Duration(ns) => Rhs::Num(Num::Int(ns)),
                    Side::Str(s) => Rhs::Str(s),
                    Side::Bool(b) => Rhs::Bool(b),
                    Side::Clock(..) | Side::Topic(_) => {
                        return Err(ExprError {
                            column,
                            kind: ExprErrorKind::TimeMismatch(
                                "compare a time with a constant (`100s`, or a number after `.to_sec()`), not with another field".into(),
                            ),
                        })
                    }
                };
                Node::Compare { lhs, op, rhs }
            }
        })
    }

    /// `topic op other`, settled now: `other` must be a string.
    fn topic_compare(
        &self,
        topic: &str,
        op: CmpOp,
        other: &Side,
        column: usize,
    ) -> Result<Node, ExprError> {
        let Side::Str(s) = other else {
            return Err(ExprError {
                column,
                kind: ExprErrorKind::Mismatch {
                    left: "`topic` (a string)",
                    right: describe(other.kind(), matches!(other, Side::Field { .. })),
                },
            });
        };
        match op {
            CmpOp::Eq => Ok(Node::Const(topic == s)),
            CmpOp::Ne => Ok(Node::Const(topic != s)),
            _ => Err(ExprError {
                column,
                kind: ExprErrorKind::Ordering {
                    op: op.symbol(),
                    what: "strings",
                },
            }),
        }
    }

    fn side(&mut self, s: &Spanned) -> Result<Side, ExprError> {
        Ok(match &s.operand {
            Operand::Field(text) if text == "topic" && self.env.topic.is_some() => {
                Side::Topic(self.env.topic.clone().unwrap_or_default())
            }
            Operand::Field(text) => match self.clock(text, s.column)? {
                Some(clock) => Side::Clock(clock, None),
                None => {
                    let (text, column) = self.unprefixed(text, s.column);
                    let index = self.field(&text, column)?;
                    Side::Field {
                        index,
                        kind: self.fields[index].kind(),
                    }
                }
            },
            Operand::Time(text, unit) => match self.clock(text, s.column)? {
                Some(clock) => Side::Clock(clock, Some(*unit)),
                None => {
                    return Err(ExprError {
                        column: s.column,
                        kind: ExprErrorKind::TimeMismatch(format!(
                            "`{text}` is not a time: `.{}()` applies to a `builtin_interfaces/Time` or `Duration` (a header's `stamp`) or to `t`",
                            unit.method()
                        )),
                    })
                }
            },
            Operand::Duration(ns) => Side::Duration(*ns),
            Operand::Int(i) => {
                if *i < i128::from(i64::MIN) || *i > i128::from(u64::MAX) {
                    return Err(ExprError {
                        column: s.column,
                        kind: ExprErrorKind::IntegerOutOfRange(i.to_string()),
                    });
                }
                Side::Num(Num::Int(*i))
            }
            Operand::Float(f) => Side::Num(Num::Float(*f)),
            Operand::Str(v) => Side::Str(v.clone()),
            Operand::Bool(b) => Side::Bool(*b),
        })
    }

    /// `text` without the `m.` prefix (when the environment has it), and
    /// the column where the rest starts.
    fn unprefixed(&self, text: &str, column: usize) -> (String, usize) {
        match text.strip_prefix("m.") {
            Some(rest) if self.env.message_prefix => (rest.to_owned(), column + 2),
            _ => (text.to_owned(), column),
        }
    }

    /// The time `text` names: `t` (with a log time), or a path to a
    /// `builtin_interfaces/Time` or `Duration`; `None` for anything else.
    fn clock(&mut self, text: &str, column: usize) -> Result<Option<Clock>, ExprError> {
        if text == "t" && self.env.log_time {
            return Ok(Some(Clock::LogTime));
        }
        let (path, column) = self.unprefixed(text, column);
        match FieldPath::resolve(&self.types, &path) {
            Err(e) => match &e.kind {
                PathErrorKind::EndsOnMessage {
                    type_name, fields, ..
                } => {
                    // ROS 2's builtin_interfaces Time and Duration; ROS 1's
                    // built-in time and duration.
                    let name = type_name.rsplit('/').next().unwrap_or("");
                    let (s, ns) = match (name, fields.as_slice()) {
                        ("Time" | "Duration", [a, b]) if a == "sec" && b == "nanosec" => {
                            ("sec", "nanosec")
                        }
                        ("time" | "duration", [a, b]) if a == "secs" && b == "nsecs" => {
                            ("secs", "nsecs")
                        }
                        _ => return Ok(None),
                    };
                    let sec = self.field(&format!("{path}.{s}"), column)?;
                    let nanosec = self.field(&format!("{path}.{ns}"), column)?;
                    Ok(Some(Clock::Stamp { sec, nanosec }))
                }
                _ => Ok(None),
            },
            Ok(_) => Ok(None),
        }
    }

    /// The index of `text` in `fields`, resolving it the first time.
    fn field(&mut self, text: &str, column: usize) -> Result<usize, ExprError> {
        if let Some(i) = self.fields.iter().position(|f| f.as_str() == text) {
            return Ok(i);
        }
        let path = FieldPath::resolve(&self.types, text).map_err(|e| ExprError {
            column: column + e.offset,
            kind: ExprErrorKind::Path(e.kind),
        })?;
        self.fields.push(path);
        Ok(self.fields.len() - 1)
    }
}
