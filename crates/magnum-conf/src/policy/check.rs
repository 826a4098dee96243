//! The oslo.policy rule language: check trees and their parser.
//!
//! The parser reproduces oslo.policy's greedy shift-reduce parser token for token, including
//! its quirks, because operators' policy files were written against it: a rule that oslo
//! cannot parse becomes `!` (deny) with a logged warning, a whitespace-only rule is such a
//! failure while the empty rule allows, and `and` binds tighter than `or`.

use std::borrow::Cow;
use std::fmt;

use super::creds::{CredValue, Credentials, Target};

/// A parsed rule.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Check {
    /// `@`, and the empty rule.
    True,
    /// `!`, and any rule (or single check) that failed to parse.
    False,
    Not(Box<Check>),
    And(Vec<Check>),
    Or(Vec<Check>),
    /// `rule:<name>`: another rule by name.
    Rule(String),
    /// `role:<name>`: case-insensitive membership in the credentials' roles.
    Role(Pattern),
    /// `<kind>:<match>`: a credential (or a literal) compared with a target-substituted string.
    Generic {
        kind: Kind,
        pattern: Pattern,
    },
    /// `http:`/`https:` remote checks. Not supported here, so they deny.
    External {
        kind: String,
        pattern: String,
    },
}

impl fmt::Display for Check {
    /// The same canonical form as oslo's `str(check)`: the deprecated-rule handling compares
    /// an override against `rule:<name>` by this text.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Check::True => f.write_str("@"),
            Check::False => f.write_str("!"),
            Check::Not(inner) => write!(f, "not {inner}"),
            Check::And(checks) => write_joined(f, checks, " and "),
            Check::Or(checks) => write_joined(f, checks, " or "),
            Check::Rule(name) => write!(f, "rule:{name}"),
            Check::Role(pattern) => write!(f, "role:{}", pattern.raw),
            Check::Generic { kind, pattern } => write!(f, "{}:{}", kind.raw, pattern.raw),
            Check::External { kind, pattern } => write!(f, "{kind}:{pattern}"),
        }
    }
}

fn write_joined(f: &mut fmt::Formatter<'_>, checks: &[Check], sep: &str) -> fmt::Result {
    f.write_str("(")?;
    for (i, check) in checks.iter().enumerate() {
        if i > 0 {
            f.write_str(sep)?;
        }
        write!(f, "{check}")?;
    }
    f.write_str(")")
}

/// The right-hand side of a check: a string with optional Python `%(key)s` substitutions
/// from the target.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Pattern {
    raw: String,
    form: PatternForm,
}

#[derive(Clone, Debug, PartialEq, Eq)]
enum PatternForm {
    /// No substitution (`%%` already unescaped).
    Literal(String),
    /// Exactly `%(key)s`: the target value itself, no copy needed.
    Key(String),
    Parts(Vec<Part>),
    /// A format Python would reject (`%d`, a lone `%`, an unclosed key...). oslo lets the
    /// exception escape; failing closed is the safe equivalent.
    Invalid,
}

#[derive(Clone, Debug, PartialEq, Eq)]
enum Part {
    Lit(String),
    Key(String),
}

impl Pattern {
    pub fn parse(raw: &str) -> Self {
        Self {
            raw: raw.to_owned(),
            form: parse_pattern(raw),
        }
    }

    /// The text as written in the rule.
    pub fn as_str(&self) -> &str {
        &self.raw
    }

    /// `raw % target`, or `None` where oslo's check is false (missing key) or raises.
    pub fn render<'t>(&'t self, target: &'t Target) -> Option<Cow<'t, str>> {
        match &self.form {
            PatternForm::Literal(text) => Some(Cow::Borrowed(text)),
            PatternForm::Key(key) => target.python_str(key).map(Cow::Borrowed),
            PatternForm::Parts(parts) => {
                let mut out = String::new();
                for part in parts {
                    match part {
                        Part::Lit(text) => out.push_str(text),
                        Part::Key(key) => out.push_str(target.python_str(key)?),
                    }
                }
                Some(Cow::Owned(out))
            }
            PatternForm::Invalid => None,
        }
    }
}

fn parse_pattern(raw: &str) -> PatternForm {
    if !raw.contains('%') {
        return PatternForm::Literal(raw.to_owned());
    }
    let mut parts = Vec::new();
    let mut lit = String::new();
    let mut chars = raw.char_indices().peekable();
    while let Some((_, c)) = chars.next() {
        if c != '%' {
            lit.push(c);
            continue;
        }
        match chars.next() {
            Some((_, '%')) => lit.push('%'),
            Some((start, '(')) => {
                // Python counts nested parentheses to find the end of the key.
                let mut depth = 1usize;
                let mut end = None;
                for (i, k) in chars.by_ref() {
                    match k {
                        '(' => depth += 1,
                        ')' => {
                            depth -= 1;
                            if depth == 0 {
                                end = Some(i);
                                break;
                            }
                        }
                        _ => {}
                    }
                }
                let Some(end) = end else {
                    return PatternForm::Invalid;
                };
                // Only the plain `s` conversion renders a value as `str()`; flags, widths
                // and other conversions are not worth supporting.
                if !matches!(chars.next(), Some((_, 's'))) {
                    return PatternForm::Invalid;
                }
                if !lit.is_empty() {
                    parts.push(Part::Lit(std::mem::take(&mut lit)));
                }
                parts.push(Part::Key(raw[start + 1..end].to_owned()));
            }
            _ => return PatternForm::Invalid,
        }
    }
    if !lit.is_empty() {
        parts.push(Part::Lit(lit));
    }
    match parts.as_slice() {
        [] => PatternForm::Literal(String::new()),
        [Part::Lit(text)] => PatternForm::Literal(text.clone()),
        [Part::Key(key)] => PatternForm::Key(key.clone()),
        _ => PatternForm::Parts(parts),
    }
}

/// The left-hand side of a generic check: a Python literal (`True`, `'x'`, `42`) compared
/// as text, or a dotted path into the credentials.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Kind {
    raw: String,
    form: KindForm,
}

#[derive(Clone, Debug, PartialEq, Eq)]
enum KindForm {
    Literal(String),
    Path(Vec<String>),
}

impl Kind {
    pub fn parse(raw: &str) -> Self {
        let form = match python_literal(raw) {
            Some(text) => KindForm::Literal(text),
            None => KindForm::Path(raw.split('.').map(str::to_owned).collect()),
        };
        Self {
            raw: raw.to_owned(),
            form,
        }
    }

    pub fn as_str(&self) -> &str {
        &self.raw
    }

    /// oslo's GenericCheck comparison of the rendered match against this side.
    pub(crate) fn matches(&self, creds: &Credentials<'_>, rendered: &str) -> bool {
        match &self.form {
            KindForm::Literal(text) => text == rendered,
            KindForm::Path(path) => match path.as_slice() {
                [key] => match creds.get(key) {
                    // A list matches when any element does.
                    Some(CredValue::List(items)) => items.iter().any(|i| i == rendered),
                    Some(value) => value.python_str() == rendered,
                    None => false,
                },
                // Credentials hold no nested mappings; oslo would either miss the key or
                // raise on indexing a string, both a denial here.
                _ => false,
            },
        }
    }
}

/// `str(ast.literal_eval(text))` for the literals a policy file plausibly uses: `True`,
/// `False`, `None`, quoted strings and decimal integers. Anything else is a credential path.
fn python_literal(text: &str) -> Option<String> {
    match text {
        "True" | "False" | "None" => return Some(text.to_owned()),
        _ => {}
    }
    let bytes = text.as_bytes();
    if bytes.len() >= 2 {
        let (first, last) = (bytes[0], bytes[bytes.len() - 1]);
        if first == last && (first == b'\'' || first == b'"') {
            return unquote(&text[1..text.len() - 1], first as char);
        }
    }
    python_int(text)
}

fn unquote(body: &str, quote: char) -> Option<String> {
    let mut out = String::with_capacity(body.len());
    let mut chars = body.chars();
    while let Some(c) = chars.next() {
        match c {
            '\\' => match chars.next()? {
                'n' => out.push('\n'),
                't' => out.push('\t'),
                'r' => out.push('\r'),
                '0' => out.push('\0'),
                e @ ('\\' | '\'' | '"') => out.push(e),
                other => {
                    // Python keeps unknown escapes verbatim.
                    out.push('\\');
                    out.push(other);
                }
            },
            c if c == quote => return None,
            c => out.push(c),
        }
    }
    Some(out)
}

fn python_int(text: &str) -> Option<String> {
    let digits = text.strip_prefix(['+', '-']).unwrap_or(text);
    let bytes = digits.as_bytes();
    let valid = !bytes.is_empty()
        && bytes[0].is_ascii_digit()
        && bytes[bytes.len() - 1].is_ascii_digit()
        && bytes.iter().all(|b| b.is_ascii_digit() || *b == b'_')
        && !digits.contains("__");
    if !valid {
        return None;
    }
    let cleaned: String = digits.chars().filter(|c| *c != '_').collect();
    // Python 3 rejects leading zeros except in zero itself.
    if cleaned.len() > 1 && cleaned.starts_with('0') && cleaned.bytes().any(|b| b != b'0') {
        return None;
    }
    let value: i128 = cleaned.parse().ok()?;
    let value = if text.starts_with('-') { -value } else { value };
    Some(value.to_string())
}

/// Parses a rule in the text syntax the way oslo does: failures are logged and yield `!`.
pub fn parse_rule(text: &str) -> Check {
    let (check, problems) = parse_rule_reporting(text);
    for problem in &problems {
        tracing::warn!(rule = text, "failed to understand policy rule: {problem}");
    }
    check
}

/// The check oslo would build, with what it would log.
pub(crate) fn parse_rule_reporting(text: &str) -> (Check, Vec<String>) {
    let mut problems = Vec::new();
    let check = parse_with_problems(text, &mut problems);
    (check, problems)
}

/// Parses a rule, reporting what oslo would only log (an unparsable rule or check).
pub fn try_parse_rule(text: &str) -> Result<Check, RuleSyntaxError> {
    let mut problems = Vec::new();
    let check = parse_with_problems(text, &mut problems);
    match problems.into_iter().next() {
        None => Ok(check),
        Some(message) => Err(RuleSyntaxError {
            rule: text.to_owned(),
            message,
        }),
    }
}

/// Why a rule does not parse (oslo would deny it and log this).
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("cannot parse policy rule {rule:?}: {message}")]
pub struct RuleSyntaxError {
    pub rule: String,
    pub message: String,
}

fn parse_with_problems(text: &str, problems: &mut Vec<String>) -> Check {
    if text.is_empty() {
        return Check::True;
    }
    let mut state = ParseState::default();
    for token in tokenize(text, problems) {
        state.shift(token);
    }
    match state.result() {
        Some(check) => check,
        None => {
            problems.push("could not reduce to a single check".to_owned());
            Check::False
        }
    }
}

/// The legacy list-of-lists syntax: an OR of ANDs of single checks.
pub fn parse_list_rule(alternatives: &[ListItem]) -> Check {
    let (check, problems) = parse_list_rule_reporting(alternatives);
    for problem in &problems {
        tracing::warn!("failed to understand policy rule: {problem}");
    }
    check
}

pub(crate) fn parse_list_rule_reporting(alternatives: &[ListItem]) -> (Check, Vec<String>) {
    let mut problems = Vec::new();
    if alternatives.is_empty() {
        return (Check::True, problems);
    }
    let mut or_list = Vec::new();
    for alternative in alternatives {
        let mut and_list: Vec<Check> = match alternative {
            ListItem::Skip => continue,
            ListItem::Single(text) => vec![parse_single(text, &mut problems)],
            ListItem::All(items) => items
                .iter()
                .map(|item| match item {
                    Some(text) => parse_single(text, &mut problems),
                    // A non-string element cannot be split into kind and match.
                    None => Check::False,
                })
                .collect(),
        };
        if and_list.is_empty() {
            continue;
        }
        or_list.push(if and_list.len() == 1 {
            and_list.remove(0)
        } else {
            Check::And(and_list)
        });
    }
    let check = match or_list.len() {
        0 => Check::False,
        1 => or_list.remove(0),
        _ => Check::Or(or_list),
    };
    (check, problems)
}

/// One alternative of a list-syntax rule.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ListItem {
    /// An empty (falsy) entry, ignored.
    Skip,
    /// A bare string: an alternative of one check.
    Single(String),
    /// A list of checks that must all pass; `None` for a non-string element.
    All(Vec<Option<String>>),
}

/// One check without operators (oslo's `_parse_check`).
fn parse_single(text: &str, problems: &mut Vec<String>) -> Check {
    match text {
        "!" => return Check::False,
        "@" => return Check::True,
        _ => {}
    }
    let Some((kind, matched)) = text.split_once(':') else {
        problems.push(format!("{text:?} is not of the form <kind>:<match>"));
        return Check::False;
    };
    match kind {
        "rule" => Check::Rule(matched.to_owned()),
        "role" => Check::Role(Pattern::parse(matched)),
        "http" | "https" => {
            problems.push(format!(
                "remote {kind} checks are not supported; {text:?} denies"
            ));
            Check::External {
                kind: kind.to_owned(),
                pattern: matched.to_owned(),
            }
        }
        _ => Check::Generic {
            kind: Kind::parse(kind),
            pattern: Pattern::parse(matched),
        },
    }
}

#[derive(Debug)]
enum Token {
    LParen,
    RParen,
    And,
    Or,
    Not,
    /// A whole token in quotes: oslo has no reduction for it, so the parse fails.
    Str,
    Check(Check),
    AndExpr(Vec<Check>),
    OrExpr(Vec<Check>),
}

fn tokenize(text: &str, problems: &mut Vec<String>) -> Vec<Token> {
    let mut tokens = Vec::new();
    for tok in text.split(char::is_whitespace).filter(|t| !t.is_empty()) {
        let clean = tok.trim_start_matches('(');
        for _ in 0..(tok.len() - clean.len()) {
            tokens.push(Token::LParen);
        }
        if clean.is_empty() {
            continue;
        }
        let tok = clean;
        let clean = tok.trim_end_matches(')');
        let trail = tok.len() - clean.len();
        if clean.eq_ignore_ascii_case("and") {
            tokens.push(Token::And);
        } else if clean.eq_ignore_ascii_case("or") {
            tokens.push(Token::Or);
        } else if clean.eq_ignore_ascii_case("not") {
            tokens.push(Token::Not);
        } else if !clean.is_empty() {
            // oslo looks at the quotes of the token before stripping `)`.
            let quoted = tok.chars().count() >= 2
                && ((tok.starts_with('"') && tok.ends_with('"'))
                    || (tok.starts_with('\'') && tok.ends_with('\'')));
            if quoted {
                problems.push(format!("bare string {tok} is not a check"));
                tokens.push(Token::Str);
            } else {
                tokens.push(Token::Check(parse_single(clean, problems)));
            }
        }
        for _ in 0..trail {
            tokens.push(Token::RParen);
        }
    }
    tokens
}

#[derive(Default)]
struct ParseState {
    stack: Vec<Token>,
}

impl ParseState {
    fn shift(&mut self, token: Token) {
        self.stack.push(token);
        while self.reduce_once() {}
    }

    /// Applies the first matching reduction at the top of the stack, as oslo's `reduce`.
    fn reduce_once(&mut self) -> bool {
        let n = self.stack.len();
        if n >= 3 {
            let top = &self.stack[n - 3..];
            let rule = match top {
                [
                    Token::LParen,
                    Token::Check(_) | Token::AndExpr(_) | Token::OrExpr(_),
                    Token::RParen,
                ] => Some(Reduction::Group),
                [Token::Check(_), Token::And, Token::Check(_)] => Some(Reduction::NewAnd),
                [Token::AndExpr(_), Token::And, Token::Check(_)] => Some(Reduction::ExtendAnd),
                [Token::OrExpr(_), Token::And, Token::Check(_)] => Some(Reduction::AndIntoOr),
                [
                    Token::Check(_) | Token::AndExpr(_),
                    Token::Or,
                    Token::Check(_),
                ] => Some(Reduction::NewOr),
                [Token::OrExpr(_), Token::Or, Token::Check(_)] => Some(Reduction::ExtendOr),
                _ => None,
            };
            if let Some(rule) = rule {
                let (Some(c), Some(b), Some(a)) =
                    (self.stack.pop(), self.stack.pop(), self.stack.pop())
                else {
                    return false;
                };
                let reduced = match (rule, a, b, c) {
                    (Reduction::Group, _, inner, _) => Token::Check(match inner {
                        Token::Check(check) => check,
                        Token::AndExpr(checks) => Check::And(checks),
                        Token::OrExpr(checks) => Check::Or(checks),
                        _ => Check::False,
                    }),
                    (Reduction::NewAnd, Token::Check(a), _, Token::Check(c)) => {
                        Token::AndExpr(vec![a, c])
                    }
                    (Reduction::ExtendAnd, Token::AndExpr(mut checks), _, Token::Check(c)) => {
                        checks.push(c);
                        Token::AndExpr(checks)
                    }
                    (Reduction::AndIntoOr, Token::OrExpr(mut checks), _, Token::Check(c)) => {
                        // `a or b and c`: the last alternative absorbs the conjunct.
                        let joined = match checks.pop() {
                            Some(Check::And(mut inner)) => {
                                inner.push(c);
                                Check::And(inner)
                            }
                            Some(last) => Check::And(vec![last, c]),
                            None => c,
                        };
                        checks.push(joined);
                        Token::OrExpr(checks)
                    }
                    (Reduction::NewOr, Token::Check(a), _, Token::Check(c)) => {
                        Token::OrExpr(vec![a, c])
                    }
                    (Reduction::NewOr, Token::AndExpr(a), _, Token::Check(c)) => {
                        Token::OrExpr(vec![Check::And(a), c])
                    }
                    (Reduction::ExtendOr, Token::OrExpr(mut checks), _, Token::Check(c)) => {
                        checks.push(c);
                        Token::OrExpr(checks)
                    }
                    // The patterns above guarantee the shapes; should they ever disagree,
                    // leave a token that fails the parse rather than panic.
                    _ => Token::Str,
                };
                self.stack.push(reduced);
                return true;
            }
        }
        if n >= 2
            && matches!(self.stack[n - 2..], [Token::Not, Token::Check(_)])
            && let (Some(Token::Check(c)), Some(_not)) = (self.stack.pop(), self.stack.pop())
        {
            self.stack.push(Token::Check(Check::Not(Box::new(c))));
            return true;
        }
        false
    }

    fn result(mut self) -> Option<Check> {
        if self.stack.len() != 1 {
            return None;
        }
        match self.stack.pop()? {
            Token::Check(check) => Some(check),
            Token::AndExpr(checks) => Some(Check::And(checks)),
            Token::OrExpr(checks) => Some(Check::Or(checks)),
            _ => None,
        }
    }
}

#[derive(Clone, Copy)]
enum Reduction {
    Group,
    NewAnd,
    ExtendAnd,
    AndIntoOr,
    NewOr,
    ExtendOr,
}

/// Role names compare case-insensitively (Python's `str.lower()` on both sides).
pub(crate) fn role_matches(roles: &[String], wanted: &str) -> bool {
    if wanted.is_ascii() {
        roles.iter().any(|role| {
            if role.is_ascii() {
                role.eq_ignore_ascii_case(wanted)
            } else {
                role.to_lowercase() == wanted.to_ascii_lowercase()
            }
        })
    } else {
        let wanted = wanted.to_lowercase();
        roles.iter().any(|role| role.to_lowercase() == wanted)
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
mod tests {
    use super::*;

    /// Rule text → `str(parse_rule(text))` as oslo.policy 6.0.1 prints it.
    const ORACLE: &[(&str, &str)] = &[
        ("", "@"),
        (" ", "!"),
        ("@", "@"),
        ("!", "!"),
        ("role:admin", "role:admin"),
        ("a:b or c:d and e:f", "(a:b or (c:d and e:f))"),
        ("a:b and c:d or e:f", "((a:b and c:d) or e:f)"),
        ("not a:b", "not a:b"),
        ("not a:b and c:d", "(not a:b and c:d)"),
        ("a:b or not c:d and e:f", "(a:b or (not c:d and e:f))"),
        ("(a:b or c:d) and e:f", "((a:b or c:d) and e:f)"),
        (
            "a:b or (c:d and e:f) and g:h",
            "(a:b or (c:d and e:f and g:h))",
        ),
        (
            "a:b or c:d and e:f and g:h",
            "(a:b or (c:d and e:f and g:h))",
        ),
        ("not (a:b or c:d)", "not (a:b or c:d)"),
        ("not not a:b", "not not a:b"),
        ("((a:b))", "a:b"),
        ("(a:b", "!"),
        ("a:b)", "!"),
        ("a:b and", "!"),
        ("and a:b", "!"),
        ("a:b c:d", "!"),
        ("admin", "!"),
        ("\"a:b\"", "!"),
        ("'a:b'", "!"),
        ("\"a:b\")", "!"),
        (
            "role:admin OR role:member AND project_id:%(project_id)s",
            "(role:admin or (role:member and project_id:%(project_id)s))",
        ),
        ("(role:admin)or(role:x)", "role:admin)or(role:x"),
        (
            "rule:context_is_admin or (rule:project_member and rule:is_user)",
            "(rule:context_is_admin or (rule:project_member and rule:is_user))",
        ),
        ("http://x", "http://x"),
        ("https:foo", "https:foo"),
        ("True:%(x)s", "True:%(x)s"),
        ("'Member':%(role.name)s", "'Member':%(role.name)s"),
        ("foo:bar(baz)", "!"),
        (
            "role:a and (role:b or role:c) and not role:d",
            "(role:a and (role:b or role:c) and not role:d)",
        ),
        (
            "(rule:context_is_admin) or ((rule:project_member) and (rule:is_user))",
            "(rule:context_is_admin or (rule:project_member and rule:is_user))",
        ),
        ("a:b or c:d or e:f", "(a:b or c:d or e:f)"),
        ("a:b and c:d and e:f", "(a:b and c:d and e:f)"),
        ("not a:b or c:d", "(not a:b or c:d)"),
        ("(not a:b)", "not a:b"),
        ("a:b\tor\nc:d", "(a:b or c:d)"),
        ("a:b or", "!"),
        ("a:b or or c:d", "!"),
        ("( a:b )", "a:b"),
        ("(a:b) (c:d)", "!"),
        ("not", "!"),
        (":x", ":x"),
        ("x:", "x:"),
    ];

    #[test]
    fn parses_like_oslo() {
        for (text, expected) in ORACLE {
            assert_eq!(parse_rule(text).to_string(), *expected, "rule {text:?}");
        }
    }

    #[test]
    fn and_binds_tighter_than_or() {
        let role = |r: &str| Check::Role(Pattern::parse(r));
        assert_eq!(
            parse_rule("role:a or role:b and role:c"),
            Check::Or(vec![role("a"), Check::And(vec![role("b"), role("c")])])
        );
        assert_eq!(
            parse_rule("(role:a or role:b) and role:c"),
            Check::And(vec![Check::Or(vec![role("a"), role("b")]), role("c")])
        );
        assert_eq!(
            parse_rule("not role:a or role:b"),
            Check::Or(vec![Check::Not(Box::new(role("a"))), role("b")])
        );
    }

    #[test]
    fn check_kinds() {
        assert_eq!(parse_rule("rule:foo"), Check::Rule("foo".into()));
        assert!(matches!(parse_rule("role:Admin"), Check::Role(_)));
        assert!(matches!(
            parse_rule("https://policy"),
            Check::External { .. }
        ));
        // The kind is case-sensitive: `Role:` is a credential lookup, not a role check.
        assert!(matches!(parse_rule("Role:admin"), Check::Generic { .. }));
        // Only the first colon separates kind and match.
        let Check::Generic { kind, pattern } = parse_rule("a:b:c") else {
            panic!("generic expected");
        };
        assert_eq!((kind.as_str(), pattern.as_str()), ("a", "b:c"));
    }

    #[test]
    fn syntax_errors_are_reported_and_deny() {
        for bad in [
            "(role:a",
            "role:a and",
            "admin",
            "role:a role:b",
            "'x'",
            "  ",
            "https:x",
        ] {
            assert!(try_parse_rule(bad).is_err(), "{bad:?} should not parse");
        }
        assert_eq!(parse_rule("(role:a"), Check::False);
        // A malformed single check denies only itself, as in oslo.
        assert_eq!(parse_rule("admin or role:a").to_string(), "(! or role:a)");
        let err = try_parse_rule("role:a and").unwrap_err();
        assert_eq!(err.rule, "role:a and");
        assert!(try_parse_rule("").is_ok());
        assert!(try_parse_rule("role:a or not (role:b and project_id:%(project_id)s)").is_ok());
    }

    #[test]
    fn list_rules() {
        let role = |r: &str| Check::Role(Pattern::parse(r));
        assert_eq!(parse_list_rule(&[]), Check::True);
        assert_eq!(parse_list_rule(&[ListItem::All(vec![])]), Check::False);
        assert_eq!(parse_list_rule(&[ListItem::Skip]), Check::False);
        assert_eq!(
            parse_list_rule(&[
                ListItem::All(vec![Some("role:a".into()), Some("role:b".into())]),
                ListItem::Single("role:c".into()),
            ]),
            Check::Or(vec![Check::And(vec![role("a"), role("b")]), role("c")])
        );
        // Each element is one check: operators are not parsed inside it.
        assert_eq!(
            parse_list_rule(&[ListItem::Single("role:a or role:b".into())]),
            Check::Role(Pattern::parse("a or role:b"))
        );
        assert_eq!(parse_list_rule(&[ListItem::All(vec![None])]), Check::False);
    }

    #[test]
    fn patterns_substitute_like_python() {
        let target = Target::new()
            .with("project_id", "p1")
            .with_opt("user_id", None::<String>)
            .with("a(b)", "nested");
        let render = |raw: &str| Pattern::parse(raw).render(&target).map(|c| c.into_owned());
        assert_eq!(render("plain").as_deref(), Some("plain"));
        assert_eq!(render("%(project_id)s").as_deref(), Some("p1"));
        assert_eq!(render("x-%(project_id)s-%%").as_deref(), Some("x-p1-%"));
        assert_eq!(render("%(user_id)s").as_deref(), Some("None"));
        assert_eq!(render("%(a(b))s").as_deref(), Some("nested"));
        assert_eq!(render("%(missing)s"), None);
        for python_error in ["50%", "%(project_id)d", "%s", "%(project_id"] {
            assert_eq!(render(python_error), None, "{python_error}");
        }
    }

    #[test]
    fn kinds_evaluate_python_literals() {
        let lit = |raw: &str| match Kind::parse(raw).form {
            KindForm::Literal(text) => Some(text),
            KindForm::Path(_) => None,
        };
        assert_eq!(lit("True").as_deref(), Some("True"));
        assert_eq!(lit("None").as_deref(), Some("None"));
        assert_eq!(lit("'Member'").as_deref(), Some("Member"));
        assert_eq!(lit("\"a\\'b\"").as_deref(), Some("a'b"));
        assert_eq!(lit("-007"), None);
        assert_eq!(lit("+1_000").as_deref(), Some("1000"));
        assert_eq!(lit("-5").as_deref(), Some("-5"));
        assert_eq!(lit("is_admin"), None);
        assert_eq!(lit("true"), None);
        assert_eq!(
            Kind::parse("token.user.id").form,
            KindForm::Path(vec!["token".into(), "user".into(), "id".into()])
        );
    }

    #[test]
    fn roles_compare_case_insensitively() {
        let roles = vec!["Admin".to_owned(), "MEMBER".to_owned()];
        assert!(role_matches(&roles, "admin"));
        assert!(role_matches(&roles, "Member"));
        assert!(!role_matches(&roles, "reader"));
        assert!(role_matches(&["ÄDMIN".to_owned()], "ädmin"));
    }
}
