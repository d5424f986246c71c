//! Checks a [`Condition`] against a message type and turns it into a
//! [`Compiled`] tree of resolved field paths and literal operands.
//!
//! Every field must exist and end on a primitive or string; each
//! comparison must put numbers with numbers (signed, unsigned and
//! floating point mix freely), strings with strings and booleans with
//! booleans; strings and booleans take only `==` and `!=`; a bare operand
//! must be a boolean field or `true`/`false`. A literal on the left is
//! moved to the right (`12 > voltage` is `voltage < 12`).

use std::sync::Arc;

use edgerec_format::cdr_read::{FieldPath, ValueKind};
use edgerec_format::msgtype::TypeTable;

use crate::lexer::CmpOp;
use crate::parse::{Condition, Expr, Operand, Spanned};
use crate::{ExprError, ExprErrorKind};

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
    /// `fields[field] op rhs`.
    Compare {
        field: usize,
        op: CmpOp,
        rhs: Rhs,
    },
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
        let mut c = Compiler {
            types: Arc::new(types.clone()),
            fields: Vec::new(),
        };
        let root = c.node(self.expr())?;
        Ok(Compiled {
            text: self.text().to_owned(),
            fields: c.fields,
            root,
        })
    }
}

struct Compiler {
    types: Arc<TypeTable>,
    fields: Vec<FieldPath>,
}

/// One side of a comparison, classified.
enum Side {
    Field { index: usize, kind: ValueKind },
    Num(Num),
    Str(String),
    Bool(bool),
}

impl Side {
    fn kind(&self) -> ValueKind {
        match self {
            Side::Field { kind, .. } => *kind,
            Side::Num(Num::Int(_)) => ValueKind::Int,
            Side::Num(Num::Float(_)) => ValueKind::Float,
            Side::Str(_) => ValueKind::Str,
            Side::Bool(_) => ValueKind::Bool,
        }
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
            Expr::Or(a, b) => Node::Or(Box::new(self.node(a)?), Box::new(self.node(b)?)),
            Expr::And(a, b) => Node::And(Box::new(self.node(a)?), Box::new(self.node(b)?)),
            Expr::Not(a) => Node::Not(Box::new(self.node(a)?)),
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
                let (field, field_kind, op, rhs) = match (l, r) {
                    (Side::Field { index, kind }, rhs) => (index, kind, *op, rhs),
                    (lhs, Side::Field { index, kind }) => (index, kind, op.flipped(), lhs),
                    _ => {
                        return Err(ExprError {
                            column,
                            kind: ExprErrorKind::ConstantComparison,
                        })
                    }
                };
                let rhs_is_field = matches!(rhs, Side::Field { .. });
                if !compatible(field_kind, rhs.kind()) {
                    // Name the sides in the order they were written.
                    let (a, b) = (
                        describe(field_kind, true),
                        describe(rhs.kind(), rhs_is_field),
                    );
                    let swapped = !matches!(left.operand, Operand::Field(_));
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
                let rhs = match rhs {
                    Side::Field { index, .. } => Rhs::Field(index),
                    Side::Num(n) => Rhs::Num(n),
                    Side::Str(s) => Rhs::Str(s),
                    Side::Bool(b) => Rhs::Bool(b),
                };
                Node::Compare { field, op, rhs }
            }
        })
    }

    fn side(&mut self, s: &Spanned) -> Result<Side, ExprError> {
        Ok(match &s.operand {
            Operand::Field(text) => {
                let index = self.field(text, s.column)?;
                Side::Field {
                    index,
                    kind: self.fields[index].kind(),
                }
            }
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
