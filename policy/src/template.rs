//! The templates the project's documents are rendered through: the HTML report
//! (`report/page.html`) and the decision record's draft (`adr/record.md`). Each is rendered
//! from a `Serialize` view its module builds; the template holds the markup, the view the
//! values, already formatted.
//!
//! One minijinja environment for both, compiled into the binary:
//! - a name a template uses that its view lacks is an error, never an empty string (strict
//!   undefined);
//! - a `none` is an error too: a view says blank with the blank mark, never with a null;
//! - `.html` templates escape every value (except one filtered `|safe`, for markup the
//!   project itself drew: the charts' SVG, the page's CSS) with [`crate::chart::esc`], the one
//!   escape the charts use too; `.md` templates write values as they are.

use std::sync::OnceLock;

use minijinja::{
    AutoEscape, Environment, Error, ErrorKind, Output, State, UndefinedBehavior, Value,
};
use serde::Serialize;

/// The report page (`report.html`).
pub const PAGE: &str = "page.html";
/// A decision record's draft (`adr new`).
pub const RECORD: &str = "record.md";

const TEMPLATES: [(&str, &str); 2] =
    [(PAGE, include_str!("report/page.html")), (RECORD, include_str!("adr/record.md"))];

/// `template` rendered with `view`.
pub fn render(template: &str, view: &impl Serialize) -> anyhow::Result<String> {
    let env = environment().as_ref().map_err(|e| anyhow::anyhow!("{e:#}"))?;
    let t = env.get_template(template).map_err(|e| anyhow::anyhow!("{e:#}"))?;
    t.render(view).map_err(|e| anyhow::anyhow!("cannot render {template}: {e:#}"))
}

fn environment() -> &'static Result<Environment<'static>, Error> {
    static ENV: OnceLock<Result<Environment<'static>, Error>> = OnceLock::new();
    ENV.get_or_init(|| {
        let mut env = Environment::new();
        env.set_undefined_behavior(UndefinedBehavior::Strict);
        env.set_trim_blocks(true);
        env.set_lstrip_blocks(true);
        env.set_keep_trailing_newline(true);
        env.set_formatter(format_value);
        for (name, source) in TEMPLATES {
            env.add_template(name, source)?;
        }
        Ok(env)
    })
}

/// How a value prints: escaped for HTML by the project's escape, as it is for markdown; a
/// `none` refused.
fn format_value(out: &mut Output, state: &State, value: &Value) -> Result<(), Error> {
    if value.is_none() {
        return Err(Error::new(
            ErrorKind::InvalidOperation,
            "a view printed a none: a value not measured is the blank mark",
        ));
    }
    let text = value.to_string();
    let text = match state.auto_escape() {
        AutoEscape::Html if !value.is_safe() => crate::chart::esc(&text),
        _ => text,
    };
    out.write_str(&text).map_err(Error::from)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_template_compiles() {
        if let Err(e) = environment() {
            panic!("{e:#}");
        }
    }

    #[test]
    fn html_escapes_values_but_not_safe_markup_and_refuses_a_none() {
        let mut env = Environment::new();
        env.set_undefined_behavior(UndefinedBehavior::Strict);
        env.set_formatter(format_value);
        env.add_template("t.html", "{{ a }}|{{ b|safe }}|{{ c }}").unwrap();
        env.add_template("t.md", "{{ a }}").unwrap();
        let view = serde_json::json!({"a": "<a href='x'>&/", "b": "<svg/>", "c": 3});
        let html = env.get_template("t.html").unwrap().render(&view).unwrap();
        assert_eq!(html, "&lt;a href=&#39;x&#39;&gt;&amp;/|<svg/>|3");
        let md = env.get_template("t.md").unwrap().render(&view).unwrap();
        assert_eq!(md, "<a href='x'>&/");
        let err = env.get_template("t.md").unwrap().render(serde_json::json!({"a": null}));
        assert!(err.unwrap_err().to_string().contains("blank mark"));
        let err = env.get_template("t.md").unwrap().render(serde_json::json!({"b": 1}));
        assert!(err.is_err(), "an undefined name must be an error");
    }
}
