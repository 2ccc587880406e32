//! The server's own files: its stylesheet (`/style.css`: the report's
//! style, then the server's, light and dark) and its icon
//! (`/favicon.svg`, also answered at `/favicon.ico`, where browsers ask
//! without being told). Served from this server, so the content policy
//! allows them as `'self'` and still no inline style but the hashed ones.

use crate::http::Response;

/// The server's part of the stylesheet, after the report's: colours as
/// variables (light by default, dark when the system prefers it), tables
/// that scroll inside themselves instead of widening the page, and a
/// layout that reads at phone width.
const UI_CSS: &str = r#"
:root{color-scheme:light dark;--fg:#1d1f21;--muted:#555;--bg:#fff;--panel:#f4f5f7;--line:#d0d4d9;--link:#0b62a4;--head:#eef0f3;--better:#dff3df;--worse:#fbe1e1;--diff:#fff3c4;--accent:#0072b2}
@media (prefers-color-scheme:dark){:root{--fg:#e4e6e8;--muted:#a9afb5;--bg:#16181b;--panel:#1f2226;--line:#3a3f45;--link:#6cb6ff;--head:#24282d;--better:#1f3a24;--worse:#45252a;--diff:#3d3518;--accent:#56b4e9}}
html{-webkit-text-size-adjust:100%}
body{background:var(--bg);color:var(--fg);margin:0 auto;padding:0 1em 3em;max-width:1100px;line-height:1.45;overflow-wrap:break-word}
a{color:var(--link)}
header.top{display:flex;flex-wrap:wrap;align-items:center;gap:.3em 1.2em;border-bottom:1px solid var(--line);padding:.6em 0;margin-bottom:1em}
header.top .brand{font-weight:700;text-decoration:none;color:var(--fg);display:flex;align-items:center;gap:.4em}
header.top nav{display:flex;flex-wrap:wrap;row-gap:.3em}header.top nav a{margin-right:1em;text-decoration:none}header.top nav a.here{font-weight:700;text-decoration:underline}
h1{font-size:1.5em;margin:.4em 0}h2{border-bottom:1px solid var(--line)}
table{display:block;max-width:100%;overflow-x:auto;border-collapse:collapse}
div.scroll>table{display:table;max-width:none;overflow:visible}
div.scroll{background:linear-gradient(to left,var(--bg) 30%,transparent) right/3em 100% no-repeat local,radial-gradient(farthest-side at 100% 50%,rgba(0,0,0,.45),transparent) right/1em 100% no-repeat scroll}
div.scroll th:first-child,div.scroll td:first-child{background:var(--bg)}div.scroll th:first-child{background:var(--head)}div.scroll tr.diff td:first-child{background:var(--diff)}
th,td{border:1px solid var(--line)}th{background:var(--head)}
td{overflow-wrap:normal}
td.better{background:var(--better)}td.worse{background:var(--worse)}td.noise,td.inconclusive,.legend,.small{color:var(--muted)}
tr.diff td{background:var(--diff)}
pre{background:var(--panel);max-width:100%;overflow-x:auto}
svg.chart{max-width:100%;height:auto}
@media (prefers-color-scheme:dark){svg.chart{background:#fafafa;border-radius:4px}}
figure.heat{max-width:100%;margin:0 0 1em}
.downloads a{margin-right:.8em}.err{color:#c0392b}
form.pick td{text-align:left}
form.filters{display:flex;flex-wrap:wrap;gap:.5em 1em;align-items:end;background:var(--panel);padding:.6em .8em;border-radius:6px;margin:.6em 0}
form.filters label{display:flex;flex-direction:column;font-size:.85em;color:var(--muted)}
input,select,button{font:inherit;color:inherit;background:var(--bg);border:1px solid var(--line);border-radius:4px;padding:.25em .4em;max-width:100%}
button{background:var(--accent);color:#fff;border:0;padding:.35em .9em;cursor:pointer}
.badge{display:inline-block;font-size:.75em;padding:0 .45em;border-radius:.8em;border:1px solid var(--line);color:var(--muted);margin-left:.3em;white-space:nowrap}
.badge.trial{border-color:#e69f00;color:#b47a00}.badge.published{border-color:#cc79a7;color:#a04f84}
.badge.change,.badge.failures{border-color:#d55e00;color:#b34700}
.st-failed,.st-interrupted{color:#c0392b}.st-running{color:#0072b2}
td.when{white-space:nowrap}
.pager{display:flex;flex-wrap:wrap;gap:.4em 1em;align-items:center;margin:.8em 0}
th a{text-decoration:none;color:inherit}th a.sorted{text-decoration:underline}
#news{background:var(--diff);padding:.3em .6em;display:none}
nav.toc{background:var(--panel);border-radius:6px;padding:.4em .8em;margin:1em 0}
nav.toc summary{cursor:pointer;font-weight:700}
.changes li{margin:.2em 0}
@media (max-width:600px){body{padding:0 .6em 2em}h1{font-size:1.25em}table{font-size:.82em}th,td{padding:.2em .35em}}
"#;

/// The icon: a bar chart with a rising line, in the charts' first two
/// colours.
const FAVICON: &str = r##"<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 32 32"><rect width="32" height="32" rx="6" fill="#0072b2"/><rect x="6" y="17" width="5" height="9" fill="#fff"/><rect x="13.5" y="12" width="5" height="14" fill="#fff"/><rect x="21" y="8" width="5" height="18" fill="#fff"/><path d="M5 14L14 9L20 11L27 5" stroke="#e69f00" stroke-width="2.5" fill="none" stroke-linecap="round"/></svg>"##;

/// The whole stylesheet.
pub(crate) fn stylesheet() -> String {
    format!("{}{UI_CSS}", benchlab_report::html::style())
}

/// `/style.css`, `/favicon.svg`, `/favicon.ico`; None for other paths.
pub(crate) fn asset(path: &str) -> Option<Response> {
    let (content_type, body) = match path {
        "/style.css" => ("text/css; charset=utf-8", stylesheet()),
        "/favicon.svg" | "/favicon.ico" => ("image/svg+xml", FAVICON.to_string()),
        _ => return None,
    };
    Some(Response {
        status: 200,
        content_type,
        headers: Vec::new(),
        body: body.into_bytes(),
    })
}
