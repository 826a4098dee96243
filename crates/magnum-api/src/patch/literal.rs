//! `ast.literal_eval` as Magnum's `apply_jsonpatch` applies it, for the values clients send.
//!
//! Python clients send dict/list values as `str(dict)` (single quotes, `True`/`None`), so a
//! string value is read as a Python literal: strings (quotes, prefixes, escapes), numbers,
//! `True`/`False`/`None`, tuples, lists, dicts and one unary `+`/`-` on a number. The failure
//! text ends up in the 400 body, so the errors clients plausibly hit keep CPython 3.11's wording
//! (`invalid syntax (<unknown>, line N)`, `'[' was never closed`, `unterminated string literal`,
//! `malformed node or string on line N: <ast.Name ...>`); anything else outside the literal
//! language reads as a generic `invalid syntax`. The tokenizer stops at CPython's 200 open
//! brackets and the parser keeps open brackets on a heap stack: no input makes it recurse.

use std::fmt::Display;

use serde_json::{Map, Number, Value};

/// CPython's tokenizer limit on open brackets.
const MAX_DEPTH: usize = 200;
/// Stands in for the heap address CPython prints in `<ast.Name object at 0x...>`.
pub(super) const NODE_ADDRESS: &str = "0x7f3a5c1e2d40";
const PREFIXES: &[&str] = &["r", "u", "b", "br", "rb", "f", "fr", "rf"];
#[rustfmt::skip]
const KEYWORDS: &[&str] = &[
    "and", "as", "assert", "async", "await", "break", "class", "continue", "def", "del", "elif",
    "else", "except", "finally", "for", "from", "global", "if", "import", "in", "is", "lambda",
    "nonlocal", "not", "or", "pass", "raise", "return", "try", "while", "with", "yield",
];

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
    let mut p = Parser::new(Lexer::run(&src));
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

fn syn(msg: impl Display, line: u32) -> String {
    format!("{msg} (<unknown>, line {line})")
}

fn fail<X>(msg: impl Display, line: u32) -> Result<X, String> {
    Err(syn(msg, line))
}

fn malformed(class: &str, line: u32) -> String {
    format!("malformed node or string on line {line}: <ast.{class} object at {NODE_ADDRESS}>")
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
        let chars = src.chars().collect();
        let mut lx = Lexer {
            chars,
            line: 1,
            ..Lexer::default()
        };
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
                ' ' | '\t' | '\x0c' => {
                    self.i += 1;
                    continue;
                }
                '#' => {
                    self.skip(|c| c != '\n');
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
                    return fail("too many nested parentheses", line);
                }
                '(' | '[' | '{' => {
                    self.brackets.push((c, line));
                    self.i += 1;
                    T::Op(c)
                }
                ')' | ']' | '}' => match self.brackets.pop() {
                    Some((o, _)) if matches!((o, c), ('(', ')') | ('[', ']') | ('{', '}')) => {
                        self.i += 1;
                        T::Op(c)
                    }
                    _ => return fail("invalid syntax", line),
                },
                // Anything else is an operator the parser rejects.
                _ => {
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
            return fail("unexpected indent", self.line);
        }
        Ok(())
    }

    /// `digit (['_'] digit)*` in `radix`, underscores dropped; `None` if there is no digit or an
    /// underscore is not followed by one. `lead` allows an underscore first (`0x_1f`).
    fn digits(&mut self, radix: u32, lead: bool) -> Option<String> {
        let mut out = String::new();
        loop {
            let underscore = self.at(0) == Some('_') && (lead || !out.is_empty());
            match self
                .at(usize::from(underscore))
                .filter(|c| c.is_digit(radix))
            {
                Some(c) => {
                    out.push(c);
                    self.i += 1 + usize::from(underscore);
                }
                None if underscore => return None,
                None => return (!out.is_empty()).then_some(out),
            }
        }
    }

    fn number(&mut self) -> Result<Num, String> {
        let line = self.line;
        let bad = |kind: &str| syn(format!("invalid {kind} literal"), line);
        let base = match (self.at(0), self.at(1).map(|c| c.to_ascii_lowercase())) {
            (Some('0'), Some('x')) => Some((16, "hexadecimal")),
            (Some('0'), Some('o')) => Some((8, "octal")),
            (Some('0'), Some('b')) => Some((2, "binary")),
            _ => None,
        };
        if let Some((radix, kind)) = base {
            self.i += 2;
            let digits = self.digits(radix, true).ok_or_else(|| bad(kind))?;
            self.end_of_number(kind)?;
            let value = u128::from_str_radix(&digits, radix).ok();
            return Ok(Num::Int(value.and_then(|v| i128::try_from(v).ok())));
        }
        // `text` collects the literal in a form Rust parses.
        let (mut text, mut float) = (String::from("0"), false);
        if self.at(0) != Some('.') {
            text += &self.digits(10, false).ok_or_else(|| bad("decimal"))?;
        }
        if self.at(0) == Some('.') {
            (self.i, float) = (self.i + 1, true);
            if self.at(0).is_some_and(|c| c.is_ascii_digit()) {
                text.push('.');
                text += &self.digits(10, false).ok_or_else(|| bad("decimal"))?;
            }
        }
        if matches!(self.at(0), Some('e' | 'E')) {
            let sign = self.at(1).filter(|c| matches!(c, '+' | '-'));
            (self.i, float) = (self.i + 1 + usize::from(sign.is_some()), true);
            text.push('e');
            text.extend(sign);
            text += &self.digits(10, false).ok_or_else(|| bad("decimal"))?;
        }
        self.end_of_number("decimal")?;
        let digits = &text[1..];
        if !float && digits.len() > 1 && digits.starts_with('0') && digits.contains(|c| c != '0') {
            let msg = "leading zeros in decimal integer literals are not permitted; \
                       use an 0o prefix for octal integers";
            return fail(msg, line);
        }
        Ok(match float {
            true => Num::Float(text.parse().unwrap_or(f64::NAN)),
            false => Num::Int(
                text.parse::<u128>()
                    .ok()
                    .and_then(|v| i128::try_from(v).ok()),
            ),
        })
    }

    /// A number may not run into a name (`1a`, `1_`, `1j`: complex numbers are not JSON either).
    fn end_of_number(&self, kind: &str) -> Result<(), String> {
        match self.at(0) {
            Some(c) if c == '_' || c.is_alphanumeric() => {
                fail(format!("invalid {kind} literal"), self.line)
            }
            _ => Ok(()),
        }
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
                return fail(msg, start);
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
        let (len, form) = match e {
            '\n' => continue,
            '0'..='7' => {
                let mut code = e.to_digit(8).unwrap_or(0);
                for _ in 0..2 {
                    let Some((_, d)) = chars.next_if(|&(_, d)| d.is_digit(8)) else {
                        break;
                    };
                    code = code * 8 + d.to_digit(8).unwrap_or(0);
                }
                out.extend(char::from_u32(code));
                continue;
            }
            'x' => (2, "\\xXX"),
            'u' => (4, "\\uXXXX"),
            'U' => (8, "\\UXXXXXXXX"),
            // Unknown escapes stay as written (`\N{...}` names are not resolved).
            _ => {
                out.extend(['\\', e]);
                continue;
            }
        };
        let (mut code, mut end) = (0u32, i + 1);
        for _ in 0..len {
            let Some((j, d)) = chars.next_if(|&(_, d)| d.is_ascii_hexdigit()) else {
                let what = format!("position {i}-{end}: truncated {form} escape");
                return fail(
                    format!("(unicode error) 'unicodeescape' codec can't decode bytes in {what}"),
                    line,
                );
            };
            (code, end) = (code * 16 + d.to_digit(16).unwrap_or(0), j);
        }
        surrogate |= char::from_u32(code).is_none();
        out.extend(char::from_u32(code).or(Some('\u{fffd}')));
    }
    Ok(surrogate)
}

/// One parsed expression: its JSON value (`Null` when it has none), the number it is if a
/// number literal, and its Python type name.
struct Item(Value, Option<Num>, &'static str);

/// Signs before an operand: how many, whether they negate, and the first one's line.
#[derive(Clone, Copy, Default)]
struct Signs(usize, bool, u32);

/// An open bracket. `{` is a dict unless its first element has no `:` (then a set).
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

impl Frame {
    fn close(&self) -> char {
        match self.open {
            '(' => ')',
            '[' => ']',
            _ => '}',
        }
    }
}

enum PErr {
    /// CPython's bare "invalid syntax" at this line (a later tokenizer error may replace it).
    Generic(u32),
    Msg(String),
}

/// A loop over operands, with open brackets on an explicit stack. The first malformed node
/// and the first value JSON cannot hold are recorded while parsing goes on, since a syntax
/// error anywhere takes precedence over both.
struct Parser {
    toks: Vec<Tok>,
    pos: usize,
    malformed: Option<String>,
    unsupported: Option<String>,
    end: Tok,
}

impl Parser {
    fn new(toks: Vec<Tok>) -> Parser {
        let end = Tok(T::Eof(None), 0);
        Parser {
            toks,
            pos: 0,
            malformed: None,
            unsupported: None,
            end,
        }
    }

    fn peek(&self) -> &T {
        &self.toks.get(self.pos).unwrap_or(&self.end).0
    }

    fn line(&self) -> u32 {
        self.toks.get(self.pos).unwrap_or(&self.end).1
    }

    fn bump(&mut self) {
        // Never past the final Eof/Fail token.
        self.pos = (self.pos + 1).min(self.toks.len().saturating_sub(1));
    }

    fn is_op(&self, c: char) -> bool {
        matches!(self.peek(), T::Op(o) if *o == c)
    }

    /// The error for an unexpected token; tokenizer failures and unclosed brackets speak for
    /// themselves.
    fn unexpected(&self) -> PErr {
        match self.peek() {
            T::Fail(msg) | T::Eof(Some(msg)) => PErr::Msg(msg.clone()),
            _ => PErr::Generic(self.line()),
        }
    }

    fn unsupported(&mut self, msg: impl Into<String>) {
        self.unsupported.get_or_insert_with(|| msg.into());
    }

    fn parse(&mut self, src: &str) -> Result<Value, PErr> {
        if matches!(self.peek(), T::Eof(None)) {
            let lines = u32::try_from(src.lines().count()).unwrap_or(u32::MAX);
            return Err(PErr::Msg(syn("invalid syntax", lines)));
        }
        let (mut stack, mut top, mut tuple) = (Vec::<Frame>::new(), Vec::new(), false);
        'operand: loop {
            let signs = self.signs();
            let mut item = match *self.peek() {
                T::Op(open @ ('(' | '[' | '{')) if stack.len() < MAX_DEPTH => {
                    self.bump();
                    let frame = Frame {
                        open,
                        signs,
                        ..Frame::default()
                    };
                    if !self.is_op(frame.close()) {
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
            while let Some(frame) = stack.last_mut() {
                if !self.element(frame, item)? {
                    continue 'operand;
                }
                let Some(frame) = stack.pop() else {
                    continue 'operand;
                };
                item = self.close(frame);
            }
            // A complete top-level expression, alone or in a bare tuple (`1, 2`).
            if !tuple && !self.is_op(',') {
                return self.finish(item.0);
            }
            top.push(item.0);
            if !self.is_op(',') {
                return self.finish(Value::Array(top));
            }
            self.bump();
            tuple = true;
            if matches!(self.peek(), T::Newline | T::Eof(_)) {
                return self.finish(Value::Array(top));
            }
        }
    }

    fn finish(&mut self, value: Value) -> Result<Value, PErr> {
        while matches!(self.peek(), T::Newline) {
            self.bump();
        }
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
        if count == 0 {
            return item;
        }
        match item.1 {
            Some(n) if count == 1 => {
                let n = match n {
                    Num::Int(i) if negative => Num::Int(i.and_then(i128::checked_neg)),
                    Num::Float(f) if negative => Num::Float(-f),
                    n => n,
                };
                Item(self.number(n), None, item.2)
            }
            _ => {
                self.malformed
                    .get_or_insert_with(|| malformed("UnaryOp", line));
                Item(Value::Null, None, item.2)
            }
        }
    }

    fn scalar(&mut self) -> Result<Item, PErr> {
        let line = self.line();
        let item = match self.peek().clone() {
            T::Str(..) => return self.strings(),
            T::Num(n) => {
                let ty = if matches!(n, Num::Int(_)) {
                    "int"
                } else {
                    "float"
                };
                Item(self.number(n), Some(n), ty)
            }
            T::Name(name) => match name.as_str() {
                "True" | "False" => Item(Value::Bool(name == "True"), None, "bool"),
                "None" => Item(Value::Null, None, "NoneType"),
                n if KEYWORDS.contains(&n) => return Err(PErr::Generic(line)),
                _ => {
                    self.malformed
                        .get_or_insert_with(|| malformed("Name", line));
                    Item(Value::Null, None, "name")
                }
            },
            _ => return Err(self.unexpected()),
        };
        self.bump();
        Ok(item)
    }

    /// A number's JSON value, or `Null` with the reason recorded.
    fn number(&mut self, n: Num) -> Value {
        let reason = match n {
            Num::Int(Some(i)) => match (i64::try_from(i), u64::try_from(i)) {
                (Ok(v), _) => return Value::from(v),
                (_, Ok(v)) => return Value::from(v),
                _ => "unsupported literal value of type 'int' (out of range)",
            },
            Num::Int(None) => "unsupported literal value of type 'int' (out of range)",
            Num::Float(f) => match Number::from_f64(f) {
                Some(v) => return Value::Number(v),
                None => "unsupported literal value of type 'float' (not finite)",
            },
        };
        self.unsupported(reason);
        Value::Null
    }

    /// Adjacent string literals concatenate (`'a' 'b'`).
    fn strings(&mut self) -> Result<Item, PErr> {
        let (line, mut text, mut ty) = (self.line(), String::new(), "str");
        while let T::Str(body, prefix) = self.peek().clone() {
            if prefix.contains('f') {
                self.malformed
                    .get_or_insert_with(|| malformed("JoinedStr", line));
            } else if prefix.contains('b') {
                ty = "bytes";
            }
            if prefix.contains(['r', 'b', 'f']) {
                text.push_str(&body);
            } else if unescape(&body, self.line(), &mut text).map_err(PErr::Msg)? {
                self.unsupported("unsupported literal value of type 'str' (not valid Unicode)");
            }
            self.bump();
        }
        if ty == "bytes" {
            self.unsupported("unsupported literal value of type 'bytes'");
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
        if !self.is_op(',') && !self.is_op(f.close()) {
            return Err(self.unexpected());
        }
        match f.key.take() {
            // A repeated key keeps its first place and takes the last value, as in Python
            // (`Map::insert` with preserve_order).
            Some(Item(Value::String(k), _, "str")) => {
                f.map.insert(k, item.0);
            }
            Some(Item(_, _, ty)) => {
                self.unsupported(format!("unsupported dictionary key of type '{ty}'"))
            }
            None if f.open == '(' && f.first.is_none() => f.first = Some(item),
            None => f.items.push(item.0),
        }
        f.comma |= self.is_op(',');
        if self.is_op(',') {
            self.bump();
        }
        Ok(self.is_op(f.close()))
    }

    fn close(&mut self, f: Frame) -> Item {
        self.bump();
        let item = match (f.open, f.first) {
            // `(x)` is just x.
            ('(', Some(first)) if !f.comma => first,
            ('(', first) => {
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
