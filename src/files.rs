//! File-system primitives every tool shares: private directories, atomic replacement,
//! regular-file-only opens (nothing dreamkit reads can make it wait forever) and appends that
//! undo themselves when they fall short.

use std::fmt;
use std::fs::{File, Metadata, OpenOptions};
use std::io::{self, Read, Seek, Write};
use std::os::unix::fs::{DirBuilderExt, FileTypeExt, OpenOptionsExt, PermissionsExt};
use std::path::Path;
use std::time::SystemTime;

use crate::cli::signals;

/// Creates `dir` and any missing parents with mode 0700 (an existing directory is left as is).
pub fn create_private_dir(dir: &Path) -> std::io::Result<()> {
    std::fs::DirBuilder::new()
        .recursive(true)
        .mode(0o700)
        .create(dir)
}

/// Refuses `dir` when it is a symbolic link: a folder of dreamkit's own (a state dir's
/// `tasks/`, `snapshots/`) is written only where it is, never wherever a link put in its place
/// leads.
pub fn refuse_link(dir: &Path) -> io::Result<()> {
    match std::fs::symlink_metadata(dir) {
        Ok(meta) if meta.file_type().is_symlink() => Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            format!("{} is a symbolic link: not followed", dir.display()),
        )),
        _ => Ok(()),
    }
}

pub use crate::cli::failure::{is_not_regular, NotRegular};

/// The error [`open_regular`] gives for a FIFO, device, socket or directory.
pub fn not_regular(file_type: std::fs::FileType) -> io::Error {
    io::Error::new(
        io::ErrorKind::InvalidInput,
        NotRegular(file_kind(file_type)),
    )
}

/// What a file that is not a regular file is, for messages: "a FIFO", "a socket", ...
pub fn file_kind(file_type: std::fs::FileType) -> &'static str {
    if file_type.is_fifo() {
        "a FIFO"
    } else if file_type.is_char_device() {
        "a character device"
    } else if file_type.is_block_device() {
        "a block device"
    } else if file_type.is_socket() {
        "a socket"
    } else if file_type.is_dir() {
        "a directory"
    } else if file_type.is_file() {
        "a regular file"
    } else {
        "not a file"
    }
}

/// True for an error that means "this name leads nowhere": missing, a dangling link or a
/// symlink loop. Directory listings skip such entries.
pub fn is_unresolvable(err: &io::Error) -> bool {
    err.kind() == io::ErrorKind::NotFound || err.raw_os_error() == Some(libc::ELOOP)
}

/// Opens `path` for reading, following symlinks, only if it is a regular file. Every reader
/// of a file it did not create goes through here: `O_NONBLOCK` makes the open of a FIFO
/// return at once instead of waiting for a writer, and the `fstat` on the open descriptor (no
/// race with a rename) then refuses FIFOs, devices (`/dev/zero` never ends), sockets and
/// directories.
pub fn open_regular(path: &Path) -> io::Result<File> {
    Ok(open_regular_with(path, 0)?.0)
}

/// [`open_regular`] without following a symlink in the last component (`ELOOP`): for
/// listings walked by entry type, where a symlink swapped in since must not be followed.
pub fn open_regular_no_follow(path: &Path) -> io::Result<File> {
    Ok(open_regular_with(path, libc::O_NOFOLLOW)?.0)
}

/// [`open_regular_no_follow`], with the metadata its check read (no second `fstat`), for one
/// [`read_sized`]: `O_NONBLOCK` is left set (regular files ignore it; `read_sized` clears it
/// on the `EAGAIN` a file system that does not might give), which saves a system call a file
/// on the scans that read thousands.
pub fn open_regular_no_follow_with_metadata(path: &Path) -> io::Result<(File, Metadata)> {
    open_regular_nonblocking(path, libc::O_NOFOLLOW)
}

fn open_regular_with(path: &Path, flags: i32) -> io::Result<(File, Metadata)> {
    let (file, meta) = open_regular_nonblocking(path, flags)?;
    clear_status_flags(&file)?;
    Ok((file, meta))
}

/// The open and the regular-file check of [`open_regular_with`], `O_NONBLOCK` still set.
fn open_regular_nonblocking(path: &Path, flags: i32) -> io::Result<(File, Metadata)> {
    let file = OpenOptions::new()
        .read(true)
        // std adds O_CLOEXEC; O_NOCTTY keeps a terminal device from becoming ours.
        .custom_flags(libc::O_NONBLOCK | libc::O_NOCTTY | flags)
        .open(path)
        .map_err(|e| unopenable_named(e, path, flags & libc::O_NOFOLLOW == 0))?;
    let meta = file.metadata()?;
    if !meta.is_file() {
        return Err(not_regular(meta.file_type()));
    }
    Ok((file, meta))
}

/// A socket cannot be opened, nor a FIFO for writing without a reader (`ENXIO`, "No such
/// device or address"): said as what it is, like every other file that is not a regular file.
pub fn unopenable_named(err: io::Error, path: &Path, follow: bool) -> io::Error {
    if err.raw_os_error() != Some(libc::ENXIO) {
        return err;
    }
    let meta = if follow {
        std::fs::metadata(path)
    } else {
        std::fs::symlink_metadata(path)
    };
    match meta {
        Ok(meta) if !meta.is_file() => not_regular(meta.file_type()),
        _ => err,
    }
}

/// Regular files ignore `O_NONBLOCK`, but no read or write of ours may ever see `EAGAIN`.
/// Of the flags `F_SETFL` changes, a read-only open here sets only `O_NONBLOCK`: clearing
/// them all clears it, in one system call.
fn clear_status_flags(file: &File) -> io::Result<()> {
    rustix::fs::fcntl_setfl(file, rustix::fs::OFlags::empty())?;
    Ok(())
}

/// [`clear_status_flags`] for a descriptor with other flags (`O_APPEND`) to keep.
fn clear_nonblock(file: &File) -> io::Result<()> {
    use rustix::fs::{fcntl_getfl, fcntl_setfl, OFlags};
    let flags = fcntl_getfl(file)?;
    fcntl_setfl(file, flags - OFlags::NONBLOCK)?;
    Ok(())
}

/// The rest of `file`, whose `fstat` said `len` bytes, and at most `max + 1` bytes (so a
/// caller sees that it was over `max`). One `read` when the file still has that size: a
/// regular file's short read is its end. Otherwise (it grew or shrank since) to the end.
/// A descriptor opened with `O_NONBLOCK` may be passed: the flag is cleared on `EAGAIN`.
pub fn read_sized(file: &mut File, len: u64, max: u64) -> io::Result<Vec<u8>> {
    let want = usize::try_from(len.min(max)).unwrap_or(0);
    let mut bytes = vec![0u8; want + 1];
    let got = loop {
        match file.read(&mut bytes) {
            Ok(got) => break got,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => clear_status_flags(file)?,
            Err(e) => return Err(e),
        }
    };
    bytes.truncate(got);
    if got as u64 == len && got <= want {
        return Ok(bytes);
    }
    // The slow path (the file changed size since its `fstat`) reads with no flag left.
    clear_status_flags(file)?;
    file.take(max.saturating_add(1).saturating_sub(got as u64))
        .read_to_end(&mut bytes)?;
    Ok(bytes)
}

/// The whole content of a regular file (see [`open_regular`]).
pub fn read_regular(path: &Path) -> io::Result<Vec<u8>> {
    read_regular_capped(path, u64::MAX)
}

/// [`read_regular`] as UTF-8 text.
pub fn read_regular_to_string(path: &Path) -> io::Result<String> {
    String::from_utf8(read_regular(path)?)
        .map_err(|e| io::Error::new(io::ErrorKind::InvalidData, e))
}

/// A file over the size cap its reader gives it (kind `FileTooLarge`; the message names the
/// cap). Nothing of it was kept in memory.
pub fn too_large(max: u64) -> io::Error {
    io::Error::new(
        io::ErrorKind::FileTooLarge,
        format!("larger than its size cap of {max} bytes"),
    )
}

/// The whole content of a regular file of at most `max` bytes; a larger one is
/// [`too_large`], found from its `fstat` or, when it grew since, after `max + 1` bytes.
pub fn read_regular_capped(path: &Path, max: u64) -> io::Result<Vec<u8>> {
    let (mut file, meta) = open_regular_nonblocking(path, 0)?;
    if meta.len() > max {
        return Err(too_large(max));
    }
    let bytes = read_sized(&mut file, meta.len(), max)?;
    if bytes.len() as u64 > max {
        return Err(too_large(max));
    }
    Ok(bytes)
}

/// [`read_regular_capped`] as UTF-8 text.
pub fn read_regular_capped_to_string(path: &Path, max: u64) -> io::Result<String> {
    String::from_utf8(read_regular_capped(path, max)?)
        .map_err(|e| io::Error::new(io::ErrorKind::InvalidData, e))
}

/// The sha256 (lowercase hex) of a regular file of at most `max` bytes, read in blocks: a
/// file's size never becomes memory. Over `max` it is [`too_large`].
pub fn sha256_regular(path: &Path, max: u64) -> io::Result<String> {
    use sha2::Digest;
    let (file, meta) = open_regular_with(path, 0)?;
    if meta.len() > max {
        return Err(too_large(max));
    }
    let mut hasher = sha2::Sha256::new();
    in_blocks(file.take(max.saturating_add(1)), max, |block| {
        hasher.update(block);
        Ok(())
    })?;
    Ok(hex(&hasher.finalize()))
}

/// Copies the regular file `from` over `to` atomically (see [`write_atomic_with_mtime`]),
/// in blocks: the file's size never becomes memory. Returns the sha256 of what was copied.
pub fn copy_regular_atomic(
    from: &Path,
    to: &Path,
    mode: u32,
    mtime: Option<SystemTime>,
) -> io::Result<String> {
    use sha2::Digest;
    let (file, _) = open_regular_with(from, 0)?;
    let mut hasher = sha2::Sha256::new();
    replace_atomic(to, mode, mtime, |tmp| {
        in_blocks(file, u64::MAX, |block| {
            hasher.update(block);
            tmp.write_all(block)
        })
    })?;
    Ok(hex(&hasher.finalize()))
}

/// Reads `reader` to its end in 64 KiB blocks, handing each to `each`; more than `max` bytes
/// in all is [`too_large`].
fn in_blocks(
    mut reader: impl Read,
    max: u64,
    mut each: impl FnMut(&[u8]) -> io::Result<()>,
) -> io::Result<()> {
    let mut block = vec![0u8; 64 * 1024];
    let mut total = 0u64;
    loop {
        let got = match reader.read(&mut block) {
            Ok(0) => return Ok(()),
            Ok(got) => got,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(e),
        };
        total += got as u64;
        if total > max {
            return Err(too_large(max));
        }
        each(&block[..got])?;
    }
}

/// Bytes as lowercase hex (how every hash is written).
pub fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

#[cfg(test)]
mod capped_tests {
    use super::*;

    #[test]
    fn capped_reads_and_hashes_refuse_what_is_over_the_cap() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("f");
        std::fs::write(&path, b"abc").unwrap();
        assert_eq!(read_regular_capped(&path, 3).unwrap(), b"abc");
        let err = read_regular_capped(&path, 2).unwrap_err();
        assert_eq!(err.kind(), io::ErrorKind::FileTooLarge);
        assert_eq!(err.to_string(), "larger than its size cap of 2 bytes");
        assert_eq!(
            sha256_regular(&path, 3).unwrap(),
            "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"
        );
        assert_eq!(
            sha256_regular(&path, 2).unwrap_err().kind(),
            io::ErrorKind::FileTooLarge
        );
        // Hashed in blocks: more than one block gives the hash of the whole.
        let big = vec![7u8; 200_000];
        std::fs::write(&path, &big).unwrap();
        use sha2::Digest;
        let whole = hex(&sha2::Sha256::digest(&big));
        assert_eq!(sha256_regular(&path, u64::MAX).unwrap(), whole);
        // A FIFO is refused, never waited on.
        let fifo = dir.path().join("fifo");
        rustix::fs::mknodat(
            rustix::fs::CWD,
            &fifo,
            rustix::fs::FileType::Fifo,
            rustix::fs::Mode::from_raw_mode(0o600),
            0,
        )
        .unwrap();
        assert!(is_not_regular(&sha256_regular(&fifo, 10).unwrap_err()));
        assert!(is_not_regular(&read_regular_capped(&fifo, 10).unwrap_err()));
    }
}

/// What happened to the bytes of a short append.
#[derive(Debug)]
pub enum Undo {
    /// Nothing reached the file.
    NothingWritten,
    /// The fragment was cut off again: the file is as it was.
    Truncated,
    /// The file changed after our fragment (another writer appended), so it was left alone:
    /// cutting it off would cut their record too.
    LeftChanged,
    /// The fragment could not be cut off.
    Failed(io::Error),
}

/// A failed [`append_undoable`].
#[derive(Debug)]
pub struct AppendError {
    /// Bytes of the record that reached the file (before any undo).
    pub written: u64,
    pub wanted: u64,
    /// The error of the open or of the write; `None` for a short count without an error.
    pub cause: Option<io::Error>,
    pub undo: Undo,
}

impl AppendError {
    /// The file is as it was before the append.
    pub fn is_clean(&self) -> bool {
        matches!(self.undo, Undo::NothingWritten | Undo::Truncated)
    }
}

impl fmt::Display for AppendError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match (&self.cause, self.written) {
            (Some(cause), 0) => write!(f, "{cause}")?,
            (Some(cause), n) => write!(f, "short append ({n} of {} bytes): {cause}", self.wanted)?,
            (None, n) => write!(f, "short append ({n} of {} bytes)", self.wanted)?,
        }
        match &self.undo {
            Undo::NothingWritten => write!(f, "; nothing was written"),
            Undo::Truncated => write!(f, "; the partial record was removed, the file is unchanged"),
            Undo::LeftChanged => write!(
                f,
                "; the file grew after the partial record, so it was left in place"
            ),
            Undo::Failed(e) => write!(f, "; the partial record could not be removed: {e}"),
        }
    }
}

impl std::error::Error for AppendError {}

/// Appends `record` (one whole line, newline included) to the regular file `path` with a
/// single `O_APPEND` write, so it lands whole after whatever another writer (Claude Code)
/// appended. With `expect_len`, nothing is written and `Ok(false)` returned when the file's
/// length is no longer that (someone wrote since it was read).
///
/// A short or failed write (a full disk, a file-size limit) is undone: the fragment is
/// truncated away when nothing was appended after it, so the next writer does not continue
/// a half line and corrupt its own record. Signals wait until the undo is done. Every append
/// dreamkit makes goes through here.
pub fn append_undoable(
    path: &Path,
    record: &[u8],
    expect_len: Option<u64>,
) -> Result<bool, AppendError> {
    let wanted = record.len() as u64;
    let failed = |cause: io::Error| AppendError {
        written: 0,
        wanted,
        cause: Some(cause),
        undo: Undo::NothingWritten,
    };
    let file = OpenOptions::new()
        .append(true)
        // A FIFO without a reader fails with ENXIO instead of blocking; a symlink is refused.
        .custom_flags(libc::O_NONBLOCK | libc::O_NOCTTY | libc::O_NOFOLLOW)
        .open(path)
        .map_err(|e| failed(unopenable_named(e, path, false)))?;
    let meta = file.metadata().map_err(failed)?;
    if !meta.is_file() {
        return Err(failed(not_regular(meta.file_type())));
    }
    clear_nonblock(&file).map_err(failed)?;
    if expect_len.is_some_and(|len| len != meta.len()) {
        return Ok(false);
    }
    let _hold = signals::hold();
    let (written, cause) = match (&file).write(record) {
        Ok(n) if n as u64 == wanted => return Ok(true),
        Ok(n) => (n as u64, None),
        Err(e) => (0, Some(e)),
    };
    let undo = if written == 0 {
        Undo::NothingWritten
    } else {
        // With O_APPEND the offset after the write is the end of our bytes, wherever another
        // writer's append put them.
        match (&file).stream_position() {
            Ok(end) => undo_fragment(&file, end - written.min(end), end),
            Err(e) => Undo::Failed(e),
        }
    };
    Err(AppendError {
        written,
        wanted,
        cause,
        undo,
    })
}

/// Cuts the file back to `start` when it still ends at `end` (our fragment is its last part).
fn undo_fragment(file: &File, start: u64, end: u64) -> Undo {
    match file.metadata() {
        Ok(meta) if meta.len() == end => match file.set_len(start) {
            Ok(()) => Undo::Truncated,
            Err(e) => Undo::Failed(e),
        },
        Ok(_) => Undo::LeftChanged,
        Err(e) => Undo::Failed(e),
    }
}

/// Replaces `path` with `bytes` atomically: a temporary file in the same directory, written,
/// synced and given `mode`, then renamed over the target. Readers see the old or the new
/// content, never a torn file; on any error the target is untouched.
pub fn write_atomic(path: &Path, bytes: &[u8], mode: u32) -> std::io::Result<()> {
    write_atomic_with_mtime(path, bytes, mode, None)
}

/// [`write_atomic`], with the new file's mtime set before it replaces the target (so no
/// reader ever sees the content with a different mtime).
pub fn write_atomic_with_mtime(
    path: &Path,
    bytes: &[u8],
    mode: u32,
    mtime: Option<SystemTime>,
) -> std::io::Result<()> {
    replace_atomic(path, mode, mtime, |tmp| tmp.write_all(bytes))
}

/// Replaces `path` with what `fill` writes into a temporary file beside it, given `mode`
/// (and `mtime`), synced, then renamed over the target: readers see the old or the new
/// content, never a torn file; on any error the target is untouched.
fn replace_atomic(
    path: &Path,
    mode: u32,
    mtime: Option<SystemTime>,
    fill: impl FnOnce(&mut File) -> io::Result<()>,
) -> io::Result<()> {
    let dir = path
        .parent()
        .filter(|p| !p.as_os_str().is_empty())
        .unwrap_or(Path::new("."));
    // A signal waits for the rename (or the failure), so no temporary file is left behind.
    let _hold = signals::hold();
    let mut tmp = temp_file_in(dir).map_err(without_temp_path)?;
    tmp.as_file()
        .set_permissions(std::fs::Permissions::from_mode(mode))?;
    // Through the file itself: `NamedTempFile`'s own errors name the temporary file.
    fill(tmp.as_file_mut())?;
    if let Some(mtime) = mtime {
        tmp.as_file().set_modified(mtime)?;
    }
    tmp.as_file().sync_all()?;
    tmp.persist(path).map_err(|e| e.error)?;
    Ok(())
}

/// Every temporary file dreamkit makes beside a file it replaces starts with this, followed
/// by the writer's PID: `.dreamkit-<pid>-<random>.tmp`. A process killed between the create
/// and the rename leaves one behind; the PID tells a sweep whether its writer is gone.
pub const TEMP_PREFIX: &str = ".dreamkit-";
/// The end of a temporary file's name.
pub const TEMP_SUFFIX: &str = ".tmp";

/// A new temporary file in `dir`, named `.dreamkit-<pid>-<random>.tmp` (mode 0600).
pub fn temp_file_in(dir: &Path) -> io::Result<tempfile::NamedTempFile> {
    tempfile::Builder::new()
        .prefix(&format!("{TEMP_PREFIX}{}-", std::process::id()))
        .suffix(TEMP_SUFFIX)
        .tempfile_in(dir)
}

/// For a file name of [`temp_file_in`]'s shape, the writer's PID; `Some(None)` for the
/// shape without one (written by dreamkit before temporary names carried the PID); `None`
/// for any other name.
pub fn temp_file_writer(name: &str) -> Option<Option<u32>> {
    let middle = name.strip_prefix(TEMP_PREFIX)?.strip_suffix(TEMP_SUFFIX)?;
    if middle.is_empty() || middle.contains('/') {
        return None;
    }
    Some(
        middle
            .split_once('-')
            .and_then(|(pid, _)| pid.parse::<u32>().ok())
            .filter(|pid| *pid > 0),
    )
}

/// `tempfile`'s error names the temporary file it could not make (`... at path "/d/.dreamkit-
/// x1.tmp"`), a name that means nothing to the user (the caller names the target): only the
/// system's reason is kept. Its error type is private; its text is "{reason} at path {path:?}".
fn without_temp_path(err: io::Error) -> io::Error {
    let text = err.to_string();
    match text.split_once(" at path ") {
        Some((reason, _)) => io::Error::new(err.kind(), reason.to_string()),
        None => err,
    }
}

#[cfg(test)]
#[allow(unsafe_code)] // the tests make FIFOs with mkfifo(3)
mod tests {
    use super::*;
    use std::os::unix::fs::MetadataExt;

    #[test]
    fn read_sized_clears_a_nonblocking_flag_on_eagain() {
        // A pipe stands for the file system that honours O_NONBLOCK: its first read finds
        // nothing yet (EAGAIN), and the data comes once the flag is cleared.
        let (reader, mut writer) = std::io::pipe().unwrap();
        let mut file = File::from(std::os::fd::OwnedFd::from(reader));
        rustix::fs::fcntl_setfl(&file, rustix::fs::OFlags::NONBLOCK).unwrap();
        let late = std::thread::spawn(move || {
            std::thread::sleep(std::time::Duration::from_millis(200));
            writer.write_all(b"hello").unwrap();
        });
        assert_eq!(read_sized(&mut file, 5, 100).unwrap(), b"hello");
        assert!(!rustix::fs::fcntl_getfl(&file)
            .unwrap()
            .contains(rustix::fs::OFlags::NONBLOCK));
        late.join().unwrap();
    }

    #[test]
    fn atomic_write_replaces_with_mode_and_leaves_no_temp() {
        let tmp = tempfile::tempdir().unwrap();
        let target = tmp.path().join("f.json");
        std::fs::write(&target, "old").unwrap();
        write_atomic(&target, b"new", 0o600).unwrap();
        assert_eq!(std::fs::read_to_string(&target).unwrap(), "new");
        assert_eq!(std::fs::metadata(&target).unwrap().mode() & 0o777, 0o600);
        let names: Vec<_> = std::fs::read_dir(tmp.path()).unwrap().collect();
        assert_eq!(names.len(), 1);
    }

    #[test]
    fn temporary_files_carry_the_writers_pid() {
        let tmp = tempfile::tempdir().unwrap();
        let file = temp_file_in(tmp.path()).unwrap();
        let name = file
            .path()
            .file_name()
            .unwrap()
            .to_str()
            .unwrap()
            .to_string();
        assert_eq!(temp_file_writer(&name), Some(Some(std::process::id())));
        assert_eq!(temp_file_writer(".dreamkit-Ab12Cd.tmp"), Some(None));
        assert_eq!(temp_file_writer(".dreamkit-0-x.tmp"), Some(None));
        for other in [
            "dreamkit-1-a.tmp",
            ".dreamkit-1-a.md",
            ".dreamkit-.tmp",
            "MEMORY.md",
        ] {
            assert_eq!(temp_file_writer(other), None, "{other}");
        }
    }

    #[test]
    fn a_failed_atomic_write_names_no_temporary_file() {
        let tmp = tempfile::tempdir().unwrap();
        let err = write_atomic(&tmp.path().join("gone/f.json"), b"new", 0o600).unwrap_err();
        assert_eq!(err.kind(), io::ErrorKind::NotFound);
        assert_eq!(err.to_string(), "No such file or directory (os error 2)");
    }

    #[test]
    fn atomic_write_can_set_the_mtime() {
        let tmp = tempfile::tempdir().unwrap();
        let target = tmp.path().join("lock");
        let at = SystemTime::UNIX_EPOCH + std::time::Duration::from_secs(1_600_000_000);
        write_atomic_with_mtime(&target, b"", 0o644, Some(at)).unwrap();
        let meta = std::fs::metadata(&target).unwrap();
        assert_eq!(meta.modified().unwrap(), at);
        assert_eq!(meta.len(), 0);
        assert_eq!(meta.mode() & 0o777, 0o644);
    }

    #[test]
    fn private_dirs_are_0700() {
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path().join("a/b/c");
        create_private_dir(&dir).unwrap();
        for d in [tmp.path().join("a"), tmp.path().join("a/b"), dir] {
            assert_eq!(
                std::fs::metadata(&d).unwrap().mode() & 0o777,
                0o700,
                "{d:?}"
            );
        }
    }
    #[test]
    fn open_regular_refuses_fifos_devices_and_directories_without_waiting() {
        let tmp = tempfile::tempdir().unwrap();
        let fifo = tmp.path().join("fifo");
        let c = std::ffi::CString::new(fifo.as_os_str().as_encoded_bytes()).unwrap();
        assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o600) }, 0);
        let zero = tmp.path().join("zero");
        std::os::unix::fs::symlink("/dev/zero", &zero).unwrap();
        let socket = tmp.path().join("socket");
        let _listener = std::os::unix::net::UnixListener::bind(&socket).unwrap();
        for (path, what) in [
            (&fifo, "a FIFO"),
            (&socket, "a socket"),
            (&zero, "a character device"),
            (&tmp.path().to_path_buf(), "a directory"),
        ] {
            let err = read_regular(path).unwrap_err();
            assert!(is_not_regular(&err), "{path:?}: {err}");
            assert_eq!(err.to_string(), format!("not a regular file ({what})"));
        }
        let file = tmp.path().join("f");
        std::fs::write(&file, "text").unwrap();
        std::os::unix::fs::symlink(&file, tmp.path().join("link")).unwrap();
        assert_eq!(read_regular(&tmp.path().join("link")).unwrap(), b"text");
        let loop_ = tmp.path().join("loop");
        std::os::unix::fs::symlink(&loop_, &loop_).unwrap();
        assert!(is_unresolvable(&read_regular(&loop_).unwrap_err()));
        assert!(is_unresolvable(
            &read_regular(&tmp.path().join("none")).unwrap_err()
        ));
    }

    #[test]
    fn append_writes_one_record_or_nothing_when_the_length_moved() {
        let tmp = tempfile::tempdir().unwrap();
        let path = tmp.path().join("t.jsonl");
        std::fs::write(&path, "a\n").unwrap();
        assert!(append_undoable(&path, b"b\n", Some(2)).unwrap());
        assert!(!append_undoable(&path, b"c\n", Some(2)).unwrap());
        assert!(append_undoable(&path, b"d\n", None).unwrap());
        assert_eq!(std::fs::read(&path).unwrap(), b"a\nb\nd\n");
        std::os::unix::fs::symlink(&path, tmp.path().join("link")).unwrap();
        let err = append_undoable(&tmp.path().join("link"), b"e\n", None).unwrap_err();
        assert!(err.is_clean() && err.written == 0, "{err}");
        assert_eq!(std::fs::read(&path).unwrap(), b"a\nb\nd\n");
    }

    #[test]
    fn a_fragment_is_cut_off_only_while_it_is_the_end_of_the_file() {
        let tmp = tempfile::tempdir().unwrap();
        let path = tmp.path().join("t.jsonl");
        std::fs::write(&path, "whole\nfrag").unwrap();
        let file = OpenOptions::new().append(true).open(&path).unwrap();
        // Nothing after the fragment: the file goes back to what it was.
        assert!(matches!(undo_fragment(&file, 6, 10), Undo::Truncated));
        assert_eq!(std::fs::read(&path).unwrap(), b"whole\n");
        // Another writer appended after the fragment: cutting would cut their record.
        std::fs::write(&path, "whole\nfrag{\"theirs\":1}\n").unwrap();
        assert!(matches!(undo_fragment(&file, 6, 10), Undo::LeftChanged));
        assert_eq!(
            std::fs::read(&path).unwrap(),
            b"whole\nfrag{\"theirs\":1}\n"
        );
    }

    #[test]
    fn append_errors_say_what_became_of_the_file() {
        let e = AppendError {
            written: 100,
            wanted: 250,
            cause: None,
            undo: Undo::Truncated,
        };
        assert!(e.is_clean());
        assert_eq!(
            e.to_string(),
            "short append (100 of 250 bytes); the partial record was removed, the file is unchanged"
        );
        let e = AppendError {
            undo: Undo::LeftChanged,
            ..e
        };
        assert!(!e.is_clean());
    }
}
