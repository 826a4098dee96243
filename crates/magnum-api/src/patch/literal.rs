//! `ast.literal_eval` as Magnum's `apply_jsonpatch` applies it to the `str(dict)` values
//! Python clients send: strings, numbers, `True`/`False`/`None`, tuples, lists, dicts and one
//! sign on a number. The error ends up in the 400 body, so the errors clients plausibly make
//! keep CPython 3.11's wording (`invalid syntax (<unknown>, line N)`, `'[' was never closed`,
//! `unterminated string literal ...`, `malformed node or string on line N: <ast.Name ...>`);
//! other input outside the literal language reads as a generic `invalid syntax`. The lexer
//! stops at CPython's 200 open brackets and the parser keeps them on a heap stack: no input
//! makes it recurse.

use std::fmt::Display;
use std::num::IntErrorKind;

use serde_json::{Map, Number, Value};

/// CPython's tokenizer limit on open brackets.
const MAX_DEPTH: usize = 200;
/// Stands in for the heap address CPython prints in `<ast.Name object at 0x...>`.
pub(super) const NODE_ADDRESS: &str = "0x7f3a5c1e2d40";
const PREFIXES: &[&str] = &["r", "u", "b", "br", "rb", "f", "fr", "rf"];
/// Python's keywords other than `True`, `False` and `None`: no expression starts with one.
const KEYWORDS: &str = "and as assert async await break class continue def del elif else except \
    finally for from global if import in is lambda nonlocal not or pass raise return try while \
    with yield";

/// Parse `text` like Python's `ast.literal_eval(text)` and convert the result to JSON.
///
/// `Err` holds `str(exception)` as upstream embeds it. Values Python accepts but JSON cannot
/// hold (sets, bytes, integers beyond 64 bits, infinities, non-string dict keys) are rejected
/// with an explanatory message; tuples become arrays.
pub fn python_literal(text: &str) -> Result<Value, String> {
    // literal_eval strips leading spaces and tabs (not newlines) before compiling.
    let src = text.trim_start_matches([' ', '\t']);
    if src.contains('\0') {
        return Err("source code string cannot contain null bytes".into());
    }
    // The tokenizer reads `\r\n` and `\r` as `\n`, inside strings too.
    let src = src.replace("\r\n", "\n").replace('\r', "\n");
    let mut p = Parser {
        toks: Lexer::run(&src),
        ..Parser::default()
    };
    match p.parse(&src) {
        // literal_eval raises on the first bad node; JSON's limits are checked after it.
        Ok(v) => p.malformed.or(p.unsupported).map_or(Ok(v), Err),
        Err(PErr::Msg(msg)) => Err(msg),
        // Like CPython, a tokenizer error further on beats a bare "invalid syntax".
        Err(PErr::Generic(line)) => Err(match p.toks.last() {
            Some(Tok(T::Fail(msg), _)) => msg.clone(),
            _ => syn("invalid syntax", line),
        }),
    }
}

fn closes(open: char, close: char) -> bool {
    matches!((open, close), ('(', ')') | ('[', ']') | ('{', '}'))
}

fn syn(msg: impl Display, line: u32) -> String {
    format!("{msg} (<unknown>, line {line})")
}

#[derive(Debug, Clone, Copy, PartialEq)]
enum Num {
    /// `None` beyond 128 bits (out of JSON's range anyway).
    Int(Option<i128>),
    Float(f64),
}

#[derive(Debug, Clone)]
enum T {
    Num(Num),
    /// A string literal: its body with escapes still in, and its lowercased prefix.
    Str(String, String),
    Name(String),
    Op(char),
    Newline,
    /// End of input, with the error to report if a bracket is still open.
    Eof(Option<String>),
    /// A tokenizer error: tokenizing stopped here.
    Fail(String),
}

/// A token and its line.
#[derive(Debug, Clone)]
struct Tok(T, u32);

/// Turns the whole source into tokens up front, ending with `Eof` or `Fail`.
#[derive(Default)]
struct Lexer {
    chars: Vec<char>,
    i: usize,
    line: u32,
    brackets: Vec<(char, u32)>,
    toks: Vec<Tok>,
    /// Whether the current logical line has a token (then a line break ends it).
    content: bool,
}

impl Lexer {
    fn run(src: &str) -> Vec<Tok> {
        let mut lx = Lexer::default();
        (lx.chars, lx.line) = (src.chars().collect(), 1);
        if let Err(msg) = lx.scan() {
            lx.toks.push(Tok(T::Fail(msg), lx.line));
        }
        lx.toks
    }

    fn at(&self, k: usize) -> Option<char> {
        self.chars.get(self.i + k).copied()
    }

    /// Skip characters while `f` holds; how many were skipped.
    fn skip(&mut self, f: impl Fn(char) -> bool) -> usize {
        let start = self.i;
        while self.at(0).is_some_and(&f) {
            self.i += 1;
        }
        self.i - start
    }

    fn scan(&mut self) -> Result<(), String> {
        while let Some(c) = self.at(0) {
            let line = self.line;
            let t = match c {
                ' ' | '\t' | '\x0c' | '#' => {
                    self.skip(|k| k != '\n' && (c == '#' || matches!(k, ' ' | '\t' | '\x0c')));
                    continue;
                }
                '\n' => {
                    self.newline()?;
                    continue;
                }
                // A line continuation; it may not end the input.
                '\\' if self.at(1) == Some('\n') && self.at(2).is_some() => {
                    (self.i, self.line) = (self.i + 2, line + 1);
                    continue;
                }
                '0'..='9' => T::Num(self.number()?),
                '.' if self.at(1).is_some_and(|c| c.is_ascii_digit()) => T::Num(self.number()?),
                '\'' | '"' => self.string(c, String::new())?,
                c if c == '_' || c.is_alphabetic() => {
                    let start = self.i;
                    self.skip(|c| c == '_' || c.is_alphanumeric());
                    let word: String = self.chars[start..self.i].iter().collect();
                    let prefix = word.to_ascii_lowercase();
                    match self.at(0) {
                        Some(q @ ('\'' | '"')) if PREFIXES.contains(&prefix.as_str()) => {
                            self.string(q, prefix)?
                        }
                        _ => T::Name(word),
                    }
                }
                '(' | '[' | '{' if self.brackets.len() >= MAX_DEPTH => {
                    return Err(syn("too many nested parentheses", line));
                }
                // The guard pops the bracket a closing one must match.
                ')' | ']' | '}' if !self.brackets.pop().is_some_and(|(o, _)| closes(o, c)) => {
                    return Err(syn("invalid syntax", line));
                }
                // Anything else is a one-character operator (most of them the parser rejects).
                _ => {
                    if matches!(c, '(' | '[' | '{') {
                        self.brackets.push((c, line));
                    }
                    self.i += 1;
                    T::Op(c)
                }
            };
            self.content = true;
            self.toks.push(Tok(t, line));
        }
        if self.brackets.is_empty() && self.content {
            self.toks.push(Tok(T::Newline, self.line));
        }
        let open = (self.brackets.last()).map(|&(c, l)| syn(format!("'{c}' was never closed"), l));
        self.toks.push(Tok(T::Eof(open), self.line));
        Ok(())
    }

    /// Outside brackets a line break ends the logical line, and the next line may not be
    /// indented unless it is blank or a comment.
    fn newline(&mut self) -> Result<(), String> {
        (self.i, self.line) = (self.i + 1, self.line + 1);
        if !self.brackets.is_empty() {
            return Ok(());
        }
        if self.content {
            self.toks.push(Tok(T::Newline, self.line - 1));
            self.content = false;
        }
        let indent = self.skip(|c| matches!(c, ' ' | '\t' | '\x0c'));
        if indent > 0 && !matches!(self.at(0), Some('\n' | '#')) {
            return Err(syn("unexpected indent", self.line));
        }
        Ok(())
    }

    /// A number token runs on through letters, digits, `_`, `.` and an exponent's sign; then
    /// the whole text must be one of Python's integer or float forms.
    fn number(&mut self) -> Result<Num, String> {
        let (start, line) = (self.i, self.line);
        while let Some(c) = self.at(0) {
            let exponent = matches!(c, '+' | '-') && matches!(self.chars[self.i - 1], 'e' | 'E');
            if !(c.is_alphanumeric() || c == '_' || c == '.' || exponent) {
                break;
            }
            self.i += 1;
        }
        let text = String::from_iter(&self.chars[start..self.i]).to_lowercase();
        let (radix, kind, body) = match text.get(..2) {
            Some("0x") => (16, "hexadecimal", &text[2..]),
            Some("0o") => (8, "octal", &text[2..]),
            Some("0b") => (2, "binary", &text[2..]),
            _ => (10, "decimal", &text[..]),
        };
        let bad = || syn(format!("invalid {kind} literal"), line);
        // An underscore sits between two digits, or between a base prefix and a digit.
        let chars: Vec<char> = body.chars().collect();
        let digit = |k: usize| chars.get(k).is_some_and(|c| c.is_digit(radix));
        let before = |k: usize| k.checked_sub(1).map_or(radix != 10, digit);
        let misplaced = chars
            .iter()
            .enumerate()
            .any(|(k, &c)| c == '_' && !(before(k) && digit(k + 1)));
        if body.is_empty() || misplaced {
            return Err(bad());
        }
        let digits = body.replace('_', "");
        if radix != 10 || digits.bytes().all(|b| b.is_ascii_digit()) {
            if radix == 10 && digits.starts_with('0') && !digits.trim_start_matches('0').is_empty()
            {
                let msg = "leading zeros in decimal integer literals are not permitted; \
                           use an 0o prefix for octal integers";
                return Err(syn(msg, line));
            }
            return match u128::from_str_radix(&digits, radix) {
                Ok(v) => Ok(Num::Int(i128::try_from(v).ok())),
                Err(e) if *e.kind() == IntErrorKind::PosOverflow => Ok(Num::Int(None)),
                Err(_) => Err(bad()),
            };
        }
        // Rust's float syntax matches Python's for text that starts with a digit or a dot.
        digits.parse().map(Num::Float).map_err(|_| bad())
    }

    /// A string literal from its opening quote `q`; escapes are decoded by the parser.
    fn string(&mut self, q: char, prefix: String) -> Result<T, String> {
        let (start, triple) = (self.line, self.at(1) == Some(q) && self.at(2) == Some(q));
        let quotes = if triple { 3 } else { 1 };
        self.i += quotes;
        let (mut body, mut last) = (String::new(), q);
        loop {
            let c = self.at(0);
            if c.is_none() || (c == Some('\n') && !triple) {
                // A final line break still belongs to its line.
                let detected = self.line - u32::from(c.is_none() && last == '\n');
                let kind = if triple { "triple-quoted " } else { "" };
                let msg =
                    format!("unterminated {kind}string literal (detected at line {detected})");
                return Err(syn(msg, start));
            }
            if c == Some(q) && (!triple || (self.at(1) == Some(q) && self.at(2) == Some(q))) {
                self.i += quotes;
                return Ok(T::Str(body, prefix));
            }
            // A backslash takes the next character along, even a quote or a line break.
            let take = 1 + usize::from(c == Some('\\') && self.at(1).is_some());
            for &ch in &self.chars[self.i..self.i + take] {
                (last, self.line) = (ch, self.line + u32::from(ch == '\n'));
                body.push(ch);
            }
            self.i += take;
        }
    }
}

/// Decode a (non-raw) str literal's escapes into `out`; true if one was no Unicode scalar (a
/// lone surrogate, which Python keeps in a str but JSON cannot hold), written as U+FFFD.
fn unescape(body: &str, line: u32, out: &mut String) -> Result<bool, String> {
    let mut surrogate = false;
    let mut chars = body.char_indices().peekable();
    while let Some((i, c)) = chars.next() {
        let Some((_, e)) = chars.next_if(|_| c == '\\') else {
            out.push(c);
            continue;
        };
        // Both strings are ASCII: an escape letter's index is its character's.
        if let Some(k) = "abfnrtv\\'\"".find(e) {
            out.extend("\x07\x08\x0c\n\r\t\x0b\\'\""[k..].chars().next());
            continue;
        }
        // Octal escapes take one to three digits; the others a fixed count of hex digits.
        let (radix, len, form) = match e {
            '\n' => continue,
            '0'..='7' => (8, 2, ""),
            'x' => (16, 2, "\\xXX"),
            'u' => (16, 4, "\\uXXXX"),
            'U' => (16, 8, "\\UXXXXXXXX"),
            // Unknown escapes stay as written (`\N{...}` names are not resolved).
            _ => {
                out.extend(['\\', e]);
                continue;
            }
        };
        let (mut code, mut end) = (e.to_digit(8).filter(|_| radix == 8).unwrap_or(0), i + 1);
        for _ in 0..len {
            match chars.next_if(|&(_, d)| d.is_digit(radix)) {
                Some((j, d)) => (code, end) = (code * radix + d.to_digit(radix).unwrap_or(0), j),
                None if radix == 8 => break,
                None => {
                    let codec = "(unicode error) 'unicodeescape' codec can't decode bytes";
                    let msg = format!("{codec} in position {i}-{end}: truncated {form} escape");
                    return Err(syn(msg, line));
                }
            }
        }
        surrogate |= char::from_u32(code).is_none();
        out.extend(char::from_u32(code).or(Some('\u{fffd}')));
    }
    Ok(surrogate)
}

/// A parsed expression: JSON value (`Null` if none), number literal if one, Python type name.
struct Item(Value, Option<Num>, &'static str);

/// Signs before an operand: how many, whether they negate, and the first one's line.
#[derive(Clone, Copy, Default)]
struct Signs(usize, bool, u32);

/// An open bracket (`\0` for the top level). `{` is a dict unless its first element has no
/// `:` (then a set).
#[derive(Default)]
struct Frame {
    open: char,
    signs: Signs,
    /// The first element of a `(`: the whole value unless a comma follows.
    first: Option<Item>,
    items: Vec<Value>,
    map: Map<String, Value>,
    key: Option<Item>,
    comma: bool,
    set: bool,
}

enum PErr {
    /// CPython's bare "invalid syntax" at this line (a later tokenizer error may replace it).
    Generic(u32),
    Msg(String),
}

/// A loop over operands, with open brackets on an explicit stack. The first malformed node
/// and the first value JSON cannot hold are recorded while parsing goes on, since a syntax
/// error anywhere takes precedence over both.
#[derive(Default)]
struct Parser {
    /// Never empty: the lexer always ends with `Eof` or `Fail`, and `pos` never passes it.
    toks: Vec<Tok>,
    pos: usize,
    malformed: Option<String>,
    unsupported: Option<String>,
}

impl Parser {
    fn peek(&self) -> &T {
        &self.toks[self.pos].0
    }

    fn line(&self) -> u32 {
        self.toks[self.pos].1
    }

    fn bump(&mut self) {
        self.pos = (self.pos + 1).min(self.toks.len() - 1);
    }

    fn is_op(&self, c: char) -> bool {
        matches!(self.peek(), T::Op(o) if *o == c)
    }

    fn at_close(&self, f: &Frame) -> bool {
        match self.peek() {
            T::Op(c) => closes(f.open, *c),
            t => f.open == '\0' && matches!(t, T::Newline | T::Eof(_)),
        }
    }

    /// The error for an unexpected token; tokenizer failures and unclosed brackets speak for
    /// themselves.
    fn unexpected(&self) -> PErr {
        match self.peek() {
            T::Fail(msg) | T::Eof(Some(msg)) => PErr::Msg(msg.clone()),
            _ => PErr::Generic(self.line()),
        }
    }

    fn malformed(&mut self, class: &str, line: u32) {
        let msg = format!("malformed node or string on line {line}: <ast.{class} object at ");
        self.malformed
            .get_or_insert_with(|| format!("{msg}{NODE_ADDRESS}>"));
    }

    fn unsupported(&mut self, msg: impl Into<String>) {
        self.unsupported.get_or_insert_with(|| msg.into());
    }

    fn parse(&mut self, src: &str) -> Result<Value, PErr> {
        if matches!(self.peek(), T::Eof(None)) {
            let lines = u32::try_from(src.lines().count()).unwrap_or(u32::MAX);
            return Err(PErr::Msg(syn("invalid syntax", lines)));
        }
        // The top level is a bracket too, closed by the line's end: one value or a bare tuple.
        let mut stack = vec![Frame::default()];
        'operand: loop {
            let signs = self.signs();
            let mut item = match *self.peek() {
                T::Op(open @ ('(' | '[' | '{')) if stack.len() <= MAX_DEPTH => {
                    self.bump();
                    let mut frame = Frame::default();
                    (frame.open, frame.signs) = (open, signs);
                    if !self.at_close(&frame) {
                        stack.push(frame);
                        continue;
                    }
                    self.close(frame)
                }
                _ => {
                    let item = self.scalar()?;
                    self.apply(signs, item)
                }
            };
            // Hand the finished item to the innermost open bracket, closing those that end.
            loop {
                let Some(frame) = stack.last_mut() else {
                    return self.finish(item.0);
                };
                if !self.element(frame, item)? {
                    continue 'operand;
                }
                let Some(frame) = stack.pop() else {
                    continue 'operand;
                };
                item = self.close(frame);
            }
        }
    }

    /// After the top level's line end (the lexer emits one per logical line), only the end.
    fn finish(&mut self, value: Value) -> Result<Value, PErr> {
        match self.peek() {
            T::Eof(None) => Ok(value),
            _ => Err(self.unexpected()),
        }
    }

    fn signs(&mut self) -> Signs {
        let mut s = Signs(0, false, self.line());
        while let T::Op(c @ ('+' | '-')) = *self.peek() {
            (s.0, s.1) = (s.0 + 1, s.1 ^ (c == '-'));
            self.bump();
        }
        s
    }

    /// literal_eval allows one sign on a number; any other signed operand is a malformed
    /// node (CPython names the operand's class in some cases; this says `UnaryOp`).
    fn apply(&mut self, Signs(count, negative, line): Signs, item: Item) -> Item {
        match item.1 {
            _ if count == 0 => item,
            Some(n) if count == 1 => {
                let n = match n {
                    Num::Int(i) if negative => Num::Int(i.and_then(i128::checked_neg)),
                    Num::Float(f) if negative => Num::Float(-f),
                    n => n,
                };
                Item(self.number(n).0, None, item.2)
            }
            _ => {
                self.malformed("UnaryOp", line);
                Item(Value::Null, None, item.2)
            }
        }
    }

    fn scalar(&mut self) -> Result<Item, PErr> {
        let line = self.line();
        let item = match self.peek().clone() {
            T::Str(..) => return self.strings(),
            T::Num(n) => self.number(n),
            T::Name(name) => match name.as_str() {
                "True" | "False" => Item(Value::Bool(name == "True"), None, "bool"),
                "None" => Item(Value::Null, None, "NoneType"),
                n if KEYWORDS.split(' ').any(|k| k == n) => return Err(PErr::Generic(line)),
                _ => {
                    self.malformed("Name", line);
                    Item(Value::Null, None, "name")
                }
            },
            _ => return Err(self.unexpected()),
        };
        self.bump();
        Ok(item)
    }

    /// A number's JSON value, or `Null` with the reason recorded.
    fn number(&mut self, n: Num) -> Item {
        let v = match n {
            Num::Int(i) => i.and_then(|i| serde_json::to_value(i).ok()),
            Num::Float(f) => Number::from_f64(f).map(Value::Number),
        };
        let ty = if let Num::Int(_) = n { "int" } else { "float" };
        if v.is_none() {
            let limit = if ty == "int" {
                "out of range"
            } else {
                "not finite"
            };
            self.unsupported(format!(
                "unsupported literal value of type '{ty}' ({limit})"
            ));
        }
        Item(v.unwrap_or(Value::Null), Some(n), ty)
    }

    /// Adjacent string literals concatenate (`'a' 'b'`).
    fn strings(&mut self) -> Result<Item, PErr> {
        let (line, mut text, mut ty) = (self.line(), String::new(), "str");
        while let T::Str(body, prefix) = self.peek().clone() {
            if prefix.contains('f') {
                self.malformed("JoinedStr", line);
            } else if prefix.contains('b') {
                ty = "bytes";
                self.unsupported("unsupported literal value of type 'bytes'");
            }
            if prefix.contains(['r', 'b', 'f']) {
                text.push_str(&body);
            } else if unescape(&body, self.line(), &mut text).map_err(PErr::Msg)? {
                self.unsupported("unsupported literal value of type 'str' (not valid Unicode)");
            }
            self.bump();
        }
        Ok(Item(Value::String(text), None, ty))
    }

    /// Take a finished element into `f`; true when `f`'s closing bracket comes next.
    fn element(&mut self, f: &mut Frame, item: Item) -> Result<bool, PErr> {
        if f.open == '{' && f.key.is_none() && !f.set {
            if self.is_op(':') {
                self.bump();
                f.key = Some(item);
                return Ok(false);
            }
            // No `:` after the first element: a set display.
            if f.comma {
                return Err(self.unexpected());
            }
            f.set = true;
        }
        if !self.is_op(',') && !self.at_close(f) {
            return Err(self.unexpected());
        }
        match f.key.take() {
            // Like a Python dict, a repeated key keeps its place and takes the last value.
            Some(Item(Value::String(k), _, "str")) => {
                f.map.insert(k, item.0);
            }
            Some(Item(_, _, ty)) => {
                self.unsupported(format!("unsupported dictionary key of type '{ty}'"))
            }
            None if matches!(f.open, '(' | '\0') && f.first.is_none() => f.first = Some(item),
            None => f.items.push(item.0),
        }
        if self.is_op(',') {
            f.comma = true;
            self.bump();
        }
        Ok(self.at_close(f))
    }

    fn close(&mut self, f: Frame) -> Item {
        self.bump();
        let item = match (f.open, f.first) {
            // `(x)` is just x.
            ('(' | '\0', Some(first)) if !f.comma => first,
            ('(' | '\0', first) => {
                let items = first.map(|i| i.0).into_iter().chain(f.items);
                Item(Value::Array(items.collect()), None, "tuple")
            }
            ('[', _) => Item(Value::Array(f.items), None, "list"),
            _ if f.set => {
                self.unsupported("unsupported literal value of type 'set'");
                Item(Value::Null, None, "set")
            }
            _ => Item(Value::Object(f.map), None, "dict"),
        };
        self.apply(f.signs, item)
    }
}
