//! Configuration templates: text with `{{name}}` variables that benchlab
//! fills in. Nothing else is special; a variable nobody sets is an error
//! naming it and its line, never an empty string in a server's config.

use std::collections::BTreeMap;

/// One `{{name}}` in a template.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Use {
    /// The variable.
    pub name: String,
    /// Its line (1-based).
    pub line: usize,
}

/// Every variable a template uses, in order; an error (with its line) when
/// a `{{` does not open a well-formed `{{name}}`.
pub fn uses(text: &str) -> Result<Vec<Use>, String> {
    let mut out = Vec::new();
    let mut rest = text;
    let mut offset = 0;
    while let Some(i) = rest.find("{{") {
        let line = text[..offset + i].matches('\n').count() + 1;
        let after = &rest[i + 2..];
        let Some(j) = after.find("}}") else {
            return Err(format!("line {line}: `{{{{` is not closed by `}}}}`"));
        };
        let name = after[..j].trim();
        if !well_formed(name) || after[..j].contains('\n') {
            return Err(format!(
                "line {line}: `{{{{{}}}}}` is not a variable (a name of letters, digits and _, or host.NAME)",
                &after[..j]
            ));
        }
        out.push(Use {
            name: name.to_string(),
            line,
        });
        let used = i + 2 + j + 2;
        offset += used;
        rest = &rest[used..];
    }
    Ok(out)
}

/// `{{host.NAME}}`: the data address of the study's host NAME.
pub const HOST_PREFIX: &str = "host.";

/// A variable's name: letters, digits and `_`, not starting with a
/// digit; or `host.` and a host's name.
fn well_formed(name: &str) -> bool {
    if let Some(host) = name.strip_prefix(HOST_PREFIX) {
        return !host.is_empty()
            && host
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || matches!(c, '_' | '-' | '.'));
    }
    name.chars()
        .next()
        .is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
        && name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_')
}

/// The hosts a template names (`{{host.NAME}}`), each once; none when
/// it is malformed (its use reports that).
pub fn hosts(text: &str) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    for u in uses(text).unwrap_or_default() {
        if let Some(h) = u.name.strip_prefix(HOST_PREFIX) {
            if !out.iter().any(|o| o == h) {
                out.push(h.to_string());
            }
        }
    }
    out
}

/// The names among `uses` that `is_set` does not know, each once, with the
/// line of its first use: `` `x` (line 3), `y` (line 9) ``.
pub fn unset(uses: &[Use], is_set: impl Fn(&str) -> bool) -> Option<String> {
    let mut seen: Vec<&str> = Vec::new();
    let mut out = Vec::new();
    for u in uses {
        if !is_set(&u.name) && !seen.contains(&u.name.as_str()) {
            seen.push(&u.name);
            out.push(format!("`{}` (line {})", u.name, u.line));
        }
    }
    (!out.is_empty()).then(|| out.join(", "))
}

/// Fills in every variable. Errors name malformed syntax or the variables
/// left unset.
pub fn render(text: &str, vars: &BTreeMap<String, String>) -> Result<String, String> {
    let used = uses(text)?;
    if let Some(missing) = unset(&used, |n| vars.contains_key(n)) {
        return Err(format!("variable(s) not set: {missing}"));
    }
    let mut out = String::with_capacity(text.len() + 256);
    let mut rest = text;
    while let Some(i) = rest.find("{{") {
        out.push_str(&rest[..i]);
        let after = &rest[i + 2..];
        let j = after.find("}}").expect("checked by uses()");
        out.push_str(&vars[after[..j].trim()]);
        rest = &after[j + 2..];
    }
    out.push_str(rest);
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn vars(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    #[test]
    fn fills_variables_with_or_without_spaces() {
        let v = vars(&[("port", "8080"), ("bind", "127.0.0.1")]);
        assert_eq!(
            render("listen {{bind}}:{{ port }};\n", &v).unwrap(),
            "listen 127.0.0.1:8080;\n"
        );
        assert_eq!(render("no variables", &v).unwrap(), "no variables");
    }

    #[test]
    fn an_unset_variable_is_named_with_its_line() {
        let v = vars(&[("port", "1")]);
        let e = render("a\n{{port}} {{workers}}\n{{workers}} {{x}}", &v).unwrap_err();
        assert_eq!(e, "variable(s) not set: `workers` (line 2), `x` (line 3)");
    }

    #[test]
    fn malformed_braces_are_errors() {
        assert!(uses("a {{port").unwrap_err().contains("line 1"));
        assert!(uses("\n{{ two words }}").unwrap_err().contains("line 2"));
        assert!(uses("{{}}").is_err());
        assert!(uses("{{9x}}").is_err());
        assert!(uses("{{host.}}").is_err());
        assert!(uses("{{host.a b}}").is_err());
        let v = vars(&[("host.b1-direct", "10.0.0.2")]);
        assert_eq!(
            render("to {{ host.b1-direct }}", &v).unwrap(),
            "to 10.0.0.2"
        );
        assert_eq!(
            hosts("{{host.a}} {{port}} {{host.b}} {{host.a}}"),
            ["a", "b"]
        );
    }

    #[test]
    fn a_value_holding_braces_is_not_expanded_again() {
        let v = vars(&[("a", "{{b}}")]);
        assert_eq!(render("{{a}}", &v).unwrap(), "{{b}}");
    }
}
