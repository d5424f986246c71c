//! Rule triggers: `when` conditions over decoded fields of ROS 2 messages
//! recorded as CDR, and the hold/cooldown state that turns a condition's
//! truth, message by message, into events.
//!
//! A [`Condition`] is parsed once from the rule's text, then compiled
//! against the topic's message type ([`edgerec_format::msgtype::TypeTable`],
//! from the channel's `ros2msg` schema); the [`Compiled`] condition reads
//! only the fields it names from each payload
//! ([`edgerec_format::cdr_read`]). The language: field paths
//! (`linear_acceleration.x`, `status[0].level`, `ranges[0]`), numbers,
//! double-quoted strings (escapes `\"` and `\\`), `true`/`false`,
//! `< <= > >= == !=`, `not`, `and`, `or` (binding in that order) and
//! parentheses; a boolean field on its own is a condition too. Also:
//! single-quoted strings, `x in (a, b)` lists, header stamps as times
//! compared with numbers with units (`header.stamp > 100s`), `.to_sec()`
//! and `.to_nsec()`, and with an [`Env`] (what `edgerec filter` gives)
//! `topic`, `t` and the `m.` prefix of `rosbag filter`'s expressions
//! ([`compile`]). How absent fields and NaN evaluate is in [`eval`]; how
//! truth becomes events, in [`rule`].
//!
//! ```
//! use edgerec_format::cdr::{CdrWriter, Time};
//! use edgerec_format::cdr_read::Value;
//! use edgerec_format::{msgdefs, msgtype::TypeTable};
//! use edgerec_trigger::{Condition, RuleState, Transition};
//!
//! let def = msgdefs::lookup("sensor_msgs/BatteryState").unwrap();
//! let types = TypeTable::parse(def.name, def.text()).unwrap();
//! let low = Condition::parse("voltage < 12.1").unwrap().compile(&types).unwrap();
//!
//! // A sensor_msgs/BatteryState at 11.9 V.
//! let mut w = CdrWriter::new();
//! w.header(Time { sec: 1, nanosec: 0 }, "battery")
//!     .f32(11.9).f32(25.0).f32(-2.0).f32(f32::NAN) // voltage .. charge
//!     .f32(10.0).f32(12.0).f32(0.4)               // capacities, percentage
//!     .u8(2).u8(1).u8(2).bool(true)               // status, health, technology, present
//!     .sequence_len(0).sequence_len(0)            // cell voltages, temperatures
//!     .string("slot 1").string("SN1");
//! let payload = w.finish();
//!
//! let outcome = low.eval(&payload).unwrap();
//! assert!(outcome.holds);
//! assert_eq!(outcome.values[0].path, "voltage");
//! assert_eq!(outcome.values[0].value, Value::Float(f64::from(11.9f32)));
//!
//! let mut rule = RuleState::new(0, 5_000_000_000);
//! assert_eq!(
//!     rule.update(1_000_000_000, outcome.holds),
//!     Some(Transition::Fired { at_ns: 1_000_000_000, since_ns: 1_000_000_000 })
//! );
//!
//! let err = Condition::parse("voltge < 12.1").unwrap().compile(&types).unwrap_err();
//! assert!(err.to_string().starts_with(
//!     "at column 1: unknown field `voltge` of sensor_msgs/msg/BatteryState (fields: header, voltage,"));
//! ```
#![deny(missing_docs)]

pub mod compile;
pub mod eval;
mod lexer;
pub mod parse;
pub mod rule;

use edgerec_format::cdr_read::{PathErrorKind, ReadError};

pub use compile::Compiled;
pub use compile::Env;
pub use eval::{Outcome, Reading};
pub use lexer::CmpOp;
pub use parse::{Condition, Expr, Operand, Spanned, TimeUnit};
pub use rule::{RuleState, Transition};

/// Why a `when` expression does not parse or does not fit its message type.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[error("at column {column}: {kind}")]
pub struct ExprError {
    /// 1-based character offset in the expression of the fault.
    pub column: usize,
    /// What is wrong.
    pub kind: ExprErrorKind,
}

/// What is wrong with a `when` expression.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum ExprErrorKind {
    /// Nothing but spaces.
    #[error("the condition is empty; write one, e.g. `voltage < 12.1`")]
    Empty,
    /// A character outside the language.
    #[error("unexpected `{0}`; conditions use `and`, `or`, `not` and `< <= > >= == !=`")]
    UnexpectedChar(char),
    /// `=` alone.
    #[error("`=` alone is not a comparison; write `==`")]
    SingleEquals,
    /// A string with no closing quote.
    #[error("the string has no closing quote")]
    UnterminatedString,
    /// An escape other than `\"`, `\'` and `\\`.
    #[error("unknown escape `\\{0}` in a string; only `\\\"`, `\\'` and `\\\\` are escapes")]
    BadEscape(char),
    /// A call: expressions are not evaluated as programs.
    #[error("`{0}(` is a call; expressions are not Python and run nothing: they compare message fields, `topic` and `t` with `< <= > >= == !=`, `in`, `and`, `or`, `not`, and the only calls are `.to_sec()` and `.to_nsec()` on times")]
    Call(String),
    /// A time compared with a plain number, or the other way round.
    #[error("{0}")]
    TimeMismatch(String),
    /// A malformed number.
    #[error("`{0}` is not a number")]
    BadNumber(String),
    /// An integer outside both `i64` and `u64`.
    #[error("the integer {0} is outside the 64-bit range")]
    IntegerOutOfRange(String),
    /// A token where another was needed.
    #[error("expected {expected}, found {found}")]
    Expected {
        /// What could come here.
        expected: String,
        /// What is here.
        found: String,
    },
    /// A `)` without its `(`.
    #[error("`)` without a matching `(`")]
    UnbalancedParen,
    /// A field path that the message type does not have.
    #[error(transparent)]
    Path(PathErrorKind),
    /// An operand on its own that is not boolean.
    #[error("{what}, not a condition; compare it, e.g. `{example}`")]
    NotACondition {
        /// The operand.
        what: String,
        /// A condition that would do.
        example: String,
    },
    /// Operands of kinds that do not compare.
    #[error("comparing {left} with {right}; compare numbers with numbers, strings with strings (quoted) and booleans with `true`/`false`")]
    Mismatch {
        /// The left side's kind ("a string field").
        left: &'static str,
        /// The right side's kind ("a number").
        right: &'static str,
    },
    /// An ordering of strings or booleans.
    #[error("`{op}` does not apply to {what}; use `==` or `!=`")]
    Ordering {
        /// The operator.
        op: &'static str,
        /// "strings" or "booleans".
        what: &'static str,
    },
    /// Two literals compared.
    #[error("both sides are constants; one side of a comparison must be a field")]
    ConstantComparison,
}

/// Why a condition could not be evaluated on a payload.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum EvalError {
    /// The payload is not a well-formed message of the type: the caller
    /// counts it and feeds [`RuleState::update_unknown`]; it never fires.
    #[error("reading `{path}`: {source}")]
    Malformed {
        /// The field being read.
        path: String,
        /// What the reader found.
        source: ReadError,
    },
}
