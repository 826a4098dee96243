//! `ast.literal_eval` as Magnum's `apply_jsonpatch` uses it (CPython 3.11 semantics).
//!
//! Python clients send dict/list values as `str(dict)` (single quotes, `True`/`None`), and the
//! failure text becomes part of a 400 body, so both the accepted language and the error
//! messages follow CPython: a tokenizer and an expression parser decide between `SyntaxError`
//! (`... (<unknown>, line N)`) and a well-formed expression, then `literal_eval`'s converter
//! either builds the value or raises `malformed node or string ...` naming the first offending
//! AST node. Known limits: the `0x...` address in a malformed-node message is arbitrary (upstream
//! prints a heap address), `\N{...}` escapes are not resolved, and only the SyntaxError wordings
//! clients plausibly trigger are specialised; rarer ones fall back to `invalid syntax`.

use serde_json::{Map, Number, Value};

/// Parse `text` like Python's `ast.literal_eval(text)` and convert the result to JSON.
///
/// `Err` holds `str(exception)` as upstream embeds it. Values Python accepts but JSON cannot
/// hold (sets, bytes, complex numbers, `...`, non-string dict keys, integers beyond 64 bits,
/// infinities) are rejected with an explanatory message; tuples become arrays.
pub fn python_literal(text: &str) -> Result<Value, String> {
    literal_eval(text).map_err(|e| match e {
        LiteralError::Invalid(msg) | LiteralError::Crash(msg) => msg,
    })
}

pub(super) enum LiteralError {
    /// SyntaxError / ValueError: upstream reports a PatchError (400).
    Invalid(String),
    /// An exception upstream does not catch (RecursionError on absurd nesting): 500.
    Crash(String),
}

pub(super) fn literal_eval(text: &str) -> Result<Value, LiteralError> {
    // literal_eval strips leading spaces and tabs (not newlines) before compiling.
    let src = text.trim_start_matches([' ', '\t']);
    if src.contains('\0') {
        return Err(LiteralError::Invalid(
            "source code string cannot contain null bytes".into(),
        ));
    }
    if nesting_estimate(src) <= INLINE_NESTING {
        return eval_source(src);
    }
    // The parser recurses once per bracket level (up to CPython's 200), which takes ~35 KiB of
    // stack per level in debug builds: deep inputs run on a thread with room for the worst case.
    let owned = src.to_string();
    std::thread::Builder::new()
        .name("python-literal".into())
        .stack_size(DEEP_STACK_BYTES)
        .spawn(move || eval_source(&owned))
        .map_err(|e| LiteralError::Crash(format!("cannot start literal parser: {e}")))?
        .join()
        .unwrap_or_else(|_| Err(LiteralError::Crash("literal parser panicked".into())))
}

/// Inputs with at most this many nesting constructs are parsed on the caller's stack.
const INLINE_NESTING: usize = 8;

const DEEP_STACK_BYTES: usize = 64 << 20;

/// Upper bound on the parser's recursion depth: bracket openers plus the keywords/operators
/// that nest without brackets (`if ... else`, `lambda`, `**`).
fn nesting_estimate(src: &str) -> usize {
    src.bytes()
        .filter(|b| matches!(b, b'(' | b'[' | b'{'))
        .count()
        + src.matches("if").count()
        + src.matches("lambda").count()
        + src.matches("**").count()
}

fn eval_source(src: &str) -> Result<Value, LiteralError> {
    let node = Parser::new(src).parse_eval()?;
    let value = convert(&node).map_err(LiteralError::Invalid)?;
    to_json(value).map_err(LiteralError::Invalid)
}

// ---------------------------------------------------------------------------------------------
// Tokens

#[derive(Debug, Clone, PartialEq)]
enum Tk {
    Name(String),
    /// An integer literal; `None` when it does not fit in an i128.
    Int(Option<i128>),
    Float(f64),
    Imag,
    Str(StrTok),
    Op(&'static str),
    Newline,
    Indent,
    End,
}

#[derive(Debug, Clone, PartialEq)]
struct StrTok {
    kind: StrKind,
    value: String,
    /// Decoding errors surface when the parser builds the constant, as in CPython.
    error: Option<String>,
    /// A `\U` escape named a surrogate: valid Python, not representable here.
    surrogate: bool,
}

#[derive(Debug, Clone, Copy, PartialEq)]
enum StrKind {
    Text,
    Bytes,
    Format,
}

#[derive(Debug, Clone)]
struct Tok {
    tk: Tk,
    line: u32,
    /// Bracket nesting before this token (the comma hint only fires inside brackets).
    level: usize,
}

#[derive(Debug, Clone)]
struct SynErr {
    msg: String,
    line: u32,
    /// An open bracket at end of input; it only overrides a parser error on a later line.
    unclosed: bool,
    /// CPython only formats this tokenizer error when the parser asks for the token, so it
    /// never overrides a parser error found earlier (bad line continuation, EOF after one).
    lazy: bool,
}

impl SynErr {
    fn new(msg: impl Into<String>, line: u32) -> Self {
        SynErr {
            msg: msg.into(),
            line,
            unclosed: false,
            lazy: false,
        }
    }

    fn lazy(msg: impl Into<String>, line: u32) -> Self {
        SynErr {
            lazy: true,
            ..SynErr::new(msg, line)
        }
    }
}

const KEYWORDS: &[&str] = &[
    "False", "None", "True", "and", "as", "assert", "async", "await", "break", "class", "continue",
    "def", "del", "elif", "else", "except", "finally", "for", "from", "global", "if", "import",
    "in", "is", "lambda", "nonlocal", "not", "or", "pass", "raise", "return", "try", "while",
    "with", "yield",
];

const OPERATORS: &[&str] = &[
    "**=", "//=", ">>=", "<<=", "...", "!=", "%=", "&=", "**", "*=", "+=", "-=", "->", "//", "/=",
    ":=", "<<", "<=", "==", ">=", ">>", "@=", "^=", "|=", "(", ")", "[", "]", "{", "}", ",", ":",
    ";", ".", "+", "-", "*", "/", "%", "&", "|", "^", "~", "<", ">", "=", "@", "!", "$", "?", "`",
];

/// CPython's tokenizer limit on open brackets.
const MAX_NESTING: usize = 200;

/// Roughly where CPython's AST construction hits its recursion limit (RecursionError).
const MAX_AST_DEPTH: usize = 2900;

fn is_keyword(s: &str) -> bool {
    KEYWORDS.contains(&s)
}

fn is_ident_start(c: char) -> bool {
    c == '_' || c.is_alphabetic()
}

fn is_ident_continue(c: char) -> bool {
    c == '_' || c.is_alphanumeric()
}

struct Lexer {
    chars: Vec<char>,
    pos: usize,
    line: u32,
    parens: Vec<(char, u32)>,
    at_line_start: bool,
    line_has_tokens: bool,
    finished: bool,
}

impl Lexer {
    fn new(src: &str) -> Self {
        Lexer {
            chars: src.chars().collect(),
            pos: 0,
            line: 1,
            parens: Vec::new(),
            at_line_start: true,
            line_has_tokens: false,
            finished: false,
        }
    }

    fn peek_char(&self, ahead: usize) -> Option<char> {
        self.chars.get(self.pos + ahead).copied()
    }

    /// Line that CPython reports for ENDMARKER: 0 for empty input, else the number of lines.
    fn end_line(&self) -> u32 {
        let newlines = self.chars.iter().filter(|c| **c == '\n').count() as u32;
        match self.chars.last() {
            None => 0,
            Some('\n') => newlines,
            Some(_) => newlines + 1,
        }
    }

    /// Consume a newline sequence (`\n`, `\r\n` or `\r`) at the cursor, if any.
    fn eat_newline(&mut self) -> bool {
        match self.peek_char(0) {
            Some('\n') => {
                self.pos += 1;
                true
            }
            Some('\r') => {
                self.pos += 1;
                if self.peek_char(0) == Some('\n') {
                    self.pos += 1;
                }
                true
            }
            _ => false,
        }
    }

    /// Input ending right after a line continuation.
    fn continuation_eof(&self) -> Result<(), SynErr> {
        if self.peek_char(0).is_some() {
            return Ok(());
        }
        match self.parens.last() {
            Some(&(open, line)) => Err(SynErr {
                msg: format!("'{open}' was never closed"),
                line,
                unclosed: true,
                lazy: false,
            }),
            None => Err(SynErr::lazy("unexpected EOF while parsing", self.line)),
        }
    }

    /// CPython's `verify_end_of_number`: a number may be glued to a following `and`, `else`,
    /// `for`, `in`, `is`, `if`, `not` or `or` (only a SyntaxWarning); another ASCII identifier
    /// character right after it is an error (non-ASCII ones are left to the parser).
    fn verify_end_of_number(&self, kind: &str, line: u32) -> Result<(), SynErr> {
        let next = |i: usize| self.peek_char(i);
        let spells = |word: &str| {
            word.chars().enumerate().all(|(i, c)| next(i) == Some(c))
                && !next(word.chars().count())
                    .is_some_and(|c| !c.is_ascii() || c.is_ascii_alphanumeric() || c == '_')
        };
        let keyword_follows = match next(0) {
            Some('a') => spells("and"),
            Some('e') => spells("else"),
            Some('f') => spells("for"),
            Some('i') => matches!(next(1), Some('f' | 'n' | 's')),
            Some('o') => spells("or"),
            Some('n') => spells("not"),
            _ => false,
        };
        if !keyword_follows && next(0).is_some_and(|c| c.is_ascii_alphanumeric() || c == '_') {
            return Err(SynErr::new(format!("invalid {kind} literal"), line));
        }
        Ok(())
    }

    fn tok(&mut self, tk: Tk, line: u32, level: usize) -> Tok {
        self.line_has_tokens = true;
        Tok { tk, line, level }
    }

    fn next_token(&mut self) -> Result<Tok, SynErr> {
        loop {
            if self.finished {
                return Ok(Tok {
                    tk: Tk::End,
                    line: self.end_line(),
                    level: 0,
                });
            }
            if self.at_line_start && self.parens.is_empty() {
                self.at_line_start = false;
                let mut indented = false;
                loop {
                    match self.peek_char(0) {
                        // A form feed resets the column, as in CPython.
                        Some(c @ (' ' | '\t' | '\x0c')) => {
                            indented = c != '\x0c';
                            self.pos += 1;
                        }
                        // A continuation inside the indentation keeps measuring on the next line.
                        Some('\\') if matches!(self.peek_char(1), Some('\n' | '\r')) => {
                            self.pos += 1;
                            self.eat_newline();
                            self.continuation_eof()?;
                            self.line += 1;
                        }
                        _ => break,
                    }
                }
                // Only a line with content (or trailing whitespace at EOF) counts as indented.
                if indented && !matches!(self.peek_char(0), Some('#' | '\n' | '\r')) {
                    return Ok(Tok {
                        tk: Tk::Indent,
                        line: self.line,
                        level: 0,
                    });
                }
            }
            let Some(c) = self.peek_char(0) else {
                if let Some(&(open, line)) = self.parens.last() {
                    return Err(SynErr {
                        msg: format!("'{open}' was never closed"),
                        line,
                        unclosed: true,
                        lazy: false,
                    });
                }
                if self.line_has_tokens {
                    self.line_has_tokens = false;
                    return Ok(Tok {
                        tk: Tk::Newline,
                        line: self.line,
                        level: 0,
                    });
                }
                self.finished = true;
                continue;
            };
            match c {
                ' ' | '\t' | '\x0c' => self.pos += 1,
                '#' => {
                    while !matches!(self.peek_char(0), None | Some('\n' | '\r')) {
                        self.pos += 1;
                    }
                }
                '\\' => {
                    self.pos += 1;
                    if !self.eat_newline() {
                        return Err(SynErr::lazy(
                            "unexpected character after line continuation character",
                            self.line,
                        ));
                    }
                    self.continuation_eof()?;
                    self.line += 1;
                }
                '\n' | '\r' => {
                    self.eat_newline();
                    let line = self.line;
                    self.line += 1;
                    if !self.parens.is_empty() {
                        continue;
                    }
                    self.at_line_start = true;
                    if self.line_has_tokens {
                        self.line_has_tokens = false;
                        return Ok(Tok {
                            tk: Tk::Newline,
                            line,
                            level: 0,
                        });
                    }
                }
                _ => return self.lex_token(c),
            }
        }
    }

    fn lex_token(&mut self, c: char) -> Result<Tok, SynErr> {
        let line = self.line;
        let level = self.parens.len();
        if c.is_ascii_digit() || (c == '.' && self.peek_char(1).is_some_and(|d| d.is_ascii_digit()))
        {
            let tk = self.lex_number()?;
            return Ok(self.tok(tk, line, level));
        }
        if c == '\'' || c == '"' {
            let tk = self.lex_string("")?;
            return Ok(self.tok(tk, line, level));
        }
        if is_ident_start(c) {
            let start = self.pos;
            while self.peek_char(0).is_some_and(is_ident_continue) {
                self.pos += 1;
            }
            let word: String = self.chars[start..self.pos].iter().collect();
            let is_prefix = matches!(
                word.to_ascii_lowercase().as_str(),
                "r" | "u" | "b" | "f" | "br" | "rb" | "fr" | "rf"
            );
            if is_prefix && matches!(self.peek_char(0), Some('\'' | '"')) {
                let tk = self.lex_string(&word)?;
                return Ok(self.tok(tk, line, level));
            }
            return Ok(self.tok(Tk::Name(word), line, level));
        }
        if !c.is_ascii() {
            return Err(SynErr::new(
                format!("invalid character '{c}' (U+{:04X})", c as u32),
                line,
            ));
        }
        if c.is_ascii_control() {
            return Err(SynErr::new(
                format!("invalid non-printable character U+{:04X}", c as u32),
                line,
            ));
        }
        for op in OPERATORS {
            if op
                .chars()
                .enumerate()
                .all(|(i, oc)| self.peek_char(i) == Some(oc))
            {
                self.pos += op.chars().count();
                self.track_bracket(op, line)?;
                return Ok(self.tok(Tk::Op(op), line, level));
            }
        }
        Err(SynErr::new("invalid syntax", line))
    }

    fn track_bracket(&mut self, op: &str, line: u32) -> Result<(), SynErr> {
        let close = match op {
            "(" | "[" | "{" => {
                // CPython's tokenizer MAXLEVEL; also bounds this parser's recursion.
                if self.parens.len() >= MAX_NESTING {
                    return Err(SynErr::new("too many nested parentheses", line));
                }
                self.parens.push((op.chars().next().unwrap_or('('), line));
                return Ok(());
            }
            ")" => ')',
            "]" => ']',
            "}" => '}',
            _ => return Ok(()),
        };
        let Some((open, open_line)) = self.parens.pop() else {
            return Err(SynErr::new(format!("unmatched '{close}'"), line));
        };
        let expected = match open {
            '(' => ')',
            '[' => ']',
            _ => '}',
        };
        if close != expected {
            let msg = if open_line == line {
                format!("closing parenthesis '{close}' does not match opening parenthesis '{open}'")
            } else {
                format!(
                    "closing parenthesis '{close}' does not match opening parenthesis '{open}' on line {open_line}"
                )
            };
            return Err(SynErr::new(msg, line));
        }
        Ok(())
    }

    /// Digits of `radix` with single underscores between them; `Err(())` on a misplaced `_`.
    fn lex_digits(&mut self, radix: u32, out: &mut String) -> Result<(), ()> {
        let mut seen = false;
        loop {
            match self.peek_char(0) {
                Some(d) if d.is_digit(radix) => {
                    out.push(d);
                    self.pos += 1;
                    seen = true;
                }
                Some('_') if seen && self.peek_char(1).is_some_and(|d| d.is_digit(radix)) => {
                    self.pos += 1
                }
                Some('_') if seen => return Err(()),
                _ => return Ok(()),
            }
        }
    }

    fn lex_number(&mut self) -> Result<Tk, SynErr> {
        let line = self.line;
        let err = |kind: &str| SynErr::new(format!("invalid {kind} literal"), line);
        if self.peek_char(0) == Some('0')
            && let Some(marker) = self.peek_char(1).map(|c| c.to_ascii_lowercase())
            && matches!(marker, 'x' | 'o' | 'b')
        {
            let (radix, kind) = match marker {
                'x' => (16, "hexadecimal"),
                'o' => (8, "octal"),
                _ => (2, "binary"),
            };
            self.pos += 2;
            // `0x_1` is valid: one underscore may follow the prefix.
            if self.peek_char(0) == Some('_')
                && self.peek_char(1).is_some_and(|d| d.is_digit(radix))
            {
                self.pos += 1;
            }
            let mut digits = String::new();
            if self.lex_digits(radix, &mut digits).is_err() {
                return Err(err(kind));
            }
            if let Some(d) = self.peek_char(0)
                && radix < 10
                && d.is_ascii_digit()
            {
                return Err(SynErr::new(
                    format!("invalid digit '{d}' in {kind} literal"),
                    line,
                ));
            }
            if digits.is_empty() {
                return Err(err(kind));
            }
            self.verify_end_of_number(kind, line)?;
            return Ok(Tk::Int(i128::from_str_radix(&digits, radix).ok()));
        }
        let mut int_part = String::new();
        if self.lex_digits(10, &mut int_part).is_err() {
            return Err(err("decimal"));
        }
        let mut text = int_part.clone();
        let mut is_float = false;
        if self.peek_char(0) == Some('.') {
            self.pos += 1;
            is_float = true;
            text.push('.');
            if self.lex_digits(10, &mut text).is_err() {
                return Err(err("decimal"));
            }
        }
        if matches!(self.peek_char(0), Some('e' | 'E')) {
            let sign = usize::from(matches!(self.peek_char(1), Some('+' | '-')));
            if sign == 1 && !self.peek_char(2).is_some_and(|d| d.is_ascii_digit()) {
                return Err(err("decimal"));
            }
            if sign == 0 && !self.peek_char(1).is_some_and(|d| d.is_ascii_digit()) {
                // `1else`: the `e` starts the next token if it spells a keyword.
                self.verify_end_of_number("decimal", line)?;
                return self.finish_number(&int_part, &text, is_float, line);
            }
            text.push('e');
            if sign == 1 {
                text.push(self.peek_char(1).unwrap_or('+'));
            }
            self.pos += 1 + sign;
            is_float = true;
            if self.lex_digits(10, &mut text).is_err() {
                return Err(err("decimal"));
            }
        }
        if matches!(self.peek_char(0), Some('j' | 'J')) {
            self.pos += 1;
            self.verify_end_of_number("imaginary", line)?;
            return Ok(Tk::Imag);
        }
        self.finish_number(&int_part, &text, is_float, line)
    }

    fn finish_number(
        &self,
        int_part: &str,
        text: &str,
        is_float: bool,
        line: u32,
    ) -> Result<Tk, SynErr> {
        if !is_float
            && int_part.len() > 1
            && int_part.starts_with('0')
            && int_part.chars().any(|d| d != '0')
        {
            return Err(SynErr::new(
                "leading zeros in decimal integer literals are not permitted; use an 0o prefix for octal integers",
                line,
            ));
        }
        self.verify_end_of_number("decimal", line)?;
        if is_float {
            // Rust's parser wants digits around the point; Python accepts `1.` and `.5`.
            let mut norm = text.replace(".e", ".0e");
            if norm.starts_with('.') {
                norm.insert(0, '0');
            }
            if norm.ends_with('.') {
                norm.push('0');
            }
            return Ok(Tk::Float(norm.parse::<f64>().unwrap_or(f64::INFINITY)));
        }
        Ok(Tk::Int(int_part.parse::<i128>().ok()))
    }

    fn lex_string(&mut self, prefix: &str) -> Result<Tk, SynErr> {
        let lower = prefix.to_ascii_lowercase();
        let raw = lower.contains('r');
        let kind = if lower.contains('b') {
            StrKind::Bytes
        } else if lower.contains('f') {
            StrKind::Format
        } else {
            StrKind::Text
        };
        let quote = self.peek_char(0).unwrap_or('\'');
        let triple = self.peek_char(1) == Some(quote) && self.peek_char(2) == Some(quote);
        let start_line = self.line;
        self.pos += if triple { 3 } else { 1 };
        let mut body = String::new();
        let mut last_was_newline = false;
        loop {
            let Some(c) = self.peek_char(0) else {
                let detected = if last_was_newline {
                    self.line - 1
                } else {
                    self.line
                };
                let what = if triple {
                    "unterminated triple-quoted string literal"
                } else {
                    "unterminated string literal"
                };
                return Err(SynErr::new(
                    format!("{what} (detected at line {detected})"),
                    start_line,
                ));
            };
            last_was_newline = false;
            match c {
                '\n' | '\r' if !triple => {
                    return Err(SynErr::new(
                        format!(
                            "unterminated string literal (detected at line {})",
                            self.line
                        ),
                        start_line,
                    ));
                }
                '\n' | '\r' => {
                    self.eat_newline();
                    self.line += 1;
                    body.push('\n');
                    last_was_newline = true;
                }
                '\\' => {
                    self.pos += 1;
                    body.push('\\');
                    if self.eat_newline() {
                        self.line += 1;
                        body.push('\n');
                        last_was_newline = true;
                    } else if let Some(next) = self.peek_char(0) {
                        body.push(next);
                        self.pos += 1;
                    }
                }
                c if c == quote => {
                    if !triple {
                        self.pos += 1;
                        break;
                    }
                    if self.peek_char(1) == Some(quote) && self.peek_char(2) == Some(quote) {
                        self.pos += 3;
                        break;
                    }
                    body.push(c);
                    self.pos += 1;
                }
                c => {
                    body.push(c);
                    self.pos += 1;
                }
            }
        }
        let mut tok = StrTok {
            kind,
            value: String::new(),
            error: None,
            surrogate: false,
        };
        match kind {
            StrKind::Format => tok.error = check_fstring(&body).err(),
            StrKind::Bytes => {
                if !body.is_ascii() {
                    tok.error = Some("bytes can only contain ASCII literal characters".into());
                } else if !raw {
                    tok.error = check_bytes_escapes(&body).err();
                }
            }
            StrKind::Text if raw => tok.value = body,
            StrKind::Text => match decode_escapes(&body) {
                Ok((value, surrogate)) => {
                    tok.value = value;
                    tok.surrogate = surrogate;
                }
                Err(e) => tok.error = Some(e),
            },
        }
        Ok(Tk::Str(tok))
    }
}

/// Decode the escapes of a non-raw str literal body. Returns the text and whether a surrogate
/// code point was requested (dropped from the text).
fn decode_escapes(body: &str) -> Result<(String, bool), String> {
    let chars: Vec<char> = body.chars().collect();
    let mut out = String::with_capacity(body.len());
    let mut surrogate = false;
    let mut i = 0;
    // CPython decodes a buffer where each non-ASCII character is spelled `\Uxxxxxxxx`; error
    // positions count in that buffer.
    let mut buf_pos = 0usize;
    let width = |c: char| if c.is_ascii() { 1 } else { 10 };
    while i < chars.len() {
        let c = chars[i];
        if c != '\\' {
            out.push(c);
            buf_pos += width(c);
            i += 1;
            continue;
        }
        let start = buf_pos;
        let Some(&e) = chars.get(i + 1) else {
            return Err(format!(
                "(unicode error) 'unicodeescape' codec can't decode byte 0x5c in position {start}: \\ at end of string"
            ));
        };
        i += 2;
        buf_pos += 1 + width(e);
        let simple = match e {
            '\n' => Some(None),
            '\\' => Some(Some('\\')),
            '\'' => Some(Some('\'')),
            '"' => Some(Some('"')),
            'a' => Some(Some('\x07')),
            'b' => Some(Some('\x08')),
            'f' => Some(Some('\x0c')),
            'n' => Some(Some('\n')),
            'r' => Some(Some('\r')),
            't' => Some(Some('\t')),
            'v' => Some(Some('\x0b')),
            _ => None,
        };
        if let Some(ch) = simple {
            out.extend(ch);
            continue;
        }
        match e {
            '0'..='7' => {
                let mut v = e.to_digit(8).unwrap_or(0);
                for _ in 0..2 {
                    match chars.get(i).and_then(|d| d.to_digit(8)) {
                        Some(d) => {
                            v = v * 8 + d;
                            i += 1;
                            buf_pos += 1;
                        }
                        None => break,
                    }
                }
                out.extend(char::from_u32(v));
            }
            'x' | 'u' | 'U' => {
                let (n, what) = match e {
                    'x' => (2, "truncated \\xXX escape"),
                    'u' => (4, "truncated \\uXXXX escape"),
                    _ => (8, "truncated \\UXXXXXXXX escape"),
                };
                let mut v: u32 = 0;
                let mut got = 0;
                while got < n {
                    match chars.get(i).and_then(|d| d.to_digit(16)) {
                        Some(d) => {
                            v = v * 16 + d;
                            i += 1;
                            got += 1;
                        }
                        None => break,
                    }
                }
                buf_pos += got;
                let end = start + 1 + got;
                if got < n {
                    return Err(format!(
                        "(unicode error) 'unicodeescape' codec can't decode bytes in position {start}-{end}: {what}"
                    ));
                }
                if v > 0x10ffff {
                    return Err(format!(
                        "(unicode error) 'unicodeescape' codec can't decode bytes in position {start}-{end}: illegal Unicode character"
                    ));
                }
                match char::from_u32(v) {
                    Some(ch) => out.push(ch),
                    None => surrogate = true,
                }
            }
            'N' => {
                // No Unicode name database here: every \N escape is reported as unknown.
                let close = if chars.get(i) == Some(&'{') {
                    chars[i..].iter().position(|c| *c == '}')
                } else {
                    None
                };
                return Err(match close {
                    Some(off) => format!(
                        "(unicode error) 'unicodeescape' codec can't decode bytes in position {start}-{}: unknown Unicode character name",
                        start + 1 + off
                    ),
                    None => format!(
                        "(unicode error) 'unicodeescape' codec can't decode bytes in position {start}-{}: malformed \\N character escape",
                        start + 1
                    ),
                });
            }
            other => {
                // Unknown escapes keep the backslash (a DeprecationWarning in Python).
                out.push('\\');
                out.push(other);
            }
        }
    }
    Ok((out, surrogate))
}

fn check_bytes_escapes(body: &str) -> Result<(), String> {
    let chars: Vec<char> = body.chars().collect();
    let mut i = 0;
    while i < chars.len() {
        if chars[i] == '\\' {
            if chars.get(i + 1) == Some(&'x')
                && !(2..4).all(|k| chars.get(i + k).is_some_and(|d| d.is_ascii_hexdigit()))
            {
                return Err(format!("(value error) invalid \\x escape at position {i}"));
            }
            i += 2;
        } else {
            i += 1;
        }
    }
    Ok(())
}

/// The brace-level checks CPython 3.11 applies to an f-string body; the expressions inside
/// are not parsed (any well-formed f-string is a `JoinedStr`, which literal_eval rejects).
fn check_fstring(body: &str) -> Result<(), String> {
    let chars: Vec<char> = body.chars().collect();
    let mut i = 0;
    while i < chars.len() {
        match chars[i] {
            '{' if chars.get(i + 1) == Some(&'{') => i += 2,
            '}' if chars.get(i + 1) == Some(&'}') => i += 2,
            '}' => return Err("f-string: single '}' is not allowed".into()),
            '{' => {
                let mut depth = 0usize;
                let mut j = i + 1;
                let mut expr_end = None;
                while j < chars.len() {
                    match chars[j] {
                        '(' | '[' | '{' => depth += 1,
                        ')' | ']' => depth = depth.saturating_sub(1),
                        '}' if depth > 0 => depth -= 1,
                        '}' => break,
                        '!' | ':' | '=' if depth == 0 && expr_end.is_none() => expr_end = Some(j),
                        _ => {}
                    }
                    j += 1;
                }
                if j >= chars.len() {
                    return Err("f-string: expecting '}'".into());
                }
                let expr: String = chars[i + 1..expr_end.unwrap_or(j)].iter().collect();
                if expr.trim().is_empty() {
                    return Err("f-string: empty expression not allowed".into());
                }
                i = j + 1;
            }
            _ => i += 1,
        }
    }
    Ok(())
}

// ---------------------------------------------------------------------------------------------
// Syntax tree (only what literal_eval's converter distinguishes)

#[derive(Debug, Clone)]
struct Node {
    line: u32,
    kind: Kind,
}

#[derive(Debug, Clone)]
enum Kind {
    Const(Const),
    Name(String),
    Tuple(Vec<Node>),
    List(Vec<Node>),
    Set(Vec<Node>),
    /// `None` key = a `**mapping` entry.
    Dict(Vec<(Option<Node>, Node)>),
    /// `empty_set` marks `set()`, the one call literal_eval accepts.
    Call {
        empty_set: bool,
    },
    BinOp {
        op: BinOp,
        left: Box<Node>,
        right: Box<Node>,
    },
    UnaryOp {
        op: UnOp,
        operand: Box<Node>,
    },
    /// Any other expression; the payload is its `ast` class name.
    Other(&'static str),
}

#[derive(Debug, Clone, Copy, PartialEq)]
enum BinOp {
    Add,
    Sub,
    Other,
}

#[derive(Debug, Clone, Copy, PartialEq)]
enum UnOp {
    Plus,
    Minus,
    Other,
}

#[derive(Debug, Clone)]
enum Const {
    Str(String),
    Bytes,
    Int(Option<i128>),
    Float(f64),
    Complex,
    Bool(bool),
    None,
    Ellipsis,
    /// A str with a surrogate escape: Python accepts it, JSON cannot hold it.
    Surrogate,
}

impl Node {
    fn new(line: u32, kind: Kind) -> Self {
        Node { line, kind }
    }

    fn class_name(&self) -> &'static str {
        match &self.kind {
            Kind::Const(_) => "Constant",
            Kind::Name(_) => "Name",
            Kind::Tuple(_) => "Tuple",
            Kind::List(_) => "List",
            Kind::Set(_) => "Set",
            Kind::Dict(_) => "Dict",
            Kind::Call { .. } => "Call",
            Kind::BinOp { .. } => "BinOp",
            Kind::UnaryOp { .. } => "UnaryOp",
            Kind::Other(name) => name,
        }
    }

    /// CPython's `_PyPegen_get_expr_name`, used by "cannot assign to %s here".
    fn expr_name(&self) -> &'static str {
        match &self.kind {
            Kind::Const(Const::None) => "None",
            Kind::Const(Const::Bool(true)) => "True",
            Kind::Const(Const::Bool(false)) => "False",
            Kind::Const(Const::Ellipsis) => "ellipsis",
            Kind::Const(_) => "literal",
            Kind::Name(_) => "name",
            Kind::Tuple(_) => "tuple",
            Kind::List(_) => "list",
            Kind::Set(_) => "set display",
            Kind::Dict(_) => "dict literal",
            Kind::Call { .. } => "function call",
            Kind::BinOp { .. } | Kind::UnaryOp { .. } => "expression",
            Kind::Other(name) => match *name {
                "Attribute" => "attribute",
                "Subscript" => "subscript",
                "Starred" => "starred",
                "Lambda" => "lambda",
                "GeneratorExp" => "generator expression",
                "Yield" | "YieldFrom" => "yield expression",
                "Await" => "await expression",
                "ListComp" => "list comprehension",
                "SetComp" => "set comprehension",
                "DictComp" => "dict comprehension",
                "JoinedStr" => "f-string expression",
                "Compare" => "comparison",
                "IfExp" => "conditional expression",
                "NamedExpr" => "named expression",
                _ => "expression",
            },
        }
    }
}

// ---------------------------------------------------------------------------------------------
// Parser

enum PErr {
    /// Tokenizer error: reported as is.
    Final(SynErr),
    /// Specialised message of one of CPython's second-pass `invalid_*` rules.
    Specific(SynErr),
    /// Error raised while building a string constant (bad escape, bytes mixing, f-string):
    /// an AST action, so raised even where the `invalid_*` rules are off.
    Action(SynErr),
    /// Plain `invalid syntax`, located at the furthest token read.
    Generic,
    /// Nesting beyond what CPython's AST construction survives.
    TooDeep,
}

type PResult<T> = Result<T, PErr>;

/// First token of a `named_expression`, as `invalid_named_expression` looks at it.
#[derive(Clone, Copy)]
enum First {
    Singleton,
    Bracket,
    Paren,
    Other,
}

/// Recursive descent over CPython 3.11's expression grammar. Tokens are read lazily and kept,
/// so alternatives can backtrack like the PEG parser (which decides which errors surface).
struct Parser {
    lx: Lexer,
    toks: Vec<Tok>,
    mark: usize,
    /// Line and kind of the furthest token read (CPython reports generic errors there).
    last_line: u32,
    last_was_indent: bool,
    /// Set while test-parsing the second expression of the "forgot a comma" rule, where
    /// CPython runs without its specialised error rules.
    probing: bool,
    /// Current AST nesting (unary/binary chains), see [`MAX_AST_DEPTH`].
    depth: usize,
    /// Inside the `invalid_legacy_expression` probe, which is not nested again: that keeps
    /// `a b c d ...` linear instead of quadratic.
    in_legacy_probe: bool,
}

impl Parser {
    fn new(src: &str) -> Self {
        let lx = Lexer::new(src);
        let last_line = lx.end_line();
        Parser {
            lx,
            toks: Vec::new(),
            mark: 0,
            last_line,
            last_was_indent: false,
            probing: false,
            depth: 0,
            in_legacy_probe: false,
        }
    }

    fn peek_at(&mut self, n: usize) -> PResult<&Tok> {
        while self.toks.len() <= self.mark + n {
            let tok = self.lx.next_token().map_err(PErr::Final)?;
            self.last_line = tok.line;
            self.last_was_indent = tok.tk == Tk::Indent;
            self.toks.push(tok);
        }
        self.toks.get(self.mark + n).ok_or(PErr::Generic)
    }

    fn peek(&mut self) -> PResult<&Tok> {
        self.peek_at(0)
    }

    /// Consume the next token; returns its line.
    fn bump(&mut self) -> PResult<u32> {
        let line = self.peek()?.line;
        self.mark += 1;
        Ok(line)
    }

    fn at_op(&mut self, op: &str) -> PResult<bool> {
        Ok(matches!(&self.peek()?.tk, Tk::Op(o) if *o == op))
    }

    fn at_kw(&mut self, kw: &str) -> PResult<bool> {
        Ok(matches!(&self.peek()?.tk, Tk::Name(n) if n == kw))
    }

    fn at_any_op(&mut self, ops: &[&str]) -> PResult<bool> {
        Ok(matches!(&self.peek()?.tk, Tk::Op(o) if ops.contains(o)))
    }

    fn at_name(&mut self) -> PResult<bool> {
        Ok(matches!(&self.peek()?.tk, Tk::Name(n) if !is_keyword(n)))
    }

    fn expect_op(&mut self, op: &str) -> PResult<u32> {
        if self.at_op(op)? {
            self.bump()
        } else {
            Err(PErr::Generic)
        }
    }

    /// Whether the next token can begin an expression.
    fn at_expression_start(&mut self) -> PResult<bool> {
        Ok(match &self.peek()?.tk {
            Tk::Name(n) => {
                !is_keyword(n)
                    || matches!(
                        n.as_str(),
                        "True" | "False" | "None" | "not" | "lambda" | "await"
                    )
            }
            Tk::Int(_) | Tk::Float(_) | Tk::Imag | Tk::Str(_) => true,
            Tk::Op(o) => matches!(*o, "(" | "[" | "{" | "-" | "+" | "~" | "..."),
            Tk::Newline | Tk::Indent | Tk::End => false,
        })
    }

    fn deepen(&mut self) -> PResult<()> {
        self.depth += 1;
        if self.depth > MAX_AST_DEPTH {
            Err(PErr::TooDeep)
        } else {
            Ok(())
        }
    }

    /// An `invalid_*` rule's message (those rules are off while probing).
    fn specific<T>(&self, msg: impl Into<String>, line: u32) -> PResult<T> {
        if self.probing {
            Err(PErr::Generic)
        } else {
            Err(PErr::Specific(SynErr::new(msg, line)))
        }
    }

    /// Run `f` as a lookahead probe; the position and the generic-error location are restored.
    fn probe<T>(
        &mut self,
        with_invalid_rules: bool,
        f: impl FnOnce(&mut Self) -> PResult<T>,
    ) -> PResult<T> {
        let (mark, line, indent, probing) = (
            self.mark,
            self.last_line,
            self.last_was_indent,
            self.probing,
        );
        self.probing = !with_invalid_rules;
        let result = f(self);
        self.probing = probing;
        self.mark = mark;
        // Generic errors keep pointing where the (first-pass) parse stopped.
        self.last_line = line;
        self.last_was_indent = indent;
        result
    }

    fn parse_eval(mut self) -> Result<Node, LiteralError> {
        let syntax =
            |e: SynErr| LiteralError::Invalid(format!("{} (<unknown>, line {})", e.msg, e.line));
        let err = match self.parse_eval_inner() {
            Ok(node) => return Ok(node),
            Err(PErr::TooDeep) => {
                return Err(LiteralError::Crash(
                    "maximum recursion depth exceeded during ast construction".into(),
                ));
            }
            Err(PErr::Final(e)) => return Err(syntax(e)),
            Err(PErr::Generic) if self.last_was_indent => {
                return Err(syntax(SynErr::new("unexpected indent", self.last_line)));
            }
            Err(PErr::Generic) => SynErr::new("invalid syntax", self.last_line),
            Err(PErr::Specific(e) | PErr::Action(e)) => e,
        };
        // Like CPython, tokenize the rest: a tokenizer error there wins, and so does an unclosed
        // bracket opened on an earlier line than the parser error.
        loop {
            match self.lx.next_token() {
                Ok(Tok { tk: Tk::End, .. }) => return Err(syntax(err)),
                Ok(_) => {}
                Err(e) if e.lazy || (e.unclosed && e.line >= err.line) => return Err(syntax(err)),
                Err(e) => return Err(syntax(e)),
            }
        }
    }

    fn parse_eval_inner(&mut self) -> PResult<Node> {
        let first = self.parse_expression()?;
        let node = if self.at_op(",")? {
            let line = first.line;
            let mut elts = vec![first];
            while self.at_op(",")? {
                self.bump()?;
                if !self.at_expression_start()? {
                    break;
                }
                elts.push(self.parse_expression()?);
            }
            Node::new(line, Kind::Tuple(elts))
        } else {
            first
        };
        while self.peek()?.tk == Tk::Newline {
            self.bump()?;
        }
        if self.peek()?.tk == Tk::End {
            Ok(node)
        } else {
            Err(PErr::Generic)
        }
    }

    fn parse_expression(&mut self) -> PResult<Node> {
        self.parse_expression_opts(true)
    }

    /// `expression`; `comma_hint` enables CPython's "Perhaps you forgot a comma?" rule (off
    /// for dictionary keys after the first pair, where 3.11 says "':' expected" instead).
    fn parse_expression_opts(&mut self, comma_hint: bool) -> PResult<Node> {
        if self.at_kw("lambda")? {
            return self.parse_lambda();
        }
        let a = self.parse_disjunction()?;
        if self.at_kw("if")? {
            let before_if = self.mark;
            self.bump()?;
            self.parse_disjunction()?;
            if self.at_kw("else")? {
                self.bump()?;
                let depth = self.depth;
                self.deepen()?;
                self.parse_expression()?;
                self.depth = depth;
                return Ok(Node::new(a.line, Kind::Other("IfExp")));
            }
            if self.probing {
                // expression_without_invalid falls back to the bare disjunction.
                self.mark = before_if;
                return Ok(a);
            }
            if self.at_op(":")? {
                return Err(PErr::Generic);
            }
            return self.specific("expected 'else' after 'if' expression", a.line);
        }
        if comma_hint {
            self.check_juxtaposition(&a)?;
        }
        Ok(a)
    }

    /// An expression directly followed by another one never parses. CPython's second pass
    /// then tries `invalid_expression` (inside brackets: "Perhaps you forgot a comma?") and,
    /// after a bare name, `invalid_legacy_expression` ("Missing parentheses in call to
    /// 'print'"). Both parse the second expression first, so tokenizer and string errors met
    /// there surface instead.
    fn check_juxtaposition(&mut self, a: &Node) -> PResult<()> {
        if self.probing || !self.at_expression_start()? {
            return Ok(());
        }
        let next = self.peek()?.clone();
        let name = match &a.kind {
            Kind::Name(n) => Some(n.clone()),
            _ => None,
        };
        let legacy = matches!(name.as_deref(), Some("print" | "exec"));
        let soft_keyword = matches!(name.as_deref(), Some("_" | "match" | "case"));
        if !(name.is_some() && (matches!(next.tk, Tk::Str(_)) || soft_keyword)) {
            match self.probe(false, Self::parse_expression) {
                Ok(_) if !legacy && next.level > 0 => {
                    return self.specific("invalid syntax. Perhaps you forgot a comma?", a.line);
                }
                Ok(_) | Err(PErr::Generic | PErr::Specific(_)) => {}
                Err(e) => return Err(e),
            }
        }
        if let Some(name) = name
            && !self.in_legacy_probe
        {
            self.in_legacy_probe = true;
            let probe = self.probe(true, Self::parse_star_expressions);
            self.in_legacy_probe = false;
            match probe {
                Ok(_) if legacy => {
                    return self.specific(
                        format!(
                            "Missing parentheses in call to '{name}'. Did you mean {name}(...)?"
                        ),
                        a.line,
                    );
                }
                Ok(_) | Err(PErr::Generic) => {}
                Err(e) => return Err(e),
            }
        }
        // Neither rule fired: the enclosing rule fails on the next token by itself.
        Ok(())
    }

    fn parse_star_expressions(&mut self) -> PResult<()> {
        loop {
            if self.at_op("*")? {
                self.bump()?;
                self.parse_bitor()?;
            } else {
                self.parse_expression()?;
            }
            if !self.at_op(",")? {
                return Ok(());
            }
            self.bump()?;
            if !(self.at_expression_start()? || self.at_op("*")?) {
                return Ok(());
            }
        }
    }

    fn parse_lambda(&mut self) -> PResult<Node> {
        let kw = self.bump()?;
        loop {
            let default = match &self.peek()?.tk {
                Tk::Op(":") => break,
                Tk::Name(n) if !is_keyword(n) => false,
                Tk::Op("," | "*" | "**" | "/") => false,
                Tk::Op("=") => true,
                _ => return Err(PErr::Generic),
            };
            self.bump()?;
            if default {
                self.parse_expression()?;
            }
        }
        self.bump()?;
        let depth = self.depth;
        self.deepen()?;
        self.parse_expression()?;
        self.depth = depth;
        Ok(Node::new(kw, Kind::Other("Lambda")))
    }

    fn parse_named_expression(&mut self) -> PResult<Node> {
        if self.at_name()? && matches!(self.peek_at(1)?.tk, Tk::Op(":=")) {
            let name = self.bump()?;
            self.bump()?;
            self.parse_expression()?;
            return Ok(Node::new(name, Kind::Other("NamedExpr")));
        }
        let first = match &self.peek()?.tk {
            Tk::Name(n) if matches!(n.as_str(), "True" | "False" | "None") => First::Singleton,
            Tk::Op("[") => First::Bracket,
            Tk::Op("(") => First::Paren,
            _ => First::Other,
        };
        let e = self.parse_expression()?;
        if self.probing {
            return Ok(e);
        }
        if self.at_op(":=")? {
            // invalid_named_expression: only a name can be assigned to.
            self.bump()?;
            return match self.parse_expression() {
                Ok(_) => self.specific(
                    format!("cannot use assignment expressions with {}", e.expr_name()),
                    e.line,
                ),
                Err(PErr::Generic) => Err(PErr::Generic),
                Err(err) => Err(err),
            };
        }
        if self.at_op("=")? {
            return self.invalid_assignment(&e, first);
        }
        Ok(e)
    }

    /// CPython's `invalid_named_expression` for `=`: `[a = 1]` and friends.
    fn invalid_assignment(&mut self, a: &Node, first: First) -> PResult<Node> {
        // `!(list|tuple|genexp|'True'|'None'|'False')` before the target.
        let excluded = match first {
            First::Singleton => true,
            First::Bracket => !matches!(a.kind, Kind::Other("ListComp")),
            First::Paren => matches!(a.kind, Kind::Tuple(_) | Kind::Other("GeneratorExp")),
            First::Other => false,
        };
        let assignable_level = !matches!(
            a.kind,
            Kind::Other("BoolOp" | "Compare" | "IfExp" | "Lambda" | "NamedExpr")
                | Kind::UnaryOp {
                    op: UnOp::Other,
                    ..
                }
        );
        let message = match &a.kind {
            Kind::Name(_) => {
                Some("invalid syntax. Maybe you meant '==' or ':=' instead of '='?".to_string())
            }
            _ if !excluded && assignable_level => Some(format!(
                "cannot assign to {} here. Maybe you meant '==' instead of '='?",
                a.expr_name()
            )),
            _ => None,
        };
        let rhs_ok = self.probe(false, |p| {
            p.bump()?; // '='
            p.parse_bitor()?;
            Ok(!p.at_any_op(&["=", ":="])?)
        });
        match (message, rhs_ok) {
            (Some(msg), Ok(true)) => self.specific(msg, a.line),
            (_, Err(e @ (PErr::Final(_) | PErr::Action(_) | PErr::TooDeep))) => Err(e),
            _ => Err(PErr::Generic),
        }
    }

    fn parse_star_named_expression(&mut self) -> PResult<Node> {
        if self.at_op("*")? {
            let star = self.bump()?;
            self.parse_bitor()?;
            return Ok(Node::new(star, Kind::Other("Starred")));
        }
        self.parse_named_expression()
    }

    /// `left (op right)*` where a failing right operand backtracks to before `op`, as a PEG
    /// alternative would.
    fn parse_chain(
        &mut self,
        ops: &[&str],
        operand: fn(&mut Self) -> PResult<Node>,
    ) -> PResult<Node> {
        let first = operand(self)?;
        let mut chained = false;
        loop {
            let before = self.mark;
            let matched = matches!(&self.peek()?.tk, Tk::Name(n) if ops.contains(&n.as_str()));
            if !matched {
                break;
            }
            self.bump()?;
            match operand(self) {
                Ok(_) => chained = true,
                Err(PErr::Generic) => {
                    self.mark = before;
                    break;
                }
                Err(e) => return Err(e),
            }
        }
        Ok(if chained {
            Node::new(first.line, Kind::Other("BoolOp"))
        } else {
            first
        })
    }

    fn parse_disjunction(&mut self) -> PResult<Node> {
        self.parse_chain(&["or"], Self::parse_conjunction)
    }

    fn parse_conjunction(&mut self) -> PResult<Node> {
        self.parse_chain(&["and"], Self::parse_inversion)
    }

    fn parse_inversion(&mut self) -> PResult<Node> {
        // Iterative, so a long `not not ...` chain cannot exhaust the stack.
        let depth = self.depth;
        let mut lines = Vec::new();
        while self.at_kw("not")? {
            lines.push(self.bump()?);
            self.deepen()?;
        }
        let mut node = self.parse_comparison()?;
        for line in lines.into_iter().rev() {
            node = Node::new(
                line,
                Kind::UnaryOp {
                    op: UnOp::Other,
                    operand: Box::new(node),
                },
            );
        }
        self.depth = depth;
        Ok(node)
    }

    fn parse_comparison(&mut self) -> PResult<Node> {
        let left = self.parse_bitor()?;
        let mut compared = false;
        loop {
            let before = self.mark;
            let second_is = |p: &mut Self, word: &str| -> PResult<bool> {
                Ok(matches!(&p.peek_at(1)?.tk, Tk::Name(m) if m == word))
            };
            let width = match &self.peek()?.tk {
                Tk::Op("==" | "!=" | "<" | ">" | "<=" | ">=") => 1,
                Tk::Name(n) if n == "in" => 1,
                Tk::Name(n) if n == "is" => {
                    if second_is(self, "not")? {
                        2
                    } else {
                        1
                    }
                }
                Tk::Name(n) if n == "not" => {
                    if second_is(self, "in")? {
                        2
                    } else {
                        break;
                    }
                }
                _ => break,
            };
            for _ in 0..width {
                self.bump()?;
            }
            match self.parse_bitor() {
                Ok(_) => compared = true,
                Err(PErr::Generic) => {
                    self.mark = before;
                    break;
                }
                Err(e) => return Err(e),
            }
        }
        Ok(if compared {
            Node::new(left.line, Kind::Other("Compare"))
        } else {
            left
        })
    }

    /// `bitwise_or` down to `term` by precedence climbing (one stack frame per operand).
    fn parse_bitor(&mut self) -> PResult<Node> {
        self.parse_binary(1)
    }

    fn parse_binary(&mut self, min_prec: u8) -> PResult<Node> {
        let depth = self.depth;
        let mut left = self.parse_factor()?;
        loop {
            let (prec, op) = match &self.peek()?.tk {
                Tk::Op("|") => (1, BinOp::Other),
                Tk::Op("^") => (2, BinOp::Other),
                Tk::Op("&") => (3, BinOp::Other),
                Tk::Op("<<" | ">>") => (4, BinOp::Other),
                Tk::Op("+") => (5, BinOp::Add),
                Tk::Op("-") => (5, BinOp::Sub),
                Tk::Op("*" | "/" | "//" | "%" | "@") => (6, BinOp::Other),
                _ => break,
            };
            if prec < min_prec {
                break;
            }
            let before = self.mark;
            self.bump()?;
            let right = match self.parse_binary(prec + 1) {
                Ok(right) => right,
                Err(PErr::Generic) => {
                    self.mark = before;
                    break;
                }
                Err(e) => return Err(e),
            };
            self.deepen()?;
            left = Node::new(
                left.line,
                Kind::BinOp {
                    op,
                    left: Box::new(left),
                    right: Box::new(right),
                },
            );
        }
        self.depth = depth;
        Ok(left)
    }

    fn parse_factor(&mut self) -> PResult<Node> {
        // Iterative, so a long `---1` chain cannot exhaust the stack.
        let depth = self.depth;
        let mut prefixes = Vec::new();
        loop {
            let op = match &self.peek()?.tk {
                Tk::Op("+") => UnOp::Plus,
                Tk::Op("-") => UnOp::Minus,
                Tk::Op("~") => UnOp::Other,
                _ => break,
            };
            prefixes.push((op, self.bump()?));
            self.deepen()?;
        }
        let mut node = self.parse_power()?;
        for (op, line) in prefixes.into_iter().rev() {
            node = Node::new(
                line,
                Kind::UnaryOp {
                    op,
                    operand: Box::new(node),
                },
            );
        }
        self.depth = depth;
        Ok(node)
    }

    fn parse_power(&mut self) -> PResult<Node> {
        let base = if self.at_kw("await")? {
            let kw = self.bump()?;
            self.parse_primary()?;
            Node::new(kw, Kind::Other("Await"))
        } else {
            self.parse_primary()?
        };
        if self.at_op("**")? {
            let before = self.mark;
            self.bump()?;
            self.deepen()?;
            return match self.parse_factor() {
                Ok(exp) => Ok(Node::new(
                    base.line,
                    Kind::BinOp {
                        op: BinOp::Other,
                        left: Box::new(base),
                        right: Box::new(exp),
                    },
                )),
                Err(PErr::Generic) => {
                    self.mark = before;
                    Ok(base)
                }
                Err(e) => Err(e),
            };
        }
        Ok(base)
    }

    fn parse_primary(&mut self) -> PResult<Node> {
        let mut node = self.parse_atom()?;
        loop {
            let before = self.mark;
            let next = if self.at_op(".")? {
                self.bump()?;
                if self.at_name()? {
                    self.bump()?;
                    Ok(Kind::Other("Attribute"))
                } else {
                    Err(PErr::Generic)
                }
            } else if self.at_op("(")? {
                self.bump()?;
                self.parse_call_args().map(|no_args| Kind::Call {
                    empty_set: no_args && matches!(&node.kind, Kind::Name(n) if n == "set"),
                })
            } else if self.at_op("[")? {
                self.bump()?;
                self.parse_slices().map(|()| Kind::Other("Subscript"))
            } else {
                return Ok(node);
            };
            match next {
                Ok(kind) => node = Node::new(node.line, kind),
                Err(PErr::Generic) => {
                    self.mark = before;
                    return Ok(node);
                }
                Err(e) => return Err(e),
            }
        }
    }

    /// Arguments after `(`, through `)`; returns whether there were none.
    fn parse_call_args(&mut self) -> PResult<bool> {
        if self.at_op(")")? {
            self.bump()?;
            return Ok(true);
        }
        loop {
            if self.at_any_op(&["*", "**"])? {
                self.bump()?;
                self.parse_expression()?;
            } else if self.at_name()? && matches!(self.peek_at(1)?.tk, Tk::Op("=")) {
                self.bump()?;
                self.bump()?;
                self.parse_expression()?;
            } else if self.at_name()? && matches!(self.peek_at(1)?.tk, Tk::Op(":=")) {
                self.parse_named_expression()?;
            } else {
                let e = self.parse_expression()?;
                if self.at_kw("for")? || self.at_kw("async")? {
                    self.parse_comprehension()?;
                } else if self.at_op("=")? {
                    return self.specific(
                        "expression cannot contain assignment, perhaps you meant \"==\"?",
                        e.line,
                    );
                }
            }
            if self.at_op(",")? {
                self.bump()?;
                if self.at_op(")")? {
                    self.bump()?;
                    return Ok(false);
                }
                continue;
            }
            self.expect_op(")")?;
            return Ok(false);
        }
    }

    fn parse_slices(&mut self) -> PResult<()> {
        loop {
            if self.at_op("*")? {
                self.parse_star_named_expression()?;
            } else {
                if !self.at_op(":")? {
                    self.parse_named_expression()?;
                }
                if self.at_op(":")? {
                    self.bump()?;
                    if self.at_expression_start()? {
                        self.parse_expression()?;
                    }
                    if self.at_op(":")? {
                        self.bump()?;
                        if self.at_expression_start()? {
                            self.parse_expression()?;
                        }
                    }
                }
            }
            if self.at_op(",")? {
                self.bump()?;
                if self.at_op("]")? {
                    self.bump()?;
                    return Ok(());
                }
                continue;
            }
            self.expect_op("]")?;
            return Ok(());
        }
    }

    /// `for ... in ... [if ...]` clauses after a comprehension element.
    fn parse_comprehension(&mut self) -> PResult<()> {
        loop {
            if self.at_kw("async")? {
                self.bump()?;
            }
            if !self.at_kw("for")? {
                return Err(PErr::Generic);
            }
            self.bump()?;
            loop {
                if self.at_op("*")? {
                    self.bump()?;
                }
                self.parse_bitor()?;
                if self.at_op(",")? {
                    self.bump()?;
                    if !self.at_kw("in")? {
                        continue;
                    }
                }
                break;
            }
            if !self.at_kw("in")? {
                return Err(PErr::Generic);
            }
            self.bump()?;
            self.parse_disjunction()?;
            while self.at_kw("if")? {
                self.bump()?;
                self.parse_disjunction()?;
            }
            if !(self.at_kw("for")? || self.at_kw("async")?) {
                return Ok(());
            }
        }
    }

    fn parse_atom(&mut self) -> PResult<Node> {
        let tok = self.peek()?;
        let line = tok.line;
        let kind = match &tok.tk {
            Tk::Str(_) => return self.parse_strings(),
            Tk::Op("(") => return self.parse_paren(),
            Tk::Op("[") => return self.parse_list(),
            Tk::Op("{") => return self.parse_brace(),
            Tk::Name(n) => match n.as_str() {
                "True" => Kind::Const(Const::Bool(true)),
                "False" => Kind::Const(Const::Bool(false)),
                "None" => Kind::Const(Const::None),
                kw if is_keyword(kw) => return Err(PErr::Generic),
                _ => Kind::Name(n.clone()),
            },
            Tk::Int(v) => Kind::Const(Const::Int(*v)),
            Tk::Float(f) => Kind::Const(Const::Float(*f)),
            Tk::Imag => Kind::Const(Const::Complex),
            Tk::Op("...") => Kind::Const(Const::Ellipsis),
            _ => return Err(PErr::Generic),
        };
        self.bump()?;
        Ok(Node::new(line, kind))
    }

    /// Adjacent string literals concatenate into one constant.
    fn parse_strings(&mut self) -> PResult<Node> {
        let mut parts = Vec::new();
        while let Tok {
            tk: Tk::Str(s),
            line,
            ..
        } = self.peek()?
        {
            parts.push((s.clone(), *line));
            self.mark += 1;
        }
        let line = parts.first().map_or(self.last_line, |p| p.1);
        let bytes_mode = parts.first().is_some_and(|p| p.0.kind == StrKind::Bytes);
        let mut text = String::new();
        let (mut format, mut surrogate) = (false, false);
        for (part, part_line) in &parts {
            if let Some(e) = &part.error {
                return Err(PErr::Action(SynErr::new(e.clone(), *part_line)));
            }
            if (part.kind == StrKind::Bytes) != bytes_mode {
                return Err(PErr::Action(SynErr::new(
                    "cannot mix bytes and nonbytes literals",
                    *part_line,
                )));
            }
            format |= part.kind == StrKind::Format;
            surrogate |= part.surrogate;
            text.push_str(&part.value);
        }
        let kind = if format {
            Kind::Other("JoinedStr")
        } else if bytes_mode {
            Kind::Const(Const::Bytes)
        } else if surrogate {
            Kind::Const(Const::Surrogate)
        } else {
            Kind::Const(Const::Str(text))
        };
        Ok(Node::new(line, kind))
    }

    fn parse_paren(&mut self) -> PResult<Node> {
        let open = self.bump()?;
        if self.at_op(")")? {
            self.bump()?;
            return Ok(Node::new(open, Kind::Tuple(Vec::new())));
        }
        if self.at_kw("yield")? {
            let kw = self.bump()?;
            let class = if self.at_kw("from")? {
                self.bump()?;
                self.parse_expression()?;
                "YieldFrom"
            } else {
                if self.at_expression_start()? || self.at_op("*")? {
                    self.parse_star_expressions()?;
                }
                "Yield"
            };
            self.expect_op(")")?;
            return Ok(Node::new(kw, Kind::Other(class)));
        }
        if self.at_op("**")? && !self.probing {
            // invalid_group: `(**x)`.
            let star = self.bump()?;
            self.parse_expression()?;
            if self.at_op(")")? {
                return self.specific("cannot use double starred expression here", star);
            }
            return Err(PErr::Generic);
        }
        let first = self.parse_star_named_expression()?;
        if self.at_kw("for")? || self.at_kw("async")? {
            self.parse_comprehension()?;
            self.expect_op(")")?;
            return Ok(Node::new(open, Kind::Other("GeneratorExp")));
        }
        if !self.at_op(",")? {
            self.expect_op(")")?;
            if matches!(first.kind, Kind::Other("Starred")) {
                return self.specific("cannot use starred expression here", first.line);
            }
            return Ok(first);
        }
        let mut elts = vec![first];
        while self.at_op(",")? {
            self.bump()?;
            if self.at_op(")")? {
                break;
            }
            elts.push(self.parse_star_named_expression()?);
        }
        self.expect_op(")")?;
        Ok(Node::new(open, Kind::Tuple(elts)))
    }

    fn parse_list(&mut self) -> PResult<Node> {
        let open = self.bump()?;
        if self.at_op("]")? {
            self.bump()?;
            return Ok(Node::new(open, Kind::List(Vec::new())));
        }
        let first = self.parse_star_named_expression()?;
        if self.at_kw("for")? || self.at_kw("async")? {
            self.parse_comprehension()?;
            self.expect_op("]")?;
            return Ok(Node::new(open, Kind::Other("ListComp")));
        }
        let mut elts = vec![first];
        while self.at_op(",")? {
            self.bump()?;
            if self.at_op("]")? {
                break;
            }
            elts.push(self.parse_star_named_expression()?);
        }
        self.expect_op("]")?;
        Ok(Node::new(open, Kind::List(elts)))
    }

    /// Value after a dictionary key's `:`.
    fn parse_dict_value(&mut self, colon: u32) -> PResult<Node> {
        if self.at_any_op(&["}", ","])? {
            return self.specific("expression expected after dictionary key and ':'", colon);
        }
        if self.at_op("*")? && !self.probing {
            let star = self.bump()?;
            self.parse_bitor()?;
            return self.specific(
                "cannot use a starred expression in a dictionary value",
                star,
            );
        }
        self.parse_expression()
    }

    fn parse_brace(&mut self) -> PResult<Node> {
        let open = self.bump()?;
        if self.at_op("}")? {
            self.bump()?;
            return Ok(Node::new(open, Kind::Dict(Vec::new())));
        }
        let mut items = Vec::new();
        if self.at_op("**")? {
            self.bump()?;
            items.push((None, self.parse_bitor()?));
        } else {
            let first = self.parse_star_named_expression()?;
            if self.at_op(":")? {
                if matches!(first.kind, Kind::Other("Starred")) {
                    return Err(PErr::Generic);
                }
                let colon = self.bump()?;
                let value = self.parse_dict_value(colon)?;
                if self.at_kw("for")? || self.at_kw("async")? {
                    self.parse_comprehension()?;
                    self.expect_op("}")?;
                    return Ok(Node::new(open, Kind::Other("DictComp")));
                }
                items.push((Some(first), value));
            } else if self.at_kw("for")? || self.at_kw("async")? {
                self.parse_comprehension()?;
                self.expect_op("}")?;
                return Ok(Node::new(open, Kind::Other("SetComp")));
            } else {
                let mut elts = vec![first];
                while self.at_op(",")? {
                    self.bump()?;
                    if self.at_op("}")? {
                        break;
                    }
                    elts.push(self.parse_star_named_expression()?);
                }
                self.expect_op("}")?;
                return Ok(Node::new(open, Kind::Set(elts)));
            }
        }
        loop {
            if self.at_op("}")? {
                self.bump()?;
                return Ok(Node::new(open, Kind::Dict(items)));
            }
            self.expect_op(",")?;
            if self.at_op("}")? {
                continue;
            }
            if self.at_op("**")? {
                self.bump()?;
                items.push((None, self.parse_bitor()?));
                continue;
            }
            let key = self.parse_expression_opts(false)?;
            if !self.at_op(":")? {
                return self.specific("':' expected after dictionary key", key.line);
            }
            let colon = self.bump()?;
            let value = self.parse_dict_value(colon)?;
            items.push((Some(key), value));
        }
    }
}

// ---------------------------------------------------------------------------------------------
// literal_eval's converter

/// A Python value literal_eval can produce.
#[derive(Debug, Clone)]
enum PyVal {
    Str(String),
    Bytes,
    Int(Option<i128>),
    Float(f64),
    Complex,
    Bool(bool),
    None,
    Ellipsis,
    Surrogate,
    Tuple(Vec<PyVal>),
    List(Vec<PyVal>),
    Set,
    Dict(Vec<(PyVal, PyVal)>),
}

impl PyVal {
    fn type_name(&self) -> &'static str {
        match self {
            PyVal::Str(_) | PyVal::Surrogate => "str",
            PyVal::Bytes => "bytes",
            PyVal::Int(_) => "int",
            PyVal::Float(_) => "float",
            PyVal::Complex => "complex",
            PyVal::Bool(_) => "bool",
            PyVal::None => "NoneType",
            PyVal::Ellipsis => "ellipsis",
            PyVal::Tuple(_) => "tuple",
            PyVal::List(_) => "list",
            PyVal::Set => "set",
            PyVal::Dict(_) => "dict",
        }
    }
}

/// Stands in for the heap address CPython prints in `<ast.Name object at 0x...>`.
const NODE_ADDRESS: &str = "0x7f3a5c1e2d40";

fn malformed(node: &Node) -> String {
    format!(
        "malformed node or string on line {}: <ast.{} object at {NODE_ADDRESS}>",
        node.line,
        node.class_name()
    )
}

fn convert(node: &Node) -> Result<PyVal, String> {
    match &node.kind {
        Kind::Const(c) => Ok(const_value(c)),
        Kind::Tuple(elts) => Ok(PyVal::Tuple(
            elts.iter().map(convert).collect::<Result<_, _>>()?,
        )),
        Kind::List(elts) => Ok(PyVal::List(
            elts.iter().map(convert).collect::<Result<_, _>>()?,
        )),
        Kind::Set(elts) => {
            for e in elts {
                convert(e)?;
            }
            Ok(PyVal::Set)
        }
        Kind::Call { empty_set: true } => Ok(PyVal::Set),
        Kind::Dict(items) => {
            let mut out = Vec::with_capacity(items.len());
            for (k, v) in items {
                // `**x` has no key node; literal_eval reports the missing node as `None`.
                let key = match k {
                    Some(k) => convert(k)?,
                    None => return Err("malformed node or string: None".into()),
                };
                out.push((key, convert(v)?));
            }
            Ok(PyVal::Dict(out))
        }
        Kind::BinOp {
            op: BinOp::Add | BinOp::Sub,
            left,
            right,
        } => {
            let l = convert_signed_num(left)?;
            let r = convert_num(right)?;
            if matches!(l, PyVal::Int(_) | PyVal::Float(_)) && matches!(r, PyVal::Complex) {
                return Ok(PyVal::Complex);
            }
            convert_signed_num(node)
        }
        _ => convert_signed_num(node),
    }
}

fn convert_signed_num(node: &Node) -> Result<PyVal, String> {
    match &node.kind {
        Kind::UnaryOp {
            op: op @ (UnOp::Plus | UnOp::Minus),
            operand,
        } => {
            let v = convert_num(operand)?;
            Ok(match (op, v) {
                (UnOp::Minus, PyVal::Int(i)) => PyVal::Int(i.and_then(i128::checked_neg)),
                (UnOp::Minus, PyVal::Float(f)) => PyVal::Float(-f),
                (_, v) => v,
            })
        }
        _ => convert_num(node),
    }
}

fn convert_num(node: &Node) -> Result<PyVal, String> {
    match &node.kind {
        Kind::Const(c @ (Const::Int(_) | Const::Float(_) | Const::Complex)) => Ok(const_value(c)),
        _ => Err(malformed(node)),
    }
}

fn const_value(c: &Const) -> PyVal {
    match c {
        Const::Str(s) => PyVal::Str(s.clone()),
        Const::Bytes => PyVal::Bytes,
        Const::Int(i) => PyVal::Int(*i),
        Const::Float(f) => PyVal::Float(*f),
        Const::Complex => PyVal::Complex,
        Const::Bool(b) => PyVal::Bool(*b),
        Const::None => PyVal::None,
        Const::Ellipsis => PyVal::Ellipsis,
        Const::Surrogate => PyVal::Surrogate,
    }
}

fn unsupported(v: &PyVal) -> String {
    format!("unsupported literal value of type '{}'", v.type_name())
}

fn to_json(v: PyVal) -> Result<Value, String> {
    Ok(match v {
        PyVal::Str(s) => Value::String(s),
        PyVal::Bool(b) => Value::Bool(b),
        PyVal::None => Value::Null,
        PyVal::Int(Some(i)) => {
            if let Ok(n) = i64::try_from(i) {
                Value::from(n)
            } else if let Ok(n) = u64::try_from(i) {
                Value::from(n)
            } else {
                return Err("unsupported literal value of type 'int' (out of range)".into());
            }
        }
        PyVal::Int(None) => {
            return Err("unsupported literal value of type 'int' (out of range)".into());
        }
        PyVal::Float(f) => match Number::from_f64(f) {
            Some(n) => Value::Number(n),
            None => return Err("unsupported literal value of type 'float' (not finite)".into()),
        },
        PyVal::Tuple(items) | PyVal::List(items) => {
            Value::Array(items.into_iter().map(to_json).collect::<Result<_, _>>()?)
        }
        PyVal::Dict(items) => {
            let mut map = Map::new();
            for (k, v) in items {
                let PyVal::Str(key) = k else {
                    return Err(format!(
                        "unsupported dictionary key of type '{}'",
                        k.type_name()
                    ));
                };
                // Python keeps a repeated key at its first position with the last value;
                // `Map::insert` (preserve_order) does the same.
                map.insert(key, to_json(v)?);
            }
            Value::Object(map)
        }
        other @ (PyVal::Bytes
        | PyVal::Complex
        | PyVal::Ellipsis
        | PyVal::Set
        | PyVal::Surrogate) => {
            return Err(unsupported(&other));
        }
    })
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]
    use super::*;
    use serde_json::json;

    fn ok(s: &str) -> Value {
        python_literal(s).unwrap_or_else(|e| panic!("{s:?}: {e}"))
    }

    fn err(s: &str) -> String {
        match python_literal(s) {
            Ok(v) => panic!("{s:?} parsed as {v}"),
            Err(e) => e,
        }
    }

    fn malformed_at(line: u32, class: &str) -> String {
        format!("malformed node or string on line {line}: <ast.{class} object at {NODE_ADDRESS}>")
    }

    #[test]
    fn client_values() {
        assert_eq!(ok("{'a': 'b'}"), json!({"a": "b"}));
        assert_eq!(ok("{\"a\": 1}"), json!({"a": 1}));
        assert_eq!(
            ok("[{'key': 'k', 'value': '', 'effect': 'NoSchedule'}]"),
            json!([{"key": "k", "value": "", "effect": "NoSchedule"}])
        );
        assert_eq!(ok("{}"), json!({}));
        assert_eq!(ok("[]"), json!([]));
    }

    #[test]
    fn scalars() {
        assert_eq!(ok("'x'"), json!("x"));
        assert_eq!(ok("\"x\""), json!("x"));
        assert_eq!(ok("True"), json!(true));
        assert_eq!(ok("False"), json!(false));
        assert_eq!(ok("None"), Value::Null);
        assert_eq!(ok("-1"), json!(-1));
        assert_eq!(ok("+1"), json!(1));
        assert_eq!(ok("- 1"), json!(-1));
        assert_eq!(ok("-(1)"), json!(-1));
        assert_eq!(ok("0x1F"), json!(31));
        assert_eq!(ok("0o17"), json!(15));
        assert_eq!(ok("0b101"), json!(5));
        assert_eq!(ok("1_000"), json!(1000));
        assert_eq!(ok("00"), json!(0));
        assert_eq!(ok("1e5"), json!(100000.0));
        assert_eq!(ok("1."), json!(1.0));
        assert_eq!(ok(".5"), json!(0.5));
        assert_eq!(ok("1.5e-7"), json!(1.5e-7));
        assert_eq!(ok("18446744073709551615"), json!(u64::MAX));
    }

    #[test]
    fn containers_and_nesting() {
        assert_eq!(
            ok("{'a': {'b': [1, (2, 3)]}}"),
            json!({"a": {"b": [1, [2, 3]]}})
        );
        assert_eq!(ok("(1,)"), json!([1]));
        assert_eq!(ok("()"), json!([]));
        assert_eq!(ok("(1)"), json!(1));
        assert_eq!(ok("1, 2"), json!([1, 2]));
        assert_eq!(ok("[1,]"), json!([1]));
        assert_eq!(ok("{'a':1,}"), json!({"a": 1}));
        assert_eq!(ok("{'a': 1, 'b': 2, 'a': 3}"), json!({"a": 3, "b": 2}));
        let v = ok("{'z': 1, 'a': 2, 'm': 3}");
        let keys: Vec<&String> = v.as_object().unwrap().keys().collect();
        assert_eq!(keys, ["z", "a", "m"]);
        assert_eq!(ok("[1,\n 2]"), json!([1, 2]));
        assert_eq!(
            ok("{'a': [None, True, -1.5]}"),
            json!({"a": [null, true, -1.5]})
        );
    }

    #[test]
    fn strings_and_escapes() {
        assert_eq!(ok(r"'\x41\u00e9\n\t\\\''"), json!("Aé\n\t\\'"));
        assert_eq!(ok(r"'\101\0'"), json!("A\u{0}"));
        assert_eq!(ok(r"'\777'"), json!("ǿ"));
        assert_eq!(ok(r"'\q'"), json!("\\q"));
        assert_eq!(ok(r"'\8'"), json!("\\8"));
        assert_eq!(ok(r"r'\n'"), json!("\\n"));
        assert_eq!(ok("u'x'"), json!("x"));
        assert_eq!(ok("'''a'''"), json!("a"));
        assert_eq!(ok("'''a\nb'''"), json!("a\nb"));
        assert_eq!(ok("'a' 'b'"), json!("ab"));
        assert_eq!(ok("\"it's\""), json!("it's"));
        assert_eq!(ok("'a\\\nb'"), json!("ab"));
        assert_eq!(ok(r"'\U0001F600'"), json!("😀"));
    }

    #[test]
    fn whitespace_and_comments() {
        assert_eq!(ok(" {'a': 1}"), json!({"a": 1}));
        assert_eq!(ok("\t1"), json!(1));
        assert_eq!(ok("1 "), json!(1));
        assert_eq!(ok("1\n"), json!(1));
        assert_eq!(ok("\n1"), json!(1));
        assert_eq!(ok("1\r\n"), json!(1));
        assert_eq!(ok("1 # c"), json!(1));
        assert_eq!(ok("1\n  \n"), json!(1));
        assert_eq!(ok("1 \\\n "), json!(1));
        assert_eq!(ok("[1 \\\n]"), json!([1]));
        assert_eq!(
            err("1 \\\n"),
            "unexpected EOF while parsing (<unknown>, line 1)"
        );
    }

    #[test]
    fn json_spellings_are_names() {
        assert_eq!(err("true"), malformed_at(1, "Name"));
        assert_eq!(err("null"), malformed_at(1, "Name"));
        assert_eq!(err("false"), malformed_at(1, "Name"));
        assert_eq!(err("{a: 1}"), malformed_at(1, "Name"));
        assert_eq!(err("{'a': true}"), malformed_at(1, "Name"));
        assert_eq!(err("[1,\nx]"), malformed_at(2, "Name"));
        assert_eq!(err("(\nx)"), malformed_at(2, "Name"));
    }

    #[test]
    fn malformed_nodes() {
        assert_eq!(err("1+2"), malformed_at(1, "BinOp"));
        assert_eq!(err("--1"), malformed_at(1, "UnaryOp"));
        assert_eq!(err("+-1"), malformed_at(1, "UnaryOp"));
        assert_eq!(err("-True"), malformed_at(1, "Constant"));
        assert_eq!(err("-'a'"), malformed_at(1, "Constant"));
        assert_eq!(err("-..."), malformed_at(1, "Constant"));
        assert_eq!(err("-x"), malformed_at(1, "Name"));
        assert_eq!(err("-1+x"), malformed_at(1, "Name"));
        assert_eq!(err("1-2j+x"), malformed_at(1, "BinOp"));
        assert_eq!(err("1+-2j"), malformed_at(1, "UnaryOp"));
        assert_eq!(err("not x"), malformed_at(1, "UnaryOp"));
        assert_eq!(err("x.y.z"), malformed_at(1, "Attribute"));
        assert_eq!(err("1 .real"), malformed_at(1, "Attribute"));
        assert_eq!(err("x()"), malformed_at(1, "Call"));
        assert_eq!(err("set(x)"), malformed_at(1, "Call"));
        assert_eq!(err("f(a=1)"), malformed_at(1, "Call"));
        assert_eq!(err("x[0]"), malformed_at(1, "Subscript"));
        assert_eq!(err("[1] [2]"), malformed_at(1, "Subscript"));
        assert_eq!(err("x < y"), malformed_at(1, "Compare"));
        assert_eq!(err("[1 not in 2]"), malformed_at(1, "Compare"));
        assert_eq!(err("x or y"), malformed_at(1, "BoolOp"));
        assert_eq!(err("a @ b"), malformed_at(1, "BinOp"));
        assert_eq!(err("[x for x in y]"), malformed_at(1, "ListComp"));
        assert_eq!(err("{1:2 for x in y}"), malformed_at(1, "DictComp"));
        assert_eq!(err("(x for x in y)"), malformed_at(1, "GeneratorExp"));
        assert_eq!(err("1 if x else 2"), malformed_at(1, "IfExp"));
        assert_eq!(err("lambda: 1"), malformed_at(1, "Lambda"));
        assert_eq!(err("(a := 1)"), malformed_at(1, "NamedExpr"));
        assert_eq!(err("await x"), malformed_at(1, "Await"));
        assert_eq!(err("(yield)"), malformed_at(1, "Yield"));
        assert_eq!(err("[*[]]"), malformed_at(1, "Starred"));
        assert_eq!(err("f'a'"), malformed_at(1, "JoinedStr"));
        assert_eq!(err("'a' f'b'"), malformed_at(1, "JoinedStr"));
        assert_eq!(err("é"), malformed_at(1, "Name"));
        assert_eq!(err("{**{}}"), "malformed node or string: None");
        assert_eq!(err("{'a': 1, **x}"), "malformed node or string: None");
        assert_eq!(err("{'a': y, **x}"), malformed_at(1, "Name"));
    }

    #[test]
    fn syntax_errors() {
        let cases = [
            ("", "invalid syntax (<unknown>, line 0)"),
            (" ", "invalid syntax (<unknown>, line 0)"),
            ("\n", "invalid syntax (<unknown>, line 1)"),
            ("\n\n", "invalid syntax (<unknown>, line 2)"),
            ("# c", "invalid syntax (<unknown>, line 1)"),
            ("{'a': 'b'} x", "invalid syntax (<unknown>, line 1)"),
            ("1\n2", "invalid syntax (<unknown>, line 2)"),
            ("1 +", "invalid syntax (<unknown>, line 1)"),
            ("1 # c\n+", "invalid syntax (<unknown>, line 2)"),
            ("{'a'", "'{' was never closed (<unknown>, line 1)"),
            ("[1,2", "'[' was never closed (<unknown>, line 1)"),
            ("[1,\n  x", "'[' was never closed (<unknown>, line 1)"),
            ("[1 2", "'[' was never closed (<unknown>, line 1)"),
            (
                "'abc",
                "unterminated string literal (detected at line 1) (<unknown>, line 1)",
            ),
            (
                "'a\nb'",
                "unterminated string literal (detected at line 1) (<unknown>, line 1)",
            ),
            (
                "'a\\\nb",
                "unterminated string literal (detected at line 2) (<unknown>, line 1)",
            ),
            (
                "\"\"\"abc",
                "unterminated triple-quoted string literal (detected at line 1) (<unknown>, line 1)",
            ),
            (
                "\"\"\"a\nb",
                "unterminated triple-quoted string literal (detected at line 2) (<unknown>, line 1)",
            ),
            (
                "\"\"\"a\n",
                "unterminated triple-quoted string literal (detected at line 1) (<unknown>, line 1)",
            ),
            (
                "[1,,2] 'abc",
                "unterminated string literal (detected at line 1) (<unknown>, line 1)",
            ),
            ("[1,,2", "invalid syntax (<unknown>, line 1)"),
            (
                "[1 2]",
                "invalid syntax. Perhaps you forgot a comma? (<unknown>, line 1)",
            ),
            (
                "[a b]",
                "invalid syntax. Perhaps you forgot a comma? (<unknown>, line 1)",
            ),
            ("[a \"x\"]", "invalid syntax (<unknown>, line 1)"),
            (
                "[1,\n2\n3]",
                "invalid syntax. Perhaps you forgot a comma? (<unknown>, line 2)",
            ),
            (
                "{1 1}",
                "invalid syntax. Perhaps you forgot a comma? (<unknown>, line 1)",
            ),
            (
                "{'a': 1 'b': 2",
                "invalid syntax. Perhaps you forgot a comma? (<unknown>, line 1)",
            ),
            ("{'a': 1 'b'", "'{' was never closed (<unknown>, line 1)"),
            ("[_ 1]", "invalid syntax (<unknown>, line 1)"),
            (
                "[print 1]",
                "Missing parentheses in call to 'print'. Did you mean print(...)? (<unknown>, line 1)",
            ),
            ("1 2", "invalid syntax (<unknown>, line 1)"),
            ("{'a': 'b' 'c': 'd'}", "invalid syntax (<unknown>, line 1)"),
            (
                "{'a': 1, 'b'}",
                "':' expected after dictionary key (<unknown>, line 1)",
            ),
            (
                "{1: 2, 3 4}",
                "':' expected after dictionary key (<unknown>, line 1)",
            ),
            (
                "{'a': 'b',\n 'c' 'd'}",
                "':' expected after dictionary key (<unknown>, line 2)",
            ),
            (
                "{'a':}",
                "expression expected after dictionary key and ':' (<unknown>, line 1)",
            ),
            (
                "{'a': 1, 'b':}",
                "expression expected after dictionary key and ':' (<unknown>, line 1)",
            ),
            (
                "1 if 2",
                "expected 'else' after 'if' expression (<unknown>, line 1)",
            ),
            (
                "[1, 2 if 3]",
                "expected 'else' after 'if' expression (<unknown>, line 1)",
            ),
            (
                "[a=1]",
                "invalid syntax. Maybe you meant '==' or ':=' instead of '='? (<unknown>, line 1)",
            ),
            (
                "{a=1}",
                "invalid syntax. Maybe you meant '==' or ':=' instead of '='? (<unknown>, line 1)",
            ),
            (
                "{'a'='b'}",
                "cannot assign to literal here. Maybe you meant '==' instead of '='? (<unknown>, line 1)",
            ),
            (
                "[a.b=1]",
                "cannot assign to attribute here. Maybe you meant '==' instead of '='? (<unknown>, line 1)",
            ),
            ("[None=1]", "invalid syntax (<unknown>, line 1)"),
            (
                "f(1=2)",
                "expression cannot contain assignment, perhaps you meant \"==\"? (<unknown>, line 1)",
            ),
            ("a=1", "invalid syntax (<unknown>, line 1)"),
            (
                "(]",
                "closing parenthesis ']' does not match opening parenthesis '(' (<unknown>, line 1)",
            ),
            (
                "[1,\n 2)",
                "closing parenthesis ')' does not match opening parenthesis '[' on line 1 (<unknown>, line 2)",
            ),
            (")", "unmatched ')' (<unknown>, line 1)"),
            ("1a", "invalid decimal literal (<unknown>, line 1)"),
            ("1_", "invalid decimal literal (<unknown>, line 1)"),
            ("1e", "invalid decimal literal (<unknown>, line 1)"),
            ("1.real", "invalid decimal literal (<unknown>, line 1)"),
            ("0x", "invalid hexadecimal literal (<unknown>, line 1)"),
            (
                "0o8",
                "invalid digit '8' in octal literal (<unknown>, line 1)",
            ),
            (
                "007",
                "leading zeros in decimal integer literals are not permitted; use an 0o prefix for octal integers (<unknown>, line 1)",
            ),
            ("€", "invalid character '€' (U+20AC) (<unknown>, line 1)"),
            ("²", "invalid character '²' (U+00B2) (<unknown>, line 1)"),
            ("$", "invalid syntax (<unknown>, line 1)"),
            (
                "1 \\ 2",
                "unexpected character after line continuation character (<unknown>, line 1)",
            ),
            ("\n  1", "unexpected indent (<unknown>, line 2)"),
            ("1\n\t", "unexpected indent (<unknown>, line 2)"),
            (
                "b'a' 'b'",
                "cannot mix bytes and nonbytes literals (<unknown>, line 1)",
            ),
            (
                "b'é'",
                "bytes can only contain ASCII literal characters (<unknown>, line 1)",
            ),
            ("f'{'", "f-string: expecting '}' (<unknown>, line 1)"),
            (
                "f'}'",
                "f-string: single '}' is not allowed (<unknown>, line 1)",
            ),
            (
                r"'\x4'",
                r"(unicode error) 'unicodeescape' codec can't decode bytes in position 0-2: truncated \xXX escape (<unknown>, line 1)",
            ),
            (
                r"'\u00'",
                r"(unicode error) 'unicodeescape' codec can't decode bytes in position 0-3: truncated \uXXXX escape (<unknown>, line 1)",
            ),
            ("*a", "invalid syntax (<unknown>, line 1)"),
            ("not", "invalid syntax (<unknown>, line 1)"),
            ("import", "invalid syntax (<unknown>, line 1)"),
            ("[1 for]", "invalid syntax (<unknown>, line 1)"),
        ];
        for (input, want) in cases {
            assert_eq!(err(input), want, "input {input:?}");
        }
        assert_eq!(err("1\0"), "source code string cannot contain null bytes");
    }

    #[test]
    fn valid_python_that_json_cannot_hold() {
        assert_eq!(err("{1, 2}"), "unsupported literal value of type 'set'");
        assert_eq!(err("set()"), "unsupported literal value of type 'set'");
        assert_eq!(err("b'x'"), "unsupported literal value of type 'bytes'");
        assert_eq!(err("1+2j"), "unsupported literal value of type 'complex'");
        assert_eq!(err("..."), "unsupported literal value of type 'ellipsis'");
        assert_eq!(err("{1: 'a'}"), "unsupported dictionary key of type 'int'");
        assert_eq!(
            err("1e999"),
            "unsupported literal value of type 'float' (not finite)"
        );
        assert_eq!(
            err("123456789012345678901234567890"),
            "unsupported literal value of type 'int' (out of range)"
        );
        // A malformed element is still reported before the unsupported container.
        assert_eq!(err("{1, x}"), malformed_at(1, "Name"));
    }
}
