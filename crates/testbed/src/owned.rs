//! A study's own test bed, brought up by the run that needs it: `benchlab
//! run` on a study with a `[testbed]` table brings the bed up when it is
//! not up, and takes it down after the run; a bed the user brought up
//! (`benchlab testbed up`) is used as it is and left alone.
//!
//! Crash-proof as the bed itself is: before `up`, the run writes an owner
//! file next to the bed's state file (`NAME.run`, the run's pid). A bed
//! whose owner file names a process that is gone was left by a run that
//! crashed: [`restore_left`] (`benchlab restore`) takes it down, and the
//! next run that needs it adopts it.

use std::fs;
use std::io::Write;
use std::path::{Path, PathBuf};

use crate::bed::{self, TestbedError};
use crate::spec::{self, SpecError, TestbedSpec};

/// The `[testbed]` table of a study file, when it has one.
pub fn study_testbed(file_name: &str, text: &str) -> Result<Option<TestbedSpec>, SpecError> {
    let has = text
        .parse::<toml::Table>()
        .map(|t| t.contains_key("testbed"))
        .unwrap_or(false);
    if has {
        spec::parse_spec(file_name, text).map(Some)
    } else {
        Ok(None)
    }
}

/// A study's bed for one run: taken down when dropped if the run brought
/// it up (or adopted one a crashed run left).
#[derive(Debug)]
pub struct RunBed {
    name: String,
    dir: PathBuf,
    owned: bool,
    /// What happened, for the run's notes.
    pub note: String,
}

fn owner_path(dir: &Path, name: &str) -> PathBuf {
    dir.join(format!("{name}.run"))
}

/// The pid in an owner file, when that process still runs.
fn live_owner(path: &Path) -> Option<u32> {
    let pid: u32 = fs::read_to_string(path).ok()?.trim().parse().ok()?;
    Path::new(&format!("/proc/{pid}")).exists().then_some(pid)
}

fn write_owner(path: &Path) -> Result<(), TestbedError> {
    let io = |e: std::io::Error| TestbedError::StateIo {
        path: path.to_path_buf(),
        source: e,
    };
    let mut f = fs::File::create(path).map_err(io)?;
    writeln!(f, "{}", std::process::id()).map_err(io)?;
    f.sync_all().map_err(io)
}

impl RunBed {
    /// Brings `spec`'s bed up in `dir` for this run, or uses the one that
    /// is up.
    pub fn bring_up(spec: &TestbedSpec, dir: &Path) -> Result<RunBed, TestbedError> {
        let name = spec.name.clone();
        let owner = owner_path(dir, &name);
        let mine = |note: String| RunBed {
            name: name.clone(),
            dir: dir.to_path_buf(),
            owned: true,
            note,
        };
        match bed::status(&name, dir) {
            Ok(s) => {
                let whole = s.complete && s.objects.iter().all(|o| o.exists);
                let left = owner.exists() && live_owner(&owner).is_none();
                if let Some(pid) = live_owner(&owner).filter(|p| *p != std::process::id()) {
                    return Err(TestbedError::Busy { name, pid });
                }
                match (whole, left) {
                    (true, false) => Ok(RunBed {
                        name: name.clone(),
                        dir: dir.to_path_buf(),
                        owned: false,
                        note: format!(
                            "test bed `{name}` was up already: used as it is and left up"
                        ),
                    }),
                    (true, true) => {
                        write_owner(&owner)?;
                        Ok(mine(format!("test bed `{name}`, left up by a run that ended without taking it down, is taken down after this run")))
                    }
                    (false, true) => {
                        bed::down(&name, dir)?;
                        write_owner(&owner)?;
                        bed::up(spec, dir)?;
                        Ok(mine(format!("test bed `{name}`, left half made by a run that ended early, was made again for this run and is taken down after it")))
                    }
                    (false, false) => Err(TestbedError::HalfMade { name }),
                }
            }
            Err(TestbedError::NotRecorded { .. }) => {
                fs::create_dir_all(dir).map_err(|e| TestbedError::StateIo {
                    path: dir.to_path_buf(),
                    source: e,
                })?;
                // The owner first: a crash from here on leaves a bed that
                // `benchlab restore` knows to take down.
                write_owner(&owner)?;
                if let Err(e) = bed::up(spec, dir) {
                    let _ = fs::remove_file(&owner);
                    return Err(e);
                }
                Ok(mine(format!(
                    "test bed `{name}` brought up for this run and taken down after it"
                )))
            }
            Err(e) => Err(e),
        }
    }

    /// Whether this run brought the bed up (and takes it down).
    pub fn owned(&self) -> bool {
        self.owned
    }

    /// Takes the bed down now if this run owns it.
    pub fn take_down(&mut self) -> Result<(), TestbedError> {
        if !self.owned {
            return Ok(());
        }
        self.owned = false;
        bed::down(&self.name, &self.dir)?;
        let _ = fs::remove_file(owner_path(&self.dir, &self.name));
        Ok(())
    }
}

impl Drop for RunBed {
    fn drop(&mut self) {
        // On an error path: the state file keeps whatever `down` could not
        // remove, and the owner file stays with it for `benchlab restore`.
        let _ = self.take_down();
    }
}

/// Takes down every bed in `dir` that a run brought up and did not take
/// down (its owner process is gone): the names of the beds taken down.
pub fn restore_left(dir: &Path) -> Result<Vec<String>, TestbedError> {
    let mut out = Vec::new();
    let Ok(entries) = fs::read_dir(dir) else {
        return Ok(out);
    };
    let mut owners: Vec<PathBuf> = entries
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|x| x == "run"))
        .collect();
    owners.sort();
    for path in owners {
        if live_owner(&path).is_some() {
            continue;
        }
        let Some(name) = path.file_stem().map(|s| s.to_string_lossy().into_owned()) else {
            continue;
        };
        bed::down(&name, dir)?;
        let _ = fs::remove_file(&path);
        out.push(name);
    }
    Ok(out)
}
