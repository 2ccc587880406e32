//! Where a cell's file lives, and the scratch file systems benchlab makes
//! for it: fs.matrix's targets, also used for a Samba share's
//! `document_fs` (the service's files go into the work directory).
//!
//! - A directory: benchlab creates its own subdirectory
//!   [`WORK_DIR`] in it, refuses to run when that name already exists
//!   (someone else's file, or a leftover), and removes only the file and
//!   the subdirectory it created.
//! - An image file (`mkfs` + `image_size`): created sparse at the path
//!   given (refused when the path exists), attached to a loop device with
//!   direct I/O on the backing file where the kernel allows it (so the
//!   host file system's page cache does not hide the scratch file
//!   system's out-of-cache and direct I/O behaviour), formatted, mounted
//!   with the given options in a directory benchlab creates, and undone
//!   afterwards: unmount, detach, remove the mount point and the image.
//! - A block device (`mkfs`, no `image_size`): formatted (it must not be
//!   mounted), mounted and unmounted the same way.
//!
//! Cleanup runs on every normal and error path (RAII). A killed agent
//! cannot run it, so each prepared target also has a *janitor*: a small
//! `/bin/sh` in its own session whose standard input is a pipe from the
//! agent, started before the target makes anything and told of each thing
//! as it is made. When the agent dies for any reason the pipe closes, and
//! the janitor unmounts (lazily if busy), detaches and removes what this
//! target created. After a normal cleanup the janitor is killed before
//! it can act. The one case left is the janitor itself being killed (or
//! the machine losing power): mount points are then recognizable by
//! their name, `benchlab-fs-mnt.<pid>.<n>` in the temporary directory.

use std::io::Write as _;
use std::os::unix::fs::FileTypeExt;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::atomic::{AtomicU64, Ordering};

use benchlab_core::WorkloadError;

/// The subdirectory benchlab creates in a target directory.
pub const WORK_DIR: &str = "benchlab-fs.work";
/// The file a cell writes, inside the work directory.
pub const FILE_NAME: &str = "iozone.tmp";
/// Mount points' name prefix (in the temporary directory).
pub const MOUNT_PREFIX: &str = "benchlab-fs-mnt.";

/// File systems benchlab can make.
pub const MKFS_CHOICES: &[&str] = &["none", "ext4", "xfs"];

/// Where and how the cell's file system is set up.
#[derive(Debug, Clone, PartialEq)]
pub struct TargetSpec {
    /// A directory, an image file to create, or a block device.
    pub path: PathBuf,
    /// `ext4` or `xfs` to format `path`; `None` to use the directory.
    pub mkfs: Option<String>,
    /// Extra mkfs arguments, split at whitespace.
    pub mkfs_options: String,
    /// `mount -o` options (empty: the defaults).
    pub mount_options: String,
    /// Create `path` as a sparse image of this size.
    pub image_size: Option<u64>,
}

/// How the target was set up, for the record.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct TargetInfo {
    /// The loop device uses direct I/O on its backing file.
    pub loop_direct_io: Option<bool>,
    /// The file system was made by benchlab.
    pub formatted: bool,
}

fn is_root() -> bool {
    // SAFETY: no arguments, no failure.
    unsafe { libc::geteuid() == 0 }
}

fn run(cmd: &mut Command, what: &str) -> Result<String, String> {
    let out = cmd
        .stdin(Stdio::null())
        .output()
        .map_err(|e| format!("{what}: cannot run {:?}: {e}", cmd.get_program()))?;
    if out.status.success() {
        Ok(String::from_utf8_lossy(&out.stdout).trim().to_string())
    } else {
        Err(format!(
            "{what} failed ({}): {}",
            out.status,
            String::from_utf8_lossy(&out.stderr).trim()
        ))
    }
}

fn which(tool: &str) -> bool {
    std::env::var_os("PATH")
        .map(|p| {
            std::env::split_paths(&p)
                .chain(["/sbin".into(), "/usr/sbin".into()])
                .any(|d| d.join(tool).is_file())
        })
        .unwrap_or(false)
}

/// Whether `dev` (a path) is the source of a mounted file system.
fn is_mounted_source(dev: &Path) -> bool {
    let canon = std::fs::canonicalize(dev).unwrap_or_else(|_| dev.to_path_buf());
    std::fs::read_to_string("/proc/mounts")
        .map(|m| {
            m.lines()
                .filter_map(|l| l.split_whitespace().next())
                .any(|src| Path::new(src) == canon || Path::new(src) == dev)
        })
        .unwrap_or(false)
}

/// Whether `dir` is a mount point now.
pub fn is_mount_point(dir: &Path) -> bool {
    let d = dir.to_string_lossy().replace(' ', "\\040");
    std::fs::read_to_string("/proc/mounts")
        .map(|m| {
            m.lines()
                .any(|l| l.split_whitespace().nth(1) == Some(d.as_str()))
        })
        .unwrap_or(false)
}

/// A prepared target: the work directory exists; everything it created
/// is undone by [`Prepared::cleanup`] or, failing that, on drop.
pub struct Prepared {
    /// Set once benchlab created it (never a path it did not make).
    work_dir: Option<PathBuf>,
    mount: Option<PathBuf>,
    loop_dev: Option<String>,
    image: Option<PathBuf>,
    janitor: Option<(Child, ChildStdin)>,
    info: TargetInfo,
    done: bool,
}

/// The janitor's script. It is started before the first thing a target
/// makes and told each one on its standard input once it exists or is
/// about to (`image PATH`, `mount PATH`, `work PATH`): a target killed while
/// `mkfs` runs still has a janitor that knows the image. When the input
/// closes (the agent ended, however) it undoes what it was told, in
/// reverse: the work directory, the mount, then every loop device backed
/// by the image (found by its backing file, `(deleted)` or not, so that
/// one attached just before the kill is found too) and the image. A
/// `mount` or `losetup` the dead agent had started runs on and may finish
/// after that first pass (found by tests/it/faults.rs: a mount and its loop
/// device left behind), so the janitor looks again for a second.
const JANITOR: &str = r#"
img= mnt= work=
while read -r key value; do
  case "$key" in
    image) img=$value ;;
    mount) mnt=$value ;;
    work) work=$value ;;
  esac
done
undo() {
  [ -n "$work" ] && rm -f -- "$work/iozone.tmp" && rmdir -- "$work" 2>/dev/null
  if [ -n "$mnt" ]; then
    if grep -q " $mnt " /proc/mounts; then
      umount -- "$mnt" 2>/dev/null || umount -l -- "$mnt" 2>/dev/null
    fi
    rmdir -- "$mnt" 2>/dev/null
  fi
  if [ -n "$img" ]; then
    losetup -n -O NAME,BACK-FILE 2>/dev/null | while read -r dev back; do
      case "$back" in "$img"|"$img (deleted)") losetup -d "$dev" 2>/dev/null ;; esac
    done
    rm -f -- "$img"
  fi
}
undo
for i in 1 2 3 4 5; do sleep 0.2; undo; done
exit 0
"#;

impl Prepared {
    /// The directory the cell's file goes into.
    pub fn work_dir(&self) -> &Path {
        self.work_dir
            .as_deref()
            .expect("a prepared target has its work directory")
    }

    /// The cell's file.
    pub fn file(&self) -> PathBuf {
        self.work_dir().join(FILE_NAME)
    }

    /// How it was set up.
    pub fn info(&self) -> &TargetInfo {
        &self.info
    }

    /// The mount point, when benchlab mounted a file system.
    pub fn mount_point(&self) -> Option<&Path> {
        self.mount.as_deref()
    }

    /// A target that has made nothing yet.
    fn nothing_made() -> Prepared {
        Prepared {
            work_dir: None,
            mount: None,
            loop_dev: None,
            image: None,
            janitor: None,
            info: TargetInfo::default(),
            done: false,
        }
    }

    fn start_janitor(&mut self) {
        let mut cmd = Command::new("/bin/sh");
        cmd.arg("-c")
            .arg(JANITOR)
            .arg("benchlab-fs-janitor")
            .current_dir("/")
            .stdin(Stdio::piped())
            .stdout(Stdio::null())
            .stderr(Stdio::null());
        // SAFETY: setsid is async-signal-safe; a session of its own keeps
        // the janitor out of the agent's process group and its signals.
        unsafe {
            cmd.pre_exec(|| {
                libc::setsid();
                Ok(())
            });
        }
        if let Ok(mut child) = cmd.spawn() {
            if let Some(stdin) = child.stdin.take() {
                self.janitor = Some((child, stdin));
            }
        }
    }

    /// Tells the janitor about something this target just made.
    fn tell_janitor(&mut self, what: &str, path: &Path) {
        if let Some((_, stdin)) = self.janitor.as_mut() {
            let _ = writeln!(stdin, "{what} {}", path.display());
            let _ = stdin.flush();
        }
    }

    /// Undoes everything, in reverse order; the first problem is
    /// returned (the rest is still attempted).
    pub fn cleanup(mut self) -> Result<(), String> {
        self.undo()
    }

    fn undo(&mut self) -> Result<(), String> {
        if self.done {
            return Ok(());
        }
        self.done = true;
        let mut first: Option<String> = None;
        let mut note = |r: Result<(), String>| {
            if let Err(e) = r {
                first.get_or_insert(e);
            }
        };
        if let Some(work) = self.work_dir.take() {
            let file = work.join(FILE_NAME);
            if file.exists() {
                note(
                    std::fs::remove_file(&file)
                        .map_err(|e| format!("remove {}: {e}", file.display())),
                );
            }
            note(std::fs::remove_dir(&work).map_err(|e| format!("remove {}: {e}", work.display())));
        }
        if let Some(m) = self.mount.take() {
            note(unmount(&m));
            note(std::fs::remove_dir(&m).map_err(|e| format!("remove {}: {e}", m.display())));
        }
        if let Some(dev) = self.loop_dev.take() {
            note(run(Command::new("losetup").arg("-d").arg(&dev), "losetup -d").map(drop));
        }
        if let Some(img) = self.image.take() {
            note(std::fs::remove_file(&img).map_err(|e| format!("remove {}: {e}", img.display())));
        }
        // Everything is undone: the janitor must not act any more.
        if let Some((mut child, stdin)) = self.janitor.take() {
            let _ = child.kill();
            let _ = child.wait();
            drop(stdin);
        }
        match first {
            None => Ok(()),
            Some(e) => Err(e),
        }
    }
}

impl Drop for Prepared {
    fn drop(&mut self) {
        let _ = self.undo();
    }
}

/// Unmounts, retrying briefly while busy, then lazily.
fn unmount(m: &Path) -> Result<(), String> {
    if !is_mount_point(m) {
        return Ok(());
    }
    let mut last = String::new();
    for _ in 0..10 {
        match run(Command::new("umount").arg(m), "umount") {
            Ok(_) => return Ok(()),
            Err(e) => last = e,
        }
        std::thread::sleep(std::time::Duration::from_millis(100));
    }
    run(Command::new("umount").arg("-l").arg(m), "umount -l")
        .map(drop)
        .map_err(|e| format!("{last}; {e}"))
}

/// Prepares a target for one point.
pub fn prepare(spec: &TargetSpec) -> Result<Prepared, WorkloadError> {
    static SEQ: AtomicU64 = AtomicU64::new(0);
    let mut p = Prepared::nothing_made();
    let base = match &spec.mkfs {
        None => {
            let meta = std::fs::metadata(&spec.path).map_err(|e| {
                WorkloadError::io(format!("target directory {}", spec.path.display()), e)
            })?;
            if !meta.is_dir() {
                return Err(WorkloadError::Other(format!(
                    "target {} is not a directory (give mkfs = \"ext4\" or \"xfs\" to format an image or a device)",
                    spec.path.display()
                )));
            }
            spec.path.clone()
        }
        Some(fs) => {
            if !is_root() {
                return Err(WorkloadError::Unsupported(
                    "making and mounting a file system needs root".into(),
                ));
            }
            let tool = format!("mkfs.{fs}");
            if !which(&tool) {
                let pkg = if fs == "xfs" { "xfsprogs" } else { "e2fsprogs" };
                return Err(WorkloadError::Unsupported(format!(
                    "{tool} is not installed (Debian package {pkg})"
                )));
            }
            // Before anything is made: from here on a killed agent leaves
            // work for the janitor, which is told of each thing made.
            p.start_janitor();
            let dev: String = match spec.image_size {
                Some(size) => {
                    // O_EXCL: never overwrite an existing file.
                    let f = std::fs::OpenOptions::new()
                        .write(true)
                        .create_new(true)
                        .open(&spec.path)
                        .map_err(|e| {
                            if e.kind() == std::io::ErrorKind::AlreadyExists {
                                WorkloadError::Other(format!(
                                    "image {} already exists: benchlab creates the image itself and never overwrites a file it did not create",
                                    spec.path.display()
                                ))
                            } else {
                                WorkloadError::io(
                                    format!("create image {}", spec.path.display()),
                                    e,
                                )
                            }
                        })?;
                    p.image = Some(spec.path.clone());
                    p.tell_janitor("image", &spec.path);
                    f.set_len(size).map_err(|e| {
                        WorkloadError::io(format!("size image {}", spec.path.display()), e)
                    })?;
                    drop(f);
                    let dev = run(
                        Command::new("losetup")
                            .args(["--find", "--show", "--direct-io=on"])
                            .arg(&spec.path),
                        "losetup",
                    )
                    .or_else(|_| {
                        run(
                            Command::new("losetup")
                                .args(["--find", "--show"])
                                .arg(&spec.path),
                            "losetup",
                        )
                    })
                    .map_err(WorkloadError::Other)?;
                    p.loop_dev = Some(dev.clone());
                    let name = dev.trim_start_matches("/dev/");
                    p.info.loop_direct_io = Some(
                        std::fs::read_to_string(format!("/sys/block/{name}/loop/dio"))
                            .map(|s| s.trim() == "1")
                            .unwrap_or(false),
                    );
                    dev
                }
                None => {
                    let meta = std::fs::metadata(&spec.path).map_err(|e| {
                        WorkloadError::io(format!("target device {}", spec.path.display()), e)
                    })?;
                    if !meta.file_type().is_block_device() {
                        return Err(WorkloadError::Other(format!(
                            "target {} is not a block device: give image_size to create an image file there",
                            spec.path.display()
                        )));
                    }
                    if is_mounted_source(&spec.path) {
                        return Err(WorkloadError::Other(format!(
                            "target device {} is mounted: benchlab formats only unmounted devices",
                            spec.path.display()
                        )));
                    }
                    spec.path.display().to_string()
                }
            };
            let mut mkfs = Command::new(&tool);
            match fs.as_str() {
                "ext4" => mkfs.args(["-F", "-q"]),
                _ => mkfs.args(["-f", "-q"]),
            };
            mkfs.args(spec.mkfs_options.split_whitespace()).arg(&dev);
            run(&mut mkfs, &tool).map_err(WorkloadError::Other)?;
            p.info.formatted = true;
            let mnt = std::env::temp_dir().join(format!(
                "{MOUNT_PREFIX}{}.{}",
                std::process::id(),
                SEQ.fetch_add(1, Ordering::Relaxed)
            ));
            std::fs::create_dir(&mnt).map_err(|e| {
                WorkloadError::io(format!("create mount point {}", mnt.display()), e)
            })?;
            p.mount = Some(mnt.clone());
            p.tell_janitor("mount", &mnt);
            let mut mount = Command::new("mount");
            mount.args(["-t", fs]);
            if !spec.mount_options.trim().is_empty() {
                mount.args(["-o", spec.mount_options.trim()]);
            }
            mount.arg(&dev).arg(&mnt);
            if let Err(e) = run(&mut mount, "mount") {
                return Err(if spec.mount_options.trim().is_empty() {
                    WorkloadError::Other(e)
                } else {
                    WorkloadError::Unsupported(format!(
                        "this kernel refuses to mount {fs} with options `{}`: {e}",
                        spec.mount_options.trim()
                    ))
                });
            }
            mnt
        }
    };
    let work = base.join(WORK_DIR);
    std::fs::create_dir(&work).map_err(|e| {
        if e.kind() == std::io::ErrorKind::AlreadyExists {
            WorkloadError::Other(format!(
                "{} already exists: benchlab refuses a target where its file names are taken (it only removes what it created; delete it by hand if it is a leftover)",
                work.display()
            ))
        } else {
            WorkloadError::io(format!("create {}", work.display()), e)
        }
    })?;
    if p.janitor.is_none() {
        p.start_janitor();
    }
    p.tell_janitor("work", &work);
    p.work_dir = Some(work);
    Ok(p)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A target that made nothing yet and counts as cleaned up (its
    /// Drop leaves the janitor to the test).
    fn bare() -> Prepared {
        let mut p = Prepared::nothing_made();
        p.done = true;
        p
    }

    fn dir_spec(path: &Path) -> TargetSpec {
        TargetSpec {
            path: path.to_path_buf(),
            mkfs: None,
            mkfs_options: String::new(),
            mount_options: String::new(),
            image_size: None,
        }
    }

    /// Issue 14 (found by tests/it/faults.rs): an agent killed while `mkfs`
    /// ran left its loop device and image, because the janitor was only
    /// started once the file system was mounted. Now it knows the image
    /// as soon as it exists, and detaches whatever loop device it backs.
    /// A mount the dead agent had started finishes after the janitor's
    /// first pass (found by tests/it/faults.rs: the mount and its loop device
    /// were left): the janitor looks again and undoes it too.
    #[test]
    fn a_janitor_undoes_a_mount_that_finishes_after_the_agent_died() {
        if !is_root() || !which("mount") {
            return benchlab_testkit::missing("root and mount");
        }
        let d = tempfile::tempdir().unwrap();
        let mnt = d.path().join("mnt");
        // The janitor's passes come at least 0.2 s apart, its last no
        // sooner than 1 s after it started. A mount that lands within
        // 0.8 s of the start therefore has a pass after it; a slower one
        // (a loaded machine) proves nothing, so the scenario is retried.
        // The janitor's passes also remove the empty mount point, which
        // is why creating it and mounting are retried until one lands
        // (found by a fresh-clone CI: "mount point does not exist").
        for _attempt in 0..10 {
            std::fs::create_dir_all(&mnt).unwrap();
            let mut p = bare();
            let started = std::time::Instant::now();
            p.start_janitor();
            p.tell_janitor("mount", &mnt);
            // The agent dies while its mount runs, and the mount lands
            // after the janitor's first pass has looked (which found
            // nothing mounted and removed the mount point).
            let (mut child, stdin) = p.janitor.take().unwrap();
            drop(stdin);
            std::thread::sleep(std::time::Duration::from_millis(100));
            let mut mounted = false;
            while started.elapsed() < std::time::Duration::from_millis(800) {
                let _ = std::fs::create_dir(&mnt);
                if run(
                    Command::new("mount")
                        .args(["-t", "tmpfs", "benchlab-test"])
                        .arg(&mnt),
                    "mount",
                )
                .is_ok()
                {
                    mounted = true;
                    break;
                }
            }
            let in_time = started.elapsed() < std::time::Duration::from_millis(800);
            child.wait().unwrap();
            if !mounted || !in_time {
                // Too slow to prove anything: undo by hand and retry.
                if mounted {
                    let _ = Command::new("umount").arg(&mnt).status();
                }
                continue;
            }
            let mounts = std::fs::read_to_string("/proc/mounts").unwrap();
            assert!(
                !mounts.contains(&format!(" {} ", mnt.display())),
                "still mounted: {}",
                mnt.display()
            );
            assert!(!mnt.exists(), "the mount point is still there");
            return;
        }
        panic!("no mount landed within 0.8 s of the janitor's start in 10 tries");
    }

    #[test]
    fn a_janitor_told_only_of_the_image_detaches_its_loop_device() {
        if !is_root() || !which("losetup") {
            return benchlab_testkit::missing("root and losetup");
        }
        let d = tempfile::tempdir().unwrap();
        let img = d.path().join("image");
        let mut p = bare();
        p.start_janitor();
        std::fs::File::create(&img)
            .unwrap()
            .set_len(1 << 20)
            .unwrap();
        p.tell_janitor("image", &img);
        let dev = run(
            Command::new("losetup").args(["--find", "--show"]).arg(&img),
            "losetup",
        )
        .unwrap();
        // The agent dies here, as if in mkfs: its end of the pipe closes.
        let (mut child, stdin) = p.janitor.take().unwrap();
        drop(stdin);
        child.wait().unwrap();
        let name = dev.trim_start_matches("/dev/");
        let backing = std::fs::read_to_string(format!("/sys/block/{name}/loop/backing_file"));
        assert!(
            !backing.is_ok_and(|b| b.trim() == img.display().to_string()),
            "{dev} is still attached to the image"
        );
        assert!(!img.exists(), "the image is still there");
    }

    #[test]
    fn directory_target_removes_only_its_own() {
        let d = tempfile::tempdir().unwrap();
        std::fs::write(d.path().join("other"), b"keep").unwrap();
        let p = prepare(&dir_spec(d.path())).unwrap();
        assert!(p.work_dir().is_dir());
        std::fs::write(p.file(), b"x").unwrap();
        p.cleanup().unwrap();
        let left: Vec<_> = std::fs::read_dir(d.path()).unwrap().collect();
        assert_eq!(left.len(), 1);
        assert_eq!(std::fs::read(d.path().join("other")).unwrap(), b"keep");
    }

    #[test]
    fn a_taken_name_is_refused_and_left_alone() {
        let d = tempfile::tempdir().unwrap();
        std::fs::write(d.path().join(WORK_DIR), b"not benchlab's").unwrap();
        let e = prepare(&dir_spec(d.path())).err().unwrap().to_string();
        assert!(e.contains("refuses"), "{e}");
        assert_eq!(
            std::fs::read(d.path().join(WORK_DIR)).unwrap(),
            b"not benchlab's"
        );
    }

    #[test]
    fn an_existing_image_is_never_overwritten() {
        benchlab_testkit::require!(root, "mkfs.ext4");
        let d = tempfile::tempdir().unwrap();
        let img = d.path().join("img");
        std::fs::write(&img, b"precious").unwrap();
        let spec = TargetSpec {
            path: img.clone(),
            mkfs: Some("ext4".into()),
            mkfs_options: String::new(),
            mount_options: String::new(),
            image_size: Some(64 << 20),
        };
        let e = prepare(&spec).err().unwrap().to_string();
        assert!(e.contains("already exists"), "{e}");
        assert_eq!(std::fs::read(&img).unwrap(), b"precious");
    }
}
