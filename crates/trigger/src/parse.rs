//! The syntax tree of a `when` expression and the parser that builds it.
//!
//! Grammar, loosest first (so `not` binds tighter than `and`, and `and`
//! tighter than `or`):
//!
//! ```text
//! or      := and ("or" and)*
//! and     := not ("and" not)*
//! not     := "not" not | atom
//! atom    := "(" or ")" | operand (cmp operand | "not"? "in" list)?
//! list    := ("(" | "[") operand ("," operand)* ","? (")" | "]")
//! operand := path | path ".to_sec()" | path ".to_nsec()"
//!          | "-"? number | "-"? number unit | string | "true" | "false"
//! unit    := "s" | "ms" | "us" | "ns"
//! ```
//!
//! `x in (a, b)` is `x == a or x == b`; `x not in (a, b)` its negation.

use crate::lexer::{tokenize, CmpOp, Token, TokenKind};
use crate::{ExprError, ExprErrorKind};

/// What `.to_sec()` and `.to_nsec()` make of a time.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum TimeUnit {
    /// Seconds as a floating-point number (`sec + nanosec / 1e9`).
    Sec,
    /// Nanoseconds as an integer.
    Nsec,
}

impl TimeUnit {
    /// The method's name.
    pub fn method(self) -> &'static str {
        match self {
            TimeUnit::Sec => "to_sec",
            TimeUnit::Nsec => "to_nsec",
        }
    }
}

/// One side of a comparison, or a bare condition.
#[derive(Debug, Clone, PartialEq)]
pub enum Operand {
    /// A field path, as written.
    Field(String),
    /// An integer literal (sign included).
    Int(i128),
    /// A number with a fraction or exponent.
    Float(f64),
    /// A string literal.
    Str(String),
    /// `true` or `false`.
    Bool(bool),
    /// A time (a path to a `builtin_interfaces/Time` or `Duration`, or `t`)
    /// converted: `header.stamp.to_sec()`.
    Time(String, TimeUnit),
    /// A number with a time unit, in nanoseconds (`100s`).
    Duration(i128),
}

/// An operand and the column it starts at.
#[derive(Debug, Clone, PartialEq)]
pub struct Spanned {
    /// The operand.
    pub operand: Operand,
    /// 1-based character column.
    pub column: usize,
}

/// A parsed expression.
#[derive(Debug, Clone, PartialEq)]
pub enum Expr {
    /// Either side holds.
    Or(Box<Expr>, Box<Expr>),
    /// Both sides hold.
    And(Box<Expr>, Box<Expr>),
    /// The inner expression does not hold.
    Not(Box<Expr>),
    /// `left op right`.
    Compare {
        /// The left side.
        left: Spanned,
        /// The operator.
        op: CmpOp,
        /// The right side.
        right: Spanned,
    },
    /// An operand on its own: a boolean field or `true`/`false`.
    Bare(Spanned),
}

/// A `when` expression, parsed but not yet checked against a message type.
#[derive(Debug, Clone, PartialEq)]
pub struct Condition {
    text: String,
    expr: Expr,
}

impl Condition {
    /// Parses `text`; errors carry the 1-based column of the fault.
    pub fn parse(text: &str) -> Result<Condition, ExprError> {
        let tokens = tokenize(text)?;
        let mut p = Parser { tokens, at: 0 };
        if p.peek().kind == TokenKind::End {
            return Err(ExprError {
                column: 1,
                kind: ExprErrorKind::Empty,
            });
        }
        let expr = p.or()?;
        let next = p.peek();
        if next.kind != TokenKind::End {
            let kind = if next.kind == TokenKind::RParen {
                ExprErrorKind::UnbalancedParen
            } else {
                ExprErrorKind::Expected {
                    expected: "`and`, `or` or the end".into(),
                    found: next.kind.describe(),
                }
            };
            return Err(ExprError {
                column: next.column,
                kind,
            });
        }
        Ok(Condition {
            text: text.to_owned(),
            expr,
        })
    }

    /// The text parsed.
    pub fn text(&self) -> &str {
        &self.text
    }

    /// The syntax tree.
    pub fn expr(&self) -> &Expr {
        &self.expr
    }
}

struct Parser {
    /// Ends with [`TokenKind::End`].
    tokens: Vec<Token>,
    at: usize,
}

impl Parser {
    fn peek(&self) -> &Token {
        // tokenize always ends the list with End, and nothing moves past it.
        &self.tokens[self.at.min(self.tokens.len() - 1)]
    }

    fn bump(&mut self) -> Token {
        let t = self.peek().clone();
        if t.kind != TokenKind::End {
            self.at += 1;
        }
        t
    }

    fn or(&mut self) -> Result<Expr, ExprError> {
        let mut left = self.and()?;
        while self.peek().kind == TokenKind::Or {
            self.bump();
            left = Expr::Or(Box::new(left), Box::new(self.and()?));
        }
        Ok(left)
    }

    fn and(&mut self) -> Result<Expr, ExprError> {
        let mut left = self.not()?;
        while self.peek().kind == TokenKind::And {
            self.bump();
            left = Expr::And(Box::new(left), Box::new(self.not()?));
        }
        Ok(left)
    }

    fn not(&mut self) -> Result<Expr, ExprError> {
        if self.peek().kind == TokenKind::Not {
            self.bump();
            return Ok(Expr::Not(Box::new(self.not()?)));
        }
        self.atom()
    }

    fn atom(&mut self) -> Result<Expr, ExprError> {
        if self.peek().kind == TokenKind::LParen {
            let open = self.bump();
            let inner = self.or()?;
            let close = self.bump();
            if close.kind != TokenKind::RParen {
                return Err(ExprError {
                    column: close.column,
                    kind: ExprErrorKind::Expected {
                        expected: format!("`)` to close the `(` at column {}", open.column),
                        found: close.kind.describe(),
                    },
                });
            }
            return Ok(inner);
        }
        let left = self.operand()?;
        let negated = self.peek().kind == TokenKind::Not
            && self.tokens.get(self.at + 1).map(|t| &t.kind) == Some(&TokenKind::In);
        if negated || self.peek().kind == TokenKind::In {
            if negated {
                self.bump();
            }
            self.bump();
            let any = self.list(&left)?;
            return Ok(if negated {
                Expr::Not(Box::new(any))
            } else {
                any
            });
        }
        let TokenKind::Cmp(op) = self.peek().kind else {
            return Ok(Expr::Bare(left));
        };
        self.bump();
        let right = self.operand()?;
        Ok(Expr::Compare { left, op, right })
    }

    /// `(a, b, ...)` or `[a, b, ...]` after `left in`: `left == a or ...`.
    fn list(&mut self, left: &Spanned) -> Result<Expr, ExprError> {
        let open = self.bump();
        let close = match open.kind {
            TokenKind::LParen => TokenKind::RParen,
            TokenKind::LBracket => TokenKind::RBracket,
            other => {
                return Err(ExprError {
                    column: open.column,
                    kind: ExprErrorKind::Expected {
                        expected: "a list after `in`: `(\"/a\", \"/b\")`".into(),
                        found: other.describe(),
                    },
                })
            }
        };
        let mut any: Option<Expr> = None;
        loop {
            if self.peek().kind == close && any.is_some() {
                self.bump();
                break;
            }
            let right = self.operand()?;
            let eq = Expr::Compare {
                left: left.clone(),
                op: CmpOp::Eq,
                right,
            };
            any = Some(match any {
                None => eq,
                Some(prev) => Expr::Or(Box::new(prev), Box::new(eq)),
            });
            let next = self.bump();
            if next.kind == close {
                break;
            }
            if next.kind != TokenKind::Comma {
                return Err(ExprError {
                    column: next.column,
                    kind: ExprErrorKind::Expected {
                        expected: format!(
                            "`,` or {} to close the list at column {}",
                            close.describe(),
                            open.column
                        ),
                        found: next.kind.describe(),
                    },
                });
            }
        }
        // The loop leaves only with at least one item.
        any.ok_or(ExprError {
            column: open.column,
            kind: ExprErrorKind::Empty,
        })
    }

    fn operand(&mut self) -> Result<Spanned, ExprError> {
        let t = self.bump();
        let operand = match t.kind {
            TokenKind::Path(p) => Operand::Field(p),
            TokenKind::Int(i) => Operand::Int(i),
            TokenKind::Float(f) => Operand::Float(f),
            TokenKind::Str(s) => Operand::Str(s),
            TokenKind::Bool(b) => Operand::Bool(b),
            TokenKind::Method(p, unit) => Operand::Time(p, unit),
            TokenKind::Duration(ns) => Operand::Duration(ns),
            TokenKind::Minus => {
                let n = self.bump();
                match n.kind {
                    TokenKind::Int(i) => Operand::Int(-i),
                    TokenKind::Float(f) => Operand::Float(-f),
                    TokenKind::Duration(ns) => Operand::Duration(-ns),
                    other => {
                        return Err(ExprError {
                            column: n.column,
                            kind: ExprErrorKind::Expected {
                                expected: "a number after `-`".into(),
                                found: other.describe(),
                            },
                        })
                    }
                }
            }
            other => {
                return Err(ExprError {
                    column: t.column,
                    kind: ExprErrorKind::Expected {
                        expected: "a field, a number, a string, `true`, `false`, `not` or `(`"
                            .into(),
                        found: other.describe(),
                    },
                })
            }
        };
        Ok(Spanned {
            operand,
            column: t.column,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn field(p: &str, column: usize) -> Spanned {
        Spanned {
            operand: Operand::Field(p.into()),
            column,
        }
    }

    fn parse(text: &str) -> Expr {
        Condition::parse(text)
            .unwrap_or_else(|e| panic!("{text}: {e}"))
            .expr()
            .clone()
    }

    fn err(text: &str) -> ExprError {
        Condition::parse(text).unwrap_err()
    }

    #[test]
    fn not_binds_tighter_than_and_and_and_than_or() {
        let a = || Box::new(Expr::Bare(field("a", 5)));
        assert_eq!(
            parse("not a and b or c"),
            Expr::Or(
                Box::new(Expr::And(
                    Box::new(Expr::Not(a())),
                    Box::new(Expr::Bare(field("b", 11)))
                )),
                Box::new(Expr::Bare(field("c", 16)))
            )
        );
        assert_eq!(
            parse("a or b and c"),
            Expr::Or(
                Box::new(Expr::Bare(field("a", 1))),
                Box::new(Expr::And(
                    Box::new(Expr::Bare(field("b", 6))),
                    Box::new(Expr::Bare(field("c", 12)))
                ))
            )
        );
        // Parentheses override.
        assert!(matches!(parse("(a or b) and c"), Expr::And(..)));
        assert!(matches!(parse("not (a or b)"), Expr::Not(_)));
    }

    #[test]
    fn the_examples_of_the_issue_parse() {
        for text in [
            "voltage < 12.1",
            "linear_acceleration.x < -4.0",
            "status[0].level >= 2",
            "ranges[0] < 0.5",
            "data == \"DISENGAGED\"",
            "(voltage < 12.1 and current > 2) or not present",
            "power_supply_status == 3",
            "is_charging",
            "-1e3 <= x",
        ] {
            parse(text);
        }
        assert_eq!(
            parse("linear_acceleration.x < -4.0"),
            Expr::Compare {
                left: field("linear_acceleration.x", 1),
                op: CmpOp::Lt,
                right: Spanned {
                    operand: Operand::Float(-4.0),
                    column: 25
                }
            }
        );
        assert_eq!(
            parse("x != -3"),
            Expr::Compare {
                left: field("x", 1),
                op: CmpOp::Ne,
                right: Spanned {
                    operand: Operand::Int(-3),
                    column: 6
                }
            }
        );
    }

    #[test]
    fn errors_point_at_the_fault() {
        assert_eq!(err("   ").kind, ExprErrorKind::Empty);
        let e = err("voltage <");
        assert_eq!(e.column, 10);
        assert!(e.to_string().contains("found the end"), "{e}");
        let e = err("(voltage < 12.1 and current > 2");
        assert_eq!(e.column, 32);
        assert!(e.to_string().contains("close the `(` at column 1"), "{e}");
        assert_eq!(err("a < 1)").kind, ExprErrorKind::UnbalancedParen);
        assert_eq!(err("a < 1)").column, 6);
        let e = err("a b");
        assert_eq!(e.column, 3);
        assert_eq!(
            e.to_string(),
            "at column 3: expected `and`, `or` or the end, found `b`"
        );
        assert_eq!(err("x < - y").column, 7);
        assert_eq!(err("x < and").column, 5);
        // A comparison does not chain.
        assert_eq!(err("0 < x < 1").column, 7);
    }
}
