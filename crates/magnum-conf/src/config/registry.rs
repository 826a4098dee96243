//! The option registry: how options are declared (the `section!` macro), what is known about
//! each one at run time, and the resolver that turns parsed files into typed values with
//! oslo.config's precedence and `$name` substitution.

use super::ConfigError;
use super::ini::{IniFile, normalize_section};
use super::value::OptValue;

/// Constraints and flags of one option beyond its Rust type. Built with [`opt`] and chained
/// methods in the declarations, e.g. `opt().range(1, 65535)`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Spec {
    pub min: Option<i64>,
    pub max: Option<i64>,
    /// Allowed values of a string option (case-sensitive, as in oslo).
    pub choices: &'static [&'static str],
    /// Allowed values of each item of a list option.
    pub item_choices: &'static [&'static str],
    /// Multi-valued (oslo `MultiStrOpt`): every occurrence in every file is kept.
    pub multi: bool,
    /// Accepted for compatibility and otherwise ignored; a bad value only warns.
    pub legacy: bool,
    /// Read and type-checked, but nothing in magnumd uses the value yet.
    pub inert: bool,
    /// Shown in the sample instead of a default computed on this machine.
    pub sample_default: Option<&'static str>,
    /// Older names of the option in the same section, still read (with a warning).
    pub aliases: &'static [&'static str],
}

/// A plain option: no bounds, no choices, single-valued.
pub(crate) const fn opt() -> Spec {
    Spec {
        min: None,
        max: None,
        choices: &[],
        item_choices: &[],
        multi: false,
        legacy: false,
        inert: false,
        sample_default: None,
        aliases: &[],
    }
}

impl Spec {
    pub const fn range(self, min: i64, max: i64) -> Self {
        Self {
            min: Some(min),
            max: Some(max),
            ..self
        }
    }
    pub const fn min(self, min: i64) -> Self {
        Self {
            min: Some(min),
            ..self
        }
    }
    pub const fn choices(self, choices: &'static [&'static str]) -> Self {
        Self { choices, ..self }
    }
    pub const fn item_choices(self, item_choices: &'static [&'static str]) -> Self {
        Self {
            item_choices,
            ..self
        }
    }
    pub const fn multi(self) -> Self {
        Self {
            multi: true,
            ..self
        }
    }
    pub const fn legacy(self) -> Self {
        Self {
            legacy: true,
            ..self
        }
    }
    pub const fn inert(self) -> Self {
        Self {
            inert: true,
            ..self
        }
    }
    pub const fn sample(self, text: &'static str) -> Self {
        Self {
            sample_default: Some(text),
            ..self
        }
    }
    pub const fn aliases(self, aliases: &'static [&'static str]) -> Self {
        Self { aliases, ..self }
    }
}

/// What the registry knows about one declared option.
#[derive(Debug, Clone)]
pub(crate) struct OptionInfo {
    pub name: &'static str,
    pub help: &'static str,
    pub type_name: &'static str,
    /// The default as it would be written in a file (one entry per value of a multi option;
    /// none when the default is unset).
    pub default: Vec<String>,
    pub spec: Spec,
    pub secret: bool,
    /// The type cannot go below zero (shown as a minimum in the sample).
    pub unsigned: bool,
}

impl OptionInfo {
    pub fn new<T: OptValue>(
        name: &'static str,
        help: &'static str,
        default: &T,
        spec: Spec,
    ) -> Self {
        Self {
            name,
            help: help.trim(),
            type_name: T::type_name(&spec),
            default: default.render(&spec),
            spec,
            secret: T::SECRET,
            unsigned: T::UNSIGNED,
        }
    }
}

/// One declared section, as listed by `Config::section_infos`.
#[derive(Debug, Clone)]
pub(crate) struct SectionInfo {
    pub name: &'static str,
    pub help: &'static str,
    pub options: Vec<OptionInfo>,
    /// Library options we accept without using them (no type check, not in the sample).
    pub accepted: &'static [&'static str],
}

impl SectionInfo {
    fn option(&self, name: &str) -> Option<&OptionInfo> {
        self.options.iter().find(|o| o.name == name)
    }
}

/// Sections of libraries and removed features: any key is accepted silently.
pub(crate) const IGNORED_SECTIONS: &[&str] = &[
    // Removed from Magnum (Heat driver, April 2026) but present in older files.
    "heat_client",
    "cluster_heat",
    "bay",
    "baymodel",
    // Library groups Magnum registers but magnum-rs does not use.
    "cors",
    "healthcheck",
    "oslo_concurrency",
    "oslo_middleware",
    "oslo_messaging_amqp",
    "oslo_messaging_kafka",
    "oslo_reports",
    "oslo_versionedobjects",
    "profiler_jaeger",
    "profiler_otlp",
    "ssl",
];

/// Declared sections none of whose options magnumd uses yet (the options are still
/// type-checked).
pub(crate) const INERT_SECTIONS: &[&str] = &["magnum_client", "profiler", "proxy"];

pub(crate) struct Registry {
    pub sections: Vec<SectionInfo>,
}

impl Registry {
    fn section(&self, name: &str) -> Option<&SectionInfo> {
        self.sections.iter().find(|s| s.name == name)
    }

    fn option(&self, section: &str, name: &str) -> Option<&OptionInfo> {
        self.section(section).and_then(|s| s.option(name))
    }

    /// Declared or accepted: something `$name` may refer to.
    fn knows(&self, section: &str, name: &str) -> bool {
        self.section(section)
            .is_some_and(|s| s.option(name).is_some() || s.accepted.contains(&name))
    }

    /// Uses of old option names, then one line naming every option the files set that
    /// magnumd does not honour: known to upstream but without effect here (legacy,
    /// library, removed-feature and not-yet-used options), then unknown ones. Deployment
    /// tools write dozens of such options; one line keeps a start's log readable while
    /// still naming each. An option set to an empty value asks for nothing and is left out
    /// of the first list (kolla-ansible writes `ca_file =` for every client).
    pub fn warnings(&self, files: &[IniFile]) -> Vec<String> {
        let mut deprecated: Vec<String> = Vec::new();
        let mut ignored: Vec<String> = Vec::new();
        let mut unknown: Vec<String> = Vec::new();
        let add = |list: &mut Vec<String>, item: String| {
            if !list.contains(&item) {
                list.push(item);
            }
        };
        for file in files {
            for section in &file.sections {
                let name = section.name.as_str();
                let info = self.section(name);
                if info.is_none() && !IGNORED_SECTIONS.contains(&name) {
                    if section.entries.is_empty() {
                        add(&mut unknown, format!("[{}]", section.written));
                    }
                    for (key, _) in &section.entries {
                        add(&mut unknown, format!("[{}] {key}", section.written));
                    }
                    continue;
                }
                let inert_section = INERT_SECTIONS.contains(&name);
                for (key, value) in &section.entries {
                    let item = format!("[{name}] {key}");
                    let Some(info) = info else {
                        // A section of a library or a removed feature.
                        if !value.trim().is_empty() {
                            add(&mut ignored, item);
                        }
                        continue;
                    };
                    if let Some(o) = info.option(key) {
                        if (inert_section || o.spec.legacy || o.spec.inert)
                            && !value.trim().is_empty()
                        {
                            add(&mut ignored, item);
                        }
                    } else if info.accepted.contains(&key.as_str()) {
                        if !value.trim().is_empty() {
                            add(&mut ignored, item);
                        }
                    } else if let Some(o) = info
                        .options
                        .iter()
                        .find(|o| o.spec.aliases.contains(&key.as_str()))
                    {
                        add(
                            &mut deprecated,
                            format!("deprecated option [{name}] {key}: use {} instead", o.name),
                        );
                        if inert_section || o.spec.legacy || o.spec.inert {
                            add(&mut ignored, item);
                        }
                    } else {
                        add(&mut unknown, item);
                    }
                }
            }
        }
        let mut out = deprecated;
        let mut parts = Vec::new();
        if !ignored.is_empty() {
            parts.push(format!(
                "{} without effect in magnumd ({})",
                ignored.len(),
                ignored.join(", ")
            ));
        }
        if !unknown.is_empty() {
            parts.push(format!(
                "{} unknown ({})",
                unknown.len(),
                unknown.join(", ")
            ));
        }
        if !parts.is_empty() {
            out.push(format!(
                "configuration options ignored: {}",
                parts.join("; ")
            ));
        }
        out
    }
}

/// Turns the parsed files into typed values, one option at a time.
pub(crate) struct Resolver<'a> {
    registry: &'a Registry,
    files: &'a [IniFile],
    warnings: Vec<String>,
    /// Options whose value is being substituted, to report reference loops.
    stack: Vec<(String, String)>,
    /// Set when a substitution pulled in a secret option, so errors about the resulting
    /// value hide it too.
    used_secret: bool,
}

impl<'a> Resolver<'a> {
    pub fn new(registry: &'a Registry, files: &'a [IniFile]) -> Self {
        Self {
            registry,
            files,
            warnings: Vec::new(),
            stack: Vec::new(),
            used_secret: false,
        }
    }

    pub fn into_warnings(self) -> Vec<String> {
        self.warnings
    }

    /// The typed value of `[section] name`: from the files if set there, else `default`.
    pub fn value<T: OptValue>(
        &mut self,
        section: &str,
        name: &str,
        spec: &Spec,
        default: T,
    ) -> Result<T, ConfigError> {
        let mut raws = self.file_values(section, name, spec);
        if raws.is_empty() {
            let rendered = default.render(spec);
            // Defaults may refer to other options too (`$state_path/magnum.sqlite`).
            if !rendered.iter().any(|r| r.contains('$')) {
                return Ok(default);
            }
            raws = rendered;
        }
        self.used_secret = false;
        self.stack.push((section.to_owned(), name.to_owned()));
        let substituted = raws
            .iter()
            .map(|raw| self.substitute(section, name, raw))
            .collect::<Result<Vec<_>, _>>();
        self.stack.pop();
        let outcome = match substituted {
            // oslo reads an empty number as "unset"; a typed field falls back to its default.
            Ok(subst) if T::EMPTY_IS_UNSET && subst.last().is_some_and(|s| s.trim().is_empty()) => {
                return Ok(default);
            }
            Ok(subst) => T::parse_all(&subst, spec).map_err(|invalid| ConfigError::InvalidValue {
                section: section.to_owned(),
                option: name.to_owned(),
                reason: invalid.describe(T::SECRET || self.used_secret),
            }),
            Err(err) => Err(err),
        };
        match outcome {
            Ok(value) => Ok(value),
            Err(err) if spec.legacy => {
                self.warnings
                    .push(format!("{err}; legacy option ignored, default kept"));
                Ok(default)
            }
            Err(err) => Err(err),
        }
    }

    /// The raw occurrences of an option, with oslo's precedence: a single-valued option takes
    /// the last occurrence in the newest file that sets it (under its name or an alias); a
    /// multi-valued one takes every occurrence, oldest file first.
    fn file_values(&self, section: &str, name: &str, spec: &Spec) -> Vec<String> {
        let names = || std::iter::once(name).chain(spec.aliases.iter().copied());
        if spec.multi {
            return self
                .files
                .iter()
                .flat_map(|f| names().flat_map(move |n| f.values(section, n)))
                .map(str::to_owned)
                .collect();
        }
        for file in self.files.iter().rev() {
            for n in names() {
                if let Some(last) = file.values(section, n).last() {
                    return vec![last.to_owned()];
                }
            }
        }
        Vec::new()
    }

    /// Expands `$name`, `${name}`, `$section.name` and `${section.name}` in a value of
    /// `[section] option`; `$$` (or `\$`) is a literal `$`, and a `$` that starts no reference
    /// is kept. A bare name refers to the same section, else to `[DEFAULT]`.
    pub fn substitute(
        &mut self,
        section: &str,
        option: &str,
        text: &str,
    ) -> Result<String, ConfigError> {
        if !text.contains('$') {
            return Ok(text.to_owned());
        }
        let text = text.replace("\\$", "$$");
        let mut out = String::with_capacity(text.len());
        let mut rest = text.as_str();
        while let Some(pos) = rest.find('$') {
            out.push_str(&rest[..pos]);
            let after = &rest[pos + 1..];
            if let Some(tail) = after.strip_prefix('$') {
                out.push('$');
                rest = tail;
                continue;
            }
            let reference = match after.strip_prefix('{') {
                Some(inner) => {
                    let len = ident_len(inner);
                    (len > 0 && inner[len..].starts_with('}')).then(|| (&inner[..len], len + 2))
                }
                None => {
                    let len = ident_len(after);
                    (len > 0).then(|| (&after[..len], len))
                }
            };
            match reference {
                Some((key, consumed)) => {
                    let value = self.reference(section, option, key)?;
                    out.push_str(&value);
                    rest = &after[consumed..];
                }
                None => {
                    out.push('$');
                    rest = after;
                }
            }
        }
        out.push_str(rest);
        Ok(out)
    }

    /// The text `$key` stands for, written in `[section] option`.
    fn reference(&mut self, section: &str, option: &str, key: &str) -> Result<String, ConfigError> {
        let dotted = key.split_once('.').and_then(|(group, name)| {
            let group = normalize_section(group);
            self.registry.knows(&group, name).then_some((group, name))
        });
        let (target_section, target_name) = match dotted {
            Some((group, name)) => (group, name),
            None if self.registry.knows(section, key) => (section.to_owned(), key),
            None if self.registry.knows("DEFAULT", key) => ("DEFAULT".to_owned(), key),
            None => {
                let reason = match key.split_once('.') {
                    // oslo reads `$host.pem` as option `pem` of section `host`.
                    Some((first, rest)) => format!(
                        "${key} is not an option (to follow a reference with '.', \
                         write ${{{first}}}.{rest})"
                    ),
                    None if section == "DEFAULT" => format!("${key} is not an option of [DEFAULT]"),
                    None => format!("${key} is not an option of [{section}] or [DEFAULT]"),
                };
                return Err(ConfigError::Substitution {
                    section: section.to_owned(),
                    option: option.to_owned(),
                    reason,
                });
            }
        };
        let target = (target_section, target_name.to_owned());
        if self.stack.contains(&target) {
            return Err(ConfigError::Substitution {
                section: section.to_owned(),
                option: option.to_owned(),
                reason: format!("${key} forms a reference loop"),
            });
        }
        let (spec, default) = match self.registry.option(&target.0, &target.1) {
            Some(info) => {
                self.used_secret |= info.secret;
                (info.spec, info.default.clone())
            }
            // An accepted library option: its file value or nothing.
            None => (opt(), Vec::new()),
        };
        let mut raws = self.file_values(&target.0, &target.1, &spec);
        if raws.is_empty() {
            raws = default;
        }
        self.stack.push(target.clone());
        let expanded = raws
            .iter()
            .map(|raw| self.substitute(&target.0, &target.1, raw))
            .collect::<Result<Vec<_>, _>>();
        self.stack.pop();
        Ok(expanded?.join(","))
    }
}

/// Length of the reference name at the start of `s` (`[_a-zA-Z][._a-zA-Z0-9]*`), 0 if none.
fn ident_len(s: &str) -> usize {
    match s.chars().next() {
        Some(c) if c == '_' || c.is_ascii_alphabetic() => {}
        _ => return 0,
    }
    s.find(|c: char| !(c == '_' || c == '.' || c.is_ascii_alphanumeric()))
        .unwrap_or(s.len())
}

/// The spec of an option declaration: `opt()` when none is written.
macro_rules! opt_spec {
    () => {
        $crate::config::registry::opt()
    };
    ($spec:expr) => {
        $spec
    };
}
pub(crate) use opt_spec;

/// Declares one section struct. Each option is written once, as
/// `/// help text` + `name: Type = default[, spec];`; the doc comment is both the rustdoc and
/// the help text of the sample. An optional `accept [..]` lists library options that are
/// accepted silently but not used.
macro_rules! section {
    (
        $(#[doc = $sdoc:literal])*
        pub struct $name:ident {
            $(
                $(#[doc = $doc:literal])*
                $field:ident : $ty:ty = $default:expr $(, $spec:expr)? ;
            )*
        }
        $(accept [$($accepted:literal),* $(,)?])?
    ) => {
        $(#[doc = $sdoc])*
        #[derive(Debug, Clone, PartialEq)]
        pub struct $name {
            $( $(#[doc = $doc])* pub $field: $ty, )*
        }

        impl Default for $name {
            fn default() -> Self {
                Self { $( $field: $default, )* }
            }
        }

        impl $name {
            pub(crate) const ACCEPTED: &'static [&'static str] = &[$($($accepted),*)?];

            pub(crate) fn options() -> Vec<$crate::config::registry::OptionInfo> {
                let defaults = Self::default();
                vec![$(
                    $crate::config::registry::OptionInfo::new(
                        stringify!($field),
                        concat!($($doc),*),
                        &defaults.$field,
                        $crate::config::registry::opt_spec!($($spec)?),
                    ),
                )*]
            }

            pub(crate) fn resolve(
                resolver: &mut $crate::config::registry::Resolver<'_>,
                section: &str,
            ) -> Result<Self, $crate::config::ConfigError> {
                let defaults = Self::default();
                Ok(Self {$(
                    $field: resolver.value(
                        section,
                        stringify!($field),
                        &$crate::config::registry::opt_spec!($($spec)?),
                        defaults.$field,
                    )?,
                )*})
            }
        }
    };
}
pub(crate) use section;
