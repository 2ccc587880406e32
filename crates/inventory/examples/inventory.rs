//! Prints this host's inventory: `cargo run -p benchlab-inventory --example
//! inventory [-- --json | --markdown]`. A quick way to see what a study's
//! appendix will say about a machine before running anything on it.

fn main() {
    let inv = benchlab_inventory::collect();
    match std::env::args().nth(1).as_deref() {
        Some("--json") => match serde_json::to_string_pretty(&inv) {
            Ok(json) => println!("{json}"),
            Err(e) => eprintln!("cannot serialize: {e}"),
        },
        Some("--markdown") => print!(
            "{}",
            benchlab_inventory::render_markdown(&[(inv.hostname.as_str(), &inv)])
        ),
        _ => print!("{}", benchlab_inventory::render_text(&inv)),
    }
}
