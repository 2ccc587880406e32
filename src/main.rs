//! The `benchlab` binary: everything lives in `benchlab-cli`.
fn main() {
    std::process::exit(benchlab_cli::main());
}
