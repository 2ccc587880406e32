//! The profile a configuration names, found and parsed: read by the
//! environment's switch and by the preflight's placement checks, below
//! both.

use benchlab_core::study::Study;
use benchlab_env::profile::Profile;

/// A profile a configuration names, as found and as parsed.
#[derive(Debug, Clone)]
pub struct LoadedProfile {
    /// Its name as found (a shipped profile's name, or the path).
    pub name: String,
    /// Its text, which goes to the environment agents.
    pub text: String,
    /// Parsed.
    pub profile: Profile,
}

/// The profile a configuration names, read and parsed (profiles are found
/// by name among the shipped ones, else as a path next to the study).
pub fn load_profile(study: &Study, name: &str) -> anyhow::Result<LoadedProfile> {
    let base = std::path::Path::new(&study.file).parent();
    let (name, text) = Profile::locate(name, base)?;
    let profile = Profile::parse(&name, &text)?;
    Ok(LoadedProfile {
        name,
        text,
        profile,
    })
}
