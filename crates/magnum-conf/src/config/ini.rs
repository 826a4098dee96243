//! The INI dialect of oslo.config, parsed line by line.
//!
//! Not rust-ini: oslo's dialect has details a generic INI reader gets wrong for old
//! magnum.conf files (repeated keys kept in order, continuation lines joined with `\n`, one pair
//! of quotes stripped from the first line only, case-folded section names except `DEFAULT`).

use super::ConfigError;

/// One parsed file: its sections in order of first appearance, with every assignment kept in
/// file order (a repeated key appears once per occurrence; repeated headers are merged).
#[derive(Debug, Clone, Default)]
pub(crate) struct IniFile {
    pub sections: Vec<IniSection>,
}

#[derive(Debug, Clone)]
pub(crate) struct IniSection {
    /// The header as first written, for messages.
    pub written: String,
    /// The lookup name: lower-cased, except `DEFAULT` which must be written exactly so.
    pub name: String,
    pub entries: Vec<(String, String)>,
}

/// oslo.config folds group names to lower case but keeps `DEFAULT` case-sensitive
/// (`[default]` is a different, unknown group).
pub(crate) fn normalize_section(name: &str) -> String {
    if name == "DEFAULT" {
        name.to_owned()
    } else {
        name.to_lowercase()
    }
}

impl IniFile {
    /// Parses `text`; `origin` (a path or `<string>`) names the source in errors. Errors carry
    /// the line number but never the line itself, which could hold a password.
    pub fn parse(origin: &str, text: &str) -> Result<Self, ConfigError> {
        let mut file = IniFile::default();
        let mut current: Option<usize> = None;
        // The assignment being read: key, its lines, and the line it started on.
        let mut pending: Option<(String, Vec<String>, usize)> = None;
        let text = text.strip_prefix('\u{feff}').unwrap_or(text);

        for (index, raw) in text.lines().enumerate() {
            let lineno = index + 1;
            let line = raw.trim_end();
            if line.is_empty() {
                // A blank line ends a multi-line value.
                file.flush(origin, current, &mut pending)?;
                continue;
            }
            if line.starts_with([' ', '\t']) {
                match pending.as_mut() {
                    Some((_, lines, _)) => lines.push(line.trim_start().to_owned()),
                    None => {
                        return Err(parse_error(origin, lineno, "unexpected continuation line"));
                    }
                }
                continue;
            }
            file.flush(origin, current, &mut pending)?;

            if let Some(header) = line.strip_prefix('[') {
                let Some(name) = header.strip_suffix(']') else {
                    return Err(parse_error(
                        origin,
                        lineno,
                        &format!("invalid section header (must end with ]): {line}"),
                    ));
                };
                if name.is_empty() {
                    return Err(parse_error(origin, lineno, "empty section name"));
                }
                current = Some(file.section_index(name));
            } else if line.starts_with(['#', ';']) {
                // Comment; note it also ends a multi-line value (flushed above), as in oslo.
            } else {
                let Some((key, value)) = split_key_value(line) else {
                    return Err(parse_error(
                        origin,
                        lineno,
                        "no ':' or '=' found in assignment",
                    ));
                };
                if key.is_empty() {
                    return Err(parse_error(origin, lineno, "key cannot be empty"));
                }
                pending = Some((key.to_owned(), vec![value.to_owned()], lineno));
            }
        }
        file.flush(origin, current, &mut pending)?;
        Ok(file)
    }

    fn section_index(&mut self, written: &str) -> usize {
        let name = normalize_section(written);
        if let Some(i) = self.sections.iter().position(|s| s.name == name) {
            return i;
        }
        self.sections.push(IniSection {
            written: written.to_owned(),
            name,
            entries: Vec::new(),
        });
        self.sections.len() - 1
    }

    fn flush(
        &mut self,
        origin: &str,
        current: Option<usize>,
        pending: &mut Option<(String, Vec<String>, usize)>,
    ) -> Result<(), ConfigError> {
        let Some((key, lines, lineno)) = pending.take() else {
            return Ok(());
        };
        let Some(section) = current.and_then(|i| self.sections.get_mut(i)) else {
            return Err(parse_error(
                origin,
                lineno,
                "assignment before any [section] header",
            ));
        };
        section.entries.push((key, lines.join("\n")));
        Ok(())
    }

    /// Every value of `key` in section `name` (already normalized), in file order.
    pub fn values<'a>(&'a self, name: &str, key: &str) -> impl Iterator<Item = &'a str> {
        self.sections
            .iter()
            .filter(move |s| s.name == name)
            .flat_map(|s| s.entries.iter())
            .filter(move |(k, _)| k == key)
            .map(|(_, v)| v.as_str())
    }
}

/// `key = value` or `key: value`, whichever separator comes first; the value is trimmed and
/// loses one pair of matching surrounding quotes.
fn split_key_value(line: &str) -> Option<(&str, &str)> {
    let at = line.find(['=', ':'])?;
    let key = line[..at].trim();
    let mut value = line[at + 1..].trim();
    if let Some(quote) = value.chars().next().filter(|c| *c == '"' || *c == '\'')
        && value.ends_with(quote)
    {
        // A lone quote character becomes the empty string, as in oslo.
        value = value
            .strip_prefix(quote)
            .and_then(|v| v.strip_suffix(quote))
            .unwrap_or("");
    }
    Some((key, value))
}

fn parse_error(origin: &str, line: usize, message: &str) -> ConfigError {
    ConfigError::Parse {
        origin: origin.to_owned(),
        line,
        message: message.to_owned(),
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
mod tests {
    use super::*;

    fn parse(text: &str) -> IniFile {
        IniFile::parse("<test>", text).unwrap()
    }

    fn values(file: &IniFile, section: &str, key: &str) -> Vec<String> {
        file.values(section, key).map(str::to_owned).collect()
    }

    #[test]
    fn separators_and_whitespace() {
        let f = parse("[api]\nport = 9511\nhost: 0.0.0.0\nurl=http://x:1/a=b\nk : v=w\n");
        assert_eq!(values(&f, "api", "port"), ["9511"]);
        assert_eq!(values(&f, "api", "host"), ["0.0.0.0"]);
        assert_eq!(values(&f, "api", "url"), ["http://x:1/a=b"]);
        assert_eq!(values(&f, "api", "k"), ["v=w"]);
    }

    #[test]
    fn indented_first_assignment_is_an_error() {
        let err = IniFile::parse("<test>", "[api]\n port = 1\n").unwrap_err();
        assert_eq!(
            err.to_string(),
            "cannot parse <test> at line 2: unexpected continuation line"
        );
    }

    #[test]
    fn repeated_keys_and_sections_are_kept_in_order() {
        let f = parse("[api]\nx = 1\n[DEFAULT]\ny = 2\n[API]\nx = 3\nx = 4\n");
        assert_eq!(values(&f, "api", "x"), ["1", "3", "4"]);
        assert_eq!(values(&f, "DEFAULT", "y"), ["2"]);
        assert_eq!(f.sections.len(), 2);
        assert_eq!(f.sections[0].written, "api");
    }

    #[test]
    fn default_section_is_case_sensitive() {
        let f = parse("[default]\nx = 1\n");
        assert!(values(&f, "DEFAULT", "x").is_empty());
        assert_eq!(values(&f, "default", "x"), ["1"]);
    }

    #[test]
    fn keys_are_case_sensitive() {
        let f = parse("[api]\nPort = 1\n");
        assert!(values(&f, "api", "port").is_empty());
    }

    #[test]
    fn continuation_lines_join_with_newlines() {
        let f = parse("[a]\nx = one\n  two\n\tthree  \n\n  \ny = 2\n");
        assert_eq!(values(&f, "a", "x"), ["one\ntwo\nthree"]);
        assert_eq!(values(&f, "a", "y"), ["2"]);
        // An indented '#' line is part of the value; a comment ends it.
        let f = parse("[a]\nx = 1\n  #c\n");
        assert_eq!(values(&f, "a", "x"), ["1\n#c"]);
        let err = IniFile::parse("<t>", "[a]\nx = 1\n#c\n y\n").unwrap_err();
        assert!(err.to_string().contains("line 4"), "{err}");
    }

    #[test]
    fn comments() {
        let f = parse("# top\n[a]\n; semi\n#x = 1\nx = 2 # not a comment\n");
        assert_eq!(values(&f, "a", "x"), ["2 # not a comment"]);
    }

    #[test]
    fn one_pair_of_quotes_is_stripped() {
        let f = parse(
            "[a]\nd = \"x y\"\ns = 'z'\nm = \"a\"b\"\nu = 'a\nmix = \"a'\ne = \"\"\nq = \"\n",
        );
        assert_eq!(values(&f, "a", "d"), ["x y"]);
        assert_eq!(values(&f, "a", "s"), ["z"]);
        assert_eq!(values(&f, "a", "m"), ["a\"b"]);
        assert_eq!(values(&f, "a", "u"), ["'a"]);
        assert_eq!(values(&f, "a", "mix"), ["\"a'"]);
        assert_eq!(values(&f, "a", "e"), [""]);
        assert_eq!(values(&f, "a", "q"), [""]);
    }

    #[test]
    fn empty_value_and_crlf() {
        let f = parse("[a]\r\nx =\r\ny = 1\r\n");
        assert_eq!(values(&f, "a", "x"), [""]);
        assert_eq!(values(&f, "a", "y"), ["1"]);
        let f = parse("\u{feff}[a]\nx = 1\n");
        assert_eq!(values(&f, "a", "x"), ["1"]);
    }

    #[test]
    fn syntax_errors_name_the_line_but_not_its_content() {
        for (text, line, message) in [
            ("x = 1\n", 1, "assignment before any [section] header"),
            (
                "[a]\n\nsecretpassword\n",
                3,
                "no ':' or '=' found in assignment",
            ),
            ("[a]\n= hunter2\n", 2, "key cannot be empty"),
            ("[]\n", 1, "empty section name"),
        ] {
            let err = IniFile::parse("/etc/magnum/magnum.conf", text).unwrap_err();
            assert_eq!(
                err.to_string(),
                format!("cannot parse /etc/magnum/magnum.conf at line {line}: {message}")
            );
        }
        let err = IniFile::parse("<t>", "[api\n").unwrap_err();
        assert_eq!(
            err.to_string(),
            "cannot parse <t> at line 1: invalid section header (must end with ]): [api"
        );
    }
}
