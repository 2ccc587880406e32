//! The HTML's flame graphs: each side's profile and each comparison's
//! differential one, drawn by `benchlab_stacks::flame` (inferno) and
//! written inline, under the page's style sheet (no style block or
//! script of their own: the serve pages' content security policy allows
//! neither).

use std::fmt::Write;

use crate::format::esc;
use crate::model::RunReport;

/// `report.stacks.profiles[index]`'s flame graph as a figure.
pub fn profile(report: &RunReport, index: usize, title: &str, o: &mut String) {
    let Some(p) = report.stacks.profiles.get(index) else {
        return;
    };
    let drawn = benchlab_stacks::flame::flame_graph(&p.folded, title);
    figure(drawn, &format!("flame-{index}"), title, o);
}

/// `report.stacks.comparisons[index]`'s differential flame graph: B's
/// stacks, red where they grew against A, blue where they shrank.
pub fn comparison(report: &RunReport, index: usize, title: &str, o: &mut String) {
    let Some(c) = report.stacks.comparisons.get(index) else {
        return;
    };
    let drawn =
        benchlab_stacks::flame::differential_graph(&c.differential, c.scale, &c.unit, title);
    figure(drawn, &format!("flame-diff-{index}"), title, o);
}

fn figure(
    drawn: Result<String, benchlab_stacks::StacksError>,
    id: &str,
    title: &str,
    o: &mut String,
) {
    let _ = write!(
        o,
        "<figure class=\"flame\"><figcaption>{}</figcaption>",
        esc(title)
    );
    match drawn {
        Ok(svg) => o.push_str(&benchlab_stacks::flame::inline(&svg, id, title)),
        Err(e) => {
            let _ = write!(o, "<p class=\"warning\">{}</p>", esc(&e.to_string()));
        }
    }
    o.push_str("</figure>\n");
}
