//! Evaluates a [`Compiled`] condition on one CDR payload.
//!
//! Logic is three-valued: a comparison whose field is not in this message
//! (an index past the end of a sequence, `ranges[0]` of an empty scan) or
//! whose number is NaN (a `BatteryState` field left unmeasured) is
//! *unknown*, `not unknown` is unknown, `and`/`or` follow Kleene
//! (`false and unknown` is false, `true or unknown` is true), and the
//! condition holds only when it is true. So neither `ranges[0] < 0.5` nor
//! `not (ranges[0] < 0.5)` fires on an empty scan. `and` and `or` stop at
//! the first side that settles them, so a field on the other side is not
//! read. Integers compare exactly; a comparison with a floating-point side
//! compares as `f64`.
//!
//! [`Compiled::holds`] allocates nothing (unless the payload is malformed,
//! or a string field is not UTF-8); the values that made a condition true
//! are read by [`Compiled::values`], meant for when a rule fires.

use std::cmp::Ordering;

use edgerec_format::cdr_read::{ReadError, Value};

use crate::compile::{Clock, Compiled, Lhs, Node, Num, Rhs};
use crate::parse::TimeUnit;

/// Nanoseconds in a second.
const NS: i128 = 1_000_000_000;
use crate::lexer::CmpOp;
use crate::EvalError;

/// The result of one evaluation.
#[derive(Debug, Clone, PartialEq)]
pub struct Outcome {
    /// Whether the condition is true for the message.
    pub holds: bool,
    /// When it holds, each field the condition reads, in order of first
    /// use, with its value in this message (fields the message lacks are
    /// left out); empty when it does not hold.
    pub values: Vec<Reading>,
}

/// One field's value in a message.
#[derive(Debug, Clone, PartialEq)]
pub struct Reading {
    /// The field path as the condition writes it.
    pub path: String,
    /// Its value.
    pub value: Value<'static>,
}

/// Kleene's three truth values.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Truth {
    True,
    False,
    Unknown,
}

impl From<bool> for Truth {
    fn from(b: bool) -> Self {
        if b {
            Truth::True
        } else {
            Truth::False
        }
    }
}

impl Compiled {
    /// Whether the condition is true for `payload`, a CDR message of the
    /// type the condition was compiled against.
    pub fn holds(&self, payload: &[u8]) -> Result<bool, EvalError> {
        self.holds_at(payload, 0)
    }

    /// [`Compiled::holds`] for a message logged at `log_time` (ns since
    /// the epoch): what `t` is, where the [`crate::Env`] has it.
    pub fn holds_at(&self, payload: &[u8], log_time: u64) -> Result<bool, EvalError> {
        Ok(self.truth(&self.root, payload, log_time)? == Truth::True)
    }

    /// [`Compiled::holds`], and when true the values read (see
    /// [`Outcome::values`]).
    pub fn eval(&self, payload: &[u8]) -> Result<Outcome, EvalError> {
        let holds = self.holds(payload)?;
        let values = if holds {
            self.values(payload)?
        } else {
            Vec::new()
        };
        Ok(Outcome { holds, values })
    }

    /// Every field the condition reads, in order of first use, with its
    /// value in `payload`; fields the message lacks are left out. For the
    /// metadata of an event: the values that fired it.
    pub fn values(&self, payload: &[u8]) -> Result<Vec<Reading>, EvalError> {
        let mut out = Vec::with_capacity(self.fields.len());
        for i in 0..self.fields.len() {
            if let Some(value) = self.read(i, payload)? {
                out.push(Reading {
                    path: self.fields[i].as_str().to_owned(),
                    value: value.into_owned(),
                });
            }
        }
        Ok(out)
    }

    /// Field `i`'s value, `None` when the message does not have it.
    fn read<'a>(&self, i: usize, payload: &'a [u8]) -> Result<Option<Value<'a>>, EvalError> {
        let Some(path) = self.fields.get(i) else {
            return Ok(None);
        };
        match path.read(payload) {
            Ok(v) => Ok(Some(v)),
            Err(ReadError::NotPresent { .. }) => Ok(None),
            Err(source) => Err(EvalError::Malformed {
                path: path.as_str().to_owned(),
                source,
            }),
        }
    }

    /// A time in nanoseconds: a stamp's `sec * 1e9 + nanosec`, or the log
    /// time; `None` when the message lacks the stamp.
    fn clock(
        &self,
        clock: Clock,
        payload: &[u8],
        log_time: u64,
    ) -> Result<Option<i128>, EvalError> {
        match clock {
            Clock::LogTime => Ok(Some(i128::from(log_time))),
            Clock::Stamp { sec, nanosec } => {
                let (Some(s), Some(n)) = (self.read(sec, payload)?, self.read(nanosec, payload)?)
                else {
                    return Ok(None);
                };
                match (number(&s), number(&n)) {
                    (Some(Num::Int(s)), Some(Num::Int(n))) => {
                        Ok(s.checked_mul(NS).and_then(|s| s.checked_add(n)))
                    }
                    _ => Ok(None),
                }
            }
        }
    }

    fn truth(&self, node: &Node, payload: &[u8], log_time: u64) -> Result<Truth, EvalError> {
        Ok(match node {
            Node::Or(a, b) => match self.truth(a, payload, log_time)? {
                Truth::True => Truth::True,
                left => match (left, self.truth(b, payload, log_time)?) {
                    (_, Truth::True) => Truth::True,
                    (Truth::False, Truth::False) => Truth::False,
                    _ => Truth::Unknown,
                },
            },
            Node::And(a, b) => match self.truth(a, payload, log_time)? {
                Truth::False => Truth::False,
                left => match (left, self.truth(b, payload, log_time)?) {
                    (_, Truth::False) => Truth::False,
                    (Truth::True, Truth::True) => Truth::True,
                    _ => Truth::Unknown,
                },
            },
            Node::Not(a) => match self.truth(a, payload, log_time)? {
                Truth::True => Truth::False,
                Truth::False => Truth::True,
                Truth::Unknown => Truth::Unknown,
            },
            Node::Const(b) => Truth::from(*b),
            Node::Truth(i) => match self.read(*i, payload)? {
                Some(Value::Bool(b)) => Truth::from(b),
                // compile admits only boolean fields here.
                Some(_) | None => Truth::Unknown,
            },
            Node::Compare {
                lhs: Lhs::Clock(clock, unit),
                op,
                rhs,
            } => {
                let Some(ns) = self.clock(*clock, payload, log_time)? else {
                    return Ok(Truth::Unknown);
                };
                let left = match unit {
                    None | Some(TimeUnit::Nsec) => Num::Int(ns),
                    // As rospy's to_sec(): secs + nsecs / 1e9.
                    Some(TimeUnit::Sec) => {
                        let (sec, nsec) = (ns.div_euclid(NS), ns.rem_euclid(NS));
                        Num::Float(sec as f64 + nsec as f64 / 1e9)
                    }
                };
                match rhs {
                    Rhs::Num(n) => compare_numbers(left, *op, *n),
                    // compile gives a clock only a number on the right.
                    _ => Truth::Unknown,
                }
            }
            Node::Compare {
                lhs: Lhs::Field(field),
                op,
                rhs,
            } => {
                let Some(left) = self.read(*field, payload)? else {
                    return Ok(Truth::Unknown);
                };
                match rhs {
                    Rhs::Field(j) => match self.read(*j, payload)? {
                        Some(right) => compare_values(&left, *op, &right),
                        None => Truth::Unknown,
                    },
                    Rhs::Num(n) => match number(&left) {
                        Some(l) => compare_numbers(l, *op, *n),
                        None => Truth::Unknown,
                    },
                    Rhs::Str(s) => match &left {
                        Value::Str(l) => equality(*op, l.as_ref() == s.as_str()),
                        _ => Truth::Unknown,
                    },
                    Rhs::Bool(b) => match left {
                        Value::Bool(l) => equality(*op, l == *b),
                        _ => Truth::Unknown,
                    },
                }
            }
        })
    }
}

fn number(v: &Value<'_>) -> Option<Num> {
    match *v {
        Value::Int(i) => Some(Num::Int(i.into())),
        Value::UInt(u) => Some(Num::Int(u.into())),
        Value::Float(f) => Some(Num::Float(f)),
        Value::Bool(_) | Value::Str(_) => None,
    }
}

fn as_f64(n: Num) -> f64 {
    match n {
        Num::Int(i) => i as f64,
        Num::Float(f) => f,
    }
}

fn compare_numbers(a: Num, op: CmpOp, b: Num) -> Truth {
    let ord = match (a, b) {
        (Num::Int(a), Num::Int(b)) => Some(a.cmp(&b)),
        _ => as_f64(a).partial_cmp(&as_f64(b)),
    };
    let Some(ord) = ord else {
        return Truth::Unknown; // NaN
    };
    Truth::from(match op {
        CmpOp::Lt => ord == Ordering::Less,
        CmpOp::Le => ord != Ordering::Greater,
        CmpOp::Gt => ord == Ordering::Greater,
        CmpOp::Ge => ord != Ordering::Less,
        CmpOp::Eq => ord == Ordering::Equal,
        CmpOp::Ne => ord != Ordering::Equal,
    })
}

fn equality(op: CmpOp, equal: bool) -> Truth {
    match op {
        CmpOp::Eq => Truth::from(equal),
        CmpOp::Ne => Truth::from(!equal),
        // compile admits only == and != for strings and booleans.
        _ => Truth::Unknown,
    }
}

fn compare_values(a: &Value<'_>, op: CmpOp, b: &Value<'_>) -> Truth {
    match (a, b) {
        (Value::Str(x), Value::Str(y)) => equality(op, x == y),
        (Value::Bool(x), Value::Bool(y)) => equality(op, x == y),
        _ => match (number(a), number(b)) {
            (Some(x), Some(y)) => compare_numbers(x, op, y),
            _ => Truth::Unknown,
        },
    }
}
