//! The commented sample configuration printed by `magnumd config sample`, laid out like
//! oslo-config-generator's: every option commented out at its default.

use super::Config;
use super::registry::{OptionInfo, SectionInfo};

/// Width of the sample's comment lines, as in Magnum's generator settings.
const WRAP_WIDTH: usize = 79;

/// The sample magnum.conf: each section, and for each option its help text and type as a
/// comment followed by `#name = default`.
pub fn sample() -> String {
    let mut out = String::from(
        "# Sample magnum.conf for magnum-rs, generated from its option registry.\n\
         # Every option is commented out and shows its default value.\n",
    );
    for section in Config::section_infos() {
        write_section(&mut out, &section);
    }
    out
}

fn write_section(out: &mut String, section: &SectionInfo) {
    out.push_str(&format!("\n[{}]\n", section.name));
    if !section.help.is_empty() {
        out.push('\n');
        push_comment(out, section.help);
    }
    for option in &section.options {
        out.push('\n');
        write_option(out, option);
    }
}

fn write_option(out: &mut String, option: &OptionInfo) {
    let spec = &option.spec;
    let help = if option.help.is_empty() {
        format!("({})", option.type_name)
    } else {
        format!("{} ({})", option.help, option.type_name)
    };
    if spec.legacy {
        push_comment(out, &format!("DEPRECATED: {help}"));
    } else {
        push_comment(out, &help);
    }
    match (spec.min, option.unsigned) {
        (Some(min), _) => out.push_str(&format!("# Minimum value: {min}\n")),
        (None, true) => out.push_str("# Minimum value: 0\n"),
        (None, false) => {}
    }
    if let Some(max) = spec.max {
        out.push_str(&format!("# Maximum value: {max}\n"));
    }
    if !spec.choices.is_empty() {
        push_comment(
            out,
            &format!("Possible values: {}", spec.choices.join(", ")),
        );
    }
    if !spec.item_choices.is_empty() {
        push_comment(
            out,
            &format!("Possible items: {}", spec.item_choices.join(", ")),
        );
    }
    if !spec.aliases.is_empty() {
        push_comment(
            out,
            &format!("Deprecated names: {}", spec.aliases.join(", ")),
        );
    }
    if spec.legacy {
        out.push_str("# Accepted for compatibility with older files and ignored.\n");
    }
    let name = option.name;
    if let Some(text) = spec.sample_default {
        out.push_str(&format!("#{name} = {text}\n"));
    } else if spec.multi {
        if option.default.is_empty() {
            out.push_str(&format!("#{name} =\n"));
        }
        for value in &option.default {
            out.push_str(&format!("#{name} = {value}\n"));
        }
    } else {
        match option.default.first() {
            None => out.push_str(&format!("#{name} = <None>\n")),
            Some(value) if value.is_empty() => out.push_str(&format!("#{name} =\n")),
            Some(value) => out.push_str(&format!("#{name} = {value}\n")),
        }
    }
}

/// Writes `text` as `# ` comment lines wrapped at [`WRAP_WIDTH`].
fn push_comment(out: &mut String, text: &str) {
    let width = WRAP_WIDTH - 2;
    let mut line = String::new();
    for word in text.split_whitespace() {
        if !line.is_empty() && line.len() + 1 + word.len() > width {
            out.push_str(&format!("# {line}\n"));
            line.clear();
        }
        if !line.is_empty() {
            line.push(' ');
        }
        line.push_str(word);
    }
    if !line.is_empty() {
        out.push_str(&format!("# {line}\n"));
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
mod tests {
    use super::*;

    #[test]
    fn every_section_and_option_is_in_the_sample() {
        let text = sample();
        for section in Config::section_infos() {
            assert!(
                text.contains(&format!("\n[{}]\n", section.name)),
                "missing [{}]",
                section.name
            );
            for option in &section.options {
                assert!(
                    text.contains(&format!("\n#{} =", option.name)),
                    "missing [{}] {}",
                    section.name,
                    option.name
                );
            }
        }
        for needle in [
            "[DEFAULT]",
            "#host = <hostname of this machine>",
            "#port = 9511",
            "# Minimum value: 1\n# Maximum value: 65535\n",
            "#connection = sqlite:///$state_path/magnum.sqlite",
            "#transport_url = <None>",
            "#driver =\n",
            "#policy_dirs = policy.d\n",
            "#allowed_extensions = keyUsage,extendedKeyUsage,subjectAltName,basicConstraints,subjectKeyIdentifier\n",
            "# Possible values: keystone, noauth\n",
            "#create_delay = 2.0\n",
            "#openstack_ca_file =\n",
            "# DEPRECATED: Give cluster nodes a trust",
            "# Deprecated names: tenant_name\n",
        ] {
            assert!(text.contains(needle), "sample lacks {needle:?}");
        }
    }

    #[test]
    fn comment_lines_are_wrapped() {
        for line in sample().lines().filter(|l| l.starts_with("# ")) {
            // A single long word (a URL) may overflow; nothing else does.
            assert!(
                line.len() <= WRAP_WIDTH || !line[2..].contains(' '),
                "long line: {line}"
            );
        }
    }

    #[test]
    fn sample_parses_back_to_the_defaults_without_warnings() {
        let cfg = Config::from_ini_str(&sample()).unwrap();
        assert!(cfg.warnings().is_empty(), "{:?}", cfg.warnings());
        assert_eq!(cfg, Config::default());
    }

    #[test]
    fn uncommented_sample_values_are_the_defaults() {
        // Uncomment every concrete `#name = value` line (placeholders and empty values stay
        // commented): the result must still be the default configuration.
        let text: String = sample()
            .lines()
            .map(|line| match line.strip_prefix('#') {
                Some(rest)
                    if !rest.starts_with(' ')
                        && rest
                            .split_once(" = ")
                            .is_some_and(|(_, v)| !v.is_empty() && !v.starts_with('<')) =>
                {
                    format!("{rest}\n")
                }
                _ => format!("{line}\n"),
            })
            .collect();
        assert!(text.contains("\nport = 9511\n"));
        let mut cfg = Config::from_ini_str(&text).unwrap();
        // Options magnumd does not use are named, but nothing is unknown or invalid.
        let warnings = std::mem::take(&mut cfg.warnings);
        assert!(
            warnings.len() == 1
                && warnings[0].starts_with("configuration options ignored: ")
                && !warnings[0].contains(" unknown "),
            "{warnings:?}"
        );
        assert_eq!(cfg, Config::default());
    }
}
