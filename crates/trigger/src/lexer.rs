//! Splits a `when` expression into tokens, each with the 1-based column
//! (character offset) where it starts.
//!
//! A field path is one token (`status[0].level`): letters, digits, `_`,
//! `.` and bracketed indices; [`edgerec_format::cdr_read::FieldPath`]
//! checks its parts later. A `-` is its own token; the parser joins it to
//! the number that follows. Also lexed, for `edgerec filter` and the forms
//! of `rosbag filter`: single-quoted strings, `in`, `,`, `[`/`]` lists, a
//! number with a time unit (`100s`, `2.5ms`, `40us`, `7ns`: nanoseconds)
//! and `.to_sec()` / `.to_nsec()` after a path (one token with the path).
//! Any other call (`f(`) is refused here, naming what is supported.

use crate::{ExprError, ExprErrorKind};

/// A comparison operator.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum CmpOp {
    /// `<`
    Lt,
    /// `<=`
    Le,
    /// `>`
    Gt,
    /// `>=`
    Ge,
    /// `==`
    Eq,
    /// `!=`
    Ne,
}

impl CmpOp {
    /// The operator as written.
    pub fn symbol(self) -> &'static str {
        match self {
            CmpOp::Lt => "<",
            CmpOp::Le => "<=",
            CmpOp::Gt => ">",
            CmpOp::Ge => ">=",
            CmpOp::Eq => "==",
            CmpOp::Ne => "!=",
        }
    }

    /// The operator with its operands swapped: `a < b` is `b > a`.
    pub fn flipped(self) -> CmpOp {
        match self {
            CmpOp::Lt => CmpOp::Gt,
            CmpOp::Le => CmpOp::Ge,
            CmpOp::Gt => CmpOp::Lt,
            CmpOp::Ge => CmpOp::Le,
            CmpOp::Eq => CmpOp::Eq,
            CmpOp::Ne => CmpOp::Ne,
        }
    }

    /// Whether the operator orders (`<`, `<=`, `>`, `>=`) rather than tests equality.
    pub fn is_ordering(self) -> bool {
        !matches!(self, CmpOp::Eq | CmpOp::Ne)
    }
}

/// What a token is.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum TokenKind {
    /// A field path, as written.
    Path(String),
    /// An integer literal without sign.
    Int(i128),
    /// A number with a fraction or exponent, without sign.
    Float(f64),
    /// A string literal, escapes resolved.
    Str(String),
    /// `true` or `false`.
    Bool(bool),
    And,
    Or,
    Not,
    LParen,
    RParen,
    Minus,
    Cmp(CmpOp),
    /// `in`.
    In,
    /// `,`.
    Comma,
    /// `[` where no path is (a list).
    LBracket,
    /// `]` closing a list.
    RBracket,
    /// A number with a time unit, in nanoseconds.
    Duration(i128),
    /// `path.to_sec()` or `path.to_nsec()`: the path and the conversion.
    Method(String, crate::parse::TimeUnit),
    /// The end of the text.
    End,
}

impl TokenKind {
    /// How an error message names the token.
    pub(crate) fn describe(&self) -> String {
        match self {
            TokenKind::Path(p) => format!("`{p}`"),
            TokenKind::Int(i) => format!("`{i}`"),
            TokenKind::Float(f) => format!("`{f}`"),
            TokenKind::Str(s) => format!("{s:?}"),
            TokenKind::Bool(b) => format!("`{b}`"),
            TokenKind::And => "`and`".into(),
            TokenKind::Or => "`or`".into(),
            TokenKind::Not => "`not`".into(),
            TokenKind::LParen => "`(`".into(),
            TokenKind::RParen => "`)`".into(),
            TokenKind::Minus => "`-`".into(),
            TokenKind::Cmp(op) => format!("`{}`", op.symbol()),
            TokenKind::In => "`in`".into(),
            TokenKind::Comma => "`,`".into(),
            TokenKind::LBracket => "`[`".into(),
            TokenKind::RBracket => "`]`".into(),
            TokenKind::Duration(ns) => format!("`{ns}ns`"),
            TokenKind::Method(p, u) => format!("`{p}.{}()`", u.method()),
            TokenKind::End => "the end".into(),
        }
    }
}

/// A token and where it starts.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Token {
    pub(crate) kind: TokenKind,
    /// 1-based character column.
    pub(crate) column: usize,
}

/// The tokens of `text`, ending with [`TokenKind::End`].
pub(crate) fn tokenize(text: &str) -> Result<Vec<Token>, ExprError> {
    let chars: Vec<char> = text.chars().collect();
    let mut tokens = Vec::new();
    let mut i = 0;
    while i < chars.len() {
        let c = chars[i];
        let column = i + 1;
        let err = |kind| ExprError { column, kind };
        let at = |n: usize| chars.get(i + n).copied();
        let (kind, len) = match c {
            c if c.is_whitespace() => {
                i += 1;
                continue;
            }
            '(' => (TokenKind::LParen, 1),
            ')' => (TokenKind::RParen, 1),
            '[' => (TokenKind::LBracket, 1),
            ']' => (TokenKind::RBracket, 1),
            ',' => (TokenKind::Comma, 1),
            '-' => (TokenKind::Minus, 1),
            '<' if at(1) == Some('=') => (TokenKind::Cmp(CmpOp::Le), 2),
            '<' => (TokenKind::Cmp(CmpOp::Lt), 1),
            '>' if at(1) == Some('=') => (TokenKind::Cmp(CmpOp::Ge), 2),
            '>' => (TokenKind::Cmp(CmpOp::Gt), 1),
            '=' if at(1) == Some('=') => (TokenKind::Cmp(CmpOp::Eq), 2),
            '=' => return Err(err(ExprErrorKind::SingleEquals)),
            '!' if at(1) == Some('=') => (TokenKind::Cmp(CmpOp::Ne), 2),
            '"' | '\'' => string(&chars[i..]).map_err(|(offset, kind)| ExprError {
                column: column + offset,
                kind,
            })?,
            c if c.is_ascii_digit() => number(&chars[i..]).map_err(err)?,
            c if c.is_ascii_alphabetic() || c == '_' => {
                word(&chars[i..]).map_err(|(offset, kind)| ExprError {
                    column: column + offset,
                    kind,
                })?
            }
            c => return Err(err(ExprErrorKind::UnexpectedChar(c))),
        };
        tokens.push(Token { kind, column });
        i += len;
    }
    tokens.push(Token {
        kind: TokenKind::End,
        column: chars.len() + 1,
    });
    Ok(tokens)
}

/// A string literal from its opening quote; `\"` and `\\` are the escapes.
/// A string in the quotes it starts with (`"` or `'`); escapes are `\\`
/// and either quote.
fn string(chars: &[char]) -> Result<(TokenKind, usize), (usize, ExprErrorKind)> {
    let quote = chars[0];
    let mut out = String::new();
    let mut i = 1;
    loop {
        match chars.get(i) {
            None => return Err((0, ExprErrorKind::UnterminatedString)),
            Some(&c) if c == quote => return Ok((TokenKind::Str(out), i + 1)),
            Some('\\') => match chars.get(i + 1) {
                Some(&c @ ('"' | '\'' | '\\')) => {
                    out.push(c);
                    i += 2;
                }
                Some(&c) => return Err((i, ExprErrorKind::BadEscape(c))),
                None => return Err((0, ExprErrorKind::UnterminatedString)),
            },
            Some(&c) => {
                out.push(c);
                i += 1;
            }
        }
    }
}

/// A number: digits, then optionally `.` and digits, then optionally an
/// exponent (`e`, a sign, digits).
fn number(chars: &[char]) -> Result<(TokenKind, usize), ExprErrorKind> {
    let digits = |from: usize| {
        chars[from.min(chars.len())..]
            .iter()
            .take_while(|c| c.is_ascii_digit())
            .count()
    };
    let mut len = digits(0);
    let mut float = false;
    if chars.get(len) == Some(&'.') && digits(len + 1) > 0 {
        len += 1 + digits(len + 1);
        float = true;
    }
    if matches!(chars.get(len), Some('e' | 'E')) {
        let sign = usize::from(matches!(chars.get(len + 1), Some('+' | '-')));
        let exp = digits(len + 1 + sign);
        if exp == 0 {
            let text: String = chars[..len + 1 + sign].iter().collect();
            return Err(ExprErrorKind::BadNumber(text));
        }
        len += 1 + sign + exp;
        float = true;
    }
    // A time unit straight after a plain number: nanoseconds.
    if !chars[..len].iter().any(|c| matches!(c, 'e' | 'E')) {
        for (unit, scale) in [("ns", 0u32), ("us", 3), ("ms", 6), ("s", 9)] {
            let u: Vec<char> = unit.chars().collect();
            let after = len + u.len();
            if chars.get(len..after) == Some(&u[..])
                && !chars
                    .get(after)
                    .is_some_and(|c| c.is_ascii_alphanumeric() || *c == '_' || *c == '.')
            {
                let text: String = chars[..after].iter().collect();
                return duration(&chars[..len], scale)
                    .map(|ns| (TokenKind::Duration(ns), after))
                    .ok_or(ExprErrorKind::BadNumber(text));
            }
        }
    }
    // A letter or `.` straight after a number (`12v`, `1.2.3`) is a typo,
    // not two tokens.
    if chars
        .get(len)
        .is_some_and(|c| c.is_ascii_alphanumeric() || *c == '_' || *c == '.')
    {
        let end = len
            + chars[len..]
                .iter()
                .take_while(|c| c.is_ascii_alphanumeric() || **c == '_' || **c == '.')
                .count();
        return Err(ExprErrorKind::BadNumber(chars[..end].iter().collect()));
    }
    let text: String = chars[..len].iter().collect();
    let kind = if float {
        TokenKind::Float(
            text.parse()
                .map_err(|_| ExprErrorKind::BadNumber(text.clone()))?,
        )
    } else {
        TokenKind::Int(
            text.parse()
                .map_err(|_| ExprErrorKind::IntegerOutOfRange(text.clone()))?,
        )
    };
    Ok((kind, len))
}

/// A keyword or a field path.
/// `digits[.digits]` times 10^`scale` nanoseconds, when whole.
fn duration(number: &[char], scale: u32) -> Option<i128> {
    let text: String = number.iter().collect();
    let (whole, frac) = text.split_once('.').unwrap_or((&text, ""));
    if frac.len() > scale as usize {
        return None;
    }
    let whole: i128 = whole.parse().ok()?;
    let frac: i128 = if frac.is_empty() {
        0
    } else {
        format!("{frac:0<width$}", width = scale as usize)
            .parse()
            .ok()?
    };
    whole.checked_mul(10i128.pow(scale))?.checked_add(frac)
}

/// A word: a keyword, a path, or a path with `.to_sec()`/`.to_nsec()`.
/// `Err` carries the offset of the fault in `chars`.
fn word(chars: &[char]) -> Result<(TokenKind, usize), (usize, ExprErrorKind)> {
    let mut len = 0;
    let mut depth = 0usize;
    while let Some(&c) = chars.get(len) {
        let ok = match c {
            '[' => {
                depth += 1;
                true
            }
            ']' if depth > 0 => {
                depth -= 1;
                true
            }
            // Inside brackets anything but a bracket or space belongs to
            // the index (FieldPath explains what is wrong with it).
            c if depth > 0 => !c.is_whitespace() && c != '(' && c != ')',
            c => c.is_ascii_alphanumeric() || c == '_' || c == '.',
        };
        if !ok {
            break;
        }
        len += 1;
    }
    let text: String = chars[..len].iter().collect();
    let kind = match text.as_str() {
        "and" => TokenKind::And,
        "or" => TokenKind::Or,
        "not" => TokenKind::Not,
        "in" => TokenKind::In,
        "true" => TokenKind::Bool(true),
        "false" => TokenKind::Bool(false),
        _ if chars.get(len) == Some(&'(') => {
            let unit = [
                (".to_sec", crate::parse::TimeUnit::Sec),
                (".to_nsec", crate::parse::TimeUnit::Nsec),
            ]
            .into_iter()
            .find_map(|(m, u)| text.strip_suffix(m).map(|p| (p, u)));
            return match unit {
                Some((path, unit)) if !path.is_empty() && chars.get(len + 1) == Some(&')') => {
                    Ok((TokenKind::Method(path.to_owned(), unit), len + 2))
                }
                _ => Err((len, ExprErrorKind::Call(text))),
            };
        }
        _ => TokenKind::Path(text),
    };
    Ok((kind, len))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn kinds(text: &str) -> Vec<TokenKind> {
        tokenize(text)
            .unwrap()
            .into_iter()
            .map(|t| t.kind)
            .collect()
    }

    fn err(text: &str) -> ExprError {
        tokenize(text).unwrap_err()
    }

    #[test]
    fn operators_keywords_and_paths() {
        use TokenKind::*;
        assert_eq!(
            kinds("(status[0].level>=2 and x!=-1)or not present"),
            [
                LParen,
                Path("status[0].level".into()),
                Cmp(CmpOp::Ge),
                Int(2),
                And,
                Path("x".into()),
                Cmp(CmpOp::Ne),
                Minus,
                Int(1),
                RParen,
                Or,
                Not,
                Path("present".into()),
                End
            ]
        );
        assert_eq!(
            kinds("a<b<=c>d==true"),
            [
                Path("a".into()),
                Cmp(CmpOp::Lt),
                Path("b".into()),
                Cmp(CmpOp::Le),
                Path("c".into()),
                Cmp(CmpOp::Gt),
                Path("d".into()),
                Cmp(CmpOp::Eq),
                Bool(true),
                End
            ]
        );
        // Keywords are whole words only.
        assert_eq!(kinds("android")[0], Path("android".into()));
    }

    #[test]
    fn columns_count_characters() {
        let t = tokenize("\"é\" == x").unwrap();
        assert_eq!(t[0].kind, TokenKind::Str("é".into()));
        assert_eq!(t.iter().map(|t| t.column).collect::<Vec<_>>(), [1, 5, 8, 9]);
    }

    #[test]
    fn numbers() {
        use TokenKind::*;
        assert_eq!(kinds("12")[0], Int(12));
        assert_eq!(kinds("12.5")[0], Float(12.5));
        assert_eq!(kinds("1e3")[0], Float(1000.0));
        assert_eq!(kinds("2.5E-2")[0], Float(0.025));
        assert_eq!(kinds("18446744073709551615")[0], Int(u64::MAX.into()));
        assert_eq!(
            err("x < 12v"),
            ExprError {
                column: 5,
                kind: ExprErrorKind::BadNumber("12v".into())
            }
        );
        assert_eq!(err("1.2.3").kind, ExprErrorKind::BadNumber("1.2.3".into()));
        assert_eq!(err("1e").kind, ExprErrorKind::BadNumber("1e".into()));
        assert!(matches!(
            err("99999999999999999999999999999999999999999").kind,
            ExprErrorKind::IntegerOutOfRange(_)
        ));
    }

    #[test]
    fn strings_and_escapes() {
        assert_eq!(
            kinds(r#""say \"hi\" \\ ok""#)[0],
            TokenKind::Str(r#"say "hi" \ ok"#.into())
        );
        assert_eq!(
            err(r#"data == "open"#),
            ExprError {
                column: 9,
                kind: ExprErrorKind::UnterminatedString
            }
        );
        assert_eq!(
            err(r#"data == "a\n""#),
            ExprError {
                column: 11,
                kind: ExprErrorKind::BadEscape('n')
            }
        );
    }

    #[test]
    fn stray_characters() {
        assert_eq!(
            err("voltage = 3"),
            ExprError {
                column: 9,
                kind: ExprErrorKind::SingleEquals
            }
        );
        assert_eq!(err("a && b").kind, ExprErrorKind::UnexpectedChar('&'));
        assert_eq!(err("a ! b").column, 3);
    }
}
